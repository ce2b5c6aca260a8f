//! What a `Recorder(...)` call (or one entry of its `threads=`) asks for:
//! checked and turned into a builder before any memory is taken, so that
//! naming and setting mistakes raise at set-up, never in the loop.

use looptime_capture::{
    ClockDomain, CpuTimeMode, PhaseId, Recorder as RustRecorder, RecorderBuilder, RingStorage,
    SourceClock, SourceId, SourceSpec, SpanToken, StageId, ValueId, ValueKind,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};
use std::path::PathBuf;

use super::{Frame, Pending, Recorder, STACK};
use crate::error::capture_err;
use crate::names::{AttrKeyNamed, Named};

/// A capacity argument: an `int` (not a `bool`) from 1 to `max`, else a
/// `ValueError` (or `TypeError`) naming the argument and its range.
/// `thread_cpu=`: `"cycle"` (None, the default), `"spans"` or `"off"`;
/// `True` and `False`, from code written before the modes, are `"spans"`
/// and `"off"`.
pub(crate) fn cpu_mode(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<CpuTimeMode> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(CpuTimeMode::default());
    };
    if obj.is_instance_of::<PyBool>() {
        return Ok(CpuTimeMode::from_switch(obj.extract::<bool>()?));
    }
    let bad = || {
        PyValueError::new_err(format!(
            "{name} must be \"cycle\" (two CPU-clock reads a cycle), \"spans\" (two a span), \"off\", True (\"spans\") or False (\"off\"), not {}",
            obj.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
        ))
    };
    let s: String = obj.extract().map_err(|_| bad())?;
    CpuTimeMode::from_name(&s).ok_or_else(bad)
}

pub(crate) fn capacity(obj: &Bound<'_, PyAny>, name: &str, max: u64) -> PyResult<usize> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an int from 1 to {max}, not {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string())
        )));
    }
    match obj.extract::<i64>() {
        Ok(n) if n >= 1 && n as u64 <= max => Ok(n as usize),
        _ => Err(PyValueError::new_err(format!(
            "{name} must be from 1 to {max}, got {obj}"
        ))),
    }
}

/// What a `Recorder(...)` call (or one entry of its `threads=`) asks for.
pub(crate) struct Spec<'a, 'py> {
    pub(crate) stages: Vec<String>,
    pub(crate) phases: Option<Vec<String>>,
    pub(crate) attributes: Option<Bound<'py, PyDict>>,
    pub(crate) values: Option<Bound<'py, PyDict>>,
    pub(crate) sources: Option<Bound<'py, PyDict>>,
    pub(crate) max_cycles: Option<Bound<'py, PyAny>>,
    pub(crate) max_spans_per_cycle: Option<Bound<'py, PyAny>>,
    pub(crate) thread_cpu: CpuTimeMode,
    pub(crate) nominal_period_ns: Option<u64>,
    pub(crate) ring: &'a str,
    pub(crate) episode_dir: Option<PathBuf>,
    pub(crate) metadata: Option<std::collections::BTreeMap<String, String>>,
    /// The clock of the release points' `target_ns`.
    pub(crate) target_clock: ClockDomain,
    /// The stage whose spans are the loop's commands (the header's
    /// `command_stage`).
    pub(crate) command_stage: Option<String>,
    /// The declared compute budget and deadline tolerance (ns).
    pub(crate) budget: (Option<u64>, Option<u64>),
}

/// The names a recorder resolves, registered on its builder.
pub(crate) struct Names {
    pub(crate) stages: Vec<Named<StageId>>,
    pub(crate) phases: Vec<Named<PhaseId>>,
    pub(crate) values: Vec<Named<ValueId>>,
    pub(crate) attrs: Vec<AttrKeyNamed>,
    pub(crate) sources: Vec<Named<SourceId>>,
}

/// The settings a background thread's entry in `threads=` may carry.
pub(crate) const THREAD_KEYS: &[&str] = &[
    "stages",
    "phases",
    "attributes",
    "values",
    "sources",
    "max_cycles",
    "max_spans_per_cycle",
    "thread_cpu",
    "ring",
];

impl<'a, 'py> Spec<'a, 'py> {
    /// A background thread's settings from its `threads=` entry.
    pub(crate) fn of_dict(d: &'a Bound<'py, PyDict>, thread: &str) -> PyResult<Spec<'a, 'py>> {
        for k in d.keys() {
            let k: String = k.extract()?;
            if !THREAD_KEYS.contains(&k.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "threads[{thread:?}]: unknown setting {k:?}; a thread takes {}",
                    THREAD_KEYS.join(", ")
                )));
            }
        }
        let get = |k: &str| d.get_item(k);
        let bad = |k: &str, what: &str| {
            PyTypeError::new_err(format!("threads[{thread:?}][{k:?}] must be {what}"))
        };
        let stages: Vec<String> = get("stages")?
            .ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "threads[{thread:?}] needs \"stages\", a list of stage names"
                ))
            })?
            .extract()
            .map_err(|_| bad("stages", "a list of stage names (str)"))?;
        let phases = match get("phases")? {
            Some(p) => Some(
                p.extract()
                    .map_err(|_| bad("phases", "a list of phase names (str)"))?,
            ),
            None => None,
        };
        let dict = |k: &str| -> PyResult<Option<Bound<'py, PyDict>>> {
            match get(k)? {
                Some(v) => Ok(Some(v.cast_into::<PyDict>().map_err(|_| bad(k, "a dict"))?)),
                None => Ok(None),
            }
        };
        let thread_cpu = cpu_mode(
            get("thread_cpu")?.as_ref(),
            &format!("threads[{thread:?}][\"thread_cpu\"]"),
        )?;
        let ring: &'static str = match get("ring")? {
            Some(v) => match v.extract::<String>().as_deref() {
                Ok("auto") => "auto",
                Ok("heap") => "heap",
                _ => return Err(bad("ring", "\"auto\" or \"heap\"")),
            },
            None => "auto",
        };
        Ok(Spec {
            stages,
            phases,
            attributes: dict("attributes")?,
            values: dict("values")?,
            sources: dict("sources")?,
            max_cycles: get("max_cycles")?,
            max_spans_per_cycle: get("max_spans_per_cycle")?,
            thread_cpu,
            nominal_period_ns: None,
            ring,
            episode_dir: None,
            metadata: None,
            target_clock: ClockDomain::HostMonotonic,
            command_stage: None,
            budget: (None, None),
        })
    }

    /// Register everything on a new builder; memory is taken at `build`.
    pub(crate) fn builder(self, py: Python<'_>) -> PyResult<(RecorderBuilder, Names)> {
        let Spec {
            stages,
            phases,
            attributes,
            values,
            sources,
            max_cycles,
            max_spans_per_cycle,
            thread_cpu,
            nominal_period_ns,
            ring,
            episode_dir,
            metadata,
            target_clock,
            command_stage,
            budget,
        } = self;
        // The builder refuses what no recorder can hold (its own ceilings,
        // and the memory budget); these refuse what no count can mean.
        // None stands for the defaults (20000 cycles, 16 span slots).
        let max_cycles =
            max_cycles.map_or(Ok(20_000), |c| capacity(&c, "max_cycles", u32::MAX as u64))?;
        let max_spans_per_cycle = max_spans_per_cycle.map_or(Ok(16), |c| {
            capacity(&c, "max_spans_per_cycle", u16::MAX as u64)
        })?;
        let mut b = RecorderBuilder::new();
        b.max_cycles(max_cycles)
            .max_spans_per_cycle(max_spans_per_cycle)
            .cpu_time_mode(thread_cpu);
        if let Some(ns) = nominal_period_ns {
            b.nominal_period_ns(ns);
        }
        if let Some(ns) = budget.0 {
            b.compute_budget_ns(ns);
        }
        if let Some(ns) = budget.1 {
            b.deadline_tolerance_ns(ns);
        }
        b.target_clock(target_clock);
        b.ring(ring_storage(ring)?);
        if let Some(d) = episode_dir {
            b.episode_dir(d);
        }
        for (k, v) in metadata.unwrap_or_default() {
            b.metadata(k, v);
        }
        let name = |s: &str| PyString::intern(py, s).unbind();
        let st = register_names(&stages, &name, |n| b.stage(n))?;
        if let Some(c) = &command_stage {
            b.command_stage_named(c).map_err(|_| {
                PyValueError::new_err(format!(
                    "command_stage {c:?} is not one of the recorder's stages {stages:?}"
                ))
            })?;
        }
        let ph = register_names(&phases.unwrap_or_default(), &name, |n| b.phase(n))?;
        let attr_keys = match attributes {
            Some(attrs) => register_attributes(&mut b, &attrs, &name)?,
            None => Vec::new(),
        };
        let vals = match values {
            Some(values) => register_values(&mut b, &values, &name)?,
            None => Vec::new(),
        };
        let srcs = match sources {
            Some(sources) => register_sources(&mut b, &sources, &name)?,
            None => Vec::new(),
        };
        Ok((
            b,
            Names {
                stages: st,
                phases: ph,
                values: vals,
                attrs: attr_keys,
                sources: srcs,
            },
        ))
    }
}

/// The ring storage named `ring`.
fn ring_storage(ring: &str) -> PyResult<RingStorage> {
    match ring {
        "auto" => Ok(RingStorage::Auto),
        "heap" => Ok(RingStorage::Heap),
        other => Err(PyValueError::new_err(format!(
            "ring must be \"auto\" (a /dev/shm file when possible) or \"heap\", not {other:?}"
        ))),
    }
}

/// Each of `names` registered by `register` (a stage or a phase), with its
/// interned Python name, in order.
fn register_names<I>(
    names: &[String],
    name: &dyn Fn(&str) -> Py<PyString>,
    mut register: impl FnMut(&str) -> Result<I, looptime_capture::CaptureError>,
) -> PyResult<Vec<Named<I>>> {
    names
        .iter()
        .map(|n| {
            Ok(Named {
                name: name(n),
                id: register(n).map_err(capture_err)?,
            })
        })
        .collect()
}

/// Each `attributes={key: [value, ...]}` entry registered on `b`, in order.
fn register_attributes(
    b: &mut RecorderBuilder,
    attrs: &Bound<'_, PyDict>,
    name: &dyn Fn(&str) -> Py<PyString>,
) -> PyResult<Vec<AttrKeyNamed>> {
    let mut attr_keys = Vec::new();
    for (k, vs) in attrs.iter() {
        let key: String = k.extract().map_err(|_| {
            PyTypeError::new_err("attributes maps a key name (str) to a list of value names")
        })?;
        let vs: Vec<String> = vs.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "attributes[{key:?}] must be a list of value names (str)"
            ))
        })?;
        let kid = b.attr_key(&key).map_err(capture_err)?;
        let mut values = Vec::new();
        for v in vs {
            let id = b.attr_value(kid, &v).map_err(capture_err)?;
            values.push(Named { name: name(&v), id });
        }
        attr_keys.push(AttrKeyNamed {
            name: name(&key),
            values,
        });
    }
    Ok(attr_keys)
}

/// Each `sources={name: {"max_age_s": s, "clock": name}}` entry registered
/// on `b`, in order (both settings optional: no limit, `host_monotonic`).
fn register_sources(
    b: &mut RecorderBuilder,
    sources: &Bound<'_, PyDict>,
    name: &dyn Fn(&str) -> Py<PyString>,
) -> PyResult<Vec<Named<SourceId>>> {
    let mut out = Vec::new();
    for (k, spec) in sources.iter() {
        let sname: String = k.extract().map_err(|_| {
            PyTypeError::new_err("sources maps a source name (str) to its settings (a dict)")
        })?;
        let spec = spec.cast_into::<PyDict>().map_err(|_| {
            PyTypeError::new_err(format!(
                "sources[{sname:?}] must be a dict, e.g. {{\"max_age_s\": 0.05, \"clock\": \"host_monotonic\"}}"
            ))
        })?;
        let mut s = SourceSpec::default();
        for (key, v) in spec.iter() {
            let key: String = key.extract()?;
            match key.as_str() {
                "max_age_s" if v.is_none() => {}
                "max_age_s" => {
                    let secs: f64 = v
                        .extract()
                        .ok()
                        .filter(|x: &f64| x.is_finite() && *x > 0.0 && !v.is_instance_of::<PyBool>())
                        .ok_or_else(|| {
                            PyValueError::new_err(format!(
                                "sources[{sname:?}][\"max_age_s\"] must be a positive number of seconds, not {v}"
                            ))
                        })?;
                    s.max_age_ns = Some((secs * 1e9).round() as u64);
                }
                "clock" => {
                    let c: String = v.extract().map_err(|_| {
                        PyTypeError::new_err(format!(
                            "sources[{sname:?}][\"clock\"] must be a clock name (str)"
                        ))
                    })?;
                    if c != ClockDomain::HostMonotonic.as_str() {
                        s.clock = SourceClock::Named(c);
                    }
                }
                other => {
                    return Err(PyTypeError::new_err(format!(
                        "sources[{sname:?}]: unknown setting {other:?}; a source takes max_age_s and clock"
                    )))
                }
            }
        }
        out.push(Named {
            name: name(&sname),
            id: b.source(&sname, s).map_err(capture_err)?,
        });
    }
    Ok(out)
}

/// Each `values={name: (kind, unit)}` entry registered on `b`, in order.
fn register_values(
    b: &mut RecorderBuilder,
    values: &Bound<'_, PyDict>,
    name: &dyn Fn(&str) -> Py<PyString>,
) -> PyResult<Vec<Named<ValueId>>> {
    let mut vals = Vec::new();
    for (k, spec) in values.iter() {
        let vname: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err("values maps a value name (str) to (kind, unit)"))?;
        let (kind, unit): (String, String) = spec.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "values[{vname:?}] must be a (kind, unit) pair of str, e.g. (\"int\", \"count\")"
            ))
        })?;
        let kind = match kind.as_str() {
            "int" => ValueKind::Int,
            "float" => ValueKind::Float,
            other => {
                return Err(PyValueError::new_err(format!(
                    "values[{vname:?}]: kind must be \"int\" or \"float\", not {other:?}"
                )))
            }
        };
        vals.push(Named {
            name: name(&vname),
            id: b.value(&vname, kind, &unit).map_err(capture_err)?,
        });
    }
    Ok(vals)
}

impl Recorder {
    /// The Python recorder around `rec`, with the names it resolves; a
    /// recorder without a registered phase has `running`.
    pub(crate) fn assemble(
        py: Python<'_>,
        rec: RustRecorder,
        names: Names,
        threads: Vec<(String, Py<Recorder>)>,
        thread: Option<String>,
    ) -> Recorder {
        let Names {
            stages,
            mut phases,
            values,
            attrs,
            sources,
        } = names;
        if phases.is_empty() {
            phases.push(Named {
                name: PyString::intern(py, "running").unbind(),
                id: rec.default_phase(),
            });
        }
        Recorder {
            rec,
            stages,
            phases,
            values,
            sources,
            mode_key: attrs
                .iter()
                .position(|k| k.name.to_str(py).is_ok_and(|n| n == "mode")),
            attrs,
            stack: [Frame::Cycle; STACK],
            depth: 0,
            open: [SpanToken::NONE; STACK],
            n_open: 0,
            pending: Pending::None,
            finished: None,
            threads,
            thread,
            target_clock: ClockDomain::HostMonotonic,
        }
    }
}

/// `metadata` as the header's string map: strings as they are; numbers and
/// bools as their JSON text (`3`, `0.5`, `true`), so a program can pass its
/// settings as they are; anything else refused, naming the key.
pub(super) fn metadata_text(
    d: &Bound<'_, PyDict>,
) -> PyResult<std::collections::BTreeMap<String, String>> {
    use pyo3::types::PyFloat;
    let mut out = std::collections::BTreeMap::new();
    for (k, v) in d.iter() {
        let key: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err("metadata keys must be str"))?;
        let text = if v.is_instance_of::<PyString>() {
            v.extract::<String>()?
        } else if v.is_instance_of::<PyBool>() {
            if v.extract::<bool>()? {
                "true"
            } else {
                "false"
            }
            .to_string()
        } else if v.is_instance_of::<PyInt>() {
            v.str()?.to_string()
        } else if v.is_instance_of::<PyFloat>() {
            let f: f64 = v.extract()?;
            serde_json::Number::from_f64(f)
                .map(|n| n.to_string())
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "metadata[{key:?}] = {f} has no JSON text: give a finite number"
                    ))
                })?
        } else {
            return Err(PyTypeError::new_err(format!(
                "metadata[{key:?}] is a {}: metadata values are str, int, float or bool (numbers and bools are written as their JSON text; the header's metadata maps strings to strings)",
                v.get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string())
            )));
        };
        out.insert(key, text);
    }
    Ok(out)
}

/// A declared compute budget or deadline tolerance in ns, as `Recorder`
/// takes it: None, 0 to 10 s, or `2**64 - 1` (C's `LOOPTIME_UNDECLARED`,
/// the scheduler's "none", passed on as it is) for undeclared. Anything
/// else is refused with the parameter's name and its range.
pub(crate) fn declared_ns(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let range = "0 to 10,000,000,000 ns (10 s), or None (or 2**64 - 1, LOOPTIME_UNDECLARED) to leave it undeclared";
    let repr = || v.repr().map_or_else(|_| "?".to_string(), |r| r.to_string());
    if v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{name} must be an int of nanoseconds, {range}; not {}",
            repr()
        )));
    }
    let n: i128 = v.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{name} must be an int of nanoseconds, {range}; not {}",
            repr()
        ))
    })?;
    if n == u64::MAX as i128 {
        return Ok(None);
    }
    if !(0..=looptime_capture::MAX_DECLARED_NS as i128).contains(&n) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{name} must be {range}; not {n}"
        )));
    }
    Ok(Some(n as u64))
}
