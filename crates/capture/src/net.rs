//! The arrival that counts: a datagram's arrival as the kernel stamped it,
//! on the evidence's clock.
//!
//! An input-paced loop's arrival taken when its receive returns is the time
//! the loop *read* the state; a state that waited in the socket while the
//! loop was behind looks on time. The kernel stamps each datagram when it
//! reaches the socket (`SO_TIMESTAMPNS`), on `CLOCK_REALTIME`; the evidence
//! is on `CLOCK_MONOTONIC`. [`recv_stamped`] reads both clocks beside each
//! receive (monotonic, realtime, monotonic) and converts the stamp with the
//! offset between them, so a step of the system clock corrupts at most the
//! states in the socket while it stepped (and shows as a read before its
//! arrival), never the arrivals after it. The two monotonic reads' spread
//! is the conversion's bound, recorded with each arrival
//! (docs/input-paced.md, The arrival that counts).
//!
//! ```no_run
//! use looptime_capture::net;
//! let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
//! net::enable_rx_timestamps(&sock).unwrap();
//! let mut buf = [0u8; 64];
//! let got = net::recv_stamped(&sock, &mut buf).unwrap();
//! // rec.begin_cycle(phase, got.release(Some(seq)));
//! let _ = got.release(None);
//! ```

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use crate::Release;

/// A kernel receive stamp on the host's monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelArrival {
    /// When the datagram reached the socket (host monotonic ns).
    pub arrival_ns: u64,
    /// The conversion's bound: the spread of the two monotonic reads
    /// around the realtime read (ns).
    pub bound_ns: u64,
}

/// One datagram received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Its length in bytes.
    pub len: usize,
    /// When the receive returned: when the loop read it (host monotonic ns).
    pub read_ns: u64,
    /// The kernel's stamp, when the socket gives one.
    pub arrival: Option<KernelArrival>,
}

impl Received {
    /// The arrival that counts: the kernel's stamp, else the read.
    pub fn arrival_ns(&self) -> u64 {
        self.arrival.map_or(self.read_ns, |a| a.arrival_ns)
    }

    /// The input release of the cycle it starts: its arrival and, with a
    /// kernel stamp, the read time and the conversion's bound beside it.
    pub fn release(&self, input_seq: Option<u64>) -> Release {
        let r = Release::input(self.arrival_ns(), input_seq);
        match self.arrival {
            Some(a) => r.with_read(self.read_ns, Some(a.bound_ns)),
            None => r,
        }
    }
}

/// Turn on the kernel's receive timestamps for `sock` (`SO_TIMESTAMPNS`).
///
/// # Errors
/// The kernel refused the option (not a socket, or no such option).
pub fn enable_rx_timestamps(sock: &impl AsRawFd) -> io::Result<()> {
    enable_rx_timestamps_fd(sock.as_raw_fd())
}

/// [`enable_rx_timestamps`] on a raw descriptor (the Python and C
/// bindings' sockets).
///
/// # Errors
/// As [`enable_rx_timestamps`].
pub fn enable_rx_timestamps_fd(fd: RawFd) -> io::Result<()> {
    crate::sys::enable_rx_timestamps(fd)?;
    wait_until_stamping();
    Ok(())
}

/// How long a probe datagram sits in its socket before it is read.
const PROBE_WAIT: Duration = Duration::from_micros(300);

/// Return once the kernel stamps datagrams on arrival, at most about
/// 60 ms. Linux turns receive timestamping on for the whole host in a
/// deferred work item when the first socket asks for it; until that has
/// run, a datagram is stamped when it is *read*, and its socket wait would
/// read 0. A loopback probe that waits [`PROBE_WAIT`] in its socket shows
/// when the stamps are live (its stamp then comes before its read by about
/// that much). On a host where another socket already asked, the first
/// probe shows it.
fn wait_until_stamping() {
    let probe = || -> io::Result<bool> {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let tx = std::net::UdpSocket::bind("127.0.0.1:0")?;
        crate::sys::enable_rx_timestamps(rx.as_raw_fd())?;
        rx.set_read_timeout(Some(Duration::from_millis(100)))?;
        for _ in 0..200 {
            tx.send_to(b"probe", rx.local_addr()?)?;
            std::thread::sleep(PROBE_WAIT);
            let got = recv_stamped(&rx, &mut [0u8; 8])?;
            if got.arrival.is_some_and(|a| {
                got.read_ns.saturating_sub(a.arrival_ns) >= PROBE_WAIT.as_nanos() as u64 / 2
            }) {
                return Ok(true);
            }
        }
        Ok(false)
    };
    // A probe that cannot run (no loopback) changes nothing: the stamps
    // come when the kernel turns them on.
    let _ = probe();
}

/// Receive one datagram from `sock` into `buf` (blocking as the socket
/// does: its timeout returns `WouldBlock`/`TimedOut`), with its read time
/// and, when timestamps are on, its kernel arrival on the monotonic clock.
/// No allocation.
///
/// # Errors
/// The receive's own error.
pub fn recv_stamped(sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Received> {
    recv_stamped_fd(sock.as_raw_fd(), buf, None)
}

/// [`recv_stamped`] on a raw descriptor; with `timeout`, first wait at
/// most that long for a datagram (`poll`), for a socket in non-blocking
/// mode (Python's, with a timeout set): none in time is a `TimedOut` error.
///
/// # Errors
/// The wait's or the receive's error; `TimedOut` when none came in time.
pub fn recv_stamped_fd(
    fd: RawFd,
    buf: &mut [u8],
    timeout: Option<Duration>,
) -> io::Result<Received> {
    if let Some(t) = timeout {
        let ms = t.as_millis().min(i32::MAX as u128) as i32;
        if !crate::sys::wait_readable(fd, ms)? {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no datagram within the timeout",
            ));
        }
    }
    let (len, stamp) = crate::sys::recv_timestamped(fd, buf)?;
    let m1 = crate::sys::monotonic_ns();
    let arrival = stamp.map(|rt| {
        let r = crate::sys::realtime_ns();
        let m2 = crate::sys::monotonic_ns();
        to_monotonic(rt, m1, r, m2)
    });
    Ok(Received {
        len,
        read_ns: m1,
        arrival,
    })
}

/// A realtime stamp `stamp_rt` on the monotonic clock, given a monotonic
/// read `m1`, a realtime read `r` and a monotonic read `m2` taken in that
/// order: `stamp_rt − r + (m1 + m2) / 2`, with the bound `m2 − m1` (the
/// realtime read happened somewhere between the two). Saturates at 0.
pub fn to_monotonic(stamp_rt: i64, m1: u64, r: u64, m2: u64) -> KernelArrival {
    let mid = (m1 as i128 + m2 as i128) / 2;
    let mono = stamp_rt as i128 - r as i128 + mid;
    KernelArrival {
        arrival_ns: mono.clamp(0, u64::MAX as i128) as u64,
        bound_ns: m2.saturating_sub(m1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_realtime_stamp_maps_onto_the_monotonic_clock_with_its_bound() {
        // Monotonic reads at 1,000 and 1,100 around a realtime read of
        // 5,000,000: the offset is 5,000,000 − 1,050, so a stamp 300 ns
        // before the realtime read is 1,050 − 300 = 750 on the monotonic
        // clock, within ±50 (the bound is the spread, 100).
        let a = to_monotonic(5_000_000 - 300, 1_000, 5_000_000, 1_100);
        assert_eq!(
            a,
            KernelArrival {
                arrival_ns: 750,
                bound_ns: 100
            }
        );
    }

    #[test]
    fn loopback_datagrams_carry_a_kernel_arrival_before_their_read() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(&rx).unwrap();
        tx.send_to(b"state", rx.local_addr().unwrap()).unwrap();
        // The state waits in the socket 20 ms before the loop reads it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut buf = [0u8; 16];
        let got = recv_stamped(&rx, &mut buf).unwrap();
        assert_eq!(&buf[..got.len], b"state");
        let a = got.arrival.expect("a kernel stamp on loopback");
        // Waited at least the 20 ms (less the bound), never negative: a
        // wall-clock step in these 20 ms would be the one way to fail.
        let waited = got.read_ns as i64 - a.arrival_ns as i64;
        assert!(waited + a.bound_ns as i64 >= 20_000_000, "{waited} ns");
        assert_eq!(got.arrival_ns(), a.arrival_ns);
        let r = got.release(Some(7));
        assert_eq!(
            (r.arrival_ns, r.read_ns, r.arrival_bound_ns),
            (Some(a.arrival_ns), Some(got.read_ns), Some(a.bound_ns))
        );
        // Without timestamps: the read is the arrival, no read time kept.
        let plain = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"s", plain.local_addr().unwrap()).unwrap();
        let got = recv_stamped(&plain, &mut buf).unwrap();
        assert_eq!((got.arrival, got.arrival_ns()), (None, got.read_ns));
        assert_eq!(got.release(None).read_ns, None);
    }
}
