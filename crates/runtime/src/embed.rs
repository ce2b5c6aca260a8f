//! An episode written by a loop that is not `serve`: a Python program
//! (through `crates/python`) or a C/C++ program (through `crates/capture-c`)
//! that runs its own loop with looptime's scheduler and recorder.
//!
//! It writes the same layout as `serve`, one session holding one rollout:
//!
//! ```text
//! <runs>/session-<UTC>/session.json
//! <runs>/session-<UTC>/rollout-000/manifest.json
//! <runs>/session-<UTC>/rollout-000/control_timing.jsonl         (by the recorder's finish)
//! <runs>/session-<UTC>/rollout-000/control_timing_summary.json  (idem)
//! <runs>/latest -> session-<UTC>/rollout-000
//! ```
//!
//! and follows `serve`'s write order: [`HostEpisode::create`] writes
//! `session.json` and a `running` manifest and points `latest` at the
//! rollout before the first cycle, so a program killed mid-run leaves an
//! episode that `looptime recover` can complete; [`HostEpisode::finish`]
//! rewrites both once the evidence is written.
//!
//! The manifest has `serve`'s fields where they mean the same thing
//! (`config.run.control_timing`, `config.run.timing_max_cycles`,
//! `schedule`, `counts`, `host`, `source_hash`), and a `program` record in
//! place of `serve`'s simulated-robot config: the program's path and the
//! SHA-256 of each source file it names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::episode::{
    create_session_dir, file_name, manifest_files, remove_stale_temps, sha256, update_latest,
    utc_rfc3339, Counts, Manifest, ManifestStatus, ProgramRecord, RecorderFacts, RolloutState,
    ScheduleFacts, SessionRecord, WriterProcess, MANIFEST_SCHEMA_VERSION, SOURCE_HASH,
};
use crate::error::{io_err, ServeError};
use crate::rt::{host_facts, HostFacts, RealtimeObtained};

/// What a program declares about its run, once, before the loop.
#[derive(Clone, Debug)]
pub struct ProgramFacts {
    /// Who writes the episode: `looptime-python 0.1.0`, `looptime-c 0.1.0`.
    pub producer: String,
    /// The program's path (the script, or `argv[0]`).
    pub program: String,
    /// Source files whose SHA-256 goes into the manifest (typically the
    /// program itself). A file that cannot be read is recorded as
    /// `unreadable: <reason>`, never an error.
    pub sources: Vec<PathBuf>,
    /// Whether the recorder runs (`--control-timing`).
    pub control_timing: bool,
    /// The recorder's cycle capacity (`--timing-max-cycles`).
    pub timing_max_cycles: u64,
    /// The nominal period of the loop.
    pub nominal_period_ns: u64,
    /// The scheduler's spin margin (the first wait's, when adaptive).
    pub spin_margin_ns: u64,
    /// Whether the margin adapts (`auto`).
    pub spin_margin_auto: bool,
    /// `rebase` or `keep-phase`.
    pub overrun_policy: &'static str,
    /// Further settings of the program, recorded under `config.program`
    /// (command-line values, for example). Keys are sorted.
    pub settings: BTreeMap<String, serde_json::Value>,
}

/// How the loop ended, for [`HostEpisode::finish`].
#[derive(Clone, Debug, Default)]
pub struct EpisodeEnd {
    /// `false` for an orderly abort (SIGINT, an error), `true` otherwise.
    pub complete: bool,
    /// Cycles run.
    pub cycles: u64,
    /// Cycles the program planned (0 when open-ended).
    pub planned_cycles: u64,
    /// Overruns the scheduler counted.
    pub overruns: u64,
    /// Release points it skipped.
    pub skipped: u64,
    /// Whether the recorder wrote its two files into the rollout.
    pub evidence: bool,
    /// The recorder's ring file, when it has one.
    pub ring_file: Option<PathBuf>,
    /// Why the ring is on the heap, when it is.
    pub ring_note: Option<String>,
    /// The recorder's preallocated bytes, when it runs.
    pub footprint_bytes: Option<u64>,
    /// What the control thread obtained (timer slack, policy), if the
    /// program set it up through looptime.
    pub realtime: Option<RealtimeObtained>,
}

impl EpisodeEnd {
    /// Take the cycle count, the ring and the footprint from `rec`;
    /// `finished_into` is where its finish wrote (the evidence is in the
    /// episode when that is `episode_dir`).
    pub fn recorder(
        &mut self,
        rec: &looptime_capture::Recorder,
        finished_into: Option<&Path>,
        episode_dir: &Path,
    ) {
        self.cycles = rec.total_cycles();
        self.evidence = finished_into == Some(episode_dir);
        self.ring_file = rec.ring_path().map(Path::to_path_buf);
        self.ring_note = rec.ring_note().map(str::to_string);
        self.footprint_bytes = Some(rec.footprint_bytes());
    }

    /// Take the cycle, overrun and skip counts from the scheduler.
    pub fn scheduler<C: crate::clock::LoopClock>(&mut self, s: &crate::scheduler::Scheduler<C>) {
        self.cycles = s.cycles();
        self.overruns = s.overruns();
        self.skipped = s.skipped();
    }
}

/// The rollout directory of a program's episode, from creation to finish.
#[derive(Debug)]
pub struct HostEpisode {
    runs: PathBuf,
    session: PathBuf,
    dir: PathBuf,
    facts: ProgramFacts,
    config: serde_json::Value,
    hashes: BTreeMap<String, String>,
    host: HostFacts,
    record: SessionRecord,
    finished: bool,
}

const ROLLOUT: &str = "rollout-000";

impl HostEpisode {
    /// Create `<runs>/session-<UTC>/rollout-000`, write `session.json` and a
    /// `running` manifest, and point `<runs>/latest` at the rollout.
    /// Temporaries that dead processes left under `runs` are removed first
    /// (each removal is reported in the returned notes).
    ///
    /// # Errors
    /// [`ServeError::Io`] or [`ServeError::Capture`] when a directory or
    /// file cannot be written.
    pub fn create(
        runs: &Path,
        facts: ProgramFacts,
    ) -> Result<(HostEpisode, Vec<String>), ServeError> {
        std::fs::create_dir_all(runs).map_err(io_err(runs))?;
        let mut notes = Vec::new();
        remove_stale_temps(runs, &mut notes);
        let notes = String::from_utf8_lossy(&notes)
            .lines()
            .map(str::to_string)
            .collect();
        let session = create_session_dir(runs)?;
        crate::episode::update_latest_session(runs, &session)?;
        let dir = session.join(ROLLOUT);
        std::fs::create_dir(&dir).map_err(io_err(&dir))?;
        let mut record = SessionRecord::new(&session, 1);
        record.producer.clone_from(&facts.producer);
        record.rollouts[0].state = RolloutState::Running;
        record.write(&session)?;
        let config = program_config(&facts);
        let hashes = facts
            .sources
            .iter()
            .map(|p| {
                let hash =
                    std::fs::read(p).map_or_else(|e| format!("unreadable: {e}"), |b| sha256(&b));
                (p.display().to_string(), hash)
            })
            .collect();
        let ep = HostEpisode {
            runs: runs.to_path_buf(),
            session,
            dir,
            facts,
            config,
            hashes,
            host: host_facts(),
            record,
            finished: false,
        };
        ep.write_manifest(ManifestStatus::Running, &EpisodeEnd::default())?;
        update_latest(&ep.runs, &ep.dir)?;
        Ok((ep, notes))
    }

    /// The rollout directory: where the recorder's `finish` writes.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session directory.
    pub fn session(&self) -> &Path {
        &self.session
    }

    /// Whether [`finish`](Self::finish) has run.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Rewrite the manifest with how the loop ended, mark the rollout and
    /// the session complete or aborted in `session.json`, and point `latest`
    /// at the rollout again. Call it after the recorder's finish, so the
    /// manifest lists the evidence files.
    ///
    /// # Errors
    /// [`ServeError::Capture`] when a file cannot be written.
    pub fn finish(&mut self, end: &EpisodeEnd) -> Result<(), ServeError> {
        let status = if end.complete {
            ManifestStatus::Complete
        } else {
            ManifestStatus::Aborted
        };
        self.write_manifest(status, end)?;
        let (state, word) = if end.complete {
            (RolloutState::Complete, "complete")
        } else {
            (RolloutState::Aborted, "aborted")
        };
        self.record.rollouts[0].state = state;
        self.record.status = word;
        if !end.complete {
            self.record.stop =
                Some("the program stopped the loop early (a signal or an error)".into());
        }
        self.record.write(&self.session)?;
        update_latest(&self.runs, &self.dir)?;
        self.finished = true;
        Ok(())
    }

    fn write_manifest(&self, status: ManifestStatus, end: &EpisodeEnd) -> Result<(), ServeError> {
        let f = &self.facts;
        Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            producer: &f.producer,
            created_utc: utc_rfc3339(),
            session: file_name(&self.session),
            rollout: ROLLOUT,
            status,
            writer: WriterProcess::while_running(status),
            config_source: &format!("program {}", f.program),
            config: &self.config,
            config_hash: sha256(hashed_config(&self.config).to_string().as_bytes()),
            source_hash: SOURCE_HASH,
            program: Some(ProgramRecord {
                path: &f.program,
                source_hashes: &self.hashes,
            }),
            host: &self.host,
            realtime: end.realtime.as_ref(),
            cpu_dma_latency_held: None,
            recorder: f.control_timing.then(|| RecorderFacts {
                footprint_bytes: end.footprint_bytes.unwrap_or(0),
                budget_bytes: 0,
                ring_file: end.ring_file.as_ref().map(|p| p.display().to_string()),
                ring_note: end.ring_note.clone(),
            }),
            schedule: ScheduleFacts {
                nominal_period_ns: f.nominal_period_ns,
                effective_period_ns: f.nominal_period_ns,
                spin_margin_ns: f.spin_margin_ns,
                spin_margin_auto: f.spin_margin_auto,
                overrun_policy: f.overrun_policy,
                clock: "host_monotonic",
            },
            counts: Counts {
                cycles: end.cycles,
                planned_cycles: end.planned_cycles,
                overruns: end.overruns,
                skipped: end.skipped,
                stats_dropped: 0,
                events_dropped: 0,
            },
            files: manifest_files(&[], end.evidence),
        }
        .write(&self.dir)
    }
}

/// The manifest's `config`: `run` with the keys `serve` also writes (the
/// analyzer reads `run.control_timing` and `run.rtf`), and the program's
/// own settings under `program`. serde_json's maps are sorted, so the
/// text, and so `config_hash`, depends only on the values.
/// The config as `config_hash` hashes it: without the settings that say
/// where output goes (`runs_dir`, `timing_ring_dir`, as `serve`'s hash
/// leaves out `run.runs_dir` and `run.timing_ring_dir`), so the same
/// program recorded into another directory hashes alike.
fn hashed_config(config: &serde_json::Value) -> serde_json::Value {
    let mut c = config.clone();
    if let Some(p) = c.get_mut("program").and_then(|p| p.as_object_mut()) {
        for key in ["runs_dir", "runs-dir", "timing_ring_dir"] {
            p.remove(key);
        }
    }
    c
}

fn program_config(f: &ProgramFacts) -> serde_json::Value {
    serde_json::json!({
        "run": {
            "control_timing": f.control_timing,
            "timing_max_cycles": f.timing_max_cycles,
            "rate_hz": 1e9 / f.nominal_period_ns.max(1) as f64,
            "rtf": 1.0,
        },
        "program": f.settings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_output_goes_is_not_hashed() {
        let with = |dir: &str| serde_json::json!({"run": {"rtf": 1.0}, "program": {"rate": 500, "runs_dir": dir}});
        let (a, b) = (hashed_config(&with("runs")), hashed_config(&with("/tmp/x")));
        assert_eq!(a, b);
        assert_eq!(a["program"]["rate"], 500);
        assert!(a["program"].get("runs_dir").is_none());
    }

    fn facts(dir: &Path) -> ProgramFacts {
        let src = dir.join("prog.py");
        std::fs::write(&src, b"print('hi')\n").unwrap();
        ProgramFacts {
            producer: "looptime-test 0".into(),
            program: src.display().to_string(),
            sources: vec![src, dir.join("missing.py")],
            control_timing: true,
            timing_max_cycles: 500,
            nominal_period_ns: 10_000_000,
            spin_margin_ns: 200_000,
            spin_margin_auto: false,
            overrun_policy: "rebase",
            settings: BTreeMap::from([("duration_s".to_string(), serde_json::json!(2.5))]),
        }
    }

    fn read(p: &Path) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    }

    #[test]
    fn layout_running_then_aborted() {
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path().join("runs");
        let (mut ep, _) = HostEpisode::create(&runs, facts(tmp.path())).unwrap();
        assert_eq!(ep.dir().file_name().unwrap(), "rollout-000");
        assert_eq!(
            std::fs::canonicalize(runs.join("latest")).unwrap(),
            std::fs::canonicalize(ep.dir()).unwrap()
        );
        let m = read(&ep.dir().join("manifest.json"));
        assert_eq!(m["status"], "running");
        assert_eq!(m["config"]["run"]["control_timing"], true);
        assert_eq!(m["config"]["run"]["timing_max_cycles"], 500);
        assert_eq!(m["config"]["program"]["duration_s"], 2.5);
        // sha256 of "print('hi')\n", as `sha256sum` prints it.
        let hashes = &m["program"]["source_hashes"];
        let prog = tmp.path().join("prog.py").display().to_string();
        assert_eq!(hashes[&prog], sha256(b"print('hi')\n"));
        let missing = tmp.path().join("missing.py").display().to_string();
        assert!(hashes[&missing]
            .as_str()
            .unwrap()
            .starts_with("unreadable: "));
        let s = read(&ep.session().join("session.json"));
        assert_eq!(s["rollouts"][0]["state"], "running");
        assert_eq!(s["producer"], "looptime-test 0");

        ep.finish(&EpisodeEnd {
            complete: false,
            cycles: 7,
            evidence: true,
            ..EpisodeEnd::default()
        })
        .unwrap();
        let m = read(&ep.dir().join("manifest.json"));
        assert_eq!(m["status"], "aborted");
        assert_eq!(m["counts"]["cycles"], 7);
        assert_eq!(m["files"].as_array().unwrap().len(), 3);
        let s = read(&ep.session().join("session.json"));
        assert_eq!(s["rollouts"][0]["state"], "aborted");
        assert_eq!(s["status"], "aborted");
        assert!(ep.is_finished());
    }

    #[test]
    fn unwritable_runs_directory_is_an_error_naming_it() {
        let err = HostEpisode::create(
            Path::new("/proc/self/looptime-runs"),
            facts(tempfile::tempdir().unwrap().path()),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("/proc/self/looptime-runs"),
            "{err}"
        );
    }
}
