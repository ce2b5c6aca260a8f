//! `Tick`: what one `Scheduler.wait()` did, one object per scheduler,
//! updated in place.

use looptime_runtime::scheduler::Tick as RustTick;
use pyo3::prelude::*;

/// What one `Scheduler.wait()` did. The scheduler updates one `Tick` in
/// place at every wait, so keep the fields, not the object, across cycles.
///
/// The Python view of the runtime's one `Tick`: it holds that value, and
/// each attribute reads one of its fields.
#[pyclass(module = "looptime._looptime")]
#[derive(Clone, Copy, Debug)]
pub struct Tick(pub(crate) RustTick);

#[pymethods]
impl Tick {
    /// Cycle index (0 for the first wait).
    #[getter]
    fn cycle(&self) -> u64 {
        self.0.cycle
    }
    /// The release point this cycle runs for (host monotonic ns).
    #[getter]
    fn target_ns(&self) -> u64 {
        self.0.target_ns
    }
    /// When the wait began.
    #[getter]
    fn wait_start_ns(&self) -> u64 {
        self.0.wait_start_ns
    }
    /// When the absolute sleep returned.
    #[getter]
    fn sleep_return_ns(&self) -> u64 {
        self.0.sleep_return_ns
    }
    /// When the wait ended; the cycle starts here.
    #[getter]
    fn wake_ns(&self) -> u64 {
        self.0.wake_ns
    }
    /// Time spent spinning.
    #[getter]
    fn spin_ns(&self) -> u64 {
        self.0.spin_ns
    }
    /// The spin margin this wait used.
    #[getter]
    fn spin_margin_ns(&self) -> u64 {
        self.0.spin_margin_ns
    }
    /// Measured time since the previous cycle start, bounded by `max_dt`.
    #[getter]
    fn dt_measured_ns(&self) -> u64 {
        self.0.dt_measured_ns
    }
    /// Whole release points skipped (keep-phase only).
    #[getter]
    fn skipped(&self) -> u32 {
        self.0.skipped
    }
    /// The release point had passed when the wait began (an overrun).
    #[getter]
    fn overdue(&self) -> bool {
        self.0.overdue
    }
    /// `dt_measured_ns` was clamped to `max_dt`.
    #[getter]
    fn dt_clamped(&self) -> bool {
        self.0.dt_clamped
    }
    /// `dt_measured_ns` in seconds: the `dt` to hand the controller.
    #[getter]
    fn dt_measured(&self) -> f64 {
        self.0.dt_measured_ns as f64 * 1e-9
    }

    fn __repr__(&self) -> String {
        let t = &self.0;
        format!(
            "Tick(cycle={}, target_ns={}, overdue={}, skipped={}, dt_measured_ns={})",
            t.cycle, t.target_ns, t.overdue, t.skipped, t.dt_measured_ns
        )
    }
}
