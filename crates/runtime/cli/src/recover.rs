//! `looptime recover`: the evidence of a process that died.
//!
//! A recorder with a shared-memory ring (the default, `run.timing_ring =
//! "shm"`) leaves its ring file behind when the process is killed
//! (kill -9, a crash, the OOM killer, a watchdog). Recovery turns it into
//! the normal evidence files in the episode directory its header names
//! (capture's [`looptime_capture::ring::recover`]), then tells the rest of
//! the episode: `manifest.json` says `recovered` and `session.json` marks
//! the rollout `recovered`. `serve` does this at start for the orphaned
//! rings of its own runs directory.
//!
//! Rings in a shared directory belong to their owners
//! (`looptime_capture::ring::owner`, docs/durability.md): another user's
//! ring is listed from `stat` alone and never opened, written or removed;
//! a ring whose episode directory is not the caller's is left in place.

use std::io::Write;
use std::path::{Path, PathBuf};

use looptime_capture::ring::{self, Recovered, RingReader};
use serde_json::{json, Value};

use looptime_runtime::episode::{pretty_json, write_file, SESSION_FILE};
use looptime_runtime::error::ServeError;

/// What happened to each ring looked at.
#[derive(Debug, Default)]
pub struct RecoverSummary {
    /// Rings turned into evidence: (ring, episode directory, cycles).
    pub written: Vec<(PathBuf, PathBuf, u64)>,
    /// Rings of finished writers, only removed.
    pub removed: Vec<PathBuf>,
    /// Rings whose writer still runs, left alone.
    pub live: Vec<(PathBuf, u32)>,
    /// Rings that could not be recovered, with the reason (kept on disk).
    pub failed: Vec<(PathBuf, String)>,
    /// Other users' rings (and files named like rings that are not regular
    /// files), listed from `stat` alone and left alone.
    pub others: Vec<PathBuf>,
    /// The caller's dead rings left alone because their episode directory
    /// lies outside the runs directory of the `serve` that looked.
    pub elsewhere: Vec<(PathBuf, PathBuf)>,
}

/// Which of the caller's dead rings a recovery takes.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// Every one (`looptime recover`, run on purpose).
    All,
    /// Only those whose episode directory lies under this runs directory
    /// (`serve`'s start-up recovery); the rest are listed, not touched.
    Under(&'a Path),
}

/// Recover the caller's rings in `dir` whose writer is dead and that
/// `scope` takes, printing a line per ring on `out`. Rings of running
/// processes are skipped (and listed); other users' rings are listed from
/// `stat` alone, once, and never opened.
pub fn recover_dir(dir: &Path, scope: Scope, out: &mut dyn Write) -> RecoverSummary {
    let mut summary = RecoverSummary::default();
    let listing = ring::owner::list(dir);
    for other in &listing.others {
        let _ = writeln!(out, "[recover] {}", other.describe_other());
        summary.others.push(other.path.clone());
    }
    for path in listing.mine.into_iter().map(|r| r.path) {
        let reader = match RingReader::open(&path) {
            Ok(r) if r.writer_alive() => {
                summary.live.push((path, r.pid()));
                continue;
            }
            Ok(r) => r,
            Err(e) => {
                let why = looptime_capture::error_chain(&e);
                let _ = writeln!(out, "[recover] {}: {why}; left in place", path.display());
                summary.failed.push((path, why));
                continue;
            }
        };
        if let Scope::Under(runs) = scope {
            let named = reader.meta().ok().and_then(|m| m.episode_dir);
            if let Some(dir) = named.filter(|d| !lies_under(d, runs)) {
                let _ = writeln!(
                    out,
                    "[recover] {}: its episode directory {} is outside this runs directory ({}); left in place (`looptime recover` recovers it)",
                    path.display(),
                    dir.display(),
                    runs.display()
                );
                summary.elsewhere.push((path, dir));
                continue;
            }
        }
        drop(reader);
        recover_into(&path, out, &mut summary);
    }
    summary
}

/// Whether `dir` lies under `root`, both made absolute (and `root`'s
/// links resolved, as the recorder's absolute path was made from the
/// same working directory).
fn lies_under(dir: &Path, root: &Path) -> bool {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (dir, root) = (abs(dir), abs(root));
    let canonical_root = root.canonicalize().unwrap_or_else(|_| root.clone());
    dir.starts_with(&root) || dir.starts_with(&canonical_root)
}

/// Recover the one ring at `path` (its writer must be dead).
pub fn recover_file(path: &Path, out: &mut dyn Write) -> RecoverSummary {
    let mut summary = RecoverSummary::default();
    recover_into(path, out, &mut summary);
    summary
}

fn recover_into(path: &Path, out: &mut dyn Write, summary: &mut RecoverSummary) {
    match ring::recover(path) {
        Ok(Recovered::Written { ring, dir, report }) => {
            let s = &report.summary;
            let r = s.recovery.as_ref();
            let cycles = r.map_or(0, |r| r.cycles_recovered);
            let _ = writeln!(
                out,
                "[recover] {} (thread {}, pid {}, {}) -> {}: {} cycles recovered, {} in progress and {} torn lost, {} earlier dropped by the ring",
                ring.display(),
                thread_of(&report.cycles_path),
                r.map_or(0, |r| r.writer_pid),
                r.map_or("", |r| r.ring_state.as_str()),
                dir.display(),
                cycles,
                r.map_or(0, |r| r.in_progress_records),
                r.map_or(0, |r| r.torn_records),
                s.capture.dropped_cycles
                    .saturating_sub(r.map_or(0, |r| r.in_progress_records + r.torn_records)),
            );
            if let Err(e) = mark_episode(&dir, s) {
                let _ = writeln!(
                    out,
                    "[recover] {}: the evidence is written, but {}",
                    dir.display(),
                    looptime_capture::error_chain(&e)
                );
            }
            summary.written.push((ring, dir, cycles));
        }
        Ok(Recovered::AlreadyFinished { ring, dir }) => {
            let _ = writeln!(
                out,
                "[recover] {}: its writer had finished{}; only the ring was removed",
                ring.display(),
                dir.map(|d| format!(" writing {}", d.display()))
                    .unwrap_or_default()
            );
            summary.removed.push(ring);
        }
        Err(e) => {
            let why = looptime_capture::error_chain(&e);
            let _ = writeln!(out, "[recover] {why}");
            summary.failed.push((path.to_path_buf(), why));
        }
    }
}

/// The thread whose evidence `cycles_path` is: `control_timing.jsonl` is
/// the control thread's, `control_timing.<name>.jsonl` thread `<name>`'s.
fn thread_of(cycles_path: &Path) -> String {
    let name = cycles_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_prefix("control_timing.")
        .and_then(|n| n.strip_suffix(".jsonl"))
        .unwrap_or(looptime_capture::CONTROL_THREAD)
        .to_string()
}

/// Tell the episode's manifest and session record that it was recovered.
/// Each is rewritten only when present and readable as JSON; anything else
/// is left as it is.
fn mark_episode(dir: &Path, s: &looptime_capture::Summary) -> Result<(), ServeError> {
    let recovery = s.recovery.as_ref();
    if let Some(mut m) = read_json(&dir.join("manifest.json")) {
        m["status"] = json!("recovered");
        m["recovery"] = json!({
            "recovered_utc": looptime_runtime::episode::utc_rfc3339(),
            "cycles_recovered": recovery.map(|r| r.cycles_recovered),
            "total_cycles": s.capture.total_cycles,
            "in_progress_records": recovery.map(|r| r.in_progress_records),
            "torn_records": recovery.map(|r| r.torn_records),
            "writer_pid": recovery.map(|r| r.writer_pid),
        });
        write_json(dir, "manifest.json", &m)?;
    }
    let (Some(session), Some(rollout)) = (dir.parent(), dir.file_name()) else {
        return Ok(());
    };
    let Some(mut rec) = read_json(&session.join(SESSION_FILE)) else {
        return Ok(());
    };
    let rollout = rollout.to_string_lossy();
    if let Some(list) = rec["rollouts"].as_array_mut() {
        for r in list.iter_mut().filter(|r| r["rollout"] == *rollout) {
            r["state"] = json!("recovered");
        }
    }
    if rec["status"] == "running" {
        rec["status"] = json!("recovered");
        rec["stop"] = json!(format!(
            "the process (pid {}) died during {rollout}; its evidence was recovered from its ring by `looptime recover`",
            recovery.map_or(0, |r| r.writer_pid)
        ));
    }
    write_json(session, SESSION_FILE, &rec)
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn write_json(dir: &Path, name: &str, v: &Value) -> Result<(), ServeError> {
    write_file(dir, name, &pretty_json(v, &dir.join(name))?)
}
