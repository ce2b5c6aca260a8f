//! A robot peer over a real socket, for a loop paced by the robot
//! (`[robot] transport = "udp"`, docs/input-paced.md). The peer runs
//! in-process on a thread of its own, on loopback only: it publishes a
//! state every period (its counter, its millisecond clock and its command
//! success rate, computed as the robot computes it: the share of the last
//! 100 states whose command arrived before the next state was due), and,
//! when configured, its transmit path stalls for a few milliseconds and
//! then delivers the held states in a burst. It sends a bounded number of
//! states and stops by itself (or at the stop flag).
//!
//! The loop's side is [`Link`]: a blocking receive with a timeout, and the
//! command that answers a state. Nothing here knows the control loop.

use looptime_capture::net;
use std::collections::VecDeque;
use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use looptime_capture::{Recorder, StageId};

/// The robot's window for its success rate: the last 100 states.
pub const SUCCESS_WINDOW: usize = 100;

/// One state as the robot sends it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct State {
    /// The robot's counter, from 1.
    pub seq: u64,
    /// The robot's clock when it generated the state, ns.
    pub robot_ns: u64,
    /// The share of the last [`SUCCESS_WINDOW`] states answered in time
    /// (0 before any state could be answered).
    pub success_rate: f64,
}

impl State {
    const BYTES: usize = 24;

    fn encode(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.robot_ns.to_le_bytes());
        b[16..].copy_from_slice(&self.success_rate.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<State> {
        if b.len() != Self::BYTES {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(State {
            seq: word(0),
            robot_ns: word(8),
            success_rate: f64::from_bits(word(16)),
        })
    }
}

/// The end-of-stream datagram `looptime robot-peer` sends after its last
/// state: these 8 bytes, then the counter of its last state (u64,
/// little-endian), 16 bytes in all (docs/input-paced.md). A client stops
/// at it instead of waiting for a timeout; it is not a bad datagram.
pub const END_OF_STREAM: [u8; 8] = *b"LTEND\0\0\0";

/// What one receive got.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Received {
    /// A state.
    State(State),
    /// The robot's end of stream: it sent its last state, this counter.
    End {
        /// The counter of the last state sent.
        last_seq: u64,
    },
    /// A datagram that is neither a state nor the end of stream (its
    /// length): counted and skipped.
    Bad(usize),
    /// Nothing within the timeout, or the robot's socket is gone.
    Nothing,
}

impl Received {
    fn decode(b: &[u8]) -> Received {
        if let Some(s) = State::decode(b) {
            return Received::State(s);
        }
        if b.len() == 16 && b[..8] == END_OF_STREAM {
            let last_seq = u64::from_le_bytes(b[8..16].try_into().unwrap_or([0; 8]));
            return Received::End { last_seq };
        }
        Received::Bad(b.len())
    }
}

/// How the peer behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeerSpec {
    /// Nominal period, ns.
    pub period_ns: u64,
    /// States to send before it stops.
    pub states: u64,
    /// The transmit path stalls every this many ns (0: never)…
    pub stall_every_ns: u64,
    /// …for this long, then sends the held states back to back.
    pub stall_ns: u64,
}

/// What the peer did, returned when its thread ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerReport {
    /// States sent.
    pub sent: u64,
    /// States held by a stall and sent in a burst.
    pub held: u64,
    /// States answered before the next one was due.
    pub answered_in_time: u64,
}

/// The loop's end of the link: receives states, sends commands.
#[derive(Debug)]
pub struct Link {
    sock: UdpSocket,
    /// The kernel stamps each datagram on arrival (`SO_TIMESTAMPNS`).
    stamped: bool,
}

impl Link {
    /// Block until a datagram arrives, at most `timeout`: a state, the
    /// end of stream, or a bad datagram; [`Received::Nothing`] when none
    /// came in that time, or the robot's socket is gone (a command sent
    /// after it closed comes back refused).
    ///
    /// With a datagram, when it arrived: the kernel's stamp on the
    /// monotonic clock, beside the time the receive returned
    /// ([`looptime_capture::net`]).
    ///
    /// # Errors
    /// A socket error other than the timeout.
    pub fn receive(&self) -> io::Result<(Received, Option<net::Received>)> {
        let mut buf = [0u8; 64];
        match net::recv_stamped(&self.sock, &mut buf) {
            Ok(got) => Ok((Received::decode(&buf[..got.len]), Some(got))),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::ConnectionRefused
                ) =>
            {
                Ok((Received::Nothing, None))
            }
            Err(e) => Err(e),
        }
    }

    /// Whether the kernel stamps the states' arrivals; without, an
    /// arrival is when the receive returned.
    pub fn kernel_stamps(&self) -> bool {
        self.stamped
    }

    /// Answer state `seq` with a command (its counter, as FCI's
    /// `message_id`). A full socket buffer drops the command, as the
    /// network would: the robot counts it missing.
    pub fn answer(&self, seq: u64) {
        let _ = self.sock.send(&seq.to_le_bytes());
    }
}

/// A recorder of the peer's own send times: one `stage` span per state
/// sent (implicit cycles), so the stalls show in the peer's evidence too.
pub type PeerRecorder = (Recorder, StageId);

/// The peer's thread.
#[derive(Debug)]
pub struct Peer {
    handle: Option<JoinHandle<(PeerReport, Option<PeerRecorder>)>>,
    finished: Arc<AtomicBool>,
}

impl Peer {
    /// Whether the peer has sent its last state: in-process, it tells the
    /// loop so without a wire message, and a loop that then waits in
    /// vain lost the rest of the stream (it did not see the robot stop).
    pub fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Wait for the peer to end; what it did, and its recorder back.
    pub fn join(mut self) -> (PeerReport, Option<PeerRecorder>) {
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

/// Start the peer on loopback: both sockets bound to 127.0.0.1 on ports
/// the system picks, connected to each other; the loop's receive times
/// out after `timeout`. With `recorder`, the peer records each send.
///
/// # Errors
/// The sockets or the thread could not be made.
pub fn start(
    spec: PeerSpec,
    timeout: Duration,
    stop: Arc<AtomicBool>,
    mut recorder: Option<PeerRecorder>,
) -> io::Result<(Link, Peer)> {
    let robot = UdpSocket::bind("127.0.0.1:0")?;
    let client = UdpSocket::bind("127.0.0.1:0")?;
    robot.connect(client.local_addr()?)?;
    client.connect(robot.local_addr()?)?;
    client.set_read_timeout(Some(timeout))?;
    // Where the kernel refuses, arrivals are read times (the loop says so).
    let stamped = net::enable_rx_timestamps(&client).is_ok();
    robot.set_nonblocking(true)?;
    let finished = Arc::new(AtomicBool::new(false));
    let done = finished.clone();
    let handle = std::thread::Builder::new()
        .name("robot_peer".into())
        .spawn(move || {
            let report = run_peer(&robot, spec, &stop, recorder.as_mut(), Some(&done));
            (report, recorder)
        })?;
    Ok((
        Link {
            sock: client,
            stamped,
        },
        Peer {
            handle: Some(handle),
            finished,
        },
    ))
}

/// A peer for a client in another process (`looptime robot-peer`): the
/// socket `sock` (bound on loopback) waits up to `wait` for the client's
/// first datagram, answers to its sender from then on, and runs `spec`.
///
/// # Errors
/// No client within `wait`, or a socket error.
pub fn serve_client(
    sock: &UdpSocket,
    spec: PeerSpec,
    wait: Duration,
    stop: &AtomicBool,
) -> io::Result<PeerReport> {
    let client = await_hello(sock, wait)?;
    sock.connect(client)?;
    sock.set_nonblocking(true)?;
    Ok(run_peer(sock, spec, stop, None, None))
}

/// The client's hello: its first datagram of exactly 8 bytes
/// (docs/input-paced.md); a datagram of any other length (an empty probe,
/// a stray packet) is not a hello and is skipped, so that the real client
/// still gets the states. Waits up to `wait` in all.
fn await_hello(sock: &UdpSocket, wait: Duration) -> io::Result<std::net::SocketAddr> {
    let deadline = std::time::Instant::now() + wait;
    let mut buf = [0u8; 64];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no client sent its 8-byte hello within {} s",
                    wait.as_secs_f64()
                ),
            ));
        }
        sock.set_read_timeout(Some(left))?;
        match sock.recv_from(&mut buf) {
            Ok((HELLO_BYTES, client)) => return Ok(client),
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("waiting for the client's hello: {e}"),
                ))
            }
        }
    }
}

/// A client's hello, in bytes.
const HELLO_BYTES: usize = 8;

/// The robot's success window: whether each of the last 100 states was
/// answered before the next one was due.
struct Window {
    last: VecDeque<bool>,
    in_time: u64,
}

impl Window {
    fn push(&mut self, answered: bool) {
        if self.last.len() == SUCCESS_WINDOW {
            self.last.pop_front();
        }
        self.last.push_back(answered);
        self.in_time += answered as u64;
    }

    fn rate(&self) -> f64 {
        if self.last.is_empty() {
            return 0.0;
        }
        self.last.iter().filter(|&&a| a).count() as f64 / self.last.len() as f64
    }
}

/// Whether the transmit path is stalled at `t` ns after the start.
fn stalled(spec: &PeerSpec, t: u64) -> bool {
    spec.stall_every_ns > 0
        && spec.stall_ns > 0
        && t % spec.stall_every_ns >= spec.stall_every_ns - spec.stall_ns
}

/// Send `spec`'s states; then tell the loop the stream ended: through
/// `finished` when the loop is in this process (no wire message), else
/// with the [`END_OF_STREAM`] datagram.
fn run_peer(
    sock: &UdpSocket,
    spec: PeerSpec,
    stop: &AtomicBool,
    mut rec: Option<&mut PeerRecorder>,
    finished: Option<&AtomicBool>,
) -> PeerReport {
    let mut report = PeerReport::default();
    let mut window = Window {
        last: VecDeque::with_capacity(SUCCESS_WINDOW),
        in_time: 0,
    };
    let mut held: Vec<State> = Vec::new();
    let t0 = looptime_capture::clock::monotonic_ns() + spec.period_ns;
    for k in 1..=spec.states {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let due = t0 + (k - 1) * spec.period_ns;
        sleep_until(due);
        if k > 1 {
            // State k−1 was answered in time if its command is here now.
            window.push(drain_commands(sock, k - 1));
        }
        let state = State {
            seq: k,
            robot_ns: (k - 1) * spec.period_ns,
            success_rate: window.rate(),
        };
        held.push(state);
        if stalled(&spec, (k - 1) * spec.period_ns) {
            report.held += 1;
            continue;
        }
        report.sent += send_all(sock, &mut held, rec.as_deref_mut());
    }
    report.sent += send_all(sock, &mut held, rec);
    let last_seq = report.sent;
    match finished {
        Some(f) => f.store(true, Ordering::Release),
        None => {
            let mut end = [0u8; 16];
            end[..8].copy_from_slice(&END_OF_STREAM);
            end[8..].copy_from_slice(&last_seq.to_le_bytes());
            let _ = sock.send(&end);
        }
    }
    // Keep the socket open a while for the last answers: a command sent to
    // a closed socket comes back refused, and Linux reports that error to
    // the loop's next receive before the states still queued for it.
    let last = t0 + spec.states.saturating_sub(1) * spec.period_ns;
    sleep_until(last + LINGER_NS.max(spec.period_ns));
    window.push(drain_commands(sock, spec.states));
    report.answered_in_time = window.in_time;
    report
}

/// How long the peer keeps its socket after its last state.
const LINGER_NS: u64 = 50_000_000;

/// Send the held states in order, each inside a span of the peer's
/// recorder when it has one; how many were sent.
fn send_all(sock: &UdpSocket, held: &mut Vec<State>, rec: Option<&mut PeerRecorder>) -> u64 {
    let n = held.len() as u64;
    match rec {
        Some((r, stage)) => {
            for s in held.drain(..) {
                let _span = r.span(*stage);
                let _ = sock.send(&s.encode());
            }
        }
        None => {
            for s in held.drain(..) {
                let _ = sock.send(&s.encode());
            }
        }
    }
    n
}

/// Read every command waiting; whether one answered state `seq`.
fn drain_commands(sock: &UdpSocket, seq: u64) -> bool {
    let mut found = false;
    let mut buf = [0u8; 16];
    while let Ok(n) = sock.recv(&mut buf) {
        if n == 8 && u64::from_le_bytes(buf[..8].try_into().unwrap_or([0; 8])) == seq {
            found = true;
        }
    }
    found
}

fn sleep_until(t_ns: u64) {
    let now = looptime_capture::clock::monotonic_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

#[cfg(test)]
#[path = "robot_tests.rs"]
mod tests;
