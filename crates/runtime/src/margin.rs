//! The adaptive spin margin (`spin_margin = auto`): a bounded,
//! allocation-free estimate of the OS sleep latency the scheduler has seen
//! lately, and the margin taken from it.
//!
//! The estimator keeps the last [`WINDOW`] sleep latencies (how late each
//! absolute sleep returned after the instant it was asked to end at) in a
//! fixed array. After each sleep the margin becomes
//!
//! ```text
//! margin = clamp(second-largest latency in the window × 5/4 + 20 µs,
//!                floor, ceiling)
//! ```
//!
//! * the **second** largest, so that one stray wake-up (an interrupt storm,
//!   a migration) does not set the margin for a whole window, while two do:
//!   over 128 sleeps that is about the 98.4th percentile;
//! * × 5/4 + 20 µs of headroom, because the next sleep's latency is not the
//!   last ones';
//! * the **floor** ([`AUTO_MARGIN_FLOOR_NS`], 50 µs, or the ceiling when that
//!   is lower) keeps a margin for the spin's own start-up, and the
//!   **ceiling** is the fixed margin's (half the period, at most 2 ms), so
//!   that the spin costs at most what the largest fixed margin could: the
//!   rule "sleep, then spin for at most a fixed, stated bound" holds.
//!
//! It follows a step **up** in latency after two sleeps (two large values
//! make the second largest large) and a step **down** after at most
//! [`WINDOW`] − 1 sleeps (when the large values have left the window).
//! Cycles that do not sleep (overdue, or a release point already within
//! the margin) add no sample. The window starts empty at the configured
//! margin, which stays until the first sleep.

/// Sleeps the estimate looks back over.
pub const WINDOW: usize = 128;
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
        let (mut first, mut second) = (0u64, 0u64);
        for &l in &self.latencies[..self.len] {
            if l > first {
                second = first;
                first = l;
            } else if l > second {
                second = l;
            }
        }
        // With one sample, that sample.
        let basis = if self.len < 2 { first } else { second };
        let scaled = basis
            .saturating_add(basis / 4)
            .saturating_add(AUTO_MARGIN_HEADROOM_NS);
        scaled.clamp(self.floor_ns, self.ceiling_ns)
    }
}
