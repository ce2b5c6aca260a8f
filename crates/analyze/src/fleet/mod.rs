//! `fleet`: every episode under some roots, analyzed in parallel with
//! bounded memory, into one table with a row per episode and phase
//! (docs/fleet.md).
//!
//! Each episode gets exactly the analysis `report` gives it ([`analyze`]);
//! the table is a view of those reports, not a second computation. A fixed
//! number of workers take episodes one at a time, so at most `jobs`
//! episodes are held in memory at once, whatever the fleet's size. An
//! episode that cannot be read (or that trips an internal error) becomes a
//! [`Failure`] and the batch goes on.
//!
//! Modules: [`outliers`] (the worst lists and the robust outlier rule, over
//! the rows) and [`table`] (the files written), both below this one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use serde::Serialize;

use crate::analysis::{analyze, Analysis};
use crate::error::Result;
use crate::evidence::{find_episodes, load_episode, LoadOptions, Search};
use crate::export::parquet::Partition;
use crate::metrics::Dist;

pub mod outliers;
pub mod sources;
pub mod table;

pub use outliers::{Outlier, OutlierMetric, OUTLIER_MIN_ROWS, OUTLIER_Z};

/// One row of the fleet table: one phase of one episode's control thread.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetRow {
    /// Partition keys, as in the dataset ([`Partition`]).
    pub robot: String,
    /// The session.
    pub session: String,
    /// The rollout.
    pub rollout: String,
    /// The episode directory's canonical path (an episode's identity).
    pub episode_dir: String,
    /// The manifest's `created_utc`.
    pub created_utc: Option<String>,
    /// The manifest's `config_hash`.
    pub config_hash: Option<String>,
    /// The manifest's `source_hash`.
    pub source_hash: Option<String>,
    /// The episode's state (`complete`, `aborted`, `recovered`, `incomplete`).
    pub state: String,
    /// How many caveats the report has.
    pub n_caveats: u64,
    /// The report's caveats.
    pub caveats: Vec<String>,
    /// The phase.
    pub phase: String,
    /// Retained cycles of the phase.
    pub cycles: u64,
    /// Its segments.
    pub segments: u64,
    /// The header's nominal period.
    pub nominal_period_ns: Option<u64>,
    /// Loop Hz (1e9 / mean period).
    pub loop_hz: Option<f64>,
    /// Nearest-rank period percentiles.
    pub period_p50_ns: Option<i64>,
    /// p99 of the period.
    pub period_p99_ns: Option<i64>,
    /// p99.9 of the period.
    pub period_p999_ns: Option<i64>,
    /// Overdue cycles.
    pub overruns: u64,
    /// `1000 · overruns / cycles`.
    pub overruns_per_1000: Option<f64>,
    /// p99 of the work duration.
    pub work_p99_ns: Option<i64>,
    /// The top-level (depth 0) stage group (its name, then `[k=v;…]` when
    /// it has attributes) with the largest wall p99 in the phase.
    pub top_stage: Option<String>,
    /// That group's wall p99.
    pub top_stage_p99_ns: Option<i64>,
    /// The session's label (`serve --label`, a program's `--label`), as
    /// the manifest records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// A readable name of the configuration: the session's label (`serve
    /// --label`), else the config file's name (`spiky.toml`), else the
    /// manifest's `config_source` as it is (`embedded default`).
    pub config_name: Option<String>,
    /// Data age: the largest age-at-use p99 among the phase's sources, in
    /// ms (absent without data age).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age_p99_ms: Option<f64>,
    /// The largest stale share among the phase's sources with a limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_stale_share: Option<f64>,
    /// Budget overruns (work longer than the declared compute budget;
    /// absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_overruns: Option<u64>,
    /// `1000 · budget overruns / judged cycles`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_overruns_per_1000: Option<f64>,
    /// Completion misses (an end later than the next release point plus
    /// the declared deadline tolerance; absent without one, or with no
    /// release point to judge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_misses: Option<u64>,
    /// `1000 · completion misses / judged cycles`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_misses_per_1000: Option<f64>,
    /// The phase's input-paced figures (absent for a phase without
    /// input-paced cycles): docs/metrics.md, Input-paced phases.
    #[serde(flatten)]
    pub input: InputColumns,
}

/// An input-paced phase's columns of the fleet table and the dataset's
/// `phases` table (all absent for a deadline-paced phase).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputColumns {
    /// Arrivals per second (`arrival_hz`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_hz: Option<f64>,
    /// Answer latency p50.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_latency_p50_ns: Option<i64>,
    /// Answer latency p99.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_latency_p99_ns: Option<i64>,
    /// Answers later than the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_answers: Option<u64>,
    /// `late_answers / answers`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_share: Option<f64>,
    /// Inputs the counter says were lost, by cause (absent without a
    /// counter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_before_arrival: Option<u64>,
    /// Lost right after a late answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_after_late_answer: Option<u64>,
    /// Discarded in a burst.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_discarded: Option<u64>,
    /// Bursts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bursts: Option<u64>,
    /// The robot's success rate: mean.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_rate_mean: Option<f64>,
    /// The robot's success rate: minimum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_rate_min: Option<f64>,
}

impl InputColumns {
    /// The columns of `p`, an input-paced phase's figures.
    fn of(p: &crate::metrics::InputPhase) -> Self {
        InputColumns {
            arrival_hz: p.arrival_hz,
            answer_latency_p50_ns: p.answer_latency.as_ref().map(|d| d.p50_ns),
            answer_latency_p99_ns: p.answer_latency.as_ref().map(|d| d.p99_ns),
            late_answers: Some(p.late_answers),
            late_share: p.late_share,
            lost_before_arrival: p.lost.as_ref().map(|l| l.before_arrival),
            lost_after_late_answer: p.lost.as_ref().map(|l| l.after_late_answer),
            lost_discarded: p.lost.as_ref().map(|l| l.discarded_in_bursts),
            bursts: Some(p.bursts.count),
            success_rate_mean: p.success_rate.as_ref().map(|s| s.mean),
            success_rate_min: p.success_rate.as_ref().map(|s| s.min),
        }
    }
}

impl FleetRow {
    /// The period p99 in nominal periods: the quantity the worst list and
    /// the period outlier rule rank by.
    pub fn period_p99_rel(&self) -> Option<f64> {
        ratio(self.period_p99_ns, self.nominal_period_ns)
    }

    /// The work p99 in nominal periods.
    pub fn work_p99_rel(&self) -> Option<f64> {
        ratio(self.work_p99_ns, self.nominal_period_ns)
    }
}

fn ratio(x: Option<i64>, nominal: Option<u64>) -> Option<f64> {
    match (x, nominal) {
        (Some(x), Some(n)) if n > 0 => Some(x as f64 / n as f64),
        _ => None,
    }
}

/// An episode the batch could not analyze.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The episode directory's canonical path.
    pub dir: PathBuf,
    /// The kind of error ([`crate::AnalyzeError::kind`], or `internal` for
    /// a caught panic).
    pub kind: String,
    /// What was wrong, with what to do (the loader's message).
    pub message: String,
}

/// The fleet's analysis.
#[derive(Clone, Debug, Default)]
pub struct Fleet {
    /// One row per analyzed episode and phase, in episode-path order.
    pub rows: Vec<FleetRow>,
    /// Data age: one row per analyzed episode, phase and source
    /// (`fleet_sources`), in episode-path order.
    pub sources: Vec<sources::SourceRow>,
    /// The episodes that could not be analyzed, in path order.
    pub failures: Vec<Failure>,
    /// Episodes found under the roots.
    pub found: usize,
    /// Episodes analyzed.
    pub analyzed: usize,
    /// JSONL bytes read (every thread's) of the analyzed episodes.
    pub bytes: u64,
    /// Retained control-thread cycles of the analyzed episodes.
    pub cycles: u64,
}

/// Every episode directory under `roots` (the shared finder's tree
/// search, [`crate::evidence::find`]): those with evidence and those
/// without, as canonical paths, each once, sorted. The ones without
/// evidence are analyzed too, so that they fail with the loader's
/// explanation (which says whether `looptime recover` can help).
///
/// # Errors
/// [`crate::AnalyzeError::MissingDirectory`] or
/// [`crate::AnalyzeError::NotADirectory`] for a root that is not a directory.
pub fn discover(roots: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let found = find_episodes(roots, Search::Tree)?;
    let mut all: Vec<PathBuf> = found
        .episodes
        .iter()
        .chain(&found.without_evidence)
        .map(|p| crate::evidence::identity(p))
        .collect();
    all.sort();
    all.dedup();
    Ok(all)
}

/// What one episode gave.
enum Outcome {
    Rows {
        rows: Vec<FleetRow>,
        sources: Vec<sources::SourceRow>,
        bytes: u64,
        cycles: u64,
    },
    Failed {
        kind: String,
        message: String,
    },
}

/// Analyze every episode in `dirs` on `jobs` workers (at least one).
/// `done` is called once per episode, from the worker that finished it,
/// with the directory and whether it failed.
///
/// Nothing found is lost: each episode's outcome goes into a slot of its
/// own as soon as it is known, and an episode whose slot is still empty
/// after every worker has stopped (its worker died outside the
/// per-episode guard, in `done` for example) becomes a failure of kind
/// `internal`. So `found == analyzed + failures.len()` always holds
/// ([`Fleet::is_whole`]).
pub fn analyze_all(
    dirs: &[PathBuf],
    jobs: usize,
    load: &LoadOptions,
    done: &(dyn Fn(&Path, bool) + Sync),
) -> Fleet {
    let mut load = load.clone();
    load.progress = false;
    let next = AtomicUsize::new(0);
    let jobs = jobs.clamp(1, dirs.len().max(1));
    let slots: Vec<OnceLock<Outcome>> = dirs.iter().map(|_| OnceLock::new()).collect();
    let deaths: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(dir) = dirs.get(i) else { break };
                    let o = one(dir, &load);
                    let failed = matches!(o, Outcome::Failed { .. });
                    // The slot is set before `done` runs, so a panic in
                    // `done` cannot lose this episode's outcome.
                    let _ = slots[i].set(o);
                    done(dir, failed);
                })
            })
            .collect();
        workers
            .into_iter()
            .filter_map(|w| w.join().err().map(|p| panic_text(&*p)))
            .collect()
    });
    let mut fleet = Fleet {
        found: dirs.len(),
        ..Fleet::default()
    };
    for (dir, slot) in dirs.iter().zip(slots) {
        match slot.into_inner() {
            Some(Outcome::Rows {
                rows,
                sources,
                bytes,
                cycles,
            }) => {
                fleet.analyzed += 1;
                fleet.bytes += bytes;
                fleet.cycles += cycles;
                fleet.rows.extend(rows);
                fleet.sources.extend(sources);
            }
            Some(Outcome::Failed { kind, message }) => fleet.failures.push(Failure {
                dir: dir.clone(),
                kind,
                message,
            }),
            None => fleet.failures.push(Failure {
                dir: dir.clone(),
                kind: "internal".into(),
                message: format!(
                    "internal error: the worker analyzing it stopped ({}); the rest of the fleet was analyzed; please report this episode",
                    if deaths.is_empty() { "unknown".to_string() } else { deaths.join("; ") }
                ),
            }),
        }
    }
    fleet
}

impl Fleet {
    /// Whether every episode found is accounted for: analyzed or listed
    /// as a failure. `run_fleet` checks it before it exits.
    pub fn is_whole(&self) -> bool {
        self.found == self.analyzed + self.failures.len()
    }
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown".into())
}

/// One episode, with a panic (an internal error) turned into a failure so
/// that it cannot stop the batch.
fn one(dir: &Path, load: &LoadOptions) -> Outcome {
    let run = || -> Result<Outcome> {
        let a = analyze(load_episode(dir, load.clone())?)?;
        let ev = &a.evidence;
        Ok(Outcome::Rows {
            rows: rows(&a),
            sources: sources::source_rows(&a),
            bytes: ev.bytes + ev.threads.iter().map(|t| t.bytes).sum::<u64>(),
            cycles: ev.cycles.len() as u64,
        })
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => Outcome::Failed {
            kind: e.kind().to_string(),
            message: looptime_capture::error_chain(&e),
        },
        Err(panic) => {
            let what = panic_text(&*panic);
            Outcome::Failed {
                kind: "internal".into(),
                message: format!(
                    "internal error while analyzing it ({what}); the rest of the fleet was analyzed; please report this episode"
                ),
            }
        }
    }
}

fn known(d: &Option<Dist>) -> Option<&Dist> {
    d.as_ref().filter(|d| d.count > 0)
}

/// A readable name of `a`'s configuration ([`FleetRow::config_name`]).
fn config_name(a: &Analysis) -> Option<String> {
    let run = &a.report.run;
    run.label.clone().or_else(|| {
        run.config_source.as_ref().map(|s| {
            let p = std::path::Path::new(s);
            if p.extension().is_some() {
                p.file_name()
                    .map_or(s.clone(), |n| n.to_string_lossy().into_owned())
            } else {
                s.clone()
            }
        })
    })
}

/// `1000 · count / judged` of a declared limit's misses (none judged: none).
fn per_1000(m: &crate::metrics::Misses) -> Option<f64> {
    (m.judged > 0).then(|| 1000.0 * m.count as f64 / m.judged as f64)
}

/// The table rows of one analyzed episode: one per phase of its report.
pub fn rows(a: &Analysis) -> Vec<FleetRow> {
    let (ev, report) = (&a.evidence, &a.report);
    let ages = sources::source_rows(a);
    let part = Partition::of(ev);
    let text = |p: &str| ev.manifest_str(p);
    let state = report.state.name().to_string();
    report
        .phases
        .iter()
        .map(|p| {
            let declared = report
                .budget
                .as_ref()
                .and_then(|b| b.phases.iter().find(|bp| bp.phase == p.phase));
            let over = declared.and_then(|d| d.budget_overruns.as_ref());
            let completion = declared.and_then(|d| d.completion_misses.as_ref());
            let top = report
                .stages
                .iter()
                .filter(|s| s.phase == p.phase && s.depth == 0 && s.wall.count > 0)
                .max_by_key(|s| s.wall.p99_ns);
            FleetRow {
                robot: part.robot.clone(),
                session: part.session.clone(),
                rollout: part.rollout.clone(),
                episode_dir: ev.dir.display().to_string(),
                created_utc: text("/created_utc"),
                config_hash: text("/config_hash"),
                source_hash: text("/source_hash"),
                state: state.clone(),
                n_caveats: report.caveats.len() as u64,
                caveats: report.caveats.clone(),
                phase: p.phase.clone(),
                cycles: p.cycles,
                segments: p.segments,
                nominal_period_ns: ev.header.nominal_period_ns,
                loop_hz: p.loop_hz,
                period_p50_ns: known(&p.period).map(|d| d.p50_ns),
                period_p99_ns: known(&p.period).map(|d| d.p99_ns),
                period_p999_ns: known(&p.period).map(|d| d.p999_ns),
                overruns: p.overruns,
                overruns_per_1000: (p.cycles > 0)
                    .then(|| 1000.0 * p.overruns as f64 / p.cycles as f64),
                work_p99_ns: known(&p.work).map(|d| d.p99_ns),
                top_stage: top.map(|s| crate::evidence::group_name(&s.path, &s.attrs)),
                top_stage_p99_ns: top.map(|s| s.wall.p99_ns),
                label: report.run.label.clone(),
                config_name: config_name(a),
                max_age_p99_ms: sources::worst_of(&ages, &p.phase).0,
                max_stale_share: sources::worst_of(&ages, &p.phase).1,
                budget_overruns: over.map(|m| m.count),
                budget_overruns_per_1000: over.and_then(per_1000),
                completion_misses: completion.map(|m| m.count),
                completion_misses_per_1000: completion.and_then(per_1000),
                input: report
                    .input_paced
                    .as_ref()
                    .and_then(|ip| ip.phases.iter().find(|x| x.phase == p.phase))
                    .map(InputColumns::of)
                    .unwrap_or_default(),
            }
        })
        .collect()
}
