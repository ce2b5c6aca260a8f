//! Segments and rates: per phase and per segment, the period distribution,
//! loop Hz, work, sleep overshoot, deadline lag, overruns, skips, command
//! count and command Hz, and per phase the work's CPU time where it was
//! recorded per cycle (docs/metrics.md, Segments and phases; CPU time).

use polars::prelude::*;

use super::report::{PhaseReport, SegmentReport, SpinReport};
use super::table::{dist_aggs, hz, r4, Table};
use crate::error::Result;

/// The aggregates of one phase or segment over the cycle table.
fn cycle_aggs() -> Vec<Expr> {
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
    for c in [
        "period_ns",
        "work_ns",
        "overshoot_ns",
        "lag_ns",
        "cpu_ns",
        "off_cpu_ns",
    ] {
        aggs.extend(dist_aggs(c));
    }
    // The off-CPU share's denominator: the work of the cycles that have a
    // work CPU time (every ended cycle, in `cycle` mode).
    aggs.push(
        col("work_ns")
            .filter(col("cpu_ns").is_not_null())
            .sum()
            .alias("work_with_cpu_sum"),
    );
    aggs.push(col("off_cpu_ns").sum().alias("off_cpu_sum"));
    // The spin: the margin's range and changes, the spin per wait, and
    // Σ spin / Σ period over the cycles that have both.
    aggs.push(col("spin_margin_ns").count().alias("margin_count"));
    aggs.push(col("spin_margin_ns").min().alias("margin_min"));
    aggs.push(col("spin_margin_ns").max().alias("margin_max"));
    aggs.push(col("margin_change").sum().alias("margin_changes"));
    aggs.extend(dist_aggs("spin_ns"));
    let both = col("spin_ns")
        .is_not_null()
        .and(col("period_ns").is_not_null());
    aggs.push(
        col("spin_ns")
            .filter(both.clone())
            .sum()
            .alias("spin_with_period_sum"),
    );
    aggs.push(
        col("period_ns")
            .filter(both)
            .sum()
            .alias("period_with_spin_sum"),
    );
    aggs
}

fn command_aggs() -> Vec<Expr> {
    vec![
        col("segment").count().alias("commands"),
        col("cmd_interval_ns").mean().alias("cmd_mean"),
    ]
}

/// Loop Hz of row `i`: `1e9 / mean(period)`, when it has periods.
fn loop_hz(t: &Table, i: usize) -> Result<Option<f64>> {
    if t.dist("period_ns", i)?.is_none() {
        return Ok(None);
    }
    Ok(hz(t.f("period_ns__mean", i)?))
}

/// The off-CPU share of row `i`: `Σ off-CPU / Σ work` over the cycles with
/// a work CPU time; none without them (or with no work at all).
fn off_cpu_share(t: &Table, i: usize) -> Result<Option<f64>> {
    if t.dist("cpu_ns", i)?.is_none() {
        return Ok(None);
    }
    let work = t.f("work_with_cpu_sum", i)?.unwrap_or(0.0);
    let off = t.f("off_cpu_sum", i)?.unwrap_or(0.0);
    Ok((work > 0.0).then(|| r4(off / work)))
}

/// The spin report of row `i`: none when no cycle recorded its margin.
fn spin_report(t: &Table, i: usize) -> Result<Option<SpinReport>> {
    if t.u("margin_count", i)? == 0 {
        return Ok(None);
    }
    let period = t.f("period_with_spin_sum", i)?.unwrap_or(0.0);
    let spin = t.f("spin_with_period_sum", i)?.unwrap_or(0.0);
    Ok(Some(SpinReport {
        margin_min_ns: t.f("margin_min", i)?.unwrap_or(0.0) as i64,
        margin_max_ns: t.f("margin_max", i)?.unwrap_or(0.0) as i64,
        margin_changes: t.u("margin_changes", i)?,
        spin: t.dist("spin_ns", i)?,
        spin_share: (period > 0.0).then(|| r4(spin / period)),
    }))
}

/// Command count and Hz of the command-table row whose `key` is `v`.
fn commands(cmd: &Table, key: &str, v: u64) -> Result<(u64, Option<f64>)> {
    match cmd.find(key, v as f64)? {
        Some(j) => Ok((cmd.u("commands", j)?, hz(cmd.f("cmd_mean", j)?))),
        None => Ok((0, None)),
    }
}

/// One report per phase kind, in order of first appearance.
pub fn phase_reports(
    cycles: &DataFrame,
    commands_df: &DataFrame,
    phase_name: &dyn Fn(u64) -> String,
) -> Result<Vec<PhaseReport>> {
    let by = Table::grouped(cycles, "phase", cycle_aggs(), "first_segment")?;
    let cmd = Table::grouped(commands_df, "phase", command_aggs(), "phase")?;
    let mut out = Vec::with_capacity(by.height());
    for i in 0..by.height() {
        let pid = by.u("phase", i)?;
        let (commands, command_hz) = commands(&cmd, "phase", pid)?;
        out.push(PhaseReport {
            phase: phase_name(pid),
            segments: by.u("segments", i)?,
            cycles: by.u("cycles", i)?,
            loop_hz: loop_hz(&by, i)?,
            period: by.dist("period_ns", i)?,
            work: by.dist("work_ns", i)?,
            sleep_overshoot: by.dist("overshoot_ns", i)?,
            deadline_lag: by.dist("lag_ns", i)?,
            work_cpu: by.dist("cpu_ns", i)?,
            off_cpu: by.dist("off_cpu_ns", i)?,
            off_cpu_share: off_cpu_share(&by, i)?,
            spin: spin_report(&by, i)?,
            overruns: by.u("overruns", i)?,
            skipped: by.u("skipped_sum", i)?,
            commands,
            command_hz,
        });
    }
    Ok(out)
}

/// One report per continuous segment, in time order.
pub fn segment_reports(
    cycles: &DataFrame,
    commands_df: &DataFrame,
    phase_name: &dyn Fn(u64) -> String,
) -> Result<Vec<SegmentReport>> {
    let by = Table::grouped(cycles, "segment", cycle_aggs(), "segment")?;
    let cmd = Table::grouped(commands_df, "segment", command_aggs(), "segment")?;
    let mut out = Vec::with_capacity(by.height());
    for i in 0..by.height() {
        let sid = by.u("segment", i)?;
        let (commands, command_hz) = commands(&cmd, "segment", sid)?;
        let first = by.f("first_start", i)?.unwrap_or(0.0);
        let last = by.f("last_start", i)?.unwrap_or(0.0);
        out.push(SegmentReport {
            index: sid,
            phase: phase_name(by.u("phase_of", i)?),
            first_cycle: by.u("first_cycle", i)?,
            last_cycle: by.u("last_cycle", i)?,
            cycles: by.u("cycles", i)?,
            duration_s: r4((last - first) / 1e9),
            loop_hz: loop_hz(&by, i)?,
            period: by.dist("period_ns", i)?,
            overruns: by.u("overruns", i)?,
            skipped: by.u("skipped_sum", i)?,
            commands,
            command_hz,
        });
    }
    Ok(out)
}
