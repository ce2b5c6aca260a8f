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
//!
//! # Modules
//!
//! In the pydantic-core style, one per concept, each importing only the
//! ones above it (docs/architecture.md): `error` (the capture error's one
//! classification mapped to Python exceptions), `names` (a name or an id
//! to a registered id), `tick`, `recorder` (the hot path and its one
//! `#[pymethods]` block) with `recorder::spec` (the constructor's
//! settings), `recorder::attrs` (span attributes) and `recorder::finish`,
//! `scheduler` (which marks a recorder's wait) and `episode`. This file is
//! the module list and the `#[pymodule]`.

mod error;
mod names;
mod net;
mod pacer;
mod tick;

mod recorder;
mod scheduler;

mod episode;

use looptime_capture::MAX_SPAN_DEPTH;
use pyo3::prelude::*;

use episode::{Episode, Session};
use recorder::{FinishReport, Recorder};
use scheduler::Scheduler;
use tick::Tick;

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
    m.add_class::<recorder::LiveStatus>()?;
    m.add_class::<Scheduler>()?;
    m.add_class::<Tick>()?;
    m.add_class::<net::Arrival>()?;
    m.add_class::<pacer::InputPacer>()?;
    m.add_class::<pacer::InputTick>()?;
    m.add_function(wrap_pyfunction!(net::enable_rx_timestamps, m)?)?;
    m.add_function(wrap_pyfunction!(net::recv_stamped, m)?)?;
    m.add_class::<FinishReport>()?;
    m.add_class::<Episode>()?;
    m.add_class::<Session>()?;
    m.add_function(wrap_pyfunction!(monotonic_ns, m)?)?;
    m.add_function(wrap_pyfunction!(thread_cpu_ns, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_SPAN_DEPTH", MAX_SPAN_DEPTH)?;
    Ok(())
}
