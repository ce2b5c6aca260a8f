//! The simulated runtime's control loop: its recorder and names, and one
//! cycle after another on the scheduler, with the camera, viewer, policy
//! and robot stages as nested spans. Nothing here allocates, locks, prints
//! or writes once the loop runs (docs/realtime.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::path::Path;

use looptime_capture::{
    ClockDomain, PhaseId, Recorder, RecorderBuilder, Registry, RingStorage, SourceId, SourceSpec,
    StageId, ValueId, ValueKind,
};

use crate::config::{CameraMode, Config, RingKind};
use crate::sim::{self, Mailbox, PolicyQueues, Rng, SimRobot, StateLink, ThreadRecorder};
use looptime_runtime::clock::LoopClock;
use looptime_runtime::error::ServeError;
use looptime_runtime::rt::{self, RealtimeObtained, RealtimeRequest};
use looptime_runtime::scheduler::Scheduler;
use looptime_runtime::stats::{CycleStat, Event, EventKind, LiveChannel};

pub use crate::config::{SIM_VALUE_COUNT, THREAD_SPANS_PER_CYCLE};

pub(crate) struct Ids {
    warmup: PhaseId,
    running: PhaseId,
    paused: PhaseId,
    camera: StageId,
    viewer: StageId,
    policy: StageId,
    decode: StageId,
    executor: StageId,
    send: StageId,
    recording: StageId,
    mode: looptime_capture::AttrValue,
    robot_seq: ValueId,
    robot_ms: ValueId,
    success: ValueId,
    dt: ValueId,
    /// The robot peer's own windowed success rate (`[robot] transport =
    /// "udp"` only).
    robot_success: Option<ValueId>,
    /// Bad datagrams from the robot so far (input-paced over UDP).
    pub(crate) robot_bad: Option<ValueId>,
    /// Data-age sources: the camera frame, the robot's state, the
    /// policy's action.
    frame: SourceId,
    state: SourceId,
    action: SourceId,
}

/// The background threads' recorders of one episode (absent when the
/// thread does not run, or `run.timing_threads` is off).
#[derive(Debug, Default)]
pub(crate) struct ThreadRecorders {
    pub(crate) camera: Option<ThreadRecorder>,
    pub(crate) viewer: Option<ThreadRecorder>,
    pub(crate) policy: Option<ThreadRecorder>,
    /// The robot peer's send times (`[robot] transport = "udp"`).
    pub(crate) robot: Option<ThreadRecorder>,
}

/// What [`build_recorder`] returns.
pub(crate) struct Built {
    pub(crate) rec: Recorder,
    pub(crate) ids: Ids,
    pub(crate) threads: ThreadRecorders,
    /// Why the rings are on the heap although `shm` was asked for.
    pub(crate) ring_note: Option<String>,
}

/// Register the simulated runtime's names and build its recorders (or a
/// disabled one when `run.control_timing` is off): the control thread's,
/// and with `run.timing_threads` one per background thread (camera reader
/// in background mode, viewer transport, policy worker), all from one
/// registry. With `run.timing_ring = "shm"` the rings are files in
/// `run.timing_ring_dir` naming `episode` (for `looptime recover`); when
/// one cannot be made every ring goes on the heap and `ring_note` says why.
pub(crate) fn build_recorder(
    cfg: &Config,
    domain: ClockDomain,
    episode: &Path,
) -> Result<Built, ServeError> {
    if !cfg.run.control_timing {
        let (_, ids) = control_builder(cfg, domain, episode)?;
        return Ok(Built {
            rec: Recorder::disabled(),
            ids,
            threads: ThreadRecorders::default(),
            ring_note: None,
        });
    }
    let shm = RingStorage::SharedMemory(cfg.run.timing_ring_dir.clone().into());
    if cfg.run.timing_ring == RingKind::Heap {
        return build_all(cfg, domain, episode, RingStorage::Heap);
    }
    match build_all(cfg, domain, episode, shm) {
        Ok(built) => Ok(built),
        Err(ServeError::Capture(e @ looptime_capture::CaptureError::OutOfMemory { .. })) => {
            Err(e.into())
        }
        Err(ServeError::Capture(e)) => {
            let why = looptime_capture::error_chain(&e);
            let mut built = build_all(cfg, domain, episode, RingStorage::Heap)?;
            built.ring_note = Some(format!("{why}; the ring is on the heap (run.timing_ring = \"heap\"), so a kill -9 loses this rollout's evidence"));
            Ok(built)
        }
        Err(e) => Err(e),
    }
}

#[path = "control_build.rs"]
mod build;
use build::{build_all, control_builder};

#[path = "control_state.rs"]
mod state;
pub use state::{LoopState, StopMeets};

pub(crate) struct Shared {
    pub(crate) camera: Arc<Mailbox>,
    pub(crate) viewer: Arc<Mailbox>,
    pub(crate) policy: Arc<PolicyQueues>,
    pub(crate) live: Arc<LiveChannel>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) state: Arc<LoopState>,
}

pub(crate) struct ControlOutcome {
    pub(crate) rec: Recorder,
    /// The robot peer's recorder, back from its thread (input-paced loop).
    pub(crate) peer: Option<ThreadRecorder>,
    /// Why the loop was aborted, when it was: `signal`, or the robot's
    /// states stopping (input-paced loop, with its bad datagrams).
    pub(crate) abort_reason: String,
    pub(crate) cycles: u64,
    pub(crate) overruns: u64,
    pub(crate) skipped: u64,
    pub(crate) aborted: bool,
    pub(crate) realtime: RealtimeObtained,
}

/// Which phase cycle `i` is in: warmup, then running with an optional
/// paused window.
struct Lifecycle {
    warm: u64,
    pause: std::ops::Range<u64>,
}

impl Lifecycle {
    fn new(cfg: &Config) -> Lifecycle {
        let warm = cfg.warmup_cycles();
        let rate = cfg.run.rate_hz;
        let pause = if cfg.lifecycle.pause_at_s > 0.0 && cfg.lifecycle.pause_s > 0.0 {
            let from = warm + (cfg.lifecycle.pause_at_s * rate).round() as u64;
            from..from + (cfg.lifecycle.pause_s * rate).round() as u64
        } else {
            u64::MAX..u64::MAX
        };
        Lifecycle { warm, pause }
    }

    fn phase(&self, i: u64, ids: &Ids) -> PhaseId {
        if i < self.warm {
            ids.warmup
        } else if self.pause.contains(&i) {
            ids.paused
        } else {
            ids.running
        }
    }
}

/// The phase of cycle `i`, saying when the loop enters one (`last` is the
/// phase it was in); `None` when a stop was asked for, so that the loop
/// ends before the cycle. Both loops, deadline- and input-paced, begin each
/// cycle with it.
fn next_phase(
    sh: &Shared,
    life: &Lifecycle,
    i: u64,
    ids: &Ids,
    last: &mut Option<PhaseId>,
) -> Option<PhaseId> {
    if sh.stop.load(Ordering::Relaxed) || sh.state.stop_requested() {
        return None;
    }
    let phase = life.phase(i, ids);
    if *last != Some(phase) {
        sh.live.push_event(Event {
            t_ns: looptime_capture::clock::monotonic_ns(),
            cycle: i,
            event: transition(*last, phase, ids),
        });
        *last = Some(phase);
    }
    Some(phase)
}

/// The loop's end: the finish or abort event after `cycles` cycles;
/// whether it counts as aborted. A stop requested during the last cycle
/// was told "aborted": the word is kept (every cycle ran, and the evidence
/// says so).
fn end_loop(sh: &Shared, cycles: u64, aborted: bool) -> bool {
    let aborted = sh.state.finish() || aborted;
    sh.live.push_event(Event {
        t_ns: looptime_capture::clock::monotonic_ns(),
        cycle: cycles,
        event: if aborted {
            EventKind::Abort
        } else {
            EventKind::Finish
        },
    });
    aborted
}

/// The control thread's real-time setup, as the config asks.
fn realtime_setup(cfg: &Config) -> RealtimeObtained {
    rt::setup_control_thread(&RealtimeRequest {
        enabled: cfg.realtime.enabled,
        priority: cfg.realtime.priority,
        cpu: (cfg.realtime.cpu >= 0).then_some(cfg.realtime.cpu as usize),
        mlockall: cfg.realtime.mlockall,
    })
}

/// The lifecycle event of entering `phase` from `last`.
fn transition(last: Option<PhaseId>, phase: PhaseId, ids: &Ids) -> EventKind {
    if phase == ids.warmup {
        EventKind::Warmup
    } else if phase == ids.paused {
        EventKind::Pause
    } else if last == Some(ids.paused) {
        EventKind::Resume
    } else {
        EventKind::Running
    }
}

/// The simulated work of one cycle: its stages as nested spans, and the
/// state they carry from cycle to cycle.
struct Work<'a> {
    st: &'a crate::config::StagesSection,
    rng: Rng,
    robot: SimRobot,
    link: StateLink,
    last_frame: (u64, u64),
    last_action: Option<(u64, u64)>,
    /// With `[robot] transport = "udp"`: the peer's link and the state
    /// this cycle answers (`input_loop`).
    udp: Option<(&'a crate::robot::Link, u64)>,
    /// Every this many-th cycle answers late by `late_ns` (0: never).
    late_every: u64,
    late_ns: u64,
}

impl Work<'_> {
    /// Run cycle `i`'s stages into the open cycle of `rec`; `dt_ns` is what
    /// the controller is handed.
    fn stages(
        &mut self,
        rec: &mut Recorder,
        ids: &Ids,
        sh: &Shared,
        paused: bool,
        i: u64,
        dt_ns: u64,
    ) {
        let st = self.st;
        // Ask for the robot's state now; its reply comes later (data age).
        self.link.request(looptime_capture::clock::monotonic_ns());
        {
            let mut s = rec.span(ids.camera);
            s.set(ids.mode);
            match st.camera_read.mode {
                CameraMode::Inline => {
                    // The frame is stamped as it is read: its age at use
                    // is the time to the sample call below.
                    sim::spend(&st.camera_read.cost, &mut self.rng);
                    self.last_frame = (
                        self.last_frame.0 + 1,
                        looptime_capture::clock::monotonic_ns(),
                    );
                }
                CameraMode::Background => {
                    // Snapshot access only: the frame is as old as the
                    // reader's last capture.
                    if let Some(frame) = sh.camera.read() {
                        self.last_frame = frame;
                    }
                }
            }
            if self.last_frame.0 > 0 {
                s.sample(ids.frame, self.last_frame.0, self.last_frame.1);
            }
        }
        // What the controller is handed: the measured, bounded dt.
        rec.set_float(ids.dt, dt_ns as f64 / 1e3);
        {
            let _s = rec.span(ids.viewer);
            let _ = sh.viewer.read();
            sim::spend(&st.viewer_control.cost, &mut self.rng);
        }
        if !paused {
            {
                let mut s = rec.span(ids.policy);
                let now = looptime_capture::clock::monotonic_ns();
                let _ = sh.policy.observations.push((i, now));
                // A new action when the worker answered; else the last one
                // again (a reuse).
                if let Some(a) = sh.policy.actions.pop() {
                    self.last_action = Some(a);
                }
                if let Some((obs, taken)) = self.last_action {
                    s.sample(ids.action, obs, taken);
                }
            }
            {
                let _s = rec.span(ids.decode);
                sim::spend(&st.adapter_decode.cost, &mut self.rng);
            }
            self.execute(rec, ids, i);
        }
        let _s = rec.span(ids.recording);
        sim::spend(&st.recording.cost, &mut self.rng);
    }
}

impl Work<'_> {
    /// The `executor` stage of cycle `i`, with `robot_send_command` inside:
    /// the newest robot state that has arrived (stamped at its request),
    /// then the command (to the peer too, with `[robot] transport = "udp"`).
    fn execute(&mut self, rec: &mut Recorder, ids: &Ids, i: u64) {
        let st = self.st;
        let mut ex = rec.span(ids.executor);
        if let Some((seq, requested)) = self.link.latest(looptime_capture::clock::monotonic_ns()) {
            ex.sample(ids.state, seq, requested);
        }
        sim::spend(&st.executor.cost, &mut self.rng);
        if self.late_every > 0 && i % self.late_every == self.late_every - 1 {
            // An injected fault: this cycle's answer leaves late.
            sim::spend_ns(self.late_ns, crate::config::CostKind::Busy);
        }
        let _send = ex.span(ids.send);
        sim::spend(&st.robot_send_command.cost, &mut self.rng);
        self.robot.send();
        if let Some((link, seq)) = self.udp {
            link.answer(seq);
        }
    }
}

/// The control loop proper. Generic over the clock so an uncapped run
/// (`rtf = 0`) runs on the simulation clock with the same code.
impl<'a> Work<'a> {
    /// The stages' state at the first cycle: seeded costs, a fresh robot.
    fn new(cfg: &'a Config) -> Work<'a> {
        let st = &cfg.stages;
        Work {
            st,
            rng: Rng::new(cfg.run.seed),
            robot: SimRobot::new(
                0,
                cfg.nominal_period_ns(),
                st.robot_send_command.acceptance_rate,
                cfg.run.seed,
            ),
            link: StateLink::new(
                st.robot_send_command.reply_delay_us,
                st.robot_send_command.reply_jitter_us,
                cfg.run.seed ^ 0x57A7E,
            ),
            last_frame: (0, 0),
            last_action: None,
            udp: None,
            late_every: 0,
            late_ns: 0,
        }
    }

    /// As [`Work::new`], with `[robot]`'s injected late answers.
    fn with_late_answers(cfg: &'a Config) -> Work<'a> {
        Work {
            late_every: cfg.robot.late_answer_every,
            late_ns: (cfg.robot.late_answer_us * 1e3) as u64,
            ..Work::new(cfg)
        }
    }
}

// long-fn: the control thread's loop, every cycle's stages in order, kept in one place so its allocation-free body reads top to bottom
pub(crate) fn control_loop<C: LoopClock>(
    clock: C,
    cfg: &Config,
    mut rec: Recorder,
    ids: &Ids,
    sh: &Shared,
) -> Result<ControlOutcome, ServeError> {
    let realtime = realtime_setup(cfg);
    let mut sched = Scheduler::new(clock, cfg.scheduler_config())?;
    let host_clock = sched.domain() != ClockDomain::Simulation;
    let rtf = if cfg.run.rtf == 0.0 { 1.0 } else { cfg.run.rtf };
    let life = Lifecycle::new(cfg);
    let total = life.warm + cfg.running_cycles();
    let mut work = Work::new(cfg);
    sched.start();
    let clock_origin = sched.clock().now_ns();
    let robot_now = |c: &C| ((c.now_ns().saturating_sub(clock_origin)) as f64 * rtf) as u64;
    let mut last_phase: Option<PhaseId> = None;
    let mut prev_start_mono = looptime_capture::clock::monotonic_ns();
    let mut cycles = 0u64;
    let mut aborted = false;

    sh.state.enter();
    // Test builds count this thread's allocations from here to the last
    // cycle (`alloc_probe`): the loop must make none.
    #[cfg(test)]
    crate::alloc_probe::start();
    for i in 0..total {
        let Some(phase) = next_phase(sh, &life, i, ids, &mut last_phase) else {
            aborted = true;
            break;
        };
        rec.begin_wait();
        let tick = sched.wait();
        rec.end_wait();
        let start_mono = looptime_capture::clock::monotonic_ns();
        rec.begin_cycle(phase, tick.release());
        work.stages(
            &mut rec,
            ids,
            sh,
            phase == ids.paused,
            i,
            tick.dt_measured_ns,
        );
        let rnow = robot_now(sched.clock());
        rec.set_int(ids.robot_seq, work.robot.state_seq(rnow));
        rec.set_int(ids.robot_ms, work.robot.time_ms(rnow));
        rec.set_float(ids.success, work.robot.success_rate());
        rec.end_cycle();
        let end_mono = looptime_capture::clock::monotonic_ns();
        sh.live.push_stat(CycleStat {
            cycle: i,
            period_ns: start_mono.saturating_sub(prev_start_mono),
            work_ns: end_mono.saturating_sub(start_mono),
            lag_ns: if host_clock {
                tick.wake_ns as i64 - tick.target_ns as i64
            } else {
                0
            },
            overdue: tick.overdue,
            // The next release point is one period after this one.
            completion_lag_ns: host_clock
                .then(|| end_mono as i64 - (tick.target_ns + sched.config().period_ns) as i64),
        });
        prev_start_mono = start_mono;
        cycles += 1;
    }
    #[cfg(test)]
    crate::alloc_probe::CONTROL_LOOP.store(
        crate::alloc_probe::stop(),
        std::sync::atomic::Ordering::SeqCst,
    );
    let aborted = end_loop(sh, cycles, aborted);
    rt::teardown_control_thread(&realtime);
    Ok(ControlOutcome {
        rec,
        peer: None,
        abort_reason: "signal".into(),
        cycles,
        overruns: sched.overruns(),
        skipped: sched.skipped(),
        aborted,
        realtime,
    })
}

#[path = "control_input.rs"]
mod input;
pub(crate) use input::input_loop;

#[cfg(test)]
#[path = "control_tests.rs"]
mod loop_state_tests;
