//! `looptime serve`: the simulated robot runtime.
//!
//! Each episode goes prepare → warmup → running (→ paused → running) →
//! finish. The control loop runs on its own named thread (the only thread
//! that may take a real-time priority); helper threads read the camera, own
//! the viewer transport, run the policy and print live statistics. SIGINT
//! and SIGTERM set a flag that the loop checks every cycle: the episode
//! then ends in order, its evidence written and marked aborted.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use looptime_capture::{
    CaptureStatus, ClockDomain, FinishReport, PhaseId, Recorder, RecorderBuilder, Release, StageId,
    ValueId, ValueKind,
};
use serde::Serialize;
use thiserror::Error;

use crate::clock::{LoopClock, MonotonicClock, SimulationClock};
use crate::config::{CameraMode, Config};
use crate::rt::{self, DmaLatencyHold, HostFacts, RealtimeObtained, RealtimeRequest};
use crate::scheduler::{Scheduler, SchedulerError};
use crate::sim::{self, Mailbox, PolicyQueues, Rng, SimRobot};
use crate::stats::{CycleStat, Event, EventKind, LiveChannel, Maintenance, MaintenanceConfig};

/// Schema version of `manifest.json`.
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;
/// Schema version of `session.json`.
pub const SESSION_SCHEMA_VERSION: u32 = 1;
/// File name of the session record in a session directory.
pub const SESSION_FILE: &str = "session.json";
/// Caller values the simulated runtime registers (see `build_recorder`).
pub const SIM_VALUE_COUNT: u64 = 6;
/// Hash of the source this binary was built from.
pub const SOURCE_HASH: &str = env!("LOOPTIME_SOURCE_HASH");

/// Errors of a serve run.
#[derive(Debug, Error)]
pub enum ServeError {
    /// A directory or file of the episode could not be written (the OS
    /// error is the source, printed once after this message).
    #[error("cannot write {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A thread could not be started.
    #[error("cannot start the {thread} thread")]
    Thread {
        /// Thread name.
        thread: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The control thread panicked.
    #[error("the control thread panicked; evidence of this episode is lost")]
    ControlPanicked,
    /// Invalid scheduler settings.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// The recorder could not be built or could not write its files.
    #[error(transparent)]
    Capture(#[from] looptime_capture::CaptureError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ServeError + '_ {
    move |source| ServeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How an episode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStatus {
    /// Ran every cycle.
    Complete,
    /// Stopped by SIGINT/SIGTERM.
    Aborted,
}

/// What one episode did.
#[derive(Debug)]
pub struct EpisodeResult {
    /// The rollout directory.
    pub dir: PathBuf,
    /// Complete or aborted.
    pub status: EpisodeStatus,
    /// Cycles run.
    pub cycles: u64,
    /// Cycles that found their release point passed.
    pub overruns: u64,
    /// Release points skipped (keep-phase).
    pub skipped: u64,
    /// The capture files, when `run.control_timing` is on.
    pub evidence: Option<FinishReport>,
    /// Real-time settings obtained.
    pub realtime: RealtimeObtained,
    /// Whether /dev/cpu_dma_latency was held at 0.
    pub dma_held: bool,
    /// Live statistics and events dropped because their queue was full.
    pub live_dropped: (u64, u64),
}

struct Ids {
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
    camera_age: ValueId,
    camera_stale: ValueId,
    dt: ValueId,
}

/// Register the simulated runtime's names and build its recorder (or a
/// disabled one when `run.control_timing` is off).
fn build_recorder(cfg: &Config, domain: ClockDomain) -> Result<(Recorder, Ids), ServeError> {
    let mut b = RecorderBuilder::new();
    b.max_cycles(cfg.run.timing_max_cycles as usize)
        .max_spans_per_cycle(cfg.run.timing_max_spans_per_cycle as usize)
        .thread_cpu_time(cfg.run.timing_thread_cpu)
        .nominal_period_ns(cfg.nominal_period_ns())
        .target_clock(domain)
        .metadata(
            "producer",
            format!("looptime {}", env!("CARGO_PKG_VERSION")),
        )
        .metadata("rtf", cfg.run.rtf.to_string())
        .metadata("overrun_policy", cfg.scheduler.overrun_policy.as_str());
    let key = b.attr_key("mode")?;
    let inline = b.attr_value(key, "inline")?;
    let background = b.attr_value(key, "background")?;
    let ids = Ids {
        warmup: b.phase("warmup")?,
        running: b.phase("running")?,
        paused: b.phase("paused")?,
        camera: b.stage("camera_read")?,
        viewer: b.stage("viewer_control")?,
        policy: b.stage("policy")?,
        decode: b.stage("adapter_decode")?,
        executor: b.stage("executor")?,
        send: b.stage("robot_send_command")?,
        recording: b.stage("recording")?,
        mode: match cfg.stages.camera_read.mode {
            CameraMode::Inline => inline,
            CameraMode::Background => background,
        },
        robot_seq: b.value("robot_state_seq", ValueKind::Int, "count")?,
        robot_ms: b.value("robot_time_ms", ValueKind::Int, "ms")?,
        success: b.value("command_success_rate", ValueKind::Float, "ratio")?,
        camera_age: b.value("camera_frame_age_us", ValueKind::Int, "us")?,
        camera_stale: b.value("camera_frame_stale", ValueKind::Int, "bool")?,
        dt: b.value("dt_measured_us", ValueKind::Float, "us")?,
    };
    debug_assert_eq!(b.footprint_bytes(), cfg.recorder_footprint_bytes());
    let rec = if cfg.run.control_timing {
        b.build()?
    } else {
        Recorder::disabled()
    };
    Ok((rec, ids))
}

struct Shared {
    camera: Arc<Mailbox>,
    viewer: Arc<Mailbox>,
    policy: Arc<PolicyQueues>,
    live: Arc<LiveChannel>,
    stop: Arc<AtomicBool>,
}

struct ControlOutcome {
    rec: Recorder,
    cycles: u64,
    overruns: u64,
    skipped: u64,
    aborted: bool,
    realtime: RealtimeObtained,
}

/// The control loop proper. Generic over the clock so an uncapped run
/// (`rtf = 0`) runs on the simulation clock with the same code.
fn control_loop<C: LoopClock>(
    clock: C,
    cfg: &Config,
    mut rec: Recorder,
    ids: &Ids,
    sh: &Shared,
) -> Result<ControlOutcome, ServeError> {
    let req = RealtimeRequest {
        enabled: cfg.realtime.enabled,
        priority: cfg.realtime.priority,
        cpu: (cfg.realtime.cpu >= 0).then_some(cfg.realtime.cpu as usize),
        mlockall: cfg.realtime.mlockall,
    };
    let realtime = rt::setup_control_thread(&req);
    let mut sched = Scheduler::new(clock, cfg.scheduler_config())?;
    let host_clock = sched.domain() != ClockDomain::Simulation;
    let rtf = if cfg.run.rtf == 0.0 { 1.0 } else { cfg.run.rtf };
    let warm = cfg.warmup_cycles();
    let total = warm + cfg.running_cycles();
    let rate = cfg.run.rate_hz;
    let (pause_from, pause_to) = if cfg.lifecycle.pause_at_s > 0.0 && cfg.lifecycle.pause_s > 0.0 {
        let from = warm + (cfg.lifecycle.pause_at_s * rate).round() as u64;
        (from, from + (cfg.lifecycle.pause_s * rate).round() as u64)
    } else {
        (u64::MAX, u64::MAX)
    };
    let st = &cfg.stages;
    let max_age_ns = (st.camera_read.max_age_ms * 1e6) as u64;
    let mut rng = Rng::new(cfg.run.seed);
    sched.start();
    let clock_origin = sched.clock().now_ns();
    let mut robot = SimRobot::new(
        0,
        cfg.nominal_period_ns(),
        st.robot_send_command.acceptance_rate,
        cfg.run.seed,
    );
    let robot_now = |c: &C| ((c.now_ns().saturating_sub(clock_origin)) as f64 * rtf) as u64;
    let mut last_phase: Option<PhaseId> = None;
    let mut prev_start_mono = looptime_capture::clock::monotonic_ns();
    let mut last_frame = (0u64, 0u64);
    let mut cycles = 0u64;
    let mut aborted = false;

    for i in 0..total {
        if sh.stop.load(Ordering::Relaxed) {
            aborted = true;
            break;
        }
        let phase = if i < warm {
            ids.warmup
        } else if (pause_from..pause_to).contains(&i) {
            ids.paused
        } else {
            ids.running
        };
        if last_phase != Some(phase) {
            let event = if phase == ids.warmup {
                EventKind::Warmup
            } else if phase == ids.paused {
                EventKind::Pause
            } else if last_phase == Some(ids.paused) {
                EventKind::Resume
            } else {
                EventKind::Running
            };
            sh.live.push_event(Event {
                t_ns: looptime_capture::clock::monotonic_ns(),
                cycle: i,
                event,
            });
            last_phase = Some(phase);
        }

        rec.begin_wait();
        let tick = sched.wait();
        rec.end_wait();
        let start_mono = looptime_capture::clock::monotonic_ns();
        rec.begin_cycle(
            phase,
            Release {
                target_ns: Some(tick.target_ns),
                overdue: tick.overdue,
                skipped: tick.skipped,
            },
        );

        let age_ns = {
            let mut s = rec.span(ids.camera);
            s.set(ids.mode);
            match st.camera_read.mode {
                CameraMode::Inline => {
                    sim::spend(&st.camera_read.cost, &mut rng);
                    last_frame = (last_frame.0 + 1, looptime_capture::clock::monotonic_ns());
                }
                CameraMode::Background => {
                    // Snapshot access and freshness check only.
                    if let Some(frame) = sh.camera.read() {
                        last_frame = frame;
                    }
                }
            }
            looptime_capture::clock::monotonic_ns().saturating_sub(last_frame.1)
        };
        // What the controller is handed: the measured, bounded dt.
        rec.set_float(ids.dt, tick.dt_measured_ns as f64 / 1e3);
        rec.set_int(ids.camera_age, (age_ns / 1000) as i64);
        rec.set_int(ids.camera_stale, (age_ns > max_age_ns) as i64);
        {
            let _s = rec.span(ids.viewer);
            let _ = sh.viewer.read();
            sim::spend(&st.viewer_control.cost, &mut rng);
        }
        if phase != ids.paused {
            {
                let _s = rec.span(ids.policy);
                let _ = sh.policy.observations.push(i);
                let _ = sh.policy.actions.pop();
            }
            {
                let _s = rec.span(ids.decode);
                sim::spend(&st.adapter_decode.cost, &mut rng);
            }
            {
                let mut ex = rec.span(ids.executor);
                sim::spend(&st.executor.cost, &mut rng);
                let _send = ex.span(ids.send);
                sim::spend(&st.robot_send_command.cost, &mut rng);
                robot.send();
            }
        }
        {
            let _s = rec.span(ids.recording);
            sim::spend(&st.recording.cost, &mut rng);
        }
        let rnow = robot_now(sched.clock());
        rec.set_int(ids.robot_seq, robot.state_seq(rnow));
        rec.set_int(ids.robot_ms, robot.time_ms(rnow));
        rec.set_float(ids.success, robot.success_rate());
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
        });
        prev_start_mono = start_mono;
        cycles += 1;
    }
    sh.live.push_event(Event {
        t_ns: looptime_capture::clock::monotonic_ns(),
        cycle: cycles,
        event: if aborted {
            EventKind::Abort
        } else {
            EventKind::Finish
        },
    });
    rt::teardown_control_thread(&realtime);
    Ok(ControlOutcome {
        rec,
        cycles,
        overruns: sched.overruns(),
        skipped: sched.skipped(),
        aborted,
        realtime,
    })
}

/// Format `SystemTime::now()` as `YYYYMMDDTHHMMSSZ`.
pub fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// RFC 3339 UTC time of now.
pub fn utc_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Seconds since the epoch to (year, month, day, hour, minute, second),
/// by the days-from-civil inverse on the proleptic Gregorian calendar.
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + (m <= 2) as i64;
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
    )
}

/// FNV-1a 64 of `bytes`, as `fnv1a64:<hex>`.
pub fn fnv1a64(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// `manifest.json`: everything that could explain a difference.
#[derive(Debug, Serialize)]
pub struct Manifest<'a> {
    /// Manifest schema version.
    pub schema_version: u32,
    /// `looptime <version>`.
    pub producer: String,
    /// When the episode was written (UTC).
    pub created_utc: String,
    /// Session directory name.
    pub session: String,
    /// Rollout directory name.
    pub rollout: String,
    /// Complete or aborted.
    pub status: EpisodeStatus,
    /// Where the config came from (a path, or `embedded default`).
    pub config_source: &'a str,
    /// The resolved configuration.
    pub config: &'a Config,
    /// Hash of the resolved configuration's canonical TOML.
    pub config_hash: String,
    /// Hash of the source the binary was built from.
    pub source_hash: &'static str,
    /// Host facts.
    pub host: &'a HostFacts,
    /// Real-time settings obtained by the control thread.
    pub realtime: &'a RealtimeObtained,
    /// Whether /dev/cpu_dma_latency was held at 0.
    pub cpu_dma_latency_held: bool,
    /// The recorder's preallocated memory and its budget (absent when
    /// `run.control_timing` is off: no recorder is allocated).
    pub recorder: Option<RecorderFacts>,
    /// The schedule the loop ran.
    pub schedule: ScheduleFacts,
    /// What happened.
    pub counts: Counts,
    /// Files written into the rollout directory.
    pub files: Vec<String>,
}

/// The recorder's memory, as checked before the session started.
#[derive(Debug, Serialize)]
pub struct RecorderFacts {
    /// Bytes preallocated for the cycle ring, span slots and value slots.
    pub footprint_bytes: u64,
    /// `run.timing_memory_budget_mb`, in bytes.
    pub budget_bytes: u64,
}

/// The resolved schedule.
#[derive(Debug, Serialize)]
pub struct ScheduleFacts {
    /// Nominal period.
    pub nominal_period_ns: u64,
    /// Effective period (nominal / rtf).
    pub effective_period_ns: u64,
    /// Spin margin.
    pub spin_margin_ns: u64,
    /// Overrun policy.
    pub overrun_policy: &'static str,
    /// Clock the schedule ran on.
    pub clock: &'static str,
}

/// Counts of the episode.
#[derive(Debug, Serialize)]
pub struct Counts {
    /// Cycles run.
    pub cycles: u64,
    /// Cycles planned.
    pub planned_cycles: u64,
    /// Overruns.
    pub overruns: u64,
    /// Skipped release points.
    pub skipped: u64,
    /// Live statistics dropped (queue full).
    pub stats_dropped: u64,
    /// Events dropped (queue full).
    pub events_dropped: u64,
}

/// Write `dir/name` through capture's atomic writer: the same hidden
/// `.<name>.<pid>.tmp` temporary as the evidence files, removed on failure.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ServeError> {
    looptime_capture::write_atomic(dir, name, |w| w.write_all(bytes))?;
    Ok(())
}

/// Create `<runs>/session-<UTC>[-N]`.
fn create_session_dir(runs: &Path) -> Result<PathBuf, ServeError> {
    fs::create_dir_all(runs).map_err(io_err(runs))?;
    let stamp = utc_stamp();
    for n in 0..1000 {
        let name = if n == 0 {
            format!("session-{stamp}")
        } else {
            format!("session-{stamp}-{n}")
        };
        let p = runs.join(name);
        match fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err(&p)(e)),
        }
    }
    Err(io_err(runs)(std::io::Error::other(
        "too many sessions in one second",
    )))
}

/// Point `<runs>/latest` at `target` (relative), replacing it atomically.
fn update_latest(runs: &Path, target: &Path) -> Result<(), ServeError> {
    let rel = target.strip_prefix(runs).unwrap_or(target);
    let tmp = runs.join(format!(".latest.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(rel, &tmp).map_err(io_err(&tmp))?;
    fs::rename(&tmp, runs.join("latest")).map_err(io_err(&runs.join("latest")))
}

/// Options of a serve run.
#[derive(Debug)]
pub struct ServeOptions {
    /// The resolved config.
    pub config: Config,
    /// Where it came from.
    pub config_source: String,
}

/// How one rollout of a session ended, as `session.json` records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutState {
    /// Its loop is running or its evidence is being written.
    Running,
    /// Every planned cycle ran and its files were written.
    Complete,
    /// A signal stopped its loop; its evidence is written and marked aborted.
    Aborted,
    /// The session stopped before it started.
    NotRun,
}

/// One rollout's line in `session.json`.
#[derive(Debug, Serialize)]
pub struct RolloutEntry {
    /// `rollout-NNN`.
    pub rollout: String,
    /// How it ended.
    pub state: RolloutState,
}

/// `session.json`: what a session planned and what became of each rollout.
/// It is rewritten atomically when the session starts, after each rollout
/// and at the end, so even a killed session says how far it got.
#[derive(Debug, Serialize)]
pub struct SessionRecord {
    /// [`SESSION_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `looptime <version>`.
    pub producer: String,
    /// Session directory name.
    pub session: String,
    /// `running` while the session runs, then `complete`, `aborted` (a
    /// signal stopped it) or `failed` (an error ended it).
    pub status: &'static str,
    /// What stopped or ended the session early, in words.
    pub stop: Option<String>,
    /// Rollouts planned (`run.episodes`).
    pub planned_rollouts: u32,
    /// Every planned rollout, in order.
    pub rollouts: Vec<RolloutEntry>,
}

impl SessionRecord {
    fn write(&self, session: &Path) -> Result<(), ServeError> {
        let mut text = serde_json::to_vec_pretty(self).unwrap_or_default();
        text.push(b'\n');
        write_file(session, SESSION_FILE, &text)
    }
}

/// What a whole `serve` did.
#[derive(Debug)]
pub struct SessionOutcome {
    /// The session directory.
    pub session: PathBuf,
    /// The rollouts that ran (complete or aborted), in order.
    pub episodes: Vec<EpisodeResult>,
    /// A signal stopped the session (the exit code is then 130).
    pub stopped: bool,
    /// Rollouts that never started because of the stop.
    pub not_run: Vec<String>,
}

/// Remove the temporary files that a killed `serve` (or finish) left in
/// `runs`, its sessions and their rollouts: `.<name>.<pid>.tmp` whose pid is
/// no longer running. Each removal is printed. Temporaries of a live process
/// (another `serve` writing into the same runs directory) are left alone.
pub fn remove_stale_temps(runs: &Path, out: &mut dyn Write) -> Vec<PathBuf> {
    let mut dirs = vec![runs.to_path_buf()];
    let mut removed = Vec::new();
    for depth in 0..3 {
        let mut next = Vec::new();
        for dir in &dirs {
            let Ok(entries) = fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir && depth < 2 {
                    next.push(path);
                    continue;
                }
                let name = entry.file_name();
                let Some((_, pid)) = name.to_str().and_then(looptime_capture::parse_temp_name)
                else {
                    continue;
                };
                if pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists() {
                    continue;
                }
                let size = entry.metadata().map_or(0, |m| m.len());
                match fs::remove_file(&path) {
                    Ok(()) => {
                        let _ = writeln!(
                            out,
                            "[run] removed {} ({size} bytes), left by process {pid}, which died while writing it",
                            path.display()
                        );
                        removed.push(path);
                    }
                    Err(e) => {
                        let _ = writeln!(
                            out,
                            "[warn] cannot remove {}, left by dead process {pid}: {e}",
                            path.display()
                        );
                    }
                }
            }
        }
        dirs = next;
    }
    removed
}

/// Run every episode of the config. Progress and the final lines go to
/// `out`; live statistics to `live_out`. Setting `stop` (SIGINT, SIGTERM)
/// ends the current rollout's loop after its cycle, writes its evidence
/// marked aborted, and starts no further rollout; `session.json` lists them
/// as not run.
///
/// # Errors
/// [`ServeError`] when an episode cannot be set up or written. The
/// recorder's size is checked by [`Config::validate`] before anything is
/// created.
pub fn serve(
    opts: &ServeOptions,
    stop: Arc<AtomicBool>,
    out: &mut dyn Write,
    live_out: impl Fn() -> Box<dyn Write + Send>,
) -> Result<SessionOutcome, ServeError> {
    let cfg = &opts.config;
    let runs = PathBuf::from(&cfg.run.runs_dir);
    fs::create_dir_all(&runs).map_err(io_err(&runs))?;
    remove_stale_temps(&runs, out);
    let session = create_session_dir(&runs)?;
    let host = rt::host_facts();
    let _ = writeln!(
        out,
        "[run] session {} ({} episode(s), {} Hz, {} s warmup + {} s running, rtf {}, control timing {})",
        session.display(),
        cfg.run.episodes,
        cfg.run.rate_hz,
        cfg.run.warmup_s,
        cfg.run.duration_s,
        cfg.run.rtf,
        if cfg.run.control_timing { "on" } else { "off" }
    );
    if cfg.run.control_timing {
        let _ = writeln!(
            out,
            "[run] recorder: {} cycles x {} span slots = {} bytes ({:.1} MiB) preallocated per rollout (budget {} MiB, run.timing_memory_budget_mb)",
            cfg.run.timing_max_cycles,
            cfg.run.timing_max_spans_per_cycle,
            cfg.recorder_footprint_bytes(),
            cfg.recorder_footprint_bytes() as f64 / 1048576.0,
            cfg.run.timing_memory_budget_mb
        );
    }
    let mut record = SessionRecord {
        schema_version: SESSION_SCHEMA_VERSION,
        producer: format!("looptime {}", env!("CARGO_PKG_VERSION")),
        session: file_name(&session),
        status: "running",
        stop: None,
        planned_rollouts: cfg.run.episodes,
        rollouts: (0..cfg.run.episodes)
            .map(|ep| RolloutEntry {
                rollout: format!("rollout-{ep:03}"),
                state: RolloutState::NotRun,
            })
            .collect(),
    };
    record.write(&session)?;
    let ctx = EpisodeContext {
        opts,
        runs: &runs,
        session: &session,
        host: &host,
    };
    let mut episodes = Vec::new();
    let mut failure = None;
    for ep in 0..cfg.run.episodes as usize {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut ep_cfg = cfg.clone();
        ep_cfg.run.seed = cfg.run.seed.wrapping_add(ep as u64);
        record.rollouts[ep].state = RolloutState::Running;
        record.write(&session)?;
        match run_episode(
            &ctx,
            &ep_cfg,
            &record.rollouts[ep].rollout,
            &stop,
            &live_out,
            out,
        ) {
            Ok(r) => {
                record.rollouts[ep].state = match r.status {
                    EpisodeStatus::Complete => RolloutState::Complete,
                    EpisodeStatus::Aborted => RolloutState::Aborted,
                };
                episodes.push(r);
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        record.write(&session)?;
    }
    let stopped = stop.load(Ordering::Relaxed);
    let not_run: Vec<String> = record
        .rollouts
        .iter()
        .filter(|r| r.state == RolloutState::NotRun)
        .map(|r| r.rollout.clone())
        .collect();
    if let Some(e) = failure {
        record.status = "failed";
        record.stop = Some(looptime_capture::error_chain(&e));
        let _ = record.write(&session);
        return Err(e);
    }
    if stopped {
        record.status = "aborted";
        let aborted = record
            .rollouts
            .iter()
            .find(|r| r.state == RolloutState::Aborted);
        record.stop = Some(match aborted {
            Some(r) => format!("a signal stopped the loop of {} (its evidence is written and marked aborted)", r.rollout),
            None => "a signal arrived after a rollout's last cycle, while its files were written (that rollout is complete)".to_string(),
        });
        let _ = writeln!(
            out,
            "[run] session stopped by a signal: {} of {} rollout(s) ran{}; see {}",
            episodes.len(),
            cfg.run.episodes,
            if not_run.is_empty() {
                String::new()
            } else {
                format!(", not run: {}", not_run.join(", "))
            },
            session.join(SESSION_FILE).display()
        );
    } else {
        record.status = "complete";
    }
    record.write(&session)?;
    Ok(SessionOutcome {
        session,
        episodes,
        stopped,
        not_run,
    })
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What every episode of one session shares.
struct EpisodeContext<'a> {
    opts: &'a ServeOptions,
    runs: &'a Path,
    session: &'a Path,
    host: &'a HostFacts,
}

/// The manifest's view of an episode whose loop has ended.
struct ManifestFacts<'a> {
    status: EpisodeStatus,
    cycles: u64,
    overruns: u64,
    skipped: u64,
    evidence: bool,
    realtime: &'a RealtimeObtained,
    dma_held: bool,
    live_dropped: (u64, u64),
}

fn write_manifest(
    ctx: &EpisodeContext,
    cfg: &Config,
    rollout: &str,
    r: &ManifestFacts,
    dir: &Path,
) -> Result<(), ServeError> {
    let sc = cfg.scheduler_config();
    let mut files = vec!["events.jsonl".to_string(), "manifest.json".to_string()];
    if r.evidence {
        files.push(looptime_capture::CYCLES_FILE.into());
        files.push(looptime_capture::SUMMARY_FILE.into());
    }
    files.sort();
    let m = Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        producer: format!("looptime {}", env!("CARGO_PKG_VERSION")),
        created_utc: utc_rfc3339(),
        session: file_name(ctx.session),
        rollout: rollout.to_string(),
        status: r.status,
        config_source: &ctx.opts.config_source,
        config: cfg,
        config_hash: fnv1a64(cfg.to_toml().as_bytes()),
        source_hash: SOURCE_HASH,
        host: ctx.host,
        realtime: r.realtime,
        cpu_dma_latency_held: r.dma_held,
        recorder: cfg.run.control_timing.then(|| RecorderFacts {
            footprint_bytes: cfg.recorder_footprint_bytes(),
            budget_bytes: cfg.run.timing_memory_budget_mb << 20,
        }),
        schedule: ScheduleFacts {
            nominal_period_ns: cfg.nominal_period_ns(),
            effective_period_ns: sc.period_ns,
            spin_margin_ns: sc.spin_margin_ns,
            overrun_policy: sc.policy.as_str(),
            clock: if cfg.run.rtf == 0.0 {
                "simulation"
            } else {
                "host_monotonic"
            },
        },
        counts: Counts {
            cycles: r.cycles,
            planned_cycles: cfg.warmup_cycles() + cfg.running_cycles(),
            overruns: r.overruns,
            skipped: r.skipped,
            stats_dropped: r.live_dropped.0,
            events_dropped: r.live_dropped.1,
        },
        files,
    };
    let mut text = serde_json::to_vec_pretty(&m).unwrap_or_default();
    text.push(b'\n');
    write_file(dir, "manifest.json", &text)
}

/// One rollout: prepare, run the loop, then write (in this order) the
/// manifest, the `latest` link, the evidence and the events. The manifest
/// goes first because it is small and says what ran: a process killed
/// while the large JSONL is written still leaves it, and `latest` already
/// points at the rollout it describes.
fn run_episode(
    ctx: &EpisodeContext,
    cfg: &Config,
    rollout: &str,
    stop: &Arc<AtomicBool>,
    live_out: &impl Fn() -> Box<dyn Write + Send>,
    out: &mut dyn Write,
) -> Result<EpisodeResult, ServeError> {
    let uncapped = cfg.run.rtf == 0.0;
    let domain = if uncapped {
        ClockDomain::Simulation
    } else {
        ClockDomain::HostMonotonic
    };
    // Prepare: every allocation and thread before the first cycle. The
    // recorder comes first, so a refused allocation leaves no directory.
    let (rec, ids) = build_recorder(cfg, domain)?;
    let dir = ctx.session.join(rollout);
    fs::create_dir(&dir).map_err(io_err(&dir))?;
    let dir = dir.as_path();
    let live = LiveChannel::new();
    let prepare_t = looptime_capture::clock::monotonic_ns();
    let camera = Arc::new(Mailbox::default());
    let viewer = Arc::new(Mailbox::default());
    let st = &cfg.stages;
    let camera_worker = match st.camera_read.mode {
        CameraMode::Background => Some(
            sim::spawn_camera_reader(
                camera.clone(),
                st.camera_read.cost,
                st.camera_read.reader_rate_hz,
                cfg.run.seed ^ 0xC0FFEE,
            )
            .map_err(|source| ServeError::Thread {
                thread: "camera-reader",
                source,
            })?,
        ),
        CameraMode::Inline => None,
    };
    let viewer_worker =
        sim::spawn_viewer_transport(viewer.clone()).map_err(|source| ServeError::Thread {
            thread: "viewer-transport",
            source,
        })?;
    let (policy, policy_worker) = sim::spawn_policy_worker(&st.policy, cfg.run.seed ^ 0xBEEF)
        .map_err(|source| ServeError::Thread {
            thread: "policy-worker",
            source,
        })?;
    let maintenance = Maintenance::spawn(
        live.clone(),
        MaintenanceConfig {
            interval_s: cfg.stats.interval_s,
            late_warn_ns: (cfg.stats.late_warn_us * 1e3) as i64,
        },
        live_out(),
    )
    .map_err(|source| ServeError::Thread {
        thread: "maintenance",
        source,
    })?;
    let dma_hold = if cfg.realtime.cpu_dma_latency {
        match DmaLatencyHold::acquire() {
            Ok(h) => Some(h),
            Err(e) => {
                let _ = writeln!(
                    out,
                    "[warn] cpu_dma_latency hold refused: {e}; continuing without it"
                );
                None
            }
        }
    } else {
        None
    };
    let shared = Shared {
        camera,
        viewer,
        policy,
        live: live.clone(),
        stop: stop.clone(),
    };
    let cfg_c = cfg.clone();
    let outcome = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("control".into())
            .spawn_scoped(s, || {
                if uncapped {
                    control_loop(SimulationClock::new(0), &cfg_c, rec, &ids, &shared)
                } else {
                    control_loop(MonotonicClock, &cfg_c, rec, &ids, &shared)
                }
            })
            .map_err(|source| ServeError::Thread {
                thread: "control",
                source,
            })?
            .join()
            .map_err(|_| ServeError::ControlPanicked)?
    })?;
    let dma_held = dma_hold.is_some();
    drop(dma_hold);
    for w in &outcome.realtime.warnings {
        let _ = writeln!(out, "[warn] {w}");
    }
    if let Some(w) = camera_worker {
        w.stop();
    }
    viewer_worker.stop();
    policy_worker.stop();
    let status = if outcome.aborted {
        EpisodeStatus::Aborted
    } else {
        EpisodeStatus::Complete
    };
    write_manifest(
        ctx,
        cfg,
        rollout,
        &ManifestFacts {
            status,
            cycles: outcome.cycles,
            overruns: outcome.overruns,
            skipped: outcome.skipped,
            evidence: outcome.rec.is_enabled(),
            realtime: &outcome.realtime,
            dma_held,
            live_dropped: live.dropped(),
        },
        dir,
    )?;
    update_latest(ctx.runs, dir)?;
    let evidence = if outcome.rec.is_enabled() {
        let capture_status = match status {
            EpisodeStatus::Complete => CaptureStatus::Complete,
            EpisodeStatus::Aborted => CaptureStatus::Aborted,
        };
        Some(outcome.rec.finish(dir, capture_status)?)
    } else {
        None
    };
    live.push_event(Event {
        t_ns: looptime_capture::clock::monotonic_ns(),
        cycle: outcome.cycles,
        event: EventKind::EvidenceWritten,
    });
    let report = maintenance.stop();
    let mut events = vec![Event {
        t_ns: prepare_t,
        cycle: 0,
        event: EventKind::Prepare,
    }];
    events.extend(report.events.iter().copied());
    let mut text = Vec::new();
    for e in &events {
        let _ = serde_json::to_writer(&mut text, e);
        text.push(b'\n');
    }
    write_file(dir, "events.jsonl", &text)?;

    let _ = writeln!(
        out,
        "[run] {}: {} cycles, {}",
        dir.display(),
        outcome.cycles,
        match status {
            EpisodeStatus::Complete => "complete",
            EpisodeStatus::Aborted => "aborted (signal)",
        }
    );
    if let Some(ev) = &evidence {
        let c = &ev.summary.capture;
        let _ = writeln!(
            out,
            "[run] evidence: {} ({} cycles retained, {} earlier dropped, {} spans dropped)",
            ev.cycles_path.display(),
            c.retained_cycles,
            c.dropped_cycles,
            c.spans_dropped
        );
    }
    if outcome.overruns > 0 {
        let _ = writeln!(
            out,
            "[run] {} of {} cycles overran the control period",
            outcome.overruns, outcome.cycles
        );
    }
    Ok(EpisodeResult {
        dir: dir.to_path_buf(),
        status,
        cycles: outcome.cycles,
        overruns: outcome.overruns,
        skipped: outcome.skipped,
        evidence,
        realtime: outcome.realtime,
        dma_held,
        live_dropped: live.dropped(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enospc_is_stated_once_through_the_whole_chain() {
        // The error a full disk gives while the JSONL is written, as the
        // binary prints it (anyhow's `{:#}` walks the chain).
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let e = ServeError::from(looptime_capture::CaptureError::Write {
            path: PathBuf::from("/runs/s/rollout-000/.control_timing.jsonl.7.tmp"),
            source: full,
        });
        let text = format!("{:#}", anyhow::Error::from(e));
        assert_eq!(text.matches("No space left on device").count(), 1, "{text}");
        assert!(
            text.starts_with("cannot write /runs/s/rollout-000/"),
            "{text}"
        );
        let io = ServeError::Io {
            path: PathBuf::from("/runs/x"),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let text = format!("{:#}", anyhow::Error::from(io));
        assert_eq!(
            text,
            "cannot write /runs/x: No space left on device (os error 28)"
        );
    }
}
