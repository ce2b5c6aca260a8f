//! The loop scheduler: absolute deadlines, sleep-then-spin, overrun
//! policies and the measured dt, handed to C as a tick per wait.

use looptime_capture::ClockDomain;
use looptime_runtime::clock::{LoopClock, PacedClock};
use looptime_runtime::scheduler::{OverrunPolicy, Scheduler, SchedulerConfig};

use crate::consts::*;
use crate::error::{fail, guard, null_error, Fail};
use crate::ptr::{free_handle, handle, handle_ref, put};

/// Scheduler settings; start from `looptime_scheduler_config_default`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SchedulerSettings {
    /// The nominal period, in ns (> 0); release points are `period_ns / rtf`
    /// apart on the host clock, or `period_ns` apart on the simulation
    /// clock when `rtf` is 0.
    pub period_ns: u64,
    /// Sleep ends this long before the deadline; the rest is spun. At most
    /// half the period and 2 ms.
    pub spin_margin_ns: u64,
    /// `LOOPTIME_POLICY_REBASE` or `LOOPTIME_POLICY_KEEP_PHASE`.
    pub policy: u32,
    /// Upper bound of `dt_measured_ns` (at least one period).
    pub max_dt_ns: u64,
    /// Adapt the margin to the OS sleep latency seen lately, between 50 µs
    /// and the ceiling (`spin_margin_ns` is then the first wait's margin).
    /// False by default.
    pub auto_margin: bool,
    /// The real-time factor: 1 (the default) paces in real time; 0 runs
    /// uncapped on the simulation clock, every wait returning at once with
    /// the nominal schedule's release points (as `serve --rtf 0`); another
    /// value paces at `period_ns / rtf`. At most 1000.
    pub rtf: f64,
    /// The compute budget (at most 10 s), or `LOOPTIME_UNDECLARED` (the
    /// default): a cycle whose work (its wake to the next wait) is longer
    /// counts as a budget overrun (`looptime_scheduler_misses`), for
    /// statistics only. Give the same value to
    /// `looptime_builder_compute_budget_ns` so that the evidence declares it.
    pub compute_budget_ns: u64,
    /// The deadline tolerance (at most 10 s), or `LOOPTIME_UNDECLARED` (the
    /// default): a wake later than its release point plus it is a wake
    /// miss, a work end later than the next release point plus it a
    /// completion miss. Give it to `looptime_builder_deadline_tolerance_ns`
    /// too.
    pub deadline_tolerance_ns: u64,
}

abi_layout!(SchedulerSettings, size 64,
    period_ns @ 0, spin_margin_ns @ 8, policy @ 16, max_dt_ns @ 24, auto_margin @ 32, rtf @ 40,
    compute_budget_ns @ 48, deadline_tolerance_ns @ 56);

/// The clock domain a `LOOPTIME_CLOCK_*` constant names.
pub(crate) fn domain_of(clock: u32) -> Result<ClockDomain, Fail> {
    match clock {
        LOOPTIME_CLOCK_HOST_MONOTONIC => Ok(ClockDomain::HostMonotonic),
        LOOPTIME_CLOCK_SIMULATION => Ok(ClockDomain::Simulation),
        other => Err(fail(
            LOOPTIME_ERR_INVALID,
            format!("clock {other} is neither LOOPTIME_CLOCK_HOST_MONOTONIC nor LOOPTIME_CLOCK_SIMULATION"),
        )),
    }
}

/// The defaults for `period_ns`: a fixed 200 µs spin margin (less for short
/// periods), rebase, and `dt` bounded at three periods.
#[no_mangle]
pub extern "C" fn looptime_scheduler_config_default(period_ns: u64) -> SchedulerSettings {
    // Integer and float arithmetic only: nothing here can panic.
    let c = SchedulerConfig::new(period_ns);
    SchedulerSettings {
        period_ns: c.period_ns,
        spin_margin_ns: c.spin_margin_ns,
        policy: LOOPTIME_POLICY_REBASE,
        max_dt_ns: c.max_dt_ns,
        auto_margin: c.auto_margin,
        rtf: 1.0,
        compute_budget_ns: LOOPTIME_UNDECLARED,
        deadline_tolerance_ns: LOOPTIME_UNDECLARED,
    }
}

/// A declared figure: `LOOPTIME_UNDECLARED` is none.
fn declared(ns: u64) -> Option<u64> {
    (ns != LOOPTIME_UNDECLARED).then_some(ns)
}

/// The absolute-deadline scheduler: on the host's monotonic clock, or on
/// the simulation clock when uncapped (`rtf = 0`).
#[derive(Debug)]
pub struct CScheduler {
    pub(crate) s: Scheduler<PacedClock>,
}

/// What one `looptime_scheduler_wait` did.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tick {
    /// Cycle index (0 for the first wait).
    pub cycle: u64,
    /// The release point this cycle runs for (host monotonic ns).
    pub target_ns: u64,
    /// When the wait began.
    pub wait_start_ns: u64,
    /// When the absolute sleep returned.
    pub sleep_return_ns: u64,
    /// When the wait ended; the cycle starts here.
    pub wake_ns: u64,
    /// Time spent spinning.
    pub spin_ns: u64,
    /// Measured time since the previous cycle start, bounded by `max_dt_ns`:
    /// the `dt` to hand the controller.
    pub dt_measured_ns: u64,
    /// Whole release points skipped (keep-phase only).
    pub skipped: u32,
    /// The release point had passed when the wait began (an overrun).
    pub overdue: bool,
    /// `dt_measured_ns` was clamped to `max_dt_ns`.
    pub dt_clamped: bool,
    /// The spin margin this wait used (the adaptive margin's value at this
    /// wait, with `auto_margin`).
    pub spin_margin_ns: u64,
}

abi_layout!(Tick, size 72,
    cycle @ 0, target_ns @ 8, wait_start_ns @ 16, sleep_return_ns @ 24, wake_ns @ 32,
    spin_ns @ 40, dt_measured_ns @ 48, skipped @ 56, overdue @ 60, dt_clamped @ 61,
    spin_margin_ns @ 64);

/// The C view of the runtime's one `Tick`: the same fields, in the order
/// (and so the layout) that `looptime.h` fixes.
impl From<looptime_runtime::scheduler::Tick> for Tick {
    fn from(t: looptime_runtime::scheduler::Tick) -> Tick {
        let looptime_runtime::scheduler::Tick {
            cycle,
            target_ns,
            wait_start_ns,
            sleep_return_ns,
            wake_ns,
            spin_ns,
            spin_margin_ns,
            overdue,
            skipped,
            dt_measured_ns,
            dt_clamped,
        } = t;
        Tick {
            cycle,
            target_ns,
            wait_start_ns,
            sleep_return_ns,
            wake_ns,
            spin_ns,
            dt_measured_ns,
            skipped,
            overdue,
            dt_clamped,
            spin_margin_ns,
        }
    }
}

/// A scheduler with `settings` (NULL: the defaults for 100 Hz), written to
/// `*out`. The first release point is one period after the first wait.
///
/// # Safety
/// `settings` is NULL or readable; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_new(
    settings: *const SchedulerSettings,
    out: *mut *mut CScheduler,
) -> i32 {
    guard("looptime_scheduler_new", || {
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        // SAFETY: the caller's contract.
        let s = unsafe { settings.as_ref() }
            .copied()
            .unwrap_or_else(|| looptime_scheduler_config_default(10_000_000));
        let policy = match s.policy {
            LOOPTIME_POLICY_REBASE => OverrunPolicy::Rebase,
            LOOPTIME_POLICY_KEEP_PHASE => OverrunPolicy::KeepPhase,
            other => {
                return Err(fail(
                    LOOPTIME_ERR_INVALID,
                    format!("policy {other} is neither LOOPTIME_POLICY_REBASE nor LOOPTIME_POLICY_KEEP_PHASE"),
                ))
            }
        };
        if !(s.rtf.is_finite() && (0.0..=1000.0).contains(&s.rtf)) {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!("rtf {} is neither 0 (uncapped) nor a real-time factor up to 1000 (start from looptime_scheduler_config_default, which sets 1)", s.rtf),
            ));
        }
        let period_ns = if s.rtf == 0.0 {
            s.period_ns
        } else {
            ((s.period_ns as f64) / s.rtf).round() as u64
        };
        let cfg = SchedulerConfig {
            period_ns,
            spin_margin_ns: s.spin_margin_ns,
            auto_margin: s.auto_margin,
            policy,
            max_dt_ns: s.max_dt_ns,
            compute_budget_ns: declared(s.compute_budget_ns),
            deadline_tolerance_ns: declared(s.deadline_tolerance_ns),
        };
        let s = Scheduler::new(PacedClock::for_rtf(s.rtf), cfg)
            .map_err(|e| fail(LOOPTIME_ERR_INVALID, e.to_string()))?;
        // SAFETY: checked non-NULL above.
        unsafe { out.write(Box::into_raw(Box::new(CScheduler { s }))) };
        Ok(LOOPTIME_OK)
    })
}

/// The clock of the scheduler's release points, to `*clock`:
/// `LOOPTIME_CLOCK_SIMULATION` when uncapped (`rtf = 0`), else
/// `LOOPTIME_CLOCK_HOST_MONOTONIC`. Give it to
/// `looptime_builder_target_clock`.
///
/// # Safety
/// `s` is NULL or a live scheduler; `clock` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_clock(s: *const CScheduler, clock: *mut u32) -> i32 {
    guard("looptime_scheduler_clock", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_ref(s, "scheduler") }?;
        let c = match h.s.clock().domain() {
            ClockDomain::Simulation => LOOPTIME_CLOCK_SIMULATION,
            _ => LOOPTIME_CLOCK_HOST_MONOTONIC,
        };
        // SAFETY: the caller's contract.
        unsafe { put(clock, c, "clock pointer") }?;
        Ok(LOOPTIME_OK)
    })
}

/// Release a scheduler (NULL is ignored).
///
/// # Safety
/// `s` is NULL or a scheduler from `looptime_scheduler_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_free(s: *mut CScheduler) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(s, "looptime_scheduler_free") }
}

/// Wait for the next release point (sleep to `deadline − margin`, then
/// spin) and describe it in `*tick`.
///
/// # Safety
/// `s` is NULL or a live scheduler; `tick` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_wait(s: *mut CScheduler, tick: *mut Tick) -> i32 {
    guard("looptime_scheduler_wait", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(s, "scheduler") }?;
        if tick.is_null() {
            return Err(null_error("tick pointer"));
        }
        // SAFETY: checked non-NULL above.
        unsafe { tick.write(Tick::from(h.s.wait())) };
        Ok(LOOPTIME_OK)
    })
}

/// Re-anchor after a pause without counting the gap as an overrun: the
/// next release point is one period from now.
///
/// # Safety
/// `s` is NULL or a live scheduler.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_rephase(s: *mut CScheduler) -> i32 {
    guard("looptime_scheduler_rephase", || {
        // SAFETY: the caller's contract.
        unsafe { handle(s, "scheduler") }?.s.rephase();
        Ok(LOOPTIME_OK)
    })
}

/// Overruns and skipped release points so far.
///
/// # Safety
/// `s` is NULL or a live scheduler; `overruns` and `skipped` are NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_counts(
    s: *const CScheduler,
    overruns: *mut u64,
    skipped: *mut u64,
) -> i32 {
    guard("looptime_scheduler_counts", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_ref(s, "scheduler") }?;
        // SAFETY: the caller's contract.
        unsafe {
            put(overruns, h.s.overruns(), "overruns")?;
            put(skipped, h.s.skipped(), "skipped")?;
        }
        Ok(LOOPTIME_OK)
    })
}

/// Budget overruns, wake misses and completion misses so far, each counted
/// only when its figure was declared in the settings (0 otherwise, and
/// always 0 uncapped). A cycle's work is judged at the next wait, so the
/// last cycle before `looptime_scheduler_rephase` is not.
///
/// # Safety
/// `s` is NULL or a live scheduler; each out pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_misses(
    s: *const CScheduler,
    budget_overruns: *mut u64,
    wake_misses: *mut u64,
    completion_misses: *mut u64,
) -> i32 {
    guard("looptime_scheduler_misses", || {
        // SAFETY: the caller's contract.
        let m = unsafe { handle_ref(s, "scheduler") }?.s.misses();
        // SAFETY: the caller's contract.
        unsafe {
            put(budget_overruns, m.budget_overruns, "budget_overruns")?;
            put(wake_misses, m.wake_misses, "wake_misses")?;
            put(completion_misses, m.completion_misses, "completion_misses")?;
        }
        Ok(LOOPTIME_OK)
    })
}
