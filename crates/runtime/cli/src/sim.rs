//! The simulated robot world the control loop drives: configurable stage
//! costs, a background camera reader, a viewer transport, a policy worker
//! and a robot with its own millisecond counter and command acceptance.
//!
//! Nothing the control thread calls here allocates, locks or prints: the
//! mailboxes are seqlocks with a bounded retry (a reader that finds the
//! writer mid-update keeps its previous snapshot instead of waiting), and
//! the policy queues are bounded lock-free queues with non-blocking push.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_queue::ArrayQueue;
use looptime_capture::{Recorder, Release, StageId};

use crate::config::{Cost, CostKind, PolicySection};

/// A small, fast, seeded PRNG (SplitMix64); deterministic per seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Draw a duration in nanoseconds from `cost`.
pub fn sample_ns(cost: &Cost, rng: &mut Rng) -> u64 {
    let jitter = (rng.unit() * 2.0 - 1.0) * cost.jitter_us;
    let spike = if cost.spike_probability > 0.0 && rng.unit() < cost.spike_probability {
        cost.spike_us
    } else {
        0.0
    };
    ((cost.mean_us + jitter + spike).max(0.0) * 1e3) as u64
}

/// Spend `cost` on the calling thread: busy costs spin, sleep costs block.
/// Returns the nanoseconds drawn.
pub fn spend(cost: &Cost, rng: &mut Rng) -> u64 {
    let ns = sample_ns(cost, rng);
    spend_ns(ns, cost.kind);
    ns
}

/// Spend `ns` nanoseconds of the given kind.
pub fn spend_ns(ns: u64, kind: CostKind) {
    if ns == 0 {
        return;
    }
    let until = looptime_capture::clock::monotonic_ns() + ns;
    match kind {
        CostKind::Sleep => looptime_runtime::sys::sleep_until_monotonic_ns(until),
        CostKind::Busy => {
            let mut x = 0u64;
            while looptime_capture::clock::monotonic_ns() < until {
                // Some arithmetic so the busy loop is real work.
                for i in 0..64u64 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
                }
                std::hint::black_box(x);
            }
        }
    }
}

/// A single-writer snapshot of two words, read without locks.
#[derive(Debug, Default)]
pub struct Mailbox {
    version: AtomicU64,
    a: AtomicU64,
    b: AtomicU64,
}

/// Reader retries before giving up and keeping the previous snapshot.
pub const MAILBOX_READ_RETRIES: u32 = 64;

impl Mailbox {
    /// Publish `(a, b)` (single writer only).
    pub fn publish(&self, a: u64, b: u64) {
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.a.store(a, Ordering::Relaxed);
        self.b.store(b, Ordering::Relaxed);
        self.version.store(v.wrapping_add(2), Ordering::Release);
    }

    /// A consistent `(a, b)`, or `None` when the writer was mid-update for
    /// every one of the bounded retries.
    pub fn read(&self) -> Option<(u64, u64)> {
        for _ in 0..MAILBOX_READ_RETRIES {
            let v1 = self.version.load(Ordering::Acquire);
            if v1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let a = self.a.load(Ordering::Relaxed);
            let b = self.b.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.version.load(Ordering::Relaxed) == v1 {
                return Some((a, b));
            }
        }
        None
    }
}

/// A background thread with a stop flag. It hands back what its body
/// returns (its recorder, when it records) at [`stop`](Worker::stop).
#[derive(Debug)]
pub struct Worker<T: Send + 'static = ()> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> Worker<T> {
    fn spawn(
        name: &str,
        f: impl FnOnce(Arc<AtomicBool>) -> T + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || f(s))?;
        Ok(Self {
            stop,
            handle: Some(handle),
        })
    }

    /// Signal the thread and join it; `None` if it panicked.
    pub fn stop(mut self) -> Option<T> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok())
    }
}

impl<T: Send + 'static> Drop for Worker<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A background thread's recorder and the stages it records: the first
/// around its work, the second (when there is one) around its hand-over to
/// the control thread.
#[derive(Debug)]
pub struct ThreadRecorder {
    /// The recorder, from the episode's registry.
    pub rec: Recorder,
    /// The thread's work (`camera_grab`, `viewer_receive`, `policy_infer`).
    pub work: StageId,
    /// Its hand-over (`camera_publish`, `viewer_publish`), when it has one.
    pub publish: Option<StageId>,
    /// The data source it publishes (`camera`, `policy`), recorded with
    /// `produced` at each hand-over.
    pub source: Option<looptime_capture::SourceId>,
}

impl ThreadRecorder {
    /// One iteration of a thread's poll loop as a cycle: `work` in a span,
    /// then `publish` in a span (skipped without a stage). Implicit-cycle
    /// recorders (the policy worker) get a cycle from the work span itself.
    /// `publish` returns the `(seq, stamp)` of the sample it handed over,
    /// recorded as produced when the thread has a source.
    fn iteration<W: FnOnce(), P: FnOnce() -> Option<(u64, u64)>>(
        this: &mut Option<Self>,
        work: W,
        publish: P,
    ) {
        let Some(t) = this else {
            work();
            publish();
            return;
        };
        let explicit = !t.rec.implicit_cycles();
        if explicit {
            let p = t.rec.default_phase();
            t.rec.begin_cycle(p, Release::NONE);
        }
        let source = t.source;
        let mut publish = Some(publish);
        {
            let mut s = t.rec.span(t.work);
            work();
            if !explicit {
                // An implicit cycle ends with its work span: hand over
                // inside it, so the publication is in the cycle.
                if let (Some(src), Some(Some((seq, stamp)))) = (source, publish.take().map(|f| f()))
                {
                    s.produced(src, seq, stamp);
                }
            }
        }
        if let Some(f) = publish {
            let out = match t.publish {
                Some(stage) => {
                    let _s = t.rec.span(stage);
                    f()
                }
                None => f(),
            };
            if let (Some(src), Some((seq, stamp))) = (source, out) {
                t.rec.produced(src, seq, stamp);
            }
        }
        if explicit {
            t.rec.end_cycle();
        }
    }
}

/// Start the background camera reader: reads a frame (spending `cost`) at
/// most `rate_hz` times a second and publishes `(frame_seq, capture_ns)`.
/// With a recorder, each frame is a cycle with `camera_grab` and
/// `camera_publish` spans.
///
/// # Errors
/// When the thread cannot be spawned.
pub fn spawn_camera_reader(
    mailbox: Arc<Mailbox>,
    cost: Cost,
    rate_hz: f64,
    seed: u64,
    mut rec: Option<ThreadRecorder>,
) -> std::io::Result<Worker<Option<ThreadRecorder>>> {
    Worker::spawn("camera-reader", move |stop| {
        let mut rng = Rng::new(seed);
        let period = (1e9 / rate_hz) as u64;
        let mut next = looptime_capture::clock::monotonic_ns();
        let mut seq = 0u64;
        while !stop.load(Ordering::Relaxed) {
            ThreadRecorder::iteration(
                &mut rec,
                || {
                    spend(&cost, &mut rng);
                },
                || {
                    seq += 1;
                    let captured = looptime_capture::clock::monotonic_ns();
                    mailbox.publish(seq, captured);
                    Some((seq, captured))
                },
            );
            next += period;
            let now = looptime_capture::clock::monotonic_ns();
            if next < now {
                next = now;
            }
            looptime_runtime::sys::sleep_until_monotonic_ns(next);
        }
        rec
    })
}

/// Start the viewer transport: owns the (simulated) connection and
/// publishes `(command_seq, received_ns)` at about 30 Hz. With a recorder,
/// each iteration is a cycle with `viewer_receive` and `viewer_publish`
/// spans.
///
/// # Errors
/// When the thread cannot be spawned.
pub fn spawn_viewer_transport(
    mailbox: Arc<Mailbox>,
    mut rec: Option<ThreadRecorder>,
) -> std::io::Result<Worker<Option<ThreadRecorder>>> {
    Worker::spawn("viewer-transport", move |stop| {
        let mut seq = 0u64;
        while !stop.load(Ordering::Relaxed) {
            ThreadRecorder::iteration(
                &mut rec,
                || {
                    // Decoding the viewer's message: a few µs of work.
                    spend_ns(20_000, CostKind::Busy);
                },
                || {
                    seq += 1;
                    mailbox.publish(seq, looptime_capture::clock::monotonic_ns());
                    None
                },
            );
            std::thread::sleep(std::time::Duration::from_millis(33));
        }
        rec
    })
}

/// The policy worker's bounded queues.
#[derive(Debug)]
pub struct PolicyQueues {
    /// Observations from the control thread: (cycle index, when taken).
    pub observations: ArrayQueue<(u64, u64)>,
    /// Actions from the worker: the observation they answer, and its time
    /// (an action is as old as the observation it was computed from).
    pub actions: ArrayQueue<(u64, u64)>,
}

/// Start the policy worker: pops observations, spends `worker_cost`, pushes
/// actions (dropping the oldest action if the queue is full). With a
/// recorder (implicit cycles), each inference is a `policy_infer` span.
///
/// # Errors
/// When the thread cannot be spawned.
#[allow(clippy::type_complexity)]
pub fn spawn_policy_worker(
    cfg: &PolicySection,
    seed: u64,
    mut rec: Option<ThreadRecorder>,
) -> std::io::Result<(Arc<PolicyQueues>, Worker<Option<ThreadRecorder>>)> {
    let cap = cfg.queue_capacity as usize;
    let queues = Arc::new(PolicyQueues {
        observations: ArrayQueue::new(cap),
        actions: ArrayQueue::new(cap),
    });
    let q = queues.clone();
    let cost = cfg.worker_cost;
    let worker = Worker::spawn("policy-worker", move |stop| {
        let mut rng = Rng::new(seed);
        while !stop.load(Ordering::Relaxed) {
            match q.observations.pop() {
                Some(obs) => ThreadRecorder::iteration(
                    &mut rec,
                    || {
                        spend(&cost, &mut rng);
                    },
                    || {
                        q.actions.force_push(obs);
                        Some(obs)
                    },
                ),
                None => std::thread::sleep(std::time::Duration::from_micros(200)),
            }
        }
        rec
    })?;
    Ok((queues, worker))
}

/// The robot's state link, as the control loop sees it: it requests the
/// state once a cycle, each reply arrives `delay ± jitter` later, and a
/// cycle uses the newest state whose reply has arrived. A state's stamp is
/// its *request* time, so a late reply cannot make an old state look fresh.
/// Fixed storage: the last [`StateLink::PENDING`] requests.
#[derive(Debug)]
pub struct StateLink {
    pending: [(u64, u64, u64); StateLink::PENDING],
    next: u64,
    newest: Option<(u64, u64)>,
    delay_ns: f64,
    jitter_ns: f64,
    rng: Rng,
}

impl StateLink {
    /// Requests kept in flight; an older one is forgotten (its reply lost).
    pub const PENDING: usize = 8;

    /// A link whose replies take `delay_us ± jitter_us`.
    pub fn new(delay_us: f64, jitter_us: f64, seed: u64) -> Self {
        StateLink {
            pending: [(0, 0, u64::MAX); Self::PENDING],
            next: 1,
            newest: None,
            delay_ns: delay_us * 1e3,
            jitter_ns: jitter_us * 1e3,
            rng: Rng::new(seed),
        }
    }

    /// Request the state at `now_ns` (host monotonic).
    pub fn request(&mut self, now_ns: u64) {
        let d = (self.delay_ns + (self.rng.unit() * 2.0 - 1.0) * self.jitter_ns).max(0.0);
        let slot = (self.next as usize) % Self::PENDING;
        self.pending[slot] = (self.next, now_ns, now_ns + d as u64);
        self.next += 1;
    }

    /// The newest state whose reply has arrived by `now_ns`: `(seq,
    /// request time)`, or `None` before the first reply.
    pub fn latest(&mut self, now_ns: u64) -> Option<(u64, u64)> {
        for &(seq, req, arrive) in &self.pending {
            if arrive <= now_ns && self.newest.is_none_or(|(s, _)| seq > s) {
                self.newest = Some((seq, req));
            }
        }
        self.newest
    }
}

/// The simulated robot: its own millisecond counter (it booted before the
/// run), a state published every control period on its own clock, and a
/// command acceptance rate.
#[derive(Debug)]
pub struct SimRobot {
    start_ns: u64,
    boot_offset_ms: i64,
    state_period_ns: u64,
    acceptance: f64,
    rng: Rng,
    sent: u64,
    accepted: u64,
}

impl SimRobot {
    /// A robot whose clock starts at `start_ns` (robot time), publishing a
    /// state every `state_period_ns`.
    pub fn new(start_ns: u64, state_period_ns: u64, acceptance: f64, seed: u64) -> Self {
        Self {
            start_ns,
            boot_offset_ms: 1_000_000 + (seed % 1000) as i64,
            state_period_ns: state_period_ns.max(1),
            acceptance,
            rng: Rng::new(seed),
            sent: 0,
            accepted: 0,
        }
    }

    /// The robot's own millisecond counter at robot time `now_ns`.
    pub fn time_ms(&self, now_ns: u64) -> i64 {
        self.boot_offset_ms + (now_ns.saturating_sub(self.start_ns) / 1_000_000) as i64
    }

    /// Sequence number of the latest state at robot time `now_ns`.
    pub fn state_seq(&self, now_ns: u64) -> i64 {
        (now_ns.saturating_sub(self.start_ns) / self.state_period_ns) as i64
    }

    /// Send a command; returns whether the robot accepted it.
    pub fn send(&mut self) -> bool {
        self.sent += 1;
        let ok = self.rng.unit() < self.acceptance;
        self.accepted += ok as u64;
        ok
    }

    /// Accepted / sent so far (1 before any command).
    pub fn success_rate(&self) -> f64 {
        if self.sent == 0 {
            1.0
        } else {
            self.accepted as f64 / self.sent as f64
        }
    }

    /// Commands sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailbox_reads_what_was_published() {
        let m = Mailbox::default();
        assert_eq!(m.read(), Some((0, 0)));
        m.publish(7, 42);
        assert_eq!(m.read(), Some((7, 42)));
    }

    #[test]
    fn mailbox_mid_update_gives_up_instead_of_blocking() {
        let m = Mailbox::default();
        m.version.store(1, Ordering::Relaxed); // a writer stuck mid-update
        assert_eq!(m.read(), None);
    }

    #[test]
    fn costs_follow_their_distribution() {
        let mut rng = Rng::new(3);
        let c = Cost {
            mean_us: 100.0,
            jitter_us: 10.0,
            spike_probability: 0.1,
            spike_us: 1000.0,
            kind: CostKind::Busy,
        };
        let draws: Vec<u64> = (0..10_000).map(|_| sample_ns(&c, &mut rng)).collect();
        let spikes = draws.iter().filter(|&&d| d > 500_000).count();
        assert!((800..1200).contains(&spikes), "spikes {spikes}");
        assert!(draws
            .iter()
            .all(|&d| (90_000..=110_000).contains(&d) || (1_090_000..=1_110_000).contains(&d)));
    }

    #[test]
    fn robot_counts_states_on_its_own_clock() {
        let r = SimRobot::new(1_000, 10_000_000, 1.0, 0);
        assert_eq!(r.state_seq(1_000), 0);
        assert_eq!(r.state_seq(1_000 + 25_000_000), 2);
        assert_eq!(r.time_ms(1_000 + 25_000_000) - r.time_ms(1_000), 25);
    }
}
