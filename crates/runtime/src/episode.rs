//! The episode directory and what it holds besides the evidence: the
//! session and rollout layout, the atomic `latest` link, `session.json`,
//! `manifest.json`, the cleanup of temporaries left by dead processes, and
//! the timestamp and hash formats. A real robot runtime built on the
//! library (or a binding) reuses these to write the same layout as `serve`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::Config;
use crate::error::{io_err, ServeError};
use crate::rt::{HostFacts, RealtimeObtained};

/// Schema version of `manifest.json`.
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;
/// Schema version of `session.json`.
pub const SESSION_SCHEMA_VERSION: u32 = 1;
/// File name of the session record in a session directory.
pub const SESSION_FILE: &str = "session.json";
/// Hash of the source this binary was built from.
pub const SOURCE_HASH: &str = env!("LOOPTIME_SOURCE_HASH");

/// How an episode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStatus {
    /// Ran every cycle.
    Complete,
    /// Stopped by SIGINT/SIGTERM.
    Aborted,
}

/// The manifest's `status`: how the episode ended, or that it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ManifestStatus {
    /// Ran every cycle.
    Complete,
    /// Stopped by SIGINT/SIGTERM.
    Aborted,
    /// Written before the first cycle. A manifest that still says so
    /// belongs to a process that was killed; `looptime recover` rewrites it
    /// to `recovered`.
    Running,
}

impl From<EpisodeStatus> for ManifestStatus {
    fn from(s: EpisodeStatus) -> Self {
        match s {
            EpisodeStatus::Complete => ManifestStatus::Complete,
            EpisodeStatus::Aborted => ManifestStatus::Aborted,
        }
    }
}

/// RFC 3339 UTC time of now, to the second (`2026-12-03T07:06:32Z`).
pub fn utc_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Now as `YYYYMMDDTHHMMSSZ`, for session directory names: the RFC 3339
/// form without its separators.
pub fn utc_stamp() -> String {
    utc_rfc3339().replace(['-', ':'], "")
}

/// SHA-256 of `bytes`, as `sha256:<hex>` (what `sha256sum` prints).
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
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
    /// Complete, aborted or running (`recovered` after `looptime recover`).
    pub status: ManifestStatus,
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
    /// The ring file (`/dev/shm/looptime-<pid>-<n>.ring`), absent for a
    /// heap ring.
    pub ring_file: Option<String>,
    /// Why the ring is on the heap although `run.timing_ring` is `shm`.
    pub ring_note: Option<String>,
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
pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ServeError> {
    looptime_capture::write_atomic(dir, name, |w| w.write_all(bytes))?;
    Ok(())
}

/// Create `<runs>/session-<UTC>[-N]`.
pub fn create_session_dir(runs: &Path) -> Result<PathBuf, ServeError> {
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
pub fn update_latest(runs: &Path, target: &Path) -> Result<(), ServeError> {
    let rel = target.strip_prefix(runs).unwrap_or(target);
    let tmp = runs.join(format!(".latest.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(rel, &tmp).map_err(io_err(&tmp))?;
    fs::rename(&tmp, runs.join("latest")).map_err(io_err(&runs.join("latest")))
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
    /// The record of a session about to run `planned` rollouts, none yet.
    pub fn new(session: &Path, planned: u32) -> SessionRecord {
        SessionRecord {
            schema_version: SESSION_SCHEMA_VERSION,
            producer: format!("looptime {}", env!("CARGO_PKG_VERSION")),
            session: file_name(session),
            status: "running",
            stop: None,
            planned_rollouts: planned,
            rollouts: (0..planned)
                .map(|ep| RolloutEntry {
                    rollout: format!("rollout-{ep:03}"),
                    state: RolloutState::NotRun,
                })
                .collect(),
        }
    }

    /// Write `session/session.json` atomically.
    ///
    /// # Errors
    /// [`ServeError::Capture`] when it cannot be written.
    pub fn write(&self, session: &Path) -> Result<(), ServeError> {
        let mut text = serde_json::to_vec_pretty(self).unwrap_or_default();
        text.push(b'\n');
        write_file(session, SESSION_FILE, &text)
    }
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

/// The last component of `p`, as text.
pub fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What the manifest records of an episode whose loop has ended.
#[derive(Debug)]
pub struct ManifestFacts<'a> {
    /// The episode's resolved config.
    pub config: &'a Config,
    /// Where the config came from.
    pub config_source: &'a str,
    /// The session directory.
    pub session: &'a Path,
    /// `rollout-NNN`.
    pub rollout: &'a str,
    /// Host facts.
    pub host: &'a HostFacts,
    /// Complete, aborted, or running (before the first cycle).
    pub status: ManifestStatus,
    /// Cycles run.
    pub cycles: u64,
    /// Overruns.
    pub overruns: u64,
    /// Skipped release points.
    pub skipped: u64,
    /// Whether the evidence files are (about to be) written.
    pub evidence: bool,
    /// Real-time settings obtained.
    pub realtime: &'a RealtimeObtained,
    /// Whether /dev/cpu_dma_latency was held at 0.
    pub dma_held: bool,
    /// Live statistics and events dropped.
    pub live_dropped: (u64, u64),
    /// The ring file, when the recorder has one.
    pub ring_file: Option<&'a Path>,
    /// Why the ring is on the heap, when `shm` was asked for.
    pub ring_note: Option<&'a str>,
}

/// Write `dir/manifest.json` atomically.
///
/// # Errors
/// [`ServeError::Capture`] when it cannot be written.
pub fn write_manifest(dir: &Path, r: &ManifestFacts) -> Result<(), ServeError> {
    let cfg = r.config;
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
        session: file_name(r.session),
        rollout: r.rollout.to_string(),
        status: r.status,
        config_source: r.config_source,
        config: cfg,
        config_hash: sha256(cfg.to_toml().as_bytes()),
        source_hash: SOURCE_HASH,
        host: r.host,
        realtime: r.realtime,
        cpu_dma_latency_held: r.dma_held,
        recorder: cfg.run.control_timing.then(|| RecorderFacts {
            footprint_bytes: cfg.recorder_footprint_bytes(),
            budget_bytes: cfg.run.timing_memory_budget_mb << 20,
            ring_file: r.ring_file.map(|p| p.display().to_string()),
            ring_note: r.ring_note.map(str::to_string),
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
