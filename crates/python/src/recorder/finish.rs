//! `Recorder.finish`: the evidence files written, with the background
//! threads' recorders, and the `FinishReport`.

use looptime_capture::{CaptureStatus, Recorder as RustRecorder};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;

use super::{Pending, Recorder};
use crate::error::{capture_err, finished_err};

/// What `Recorder.finish` wrote.
#[pyclass(module = "looptime._looptime", frozen, get_all)]
#[derive(Clone, Debug)]
pub struct FinishReport {
    /// Path of `control_timing.jsonl`.
    cycles_path: String,
    /// Path of `control_timing_summary.json`.
    summary_path: String,
    /// Cycles begun.
    total_cycles: u64,
    /// Cycles written (the ring's newest).
    retained_cycles: u64,
    /// Earlier cycles the ring overwrote.
    dropped_cycles: u64,
    /// Spans that did not fit their cycle.
    spans_dropped: u64,
    /// Spans opened outside any cycle.
    spans_outside_cycle: u64,
    /// Bytes of the JSONL.
    cycles_bytes: u64,
    /// `"complete"` or `"aborted"`.
    status: String,
}

#[pymethods]
impl FinishReport {
    pub(crate) fn __repr__(&self) -> String {
        format!(
            "FinishReport(status={:?}, retained_cycles={}, dropped_cycles={}, spans_dropped={}, cycles_path={:?})",
            self.status, self.retained_cycles, self.dropped_cycles, self.spans_dropped, self.cycles_path
        )
    }
}

impl Recorder {
    /// The body of `Recorder.finish`: see its doc.
    pub(crate) fn finish_files(
        &mut self,
        py: Python<'_>,
        episode_dir: PathBuf,
        status: &str,
    ) -> PyResult<FinishReport> {
        let st = match status {
            "complete" => CaptureStatus::Complete,
            "aborted" => CaptureStatus::Aborted,
            other => {
                return Err(PyValueError::new_err(format!(
                    "status must be \"complete\" or \"aborted\", not {other:?}"
                )))
            }
        };
        if let Some(done) = &self.finished {
            return Err(finished_err(done));
        }
        if let Some(t) = &self.thread {
            return Err(PyRuntimeError::new_err(format!(
                "this is background thread {t:?}'s recorder: the control recorder's finish writes its files"
            )));
        }
        // The background threads' recorders: each must be out of use (its
        // thread stopped recording) for the finish to read it.
        let mut threads = Vec::with_capacity(self.threads.len());
        for (name, t) in &self.threads {
            let t = t.bind(py).try_borrow_mut().map_err(|_| {
                PyRuntimeError::new_err(format!(
                    "background thread {name:?}'s recorder is in use; finish once that thread has stopped recording"
                ))
            })?;
            threads.push(t);
        }
        self.rec.end_cycle();
        self.depth = 0;
        self.n_open = 0;
        self.pending = Pending::None;
        for t in threads.iter_mut() {
            t.rec.end_cycle();
            t.depth = 0;
            t.n_open = 0;
            t.pending = Pending::None;
        }
        let refs: Vec<&RustRecorder> = threads.iter().map(|t| &t.rec).collect();
        let r = if refs.is_empty() {
            self.rec.finish(&episode_dir, st)
        } else {
            self.rec.finish_threads(&episode_dir, st, &refs)
        }
        .map_err(capture_err)?;
        let done = episode_dir.display().to_string();
        for t in threads.iter_mut() {
            t.finished = Some(done.clone());
        }
        self.finished = Some(done);
        Ok(FinishReport {
            cycles_path: r.cycles_path.display().to_string(),
            summary_path: r.summary_path.display().to_string(),
            total_cycles: self.rec.total_cycles(),
            retained_cycles: self.rec.retained_cycles(),
            dropped_cycles: self.rec.dropped_cycles(),
            spans_dropped: self.rec.spans_dropped(),
            spans_outside_cycle: self.rec.spans_outside_cycle(),
            cycles_bytes: r.cycles_bytes,
            status: status.to_string(),
        })
    }
}
