//! `Recorder`: the preallocated recorder of one loop thread, its hot path
//! (`begin_cycle`/`end_cycle`, `span`/`cycle` as context managers over a
//! fixed stack, `begin_span`/`end_span`, `set_value`) and its one
//! `#[pymethods]` block. Child modules: `spec` (what the constructor
//! takes, and assembling the recorder), `attrs` (span attributes resolved
//! to ids before a span opens), `samples` (data-age arguments checked),
//! `status` (the live status another thread reads) and `finish` (writing
//! the evidence).
//!
//! On the hot path nothing allocates: names are found by identity, ids
//! are small ints, the nesting lives in fixed arrays.

use looptime_capture::{
    ClockDomain, PhaseId, Recorder as RustRecorder, Registry, Release, SourceId, SpanToken,
    StageId, ValueId, ValueKind, MAX_SPAN_DEPTH,
};
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt};
use std::path::PathBuf;

mod attrs;
mod finish;
mod release;
mod samples;
mod spec;
mod status;

pub(crate) use attrs::SpanAttrs;
pub use finish::FinishReport;
use release::release_of;
use spec::{cpu_mode, Spec};
pub use status::LiveStatus;

use crate::error::{capture_err, finished_err};
use crate::names::{resolve, AttrKeyNamed, Named};
use crate::tick::Tick;

/// `Recorder(target_clock=)`'s domain.
fn target_clock_of(name: &str) -> PyResult<ClockDomain> {
    match name {
        "host_monotonic" => Ok(ClockDomain::HostMonotonic),
        "simulation" => Ok(ClockDomain::Simulation),
        other => Err(PyValueError::new_err(format!(
            "target_clock must be \"host_monotonic\" or \"simulation\" (the scheduler's `clock`), not {other:?}"
        ))),
    }
}

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

/// The preallocated recorder of one loop thread; see the package docs.
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct Recorder {
    pub(crate) rec: RustRecorder,
    stages: Vec<Named<StageId>>,
    phases: Vec<Named<PhaseId>>,
    values: Vec<Named<ValueId>>,
    /// Declared data sources (data age), in id order.
    sources: Vec<Named<SourceId>>,
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
    pub(crate) finished: Option<String>,
    /// Background threads' recorders (declared in `threads=`), which this
    /// recorder's finish writes; empty for a background thread's recorder.
    threads: Vec<(String, Py<Recorder>)>,
    /// For a background thread's recorder, its thread name.
    thread: Option<String>,
    /// The clock of the release points it records (`target_clock=`);
    /// `Scheduler.wait` refuses a recorder on another clock than its own.
    pub(crate) target_clock: ClockDomain,
}

impl Recorder {
    /// Ok while the recorder has not finished; recording after finish is a
    /// `RuntimeError`, never a silent no-op.
    #[inline]
    pub(crate) fn live(&self) -> PyResult<()> {
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
                        ring = "auto", episode_dir = None, metadata = None, threads = None,
                        target_clock = "host_monotonic", sources = None, command_stage = None,
                        compute_budget_ns = None, deadline_tolerance_ns = None, live_status = false))]
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
        metadata: Option<&Bound<'_, PyDict>>,
        threads: Option<&Bound<'_, PyDict>>,
        target_clock: &str,
        sources: Option<&Bound<'_, PyDict>>,
        command_stage: Option<String>,
        compute_budget_ns: Option<&Bound<'_, PyAny>>,
        deadline_tolerance_ns: Option<&Bound<'_, PyAny>>,
        live_status: bool,
    ) -> PyResult<Self> {
        let target_clock = target_clock_of(target_clock)?;
        let spec = Spec {
            stages,
            phases,
            attributes: attributes.cloned(),
            values: values.cloned(),
            sources: sources.cloned(),
            max_cycles: max_cycles.cloned(),
            max_spans_per_cycle: max_spans_per_cycle.cloned(),
            thread_cpu: cpu_mode(thread_cpu, "thread_cpu")?,
            nominal_period_ns,
            ring,
            episode_dir,
            metadata: metadata.map(spec::metadata_text).transpose()?,
            target_clock,
            command_stage,
            budget: (
                spec::declared_ns("compute_budget_ns", compute_budget_ns)?,
                spec::declared_ns("deadline_tolerance_ns", deadline_tolerance_ns)?,
            ),
        };
        let (mut b, names) = spec.builder(py)?;
        b.live_status(live_status);
        let Some(threads) = threads.filter(|t| !t.is_empty()) else {
            let rec = b.build().map_err(capture_err)?;
            let mut r = Recorder::assemble(py, rec, names, Vec::new(), None);
            r.target_clock = target_clock;
            return Ok(r);
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
        let mut r = Recorder::assemble(py, built.control, names, handles, None);
        r.target_clock = target_clock;
        Ok(r)
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
    fn source_id(&self, name: &Bound<'_, PyAny>) -> PyResult<usize> {
        resolve(&self.sources, name, "source").map(|s| s.index())
    }

    /// Record that this cycle used sample `seq` of `source` (its name or
    /// id), stamped `stamp_ns` on the source's clock (for a host-monotonic
    /// source, a `looptime.monotonic_ns()` reading): its capture time, or
    /// for a polled state its request time. The moment of use is read now.
    /// Allocation-free with an id; a sample outside a cycle is counted and
    /// not stored.
    fn sample(
        &mut self,
        source: &Bound<'_, PyAny>,
        seq: &Bound<'_, PyAny>,
        stamp_ns: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (s, q, t) = self.sample_args(source, seq, stamp_ns)?;
        self.rec.sample(s, q, t);
        Ok(())
    }

    /// Record that this thread published sample `seq` of `source`, stamped
    /// `stamp_ns` (a producer thread's recorder), as `sample` otherwise.
    fn produced(
        &mut self,
        source: &Bound<'_, PyAny>,
        seq: &Bound<'_, PyAny>,
        stamp_ns: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (s, q, t) = self.sample_args(source, seq, stamp_ns)?;
        self.rec.produced(s, q, t);
        Ok(())
    }

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
    /// `tick` when given, or released by an input, `input=(arrival_ns,
    /// seq)` (docs/input-paced.md), or at a release point of another
    /// scheduler's (`target_ns`, on the recorder's target clock, with the
    /// release points it `skipped` before this one and whether it was
    /// `overdue`: a ROS timer's expected call time). A cycle still open is
    /// ended first.
    #[pyo3(signature = (phase, tick = None, input = None, target_ns = None, skipped = 0, overdue = false))]
    fn begin_cycle(
        &mut self,
        phase: &Bound<'_, PyAny>,
        tick: Option<PyRef<'_, Tick>>,
        input: Option<&Bound<'_, PyAny>>,
        target_ns: Option<u64>,
        skipped: u32,
        overdue: bool,
    ) -> PyResult<()> {
        self.live()?;
        let p = resolve(&self.phases, phase, "phase")?;
        let release = release::with_target(release_of(tick, input)?, target_ns, skipped, overdue)?;
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

    /// `with rec.cycle(phase, tick):` (or `input=(arrival_ns, seq)`) — the
    /// cycle begins on entry and ends on exit.
    #[pyo3(signature = (phase, tick = None, input = None, target_ns = None, skipped = 0, overdue = false))]
    fn cycle<'py>(
        mut slf: PyRefMut<'py, Self>,
        phase: &Bound<'_, PyAny>,
        tick: Option<PyRef<'_, Tick>>,
        input: Option<&Bound<'_, PyAny>>,
        target_ns: Option<u64>,
        skipped: u32,
        overdue: bool,
    ) -> PyResult<PyRefMut<'py, Self>> {
        slf.live()?;
        let p = resolve(&slf.phases, phase, "phase")?;
        let release = release::with_target(release_of(tick, input)?, target_ns, skipped, overdue)?;
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
        self.finish_files(py, episode_dir, status)
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
    /// Samples that did not fit their cycle's slots.
    #[getter]
    fn samples_dropped(&self) -> u64 {
        self.rec.samples_dropped()
    }

    /// Samples recorded outside any cycle (counted, not stored).
    #[getter]
    fn samples_outside_cycle(&self) -> u64 {
        self.rec.samples_outside_cycle()
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
    /// The live status (`live_status=True`): a handle any thread may read.
    fn status(&self) -> PyResult<LiveStatus> {
        self.status_handle()
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
