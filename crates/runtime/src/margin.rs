//! The adaptive spin margin (`spin_margin = auto`): a bounded,
//! allocation-free estimate of the OS sleep latency the scheduler has seen
//! lately, and the margin taken from it.
//!
//! The estimator keeps the last [`WINDOW`] sleep latencies (how late each
//! absolute sleep returned after the instant it was asked to end at) in a
//! fixed array. After each sleep the margin becomes
//!
//! ```text
//! margin = clamp(4th-largest latency in the window × 5/4 + 20 µs,
//!                floor, ceiling)
//! ```
//!
//! * the **4th** largest ([`RANK`]), so that a few stray wake-ups (a host
//!   stall, an interrupt storm) do not set the margin for a whole window,
//!   while a sustained rise does: over 256 sleeps that is about the 98.8th
//!   percentile. A first version took the 2nd largest of 128 (98.4th) and
//!   kept latencies beyond the ceiling; on this machine it chased
//!   millisecond stalls that no margin absorbs, and spun more than a fixed
//!   200 µs for fewer on-time starts. A second, the 4th largest of 128
//!   (97.7th), spun less but settled too low for 99 % on-time starts at
//!   100 Hz (docs/performance.md, the adaptive margin);
//! * latencies above the ceiling are left out: no margin the scheduler may
//!   use could absorb them, so they must not drive it to the ceiling (under
//!   CPU contention a 2 ms spin is itself preempted);
//! * × 5/4 + 20 µs of headroom, because the next sleep's latency is not the
//!   last ones';
//! * the **floor** ([`AUTO_MARGIN_FLOOR_NS`], 50 µs, or the ceiling when that
//!   is lower) keeps a margin for the spin's own start-up, and the
//!   **ceiling** is the fixed margin's (half the period, at most 2 ms), so
//!   that the spin costs at most what the largest fixed margin could: the
//!   rule "sleep, then spin for at most a fixed, stated bound" holds.
//!
//! It follows a step **up** in latency after [`RANK`] sleeps ([`RANK`]
//! large values make the [`RANK`]th largest large) and a step **down**
//! after at most [`WINDOW`] − [`RANK`] + 1 sleeps (when all but
//! [`RANK`] − 1 large values have left the window).
//! Cycles that do not sleep (overdue, or a release point already within
//! the margin) add no sample. The window starts empty at the configured
//! margin, which stays until the first sleep.

/// Sleeps the estimate looks back over.
pub const WINDOW: usize = 256;
/// The margin follows the `RANK`th largest latency of the window.
pub const RANK: usize = 4;
/// The lowest margin `auto` sets (unless the ceiling is lower).
pub const AUTO_MARGIN_FLOOR_NS: u64 = 50_000;
/// Added to the scaled latency.
pub const AUTO_MARGIN_HEADROOM_NS: u64 = 20_000;

/// The estimator: a ring of the last [`WINDOW`] latencies, fixed size, no
/// allocation.
#[derive(Clone, Debug)]
pub struct AutoMargin {
    latencies: [u64; WINDOW],
    next: usize,
    len: usize,
    floor_ns: u64,
    ceiling_ns: u64,
}

impl AutoMargin {
    /// An empty estimator whose margins stay within `[floor, ceiling_ns]`,
    /// the floor being [`AUTO_MARGIN_FLOOR_NS`] or the ceiling when lower.
    pub fn new(ceiling_ns: u64) -> Self {
        Self {
            latencies: [0; WINDOW],
            next: 0,
            len: 0,
            floor_ns: AUTO_MARGIN_FLOOR_NS.min(ceiling_ns),
            ceiling_ns,
        }
    }

    /// The lowest margin it sets.
    pub fn floor_ns(&self) -> u64 {
        self.floor_ns
    }

    /// The highest margin it sets.
    pub fn ceiling_ns(&self) -> u64 {
        self.ceiling_ns
    }

    /// Record one sleep's latency and return the margin for the next wait.
    pub fn observe(&mut self, latency_ns: u64) -> u64 {
        self.latencies[self.next] = latency_ns;
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
        self.margin()
    }

    /// The margin the window gives now (the floor while it is empty).
    pub fn margin(&self) -> u64 {
        // The RANK largest latencies a margin could absorb, largest first.
        let mut top = [0u64; RANK];
        let mut n = 0;
        for &l in &self.latencies[..self.len] {
            if l > self.ceiling_ns {
                continue;
            }
            n += 1;
            if l > top[RANK - 1] {
                let mut i = RANK - 1;
                while i > 0 && top[i - 1] < l {
                    top[i] = top[i - 1];
                    i -= 1;
                }
                top[i] = l;
            }
        }
        // Fewer samples than RANK: the smallest of them.
        let basis = top[RANK.min(n).max(1) - 1];
        let scaled = basis
            .saturating_add(basis / 4)
            .saturating_add(AUTO_MARGIN_HEADROOM_NS);
        scaled.clamp(self.floor_ns, self.ceiling_ns)
    }
}
