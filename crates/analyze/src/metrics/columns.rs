//! Per-cycle metric columns (period, work, overshoot, lag) and command
//! submissions, from which every distribution, rate and attribution is
//! aggregated. The per-cycle definitions themselves are
//! `looptime_capture::cycle`'s, which `looptime watch` uses too.

use looptime_capture::cycle;

use crate::evidence::{CycleRow, Evidence};

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
    /// The work's thread CPU time (`cycle` CPU-time mode).
    pub cpu: Vec<Option<i64>>,
    /// `max(0, work − work CPU)`.
    pub off_cpu: Vec<Option<i64>>,
    /// 1 when the cycle's spin margin differs from the last margin recorded
    /// before it in the file (the first recorded margin is no change).
    pub margin_change: Vec<u32>,
}

/// Compute [`CycleColumns`] of `ev` (targets are subtracted from wake and
/// start times only when its header says the clocks are comparable).
/// Only [`crate::analysis::Analysis::new`] calls it: every view reads the
/// analysis's columns.
pub(crate) fn cycle_columns(ev: &Evidence) -> CycleColumns {
    // Counted per evidence, whichever thread computes: `analysis`'s test
    // shows that every view reads the columns computed once.
    ev.columns_computed
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let comparable = schedule_comparable(&ev.header);
    let n = ev.cycles.len();
    let mut out = CycleColumns {
        segment: Vec::with_capacity(n),
        phase: Vec::with_capacity(n),
        period: Vec::with_capacity(n),
        work: Vec::with_capacity(n),
        overshoot: Vec::with_capacity(n),
        lag: Vec::with_capacity(n),
        cpu: Vec::with_capacity(n),
        off_cpu: Vec::with_capacity(n),
        margin_change: Vec::with_capacity(n),
    };
    let mut last_margin: Option<i64> = None;
    let mut seg = 0u32;
    let mut prev: Option<&CycleRow> = None;
    for c in &ev.cycles {
        if prev.is_some() && !cycle::continues(prev, c) {
            seg += 1;
        }
        let f = cycle::figures(prev, c, comparable);
        out.segment.push(seg);
        out.phase.push(c.phase);
        out.period.push(f.period_ns);
        out.work.push(f.work_ns);
        out.overshoot.push(f.overshoot_ns);
        out.lag.push(f.lag_ns);
        out.cpu.push(f.cpu_ns);
        out.off_cpu.push(f.off_cpu_ns);
        let changed = match (last_margin, c.spin_margin_ns) {
            (Some(a), Some(b)) => a != b,
            _ => false,
        };
        out.margin_change.push(changed as u32);
        last_margin = c.spin_margin_ns.or(last_margin);
        prev = Some(c);
    }
    out
}

/// The analyzer's cycle row, as the per-cycle definitions read it
/// (`looptime_capture::cycle`, shared with `looptime watch`).
impl cycle::CycleTimes for CycleRow {
    type Phase = u32;
    fn cycle(&self) -> u64 {
        self.cycle
    }
    fn phase(&self) -> &u32 {
        &self.phase
    }
    fn start_ns(&self) -> i64 {
        self.start_ns
    }
    fn end_ns(&self) -> Option<i64> {
        self.end_ns
    }
    fn target_ns(&self) -> Option<i64> {
        self.target_ns
    }
    fn wake_ns(&self) -> Option<i64> {
        self.wake_ns
    }
    fn overdue(&self) -> bool {
        self.overdue
    }
    fn cpu_ns(&self) -> Option<i64> {
        self.cpu_ns
    }
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
