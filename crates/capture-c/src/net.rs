//! The arrival that counts, from C: `looptime_enable_rx_timestamps` and
//! `looptime_recv_stamped` give a datagram's kernel receive stamp on the
//! evidence's clock beside the time the loop read it, and
//! `looptime_cycle_begin_received` begins the cycle it releases with both
//! (`looptime_capture::net`, docs/input-paced.md). The receive allocates
//! nothing.

use std::ffi::c_void;
use std::io;

use looptime_capture::Release;

use crate::consts::*;
use crate::error::{fail, guard, unknown_id};
use crate::recorder::{live, CRecorder};

/// One datagram received by `looptime_recv_stamped`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Received {
    /// Its length in bytes (at most the buffer's capacity: a longer
    /// datagram is cut, as `recv` cuts it).
    pub len: u64,
    /// The arrival that counts: the kernel's receive stamp on
    /// `CLOCK_MONOTONIC` (ns) when `kernel`, else `read_ns`.
    pub arrival_ns: u64,
    /// When the receive returned (`CLOCK_MONOTONIC` ns).
    pub read_ns: u64,
    /// The stamp's conversion bound (ns; 0 without a kernel stamp).
    pub bound_ns: u64,
    /// The kernel stamped it (`looptime_enable_rx_timestamps` was called on
    /// the socket).
    pub kernel: bool,
}

abi_layout!(Received, size 40,
    len @ 0, arrival_ns @ 8, read_ns @ 16, bound_ns @ 24, kernel @ 32);

/// Ask the kernel to stamp each datagram socket `fd` receives with its
/// arrival (`SO_TIMESTAMPNS`).
#[no_mangle]
pub extern "C" fn looptime_enable_rx_timestamps(fd: i32) -> i32 {
    guard("looptime_enable_rx_timestamps", || {
        looptime_capture::net::enable_rx_timestamps_fd(fd).map_err(|e| {
            fail(
                LOOPTIME_ERR_IO,
                format!("SO_TIMESTAMPNS on descriptor {fd} refused: {e}"),
            )
        })?;
        Ok(LOOPTIME_OK)
    })
}

/// Receive one datagram from socket `fd` into `buf` (`cap` bytes), blocking
/// as the socket does, and write what came and when to `*out`.
/// `LOOPTIME_WARN_TIMEOUT` (with `*out` zeroed) when none came within the
/// socket's timeout (`SO_RCVTIMEO`), or none was waiting on a non-blocking
/// socket; `LOOPTIME_ERR_IO` on another receive error.
///
/// # Safety
/// `buf` is NULL or writable for `cap` bytes; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_recv_stamped(
    fd: i32,
    buf: *mut c_void,
    cap: usize,
    out: *mut Received,
) -> i32 {
    guard("looptime_recv_stamped", || {
        if buf.is_null() || out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "buf or out is NULL"));
        }
        // SAFETY: non-NULL, writable for `cap` bytes by the caller's contract.
        let slice = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) };
        let got = match looptime_capture::net::recv_stamped_fd(fd, slice, None) {
            Ok(got) => got,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                // SAFETY: non-NULL and writable by the caller's contract.
                unsafe { out.write(Received::default()) };
                return Ok(LOOPTIME_WARN_TIMEOUT);
            }
            Err(e) => {
                return Err(fail(
                    LOOPTIME_ERR_IO,
                    format!("receive on descriptor {fd}: {e}"),
                ))
            }
        };
        let r = Received {
            len: got.len as u64,
            arrival_ns: got.arrival_ns(),
            read_ns: got.read_ns,
            bound_ns: got.arrival.map_or(0, |a| a.bound_ns),
            kernel: got.arrival.is_some(),
        };
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { out.write(r) };
        Ok(LOOPTIME_OK)
    })
}

/// Begin a cycle in `phase` released by the datagram `got` (from
/// `looptime_recv_stamped`) carrying the counter `seq` (`LOOPTIME_NO_SEQ`
/// without one): its arrival, and with a kernel stamp the read time and
/// the bound beside it. Otherwise as `looptime_cycle_begin_input`;
/// allocation-free.
///
/// # Safety
/// `r` is NULL or a live recorder; `got` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn looptime_cycle_begin_received(
    r: *mut CRecorder,
    phase: u32,
    got: *const Received,
    seq: u64,
) -> i32 {
    guard("looptime_cycle_begin_received", || {
        // SAFETY: the caller's contract.
        let h = unsafe { live(r) }?;
        // SAFETY: the caller's contract.
        let Some(g) = (unsafe { got.as_ref() }) else {
            return Err(fail(LOOPTIME_ERR_NULL, "got is NULL"));
        };
        let p = *h
            .phases
            .get(phase as usize)
            .ok_or_else(|| unknown_id("phase", phase, h.phases.len()))?;
        let seq = (seq != LOOPTIME_NO_SEQ).then_some(seq);
        let mut release = Release::input(g.arrival_ns, seq);
        if g.kernel {
            release = release.with_read(g.read_ns, Some(g.bound_ns));
        }
        h.rec.begin_cycle(p, release);
        Ok(LOOPTIME_OK)
    })
}
