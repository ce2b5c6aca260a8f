//! Names and ids: a stage, phase, value or attribute given as its
//! registered name (found by identity first, then by comparison: no
//! allocation) or its id, resolved to the recorder's typed id.

use looptime_capture::AttrValue;
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

/// A registered attribute key and its values.
#[derive(Debug)]
pub(crate) struct AttrKeyNamed {
    pub(crate) name: Py<PyString>,
    pub(crate) values: Vec<Named<AttrValue>>,
}

/// A registered name and the id it maps to.
#[derive(Debug)]
pub(crate) struct Named<T> {
    pub(crate) name: Py<PyString>,
    pub(crate) id: T,
}

/// `names[i]` is `obj` (identity, then equality): no allocation.
pub(crate) fn find<'a, T>(names: &'a [Named<T>], obj: &Bound<'_, PyAny>) -> Option<&'a Named<T>> {
    if let Some(n) = names.iter().find(|n| obj.is(&n.name)) {
        return Some(n);
    }
    names.iter().find(|n| obj.eq(&n.name).unwrap_or(false))
}

/// Resolve `obj`, a registered name or an id, in `names`. A `bool` is
/// refused although Python counts it as an `int`: `True` as stage id 1 is a
/// mistake, never a meaning.
pub(crate) fn resolve<T: Copy>(
    names: &[Named<T>],
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<T> {
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "a {what} is its name (str) or its id (int), not bool ({obj})"
        )));
    }
    if obj.is_instance_of::<PyInt>() {
        // Small ints are cached by CPython: extracting one allocates nothing.
        if let Ok(i) = obj.extract::<usize>() {
            if let Some(n) = names.get(i) {
                return Ok(n.id);
            }
        }
        return Err(PyKeyError::new_err(format!(
            "{what} id {obj} was not registered ({} {what}s)",
            names.len()
        )));
    }
    if obj.is_instance_of::<PyString>() {
        return find(names, obj).map(|n| n.id).ok_or_else(|| {
            let known: Vec<String> = names.iter().map(|n| n.name.to_string()).collect();
            PyKeyError::new_err(format!(
                "unknown {what} {}; registered: {}",
                obj.repr().map_or_else(|_| "?".into(), |r| r.to_string()),
                known.join(", ")
            ))
        });
    }
    Err(PyTypeError::new_err(format!(
        "a {what} is its name (str) or its id (int), not {}",
        obj.get_type()
            .name()
            .map_or_else(|_| "?".into(), |n| n.to_string())
    )))
}
