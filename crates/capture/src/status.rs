//! A live status of the loop another thread may read while it runs:
//! cumulative counts, the last miss and the period's p99, kept by the
//! recorder at each cycle's end in atomics (no lock, no allocation) and
//! read as one consistent snapshot (docs/ros2.md, Status on /diagnostics).
//!
//! The writer is the control thread and never waits: a generation counter
//! is odd while it updates (a seqlock), and a reader that saw it odd or
//! changed reads again. The period's p99 comes from a bounded
//! log-linear histogram (16 sub-buckets an octave: an upper bound within
//! 6.25 % of the true value) of the start-to-start intervals.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Sub-buckets an octave of the period histogram (a power of two).
const SUB: u64 = 16;
const SUB_BITS: u32 = 4;
/// Buckets: the values 0..16 one each, then 16 per octave up to 2⁶⁴.
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * SUB) as usize;
/// How often a reader retries before it gives up on a writer that keeps
/// changing the block (a loop far faster than any status reader).
const MAX_TRIES: usize = 10_000;
/// No miss yet.
const NONE: u64 = u64::MAX;

/// What made a cycle a miss (the first that applies, in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissKind {
    /// The scheduler marked it overdue: it began after its deadline.
    Overrun,
    /// It began later than its release point plus the tolerance (declared,
    /// else 10 % of the nominal period).
    LateStart,
    /// It ended later than the next release point plus the tolerance.
    CompletionMiss,
    /// Its work exceeded the declared compute budget.
    BudgetOverrun,
}

impl MissKind {
    /// The name the status and docs use.
    pub fn name(self) -> &'static str {
        match self {
            MissKind::Overrun => "overrun",
            MissKind::LateStart => "late_start",
            MissKind::CompletionMiss => "completion_miss",
            MissKind::BudgetOverrun => "budget_overrun",
        }
    }

    fn code(self) -> u64 {
        self as u64
    }

    fn from_code(c: u64) -> Option<MissKind> {
        [
            MissKind::Overrun,
            MissKind::LateStart,
            MissKind::CompletionMiss,
            MissKind::BudgetOverrun,
        ]
        .get(c as usize)
        .copied()
    }
}

/// The last missed cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastMiss {
    /// Its cycle index.
    pub index: u64,
    /// Its start, `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// What made it a miss.
    pub kind: MissKind,
    /// By how much, ns: the deadline lag (an overrun, a late start), the
    /// end past the next release plus the tolerance, or the work past the
    /// budget.
    pub by_ns: u64,
}

/// One consistent reading of the status: every count is as of cycle
/// `index` (the last ended), none from a later one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusSnapshot {
    /// Cycles ended.
    pub cycles: u64,
    /// The index of the last ended cycle (None before the first).
    pub index: Option<u64>,
    /// Cycles the scheduler marked overdue.
    pub overruns: u64,
    /// Σ of the cycles' skipped release points.
    pub skipped: u64,
    /// Cycles that began later than their release point plus the tolerance
    /// (targets on the host clock only).
    pub late_starts: u64,
    /// Cycles that ended later than the next release point plus the
    /// tolerance (with a declared tolerance and a nominal period).
    pub completion_misses: Option<u64>,
    /// Cycles whose work exceeded the declared budget.
    pub budget_overruns: Option<u64>,
    /// Cycles that were any of the above (each counted once).
    pub misses: u64,
    /// The last of them.
    pub last_miss: Option<LastMiss>,
    /// The p99 of the start-to-start intervals (ns, an upper bound within
    /// 6.25 %), over every interval since the start; None before two cycles.
    pub period_p99_ns: Option<u64>,
    /// Intervals in the histogram.
    pub periods: u64,
}

/// The shared block: written by the recorder at each cycle's end, read by
/// any thread through [`LiveStatus::snapshot`].
#[derive(Debug)]
pub struct LiveStatus {
    generation: AtomicU64,
    cycles: AtomicU64,
    index: AtomicU64,
    overruns: AtomicU64,
    skipped: AtomicU64,
    late_starts: AtomicU64,
    completion_misses: AtomicU64,
    budget_overruns: AtomicU64,
    misses: AtomicU64,
    miss_index: AtomicU64,
    miss_start: AtomicU64,
    miss_kind: AtomicU64,
    miss_by: AtomicU64,
    periods: AtomicU64,
    hist: Box<[AtomicU64]>,
    has_completion: bool,
    has_budget: bool,
}

/// One ended cycle, in ns on the host's monotonic clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ended {
    pub index: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub target_ns: Option<u64>,
    pub overdue: bool,
    pub skipped: u64,
    /// Start − the previous cycle's start.
    pub period_ns: Option<u64>,
}

/// The thresholds the recorder judges each cycle by.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub tolerance_ns: Option<u64>,
    pub period_ns: Option<u64>,
    pub budget_ns: Option<u64>,
}

impl Limits {
    /// What made `c` a miss and by how much, if anything did.
    fn judge(&self, c: &Ended) -> [Option<(MissKind, u64)>; 4] {
        let lag = c.target_ns.map(|t| c.start_ns.saturating_sub(t));
        let tol = self
            .tolerance_ns
            .or(self.period_ns.map(|p| p / 10))
            .unwrap_or(0);
        let late = lag.filter(|&l| l > tol);
        let completion = match (self.tolerance_ns, self.period_ns, c.target_ns) {
            (Some(tol), Some(p), Some(t)) => {
                let limit = t.saturating_add(p).saturating_add(tol);
                (c.end_ns > limit).then(|| c.end_ns - limit)
            }
            _ => None,
        };
        let work = c.end_ns.saturating_sub(c.start_ns);
        let budget = self.budget_ns.and_then(|b| (work > b).then(|| work - b));
        [
            c.overdue.then(|| (MissKind::Overrun, lag.unwrap_or(0))),
            late.map(|l| (MissKind::LateStart, l)),
            completion.map(|x| (MissKind::CompletionMiss, x)),
            budget.map(|x| (MissKind::BudgetOverrun, x)),
        ]
    }
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    (SUB + u64::from(e - SUB_BITS) * SUB + sub) as usize
}

/// The largest value bucket `i` holds.
fn bucket_top(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let e = (i - SUB) / SUB + u64::from(SUB_BITS);
    let sub = (i - SUB) % SUB;
    let low = (SUB + sub) << (e - u64::from(SUB_BITS));
    low.saturating_add((1u64 << (e - u64::from(SUB_BITS))) - 1)
}

impl LiveStatus {
    pub(crate) fn new(limits: &Limits) -> LiveStatus {
        let z = || AtomicU64::new(0);
        LiveStatus {
            generation: z(),
            cycles: z(),
            index: AtomicU64::new(NONE),
            overruns: z(),
            skipped: z(),
            late_starts: z(),
            completion_misses: z(),
            budget_overruns: z(),
            misses: z(),
            miss_index: AtomicU64::new(NONE),
            miss_start: z(),
            miss_kind: z(),
            miss_by: z(),
            periods: z(),
            hist: (0..BUCKETS).map(|_| z()).collect(),
            has_completion: limits.tolerance_ns.is_some() && limits.period_ns.is_some(),
            has_budget: limits.budget_ns.is_some(),
        }
    }

    /// Count ended cycle `c` (the recorder's one writer; never waits).
    #[inline]
    pub(crate) fn record(&self, c: &Ended, limits: &Limits) {
        let verdicts = limits.judge(c);
        let g = self.generation.load(Ordering::Relaxed);
        self.generation.store(g.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let add = |a: &AtomicU64, n: u64| a.store(a.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        add(&self.cycles, 1);
        self.index.store(c.index, Ordering::Relaxed);
        add(&self.overruns, u64::from(c.overdue));
        add(&self.skipped, c.skipped);
        add(&self.late_starts, u64::from(verdicts[1].is_some()));
        add(&self.completion_misses, u64::from(verdicts[2].is_some()));
        add(&self.budget_overruns, u64::from(verdicts[3].is_some()));
        if let Some((kind, by)) = verdicts.iter().flatten().next() {
            add(&self.misses, 1);
            self.miss_index.store(c.index, Ordering::Relaxed);
            self.miss_start.store(c.start_ns, Ordering::Relaxed);
            self.miss_kind.store(kind.code(), Ordering::Relaxed);
            self.miss_by.store(*by, Ordering::Relaxed);
        }
        if let Some(p) = c.period_ns {
            add(&self.periods, 1);
            add(&self.hist[bucket(p)], 1);
        }
        self.generation.store(g.wrapping_add(2), Ordering::Release);
    }

    /// One consistent snapshot, or None when the writer kept changing the
    /// block through 10,000 tries.
    pub fn snapshot(&self) -> Option<StatusSnapshot> {
        let mut hist = vec![0u64; BUCKETS];
        for _ in 0..MAX_TRIES {
            let g1 = self.generation.load(Ordering::Acquire);
            if g1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
            let index = r(&self.index);
            let miss_index = r(&self.miss_index);
            let mut s = StatusSnapshot {
                cycles: r(&self.cycles),
                index: (index != NONE).then_some(index),
                overruns: r(&self.overruns),
                skipped: r(&self.skipped),
                late_starts: r(&self.late_starts),
                completion_misses: self.has_completion.then(|| r(&self.completion_misses)),
                budget_overruns: self.has_budget.then(|| r(&self.budget_overruns)),
                misses: r(&self.misses),
                last_miss: None,
                period_p99_ns: None,
                periods: r(&self.periods),
            };
            let (start, kind, by) = (r(&self.miss_start), r(&self.miss_kind), r(&self.miss_by));
            for (h, a) in hist.iter_mut().zip(self.hist.iter()) {
                *h = r(a);
            }
            fence(Ordering::Acquire);
            if self.generation.load(Ordering::Relaxed) != g1 {
                continue;
            }
            if miss_index != NONE {
                s.last_miss = MissKind::from_code(kind).map(|kind| LastMiss {
                    index: miss_index,
                    start_ns: start,
                    kind,
                    by_ns: by,
                });
            }
            s.period_p99_ns = p99(&hist, s.periods);
            return Some(s);
        }
        None
    }
}

/// The nearest-rank p99 of the histogram, as its bucket's top.
fn p99(hist: &[u64], n: u64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let rank = (n * 99).div_ceil(100).max(1);
    let mut seen = 0;
    for (i, &c) in hist.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(bucket_top(i));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lies_in_its_bucket_within_a_sixteenth() {
        for v in (0..5000u64).chain([1 << 20, 10_000_000, 10_000_001, u64::MAX / 3, u64::MAX]) {
            let i = bucket(v);
            let top = bucket_top(i);
            assert!(top >= v, "{v}: bucket {i} tops at {top}");
            assert!(
                i == 0 || bucket_top(i - 1) < v,
                "{v}: bucket {i} starts after it"
            );
            assert!((top - v) as f64 <= v as f64 / 16.0, "{v}: top {top}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn a_cycle_counts_once_as_a_miss_by_its_first_reason() {
        // Period 10 ms, tolerance 1 ms, budget 4 ms. A cycle released at
        // 100 ms that starts at 102 ms (lag 2 ms > 1 ms) and ends at 107 ms
        // (work 5 ms > 4 ms; 107 < 100 + 10 + 1): a late start by 2 ms and a
        // budget overrun, one miss, its kind the late start.
        let ms = 1_000_000;
        let limits = Limits {
            tolerance_ns: Some(ms),
            period_ns: Some(10 * ms),
            budget_ns: Some(4 * ms),
        };
        let st = LiveStatus::new(&limits);
        let c = Ended {
            index: 7,
            start_ns: 102 * ms,
            end_ns: 107 * ms,
            target_ns: Some(100 * ms),
            overdue: false,
            skipped: 0,
            period_ns: Some(12 * ms),
        };
        st.record(&c, &limits);
        let s = st.snapshot().unwrap();
        assert_eq!(
            (
                s.cycles,
                s.index,
                s.late_starts,
                s.budget_overruns,
                s.completion_misses,
                s.misses
            ),
            (1, Some(7), 1, Some(1), Some(0), 1)
        );
        let m = s.last_miss.unwrap();
        assert_eq!((m.index, m.kind, m.by_ns), (7, MissKind::LateStart, 2 * ms));
        // The one interval, 12 ms, is the p99: its bucket's top is at
        // least 12 ms and within 1/16 of it.
        let p = s.period_p99_ns.unwrap();
        assert!((12 * ms..=12 * ms + 12 * ms / 16).contains(&p), "{p}");
    }

    #[test]
    fn a_reader_never_sees_a_half_written_update() {
        // The writer keeps every counter equal to `cycles` (each cycle
        // overdue with one skip); a reader that mixed two updates would
        // see them differ.
        let limits = Limits {
            tolerance_ns: None,
            period_ns: None,
            budget_ns: None,
        };
        let st = std::sync::Arc::new(LiveStatus::new(&limits));
        let w = st.clone();
        let writer = std::thread::spawn(move || {
            for i in 0..200_000u64 {
                let c = Ended {
                    index: i,
                    start_ns: i,
                    end_ns: i,
                    target_ns: None,
                    overdue: true,
                    skipped: 1,
                    period_ns: Some(1_000),
                };
                w.record(&c, &limits);
            }
        });
        let mut seen = 0;
        while !writer.is_finished() {
            if let Some(s) = st.snapshot() {
                assert_eq!(s.overruns, s.cycles);
                assert_eq!(s.skipped, s.cycles);
                assert_eq!(s.periods, s.cycles);
                assert_eq!(s.index.map_or(0, |i| i + 1), s.cycles);
                seen += 1;
            }
        }
        writer.join().unwrap();
        assert_eq!(st.snapshot().unwrap().cycles, 200_000);
        assert!(seen > 0);
    }
}
