//! Python exceptions for the library's errors: the capture error's one
//! classification (`looptime_capture::ErrorClass`) decides `OSError` or
//! `ValueError`, here and nowhere else.

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// The error of a recording call on a finished recorder.
pub(crate) fn finished_err(dir: &str) -> PyErr {
    PyRuntimeError::new_err(format!(
        "this recorder already finished into {dir}; nothing more can be recorded: build a new Recorder for the next episode"
    ))
}

/// A capture error as the exception its class says: `OSError` for what
/// the operating system refused, `ValueError` for wrong input.
pub(crate) fn capture_err(e: looptime_capture::CaptureError) -> PyErr {
    let text = looptime_capture::error_chain(&e);
    match e.class() {
        looptime_capture::ErrorClass::Io => PyOSError::new_err(text),
        _ => PyValueError::new_err(text),
    }
}

/// An episode-layout error: `OSError` for a file or directory of the
/// episode, `RuntimeError` for a request the session refused.
pub(crate) fn runtime_err(e: looptime_runtime::error::ServeError) -> PyErr {
    let text = looptime_capture::error_chain(&e);
    match e {
        // A refused request (a rollout after close), not the file system.
        looptime_runtime::error::ServeError::Session { .. } => {
            pyo3::exceptions::PyRuntimeError::new_err(text)
        }
        _ => PyOSError::new_err(text),
    }
}
