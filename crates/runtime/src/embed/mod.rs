//! An episode written by a loop that is not `serve`: a Python program
//! (through `crates/python`) or a C/C++ program (through `crates/capture-c`)
//! that runs its own loop with looptime's scheduler and recorder.
//!
//! It writes the same layout as `serve`: a session holding one rollout
//! ([`HostEpisode::create`]) or several ([`HostSession`], as
//! `serve --episodes N` does), so that `compare` takes two session
//! directories of a program's own A/B:
//!
//! ```text
//! <runs>/session-<UTC>/session.json
//! <runs>/session-<UTC>/rollout-000/manifest.json
//! <runs>/session-<UTC>/rollout-000/control_timing.jsonl         (by the recorder's finish)
//! <runs>/session-<UTC>/rollout-000/control_timing_summary.json  (idem)
//! <runs>/session-<UTC>/rollout-001/...
//! <runs>/latest -> session-<UTC>/rollout-NNN
//! <runs>/latest-session -> session-<UTC>
//! ```
//!
//! and follows `serve`'s write order: a rollout's `running` manifest is
//! written and `latest` points at it before its first cycle, so a program
//! killed mid-run leaves an episode that `looptime recover` can complete;
//! [`HostEpisode::finish`] rewrites the manifest and `session.json` once the
//! evidence is written.
//!
//! The manifest has `serve`'s fields where they mean the same thing
//! (`config.run.control_timing`, `config.run.timing_max_cycles`,
//! `config.run.rtf`, `config.run.label`, `schedule`, `counts`, `host`,
//! `source_hash`), and a `program` record in place of `serve`'s
//! simulated-robot config: the program's path and the SHA-256 of each
//! source file it names.

mod session;

pub use session::{HostEpisode, HostSession};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::rt::RealtimeObtained;

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
    /// The real-time factor the loop ran at: 1 paced in real time, 0
    /// uncapped on the simulation clock, another value paced at
    /// `nominal / rtf` on the host clock (`config.run.rtf`, as `serve`).
    pub rtf: f64,
    /// The session's name (`config.run.label`, as `serve --label`), shown
    /// by every report and usable as a `compare` side name.
    pub label: Option<String>,
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

/// The manifest's `config`: `run` with the keys `serve` also writes (the
/// analyzer reads `run.control_timing` and `run.rtf`), and the program's
/// own settings under `program`, with a rollout's own settings (`extra`)
/// over the session's. serde_json's maps are sorted, so the text, and so
/// `config_hash`, depends only on the values.
///
/// A setting named `seed` (the session's or a rollout's) is the run's seed:
/// it goes to `run.seed`, the one seed key `serve` writes and `compare`
/// exempts from the differences between rollouts, never to
/// `program.seed`. A seed given as text of a whole number (the C API's
/// settings are text) is written as that number.
fn program_config(
    f: &ProgramFacts,
    extra: &BTreeMap<String, serde_json::Value>,
) -> serde_json::Value {
    let mut settings = f.settings.clone();
    settings.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    let mut run = serde_json::json!({
        "control_timing": f.control_timing,
        "timing_max_cycles": f.timing_max_cycles,
        "rate_hz": 1e9 / f.nominal_period_ns.max(1) as f64,
        "rtf": f.rtf,
    });
    if let Some(label) = &f.label {
        run["label"] = serde_json::Value::String(label.clone());
    }
    if let Some(seed) = settings.remove(SEED_KEY) {
        run[SEED_KEY] = match &seed {
            serde_json::Value::String(t) => t
                .trim()
                .parse::<i64>()
                .map_or(seed.clone(), serde_json::Value::from),
            _ => seed,
        };
    }
    serde_json::json!({ "run": run, "program": settings })
}

/// The setting that is the run's seed (`run.seed`).
pub const SEED_KEY: &str = "seed";

/// The scheduler's effective period and clock for `rtf`, as `serve` states
/// them in `schedule`: uncapped runs on the simulation clock at the nominal
/// period, paced runs on the host clock at `nominal / rtf`.
fn schedule_clock(f: &ProgramFacts) -> (u64, &'static str) {
    if f.rtf == 0.0 {
        (f.nominal_period_ns, "simulation")
    } else {
        (
            (f.nominal_period_ns as f64 / f.rtf).round() as u64,
            "host_monotonic",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_setting_is_the_runs_seed_never_the_programs() {
        // The session's settings hold a seed; a rollout's own seed (as the
        // C API's text) replaces it, and both land in run.seed as numbers.
        let mut f = session::tests::facts(tempfile::tempdir().unwrap().path());
        f.settings.insert("seed".into(), serde_json::json!(1));
        let c = program_config(&f, &BTreeMap::new());
        assert_eq!(c["run"]["seed"], 1);
        assert!(c["program"].get("seed").is_none(), "{c}");
        let extra = BTreeMap::from([("seed".to_string(), serde_json::json!("7"))]);
        let c = program_config(&f, &extra);
        assert_eq!(c["run"]["seed"], 7);
        assert!(c["program"].get("seed").is_none(), "{c}");
        assert_eq!(c["program"]["duration_s"], 2.5);
    }

    #[test]
    fn where_output_goes_is_not_hashed() {
        let with = |dir: &str| serde_json::json!({"run": {"rtf": 1.0}, "program": {"rate": 500, "runs_dir": dir}});
        let (a, b) = (hashed_config(&with("runs")), hashed_config(&with("/tmp/x")));
        assert_eq!(a, b);
        assert_eq!(a["program"]["rate"], 500);
        assert!(a["program"].get("runs_dir").is_none());
    }

    #[test]
    fn rtf_sets_the_clock_and_the_effective_period() {
        let mut f = session::tests::facts(tempfile::tempdir().unwrap().path());
        // 10 ms nominal (100 Hz): paced at rtf 2 the host releases every 5 ms.
        f.rtf = 2.0;
        assert_eq!(schedule_clock(&f), (5_000_000, "host_monotonic"));
        f.rtf = 0.0;
        assert_eq!(schedule_clock(&f), (10_000_000, "simulation"));
        f.label = Some("euler".into());
        let c = program_config(&f, &BTreeMap::from([("seed".into(), serde_json::json!(3))]));
        assert_eq!(c["run"]["rtf"], 0.0);
        assert_eq!(c["run"]["label"], "euler");
        assert_eq!(c["run"]["seed"], 3);
        assert_eq!(c["program"]["duration_s"], 2.5);
    }
}
