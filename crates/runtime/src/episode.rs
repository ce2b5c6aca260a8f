//! The episode directory and what it holds besides the evidence: the
//! session and rollout layout, the atomic `latest` link, `session.json`,
//! `manifest.json`, the cleanup of temporaries left by dead processes, and
//! the timestamp and hash formats. A real robot runtime built on the
//! library (or a binding) reuses these to write the same layout as `serve`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

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

/// The process writing a rollout, as a `running` manifest records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WriterProcess {
    /// Its pid.
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/<pid>/stat` field
    /// 22; 0 when unreadable).
    pub start_ticks: u64,
}

impl WriterProcess {
    /// This process.
    pub fn current() -> Self {
        let pid = std::process::id();
        WriterProcess {
            pid,
            start_ticks: looptime_capture::ring::process_start_ticks(pid).unwrap_or(0),
        }
    }

    /// The writer for a manifest of `status`: this process while running.
    pub fn while_running(status: ManifestStatus) -> Option<Self> {
        (status == ManifestStatus::Running).then(Self::current)
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
///
/// One type for both writers: `looptime serve` (its [`config`](Self::config)
/// is the resolved TOML config) and a program that embeds the scheduler and
/// recorder ([`crate::embed`]; its config is a JSON value, and it adds a
/// [`program`](Self::program) record). The fields are serialized in this
/// order; `program` and `cpu_dma_latency_held` are left out when absent.
#[derive(Debug, Serialize)]
pub struct Manifest<'a, C: Serialize> {
    /// Manifest schema version ([`MANIFEST_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Who wrote the episode: `looptime 0.1.0`, `looptime-python 0.1.0`.
    pub producer: &'a str,
    /// When the manifest was written (UTC, [`utc_rfc3339`]).
    pub created_utc: String,
    /// Session directory name.
    pub session: String,
    /// Rollout directory name.
    pub rollout: &'a str,
    /// Complete, aborted or running (`recovered` after `looptime recover`).
    pub status: ManifestStatus,
    /// While `running`: the process writing the rollout (its pid and start
    /// time), so that a reader tells a rollout still recording from one
    /// whose writer died, even when the pid is reused. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer: Option<WriterProcess>,
    /// Where the config came from (a path, `embedded default`, or
    /// `program <path>`).
    pub config_source: &'a str,
    /// The resolved configuration.
    pub config: &'a C,
    /// Hash of the configuration's canonical text.
    pub config_hash: String,
    /// Hash of the source the binary was built from ([`SOURCE_HASH`]).
    pub source_hash: &'static str,
    /// The embedding program and the hashes of its sources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramRecord<'a>>,
    /// Host facts.
    pub host: &'a HostFacts,
    /// Real-time settings obtained by the control thread (`null` when a
    /// program did not set them up through looptime).
    pub realtime: Option<&'a RealtimeObtained>,
    /// Whether /dev/cpu_dma_latency was held at 0 (serve only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_held: Option<bool>,
    /// The recorder's preallocated memory and its budget (absent when
    /// the recorder is off: none is allocated).
    pub recorder: Option<RecorderFacts>,
    /// The schedule the loop ran.
    pub schedule: ScheduleFacts,
    /// What happened.
    pub counts: Counts,
    /// Files written into the rollout directory, sorted.
    pub files: Vec<String>,
}

impl<C: Serialize> Manifest<'_, C> {
    /// Write `dir/manifest.json` atomically (pretty JSON and a newline).
    ///
    /// # Errors
    /// [`ServeError::Capture`] when it cannot be written.
    pub fn write(&self, dir: &Path) -> Result<(), ServeError> {
        write_file(
            dir,
            "manifest.json",
            &pretty_json(self, &dir.join("manifest.json"))?,
        )
    }
}

/// The files a manifest lists: `manifest.json`, the names in `extra`, and
/// the recorder's two evidence files when `evidence` is true; sorted.
pub fn manifest_files(extra: &[&str], evidence: bool) -> Vec<String> {
    let mut files = vec!["manifest.json".to_string()];
    files.extend(extra.iter().map(|f| f.to_string()));
    if evidence {
        files.push(looptime_capture::CYCLES_FILE.into());
        files.push(looptime_capture::SUMMARY_FILE.into());
    }
    files.sort();
    files
}

/// A program's record in its manifest: its path and the SHA-256 of each
/// source file it names.
#[derive(Debug, Serialize)]
pub struct ProgramRecord<'a> {
    /// The program's path (the script, or `argv[0]`).
    pub path: &'a str,
    /// Source path to `sha256:<hex>` (or `unreadable: <reason>`).
    pub source_hashes: &'a BTreeMap<String, String>,
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
    /// Spin margin (with `spin_margin_auto`, the first wait's).
    pub spin_margin_ns: u64,
    /// The margin adapted to the OS sleep latency (`"auto"`); absent when
    /// fixed. The evidence's cycles carry the margin each wait used.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub spin_margin_auto: bool,
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

/// Point `runs/latest-session` at `session` (atomically, like `latest`):
/// the newest session, for `compare` and `fleet`.
///
/// # Errors
/// [`ServeError::Io`] when the link cannot be made.
pub fn update_latest_session(runs: &Path, session: &Path) -> Result<(), ServeError> {
    let rel = session.strip_prefix(runs).unwrap_or(session);
    let tmp = runs.join(format!(".latest-session.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(rel, &tmp).map_err(io_err(&tmp))?;
    fs::rename(&tmp, runs.join("latest-session")).map_err(io_err(&runs.join("latest-session")))
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
        write_file(
            session,
            SESSION_FILE,
            &pretty_json(self, &session.join(SESSION_FILE))?,
        )
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

/// `v` as pretty JSON and a newline, for the file at `path`.
///
/// # Errors
/// [`ServeError::Io`] naming `path` when `v` has no JSON form (a config
/// whose map has keys that are not strings, a path that is not UTF-8):
/// never an empty file.
pub fn pretty_json<T: Serialize + ?Sized>(v: &T, path: &Path) -> Result<Vec<u8>, ServeError> {
    let mut text = serde_json::to_vec_pretty(v).map_err(|e| ServeError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })?;
    text.push(b'\n');
    Ok(text)
}

/// The last component of `p`, as text.
pub fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
