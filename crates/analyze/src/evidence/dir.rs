//! What an episode directory holds besides the JSONL: leftover
//! temporaries, and why the JSONL is missing when it is.

use std::path::Path;

use looptime_capture::format::{CYCLES_FILE, SUMMARY_FILE};

use super::LeftoverTemp;

/// The temporaries (`.<name>.<pid>.tmp`) in `dir`, sorted by name.
pub(super) fn leftover_temps(dir: &Path) -> Vec<LeftoverTemp> {
    let mut out: Vec<LeftoverTemp> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let (target, pid) = looptime_capture::parse_temp_name(&name)?;
            Some(LeftoverTemp {
                target: target.to_string(),
                pid,
                bytes: e.metadata().map_or(0, |m| m.len()),
                name,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// What a directory without a JSONL is, when it is not an episode at all:
/// a session (its `rollout-*` directories, or `session.json`) or a runs
/// directory (its `session-*` directories, or a `latest` link), with the
/// advice for it.
pub(super) fn not_an_episode(dir: &Path) -> Option<crate::error::AnalyzeError> {
    let subdirs = |prefix: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.starts_with(prefix))
            .collect();
        v.sort();
        v
    };
    let list = |v: &[String]| {
        let shown: Vec<&str> = v.iter().take(3).map(String::as_str).collect();
        format!(
            "{}{}",
            shown.join(", "),
            if v.len() > 3 { ", …" } else { "" }
        )
    };
    let d = dir.display();
    let rollouts = subdirs("rollout-");
    if !rollouts.is_empty() || dir.join("session.json").exists() {
        return Some(crate::error::AnalyzeError::NotAnEpisode {
            path: dir.to_path_buf(),
            what: format!("a session directory with {} rollout(s) ({})", rollouts.len(), list(&rollouts)),
            advice: match rollouts.first() {
                Some(r) => format!("analyze one with `analyze_control_timing report {d}/{r}`; `compare {d} OTHER_SESSION` compares two sessions and `fleet {d} --out DIR` tables every rollout"),
                None => "it holds no rollout yet".to_string(),
            },
        });
    }
    let sessions = subdirs("session-");
    if !sessions.is_empty() || dir.join("latest").exists() {
        return Some(crate::error::AnalyzeError::NotAnEpisode {
            path: dir.to_path_buf(),
            what: format!("a runs directory with {} session(s) ({})", sessions.len(), list(&sessions)),
            advice: format!("`analyze_control_timing report {d}/latest` analyzes the newest rollout; `fleet {d} --out DIR` tables every rollout under it"),
        });
    }
    None
}

/// The writer of a rollout whose manifest says `running`, when that
/// process still runs (same pid and start time): the rollout is being
/// recorded, not dead.
pub(super) fn live_writer(dir: &Path) -> Option<u32> {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).ok()?).ok()?;
    if m.get("status")?.as_str()? != "running" {
        return None;
    }
    let w = m.get("writer")?;
    let pid = u32::try_from(w.get("pid")?.as_u64()?).ok()?;
    let start = w.get("start_ticks").and_then(|t| t.as_u64()).unwrap_or(0);
    looptime_capture::ring::process_alive(pid, start).then_some(pid)
}

/// Why an episode directory has no JSONL, as far as what is there tells.
pub(super) fn why_no_cycles(dir: &Path, temps: &[LeftoverTemp]) -> String {
    if dir.join(SUMMARY_FILE).exists() {
        return "a summary exists without it, so the episode is damaged (the JSONL was moved or deleted)".into();
    }
    if let Some(t) = temps.iter().find(|t| t.target == CYCLES_FILE) {
        return format!(
            "the finish was interrupted while writing it: {} ({} bytes) is left by process {}, which most likely died (kill -9, crash, OOM kill) mid-write; the partial temporary is not evidence, but `looptime recover` rebuilds the files from the process's shared-memory ring if it recorded into one (run.timing_ring = \"shm\", the default)",
            t.name, t.bytes, t.pid
        );
    }
    // The finish writes the background threads' files before the control
    // thread's: their files (or a temporary of one) without the control
    // JSONL mean the process died while finishing, not before.
    let mut thread_files: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with("control_timing.") && n.ends_with(".jsonl") && n != CYCLES_FILE)
        .collect();
    thread_files.sort();
    let thread_temp = temps
        .iter()
        .find(|t| t.target.starts_with("control_timing.") && t.target.ends_with(".jsonl"));
    if !thread_files.is_empty() || thread_temp.is_some() {
        let mut what = Vec::new();
        if !thread_files.is_empty() {
            what.push(format!(
                "the background threads' {} written",
                thread_files.join(", ")
            ));
        }
        if let Some(t) = thread_temp {
            what.push(format!(
                "{} ({} bytes) left mid-write by process {}",
                t.name, t.bytes, t.pid
            ));
        }
        let manifest = std::fs::read_to_string(dir.join("manifest.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        return format!(
            "the process died while finishing (a signal or kill during the finish): {}, but not the control thread's file, which the finish writes after them; `{}` rebuilds the evidence from the shared-memory rings if they are still there (run.timing_ring = \"shm\", the default)",
            what.join("; "),
            recover_command(manifest.as_ref())
        );
    }
    let manifest = std::fs::read_to_string(dir.join("manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let timing = manifest
        .as_ref()
        .and_then(|m| m.pointer("/config/run/control_timing"))
        .and_then(|v| v.as_bool());
    match timing {
        Some(false) => "the manifest says the run was recorded without --control-timing (run.control_timing = false), so no timing evidence was written".into(),
        _ => format!(
            "the directory holds no evidence: the process most likely died (kill -9, crash, OOM kill) before its finish; `{}` rebuilds the files from its shared-memory ring (run.timing_ring = \"shm\", the default; a heap ring dies with the process)",
            recover_command(manifest.as_ref())
        ),
    }
}

/// The `looptime recover` command for this episode's ring, from what its
/// manifest records: the ring file itself (`--ring FILE`), else a ring
/// directory other than the default (`--ring-dir DIR`), else the plain
/// command, which looks in the default directory.
pub(crate) fn recover_command(manifest: Option<&serde_json::Value>) -> String {
    let text = |p: &str| {
        manifest
            .and_then(|m| m.pointer(p))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
    };
    if let Some(ring) = text("/recorder/ring_file") {
        return format!("looptime recover --ring {ring}");
    }
    match text("/config/run/timing_ring_dir") {
        Some(d) if d != looptime_capture::ring::DEFAULT_RING_DIR => {
            format!("looptime recover --ring-dir {d}")
        }
        _ => "looptime recover".into(),
    }
}
