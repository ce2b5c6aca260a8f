//! `Recorder.status()`: the live status ([`looptime_capture::status`]) as
//! a handle another thread reads without touching the recorder: the
//! control thread keeps the counts in atomics at each cycle's end, and
//! `snapshot()` reads them as one consistent set (docs/ros2.md, Status on
//! /diagnostics).

use std::sync::Arc;

use looptime_capture::status::{LiveStatus as RustStatus, StatusSnapshot};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::Recorder;

/// The live status of one recorder; `snapshot()` from any thread.
#[pyclass(module = "looptime._looptime", frozen)]
#[derive(Debug)]
pub struct LiveStatus {
    inner: Arc<RustStatus>,
}

#[pymethods]
impl LiveStatus {
    /// The counts as of one cycle, as a dict (docs/ros2.md): `cycles`,
    /// `index` (the last ended cycle, None before the first), `overruns`,
    /// `skipped`, `late_starts`, `completion_misses` and `budget_overruns`
    /// (None unless declared), `misses`, `last_miss` (None, or a dict of
    /// `index`, `start_ns`, `kind`, `by_ns`), `period_p99_ns` (None before
    /// two cycles) and `periods`. The GIL is released while it reads.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = self.inner.clone();
        let s = py.detach(move || inner.snapshot()).ok_or_else(|| {
            PyRuntimeError::new_err(
                "the loop changed the status through 10,000 reads in a row; read it again",
            )
        })?;
        to_dict(py, &s)
    }
}

fn to_dict<'py>(py: Python<'py>, s: &StatusSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("cycles", s.cycles)?;
    d.set_item("index", s.index)?;
    d.set_item("overruns", s.overruns)?;
    d.set_item("skipped", s.skipped)?;
    d.set_item("late_starts", s.late_starts)?;
    d.set_item("completion_misses", s.completion_misses)?;
    d.set_item("budget_overruns", s.budget_overruns)?;
    d.set_item("misses", s.misses)?;
    let miss = match s.last_miss {
        Some(m) => {
            let md = PyDict::new(py);
            md.set_item("index", m.index)?;
            md.set_item("start_ns", m.start_ns)?;
            md.set_item("kind", m.kind.name())?;
            md.set_item("by_ns", m.by_ns)?;
            Some(md)
        }
        None => None,
    };
    d.set_item("last_miss", miss)?;
    d.set_item("period_p99_ns", s.period_p99_ns)?;
    d.set_item("periods", s.periods)?;
    Ok(d)
}

impl Recorder {
    /// The body of `Recorder.status`.
    pub(super) fn status_handle(&self) -> PyResult<LiveStatus> {
        self.rec
            .live_status()
            .map(|inner| LiveStatus { inner })
            .ok_or_else(|| {
                PyValueError::new_err(
                    "this recorder keeps no live status: build it with live_status=True",
                )
            })
    }
}
