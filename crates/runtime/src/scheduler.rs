//! The loop scheduler: absolute deadlines, sleep-then-spin, overrun
//! policies and measured `dt`.
//!
//! # The schedule
//!
//! Release points lie on one timeline: each deadline is the previous one
//! plus one period, never "now plus period", so the schedule does not drift.
//! [`Scheduler::wait`] waits for the next release point:
//!
//! * more than `spin_margin` away: sleep (absolute) until
//!   `deadline − spin_margin`, then spin on the clock to the deadline;
//! * within `spin_margin`: spin to the deadline;
//! * already passed: an **overrun** of the previous cycle. The cycle starts at
//!   once, and the policy decides the next deadline:
//!   * [`OverrunPolicy::Rebase`]: the schedule is re-phased onto the overdue
//!     cycle's start: the next deadline is that start plus one period. No
//!     catch-up, no replayed ticks.
//!   * [`OverrunPolicy::KeepPhase`]: the original timeline resumes. If whole
//!     release points passed while the previous cycle overran, they are
//!     counted as skipped (not replayed); the cycle runs for the latest
//!     release point that has passed, and the next deadline is the one after.
//!
//! The spin never lasts longer than the margin, because it only starts once
//! the deadline is at most the margin away.
//!
//! # The margin
//!
//! Fixed (`spin_margin_ns`, 200 µs by default), or adaptive
//! (`auto_margin`): then `spin_margin_ns` is only the margin of the first
//! wait, and after each sleep the margin follows the OS sleep latency the
//! scheduler has seen lately, within a floor and the same ceiling as a
//! fixed margin ([`crate::margin`]). Every [`Tick`] says the margin its
//! wait used, and the recorder writes it with the cycle.
//!
//! # `dt_measured`
//!
//! Every [`Tick`] carries the measured time since the previous cycle start
//! (for the first cycle, since [`Scheduler::start`]), bounded to
//! `max_dt`: never the nominal period.

use looptime_capture::ClockDomain;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::clock::LoopClock;
use crate::margin::AutoMargin;

/// Default spin margin: sleep ends this long before the deadline, the rest
/// is spun. Chosen above this class of machine's typical timer wake-up
/// latency (see `docs/realtime.md`).
pub const DEFAULT_SPIN_MARGIN_NS: u64 = 200_000;
/// The margin may be at most this fraction of the period…
pub const SPIN_MARGIN_MAX_PERIOD_FRACTION: f64 = 0.5;
/// …and never more than this, whatever the period.
pub const SPIN_MARGIN_CEILING_NS: u64 = 2_000_000;

/// What happens when a release point has already passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OverrunPolicy {
    /// Start at once and re-phase the schedule onto this start.
    #[default]
    Rebase,
    /// Start at once and resume the original timeline, skipping (and
    /// counting) whole release points that passed.
    KeepPhase,
}

impl OverrunPolicy {
    /// Name as written in config and manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            OverrunPolicy::Rebase => "rebase",
            OverrunPolicy::KeepPhase => "keep-phase",
        }
    }
}

/// Scheduler settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SchedulerConfig {
    /// Period between release points (the effective period, after rtf).
    pub period_ns: u64,
    /// Sleep ends this long before the deadline; the rest is spun. With
    /// `auto_margin`, the margin of the first wait only.
    pub spin_margin_ns: u64,
    /// Adapt the margin to the OS sleep latency seen lately
    /// ([`crate::margin`]), within a floor and the ceiling.
    pub auto_margin: bool,
    /// The overrun policy.
    pub policy: OverrunPolicy,
    /// Upper bound of `dt_measured`.
    pub max_dt_ns: u64,
    /// The compute budget, when declared: a cycle whose work (wake to the
    /// next wait's start) is longer counts as a budget overrun, for
    /// statistics only; the release timeline does not change.
    pub compute_budget_ns: Option<u64>,
    /// The deadline tolerance, when declared: a wake later than its release
    /// point plus it is a wake miss, and a work end (the next wait's start)
    /// later than the next release point plus it a completion miss.
    pub deadline_tolerance_ns: Option<u64>,
}

/// Budget overruns, wake misses and completion misses a scheduler counted
/// (each 0 unless its figure is declared; uncapped, always 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Misses {
    /// Cycles whose work was longer than the compute budget.
    pub budget_overruns: u64,
    /// Wakes later than their release point plus the tolerance.
    pub wake_misses: u64,
    /// Work ends later than the next release point plus the tolerance.
    pub completion_misses: u64,
}

impl SchedulerConfig {
    /// Defaults for `period_ns`: the default margin (clamped to its ceiling),
    /// rebase, and `dt` bounded at three periods.
    pub fn new(period_ns: u64) -> Self {
        Self {
            period_ns,
            spin_margin_ns: DEFAULT_SPIN_MARGIN_NS.min(Self::margin_ceiling(period_ns)),
            auto_margin: false,
            policy: OverrunPolicy::Rebase,
            max_dt_ns: period_ns.saturating_mul(3),
            compute_budget_ns: None,
            deadline_tolerance_ns: None,
        }
    }

    /// The largest margin accepted for `period_ns`.
    pub fn margin_ceiling(period_ns: u64) -> u64 {
        ((period_ns as f64 * SPIN_MARGIN_MAX_PERIOD_FRACTION) as u64).min(SPIN_MARGIN_CEILING_NS)
    }
}

/// A scheduler setting out of range.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchedulerError {
    /// The period is zero.
    #[error("the period must be positive")]
    ZeroPeriod,
    /// The period is longer than [`MAX_PERIOD_NS`] (a rate below one cycle
    /// an hour is a mistake, and its deadlines would overflow).
    #[error("the period {period_ns} ns is longer than one hour ({} ns): give a rate above one cycle an hour", MAX_PERIOD_NS)]
    PeriodTooLong {
        /// The period asked for.
        period_ns: u64,
    },
    /// The margin is above its ceiling.
    #[error("spin margin {margin_ns} ns exceeds its ceiling of {ceiling_ns} ns (half the period, at most 2 ms)")]
    MarginTooLarge {
        /// The margin asked for.
        margin_ns: u64,
        /// The ceiling for this period.
        ceiling_ns: u64,
    },
    /// An input pacer's `max_dt` of zero: no `dt` could pass.
    #[error("max_dt must be positive: a zero bound lets no dt pass")]
    ZeroMaxDt,
    /// A compute budget or deadline tolerance above [`MAX_DECLARED_NS`].
    #[error("{name} {ns} ns is out of range: 0 to 10,000,000 µs (absent: not declared)")]
    DeclaredOutOfRange {
        /// `compute budget` or `deadline tolerance`.
        name: &'static str,
        /// The value asked for.
        ns: u64,
    },
    /// `max_dt` below one period.
    #[error("max_dt {max_dt_ns} ns is below one period ({period_ns} ns)")]
    MaxDtTooSmall {
        /// The bound asked for.
        max_dt_ns: u64,
        /// The period.
        period_ns: u64,
    },
}

/// The largest compute budget or deadline tolerance a scheduler takes:
/// 10 s (serve's `0 to 10,000,000 µs`).
pub const MAX_DECLARED_NS: u64 = 10_000_000_000;

/// The longest period a scheduler takes: one hour, in ns.
pub const MAX_PERIOD_NS: u64 = 3_600_000_000_000;

/// What one [`Scheduler::wait`] did (all zero before the first wait).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tick {
    /// Cycle index (0 for the first wait after `start`).
    pub cycle: u64,
    /// The release point this cycle runs for.
    pub target_ns: u64,
    /// When the wait began.
    pub wait_start_ns: u64,
    /// When the (absolute) sleep returned; equal to `wait_start_ns` when the
    /// scheduler did not sleep.
    pub sleep_return_ns: u64,
    /// When the wait ended (after the spin); the cycle starts here.
    pub wake_ns: u64,
    /// Time spent spinning.
    pub spin_ns: u64,
    /// The spin margin this wait used (fixed, or the adaptive margin's value
    /// at this wait).
    pub spin_margin_ns: u64,
    /// The release point had passed when the wait began.
    pub overdue: bool,
    /// Whole release points skipped (keep-phase only).
    pub skipped: u32,
    /// Measured time since the previous cycle start, bounded by `max_dt`.
    pub dt_measured_ns: u64,
    /// True when `dt_measured_ns` was clamped.
    pub dt_clamped: bool,
}

impl Tick {
    /// What the recorder's `begin_cycle` takes of this tick: its release
    /// point, whether it was overdue and how many release points were
    /// skipped. The runtime's control loop, the Python binding and the C
    /// library all mark a cycle with this.
    pub fn release(&self) -> looptime_capture::Release {
        looptime_capture::Release::at(self.target_ns)
            .with_overdue(self.overdue)
            .with_skipped(self.skipped)
            .with_spin(Some(self.spin_margin_ns), Some(self.spin_ns))
    }
}

/// The absolute-deadline scheduler, generic over its clock.
#[derive(Debug)]
pub struct Scheduler<C: LoopClock> {
    clock: C,
    cfg: SchedulerConfig,
    next_deadline: u64,
    prev_start: u64,
    cycle: u64,
    overruns: u64,
    skipped: u64,
    spin_total_ns: u64,
    started: bool,
    /// The margin of the next wait.
    margin_ns: u64,
    /// The adaptive margin's estimator (`auto_margin`).
    auto: Option<AutoMargin>,
    /// Lowest and highest margin used so far.
    margin_range: (u64, u64),
    /// The previous cycle's release point and wake, until its work is
    /// judged at the next wait (none after a restart or rephase).
    judged: Option<(u64, u64)>,
    misses: Misses,
}

impl<C: LoopClock> Scheduler<C> {
    /// A scheduler on `clock`.
    ///
    /// # Errors
    /// [`SchedulerError`] when a setting is out of range.
    pub fn new(clock: C, cfg: SchedulerConfig) -> Result<Self, SchedulerError> {
        if cfg.period_ns == 0 {
            return Err(SchedulerError::ZeroPeriod);
        }
        if cfg.period_ns > MAX_PERIOD_NS {
            return Err(SchedulerError::PeriodTooLong {
                period_ns: cfg.period_ns,
            });
        }
        let ceiling = SchedulerConfig::margin_ceiling(cfg.period_ns);
        if cfg.spin_margin_ns > ceiling {
            return Err(SchedulerError::MarginTooLarge {
                margin_ns: cfg.spin_margin_ns,
                ceiling_ns: ceiling,
            });
        }
        for (name, v) in [
            ("compute budget", cfg.compute_budget_ns),
            ("deadline tolerance", cfg.deadline_tolerance_ns),
        ] {
            if let Some(ns) = v.filter(|&ns| ns > MAX_DECLARED_NS) {
                return Err(SchedulerError::DeclaredOutOfRange { name, ns });
            }
        }
        if cfg.max_dt_ns < cfg.period_ns {
            return Err(SchedulerError::MaxDtTooSmall {
                max_dt_ns: cfg.max_dt_ns,
                period_ns: cfg.period_ns,
            });
        }
        Ok(Self {
            clock,
            cfg,
            next_deadline: 0,
            prev_start: 0,
            cycle: 0,
            overruns: 0,
            skipped: 0,
            spin_total_ns: 0,
            started: false,
            margin_ns: cfg.spin_margin_ns,
            auto: cfg.auto_margin.then(|| AutoMargin::new(ceiling)),
            margin_range: (cfg.spin_margin_ns, cfg.spin_margin_ns),
            judged: None,
            misses: Misses::default(),
        })
    }

    /// Anchor the timeline: the first release point is one period from now.
    pub fn start(&mut self) {
        let now = self.clock.now_ns();
        self.start_at(now + self.cfg.period_ns, now);
    }

    /// Anchor the timeline on an explicit first release point; `origin_ns` is
    /// what the first `dt_measured` is measured from.
    pub fn start_at(&mut self, first_deadline_ns: u64, origin_ns: u64) {
        self.next_deadline = first_deadline_ns;
        self.prev_start = origin_ns;
        self.started = true;
    }

    /// Start a new timeline at the next wait, as a fresh scheduler would:
    /// its first release point one period after that wait begins, its first
    /// `dt_measured` measured from it. The counters keep counting (a
    /// session's rollouts take their own counts as differences). For a
    /// scheduler reused across rollouts, so the pause between them is
    /// neither an overrun nor deadline lag.
    pub fn restart(&mut self) {
        self.started = false;
        self.judged = None;
    }

    /// Wait for the next release point; see the module docs.
    pub fn wait(&mut self) -> Tick {
        self.wait_with(|clock, until_ns| clock.sleep_until_ns(until_ns))
    }

    /// [`wait`](Self::wait), with the sleep done by `sleep(clock, until_ns)`
    /// instead of `clock.sleep_until_ns(until_ns)`: a binding wraps it to
    /// release its interpreter lock for the sleep only, and keep it through
    /// the spin. `sleep` is called at most once, only when the release
    /// point is more than the spin margin away.
    pub fn wait_with(&mut self, sleep: impl FnOnce(&C, u64)) -> Tick {
        if !self.started {
            self.start();
        }
        let period = self.cfg.period_ns;
        let margin = self.margin_ns;
        let deadline = self.next_deadline;
        let wait_start = self.clock.now_ns();
        self.judge_work(wait_start);
        let (target, sleep_return, wake, spin, overdue, skipped);
        if wait_start < deadline {
            let sleep_to = deadline - margin.min(deadline - wait_start);
            let slept = deadline - wait_start > margin;
            if slept {
                sleep(&self.clock, sleep_to);
            }
            let after_sleep = self.clock.now_ns();
            if let (true, Some(auto)) = (slept, self.auto.as_mut()) {
                // How late the sleep returned: the OS sleep latency.
                self.margin_ns = auto.observe(after_sleep.saturating_sub(sleep_to));
            }
            let woke = self.clock.spin_until_ns(deadline);
            sleep_return = after_sleep;
            spin = woke.saturating_sub(after_sleep);
            wake = woke;
            target = deadline;
            overdue = false;
            skipped = 0;
            self.next_deadline = deadline + period;
        } else {
            overdue = true;
            self.overruns += 1;
            sleep_return = wait_start;
            wake = wait_start;
            spin = 0;
            match self.cfg.policy {
                OverrunPolicy::Rebase => {
                    target = deadline;
                    skipped = 0;
                    self.next_deadline = wake + period;
                }
                OverrunPolicy::KeepPhase => {
                    let whole = (wait_start - deadline) / period;
                    target = deadline + whole * period;
                    skipped = whole.min(u32::MAX as u64) as u32;
                    self.skipped += whole;
                    self.next_deadline = target + period;
                }
            }
        }
        self.spin_total_ns += spin;
        self.margin_range = (
            self.margin_range.0.min(margin),
            self.margin_range.1.max(margin),
        );
        let elapsed = wake.saturating_sub(self.prev_start);
        let dt = elapsed.min(self.cfg.max_dt_ns);
        self.prev_start = wake;
        self.judge_wake(target, wake);
        let tick = Tick {
            cycle: self.cycle,
            target_ns: target,
            wait_start_ns: wait_start,
            sleep_return_ns: sleep_return,
            wake_ns: wake,
            spin_ns: spin,
            spin_margin_ns: margin,
            overdue,
            skipped,
            dt_measured_ns: dt,
            dt_clamped: elapsed > self.cfg.max_dt_ns,
        };
        self.cycle += 1;
        tick
    }

    /// Re-anchor after a pause or phase change without counting the gap as
    /// an overrun: the next release point is one period from now.
    pub fn rephase(&mut self) {
        let now = self.clock.now_ns();
        self.next_deadline = now + self.cfg.period_ns;
        // The cycle before the gap ended before it: its work is not judged.
        self.judged = None;
    }

    /// Count the previous cycle's budget overrun and completion miss, its
    /// work having ended at `work_end` (this wait's start).
    fn judge_work(&mut self, work_end: u64) {
        let Some((target, wake)) = self.judged.take() else {
            return;
        };
        let work = work_end.saturating_sub(wake);
        if self.cfg.compute_budget_ns.is_some_and(|b| work > b) {
            self.misses.budget_overruns += 1;
        }
        if let Some(t) = self.cfg.deadline_tolerance_ns {
            if work_end > target + self.cfg.period_ns + t {
                self.misses.completion_misses += 1;
            }
        }
    }

    /// Count a wake miss, and keep this cycle to judge its work at the next
    /// wait. All on the scheduler's clock: uncapped (the simulation clock,
    /// which stands still while the cycle works and is at each release
    /// point when it wakes) nothing is ever counted.
    fn judge_wake(&mut self, target: u64, wake: u64) {
        if self
            .cfg
            .deadline_tolerance_ns
            .is_some_and(|t| wake > target + t)
        {
            self.misses.wake_misses += 1;
        }
        self.judged = Some((target, wake));
    }

    /// The next release point.
    pub fn next_deadline_ns(&self) -> u64 {
        self.next_deadline
    }
    /// Cycles that found their release point already passed.
    pub fn overruns(&self) -> u64 {
        self.overruns
    }
    /// Budget overruns, wake misses and completion misses so far (each
    /// counted only when its figure is declared in the config). A cycle's
    /// work is judged at the next wait, so the last cycle before a
    /// `restart`, a `rephase` or the end is not.
    pub fn misses(&self) -> Misses {
        self.misses
    }
    /// Release points skipped (keep-phase).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
    /// Waits so far.
    pub fn cycles(&self) -> u64 {
        self.cycle
    }
    /// Total time spent spinning.
    pub fn spin_total_ns(&self) -> u64 {
        self.spin_total_ns
    }
    /// The margin the next wait uses.
    pub fn spin_margin_ns(&self) -> u64 {
        self.margin_ns
    }
    /// The lowest and highest margin the waits so far used (the configured
    /// margin before the first wait).
    pub fn spin_margin_range_ns(&self) -> (u64, u64) {
        self.margin_range
    }
    /// The settings.
    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }
    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }
    /// The domain of the targets it hands out.
    pub fn domain(&self) -> ClockDomain {
        self.clock.domain()
    }
}
