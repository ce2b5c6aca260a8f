//! `looptime serve`: the simulated robot runtime.
//!
//! Each episode goes prepare → warmup → running (→ paused → running) →
//! finish. The control loop ([`crate::control`]) runs on its own named
//! thread (the only thread that may take a real-time priority); helper
//! threads read the camera, own the viewer transport, run the policy and
//! print live statistics. SIGINT and SIGTERM set a flag that the loop checks
//! every cycle: the episode then ends in order, its evidence written and
//! marked aborted. The directory layout is [`looptime_runtime::episode`]'s.
//! The helper threads are started and stopped together in `helpers`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use looptime_capture::{CaptureStatus, ClockDomain, FinishReport, Recorder};

use crate::config::Config;
use crate::control::{build_recorder, control_loop, Shared};
use crate::manifest::{write_manifest, ManifestFacts};
use looptime_runtime::clock::{MonotonicClock, SimulationClock};
pub use looptime_runtime::episode::*;
use looptime_runtime::error::io_err;
pub use looptime_runtime::error::ServeError;
use looptime_runtime::rt::{self, DmaLatencyHold, HostFacts, RealtimeObtained};
use looptime_runtime::stats::{Event, EventKind, LiveChannel, Maintenance};

mod helpers;
use helpers::Helpers;

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

/// Options of a serve run.
#[derive(Debug)]
pub struct ServeOptions {
    /// The resolved config.
    pub config: Config,
    /// Where it came from.
    pub config_source: String,
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
    state: Arc<crate::control::LoopState>,
    out: &mut dyn Write,
    live_out: impl Fn() -> Box<dyn Write + Send>,
) -> Result<SessionOutcome, ServeError> {
    let cfg = &opts.config;
    let runs = PathBuf::from(&cfg.run.runs_dir);
    fs::create_dir_all(&runs).map_err(io_err(&runs))?;
    remove_stale_temps(&runs, out);
    recover_orphans(cfg, &runs, out);
    let session = create_session_dir(&runs)?;
    looptime_runtime::episode::update_latest_session(&runs, &session)?;
    let host = rt::host_facts();
    announce(cfg, &session, out);
    let mut record = SessionRecord::new(&session, cfg.run.episodes);
    record.write(&session)?;
    let ctx = EpisodeContext {
        opts,
        runs: &runs,
        session: &session,
        host: &host,
        state: &state,
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
    if let Some(e) = failure {
        record.status = "failed";
        record.stop = Some(looptime_capture::error_chain(&e));
        let _ = record.write(&session);
        return Err(e);
    }
    close_session(record, session, episodes, stop.load(Ordering::Relaxed), out)
}

/// Turn the dead rings of this runs directory into evidence (and remove the
/// finished ones) before a session starts, and say so when there were any.
fn recover_orphans(cfg: &Config, runs: &Path, out: &mut dyn Write) {
    let orphans = crate::recover::recover_dir(
        Path::new(&cfg.run.timing_ring_dir),
        crate::recover::Scope::Under(runs),
        out,
    );
    if !orphans.written.is_empty() || !orphans.removed.is_empty() {
        let _ = writeln!(
            out,
            "[run] recovered {} orphaned ring(s) of processes that died, removed {} finished one(s); `analyze_control_timing --episode DIR` reads them",
            orphans.written.len(),
            orphans.removed.len()
        );
    }
}

/// The session's last record: complete, or stopped with the rollouts that
/// did not run.
fn close_session(
    mut record: SessionRecord,
    session: PathBuf,
    episodes: Vec<EpisodeResult>,
    stopped: bool,
    out: &mut dyn Write,
) -> Result<SessionOutcome, ServeError> {
    let not_run: Vec<String> = record
        .rollouts
        .iter()
        .filter(|r| r.state == RolloutState::NotRun)
        .map(|r| r.rollout.clone())
        .collect();
    if stopped {
        record_stop(&mut record, out, &session, episodes.len(), &not_run);
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

/// The session's opening lines: what runs, and the recorder's memory.
fn announce(cfg: &Config, session: &Path, out: &mut dyn Write) {
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
}

/// Mark `record` stopped by a signal, say why, and print the closing line.
fn record_stop(
    record: &mut SessionRecord,
    out: &mut dyn Write,
    session: &Path,
    ran: usize,
    not_run: &[String],
) {
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
        ran,
        record.planned_rollouts,
        if not_run.is_empty() {
            String::new()
        } else {
            format!(", not run: {}", not_run.join(", "))
        },
        session.join(SESSION_FILE).display()
    );
}

/// What every episode of one session shares.
struct EpisodeContext<'a> {
    opts: &'a ServeOptions,
    runs: &'a Path,
    session: &'a Path,
    host: &'a HostFacts,
    /// Where the control loop is, for the signal thread's messages.
    state: &'a Arc<crate::control::LoopState>,
}

/// The rollout's recorder (on the simulation clock when uncapped), then
/// its directory: the recorder comes first, so that a refused allocation
/// leaves no directory.
fn recorder_and_dir(
    ctx: &EpisodeContext,
    cfg: &Config,
    rollout: &str,
    out: &mut dyn Write,
) -> Result<(crate::control::Built, PathBuf), ServeError> {
    let domain = if cfg.run.rtf == 0.0 {
        ClockDomain::Simulation
    } else {
        ClockDomain::HostMonotonic
    };
    let dir = ctx.session.join(rollout);
    let built = build_recorder(cfg, domain, &dir)?;
    fs::create_dir(&dir).map_err(io_err(&dir))?;
    if let Some(note) = &built.ring_note {
        let _ = writeln!(out, "[warn] ring: {note}");
    }
    Ok((built, dir))
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
    // Prepare: every allocation and thread before the first cycle.
    let (built, dir) = recorder_and_dir(ctx, cfg, rollout, out)?;
    let (rec, ids, ring_note) = (built.rec, built.ids, built.ring_note);
    let dir = dir.as_path();
    let ring_file = rec.ring_path().map(Path::to_path_buf);
    let not_yet = RealtimeObtained::default();
    let pre = running_manifest(
        ctx,
        cfg,
        rollout,
        &not_yet,
        ring_file.as_deref(),
        ring_note.as_deref(),
    );
    // The manifest and `latest` before the first cycle: a rollout killed
    // mid-run still says what ran, and `looptime recover` fills in the rest.
    write_manifest(dir, &pre)?;
    // `latest` points at evidence: a run without --control-timing writes
    // none, so `--episode runs/latest` keeps naming the last one that did.
    if cfg.run.control_timing {
        update_latest(ctx.runs, dir)?;
    }
    let live = LiveChannel::new();
    let prepare_t = looptime_capture::clock::monotonic_ns();
    let mut threads = built.threads;
    let peer_rec = threads.robot.take();
    let helpers = Helpers::spawn(cfg, &live, live_out(), threads)?;
    let dma_hold = hold_dma_latency(cfg, out);
    let shared = helpers.shared(&live, stop, ctx.state);
    let mut outcome = run_control(cfg, rec, &ids, &shared, peer_rec)?;
    let dma_held = dma_hold.is_some();
    drop(dma_hold);
    for w in &outcome.realtime.warnings {
        let _ = writeln!(out, "[warn] {w}");
    }
    let (maintenance, mut thread_recs) = helpers.stop();
    // The robot peer registered last: its evidence comes last.
    thread_recs.extend(outcome.peer.take());
    let status = final_manifest(ctx, dir, pre, &outcome, dma_held, live.dropped())?;
    let threads: Vec<&Recorder> = thread_recs.iter().map(|t| &t.rec).collect();
    let evidence = finish_evidence(&outcome.rec, &threads, status, dir)?;
    live.push_event(Event {
        t_ns: looptime_capture::clock::monotonic_ns(),
        cycle: outcome.cycles,
        event: EventKind::EvidenceWritten,
    });
    write_events(dir, prepare_t, maintenance)?;
    ctx.state.idle();
    report_episode(out, dir, status, &outcome, evidence.as_ref());
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

/// The rollout's status from the loop's outcome, written into the
/// manifest with the loop's counts; `latest` moved onto it again.
fn final_manifest(
    ctx: &EpisodeContext,
    dir: &Path,
    pre: ManifestFacts<'_>,
    outcome: &crate::control::ControlOutcome,
    dma_held: bool,
    live_dropped: (u64, u64),
) -> Result<EpisodeStatus, ServeError> {
    let pre_timing = pre.config.run.control_timing;
    let status = if outcome.aborted {
        EpisodeStatus::Aborted
    } else {
        EpisodeStatus::Complete
    };
    write_manifest(
        dir,
        &ManifestFacts {
            status: status.into(),
            cycles: outcome.cycles,
            overruns: outcome.overruns,
            skipped: outcome.skipped,
            realtime: &outcome.realtime,
            dma_held,
            live_dropped,
            ..pre
        },
    )?;
    if pre_timing {
        update_latest(ctx.runs, dir)?;
    }
    Ok(status)
}

/// The evidence of the control recorder and its background threads'
/// recorders, written into `dir` with the rollout's status; `None` when
/// the run was not recorded (`--control-timing` off).
fn finish_evidence(
    rec: &Recorder,
    threads: &[&Recorder],
    status: EpisodeStatus,
    dir: &Path,
) -> Result<Option<looptime_capture::FinishReport>, ServeError> {
    if !rec.is_enabled() {
        return Ok(None);
    }
    let capture_status = match status {
        EpisodeStatus::Complete => CaptureStatus::Complete,
        EpisodeStatus::Aborted => CaptureStatus::Aborted,
    };
    Ok(Some(rec.finish_threads(dir, capture_status, threads)?))
}

/// The manifest of a rollout about to run its first cycle (status
/// `running`, nothing counted yet).
fn running_manifest<'a>(
    ctx: &'a EpisodeContext,
    cfg: &'a Config,
    rollout: &'a str,
    realtime: &'a RealtimeObtained,
    ring_file: Option<&'a Path>,
    ring_note: Option<&'a str>,
) -> ManifestFacts<'a> {
    ManifestFacts {
        config: cfg,
        config_source: &ctx.opts.config_source,
        session: ctx.session,
        rollout,
        host: ctx.host,
        status: ManifestStatus::Running,
        cycles: 0,
        overruns: 0,
        skipped: 0,
        evidence: cfg.run.control_timing,
        realtime,
        dma_held: false,
        live_dropped: (0, 0),
        ring_file,
        ring_note,
    }
}

/// Hold /dev/cpu_dma_latency at 0 when `realtime.cpu_dma_latency` asks for
/// it; a refusal is a warning, never an error.
fn hold_dma_latency(cfg: &Config, out: &mut dyn Write) -> Option<DmaLatencyHold> {
    if !cfg.realtime.cpu_dma_latency {
        return None;
    }
    DmaLatencyHold::acquire()
        .map_err(|e| {
            let _ = writeln!(
                out,
                "[warn] cpu_dma_latency hold refused: {e}; continuing without it"
            );
        })
        .ok()
}

/// Run the control loop on its own named thread (the only one that may take
/// a real-time priority), on the simulation clock when uncapped.
fn run_control(
    cfg: &Config,
    rec: looptime_capture::Recorder,
    ids: &crate::control::Ids,
    shared: &Shared,
    peer_rec: Option<crate::sim::ThreadRecorder>,
) -> Result<crate::control::ControlOutcome, ServeError> {
    let uncapped = cfg.run.rtf == 0.0;
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("control".into())
            .spawn_scoped(s, || {
                if cfg.robot.transport == crate::config::Transport::Udp {
                    crate::control::input_loop(cfg, rec, ids, shared, peer_rec)
                } else if uncapped {
                    control_loop(SimulationClock::new(0), cfg, rec, ids, shared)
                } else {
                    control_loop(MonotonicClock, cfg, rec, ids, shared)
                }
            })
            .map_err(|source| ServeError::Thread {
                thread: "control",
                source,
            })?
            .join()
            .map_err(|_| ServeError::ControlPanicked)?
    })
}

/// Stop the maintenance thread and write `events.jsonl`: `prepare` at
/// `prepare_t`, then every event it collected.
fn write_events(dir: &Path, prepare_t: u64, maintenance: Maintenance) -> Result<(), ServeError> {
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
    Ok(())
}

/// The episode's closing lines on `out`.
fn report_episode(
    out: &mut dyn Write,
    dir: &Path,
    status: EpisodeStatus,
    outcome: &crate::control::ControlOutcome,
    evidence: Option<&FinishReport>,
) {
    let _ = writeln!(
        out,
        "[run] {}: {} cycles, {}",
        dir.display(),
        outcome.cycles,
        match status {
            EpisodeStatus::Complete => "complete".to_string(),
            EpisodeStatus::Aborted => format!("aborted ({})", outcome.abort_reason),
        }
    );
    if let Some(ev) = evidence {
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
