//! Span attributes: what `mode=` and `attrs=` ask to set on a span,
//! resolved to ids before the span opens, in a fixed array (no
//! allocation).

use looptime_capture::{AttrValue, Recorder as RustRecorder, SpanToken, MAX_ATTRS_PER_SPAN};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyTuple};

use super::Recorder;
use crate::names::{find, resolve};

/// The attributes to set on a span: at most `MAX_ATTRS_PER_SPAN` (what a
/// span holds), resolved before it opens. A fixed array: no allocation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SpanAttrs {
    pub(crate) v: [Option<AttrValue>; MAX_ATTRS_PER_SPAN],
    pub(crate) n: usize,
}

impl SpanAttrs {
    pub(crate) fn push(&mut self, a: AttrValue) -> PyResult<()> {
        // Setting a key again replaces its value, as the recorder does.
        if let Some(slot) = self.v[..self.n]
            .iter_mut()
            .find(|x| x.is_some_and(|x| x.key_index() == a.key_index()))
        {
            *slot = Some(a);
            return Ok(());
        }
        if self.n == MAX_ATTRS_PER_SPAN {
            return Err(PyValueError::new_err(format!(
                "a span carries at most {MAX_ATTRS_PER_SPAN} attribute keys"
            )));
        }
        self.v[self.n] = Some(a);
        self.n += 1;
        Ok(())
    }

    pub(crate) fn set(&self, rec: &mut RustRecorder, token: SpanToken) {
        for a in self.v[..self.n].iter().flatten() {
            rec.set_span_attr(token, *a);
        }
    }
}

impl Recorder {
    /// The key `key` (its id, or its name) and its value `value` (the
    /// value's id among the key's values, or its name).
    pub(crate) fn resolve_attr(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<(usize, AttrValue)> {
        if key.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(format!(
                "an attribute key is its name (str) or its id (int), not bool ({key})"
            )));
        }
        let k = if key.is_instance_of::<PyInt>() {
            key.extract::<usize>()
                .ok()
                .filter(|&i| i < self.attrs.len())
                .ok_or_else(|| {
                    PyKeyError::new_err(format!(
                        "attribute key id {key} was not registered ({} keys)",
                        self.attrs.len()
                    ))
                })?
        } else {
            let found = self.attrs.iter().position(|a| key.is(&a.name)).or_else(|| {
                self.attrs
                    .iter()
                    .position(|a| key.eq(&a.name).unwrap_or(false))
            });
            found.ok_or_else(|| {
                let known: Vec<String> = self.attrs.iter().map(|a| a.name.to_string()).collect();
                PyKeyError::new_err(format!(
                    "unknown attribute key {}; registered: {}",
                    key.repr().map_or_else(|_| "?".into(), |r| r.to_string()),
                    known.join(", ")
                ))
            })?
        };
        let a = &self.attrs[k];
        if value.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(format!(
                "an attribute value is its name (str) or its id (int), not bool ({value})"
            )));
        }
        let found = if value.is_instance_of::<PyInt>() {
            value.extract::<usize>().ok().and_then(|i| a.values.get(i))
        } else {
            find(&a.values, value)
        };
        match found {
            Some(n) => Ok((k, n.id)),
            None if value.is_instance_of::<PyInt>() => Err(PyKeyError::new_err(format!(
                "value id {value} of attribute {} was not registered ({} values)",
                a.name,
                a.values.len()
            ))),
            None => {
                let known: Vec<String> = a.values.iter().map(|n| n.name.to_string()).collect();
                Err(PyKeyError::new_err(format!(
                    "unknown value {} of attribute {}; registered: {}",
                    value.repr().map_or_else(|_| "?".into(), |r| r.to_string()),
                    a.name,
                    known.join(", ")
                )))
            }
        }
    }

    /// What `mode=` and `attrs=` ask to set on a span. `attrs` is a tuple
    /// or list of `(key, value)` pairs, or a dict; keys and values are ids
    /// (no string compared, nothing allocated) or names.
    pub(crate) fn span_attrs(
        &self,
        mode: Option<&Bound<'_, PyAny>>,
        attrs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<SpanAttrs> {
        let mut out = SpanAttrs::default();
        if let Some(m) = mode {
            let k = self.mode_key.ok_or_else(|| {
                PyKeyError::new_err("mode= needs an attribute `mode` declared in attributes=")
            })?;
            out.push(resolve(&self.attrs[k].values, m, "mode")?)?;
        }
        let Some(attrs) = attrs else {
            return Ok(out);
        };
        let pair = |item: &Bound<'_, PyAny>| -> PyResult<AttrValue> {
            let t = item.cast::<PyTuple>().map_err(|_| {
                PyTypeError::new_err(format!("attrs holds (key, value) pairs, not {item}"))
            })?;
            if t.len() != 2 {
                return Err(PyTypeError::new_err(format!(
                    "attrs holds (key, value) pairs, not {item}"
                )));
            }
            Ok(self.resolve_attr(&t.get_item(0)?, &t.get_item(1)?)?.1)
        };
        if let Ok(t) = attrs.cast::<PyTuple>() {
            for item in t.iter() {
                out.push(pair(&item)?)?;
            }
        } else if let Ok(l) = attrs.cast::<PyList>() {
            for item in l.iter() {
                out.push(pair(&item)?)?;
            }
        } else if let Ok(d) = attrs.cast::<PyDict>() {
            for (k, v) in d.iter() {
                out.push(self.resolve_attr(&k, &v)?.1)?;
            }
        } else {
            return Err(PyTypeError::new_err(format!(
                "attrs is a tuple or list of (key, value) pairs, or a dict, not {}",
                attrs.get_type()
            )));
        }
        Ok(out)
    }
}
