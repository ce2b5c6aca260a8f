//! Segments and rates: per phase and per segment, the period distribution,
//! loop Hz, work, sleep overshoot, deadline lag, overruns, skips, command
//! count and command Hz, and per phase the work's CPU time where it was
//! recorded per cycle (docs/metrics.md, Segments and phases; CPU time).
//!
//! A segment is a run of consecutive rows (a new one starts at every phase
//! change or index gap) and a phase is the union of its segments, so each
//! group is a list of row ranges: its values are gathered from them once
//! per column and every distribution is read by successive selection
//! (`table.rs`, `dist_in`), with no group-by and no table built.

use std::collections::HashMap;
use std::ops::Range;

use rayon::prelude::*;

use super::columns::{command_columns, CycleColumns};
use super::report::{Dist, PhaseReport, SegmentReport, SpinReport};
use super::table::{dist_in, hz, r4};
use crate::evidence::Evidence;

/// Rows from which a group's distributions are read in parallel, one
/// column per task; a smaller group is read on one thread.
const PARALLEL_ROWS: usize = 16_384;

/// A group of cycles: a phase, or one segment.
struct Group {
    /// Phase index (of every row).
    phase: u32,
    /// Segment number of its first row.
    first_segment: u32,
    /// Its rows: one range per segment, in time order.
    rows: Vec<Range<usize>>,
}

/// Commands of one group: how many, and their intervals' sum and count.
#[derive(Default, Clone, Copy)]
struct Commands {
    count: u64,
    interval_sum: i128,
    intervals: u64,
}

impl Commands {
    fn figures(&self) -> (u64, Option<f64>) {
        let mean = (self.intervals > 0).then(|| self.interval_sum as f64 / self.intervals as f64);
        (self.count, hz(mean))
    }
}

/// The episode's cycles cut into segments and phases, with the commands
/// of each, computed once for both reports.
pub(crate) struct Groups {
    segments: Vec<Group>,
    /// In order of first appearance.
    phases: Vec<Group>,
    /// Row for row with `segments`.
    commands_by_segment: Vec<Commands>,
    /// Row for row with `phases`.
    commands_by_phase: Vec<Commands>,
}

impl Groups {
    pub(crate) fn new(ev: &Evidence, cc: &CycleColumns) -> Groups {
        let mut segments: Vec<Group> = Vec::new();
        for (i, (&seg, &phase)) in cc.segment.iter().zip(&cc.phase).enumerate() {
            match segments.last_mut() {
                Some(g) if g.first_segment == seg => g.rows[0].end = i + 1,
                _ => {
                    debug_assert_eq!(seg as usize, segments.len(), "segments count up by one");
                    segments.push(Group {
                        phase,
                        first_segment: seg,
                        rows: std::iter::once(i..i + 1).collect(),
                    })
                }
            }
        }
        let mut phases: Vec<Group> = Vec::new();
        let mut phase_index: HashMap<u32, usize> = HashMap::new();
        for s in &segments {
            let g = *phase_index.entry(s.phase).or_insert_with(|| {
                phases.push(Group {
                    phase: s.phase,
                    first_segment: s.first_segment,
                    rows: Vec::new(),
                });
                phases.len() - 1
            });
            phases[g].rows.push(s.rows[0].clone());
        }
        // Segment numbers count up from 0 by one (`cycle_columns`), so the
        // segment's position is its number; phases are few, looked up from
        // the last one found.
        let mut commands_by_segment = vec![Commands::default(); segments.len()];
        let mut commands_by_phase = vec![Commands::default(); phases.len()];
        let mut last_phase = 0usize;
        let cmd = command_columns(ev, &cc.segment);
        for ((&seg, &phase), &interval) in cmd.segment.iter().zip(&cmd.phase).zip(&cmd.interval) {
            if phases.get(last_phase).map(|g| g.phase) != Some(phase) {
                last_phase = phase_index[&phase];
            }
            for c in [
                &mut commands_by_segment[seg as usize],
                &mut commands_by_phase[last_phase],
            ] {
                c.count += 1;
                if let Some(d) = interval {
                    c.interval_sum += d as i128;
                    c.intervals += 1;
                }
            }
        }
        Groups {
            segments,
            phases,
            commands_by_segment,
            commands_by_phase,
        }
    }
}

/// One group's figures: its sums and its distributions.
struct Aggregate {
    sums: Sums,
    /// The period's distribution and its unrounded mean (for loop Hz).
    period: Option<(Dist, f64)>,
    work: Option<Dist>,
    overshoot: Option<Dist>,
    lag: Option<Dist>,
    cpu: Option<Dist>,
    off_cpu: Option<Dist>,
    off_cpu_share: Option<f64>,
    spin: Option<SpinReport>,
}

/// Sums over a group's rows, one pass.
struct Sums {
    cycles: u64,
    overruns: u64,
    skipped: u64,
    first_cycle: u64,
    last_cycle: u64,
    first_start: i64,
    last_start: i64,
    /// The off-CPU share's denominator: the work of the cycles that have a
    /// work CPU time (every ended cycle, in `cycle` mode).
    work_with_cpu: i128,
    off_cpu: i128,
    /// The spin margin's count, range and changes.
    margins: u64,
    margin_min: i64,
    margin_max: i64,
    margin_changes: u64,
    /// Σ spin and Σ period over the cycles that have both.
    spin_with_period: i128,
    period_with_spin: i128,
}

fn sums(ev: &Evidence, cc: &CycleColumns, rows: &[Range<usize>]) -> Sums {
    let mut s = Sums {
        cycles: 0,
        overruns: 0,
        skipped: 0,
        first_cycle: u64::MAX,
        last_cycle: 0,
        first_start: i64::MAX,
        last_start: i64::MIN,
        work_with_cpu: 0,
        off_cpu: 0,
        margins: 0,
        margin_min: i64::MAX,
        margin_max: i64::MIN,
        margin_changes: 0,
        spin_with_period: 0,
        period_with_spin: 0,
    };
    for i in rows.iter().flat_map(|r| r.clone()) {
        let c = &ev.cycles[i];
        s.cycles += 1;
        s.overruns += c.overdue as u64;
        s.skipped += c.skipped as u64;
        s.first_cycle = s.first_cycle.min(c.cycle);
        s.last_cycle = s.last_cycle.max(c.cycle);
        s.first_start = s.first_start.min(c.start_ns);
        s.last_start = s.last_start.max(c.start_ns);
        if cc.cpu[i].is_some() {
            s.work_with_cpu += cc.work[i].unwrap_or(0) as i128;
        }
        s.off_cpu += cc.off_cpu[i].unwrap_or(0) as i128;
        if let Some(m) = c.spin_margin_ns {
            s.margins += 1;
            s.margin_min = s.margin_min.min(m);
            s.margin_max = s.margin_max.max(m);
        }
        s.margin_changes += cc.margin_change[i] as u64;
        if let (Some(spin), Some(period)) = (c.spin_ns, cc.period[i]) {
            s.spin_with_period += spin as i128;
            s.period_with_spin += period as i128;
        }
    }
    s
}

/// The distributions of a group, one column each, in parallel for a large
/// group: period, work, overshoot, lag, work CPU, off-CPU, spin.
fn dists(ev: &Evidence, cc: &CycleColumns, rows: &[Range<usize>]) -> Vec<Option<(Dist, f64)>> {
    let columns: [&(dyn Fn(usize) -> Option<i64> + Sync); 7] = [
        &|i| cc.period[i],
        &|i| cc.work[i],
        &|i| cc.overshoot[i],
        &|i| cc.lag[i],
        &|i| cc.cpu[i],
        &|i| cc.off_cpu[i],
        &|i| ev.cycles[i].spin_ns,
    ];
    let n: usize = rows.iter().map(|r| r.len()).sum();
    if n >= PARALLEL_ROWS {
        columns
            .par_iter()
            .map(|value| dist_in(rows, value, &mut Vec::with_capacity(n)))
            .collect()
    } else {
        let mut scratch = Vec::with_capacity(n);
        columns
            .iter()
            .map(|value| dist_in(rows, value, &mut scratch))
            .collect()
    }
}

fn aggregate(ev: &Evidence, cc: &CycleColumns, rows: &[Range<usize>]) -> Aggregate {
    let s = sums(ev, cc, rows);
    let mut d = dists(ev, cc, rows).into_iter();
    let mut next = || d.next().flatten();
    let period = next();
    let (work, overshoot, lag, cpu, off_cpu, spin) = (
        next().map(|x| x.0),
        next().map(|x| x.0),
        next().map(|x| x.0),
        next().map(|x| x.0),
        next().map(|x| x.0),
        next().map(|x| x.0),
    );
    let off_cpu_share = cpu
        .as_ref()
        .and((s.work_with_cpu > 0).then(|| r4(s.off_cpu as f64 / s.work_with_cpu as f64)));
    let spin = (s.margins > 0).then(|| SpinReport {
        margin_min_ns: s.margin_min,
        margin_max_ns: s.margin_max,
        margin_changes: s.margin_changes,
        spin,
        spin_share: (s.period_with_spin > 0)
            .then(|| r4(s.spin_with_period as f64 / s.period_with_spin as f64)),
    });
    Aggregate {
        sums: s,
        period,
        work,
        overshoot,
        lag,
        cpu,
        off_cpu,
        off_cpu_share,
        spin,
    }
}

/// Loop Hz of a group: `1e9 / mean(period)`, when it has periods.
fn loop_hz(a: &Aggregate) -> Option<f64> {
    hz(a.period.as_ref().map(|p| p.1))
}

/// One report per group, in the groups' order: `make` is given the group,
/// its figures and its commands' count and Hz.
fn reports<R: Send>(
    ev: &Evidence,
    cc: &CycleColumns,
    groups: &[Group],
    commands: &[Commands],
    make: impl Fn(&Group, Aggregate, (u64, Option<f64>)) -> R + Sync,
) -> Vec<R> {
    groups
        .par_iter()
        .zip(commands)
        .map(|(g, c)| make(g, aggregate(ev, cc, &g.rows), c.figures()))
        .collect()
}

/// One report per phase kind, in order of first appearance.
pub(crate) fn phase_reports(
    ev: &Evidence,
    cc: &CycleColumns,
    groups: &Groups,
    phase_name: &(dyn Fn(u64) -> String + Sync),
) -> Vec<PhaseReport> {
    let (phases, commands) = (&groups.phases, &groups.commands_by_phase);
    reports(ev, cc, phases, commands, |g, a, (commands, command_hz)| {
        PhaseReport {
            phase: phase_name(g.phase as u64),
            segments: g.rows.len() as u64,
            cycles: a.sums.cycles,
            loop_hz: loop_hz(&a),
            period: a.period.map(|p| p.0),
            work: a.work,
            sleep_overshoot: a.overshoot,
            deadline_lag: a.lag,
            work_cpu: a.cpu,
            off_cpu: a.off_cpu,
            off_cpu_share: a.off_cpu_share,
            spin: a.spin,
            overruns: a.sums.overruns,
            skipped: a.sums.skipped,
            commands,
            command_hz,
        }
    })
}

/// One report per continuous segment, in time order.
pub(crate) fn segment_reports(
    ev: &Evidence,
    cc: &CycleColumns,
    groups: &Groups,
    phase_name: &(dyn Fn(u64) -> String + Sync),
) -> Vec<SegmentReport> {
    let (segments, commands) = (&groups.segments, &groups.commands_by_segment);
    reports(
        ev,
        cc,
        segments,
        commands,
        |g, a, (commands, command_hz)| {
            let s = &a.sums;
            SegmentReport {
                index: g.first_segment as u64,
                phase: phase_name(g.phase as u64),
                first_cycle: s.first_cycle,
                last_cycle: s.last_cycle,
                cycles: s.cycles,
                duration_s: r4((s.last_start as i128 - s.first_start as i128) as f64 / 1e9),
                loop_hz: loop_hz(&a),
                period: a.period.map(|p| p.0),
                overruns: s.overruns,
                skipped: s.skipped,
                commands,
                command_hz,
            }
        },
    )
}
#[cfg(test)]
mod tests {
    use crate::evidence::{load_episode_bytes, LoadOptions};

    #[test]
    fn a_phase_that_returns_is_the_union_of_its_segments() {
        // The v1 synthetic fixture (cycles 0-1 warmup, 2-5 running, one
        // command span each) with cycle 5 moved back to warmup: segments
        // [0, 1] warmup, [2, 4] running, [5] warmup.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/v1/synthetic-basic");
        let text = std::fs::read_to_string(dir.join("control_timing.jsonl")).unwrap();
        let jsonl: String = text
            .lines()
            .map(|l| match l.contains("\"cycle\":5,") {
                true => l.replace("\"phase\":\"running\"", "\"phase\":\"warmup\"") + "\n",
                false => format!("{l}\n"),
            })
            .collect();
        let ev = load_episode_bytes(&dir, jsonl.as_bytes(), None, LoadOptions::default()).unwrap();
        let r = crate::analysis::Analysis::new(ev).unwrap().report;
        let seg: Vec<_> = r
            .segments
            .iter()
            .map(|s| {
                (
                    s.index,
                    s.phase.as_str(),
                    s.first_cycle,
                    s.last_cycle,
                    s.commands,
                )
            })
            .collect();
        assert_eq!(
            seg,
            [
                (0, "warmup", 0, 1, 2),
                (1, "running", 2, 4, 3),
                (2, "warmup", 5, 5, 1)
            ]
        );
        // Segment 2 is one cycle: no period, no command interval.
        assert_eq!(
            (r.segments[2].loop_hz, r.segments[2].command_hz),
            (None, None)
        );
        assert_eq!(r.segments[2].duration_s, 0.0);
        let (w, run) = (&r.phases[0], &r.phases[1]);
        assert_eq!((w.phase.as_str(), w.segments, w.cycles), ("warmup", 2, 3));
        // Warmup's one period is inside segment 0: 1,010,000,800 −
        // 1,000,001,000 = 9,999,800 ns, 1e9 / 9,999,800 = 100.0020 Hz; its
        // commands' one interval is the same 9,999,800 ns (starts 10 µs
        // after each cycle's); segment 2 adds a command but no interval.
        let p = w.period.as_ref().unwrap();
        assert_eq!((p.count, p.min_ns, p.max_ns), (1, 9_999_800, 9_999_800));
        assert_eq!(
            (w.loop_hz, w.commands, w.command_hz),
            (Some(100.002), 3, Some(100.002))
        );
        // Warmup's work: 2, 3 and 1 ms (cycles 0, 1, 5): p50 at rank 2.
        let work = w.work.as_ref().unwrap();
        assert_eq!(
            (work.count, work.min_ns, work.p50_ns, work.max_ns),
            (3, 1_000_000, 2_000_000, 3_000_000)
        );
        // Running: periods 10,001,100 and 11,000,500 ns, mean 10,500,800,
        // 1e9 / 10,500,800 = 95.2308 Hz; commands the same.
        assert_eq!(
            (run.segments, run.cycles, run.loop_hz),
            (1, 3, Some(95.2308))
        );
        assert_eq!((run.commands, run.command_hz), (3, Some(95.2308)));
    }
}
