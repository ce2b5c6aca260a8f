//! The report's types: what every metric family produces, assembled into
//! one [`Report`], the diagnosis's among them. They sit below the code that
//! fills them (`diagnosis`, `table` and the other metric files import them;
//! this file imports none of those). Field docs state each figure's unit; docs/metrics.md
//! gives its definition. The first glance's cards and their thresholds
//! are in `cards`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod age;
mod budget;
mod cards;
mod input;
pub use age::*;
pub use budget::*;
pub use cards::*;
pub use input::*;

/// What the loop's schedule was meant to be, as far as the files tell.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Pace {
    /// A period on host time: `effective_ns` = nominal / rtf.
    Paced {
        /// The header's nominal period.
        nominal_ns: u64,
        /// The period the schedule ran at.
        effective_ns: u64,
        /// The real-time factor.
        rtf: f64,
    },
    /// rtf 0: scheduled on the simulation clock, as fast as the work allows.
    Uncapped,
    /// No nominal period in the header.
    Unknown,
}

/// A stage that held the largest share of over-budget cycles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageBlame {
    /// Tree path of the top-level stage.
    pub path: String,
    /// Over-budget cycles in which it was the longest top-level span.
    pub cycles: u64,
    /// `cycles` / all over-budget cycles.
    pub share: f64,
}

/// Per-cycle attribution of the late cycles of the judged phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// The judged phase.
    pub phase: String,
    /// The work budget: the effective period.
    pub budget_ns: u64,
    /// Deadline lag over this counts as a late start; absent when the
    /// clocks are not comparable (then only overdue cycles count).
    pub late_start_threshold_ns: Option<u64>,
    /// Cycles of the phase with a predecessor in their segment (judged).
    pub judged: u64,
    /// Judged cycles that were overdue or started later than the threshold.
    pub late: u64,
    /// Late cycles whose predecessor's work exceeded the budget.
    pub work_over_budget: u64,
    /// Late cycles whose predecessor's work was within the budget: the time
    /// was lost in the wait and wake path (or carried from earlier).
    pub late_wake: u64,
    /// Late cycles whose predecessor has no end of work (an open cycle).
    pub unattributed: u64,
    /// Longest top-level stage of each over-budget predecessor, by count.
    pub stages: Vec<StageBlame>,
    /// `budget_ns` is the compute budget the evidence declares, not the
    /// effective period (absent from the JSON when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_declared: bool,
    /// `late_start_threshold_ns` is the declared deadline tolerance, not
    /// 10 % of the effective period (absent from the JSON when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tolerance_declared: bool,
}

/// One background thread, analyzed from its own file like an episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    /// The thread's name.
    pub thread: String,
    /// Its OS thread id, when it recorded a cycle.
    pub tid: Option<u64>,
    /// Its JSONL, relative to the episode.
    pub file: String,
    /// Complete, aborted, recovered or incomplete (from its own summary).
    pub state: EpisodeState,
    /// True when it marks no cycles: each top-level span is a cycle, so
    /// its phases' rates are span rates.
    pub implicit_cycles: bool,
    /// What was kept and lost.
    pub capture: CaptureReport,
    /// Its phases (for a poll loop, its rate and period).
    pub phases: Vec<PhaseReport>,
    /// Its stages.
    pub stages: Vec<StageReport>,
    /// Its callbacks by name, when its spans carry a `name` attribute
    /// (`looptime.ros`'s executor threads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callbacks: Vec<CallbackReport>,
    /// Its caller values, as the control thread's (`looptime.ros`'s
    /// executor threads record each message's DDS leg).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<ValueReport>,
}

/// One named callback of a background thread in one phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallbackReport {
    /// The phase.
    pub phase: String,
    /// The callback's `name` attribute.
    pub name: String,
    /// Its `kind` attribute (`timer`, `subscription`, `service`).
    pub kind: Option<String>,
    /// Its calls (top-level spans).
    pub calls: u64,
    /// Start-to-start intervals of its successive calls (ns).
    pub period: Option<Dist>,
    /// Its declared period (ns; a timer's), from the control header's
    /// `period_ns.NAME`.
    pub period_ns: Option<u64>,
    /// With a declared period: Σ max(0, round(interval / period) − 1).
    pub skipped: Option<u64>,
}

/// How much of one control-loop stage's wall time a background thread was
/// busy: the contention question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverlapReport {
    /// Phase of the control thread.
    pub phase: String,
    /// Control-loop stage.
    pub stage: String,
    /// Its tree path.
    pub path: String,
    /// The background thread.
    pub thread: String,
    /// Control spans counted: those inside the thread's recorded window.
    pub spans: u64,
    /// Their summed wall time (ns).
    pub wall_ns: i64,
    /// Of that, the time (ns) during which the thread had a span open.
    pub overlap_ns: i64,
    /// `overlap_ns / wall_ns`, rounded to 10⁻⁴; absent when `wall_ns` is 0.
    pub share: Option<f64>,
}

/// Report format identifier.
pub const REPORT_FORMAT: &str = "looptime-analysis/1";

/// A distribution in nanoseconds (signed: lag can be negative).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    /// Values.
    pub count: u64,
    /// Mean (ns), rounded to 0.1 ns.
    pub mean_ns: f64,
    /// Smallest.
    pub min_ns: i64,
    /// Median.
    pub p50_ns: i64,
    /// 90th percentile.
    pub p90_ns: i64,
    /// 99th percentile.
    pub p99_ns: i64,
    /// 99.9th percentile.
    pub p999_ns: i64,
    /// Largest.
    pub max_ns: i64,
}

/// How the capture ended, as far as the files tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeState {
    /// Summary present, status complete.
    Complete,
    /// Summary present, status aborted (orderly abort).
    Aborted,
    /// Summary present, status recovered: rebuilt by `looptime recover` from
    /// the ring file of a process that died. Treated like aborted.
    Recovered,
    /// No (usable) summary: the run ended abruptly or the finish was interrupted.
    Incomplete,
}

impl EpisodeState {
    /// Its name as the report's JSON writes it (`complete`, …).
    pub fn name(self) -> &'static str {
        match self {
            EpisodeState::Complete => "complete",
            EpisodeState::Aborted => "aborted",
            EpisodeState::Recovered => "recovered",
            EpisodeState::Incomplete => "incomplete",
        }
    }
}

/// What was captured and what was lost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaptureReport {
    /// Ring capacity (cycles).
    pub capacity_cycles: u64,
    /// Cycles read from the JSONL.
    pub retained_cycles: u64,
    /// Earlier cycles dropped by the ring's overflow (from the summary;
    /// absent when incomplete). For a recovered episode, the cycles that
    /// were in progress or torn at the kill are not counted here but in
    /// `lost_at_kill`.
    pub dropped_cycles: Option<u64>,
    /// Recovered episodes only: cycles in progress (or torn) at the kill,
    /// not retained (`recovery.in_progress_records + torn_records`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_at_kill: Option<u64>,
    /// Spans dropped in the retained cycles (sum of their `spans_dropped`).
    pub spans_dropped_retained: u64,
    /// Spans dropped over the whole run (from the summary).
    pub spans_dropped_total: Option<u64>,
    /// Caller values that were set but not written because they were not
    /// finite (from the summary; absent when the summary predates the
    /// count or is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values_dropped: Option<u64>,
    /// First retained cycle index.
    pub first_cycle: Option<u64>,
    /// Last retained cycle index.
    pub last_cycle: Option<u64>,
    /// Seconds from the first to the last retained cycle start.
    pub span_s: Option<f64>,
    /// Lines skipped by --lenient.
    pub lines_skipped: u64,
    /// The JSONL's last line was cut off.
    pub truncated_last_line: bool,
    /// Nominal period from the header.
    pub nominal_period_ns: Option<u64>,
    /// The recorder's own cost, from the header.
    pub overhead: looptime_capture::format::Overhead,
    /// Where the recorder read the thread's CPU clock (`spans`, `cycle` or
    /// `off`; older files without the header field read as `spans` or
    /// `off`): which CPU figures the report can have.
    #[serde(default)]
    pub thread_cpu: looptime_capture::CpuTimeMode,
}

/// One phase kind (all its segments together).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseReport {
    /// Phase name.
    pub phase: String,
    /// Continuous segments of this phase.
    pub segments: u64,
    /// Cycles.
    pub cycles: u64,
    /// `1e9 / mean(period_ns)` over adjacent starts within segments.
    pub loop_hz: Option<f64>,
    /// Start-to-start intervals within segments.
    pub period: Option<Dist>,
    /// `end_ns − start_ns`.
    pub work: Option<Dist>,
    /// `wake_ns − target_ns` of cycles that waited and were not overdue.
    pub sleep_overshoot: Option<Dist>,
    /// `start_ns − target_ns`.
    pub deadline_lag: Option<Dist>,
    /// The work's thread CPU time, per cycle (`cycle` CPU-time mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_cpu: Option<Dist>,
    /// `max(0, work − work CPU)`, per cycle (`cycle` mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<Dist>,
    /// `Σ off-CPU / Σ work` over the cycles with a work CPU time: the share
    /// of the work's wall time the thread did not run (`cycle` mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu_share: Option<f64>,
    /// The scheduler's spin before the cycles: the margin's range and
    /// changes, and what spinning cost; absent when no cycle recorded its
    /// margin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin: Option<SpinReport>,
    /// Cycles whose release point had passed.
    pub overruns: u64,
    /// Release points skipped.
    pub skipped: u64,
    /// Command submissions (command-stage spans).
    pub commands: u64,
    /// `1e9 / mean` of adjacent command-span starts within segments.
    pub command_hz: Option<f64>,
}

/// Which run a report describes (docs/metrics.md, "Which run").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunIdentity {
    /// The episode directory with a final link resolved (`runs/latest` →
    /// `runs/session-…/rollout-000`), as given otherwise.
    pub dir: String,
    /// The session's label (`serve --label`, the manifest's
    /// `config.run.label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The manifest's session.
    pub session: Option<String>,
    /// The manifest's rollout.
    pub rollout: Option<String>,
    /// The manifest's `config_source`.
    pub config_source: Option<String>,
    /// The manifest's `config_hash`.
    pub config_hash: Option<String>,
    /// The manifest's `host.hostname`.
    pub host: Option<String>,
    /// The manifest's `created_utc`.
    pub created_utc: Option<String>,
}

impl RunIdentity {
    /// `session/rollout` when the manifest names them, else the resolved
    /// directory's last component.
    pub fn short(&self) -> String {
        match (&self.session, &self.rollout) {
            (Some(s), Some(r)) => format!("{s}/{r}"),
            _ => std::path::Path::new(&self.dir)
                .file_name()
                .map_or_else(|| self.dir.clone(), |n| n.to_string_lossy().into_owned()),
        }
    }

    /// One line for a report's header.
    pub fn line(&self) -> String {
        let mut parts = vec![format!("{} ({})", self.short(), self.dir)];
        if let Some(l) = &self.label {
            parts.insert(0, format!("label {l}"));
        }
        if let Some(c) = &self.config_source {
            parts.push(format!(
                "config {c}{}",
                self.config_hash
                    .as_ref()
                    .map_or(String::new(), |h| format!(" {}", &h[..h.len().min(19)]))
            ));
        }
        if let Some(h) = &self.host {
            parts.push(format!("host {h}"));
        }
        if let Some(t) = &self.created_utc {
            parts.push(format!("started {t}"));
        }
        parts.join(", ")
    }
}

/// The spin before a phase's cycles (docs/metrics.md, Spin).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpinReport {
    /// The lowest spin margin a wait used.
    pub margin_min_ns: i64,
    /// The highest.
    pub margin_max_ns: i64,
    /// Cycles whose margin differs from the one recorded before it.
    pub margin_changes: u64,
    /// Time spun per wait.
    pub spin: Option<Dist>,
    /// `Σ spin / Σ period` over the cycles with both: the share of one core
    /// the loop spent spinning.
    pub spin_share: Option<f64>,
}

/// One continuous segment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentReport {
    /// Position in time order.
    pub index: u64,
    /// Phase name.
    pub phase: String,
    /// First cycle index.
    pub first_cycle: u64,
    /// Last cycle index.
    pub last_cycle: u64,
    /// Cycles.
    pub cycles: u64,
    /// First to last start, seconds.
    pub duration_s: f64,
    /// `1e9 / mean(period_ns)`.
    pub loop_hz: Option<f64>,
    /// Start-to-start intervals.
    pub period: Option<Dist>,
    /// Overdue cycles.
    pub overruns: u64,
    /// Skipped release points.
    pub skipped: u64,
    /// Command submissions.
    pub commands: u64,
    /// Command submission rate.
    pub command_hz: Option<f64>,
}

/// One stage at one place of the nesting tree, with one attribute set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    /// Phase name.
    pub phase: String,
    /// Stage name.
    pub stage: String,
    /// Ancestors and the stage, `/`-joined.
    pub path: String,
    /// Nesting depth.
    pub depth: u32,
    /// Attributes.
    pub attrs: BTreeMap<String, String>,
    /// Spans.
    pub count: u64,
    /// Wall time.
    pub wall: Dist,
    /// CPU time, when measured.
    pub cpu: Option<Dist>,
    /// Mean wall time / nominal period.
    pub mean_share_of_period: Option<f64>,
    /// p99 wall time / nominal period.
    pub p99_share_of_period: Option<f64>,
}

impl StageReport {
    /// `stage [k=v,...]`, indented by `indent` once per nesting level.
    pub fn label(&self, indent: &str) -> String {
        let attrs: Vec<String> = self.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(
            "{}{}{}",
            indent.repeat(self.depth as usize),
            self.stage,
            if attrs.is_empty() {
                String::new()
            } else {
                format!(" [{}]", attrs.join(","))
            }
        )
    }
}

/// A caller value's figure: exact for `int` values, a float otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Number {
    /// An exact integer (min and max of an `int` value).
    Int(i64),
    /// A float.
    Float(f64),
}

/// A caller value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueReport {
    /// Name.
    pub name: String,
    /// Unit from the header.
    pub unit: String,
    /// Cycles where it was set.
    pub count: u64,
    /// Smallest (exact for `int` values).
    pub min: Option<Number>,
    /// Mean, rounded to 10⁻⁶ (a float for every kind).
    pub mean: Option<f64>,
    /// Largest (exact for `int` values).
    pub max: Option<Number>,
    /// For `int` sequence counters (`*_seq`): states lost, the sum of
    /// `max(0, Δ − 1)` over adjacent cycles of one segment that both set
    /// the value. Computed in exact integers, saturating at 2⁶⁴ − 1.
    pub lost: Option<u64>,
}

/// A compared figure: a number, or a name (a segment's phase).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Figure {
    /// A count, time or rate.
    Number(f64),
    /// A name.
    Text(String),
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Figure::Number(x) => write!(f, "{x}"),
            Figure::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// A summary figure that disagrees with the recomputation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Which figure.
    pub figure: String,
    /// Value in the summary.
    pub summary: Figure,
    /// Value recomputed from the JSONL.
    pub recomputed: Figure,
    /// Allowed difference (0 for names).
    pub tolerance: f64,
}

/// The cross-check of the saved summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    /// Figures compared.
    pub checked: u64,
    /// Figures that differ by more than the tolerance.
    pub mismatches: Vec<Mismatch>,
    /// Why nothing was checked.
    pub not_checked: Option<String>,
}

/// The whole analysis of one episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_FORMAT`].
    pub format: String,
    /// The episode directory as given.
    pub episode: String,
    /// Which run this is, beyond the path given (which `runs/latest` moves
    /// on from): the resolved directory, session, rollout, config, host
    /// and start, from the directory and its manifest.
    #[serde(default)]
    pub run: RunIdentity,
    /// Complete, aborted or incomplete.
    pub state: EpisodeState,
    /// The first glance: one card per phase, in phase order
    /// (docs/metrics.md, Summary).
    pub summary: Vec<PhaseCard>,
    /// The thresholds the cards were judged by.
    pub thresholds: Thresholds,
    /// Everything that limits what the numbers mean, shown first.
    pub caveats: Vec<String>,
    /// Capture metadata.
    pub capture: CaptureReport,
    /// Why sleep overshoot and deadline lag are absent, when they are.
    pub schedule_metrics_absent: Option<String>,
    /// Per phase kind, in order of first appearance.
    pub phases: Vec<PhaseReport>,
    /// Per segment, in time order.
    pub segments: Vec<SegmentReport>,
    /// Per stage, by phase, in tree order.
    pub stages: Vec<StageReport>,
    /// Caller values.
    pub values: Vec<ValueReport>,
    /// Background threads recorded into the episode (schema 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadReport>,
    /// Overlap of each control stage with each background thread's work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlap: Vec<OverlapReport>,
    /// Data age per declared source (schema 2; absent without sources).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_age: Option<DataAgeReport>,
    /// Input-paced phases' figures (absent when no cycle was released by
    /// an input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_paced: Option<InputPacedReport>,
    /// Budget overruns and completion misses against the compute budget
    /// and deadline tolerance the evidence declares (absent when it
    /// declares neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
    /// The schedule the run was judged against.
    pub pace: Pace,
    /// Per-cycle attribution of the judged phase's late cycles.
    pub late_cycles: Option<Lateness>,
    /// Diagnosis lines.
    pub diagnosis: Vec<String>,
    /// Cross-check of the summary.
    pub crosscheck: CrossCheck,
}

#[cfg(test)]
mod tests {
    use super::EpisodeState;

    #[test]
    fn a_states_name_is_what_the_json_says() {
        for s in [
            EpisodeState::Complete,
            EpisodeState::Aborted,
            EpisodeState::Recovered,
            EpisodeState::Incomplete,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
        }
    }
}
