//! `looptime._looptime`: the Python binding of the recorder, the scheduler
//! and the episode layout, built by maturin into the `looptime` package
//! (`crates/python/python/looptime` holds its Python half and the `.pyi`).
//!
//! It adds no semantics: a Python loop writes the same evidence as a Rust
//! loop, through the same [`looptime_capture::Recorder`] and
//! [`looptime_runtime::scheduler::Scheduler`].
//!
//! # The hot path from Python
//!
//! Every object a loop touches per cycle exists before the loop:
//!
//! * `rec.span(...)` and `rec.cycle(...)` return the recorder itself, whose
//!   `__enter__`/`__exit__` open and close what the call named; the nesting
//!   lives in a fixed stack inside the recorder.
//! * `sched.wait()` updates and returns the scheduler's one `Tick` object.
//! * Names given as `str` are found by identity first (string literals are
//!   interned, so the object is usually the registered one) and then by
//!   comparison, neither of which allocates; ids from `stage_id()` and
//!   friends are small ints, which CPython never allocates.
//!
//! Overflow (slots, depth, a full ring) is counted, never raised. Mistakes
//! of naming raise where the names are resolved: in the constructor and the
//! `*_id()` look-ups, or on first use of an unknown name.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use looptime_capture::{
    AttrValue, CaptureStatus, CpuTimeMode, PhaseId, Recorder as RustRecorder, RecorderBuilder,
    Registry, Release, RingStorage, SpanToken, StageId, ValueId, ValueKind, MAX_ATTRS_PER_SPAN,
    MAX_SPAN_DEPTH,
};
use looptime_runtime::clock::{LoopClock, MonotonicClock};
use looptime_runtime::embed::{EpisodeEnd, HostEpisode, ProgramFacts};
use looptime_runtime::rt::{setup_control_thread, RealtimeObtained, RealtimeRequest};
use looptime_runtime::scheduler::{
    OverrunPolicy, Scheduler as RustScheduler, SchedulerConfig, Tick as RustTick,
};
use pyo3::exceptions::{PyKeyError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// Frames beyond the recorder's depth limit are still tracked here, so
/// that every `__exit__` pops what its `__enter__` pushed.
const STACK: usize = MAX_SPAN_DEPTH * 4;

#[derive(Clone, Copy, Debug)]
enum Frame {
    Cycle,
    Span(SpanToken),
}

#[derive(Clone, Copy, Debug)]
enum Pending {
    None,
    Cycle(PhaseId, Release),
    Span(StageId, SpanAttrs),
}

/// The attributes to set on a span: at most `MAX_ATTRS_PER_SPAN` (what a
/// span holds), resolved before it opens. A fixed array: no allocation.
#[derive(Clone, Copy, Debug, Default)]
struct SpanAttrs {
    v: [Option<AttrValue>; MAX_ATTRS_PER_SPAN],
    n: usize,
}

impl SpanAttrs {
    fn push(&mut self, a: AttrValue) -> PyResult<()> {
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

    fn set(&self, rec: &mut RustRecorder, token: SpanToken) {
        for a in self.v[..self.n].iter().flatten() {
            rec.set_span_attr(token, *a);
        }
    }
}

/// A registered attribute key and its values.
#[derive(Debug)]
struct AttrKeyNamed {
    name: Py<PyString>,
    values: Vec<Named<AttrValue>>,
}

/// A registered name and the id it maps to.
#[derive(Debug)]
struct Named<T> {
    name: Py<PyString>,
    id: T,
}

/// `names[i]` is `obj` (identity, then equality): no allocation.
fn find<'a, T>(names: &'a [Named<T>], obj: &Bound<'_, PyAny>) -> Option<&'a Named<T>> {
    if let Some(n) = names.iter().find(|n| obj.is(&n.name)) {
        return Some(n);
    }
    names.iter().find(|n| obj.eq(&n.name).unwrap_or(false))
}

/// Resolve `obj`, a registered name or an id, in `names`. A `bool` is
/// refused although Python counts it as an `int`: `True` as stage id 1 is a
/// mistake, never a meaning.
fn resolve<T: Copy>(names: &[Named<T>], obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
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

/// A capacity argument: an `int` (not a `bool`) from 1 to `max`, else a
/// `ValueError` (or `TypeError`) naming the argument and its range.
/// `thread_cpu=`: `"cycle"` (None, the default), `"spans"` or `"off"`;
/// `True` and `False`, from code written before the modes, are `"spans"`
/// and `"off"`.
fn cpu_mode(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<CpuTimeMode> {
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

fn capacity(obj: &Bound<'_, PyAny>, name: &str, max: u64) -> PyResult<usize> {
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

/// The error of a recording call on a finished recorder.
fn finished_err(dir: &str) -> PyErr {
    PyRuntimeError::new_err(format!(
        "this recorder already finished into {dir}; nothing more can be recorded: build a new Recorder for the next episode"
    ))
}

fn capture_err(e: looptime_capture::CaptureError) -> PyErr {
    let text = looptime_capture::error_chain(&e);
    match e {
        looptime_capture::CaptureError::Write { .. }
        | looptime_capture::CaptureError::MissingDirectory { .. }
        | looptime_capture::CaptureError::Ring { .. } => PyOSError::new_err(text),
        _ => PyValueError::new_err(text),
    }
}

fn runtime_err(e: looptime_runtime::error::ServeError) -> PyErr {
    PyOSError::new_err(looptime_capture::error_chain(&e))
}

/// What one `Scheduler.wait()` did. The scheduler updates one `Tick` in
/// place at every wait, so keep the fields, not the object, across cycles.
///
/// The Python view of the runtime's one `Tick`: it holds that value, and
/// each attribute reads one of its fields.
#[pyclass(module = "looptime._looptime")]
#[derive(Clone, Copy, Debug)]
pub struct Tick(RustTick);

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

/// The absolute-deadline scheduler on the host's monotonic clock.
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct Scheduler {
    s: RustScheduler<MonotonicClock>,
    tick: Py<Tick>,
    release_gil_during_spin: bool,
}

#[pymethods]
impl Scheduler {
    #[new]
    #[pyo3(signature = (period_s, spin_margin_us = None, policy = "rebase", max_dt_s = None, release_gil_during_spin = false))]
    fn new(
        py: Python<'_>,
        period_s: f64,
        spin_margin_us: Option<&Bound<'_, PyAny>>,
        policy: &str,
        max_dt_s: Option<f64>,
        release_gil_during_spin: bool,
    ) -> PyResult<Self> {
        if !(period_s.is_finite() && period_s > 0.0 && period_s <= 3600.0) {
            return Err(PyValueError::new_err(format!(
                "period_s must be a positive number of seconds (at most 3600), not {period_s}"
            )));
        }
        // None: 200 µs (clamped to half the period); "auto": adaptive.
        let auto = spin_margin_us.is_some_and(|m| m.extract::<String>().is_ok_and(|s| s == "auto"));
        let margin_us: Option<f64> = match spin_margin_us.filter(|m| !m.is_none() && !auto) {
            None => None,
            Some(m) => {
                let us: f64 = m
                    .extract()
                    .ok()
                    .filter(|_| !m.is_instance_of::<PyBool>())
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "spin_margin_us must be a number of microseconds or \"auto\", not {}",
                            m.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
                        ))
                    })?;
                if !(us.is_finite() && us >= 0.0) {
                    return Err(PyValueError::new_err(format!(
                        "spin_margin_us must be >= 0, not {us}"
                    )));
                }
                Some(us)
            }
        };
        let period_ns = (period_s * 1e9).round() as u64;
        let policy = match policy {
            "rebase" => OverrunPolicy::Rebase,
            "keep-phase" => OverrunPolicy::KeepPhase,
            other => {
                return Err(PyValueError::new_err(format!(
                    "policy must be \"rebase\" or \"keep-phase\", not {other:?}"
                )))
            }
        };
        let mut cfg = SchedulerConfig::new(period_ns);
        if let Some(us) = margin_us {
            cfg.spin_margin_ns = (us * 1e3).round() as u64;
        }
        cfg.auto_margin = auto;
        cfg.policy = policy;
        if let Some(m) = max_dt_s {
            if !(m.is_finite() && m > 0.0) {
                return Err(PyValueError::new_err(format!(
                    "max_dt_s must be a positive number of seconds, not {m}"
                )));
            }
            cfg.max_dt_ns = (m * 1e9).round() as u64;
        }
        let s = RustScheduler::new(MonotonicClock, cfg)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Scheduler {
            s,
            tick: Py::new(py, Tick(RustTick::default()))?,
            release_gil_during_spin,
        })
    }

    /// Wait for the next release point: sleep (with the GIL released) to
    /// `deadline − spin_margin`, then spin to the deadline (holding the GIL,
    /// unless `release_gil_during_spin`). With `recorder`, mark the wait on
    /// it. Returns the scheduler's `Tick`, updated. Pending signals are
    /// handled before it returns, so Ctrl-C raises `KeyboardInterrupt` here
    /// at the latest one period after it was pressed.
    #[pyo3(signature = (recorder = None))]
    fn wait(
        &mut self,
        py: Python<'_>,
        recorder: Option<&Bound<'_, Recorder>>,
    ) -> PyResult<Py<Tick>> {
        if let Some(r) = recorder {
            let mut r = r.borrow_mut();
            r.live()?;
            r.rec.begin_wait();
        }
        let t = if self.release_gil_during_spin {
            let s = &mut self.s;
            py.detach(move || s.wait())
        } else {
            self.s
                .wait_with(|clock, until| py.detach(move || clock.sleep_until_ns(until)))
        };
        if let Some(r) = recorder {
            r.borrow_mut().rec.end_wait();
        }
        self.tick.borrow_mut(py).0 = t;
        py.check_signals()?;
        Ok(self.tick.clone_ref(py))
    }

    /// Re-anchor after a pause without counting the gap as an overrun.
    fn rephase(&mut self) {
        self.s.rephase();
    }

    /// The period, in ns.
    #[getter]
    fn period_ns(&self) -> u64 {
        self.s.config().period_ns
    }
    /// The spin margin the next wait uses, in ns (with `"auto"`, the
    /// adaptive margin's current value).
    #[getter]
    fn spin_margin_ns(&self) -> u64 {
        self.s.spin_margin_ns()
    }
    /// Whether the margin adapts (`spin_margin_us="auto"`).
    #[getter]
    fn auto_margin(&self) -> bool {
        self.s.config().auto_margin
    }
    /// The lowest and highest margin the waits so far used, in ns.
    #[getter]
    fn spin_margin_range_ns(&self) -> (u64, u64) {
        self.s.spin_margin_range_ns()
    }
    /// `"rebase"` or `"keep-phase"`.
    #[getter]
    fn policy(&self) -> &'static str {
        self.s.config().policy.as_str()
    }
    /// Waits so far.
    #[getter]
    fn cycles(&self) -> u64 {
        self.s.cycles()
    }
    /// Cycles that found their release point already passed.
    #[getter]
    fn overruns(&self) -> u64 {
        self.s.overruns()
    }
    /// Release points skipped (keep-phase).
    #[getter]
    fn skipped(&self) -> u64 {
        self.s.skipped()
    }
}

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
    fn __repr__(&self) -> String {
        format!(
            "FinishReport(status={:?}, retained_cycles={}, dropped_cycles={}, spans_dropped={}, cycles_path={:?})",
            self.status, self.retained_cycles, self.dropped_cycles, self.spans_dropped, self.cycles_path
        )
    }
}

/// The preallocated recorder of one loop thread; see the package docs.
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct Recorder {
    rec: RustRecorder,
    stages: Vec<Named<StageId>>,
    phases: Vec<Named<PhaseId>>,
    values: Vec<Named<ValueId>>,
    /// Every attribute key with its values, in declaration order: key id =
    /// position, value id = position among its key's values.
    attrs: Vec<AttrKeyNamed>,
    /// Position of the key `mode` in `attrs`, for the `mode=` shorthand.
    mode_key: Option<usize>,
    stack: [Frame; STACK],
    depth: usize,
    /// Spans opened by `begin_span`, innermost last; emptied when a cycle
    /// begins or ends. `begin_span` returns a position in it, a small int
    /// (CPython caches ints up to 256, so handing it out allocates nothing,
    /// where a 64-bit token would be a new int object per span).
    open: [SpanToken; STACK],
    n_open: usize,
    pending: Pending,
    finished: Option<String>,
    /// Background threads' recorders (declared in `threads=`), which this
    /// recorder's finish writes; empty for a background thread's recorder.
    threads: Vec<(String, Py<Recorder>)>,
    /// For a background thread's recorder, its thread name.
    thread: Option<String>,
}

/// What a `Recorder(...)` call (or one entry of its `threads=`) asks for.
struct Spec<'a, 'py> {
    stages: Vec<String>,
    phases: Option<Vec<String>>,
    attributes: Option<Bound<'py, PyDict>>,
    values: Option<Bound<'py, PyDict>>,
    max_cycles: Option<Bound<'py, PyAny>>,
    max_spans_per_cycle: Option<Bound<'py, PyAny>>,
    thread_cpu: CpuTimeMode,
    nominal_period_ns: Option<u64>,
    ring: &'a str,
    episode_dir: Option<PathBuf>,
    metadata: Option<std::collections::BTreeMap<String, String>>,
}

/// The names a recorder resolves, registered on its builder.
struct Names {
    stages: Vec<Named<StageId>>,
    phases: Vec<Named<PhaseId>>,
    values: Vec<Named<ValueId>>,
    attrs: Vec<AttrKeyNamed>,
}

/// The settings a background thread's entry in `threads=` may carry.
const THREAD_KEYS: &[&str] = &[
    "stages",
    "phases",
    "attributes",
    "values",
    "max_cycles",
    "max_spans_per_cycle",
    "thread_cpu",
    "ring",
];

impl<'a, 'py> Spec<'a, 'py> {
    /// A background thread's settings from its `threads=` entry.
    fn of_dict(d: &'a Bound<'py, PyDict>, thread: &str) -> PyResult<Spec<'a, 'py>> {
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
            max_cycles: get("max_cycles")?,
            max_spans_per_cycle: get("max_spans_per_cycle")?,
            thread_cpu,
            nominal_period_ns: None,
            ring,
            episode_dir: None,
            metadata: None,
        })
    }

    /// Register everything on a new builder; memory is taken at `build`.
    fn builder(self, py: Python<'_>) -> PyResult<(RecorderBuilder, Names)> {
        let Spec {
            stages,
            phases,
            attributes,
            values,
            max_cycles,
            max_spans_per_cycle,
            thread_cpu,
            nominal_period_ns,
            ring,
            episode_dir,
            metadata,
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
        b.ring(match ring {
            "auto" => RingStorage::Auto,
            "heap" => RingStorage::Heap,
            other => {
                return Err(PyValueError::new_err(format!(
                "ring must be \"auto\" (a /dev/shm file when possible) or \"heap\", not {other:?}"
            )))
            }
        });
        if let Some(d) = episode_dir {
            b.episode_dir(d);
        }
        for (k, v) in metadata.unwrap_or_default() {
            b.metadata(k, v);
        }
        let name = |s: &str| PyString::intern(py, s).unbind();
        let mut st = Vec::new();
        for s in &stages {
            st.push(Named {
                name: name(s),
                id: b.stage(s).map_err(capture_err)?,
            });
        }
        let mut ph = Vec::new();
        for p in phases.unwrap_or_default() {
            ph.push(Named {
                name: name(&p),
                id: b.phase(&p).map_err(capture_err)?,
            });
        }
        let mut attr_keys = Vec::new();
        if let Some(attrs) = attributes {
            for (k, vs) in attrs.iter() {
                let key: String = k.extract().map_err(|_| {
                    PyTypeError::new_err(
                        "attributes maps a key name (str) to a list of value names",
                    )
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
        }
        let mut vals = Vec::new();
        if let Some(values) = values {
            for (k, spec) in values.iter() {
                let vname: String = k.extract().map_err(|_| {
                    PyTypeError::new_err("values maps a value name (str) to (kind, unit)")
                })?;
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
        }
        Ok((
            b,
            Names {
                stages: st,
                phases: ph,
                values: vals,
                attrs: attr_keys,
            },
        ))
    }
}

impl Recorder {
    /// The Python recorder around `rec`, with the names it resolves; a
    /// recorder without a registered phase has `running`.
    fn assemble(
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
        }
    }

    /// The key `key` (its id, or its name) and its value `value` (the
    /// value's id among the key's values, or its name).
    fn resolve_attr(
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
    fn span_attrs(
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

    /// Ok while the recorder has not finished; recording after finish is a
    /// `RuntimeError`, never a silent no-op.
    #[inline]
    fn live(&self) -> PyResult<()> {
        match &self.finished {
            None => Ok(()),
            Some(dir) => Err(finished_err(dir)),
        }
    }
}

#[pymethods]
impl Recorder {
    #[new]
    #[pyo3(signature = (stages, phases = None, attributes = None, values = None, max_cycles = None,
                        max_spans_per_cycle = None, thread_cpu = None, nominal_period_ns = None,
                        ring = "auto", episode_dir = None, metadata = None, threads = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        stages: Vec<String>,
        phases: Option<Vec<String>>,
        attributes: Option<&Bound<'_, PyDict>>,
        values: Option<&Bound<'_, PyDict>>,
        max_cycles: Option<&Bound<'_, PyAny>>,
        max_spans_per_cycle: Option<&Bound<'_, PyAny>>,
        thread_cpu: Option<&Bound<'_, PyAny>>,
        nominal_period_ns: Option<u64>,
        ring: &str,
        episode_dir: Option<PathBuf>,
        metadata: Option<std::collections::BTreeMap<String, String>>,
        threads: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let spec = Spec {
            stages,
            phases,
            attributes: attributes.cloned(),
            values: values.cloned(),
            max_cycles: max_cycles.cloned(),
            max_spans_per_cycle: max_spans_per_cycle.cloned(),
            thread_cpu: cpu_mode(thread_cpu, "thread_cpu")?,
            nominal_period_ns,
            ring,
            episode_dir,
            metadata,
        };
        let (b, names) = spec.builder(py)?;
        let Some(threads) = threads.filter(|t| !t.is_empty()) else {
            let rec = b.build().map_err(capture_err)?;
            return Ok(Recorder::assemble(py, rec, names, Vec::new(), None));
        };
        // Background threads: each its own builder and recorder, built with
        // the control thread's in one registry.
        let mut reg = Registry::new(b);
        let mut thread_names = Vec::new();
        for (k, v) in threads.iter() {
            let tname: String = k.extract().map_err(|_| {
                PyTypeError::new_err("threads maps a thread name (str) to its settings (dict)")
            })?;
            let d = v.cast::<PyDict>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "threads[{tname:?}] must be a dict of Recorder settings, e.g. {{\"stages\": [\"grab\"]}}"
                ))
            })?;
            let (tb, tn) = Spec::of_dict(d, &tname)?.builder(py)?;
            reg.thread(&tname, tb).map_err(capture_err)?;
            thread_names.push((tname, tn));
        }
        let built = reg.build().map_err(capture_err)?;
        let mut handles = Vec::new();
        for ((tname, tn), trec) in thread_names.into_iter().zip(built.threads) {
            let t = Recorder::assemble(py, trec, tn, Vec::new(), Some(tname.clone()));
            handles.push((tname, Py::new(py, t)?));
        }
        Ok(Recorder::assemble(py, built.control, names, handles, None))
    }

    /// The recorder of background thread `name` (declared in `threads=`):
    /// record that thread's cycles and spans on it, from that thread only.
    /// The control recorder's `finish` writes its files.
    fn thread(&self, py: Python<'_>, name: &str) -> PyResult<Py<Recorder>> {
        self.threads
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r.clone_ref(py))
            .ok_or_else(|| {
                let known: Vec<&str> = self.threads.iter().map(|(n, _)| n.as_str()).collect();
                PyKeyError::new_err(format!(
                    "no background thread {name:?}; declared: {}",
                    if known.is_empty() {
                        "none (pass threads= to Recorder)".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            })
    }

    /// The background threads' names, in declaration order.
    #[getter]
    fn threads(&self) -> Vec<String> {
        self.threads.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The id of stage `name` (raises `KeyError` for an unknown name).
    fn stage_id(&self, name: &Bound<'_, PyAny>) -> PyResult<usize> {
        resolve(&self.stages, name, "stage").map(StageId::index)
    }

    /// The id of phase `name`.
    fn phase_id(&self, name: &Bound<'_, PyAny>) -> PyResult<usize> {
        resolve(&self.phases, name, "phase").map(PhaseId::index)
    }

    /// The id of caller value `name`.
    fn value_id(&self, name: &Bound<'_, PyAny>) -> PyResult<usize> {
        let id = resolve(&self.values, name, "value")?;
        Ok(self.values.iter().position(|n| n.id == id).unwrap_or(0))
    }

    /// Mark the start of the wait before the next cycle.
    fn begin_wait(&mut self) -> PyResult<()> {
        self.live()?;
        self.rec.begin_wait();
        Ok(())
    }

    /// Mark the end of the wait (after sleep and spin).
    fn end_wait(&mut self) -> PyResult<()> {
        self.live()?;
        self.rec.end_wait();
        Ok(())
    }

    /// Begin a cycle in `phase` (name or id), for the release point in
    /// `tick` when given. A cycle still open is ended first.
    #[pyo3(signature = (phase, tick = None))]
    fn begin_cycle(
        &mut self,
        phase: &Bound<'_, PyAny>,
        tick: Option<PyRef<'_, Tick>>,
    ) -> PyResult<()> {
        self.live()?;
        let p = resolve(&self.phases, phase, "phase")?;
        let release = tick.map_or(Release::NONE, |t| t.0.release());
        self.rec.begin_cycle(p, release);
        self.n_open = 0;
        Ok(())
    }

    /// End the open cycle; spans still open are closed now and marked
    /// `closed_by_cycle_end`.
    fn end_cycle(&mut self) -> PyResult<()> {
        self.live()?;
        self.rec.end_cycle();
        self.n_open = 0;
        Ok(())
    }

    /// `with rec.cycle(phase, tick):` — the cycle begins on entry and ends
    /// on exit.
    #[pyo3(signature = (phase, tick = None))]
    fn cycle<'py>(
        mut slf: PyRefMut<'py, Self>,
        phase: &Bound<'_, PyAny>,
        tick: Option<PyRef<'_, Tick>>,
    ) -> PyResult<PyRefMut<'py, Self>> {
        slf.live()?;
        let p = resolve(&slf.phases, phase, "phase")?;
        let release = tick.map_or(Release::NONE, |t| t.0.release());
        slf.pending = Pending::Cycle(p, release);
        Ok(slf)
    }

    /// `with rec.span(stage, mode=None, attrs=None):` — the span opens on
    /// entry and closes on exit. `mode` names a value of the attribute
    /// `mode`; `attrs` sets any declared attributes: `((key, value), ...)`
    /// with ids (from `attr_id`) or names, or a dict.
    #[pyo3(signature = (stage, mode = None, attrs = None))]
    fn span<'py>(
        mut slf: PyRefMut<'py, Self>,
        stage: &Bound<'_, PyAny>,
        mode: Option<&Bound<'_, PyAny>>,
        attrs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyRefMut<'py, Self>> {
        slf.live()?;
        let s = resolve(&slf.stages, stage, "stage")?;
        let a = slf.span_attrs(mode, attrs)?;
        slf.pending = Pending::Span(s, a);
        Ok(slf)
    }

    /// `(key_id, value_id)` of attribute `key` set to `value` (names or
    /// ids), for `attrs=` on the id path; raises `KeyError` for a key or
    /// value that was not declared.
    fn attr_id(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<(usize, usize)> {
        let (k, v) = self.resolve_attr(key, value)?;
        let vi = self.attrs[k]
            .values
            .iter()
            .position(|n| n.id == v)
            .unwrap_or(0);
        Ok((k, vi))
    }

    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        let frame = match slf.pending {
            Pending::None => {
                return Err(PyRuntimeError::new_err(
                    "enter a recorder through `with rec.cycle(...)` or `with rec.span(...)`",
                ))
            }
            Pending::Cycle(p, release) => {
                slf.rec.begin_cycle(p, release);
                slf.n_open = 0;
                Frame::Cycle
            }
            Pending::Span(s, a) => {
                let token = slf.rec.begin_span(s);
                a.set(&mut slf.rec, token);
                Frame::Span(token)
            }
        };
        slf.pending = Pending::None;
        let d = slf.depth;
        if d < STACK {
            slf.stack[d] = frame;
        }
        slf.depth = d + 1;
        Ok(slf)
    }

    /// Three positional arguments, not `*args`: a tuple would be allocated
    /// per exit.
    fn __exit__(
        &mut self,
        _ty: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> bool {
        if self.depth == 0 {
            return false;
        }
        self.depth -= 1;
        if self.depth < STACK {
            match self.stack[self.depth] {
                Frame::Cycle => {
                    self.rec.end_cycle();
                    self.n_open = 0;
                }
                Frame::Span(t) => self.rec.end_span(t),
            }
        }
        false
    }

    /// Open a span without `with`. Returns its position among the spans
    /// opened this way in this cycle (0 for the outermost), for `end_span`.
    #[pyo3(signature = (stage, mode = None, attrs = None))]
    fn begin_span(
        &mut self,
        stage: &Bound<'_, PyAny>,
        mode: Option<&Bound<'_, PyAny>>,
        attrs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        self.live()?;
        let s = resolve(&self.stages, stage, "stage")?;
        let a = self.span_attrs(mode, attrs)?;
        let token = self.rec.begin_span(s);
        a.set(&mut self.rec, token);
        let i = self.n_open;
        if i < STACK {
            self.open[i] = token;
        }
        self.n_open = i + 1;
        Ok(i)
    }

    /// Close the span `begin_span` returned `position` for (the innermost
    /// one when omitted), and forget the spans opened inside it. A position
    /// is valid until its cycle ends; one that names no open span is
    /// ignored.
    #[pyo3(signature = (position = None))]
    fn end_span(&mut self, position: Option<usize>) -> PyResult<()> {
        self.live()?;
        let Some(i) = position.or(self.n_open.checked_sub(1)) else {
            return Ok(());
        };
        if i < self.n_open {
            if i < STACK {
                self.rec.end_span(self.open[i]);
            }
            self.n_open = i;
        }
        Ok(())
    }

    /// Set caller value `value` (name or id) for the open cycle: an `int`
    /// for an int value, an `int` or `float` for a float value.
    fn set_value(&mut self, value: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        self.live()?;
        let id = resolve(&self.values, value, "value")?;
        match id.kind() {
            ValueKind::Int => {
                if !v.is_instance_of::<PyInt>() {
                    return Err(PyTypeError::new_err(format!(
                        "value {value} is an int value; got {}",
                        v.get_type()
                            .name()
                            .map_or_else(|_| "?".into(), |n| n.to_string())
                    )));
                }
                let x: i64 = v.extract()?;
                self.rec.set_int(id, x);
            }
            ValueKind::Float => {
                if !(v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyInt>()) {
                    return Err(PyTypeError::new_err(format!(
                        "value {value} is a float value; got {}",
                        v.get_type()
                            .name()
                            .map_or_else(|_| "?".into(), |n| n.to_string())
                    )));
                }
                let x: f64 = v.extract()?;
                self.rec.set_float(id, x);
            }
        }
        Ok(())
    }

    /// Write `control_timing.jsonl` and `control_timing_summary.json` into
    /// `episode_dir` atomically, with `status` `"complete"` or `"aborted"`.
    /// A cycle still open is ended first. Raises `OSError` when the files
    /// cannot be written (nothing is lost: finish again into another
    /// directory), and `RuntimeError` for a second finish.
    #[pyo3(signature = (episode_dir, status = "complete"))]
    fn finish(
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

    /// Cycles begun.
    #[getter]
    fn total_cycles(&self) -> u64 {
        self.rec.total_cycles()
    }
    /// Cycles the ring holds.
    #[getter]
    fn retained_cycles(&self) -> u64 {
        self.rec.retained_cycles()
    }
    /// Earlier cycles the ring overwrote.
    #[getter]
    fn dropped_cycles(&self) -> u64 {
        self.rec.dropped_cycles()
    }
    /// Spans that did not fit their cycle.
    #[getter]
    fn spans_dropped(&self) -> u64 {
        self.rec.spans_dropped()
    }
    /// Spans opened outside any cycle.
    #[getter]
    fn spans_outside_cycle(&self) -> u64 {
        self.rec.spans_outside_cycle()
    }
    /// Whether a cycle is open.
    #[getter]
    fn in_cycle(&self) -> bool {
        self.rec.in_cycle()
    }
    /// Bytes preallocated for the ring.
    #[getter]
    fn footprint_bytes(&self) -> u64 {
        self.rec.footprint_bytes()
    }
    /// The ring file in /dev/shm, or None for a heap ring.
    #[getter]
    fn ring_path(&self) -> Option<String> {
        self.rec.ring_path().map(|p| p.display().to_string())
    }
    /// Why the ring is on the heap although "auto" was asked for.
    #[getter]
    fn ring_note(&self) -> Option<String> {
        self.rec.ring_note().map(str::to_string)
    }
    /// The directory this recorder finished into, or None.
    #[getter]
    fn finished_into(&self) -> Option<String> {
        self.finished.clone()
    }
}

/// A program's episode directory, in `serve`'s layout.
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct Episode {
    ep: HostEpisode,
    realtime: Option<RealtimeObtained>,
}

#[pymethods]
impl Episode {
    #[new]
    #[pyo3(signature = (runs_dir, program, sources, control_timing, timing_max_cycles, scheduler, settings = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runs_dir: PathBuf,
        program: String,
        sources: Vec<PathBuf>,
        control_timing: bool,
        timing_max_cycles: u64,
        scheduler: PyRef<'_, Scheduler>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut map = std::collections::BTreeMap::new();
        if let Some(s) = settings {
            let json = py.import("json")?;
            for (k, v) in s.iter() {
                let key: String = k.extract()?;
                let text: String = json.call_method1("dumps", (v,))?.extract().map_err(|_| {
                    PyTypeError::new_err(format!("settings[{key:?}] is not JSON-serialisable"))
                })?;
                let value: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| PyValueError::new_err(format!("settings[{key:?}]: {e}")))?;
                map.insert(key, value);
            }
        }
        let cfg = scheduler.s.config();
        let facts = ProgramFacts {
            producer: format!("looptime-python {}", env!("CARGO_PKG_VERSION")),
            program,
            sources,
            control_timing,
            timing_max_cycles,
            nominal_period_ns: cfg.period_ns,
            spin_margin_ns: cfg.spin_margin_ns,
            spin_margin_auto: cfg.auto_margin,
            overrun_policy: cfg.policy.as_str(),
            settings: map,
        };
        let (ep, notes) = HostEpisode::create(&runs_dir, facts).map_err(runtime_err)?;
        for n in notes {
            eprintln!("{n}");
        }
        Ok(Episode { ep, realtime: None })
    }

    /// The rollout directory (`<runs>/session-<UTC>/rollout-000`).
    #[getter]
    fn dir(&self) -> String {
        self.ep.dir().display().to_string()
    }

    /// The session directory.
    #[getter]
    fn session(&self) -> String {
        self.ep.session().display().to_string()
    }

    /// Prepare the calling thread as the control thread: 1 ns timer slack.
    /// Returns the warnings (empty when everything was granted); what was
    /// obtained goes into the manifest.
    fn setup_control_thread(&mut self) -> Vec<String> {
        let obtained = setup_control_thread(&RealtimeRequest::default());
        let warnings = obtained.warnings.clone();
        self.realtime = Some(obtained);
        warnings
    }

    /// Rewrite the manifest with how the loop ended and mark the session.
    /// Call it after `Recorder.finish`.
    #[pyo3(signature = (recorder = None, scheduler = None, complete = true, planned_cycles = 0))]
    fn finish(
        &mut self,
        recorder: Option<PyRef<'_, Recorder>>,
        scheduler: Option<PyRef<'_, Scheduler>>,
        complete: bool,
        planned_cycles: u64,
    ) -> PyResult<()> {
        if self.ep.is_finished() {
            return Err(PyRuntimeError::new_err(format!(
                "the episode {} is already finished",
                self.ep.dir().display()
            )));
        }
        let mut end = EpisodeEnd {
            complete,
            planned_cycles,
            realtime: self.realtime.clone(),
            ..EpisodeEnd::default()
        };
        if let Some(r) = &recorder {
            end.recorder(&r.rec, r.finished.as_deref().map(Path::new), self.ep.dir());
        }
        if let Some(s) = &scheduler {
            end.scheduler(&s.s);
        }
        self.ep.finish(&end).map_err(runtime_err)
    }
}

/// Host monotonic time in ns (the clock the scheduler's targets are on).
#[pyfunction]
fn monotonic_ns() -> u64 {
    looptime_capture::clock::monotonic_ns()
}

/// This thread's CPU time in ns.
#[pyfunction]
fn thread_cpu_ns() -> u64 {
    looptime_capture::clock::thread_cpu_ns()
}

/// The native module.
#[pymodule]
fn _looptime(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Recorder>()?;
    m.add_class::<Scheduler>()?;
    m.add_class::<Tick>()?;
    m.add_class::<FinishReport>()?;
    m.add_class::<Episode>()?;
    m.add_function(wrap_pyfunction!(monotonic_ns, m)?)?;
    m.add_function(wrap_pyfunction!(thread_cpu_ns, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_SPAN_DEPTH", MAX_SPAN_DEPTH)?;
    Ok(())
}
