//! `Scheduler`: the absolute-deadline scheduler on the host's monotonic
//! clock, or uncapped on the simulation clock (`rtf=0`), releasing the GIL
//! while it sleeps.

use looptime_runtime::clock::{LoopClock, PacedClock};
use looptime_runtime::scheduler::{
    OverrunPolicy, Scheduler as RustScheduler, SchedulerConfig, Tick as RustTick,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use crate::recorder::Recorder;
use crate::tick::Tick;
/// The absolute-deadline scheduler: on the host's monotonic clock, at
/// `period / rtf`; or, with `rtf=0`, uncapped on the simulation clock,
/// where every wait returns at once and the release points (the ticks'
/// `target_ns`, `dt_ns`) follow the nominal period, as `serve --rtf 0`.
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct Scheduler {
    pub(crate) s: RustScheduler<PacedClock>,
    /// The period asked for, before the real-time factor.
    pub(crate) nominal_period_ns: u64,
    pub(crate) rtf: f64,
    pub(crate) tick: Py<Tick>,
    pub(crate) release_gil_during_spin: bool,
}

/// A declared compute budget or deadline tolerance, in µs, as ns: `None`
/// is not declared; else 0 to 10,000,000 µs, as serve's config takes.
fn declared_ns(name: &str, us: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let us: Option<f64> = match us.filter(|v| !v.is_none()) {
        None => None,
        Some(v) => Some(
            v.extract()
                .ok()
                .filter(|_| !v.is_instance_of::<PyBool>())
                .ok_or_else(|| {
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "{name} must be a number of microseconds, 0 to 10,000,000 (None: not declared), not {}",
                        v.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
                    ))
                })?,
        ),
    };
    match us {
        None => Ok(None),
        Some(v) if v.is_finite() && (0.0..=1e7).contains(&v) => Ok(Some((v * 1e3).round() as u64)),
        Some(v) => Err(PyValueError::new_err(format!(
            "{name} must be 0 to 10,000,000 µs (None: not declared), not {v}"
        ))),
    }
}

/// A `spin_margin_us` given as a number: microseconds, at least 0 (a
/// bool is refused, though Python counts it a number).
fn spin_margin(m: Option<&Bound<'_, PyAny>>) -> PyResult<Option<f64>> {
    let Some(m) = m else {
        return Ok(None);
    };
    let us: f64 = m
        .extract()
        .ok()
        .filter(|_| !m.is_instance_of::<PyBool>())
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "spin_margin_us must be a number of microseconds or \"auto\", not {}",
                m.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
            ))
        })?;
    if !(us.is_finite() && us >= 0.0) {
        return Err(PyValueError::new_err(format!(
            "spin_margin_us must be >= 0, not {us}"
        )));
    }
    Ok(Some(us))
}

/// The overrun policy named `policy`.
fn overrun_policy(policy: &str) -> PyResult<OverrunPolicy> {
    match policy {
        "rebase" => Ok(OverrunPolicy::Rebase),
        "keep-phase" => Ok(OverrunPolicy::KeepPhase),
        other => Err(PyValueError::new_err(format!(
            "policy must be \"rebase\" or \"keep-phase\", not {other:?}"
        ))),
    }
}

#[pymethods]
impl Scheduler {
    #[new]
    #[pyo3(signature = (period_s, spin_margin_us = None, policy = "rebase", max_dt_s = None, release_gil_during_spin = false, rtf = 1.0, compute_budget_us = None, deadline_tolerance_us = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        period_s: f64,
        spin_margin_us: Option<&Bound<'_, PyAny>>,
        policy: &str,
        max_dt_s: Option<f64>,
        release_gil_during_spin: bool,
        rtf: f64,
        compute_budget_us: Option<&Bound<'_, PyAny>>,
        deadline_tolerance_us: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        if !(period_s.is_finite() && period_s > 0.0 && period_s <= 3600.0) {
            return Err(PyValueError::new_err(format!(
                "period_s must be a positive number of seconds (at most 3600), not {period_s}"
            )));
        }
        if !(rtf.is_finite() && (0.0..=1000.0).contains(&rtf)) {
            return Err(PyValueError::new_err(format!(
                "rtf must be 0 (uncapped, on the simulation clock) or a real-time factor up to 1000, not {rtf}"
            )));
        }
        // None: 200 µs (clamped to half the period); "auto": adaptive.
        let auto = spin_margin_us.is_some_and(|m| m.extract::<String>().is_ok_and(|s| s == "auto"));
        let margin_us = spin_margin(spin_margin_us.filter(|m| !m.is_none() && !auto))?;
        let nominal_period_ns = (period_s * 1e9).round() as u64;
        let period_ns = if rtf == 0.0 {
            nominal_period_ns
        } else {
            ((nominal_period_ns as f64) / rtf).round().max(1.0) as u64
        };
        let policy = overrun_policy(policy)?;
        let mut cfg = SchedulerConfig::new(period_ns);
        if let Some(us) = margin_us {
            cfg.spin_margin_ns = (us * 1e3).round() as u64;
        }
        cfg.auto_margin = auto;
        cfg.policy = policy;
        if let Some(m) = max_dt_s {
            if !(m.is_finite() && m > 0.0) {
                return Err(PyValueError::new_err(format!(
                    "max_dt_s must be a positive number of seconds, not {m}"
                )));
            }
            cfg.max_dt_ns = (m * 1e9).round() as u64;
        }
        cfg.compute_budget_ns = declared_ns("compute_budget_us", compute_budget_us)?;
        cfg.deadline_tolerance_ns = declared_ns("deadline_tolerance_us", deadline_tolerance_us)?;
        let s = RustScheduler::new(PacedClock::for_rtf(rtf), cfg)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Scheduler {
            s,
            nominal_period_ns,
            rtf,
            tick: Py::new(py, Tick(RustTick::default()))?,
            release_gil_during_spin,
        })
    }

    /// Wait for the next release point: sleep (with the GIL released) to
    /// `deadline − spin_margin`, then spin to the deadline (holding the GIL,
    /// unless `release_gil_during_spin`). With `recorder`, mark the wait on
    /// it. Returns the scheduler's `Tick`, updated. Pending signals are
    /// handled before it returns, so Ctrl-C raises `KeyboardInterrupt` here
    /// at the latest one period after it was pressed.
    #[pyo3(signature = (recorder = None))]
    fn wait(
        &mut self,
        py: Python<'_>,
        recorder: Option<&Bound<'_, Recorder>>,
    ) -> PyResult<Py<Tick>> {
        if let Some(r) = recorder {
            let mut r = r.borrow_mut();
            r.live()?;
            let ours = self.s.clock().domain();
            if r.target_clock != ours {
                return Err(PyValueError::new_err(format!(
                    "the recorder's target_clock is {:?} but this scheduler's release points are on {:?}: build the recorder with target_clock=scheduler.clock",
                    r.target_clock.as_str(),
                    ours.as_str()
                )));
            }
            r.rec.begin_wait();
        }
        let t = if self.release_gil_during_spin {
            let s = &mut self.s;
            py.detach(move || s.wait())
        } else {
            self.s
                .wait_with(|clock, until| py.detach(move || clock.sleep_until_ns(until)))
        };
        if let Some(r) = recorder {
            r.borrow_mut().rec.end_wait();
        }
        self.tick.borrow_mut(py).0 = t;
        py.check_signals()?;
        Ok(self.tick.clone_ref(py))
    }

    /// Re-anchor after a pause without counting the gap as an overrun.
    fn rephase(&mut self) {
        self.s.rephase();
    }

    /// The period between release points, in ns (`period_s / rtf` when
    /// paced; the nominal period when uncapped).
    #[getter]
    fn period_ns(&self) -> u64 {
        self.s.config().period_ns
    }
    /// The period asked for (`period_s`), in ns.
    #[getter]
    fn nominal_period_ns(&self) -> u64 {
        self.nominal_period_ns
    }
    /// The real-time factor (0: uncapped).
    #[getter]
    fn rtf(&self) -> f64 {
        self.rtf
    }
    /// The clock its release points are on: `"host_monotonic"`, or
    /// `"simulation"` when uncapped. Give it to `Recorder(target_clock=...)`.
    #[getter]
    fn clock(&self) -> &'static str {
        self.s.clock().domain().as_str()
    }
    /// The spin margin the next wait uses, in ns (with `"auto"`, the
    /// adaptive margin's current value).
    #[getter]
    fn spin_margin_ns(&self) -> u64 {
        self.s.spin_margin_ns()
    }
    /// Whether the margin adapts (`spin_margin_us="auto"`).
    #[getter]
    fn auto_margin(&self) -> bool {
        self.s.config().auto_margin
    }
    /// The lowest and highest margin the waits so far used, in ns.
    #[getter]
    fn spin_margin_range_ns(&self) -> (u64, u64) {
        self.s.spin_margin_range_ns()
    }
    /// `"rebase"` or `"keep-phase"`.
    #[getter]
    fn policy(&self) -> &'static str {
        self.s.config().policy.as_str()
    }
    /// Waits so far.
    #[getter]
    fn cycles(&self) -> u64 {
        self.s.cycles()
    }
    /// Cycles that found their release point already passed.
    #[getter]
    fn overruns(&self) -> u64 {
        self.s.overruns()
    }
    /// Release points skipped (keep-phase).
    #[getter]
    fn skipped(&self) -> u64 {
        self.s.skipped()
    }
    /// The declared compute budget, in ns (`None`: not declared). Give it
    /// to `Recorder(compute_budget_ns=...)` so that the evidence declares it.
    #[getter]
    fn compute_budget_ns(&self) -> Option<u64> {
        self.s.config().compute_budget_ns
    }
    /// The declared deadline tolerance, in ns (`None`: not declared). Give
    /// it to `Recorder(deadline_tolerance_ns=...)`.
    #[getter]
    fn deadline_tolerance_ns(&self) -> Option<u64> {
        self.s.config().deadline_tolerance_ns
    }
    /// Cycles whose work (wake to the next wait) exceeded the compute
    /// budget (0 when none is declared). A cycle is judged at the next
    /// wait, so the last one before `rephase` or the end is not.
    #[getter]
    fn budget_overruns(&self) -> u64 {
        self.s.misses().budget_overruns
    }
    /// Wakes later than their release point plus the deadline tolerance
    /// (0 when none is declared).
    #[getter]
    fn wake_misses(&self) -> u64 {
        self.s.misses().wake_misses
    }
    /// Work ends (the next wait) later than the next release point plus
    /// the deadline tolerance (0 when none is declared).
    #[getter]
    fn completion_misses(&self) -> u64 {
        self.s.misses().completion_misses
    }
}
