//! `sample` / `produced`'s arguments checked before anything is recorded.

use looptime_capture::SourceId;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use super::Recorder;
use crate::names::resolve;

impl Recorder {
    /// `sample` / `produced`'s arguments checked: a declared source (name
    /// or id), a sequence number and a stamp that are non-negative ints
    /// (not bools), on a recorder not yet finished. Nothing is recorded
    /// when one is wrong.
    pub(super) fn sample_args(
        &self,
        source: &Bound<'_, PyAny>,
        seq: &Bound<'_, PyAny>,
        stamp_ns: &Bound<'_, PyAny>,
    ) -> PyResult<(SourceId, u64, u64)> {
        self.live()?;
        let s = resolve(&self.sources, source, "source")?;
        let whole = |v: &Bound<'_, PyAny>, what: &str| -> PyResult<u64> {
            if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
                return Err(PyTypeError::new_err(format!(
                    "{what} must be an int, not {}",
                    v.get_type()
                        .name()
                        .map_or_else(|_| "?".into(), |n| n.to_string())
                )));
            }
            v.extract::<u64>().map_err(|_| {
                PyValueError::new_err(format!("{what} must be from 0 to 2**64 - 1, not {v}"))
            })
        };
        Ok((s, whole(seq, "seq")?, whole(stamp_ns, "stamp_ns")?))
    }
}
