//! Every metric of the report, computed once, from the cycle and span
//! tables (polars `DataFrame`s). Definitions, units and exclusions are in
//! `docs/metrics.md`; this module is their only implementation.
//!
//! Percentiles are nearest-rank (polars `QuantileMethod::Equiprobable`: the
//! value at 1-based rank ⌈p·N⌉ of the sorted values), the same rank the
//! capture summary's histograms use.

use std::collections::{BTreeMap, HashMap};

use looptime_capture::{CaptureStatus, ClockDomain};
use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::load::Evidence;

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
    /// No (usable) summary: the run ended abruptly or the finish was interrupted.
    Incomplete,
}

/// What was captured and what was lost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaptureReport {
    /// Ring capacity (cycles).
    pub capacity_cycles: u64,
    /// Cycles read from the JSONL.
    pub retained_cycles: u64,
    /// Earlier cycles dropped by the ring (from the summary; absent when incomplete).
    pub dropped_cycles: Option<u64>,
    /// Spans dropped in the retained cycles (sum of their `spans_dropped`).
    pub spans_dropped_retained: u64,
    /// Spans dropped over the whole run (from the summary).
    pub spans_dropped_total: Option<u64>,
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
    /// Cycles whose release point had passed.
    pub overruns: u64,
    /// Release points skipped.
    pub skipped: u64,
    /// Command submissions (command-stage spans).
    pub commands: u64,
    /// `1e9 / mean` of adjacent command-span starts within segments.
    pub command_hz: Option<f64>,
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

/// Every caller value's count, min, mean, max and (for `int` `*_seq`
/// counters) lost states, in header order. `segment` is
/// [`CycleColumns::segment`].
pub fn value_reports(ev: &Evidence, segment: &[u32]) -> Vec<ValueReport> {
    use crate::load::Cell;
    let nv = ev.header.values.len();
    let n = ev.cycles.len();
    ev.header
        .values
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let cells = (0..n).map(|r| ev.values[r * nv + i]);
            let seq = info.name.ends_with("_seq") && info.kind == looptime_capture::ValueKind::Int;
            let (mut count, mut sum_i, mut sum_f) = (0u64, 0i128, 0f64);
            let (mut min, mut max): (Option<Number>, Option<Number>) = (None, None);
            let mut lost = 0u64;
            let mut before: Option<(u32, i64)> = None;
            for (r, c) in cells.enumerate() {
                match c {
                    Cell::Unset => {
                        before = None;
                        continue;
                    }
                    Cell::Int(v) => {
                        sum_i += v as i128;
                        min = Some(Number::Int(match min {
                            Some(Number::Int(m)) => m.min(v),
                            _ => v,
                        }));
                        max = Some(Number::Int(match max {
                            Some(Number::Int(m)) => m.max(v),
                            _ => v,
                        }));
                        if let Some((sg, b)) = before.filter(|(sg, _)| *sg == segment[r]) {
                            let _ = sg;
                            let gap = (v as i128 - b as i128 - 1).max(0);
                            lost = lost.saturating_add(u64::try_from(gap).unwrap_or(u64::MAX));
                        }
                        before = Some((segment[r], v));
                    }
                    Cell::Float(v) => {
                        sum_f += v;
                        min = Some(Number::Float(match min {
                            Some(Number::Float(m)) => m.min(v),
                            _ => v,
                        }));
                        max = Some(Number::Float(match max {
                            Some(Number::Float(m)) => m.max(v),
                            _ => v,
                        }));
                    }
                }
                count += 1;
            }
            let mean = (count > 0).then(|| {
                let total = sum_i as f64 + sum_f;
                ((total / count as f64) * 1e6).round() / 1e6
            });
            ValueReport {
                name: info.name.clone(),
                unit: info.unit.clone(),
                count,
                min,
                mean,
                max,
                lost: seq.then_some(lost),
            }
        })
        .collect()
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
    /// Complete, aborted or incomplete.
    pub state: EpisodeState,
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
    /// The schedule the run was judged against.
    pub pace: Pace,
    /// Per-cycle attribution of the judged phase's late cycles.
    pub late_cycles: Option<Lateness>,
    /// Diagnosis lines.
    pub diagnosis: Vec<String>,
    /// Cross-check of the summary.
    pub crosscheck: CrossCheck,
}

/// Per-cycle metric columns, one definition each (docs/metrics.md).
#[derive(Debug, Clone, Default)]
pub struct CycleColumns {
    /// Segment number: a new one at every phase change or index gap.
    pub segment: Vec<u32>,
    /// Phase index.
    pub phase: Vec<u32>,
    /// Start-to-start interval within the segment (None for its first cycle).
    pub period: Vec<Option<i64>>,
    /// `end_ns − start_ns`.
    pub work: Vec<Option<i64>>,
    /// `wake_ns − target_ns`, cycles that waited and were not overdue, when comparable.
    pub overshoot: Vec<Option<i64>>,
    /// `start_ns − target_ns`, when comparable.
    pub lag: Vec<Option<i64>>,
}

/// Compute [`CycleColumns`]; `comparable` says whether targets may be
/// subtracted from wake and start times.
pub fn cycle_columns(ev: &Evidence, comparable: bool) -> CycleColumns {
    let n = ev.cycles.len();
    let mut out = CycleColumns {
        segment: Vec::with_capacity(n),
        phase: Vec::with_capacity(n),
        period: Vec::with_capacity(n),
        work: Vec::with_capacity(n),
        overshoot: Vec::with_capacity(n),
        lag: Vec::with_capacity(n),
    };
    let mut seg = 0u32;
    let mut prev: Option<&crate::load::CycleRow> = None;
    for c in &ev.cycles {
        let same = prev.is_some_and(|p| p.phase == c.phase && p.cycle + 1 == c.cycle);
        if prev.is_some() && !same {
            seg += 1;
        }
        out.segment.push(seg);
        out.phase.push(c.phase);
        out.period
            .push(same.then(|| c.start_ns - prev.map_or(0, |p| p.start_ns)));
        out.work.push(c.end_ns.map(|e| e - c.start_ns));
        out.overshoot
            .push(match (comparable, c.overdue, c.wake_ns, c.target_ns) {
                (true, false, Some(w), Some(t)) => Some(w - t),
                _ => None,
            });
        out.lag.push(match (comparable, c.target_ns) {
            (true, Some(t)) => Some(c.start_ns - t),
            _ => None,
        });
        prev = Some(c);
    }
    out
}

/// Command submissions: one row per command-stage span.
#[derive(Debug, Clone, Default)]
pub struct CommandColumns {
    /// Segment of the span's cycle.
    pub segment: Vec<u32>,
    /// Phase of the span's cycle.
    pub phase: Vec<u32>,
    /// Interval from the previous command-span start in the same segment.
    pub interval: Vec<Option<i64>>,
}

/// Compute [`CommandColumns`] from the loader's command spans.
pub fn command_columns(ev: &Evidence, cycle_segment: &[u32]) -> CommandColumns {
    let m = ev.commands.len();
    let mut out = CommandColumns {
        segment: Vec::with_capacity(m),
        phase: Vec::with_capacity(m),
        interval: Vec::with_capacity(m),
    };
    let mut last: Option<(u32, i64)> = None;
    for &(row, start) in &ev.commands {
        let sg = cycle_segment[row as usize];
        out.segment.push(sg);
        out.phase.push(ev.cycles[row as usize].phase);
        out.interval
            .push(last.filter(|(s, _)| *s == sg).map(|(_, t)| start - t));
        last = Some((sg, start));
    }
    out
}

/// Whether a header's target clock can be subtracted from its wake and start clocks.
pub fn schedule_comparable(h: &looptime_capture::Header) -> bool {
    h.clocks.schedule_comparable()
}

/// The header's nominal period; 0 counts as absent (it is no period).
pub fn nominal_period(h: &looptime_capture::Header) -> Option<u64> {
    h.nominal_period_ns.filter(|&p| p > 0)
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

const QS: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)];

fn dist_aggs(c: &str) -> Vec<Expr> {
    dist_aggs_of(c, col(c))
}

/// The span table stores "not measured" CPU time as −1.
fn cpu_measured() -> Expr {
    col("cpu_ns").filter(col("cpu_ns").gt_eq(lit(0i64)))
}

fn dist_aggs_of(c: &str, e: Expr) -> Vec<Expr> {
    let mut v = vec![
        e.clone().count().alias(format!("{c}__count")),
        e.clone().mean().alias(format!("{c}__mean")),
        e.clone().min().alias(format!("{c}__min")),
        e.clone().max().alias(format!("{c}__max")),
    ];
    for (name, q) in QS {
        v.push(
            e.clone()
                .quantile(lit(q), QuantileMethod::Equiprobable)
                .alias(format!("{c}__{name}")),
        );
    }
    v
}

struct Table {
    df: DataFrame,
}

impl Table {
    fn f(&self, name: &str, i: usize) -> Result<Option<f64>> {
        let s = self
            .df
            .column(name)?
            .as_materialized_series()
            .cast(&DataType::Float64)?;
        Ok(s.f64()?.get(i))
    }
    fn u(&self, name: &str, i: usize) -> Result<u64> {
        Ok(self.f(name, i)?.unwrap_or(0.0) as u64)
    }
    fn height(&self) -> usize {
        self.df.height()
    }
    fn dist(&self, c: &str, i: usize) -> Result<Option<Dist>> {
        let count = self.u(&format!("{c}__count"), i)?;
        if count == 0 {
            return Ok(None);
        }
        let g =
            |s: &str| -> Result<i64> { Ok(self.f(&format!("{c}__{s}"), i)?.unwrap_or(0.0) as i64) };
        Ok(Some(Dist {
            count,
            mean_ns: r1(self.f(&format!("{c}__mean"), i)?.unwrap_or(0.0)),
            min_ns: g("min")?,
            p50_ns: g("p50")?,
            p90_ns: g("p90")?,
            p99_ns: g("p99")?,
            p999_ns: g("p999")?,
            max_ns: g("max")?,
        }))
    }
}

fn hz(mean_period: Option<f64>) -> Option<f64> {
    mean_period.filter(|m| *m > 0.0).map(|m| r4(1e9 / m))
}

/// Compute the report.
///
/// # Errors
/// Only on an internal aggregation failure.
pub fn analyze(ev: &Evidence) -> Result<Report> {
    let h = &ev.header;
    let clocks = &h.clocks;
    let comparable = schedule_comparable(h);
    let absent_reason = (!comparable).then(|| {
        format!(
            "sleep overshoot and deadline lag are not computed: target_ns is on the {} clock and wake_ns/start_ns on the {} clock, which cannot be subtracted{}",
            clocks.target_ns.as_str(),
            clocks.wake_ns.as_str(),
            if clocks.target_ns == ClockDomain::Simulation { " (an uncapped run schedules on simulation time)" } else { "" }
        )
    });
    let prof = std::env::var_os("LOOPTIME_PROFILE").is_some();
    let t0 = std::time::Instant::now();
    let lap = |what: &str| {
        if prof {
            eprintln!("[profile] {what}: {:.3} s", t0.elapsed().as_secs_f64());
        }
    };
    let n = ev.cycles.len();

    // ---- cycle table ----
    let cc = cycle_columns(ev, comparable);
    let cycle_segment = cc.segment.clone();
    let values_out = value_reports(ev, &cc.segment);
    let pace = pace(ev);
    let late_cycles = match judged_phase(ev) {
        Some(phase) => attribute_lateness(ev, &cc, phase, pace)?,
        None => None,
    };
    let segment = cc.segment;
    let phase = cc.phase;
    let cycle: Vec<u64> = ev.cycles.iter().map(|c| c.cycle).collect();
    let start: Vec<i64> = ev.cycles.iter().map(|c| c.start_ns).collect();
    let period = cc.period;
    let work = cc.work;
    let overshoot = cc.overshoot;
    let lag = cc.lag;
    let overdue: Vec<u32> = ev.cycles.iter().map(|c| c.overdue as u32).collect();
    let skipped: Vec<u32> = ev.cycles.iter().map(|c| c.skipped).collect();
    let cols = vec![
        Column::new("segment".into(), segment),
        Column::new("phase".into(), phase),
        Column::new("cycle".into(), cycle),
        Column::new("start_ns".into(), start),
        Column::new("period_ns".into(), period),
        Column::new("work_ns".into(), work),
        Column::new("overshoot_ns".into(), overshoot),
        Column::new("lag_ns".into(), lag),
        Column::new("overdue".into(), overdue),
        Column::new("skipped".into(), skipped),
    ];
    let cycles_df = DataFrame::new_infer_height(cols)?;
    lap("cycle table");

    // ---- span table: built by the loader, one chunk per parsed piece ----
    let spans_df = ev.spans.clone();
    let CommandColumns {
        segment: c_seg,
        phase: c_phase,
        interval: c_iv,
    } = command_columns(ev, &cycle_segment);
    let cmd_df = DataFrame::new_infer_height(vec![
        Column::new("segment".into(), c_seg),
        Column::new("phase".into(), c_phase),
        Column::new("cmd_interval_ns".into(), c_iv),
    ])?;
    lap("span and command tables");

    // ---- aggregates ----
    let mut aggs = vec![
        col("start_ns").count().alias("cycles"),
        col("segment").n_unique().alias("segments"),
        col("segment").min().alias("first_segment"),
        col("phase").first().alias("phase_of"),
        col("overdue").sum().alias("overruns"),
        col("skipped").sum().alias("skipped_sum"),
        col("cycle").min().alias("first_cycle"),
        col("cycle").max().alias("last_cycle"),
        col("start_ns").min().alias("first_start"),
        col("start_ns").max().alias("last_start"),
    ];
    for c in ["period_ns", "work_ns", "overshoot_ns", "lag_ns"] {
        aggs.extend(dist_aggs(c));
    }
    let by_phase = Table {
        df: cycles_df
            .clone()
            .lazy()
            .group_by([col("phase")])
            .agg(aggs.clone())
            .sort(["first_segment"], Default::default())
            .collect()?,
    };
    let by_segment = Table {
        df: cycles_df
            .clone()
            .lazy()
            .group_by([col("segment")])
            .agg(aggs.clone())
            .sort(["segment"], Default::default())
            .collect()?,
    };
    let cmd_aggs = [
        col("segment").count().alias("commands"),
        col("cmd_interval_ns").mean().alias("cmd_mean"),
    ];
    let cmd_by_segment = Table {
        df: cmd_df
            .clone()
            .lazy()
            .group_by([col("segment")])
            .agg(cmd_aggs.clone())
            .sort(["segment"], Default::default())
            .collect()?,
    };
    let cmd_by_phase = Table {
        df: cmd_df
            .lazy()
            .group_by([col("phase")])
            .agg(cmd_aggs)
            .sort(["phase"], Default::default())
            .collect()?,
    };
    lap("cycle aggregates");
    let mut stage_aggs = vec![col("wall_ns").count().alias("count")];
    stage_aggs.extend(dist_aggs("wall_ns"));
    stage_aggs.extend(dist_aggs_of("cpu_ns", cpu_measured()));
    // The summary's own groupings, for the cross-check: all cycles together
    // and stages by name across phases.
    let mut overall_aggs = dist_aggs("work_ns");
    overall_aggs.extend(dist_aggs("overshoot_ns"));
    overall_aggs.extend(dist_aggs("lag_ns"));
    let overall = Table {
        df: cycles_df.clone().lazy().select(overall_aggs).collect()?,
    };
    let mut name_aggs = vec![col("wall_ns").count().alias("count")];
    name_aggs.extend(dist_aggs("wall_ns"));
    name_aggs.extend(dist_aggs_of("cpu_ns", cpu_measured()));
    let by_stage_name = Table {
        df: spans_df
            .clone()
            .lazy()
            .group_by([col("stage")])
            .agg(name_aggs)
            .sort(["stage"], Default::default())
            .collect()?,
    };
    lap("stage-name aggregates");
    let mut view = crate::crosscheck::SummaryView {
        work: overall.dist("work_ns", 0)?,
        overshoot: overall.dist("overshoot_ns", 0)?,
        lag: overall.dist("lag_ns", 0)?,
        stages: Vec::new(),
    };
    for i in 0..by_stage_name.height() {
        let sid = by_stage_name.u("stage", i)? as usize;
        if let Some(wall) = by_stage_name.dist("wall_ns", i)? {
            view.stages.push((
                h.stages
                    .get(sid)
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
                by_stage_name.u("count", i)?,
                wall,
                by_stage_name.dist("cpu_ns", i)?,
            ));
        }
    }
    let by_stage = Table {
        df: spans_df
            .lazy()
            .group_by([col("key")])
            .agg(stage_aggs)
            .collect()?,
    };

    lap("stage aggregates");
    let find = |t: &Table, key: &str, v: f64| -> Result<Option<usize>> {
        for i in 0..t.height() {
            if t.f(key, i)? == Some(v) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    };

    let phase_name = |i: u64| h.phases.get(i as usize).cloned().unwrap_or_default();
    let mut phases = Vec::new();
    for i in 0..by_phase.height() {
        let pid = by_phase.u("phase", i)?;
        let period = by_phase.dist("period_ns", i)?;
        let cmd = find(&cmd_by_phase, "phase", pid as f64)?;
        phases.push(PhaseReport {
            phase: phase_name(pid),
            segments: by_phase.u("segments", i)?,
            cycles: by_phase.u("cycles", i)?,
            loop_hz: hz(period
                .as_ref()
                .map(|_| by_phase.f("period_ns__mean", i))
                .transpose()?
                .flatten()),
            period,
            work: by_phase.dist("work_ns", i)?,
            sleep_overshoot: by_phase.dist("overshoot_ns", i)?,
            deadline_lag: by_phase.dist("lag_ns", i)?,
            overruns: by_phase.u("overruns", i)?,
            skipped: by_phase.u("skipped_sum", i)?,
            commands: cmd
                .map(|j| cmd_by_phase.u("commands", j))
                .transpose()?
                .unwrap_or(0),
            command_hz: hz(cmd
                .map(|j| cmd_by_phase.f("cmd_mean", j))
                .transpose()?
                .flatten()),
        });
    }
    let mut segments = Vec::new();
    for i in 0..by_segment.height() {
        let sid = by_segment.u("segment", i)?;
        let period = by_segment.dist("period_ns", i)?;
        let cmd = find(&cmd_by_segment, "segment", sid as f64)?;
        let first = by_segment.f("first_start", i)?.unwrap_or(0.0);
        let last = by_segment.f("last_start", i)?.unwrap_or(0.0);
        segments.push(SegmentReport {
            index: sid,
            phase: phase_name(by_segment.u("phase_of", i)?),
            first_cycle: by_segment.u("first_cycle", i)?,
            last_cycle: by_segment.u("last_cycle", i)?,
            cycles: by_segment.u("cycles", i)?,
            duration_s: r4((last - first) / 1e9),
            loop_hz: hz(period
                .as_ref()
                .map(|_| by_segment.f("period_ns__mean", i))
                .transpose()?
                .flatten()),
            period,
            overruns: by_segment.u("overruns", i)?,
            skipped: by_segment.u("skipped_sum", i)?,
            commands: cmd
                .map(|j| cmd_by_segment.u("commands", j))
                .transpose()?
                .unwrap_or(0),
            command_hz: hz(cmd
                .map(|j| cmd_by_segment.f("cmd_mean", j))
                .transpose()?
                .flatten()),
        });
    }

    // Names of each group were recorded by the loader the first time its
    // key appeared. Rows are ordered by where each path first appeared, so
    // the stage tree reads top-down.
    let group_info: HashMap<u64, &crate::load::GroupDecode> =
        ev.groups.iter().map(|g| (g.key, g)).collect();
    let mut path_order: HashMap<u64, usize> = HashMap::new();
    for g in &ev.groups {
        if let Some(&own) = g.chain.last() {
            let n = path_order.len();
            path_order.entry(own).or_insert(n);
        }
    }
    let period_ns = nominal_period(h).map(|p| p as f64);
    let mut stages = Vec::new();
    for i in 0..by_stage.height() {
        let key = by_stage
            .df
            .column("key")?
            .as_materialized_series()
            .u64()?
            .get(i)
            .unwrap_or(0);
        let Some(info) = group_info.get(&key) else {
            continue;
        };
        let Some(wall) = by_stage.dist("wall_ns", i)? else {
            continue;
        };
        let order: Vec<usize> = info
            .chain
            .iter()
            .map(|k| path_order.get(k).copied().unwrap_or(usize::MAX))
            .collect();
        stages.push((
            (info.phase as u64, order, info.attrs.clone()),
            StageReport {
                phase: phase_name(info.phase as u64),
                stage: h
                    .stages
                    .get(info.stage as usize)
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
                path: info.path.clone(),
                depth: info.depth,
                attrs: info.attrs.clone(),
                count: by_stage.u("count", i)?,
                mean_share_of_period: period_ns.map(|p| r4(wall.mean_ns / p)),
                p99_share_of_period: period_ns.map(|p| r4(wall.p99_ns as f64 / p)),
                wall,
                cpu: by_stage.dist("cpu_ns", i)?,
            },
        ));
    }
    // Phases in report order, then tree order within a phase.
    let phase_order: Vec<String> = phases.iter().map(|p| p.phase.clone()).collect();
    stages.sort_by(|a, b| {
        let pa = phase_order.iter().position(|p| *p == a.1.phase);
        let pb = phase_order.iter().position(|p| *p == b.1.phase);
        (pa, &a.0 .1, &a.0 .2).cmp(&(pb, &b.0 .1, &b.0 .2))
    });
    let stages: Vec<StageReport> = stages.into_iter().map(|(_, s)| s).collect();

    let state = match (&ev.summary, &ev.summary_problem) {
        (Some(s), _) if s.status == CaptureStatus::Complete => EpisodeState::Complete,
        (Some(_), _) => EpisodeState::Aborted,
        _ => EpisodeState::Incomplete,
    };
    let summary = ev.summary.as_ref();
    let first = ev.cycles.first();
    let last = ev.cycles.last();
    let capture = CaptureReport {
        capacity_cycles: h.capacity.max_cycles,
        retained_cycles: n as u64,
        dropped_cycles: summary.map(|s| s.capture.dropped_cycles),
        spans_dropped_retained: ev.cycles.iter().map(|c| c.spans_dropped as u64).sum(),
        spans_dropped_total: summary.map(|s| s.capture.spans_dropped),
        first_cycle: first.map(|c| c.cycle),
        last_cycle: last.map(|c| c.cycle),
        span_s: first
            .zip(last)
            .map(|(f, l)| r4((l.start_ns - f.start_ns) as f64 / 1e9)),
        lines_skipped: ev.skipped_lines,
        truncated_last_line: ev.truncated_last_line,
        nominal_period_ns: nominal_period(h),
        overhead: h.overhead.clone(),
    };

    let mut caveats = Vec::new();
    match state {
        EpisodeState::Aborted => caveats.push("aborted: the run was stopped early (orderly abort); the evidence is complete up to the stop".to_string()),
        EpisodeState::Incomplete => caveats.push(match &ev.summary_problem {
            Some(p) => format!("incomplete: the summary is unusable ({p}); figures come from the JSONL only"),
            None => "incomplete: no control_timing_summary.json, so the run ended abruptly or its finish was interrupted; dropped counts are unknown".to_string(),
        }),
        EpisodeState::Complete => {}
    }
    if ev.truncated_last_line {
        caveats.push("truncated: the last line of control_timing.jsonl was cut off (an abrupt end) and was ignored".to_string());
    }
    if let Some(d) = capture.dropped_cycles.filter(|d| *d > 0) {
        caveats.push(format!("ring full: {d} earlier cycles were dropped; only the latest {n} were kept (raise run.timing_max_cycles to keep more)"));
    }
    let spans_dropped = capture
        .spans_dropped_total
        .unwrap_or(capture.spans_dropped_retained);
    if spans_dropped > 0 {
        caveats.push(format!("{spans_dropped} spans did not fit their cycle and were dropped; stage counts are low (raise run.timing_max_spans_per_cycle)"));
    }
    if ev.skipped_lines > 0 {
        caveats.push(format!(
            "--lenient skipped {} bad line(s): {}",
            ev.skipped_lines,
            ev.skipped_examples.join("; ")
        ));
    }
    if let Some(r) = &absent_reason {
        caveats.push(format!("clocks not comparable: {r}"));
    }
    if n == 0 {
        caveats.push("no cycles: the file has a header only".to_string());
    }
    if h.nominal_period_ns == Some(0) {
        caveats.push("nominal_period_ns is 0 in the header, which is no period: treated as absent, so no share of the period and no rate judgement".to_string());
    }
    if ev.manifest.is_none() {
        caveats.push("no manifest.json: the run's configuration, host and source are unknown, so a comparison cannot say what differed (the process most likely died after writing the evidence, or the file was removed)".to_string());
    }
    for t in &ev.leftover_temps {
        caveats.push(format!(
            "an interrupted finish left {} ({} bytes, process {}): {} was not completely written by that process",
            t.name, t.bytes, t.pid, t.target
        ));
    }
    let notes = ev.header_notes;
    if notes.bom {
        caveats.push("the JSONL starts with a UTF-8 byte-order mark, which the recorder never writes (the file was re-saved by another tool); it was ignored".to_string());
    }
    if notes.crlf {
        caveats.push("the JSONL has CRLF line endings, which the recorder never writes (the file was converted by another tool); they were read as LF".to_string());
    }
    if ev.blank_lines > 0 {
        caveats.push(format!(
            "{} blank line(s) between records, which the recorder never writes, were skipped",
            ev.blank_lines
        ));
    }

    let diagnosis = diagnose(&phases, pace, late_cycles.as_ref());
    let crosscheck = crate::crosscheck::check(summary, &capture, &segments, &view);

    Ok(Report {
        format: REPORT_FORMAT.to_string(),
        episode: ev.dir.display().to_string(),
        state,
        caveats,
        capture,
        schedule_metrics_absent: absent_reason,
        phases,
        segments,
        stages,
        values: values_out,
        pace,
        late_cycles,
        diagnosis,
        crosscheck,
    })
}

/// A late start's threshold, as a share of the effective period: a cycle
/// whose deadline lag exceeds it counts as late (besides overdue cycles).
pub const LATE_START_SHARE: f64 = 0.10;

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

/// The pace of `ev`: the nominal period from the header; rtf from the
/// manifest's `config.run.rtf`, else the header's `metadata.rtf`, else 1;
/// the effective period from the manifest's `schedule.effective_period_ns`,
/// else nominal / rtf. Targets on the simulation clock, or rtf 0, mean an
/// uncapped run.
pub fn pace(ev: &Evidence) -> Pace {
    let h = &ev.header;
    let Some(nominal) = nominal_period(h) else {
        return Pace::Unknown;
    };
    let m = ev.manifest.as_ref();
    let rtf = m
        .and_then(|m| m.pointer("/config/run/rtf"))
        .and_then(|v| v.as_f64())
        .or_else(|| h.metadata.get("rtf").and_then(|r| r.parse::<f64>().ok()))
        .filter(|r| r.is_finite() && *r >= 0.0)
        .unwrap_or(1.0);
    if rtf == 0.0 || h.clocks.target_ns == ClockDomain::Simulation {
        return Pace::Uncapped;
    }
    let effective = m
        .and_then(|m| m.pointer("/schedule/effective_period_ns"))
        .and_then(|v| v.as_u64())
        .filter(|&e| e > 0)
        .unwrap_or(((nominal as f64) / rtf).round().max(1.0) as u64);
    Pace::Paced {
        nominal_ns: nominal,
        effective_ns: effective,
        rtf,
    }
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
}

/// The phase the diagnosis judges: `running` when it has cycles, else the
/// phase with the most cycles, the earliest to appear winning a tie.
pub fn judged_phase(ev: &Evidence) -> Option<u32> {
    let mut counts: Vec<(u32, u64)> = Vec::new();
    for c in &ev.cycles {
        match counts.iter_mut().find(|(p, _)| *p == c.phase) {
            Some(e) => e.1 += 1,
            None => counts.push((c.phase, 1)),
        }
    }
    let running = counts.iter().find(|(p, _)| {
        ev.header
            .phases
            .get(*p as usize)
            .is_some_and(|n| n == "running")
    });
    let best = counts
        .iter()
        .fold(None, |best: Option<(u32, u64)>, &(p, n)| match best {
            Some((_, bn)) if bn >= n => best,
            _ => Some((p, n)),
        });
    running.copied().or(best).map(|(p, _)| p)
}

/// Attribute every late cycle of `phase` to its predecessor's work or to
/// the wake (docs/metrics.md, Diagnosis). `None` without a paced schedule.
pub fn attribute_lateness(
    ev: &Evidence,
    cc: &CycleColumns,
    phase: u32,
    pace: Pace,
) -> Result<Option<Lateness>> {
    let Pace::Paced { effective_ns, .. } = pace else {
        return Ok(None);
    };
    let budget = effective_ns as i64;
    let comparable = schedule_comparable(&ev.header);
    let threshold = comparable.then(|| (LATE_START_SHARE * effective_ns as f64).round() as i64);
    let wall = ev
        .spans
        .column("wall_ns")?
        .as_materialized_series()
        .i64()?
        .clone();
    let keys = ev
        .spans
        .column("key")?
        .as_materialized_series()
        .u64()?
        .clone();
    let groups: HashMap<u64, &crate::load::GroupDecode> =
        ev.groups.iter().map(|g| (g.key, g)).collect();
    let mut l = Lateness {
        phase: ev
            .header
            .phases
            .get(phase as usize)
            .cloned()
            .unwrap_or_default(),
        budget_ns: effective_ns,
        late_start_threshold_ns: threshold.map(|t| t as u64),
        judged: 0,
        late: 0,
        work_over_budget: 0,
        late_wake: 0,
        unattributed: 0,
        stages: Vec::new(),
    };
    let mut blame: Vec<(String, u64)> = Vec::new();
    for i in 1..ev.cycles.len() {
        // A predecessor in the same segment is what `period` requires.
        if cc.phase[i] != phase || cc.period[i].is_none() {
            continue;
        }
        l.judged += 1;
        let c = &ev.cycles[i];
        let lag_late = match (threshold, cc.lag[i]) {
            (Some(t), Some(lag)) => lag > t,
            _ => false,
        };
        if !(c.overdue || lag_late) {
            continue;
        }
        l.late += 1;
        match cc.work[i - 1] {
            None => l.unattributed += 1,
            Some(w) if w > budget => {
                l.work_over_budget += 1;
                let p = &ev.cycles[i - 1];
                let mut top: Option<(i64, &str)> = None;
                for row in p.span_row..p.span_row + p.n_spans as u64 {
                    let (Some(k), Some(wl)) = (keys.get(row as usize), wall.get(row as usize))
                    else {
                        continue;
                    };
                    let Some(g) = groups.get(&k).filter(|g| g.depth == 0) else {
                        continue;
                    };
                    if top.is_none_or(|(best, _)| wl > best) {
                        top = Some((wl, g.path.as_str()));
                    }
                }
                let name = top.map_or("(no top-level span)", |(_, n)| n);
                match blame.iter_mut().find(|(n, _)| n == name) {
                    Some(b) => b.1 += 1,
                    None => blame.push((name.to_string(), 1)),
                }
            }
            Some(_) => l.late_wake += 1,
        }
    }
    // Most cycles first; a tie keeps the order of first appearance.
    blame.sort_by_key(|b| std::cmp::Reverse(b.1));
    l.stages = blame
        .into_iter()
        .map(|(path, cycles)| StageBlame {
            share: r4(cycles as f64 / l.work_over_budget.max(1) as f64),
            path,
            cycles,
        })
        .collect();
    Ok(Some(l))
}

fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// The diagnosis lines: is it scheduling or the work? Built from the
/// per-cycle attribution; the rules are in docs/metrics.md.
pub fn diagnose(phases: &[PhaseReport], pace: Pace, late: Option<&Lateness>) -> Vec<String> {
    let (nominal, effective, rtf) = match pace {
        Pace::Unknown => {
            return vec!["no nominal period in the header: cannot judge the rate".into()]
        }
        Pace::Uncapped => {
            let p = phases
                .iter()
                .find(|p| p.phase == "running")
                .or(phases.first());
            return vec![match p {
                Some(p) => format!(
                    "{}: uncapped run (rtf 0, scheduled on the simulation clock): it ran as fast as its work allowed, {} Hz on the host; there is no host-time period to judge it against",
                    p.phase,
                    p.loop_hz.map_or("?".to_string(), |h| format!("{h:.2}"))
                ),
                None => "no cycles to judge".into(),
            }];
        }
        Pace::Paced {
            nominal_ns,
            effective_ns,
            rtf,
        } => (nominal_ns, effective_ns, rtf),
    };
    let Some(late) = late else {
        return vec!["no cycles to judge".into()];
    };
    let Some(p) = phases.iter().find(|p| p.phase == late.phase) else {
        return vec!["no cycles to judge".into()];
    };
    let (Some(per), Some(work)) = (&p.period, &p.work) else {
        return vec![format!("{}: too few cycles to judge the rate", p.phase)];
    };
    let period = effective as f64;
    let against = if effective == nominal {
        format!("the {:.3} ms period", period / 1e6)
    } else {
        format!(
            "the effective {:.3} ms period (nominal {:.3} ms / rtf {rtf})",
            period / 1e6,
            nominal as f64 / 1e6
        )
    };
    let threshold = late.late_start_threshold_ns.map_or(String::new(), |t| {
        format!(" or started more than {:.3} ms late", t as f64 / 1e6)
    });
    let mut out = Vec::new();
    if late.late == 0 {
        out.push(format!(
            "{}: on rate — {} Hz against {against}; no cycle was overdue{threshold}; period p99 {:+.1} % of the period, work {:.0} % of it at p99",
            p.phase,
            p.loop_hz.map_or("?".to_string(), |h| format!("{h:.2}")),
            (per.p99_ns as f64 / period - 1.0) * 100.0,
            work.p99_ns as f64 / period * 100.0
        ));
    } else {
        let dominant = late.stages.first().map_or(String::new(), |s| {
            format!(
                ", dominated by {} ({} of {})",
                s.path, s.cycles, late.work_over_budget
            )
        });
        let (verdict, advice) = if late.work_over_budget >= late.late_wake {
            (
                "the work itself",
                "shorten or move off the loop the stage that dominates",
            )
        } else {
            (
                "scheduling",
                "look at the wait and wake path (timer slack, priority, host load), not the work",
            )
        };
        out.push(format!(
            "{}: {verdict} — {} of {} cycles were overdue{threshold}. {} ({:.1} %) followed a cycle whose work exceeded {against}{dominant}; {} ({:.1} %) followed work within it, so the time was lost in the wait and wake path{}; {advice}",
            p.phase,
            late.late,
            late.judged,
            late.work_over_budget,
            pct(late.work_over_budget, late.late),
            late.late_wake,
            pct(late.late_wake, late.late),
            if late.unattributed > 0 {
                format!("; {} could not be attributed (open predecessor)", late.unattributed)
            } else {
                String::new()
            },
        ));
    }
    if p.overruns > 0 {
        out.push(format!(
            "{}: {} of {} cycles found their release point already passed",
            p.phase, p.overruns, p.cycles
        ));
    }
    out
}
