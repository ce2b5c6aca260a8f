//! `InputPacer`: the scheduler's input mode for a loop its inputs pace
//! (the Rust `looptime_runtime::input::InputPacer`): no sleep; each
//! arrival gives the `dt` the controller integrates over, the input's own
//! clock step when it carries one, else the gap between arrivals, bounded
//! by `max_dt_s` (docs/input-paced.md).

use looptime_runtime::input::{DtSource, InputPacer as RustPacer, InputTick as RustInputTick};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use crate::net::Arrival;

/// What one arrival released: the arrival (host monotonic ns), the
/// input's counter, the bounded `dt` and where it came from.
#[pyclass(module = "looptime._looptime", frozen)]
#[derive(Clone, Copy, Debug)]
pub struct InputTick {
    t: RustInputTick,
}

#[pymethods]
impl InputTick {
    /// When the input arrived (host monotonic ns).
    #[getter]
    fn arrival_ns(&self) -> u64 {
        self.t.arrival_ns
    }
    /// The input's own counter, when it carries one.
    #[getter]
    fn seq(&self) -> Option<u64> {
        self.t.seq
    }
    /// The time to integrate over, ns, bounded by `max_dt_s`.
    #[getter]
    fn dt_measured_ns(&self) -> u64 {
        self.t.dt_measured_ns
    }
    /// `dt_measured_ns` in seconds: hand it to the controller.
    #[getter]
    fn dt_measured(&self) -> f64 {
        self.t.dt_measured_ns as f64 / 1e9
    }
    /// Whether `dt` was clamped to `max_dt_s`.
    #[getter]
    fn dt_clamped(&self) -> bool {
        self.t.dt_clamped
    }
    /// `"input_clock"` (the input's own clock step) or `"arrivals"`.
    #[getter]
    fn dt_source(&self) -> &'static str {
        match self.t.dt_source {
            DtSource::InputClock => "input_clock",
            DtSource::Arrivals => "arrivals",
        }
    }
    fn __repr__(&self) -> String {
        format!(
            "InputTick(arrival_ns={}, seq={:?}, dt_measured_ns={}, dt_source={:?})",
            self.t.arrival_ns,
            self.t.seq,
            self.t.dt_measured_ns,
            self.dt_source()
        )
    }
}

/// The input pacer: `arrived(arrival, seq=None, input_clock_ns=None)` after
/// each receive. Give the cycle `input=(arrival, seq)` as ever; the tick
/// carries the `dt`.
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct InputPacer {
    p: RustPacer,
}

/// An int of ns (not a bool), at least 0.
fn ns(x: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if !x.is_instance_of::<PyInt>() || x.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int of ns (or an Arrival from looptime.recv_stamped)"
        )));
    }
    x.extract::<u64>()
        .map_err(|_| PyValueError::new_err(format!("{what} must be an int from 0 to 2**64 - 1")))
}

#[pymethods]
impl InputPacer {
    #[new]
    fn new(max_dt_s: f64) -> PyResult<Self> {
        if !(max_dt_s.is_finite() && max_dt_s > 0.0 && max_dt_s <= 3600.0) {
            return Err(PyValueError::new_err(format!(
                "max_dt_s must be a positive number of seconds (at most 3600; say three periods), not {max_dt_s}"
            )));
        }
        let p = RustPacer::new((max_dt_s * 1e9).round().max(1.0) as u64)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(InputPacer { p })
    }

    /// The origin the first arrival's `dt` is measured from (host
    /// monotonic ns; now when omitted). Without it the first `dt` is 0.
    #[pyo3(signature = (origin_ns = None))]
    fn start(&mut self, origin_ns: Option<u64>) {
        self.p
            .start(origin_ns.unwrap_or_else(looptime_capture::clock::monotonic_ns));
    }

    /// An input arrived: `arrival` is an int of host monotonic ns or the
    /// `Arrival` of `recv_stamped` (its kernel stamp counts); `seq` its
    /// counter; `input_clock_ns` its own clock (the robot's time), whose
    /// step is the `dt` when two successive inputs carry one.
    #[pyo3(signature = (arrival, seq = None, input_clock_ns = None))]
    fn arrived(
        &mut self,
        arrival: &Bound<'_, PyAny>,
        seq: Option<&Bound<'_, PyAny>>,
        input_clock_ns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<InputTick> {
        let at = match arrival.cast::<Arrival>() {
            Ok(a) => a.get().arrival_ns,
            Err(_) => ns(arrival, "arrival")?,
        };
        let seq = seq
            .filter(|s| !s.is_none())
            .map(|s| ns(s, "seq"))
            .transpose()?;
        let clock = input_clock_ns
            .filter(|c| !c.is_none())
            .map(|c| ns(c, "input_clock_ns"))
            .transpose()?;
        Ok(InputTick {
            t: self.p.arrived(at, seq, clock),
        })
    }
}
