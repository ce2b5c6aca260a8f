//! What a cycle is released by, from Python: a scheduler's `Tick` (its
//! deadline), an input, `input=(arrival_ns, seq)` (docs/input-paced.md),
//! or nothing. On the recording path: nothing here allocates unless it
//! refuses the argument.

use looptime_capture::Release;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyTuple};

use crate::net::Arrival;
use crate::tick::Tick;

/// The release a cycle begins with: the tick's, the input's, or none.
pub(super) fn release_of(
    tick: Option<PyRef<'_, Tick>>,
    input: Option<&Bound<'_, PyAny>>,
) -> PyResult<Release> {
    match (tick, input.filter(|i| !i.is_none())) {
        (Some(_), Some(_)) => Err(PyValueError::new_err(
            "give tick or input, not both: a cycle is released by the scheduler's deadline or by an input's arrival",
        )),
        (Some(t), None) => Ok(t.0.release()),
        (None, Some(i)) => input_release(i),
        (None, None) => Ok(Release::NONE),
    }
}

/// `(arrival_ns, seq)`: two ints (not bools), at least 0; `seq` may be None.
fn input_release(i: &Bound<'_, PyAny>) -> PyResult<Release> {
    let shape = || {
        PyTypeError::new_err(format!(
            "input must be a tuple (arrival_ns, seq): the arrival as an int of CLOCK_MONOTONIC ns (time.monotonic_ns() right after the receive returned) or the Arrival looptime.recv_stamped returned, and the input's counter as an int or None, not {}",
            i.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
        ))
    };
    let t = i.cast::<PyTuple>().map_err(|_| shape())?;
    if t.len() != 2 {
        return Err(shape());
    }
    let int = |x: &Bound<'_, PyAny>, what: &str| -> PyResult<u64> {
        if !x.is_instance_of::<PyInt>() || x.is_instance_of::<PyBool>() {
            return Err(shape());
        }
        x.extract::<u64>().map_err(|_| {
            PyValueError::new_err(format!(
                "input's {what} must be an int from 0 to 2**64 - 1, not {}",
                x.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
            ))
        })
    };
    let a = t.get_item(0)?;
    let s = t.get_item(1)?;
    let seq = if s.is_none() {
        None
    } else {
        Some(int(&s, "seq")?)
    };
    // An Arrival from recv_stamped: the kernel's stamp and the read.
    if let Ok(arrival) = a.cast::<Arrival>() {
        return Ok(arrival.get().release(seq));
    }
    let arrival = int(&a, "arrival_ns")?;
    Ok(Release::input(arrival, seq))
}

/// `release` at `target_ns` of another scheduler (a ROS timer's expected
/// call time), with the release points skipped before it and whether it
/// was overdue; refused beside a tick or an input, and `skipped` or
/// `overdue` without a target.
pub(super) fn with_target(
    release: Release,
    target_ns: Option<u64>,
    skipped: u32,
    overdue: bool,
) -> PyResult<Release> {
    match target_ns {
        Some(_) if release != Release::NONE => Err(PyValueError::new_err(
            "give target_ns, a tick or an input, one of them: a cycle has one release",
        )),
        Some(t) => Ok(Release::at(t).with_skipped(skipped).with_overdue(overdue)),
        None if skipped > 0 || overdue => Err(PyValueError::new_err(
            "skipped and overdue go with target_ns (a tick carries its own)",
        )),
        None => Ok(release),
    }
}
