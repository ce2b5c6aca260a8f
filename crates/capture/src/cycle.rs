//! The per-cycle definitions: a cycle's period, work, overshoot and lag, and
//! the segment rule that decides which cycles have a period at all.
//!
//! One place for them, used by the analyzer (over its parsed rows) and by
//! `looptime watch` (over the records it reads from a live ring), so that
//! the live view and the report cannot disagree on what a figure means.
//! docs/metrics.md defines each in words; the functions below are that text
//! as code:
//!
//! * **segment**: a run of cycles of one phase with consecutive indices. A
//!   phase change or an index gap (cycles lost to the ring, or a pause)
//!   starts a new one ([`continues`]).
//! * **period**: `start_ns − previous start_ns`, only between two cycles of
//!   one segment; the first cycle of a segment has none ([`period_ns`]).
//! * **work**: `end_ns − start_ns`; none when the run stopped inside the
//!   cycle ([`work_ns`]).
//! * **overshoot**: `wake_ns − target_ns`, for a cycle that waited (it has
//!   a wake) and was not overdue, when the schedule's clock can be
//!   subtracted from the wake clock ([`overshoot_ns`]).
//! * **lag**: `start_ns − target_ns`, when the clocks can be subtracted
//!   ([`lag_ns`]).
//! * **work CPU**: the cycle's `cpu_ns` (thread CPU time over its work),
//!   recorded only in the `cycle` CPU-time mode and only for a cycle that
//!   ended ([`work_cpu_ns`]).
//! * **off-CPU**: `max(0, work − work CPU)`, the part of the work's wall
//!   time the thread did not run ([`off_cpu_ns`]). The clamp is for the
//!   two clock reads' skew, which can make the CPU time exceed the wall
//!   time by part of one CPU-clock read.
//!
//! The functions take any cycle through [`CycleTimes`], which the evidence
//! record ([`CycleRecord`]) implements here and the analyzer's row type
//! implements there. They are plain arithmetic on integers, no polars, so
//! the runtime may use them too.

use crate::format::CycleRecord;

/// What the per-cycle definitions read of a cycle. Times are nanoseconds on
/// the evidence's clocks, as signed integers so that differences are signed.
pub trait CycleTimes {
    /// How a phase is named in this representation (an index, a name).
    type Phase: PartialEq + ?Sized;
    /// Cycle index.
    fn cycle(&self) -> u64;
    /// The cycle's phase.
    fn phase(&self) -> &Self::Phase;
    /// Start of the cycle's work.
    fn start_ns(&self) -> i64;
    /// End of its work, when it ended.
    fn end_ns(&self) -> Option<i64>;
    /// The release point it was scheduled for, when given.
    fn target_ns(&self) -> Option<i64>;
    /// When the wait before it ended, when it waited.
    fn wake_ns(&self) -> Option<i64>;
    /// Whether its release point had passed when the wait began.
    fn overdue(&self) -> bool;
    /// Thread CPU time over its work, when recorded (`cycle` mode).
    fn cpu_ns(&self) -> Option<i64>;
}

/// The four figures of one cycle; `None` where the definition gives none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CycleFigures {
    /// Start-to-start time from the previous cycle of the segment.
    pub period_ns: Option<i64>,
    /// `end − start`.
    pub work_ns: Option<i64>,
    /// `wake − target`, for a cycle that waited and was not overdue.
    pub overshoot_ns: Option<i64>,
    /// `start − target`.
    pub lag_ns: Option<i64>,
    /// Thread CPU time over the work.
    pub cpu_ns: Option<i64>,
    /// `max(0, work − work CPU)`.
    pub off_cpu_ns: Option<i64>,
}

/// Whether `c` continues `prev`'s segment: same phase, next index.
#[inline]
pub fn continues<T: CycleTimes>(prev: Option<&T>, c: &T) -> bool {
    prev.is_some_and(|p| p.phase() == c.phase() && p.cycle().checked_add(1) == Some(c.cycle()))
}

/// `c`'s period: its start minus `prev`'s, when `c` continues `prev`'s
/// segment.
#[inline]
pub fn period_ns<T: CycleTimes>(prev: Option<&T>, c: &T) -> Option<i64> {
    match prev {
        Some(p) if continues(prev, c) => Some(c.start_ns() - p.start_ns()),
        _ => None,
    }
}

/// `c`'s work: end minus start.
#[inline]
pub fn work_ns<T: CycleTimes>(c: &T) -> Option<i64> {
    c.end_ns().map(|e| e - c.start_ns())
}

/// `c`'s sleep overshoot: wake minus target, for a cycle that waited and was
/// not overdue; `comparable` says whether the schedule's clock can be
/// subtracted from the wake clock (`Clocks::schedule_comparable`).
#[inline]
pub fn overshoot_ns<T: CycleTimes>(c: &T, comparable: bool) -> Option<i64> {
    match (comparable, c.overdue(), c.wake_ns(), c.target_ns()) {
        (true, false, Some(w), Some(t)) => Some(w - t),
        _ => None,
    }
}

/// `c`'s deadline lag: start minus target, when comparable.
#[inline]
pub fn lag_ns<T: CycleTimes>(c: &T, comparable: bool) -> Option<i64> {
    match (comparable, c.target_ns()) {
        (true, Some(t)) => Some(c.start_ns() - t),
        _ => None,
    }
}

/// `c`'s work CPU time: its recorded CPU time, when it also has a work
/// duration (an unended cycle has neither).
#[inline]
pub fn work_cpu_ns<T: CycleTimes>(c: &T) -> Option<i64> {
    work_ns(c).and(c.cpu_ns())
}

/// `c`'s off-CPU time: work minus work CPU, at least 0.
#[inline]
pub fn off_cpu_ns<T: CycleTimes>(c: &T) -> Option<i64> {
    Some((work_ns(c)? - work_cpu_ns(c)?).max(0))
}

/// All the figures of `c`, given the cycle before it in the evidence.
#[inline]
pub fn figures<T: CycleTimes>(prev: Option<&T>, c: &T, comparable: bool) -> CycleFigures {
    CycleFigures {
        period_ns: period_ns(prev, c),
        work_ns: work_ns(c),
        overshoot_ns: overshoot_ns(c, comparable),
        lag_ns: lag_ns(c, comparable),
        cpu_ns: work_cpu_ns(c),
        off_cpu_ns: off_cpu_ns(c),
    }
}

/// A time of the evidence as a signed integer (times are below 2^63 ns,
/// 292 years of uptime).
#[inline]
fn signed(t: u64) -> i64 {
    t as i64
}

impl CycleTimes for CycleRecord {
    type Phase = str;
    fn cycle(&self) -> u64 {
        self.cycle
    }
    fn phase(&self) -> &str {
        &self.phase
    }
    fn start_ns(&self) -> i64 {
        signed(self.start_ns)
    }
    fn end_ns(&self) -> Option<i64> {
        self.end_ns.map(signed)
    }
    fn target_ns(&self) -> Option<i64> {
        self.target_ns.map(signed)
    }
    fn wake_ns(&self) -> Option<i64> {
        self.wake_ns.map(signed)
    }
    fn overdue(&self) -> bool {
        self.overdue
    }
    fn cpu_ns(&self) -> Option<i64> {
        self.cpu_ns.map(signed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cycle record with the fields the definitions read.
    fn rec(cycle: u64, phase: &str, start: u64, end: Option<u64>) -> CycleRecord {
        CycleRecord {
            kind: Default::default(),
            cycle,
            phase: phase.into(),
            start_ns: start,
            end_ns: end,
            cpu_ns: None,
            spin_margin_ns: None,
            spin_ns: None,
            target_ns: None,
            sleep_start_ns: None,
            wake_ns: None,
            overdue: false,
            skipped: 0,
            pace: Default::default(),
            arrival_ns: None,
            read_ns: None,
            arrival_bound_ns: None,
            input_seq: None,
            spans_dropped: 0,
            samples: Vec::new(),
            samples_dropped: 0,
            spans: Vec::new(),
            values: Default::default(),
        }
    }

    #[test]
    fn each_definition_against_a_hand_computed_case() {
        // A 10 ms loop: cycle 7 released at 1,000,000,000 ns, woke 150 µs
        // late and started 20 µs after waking, worked 6 ms.
        let prev = rec(6, "running", 990_050_000, Some(995_000_000));
        let mut c = rec(7, "running", 1_000_170_000, Some(1_006_170_000));
        c.target_ns = Some(1_000_000_000);
        c.wake_ns = Some(1_000_150_000);
        let f = figures(Some(&prev), &c, true);
        // period = 1,000,170,000 − 990,050,000 = 10,120,000
        assert_eq!(f.period_ns, Some(10_120_000));
        // work = 1,006,170,000 − 1,000,170,000 = 6,000,000
        assert_eq!(f.work_ns, Some(6_000_000));
        // overshoot = wake − target = 150,000
        assert_eq!(f.overshoot_ns, Some(150_000));
        // lag = start − target = 170,000
        assert_eq!(f.lag_ns, Some(170_000));

        // Clocks that cannot be subtracted: no overshoot, no lag; period
        // and work do not involve the target and stay.
        let f = figures(Some(&prev), &c, false);
        assert_eq!((f.overshoot_ns, f.lag_ns), (None, None));
        assert_eq!(f.period_ns, Some(10_120_000));

        // Overdue: it did not wait for its release point, so no overshoot,
        // but a lag (here 2 ms late).
        let mut late = c.clone();
        late.overdue = true;
        late.start_ns = 1_002_000_000;
        let f = figures(Some(&prev), &late, true);
        assert_eq!(f.overshoot_ns, None);
        assert_eq!(f.lag_ns, Some(2_000_000));

        // Unfinished: no work.
        assert_eq!(work_ns(&rec(8, "running", 5, None)), None);
    }

    #[test]
    fn work_cpu_and_off_cpu_against_hand_computed_cases() {
        // 6 ms of work of which the thread ran 4.5 ms: off-CPU is
        // 6,000,000 − 4,500,000 = 1,500,000 ns.
        let mut c = rec(7, "running", 1_000_000_000, Some(1_006_000_000));
        c.cpu_ns = Some(4_500_000);
        let f = figures(None, &c, true);
        assert_eq!(f.cpu_ns, Some(4_500_000));
        assert_eq!(f.off_cpu_ns, Some(1_500_000));
        // The CPU read's skew can make CPU exceed wall by a little: off-CPU
        // is clamped at 0, the CPU time is kept as recorded.
        c.cpu_ns = Some(6_000_400);
        assert_eq!(off_cpu_ns(&c), Some(0));
        assert_eq!(work_cpu_ns(&c), Some(6_000_400));
        // Not recorded (spans or off mode): neither figure.
        c.cpu_ns = None;
        assert_eq!((work_cpu_ns(&c), off_cpu_ns(&c)), (None, None));
        // A cycle that never ended has no work, so no CPU figure either,
        // even if another producer wrote one.
        let mut open = rec(8, "running", 5, None);
        open.cpu_ns = Some(3);
        assert_eq!((work_cpu_ns(&open), off_cpu_ns(&open)), (None, None));
    }

    #[test]
    fn a_period_only_inside_a_segment() {
        let a = rec(6, "warmup", 0, None);
        let b = rec(7, "running", 10, None);
        let gap = rec(9, "running", 30, None);
        let next = rec(10, "running", 40, None);
        // No previous cycle, a phase change, an index gap: no period.
        assert_eq!(period_ns(None, &a), None);
        assert!(!continues(Some(&a), &b));
        assert_eq!(period_ns(Some(&a), &b), None);
        assert_eq!(period_ns(Some(&b), &gap), None);
        // Same phase, next index: 40 − 30.
        assert!(continues(Some(&gap), &next));
        assert_eq!(period_ns(Some(&gap), &next), Some(10));
        // u64::MAX has no successor; no overflow.
        assert!(!continues(Some(&rec(u64::MAX, "running", 0, None)), &next));
    }
}
