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

/// A caller value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueReport {
    /// Name.
    pub name: String,
    /// Unit from the header.
    pub unit: String,
    /// Cycles where it was set.
    pub count: u64,
    /// Smallest.
    pub min: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// For sequence counters (`*_seq`): states lost, the sum of
    /// `max(0, Δ − 1)` over adjacent cycles within segments.
    pub lost: Option<u64>,
}

/// A summary figure that disagrees with the recomputation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Which figure.
    pub figure: String,
    /// Value in the summary.
    pub summary: f64,
    /// Value recomputed from the JSONL.
    pub recomputed: f64,
    /// Allowed difference.
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
    let c = &h.clocks;
    c.target_ns.comparable_with(c.wake_ns) && c.target_ns.comparable_with(c.start_ns)
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
    let nv = h.values.len();
    let is_seq: Vec<bool> = h.values.iter().map(|v| v.name.ends_with("_seq")).collect();
    let mut values: Vec<Vec<Option<f64>>> = vec![Vec::with_capacity(n); nv];
    let mut lost: Vec<Vec<Option<f64>>> = vec![Vec::with_capacity(n); nv];
    let val = |r: usize, i: usize| Some(ev.values[r * nv + i]).filter(|v| !v.is_nan());
    for row in 0..n {
        let same = row > 0 && cc.segment[row] == cc.segment[row - 1];
        for i in 0..nv {
            let now = val(row, i);
            values[i].push(now);
            let before = if row > 0 { val(row - 1, i) } else { None };
            let l = match (is_seq[i], same, now, before) {
                (true, true, Some(now), Some(before)) => Some((now - before - 1.0).max(0.0)),
                _ => None,
            };
            lost[i].push(l);
        }
    }
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
    let mut cols = vec![
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
    for i in 0..nv {
        cols.push(Column::new(
            format!("value{i}").into(),
            std::mem::take(&mut values[i]),
        ));
        cols.push(Column::new(
            format!("lost{i}").into(),
            std::mem::take(&mut lost[i]),
        ));
    }
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
    let mut name_aggs = dist_aggs("wall_ns");
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
    let period_ns = h.nominal_period_ns.map(|p| p as f64);
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

    // Values over the whole episode (one row: aggregate without grouping).
    let mut values_out = Vec::new();
    if nv > 0 {
        let mut vaggs = Vec::new();
        for i in 0..nv {
            let v = format!("value{i}");
            vaggs.push(col(&v).count().alias(format!("{v}__count")));
            vaggs.push(col(&v).min().alias(format!("{v}__min")));
            vaggs.push(col(&v).mean().alias(format!("{v}__mean")));
            vaggs.push(col(&v).max().alias(format!("{v}__max")));
            vaggs.push(col(format!("lost{i}")).sum().alias(format!("lost{i}__sum")));
        }
        let t = Table {
            df: cycles_df.lazy().select(vaggs).collect()?,
        };
        for (i, info) in h.values.iter().enumerate() {
            let v = format!("value{i}");
            let count = t.u(&format!("{v}__count"), 0)?;
            values_out.push(ValueReport {
                name: info.name.clone(),
                unit: info.unit.clone(),
                count,
                min: t.f(&format!("{v}__min"), 0)?.filter(|_| count > 0),
                mean: t
                    .f(&format!("{v}__mean"), 0)?
                    .filter(|_| count > 0)
                    .map(|m| (m * 1e6).round() / 1e6),
                max: t.f(&format!("{v}__max"), 0)?.filter(|_| count > 0),
                lost: is_seq[i]
                    .then(|| t.u(&format!("lost{i}__sum"), 0))
                    .transpose()?,
            });
        }
    }

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
        nominal_period_ns: h.nominal_period_ns,
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

    let diagnosis = diagnose(&phases, &stages, h.nominal_period_ns);
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
        diagnosis,
        crosscheck,
    })
}

/// The diagnosis lines: is it scheduling or the work?
pub fn diagnose(
    phases: &[PhaseReport],
    stages: &[StageReport],
    nominal: Option<u64>,
) -> Vec<String> {
    let Some(period) = nominal.map(|p| p as f64) else {
        return vec!["no nominal period in the header: cannot judge the rate".into()];
    };
    let Some(p) = phases
        .iter()
        .find(|p| p.phase == "running")
        .or_else(|| phases.iter().max_by_key(|p| p.cycles))
    else {
        return vec!["no cycles to judge".into()];
    };
    let (Some(per), Some(work)) = (&p.period, &p.work) else {
        return vec![format!("{}: too few cycles to judge the rate", p.phase)];
    };
    let mut out = Vec::new();
    let over_p99 = per.p99_ns as f64 / period - 1.0;
    let work_p99 = work.p99_ns as f64 / period;
    let work_max = work.max_ns as f64 / period;
    let hz_txt = p.loop_hz.map_or("?".to_string(), |h| format!("{h:.2}"));
    let top: Vec<String> = stages
        .iter()
        .filter(|s| s.phase == p.phase && s.depth == 0)
        .max_by_key(|s| s.wall.p99_ns)
        .map(|s| format!("{} (p99 {:.2} ms)", s.path, s.wall.p99_ns as f64 / 1e6))
        .into_iter()
        .collect();
    if over_p99 > 0.05 && work_p99 < 0.5 {
        out.push(format!(
            "{}: scheduling — the period overshoots (p99 {:.2} ms, {:+.1} % of nominal) while the work takes only {:.0} % of the period at p99; look at the wait and wake path (timer slack, priority, host load), not the work",
            p.phase, per.p99_ns as f64 / 1e6, over_p99 * 100.0, work_p99 * 100.0
        ));
    } else if work_p99 >= 0.9 || p.overruns > 0 && work_max >= 1.0 {
        out.push(format!(
            "{}: the work itself — work reaches {:.0} % of the period at p99 and {:.0} % at max ({} overrun(s)); the largest stage is {}",
            p.phase,
            work_p99 * 100.0,
            work_max * 100.0,
            p.overruns,
            top.first().map_or("unknown", |s| s.as_str())
        ));
    } else if over_p99 > 0.05 {
        out.push(format!(
            "{}: mixed — the period overshoots (p99 {:+.1} %) and the work uses {:.0} % of the period at p99",
            p.phase, over_p99 * 100.0, work_p99 * 100.0
        ));
    } else {
        out.push(format!(
            "{}: on rate — {hz_txt} Hz, period p99 within {:+.1} % of nominal, work {:.0} % of the period at p99",
            p.phase, over_p99 * 100.0, work_p99 * 100.0
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
