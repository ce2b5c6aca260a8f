//! The C ABI of looptime: the recorder, the scheduler and the episode
//! layout, for C and C++ control loops (ROS 2 nodes, generated loops).
//!
//! `include/looptime.h` is generated from this file by cbindgen and
//! committed; `include/looptime.hpp` adds RAII guards for C++. The rules
//! every function keeps:
//!
//! * **Handles are opaque.** A recorder, builder, scheduler or episode is a
//!   pointer the library allocated; only `looptime_*_free` releases it.
//! * **Errors are codes.** `0` is success, a negative value an error, and a
//!   positive value a warning (the call did its work, but something needs
//!   attention). After any non-zero code, [`looptime_last_error`] returns a
//!   message for this thread.
//! * **No panic crosses the boundary.** Every entry point catches an unwind
//!   and returns [`LOOPTIME_ERR_PANIC`].
//! * **The recording path** (`looptime_cycle_*`, `looptime_span_*`,
//!   `looptime_wait_*`, `looptime_set_*`, `looptime_scheduler_wait`) does
//!   not allocate, lock, format or do I/O, except to write an error message
//!   when called wrongly.
//! * **One thread per recorder.** A recorder and a scheduler are used by one
//!   thread at a time; they are not synchronised.

#![allow(unsafe_code)]
#![warn(missing_docs)]

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use looptime_capture::{
    AttrKey, AttrValue, CaptureStatus, CpuTimeMode, PhaseId, Recorder, RecorderBuilder, Registry,
    Release, RingStorage, SpanToken, StageId, ValueId, ValueKind,
};
use looptime_runtime::clock::MonotonicClock;
use looptime_runtime::embed::{EpisodeEnd, HostEpisode, ProgramFacts};
use looptime_runtime::rt::{setup_control_thread, RealtimeObtained, RealtimeRequest};
use looptime_runtime::scheduler::{OverrunPolicy, Scheduler, SchedulerConfig};

/// Success.
pub const LOOPTIME_OK: i32 = 0;
/// Warning from `looptime_recorder_finish`: spans or a cycle were still
/// open. They were closed at finish (marked `closed_by_cycle_end`) and the
/// evidence was written.
pub const LOOPTIME_WARN_LEFT_OPEN: i32 = 1;
/// Warning from `looptime_control_thread_setup`: the kernel refused a
/// setting (see `looptime_last_error`); the loop runs without it.
pub const LOOPTIME_WARN_DEGRADED: i32 = 2;
/// A handle or pointer argument is NULL.
pub const LOOPTIME_ERR_NULL: i32 = -1;
/// An argument is out of range: a bad name, capacity, kind or setting.
pub const LOOPTIME_ERR_INVALID: i32 = -2;
/// A stage, phase or value id that the recorder's builder did not hand out.
pub const LOOPTIME_ERR_UNKNOWN_ID: i32 = -3;
/// The call does not fit the handle's state: finishing twice, or recording
/// into a recorder that has finished.
pub const LOOPTIME_ERR_STATE: i32 = -4;
/// A file or directory could not be written.
pub const LOOPTIME_ERR_IO: i32 = -5;
/// A bug inside looptime: a panic was caught at the boundary.
pub const LOOPTIME_ERR_PANIC: i32 = -6;

/// `target_ns` of a cycle with no scheduled release point.
pub const LOOPTIME_NO_TARGET: u64 = u64::MAX;
/// Value kind: a signed 64-bit integer.
pub const LOOPTIME_VALUE_INT: u32 = 0;
/// Value kind: a 64-bit float.
pub const LOOPTIME_VALUE_FLOAT: u32 = 1;
/// Overrun policy: start at once and re-phase the schedule onto this start.
pub const LOOPTIME_POLICY_REBASE: u32 = 0;
/// Overrun policy: start at once, resume the original timeline, and count
/// the release points that passed as skipped.
pub const LOOPTIME_POLICY_KEEP_PHASE: u32 = 1;
/// Ring storage: a file in /dev/shm when possible, else the heap.
pub const LOOPTIME_RING_AUTO: u32 = 0;
/// Ring storage: the heap (not recoverable after kill -9).
pub const LOOPTIME_RING_HEAP: u32 = 1;
/// A span id that names no span; ending it does nothing.
pub const LOOPTIME_NO_SPAN: u64 = 0xffff;
/// CPU-time mode: two CPU-clock reads a cycle, the work's CPU time in the
/// cycle record, wall-only spans (the default).
pub const LOOPTIME_CPU_CYCLE: u32 = 0;
/// CPU-time mode: two CPU-clock reads a span, for the stages registered
/// with CPU time.
pub const LOOPTIME_CPU_SPANS: u32 = 1;
/// CPU-time mode: no CPU-clock reads.
pub const LOOPTIME_CPU_OFF: u32 = 2;

// --- errors ---------------------------------------------------------------

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

struct Fail {
    code: i32,
    message: String,
}

fn fail(code: i32, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
    }
}

fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// Run `f`, turn its failure or panic into a code and the thread's message.
/// The error paths are out of line and cold, so that the recording calls
/// stay small.
#[inline]
fn guard(what: &'static str, f: impl FnOnce() -> Result<i32, Fail>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => report(what, e),
        Err(payload) => report_panic(what, payload),
    }
}

#[cold]
#[inline(never)]
fn report(what: &str, e: Fail) -> i32 {
    set_last_error(&format!("{what}: {}", e.message));
    e.code
}

#[cold]
#[inline(never)]
fn report_panic(what: &str, payload: Box<dyn std::any::Any + Send>) -> i32 {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    set_last_error(&format!(
        "{what}: internal error (a panic inside looptime: {text}); please report it"
    ));
    LOOPTIME_ERR_PANIC
}

#[cold]
#[inline(never)]
fn null_error(what: &str) -> Fail {
    fail(LOOPTIME_ERR_NULL, format!("the {what} is NULL"))
}

#[cold]
#[inline(never)]
fn unknown_id(kind: &str, id: u32, registered: usize) -> Fail {
    fail(
        LOOPTIME_ERR_UNKNOWN_ID,
        format!("{kind} id {id} was not registered ({registered} {kind}s)"),
    )
}

/// Free a handle allocated with `Box::into_raw`, catching a panic in its
/// destructor (reported through `looptime_last_error`).
///
/// # Safety
/// `p` is NULL or came from `Box::into_raw` and was not freed.
unsafe fn free_handle<T>(p: *mut T, what: &'static str) {
    if p.is_null() {
        return;
    }
    guard(what, || {
        // SAFETY: the caller's contract: allocated by Box::into_raw, freed once.
        drop(unsafe { Box::from_raw(p) });
        Ok(LOOPTIME_OK)
    });
}

/// # Safety
/// `p` is NULL or points to a live `T` that no other reference aliases.
#[inline]
unsafe fn handle<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Fail> {
    // SAFETY: the caller's contract; NULL is checked here.
    unsafe { p.as_mut() }.ok_or_else(|| null_error(what))
}

/// # Safety
/// `p` is NULL or points to a live `T`.
#[inline]
unsafe fn handle_ref<'a, T>(p: *const T, what: &str) -> Result<&'a T, Fail> {
    // SAFETY: the caller's contract; NULL is checked here.
    unsafe { p.as_ref() }.ok_or_else(|| null_error(what))
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Fail> {
    if p.is_null() {
        return Err(fail(LOOPTIME_ERR_NULL, format!("the {what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| fail(LOOPTIME_ERR_INVALID, format!("the {what} is not UTF-8")))
}

/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T, what: &str) -> Result<(), Fail> {
    if out.is_null() {
        return Err(fail(
            LOOPTIME_ERR_NULL,
            format!("the {what} pointer is NULL"),
        ));
    }
    // SAFETY: non-NULL and writable by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

fn capture_fail(e: looptime_capture::CaptureError) -> Fail {
    let code = match e {
        looptime_capture::CaptureError::Write { .. }
        | looptime_capture::CaptureError::MissingDirectory { .. }
        | looptime_capture::CaptureError::Ring { .. } => LOOPTIME_ERR_IO,
        _ => LOOPTIME_ERR_INVALID,
    };
    fail(code, looptime_capture::error_chain(&e))
}

/// The message of the last non-zero code returned on this thread (an empty
/// string before any). The text stays valid until the next looptime call
/// on this thread that fails.
#[no_mangle]
pub extern "C" fn looptime_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The library version, `"0.1.0"`: a static string.
#[no_mangle]
pub extern "C" fn looptime_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

// --- builder --------------------------------------------------------------

/// Registers names and capacities before the loop; then
/// `looptime_recorder_new` allocates the recorder from it.
#[derive(Clone, Debug)]
pub struct Builder {
    b: RecorderBuilder,
    stages: Vec<StageId>,
    phases: Vec<PhaseId>,
    values: Vec<ValueId>,
    /// Per attribute key (in registration order): its key and its values.
    attrs: Vec<(AttrKey, Vec<AttrValue>)>,
    /// Background threads declared with `looptime_builder_thread`: each a
    /// snapshot of its builder at that call.
    threads: Vec<(String, Builder)>,
}

/// A new builder with the defaults: 20,000 cycles, 16 spans a cycle, thread
/// CPU time on, ring in /dev/shm when possible. NULL only if a panic was
/// caught (see `looptime_last_error`).
#[no_mangle]
pub extern "C" fn looptime_builder_new() -> *mut Builder {
    let mut out = std::ptr::null_mut();
    guard("looptime_builder_new", || {
        out = Box::into_raw(Box::new(Builder {
            b: RecorderBuilder::new(),
            stages: Vec::new(),
            phases: Vec::new(),
            values: Vec::new(),
            attrs: Vec::new(),
            threads: Vec::new(),
        }));
        Ok(LOOPTIME_OK)
    });
    out
}

/// Release a builder (NULL is ignored). Recorders built from it stay valid.
///
/// # Safety
/// `b` is NULL or a builder from `looptime_builder_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_free(b: *mut Builder) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(b, "looptime_builder_free") }
}

/// Ring capacity in cycles (at least 1; 0 is `LOOPTIME_ERR_INVALID`); the
/// newest cycles are kept and the older ones counted as dropped.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_max_cycles(b: *mut Builder, cycles: u64) -> i32 {
    guard("looptime_builder_max_cycles", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        if cycles == 0 {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                "max_cycles is 0; the ring needs at least 1 cycle",
            ));
        }
        let n =
            usize::try_from(cycles).map_err(|_| fail(LOOPTIME_ERR_INVALID, "too many cycles"))?;
        b.b.max_cycles(n);
        Ok(LOOPTIME_OK)
    })
}

/// Span slots per cycle (at least 1; 0 is `LOOPTIME_ERR_INVALID`); spans
/// beyond are counted as dropped.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_max_spans_per_cycle(b: *mut Builder, spans: u32) -> i32 {
    guard("looptime_builder_max_spans_per_cycle", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        if spans == 0 {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                "max_spans_per_cycle is 0; a cycle needs at least 1 span slot",
            ));
        }
        b.b.max_spans_per_cycle(spans as usize);
        Ok(LOOPTIME_OK)
    })
}

/// The switch of the releases before the CPU-time modes: `true` is
/// `LOOPTIME_CPU_SPANS` (one `clock_gettime` at each end of a span),
/// `false` is `LOOPTIME_CPU_OFF`. See `looptime_builder_cpu_mode`.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_thread_cpu(b: *mut Builder, on: bool) -> i32 {
    guard("looptime_builder_thread_cpu", || {
        // SAFETY: the caller's contract.
        unsafe { handle(b, "builder") }?.b.thread_cpu_time(on);
        Ok(LOOPTIME_OK)
    })
}

/// Where the recorder reads the thread's CPU clock: `LOOPTIME_CPU_CYCLE`
/// (the default: at each cycle's start and end of work), `LOOPTIME_CPU_SPANS`
/// (at each end of a span) or `LOOPTIME_CPU_OFF`. Another value is
/// `LOOPTIME_ERR_INVALID`.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_cpu_mode(b: *mut Builder, mode: u32) -> i32 {
    guard("looptime_builder_cpu_mode", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        let m = match mode {
            LOOPTIME_CPU_CYCLE => CpuTimeMode::Cycle,
            LOOPTIME_CPU_SPANS => CpuTimeMode::Spans,
            LOOPTIME_CPU_OFF => CpuTimeMode::Off,
            other => {
                return Err(fail(
                    LOOPTIME_ERR_INVALID,
                    format!(
                        "CPU-time mode {other} is none of LOOPTIME_CPU_CYCLE (0), LOOPTIME_CPU_SPANS (1), LOOPTIME_CPU_OFF (2)"
                    ),
                ))
            }
        };
        b.b.cpu_time_mode(m);
        Ok(LOOPTIME_OK)
    })
}

/// The loop's nominal period, written into the evidence header.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_nominal_period_ns(b: *mut Builder, ns: u64) -> i32 {
    guard("looptime_builder_nominal_period_ns", || {
        // SAFETY: the caller's contract.
        unsafe { handle(b, "builder") }?.b.nominal_period_ns(ns);
        Ok(LOOPTIME_OK)
    })
}

/// Where the ring lives: `LOOPTIME_RING_AUTO` (a /dev/shm file that
/// `looptime recover` reads after a crash, else the heap) or
/// `LOOPTIME_RING_HEAP`.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_ring(b: *mut Builder, storage: u32) -> i32 {
    guard("looptime_builder_ring", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        let s = match storage {
            LOOPTIME_RING_AUTO => RingStorage::Auto,
            LOOPTIME_RING_HEAP => RingStorage::Heap,
            other => {
                return Err(fail(
                    LOOPTIME_ERR_INVALID,
                    format!(
                        "ring storage {other} is neither LOOPTIME_RING_AUTO nor LOOPTIME_RING_HEAP"
                    ),
                ))
            }
        };
        b.b.ring(s);
        Ok(LOOPTIME_OK)
    })
}

/// The episode directory the evidence will go to, recorded in the ring so
/// that `looptime recover` writes there after a crash.
///
/// # Safety
/// `b` is NULL or a live builder; `dir` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_episode_dir(b: *mut Builder, dir: *const c_char) -> i32 {
    guard("looptime_builder_episode_dir", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let dir = unsafe { text(dir, "directory") }?;
        b.b.episode_dir(dir);
        Ok(LOOPTIME_OK)
    })
}

/// A `key = value` pair for the evidence header's `metadata`.
///
/// # Safety
/// `b` is NULL or a live builder; `key` and `value` are NULL or
/// NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_metadata(
    b: *mut Builder,
    key: *const c_char,
    value: *const c_char,
) -> i32 {
    guard("looptime_builder_metadata", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let (k, v) = unsafe { (text(key, "key")?, text(value, "value")?) };
        b.b.metadata(k, v);
        Ok(LOOPTIME_OK)
    })
}

/// Register a stage; its id (0, 1, ... in registration order) is written
/// to `*id`.
///
/// # Safety
/// `b` is NULL or a live builder; `name` is NULL or a NUL-terminated
/// string; `id` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_stage(
    b: *mut Builder,
    name: *const c_char,
    id: *mut u32,
) -> i32 {
    guard("looptime_builder_stage", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "stage name") }?;
        if id.is_null() {
            return Err(null_error("id pointer"));
        }
        let s = b.b.stage(name).map_err(capture_fail)?;
        // SAFETY: the caller's contract.
        unsafe { put(id, b.stages.len() as u32, "id") }?;
        b.stages.push(s);
        Ok(LOOPTIME_OK)
    })
}

/// Register a phase (`warmup`, `running`, ...); its id is written to `*id`.
/// Without any phase, the recorder has one, `running`, with id 0.
///
/// # Safety
/// As `looptime_builder_stage`.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_phase(
    b: *mut Builder,
    name: *const c_char,
    id: *mut u32,
) -> i32 {
    guard("looptime_builder_phase", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "phase name") }?;
        if id.is_null() {
            return Err(null_error("id pointer"));
        }
        let p = b.b.phase(name).map_err(capture_fail)?;
        // SAFETY: the caller's contract.
        unsafe { put(id, b.phases.len() as u32, "id") }?;
        b.phases.push(p);
        Ok(LOOPTIME_OK)
    })
}

/// Register a per-cycle caller value of `kind` (`LOOPTIME_VALUE_INT` or
/// `LOOPTIME_VALUE_FLOAT`) and `unit` (free text, may be empty); its id is
/// written to `*id`.
///
/// # Safety
/// As `looptime_builder_stage`; `unit` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_value(
    b: *mut Builder,
    name: *const c_char,
    kind: u32,
    unit: *const c_char,
    id: *mut u32,
) -> i32 {
    guard("looptime_builder_value", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let (name, unit) = unsafe { (text(name, "value name")?, text(unit, "unit")?) };
        if id.is_null() {
            return Err(null_error("id pointer"));
        }
        let kind = match kind {
            LOOPTIME_VALUE_INT => ValueKind::Int,
            LOOPTIME_VALUE_FLOAT => ValueKind::Float,
            other => {
                return Err(fail(
                    LOOPTIME_ERR_INVALID,
                    format!(
                        "value kind {other} is neither LOOPTIME_VALUE_INT nor LOOPTIME_VALUE_FLOAT"
                    ),
                ))
            }
        };
        let v = b.b.value(name, kind, unit).map_err(capture_fail)?;
        // SAFETY: the caller's contract.
        unsafe { put(id, b.values.len() as u32, "id") }?;
        b.values.push(v);
        Ok(LOOPTIME_OK)
    })
}

/// Register a span attribute key (`mode`, `camera`, ...); its id (0, 1, ...
/// in registration order) is written to `*key`. Its values are registered
/// with `looptime_builder_attr_value`; spans carry them through
/// `looptime_span_attr`.
///
/// # Safety
/// As `looptime_builder_stage`.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_attr_key(
    b: *mut Builder,
    name: *const c_char,
    key: *mut u32,
) -> i32 {
    guard("looptime_builder_attr_key", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "attribute key") }?;
        if key.is_null() {
            return Err(null_error("key pointer"));
        }
        let k = b.b.attr_key(name).map_err(capture_fail)?;
        // SAFETY: the caller's contract.
        unsafe { put(key, b.attrs.len() as u32, "key") }?;
        b.attrs.push((k, Vec::new()));
        Ok(LOOPTIME_OK)
    })
}

/// Register a value of attribute key `key`; its id (0, 1, ... in
/// registration order, counted per key) is written to `*value`.
///
/// # Safety
/// As `looptime_builder_stage`.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_attr_value(
    b: *mut Builder,
    key: u32,
    name: *const c_char,
    value: *mut u32,
) -> i32 {
    guard("looptime_builder_attr_value", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "attribute value") }?;
        if value.is_null() {
            return Err(null_error("value pointer"));
        }
        let n = b.attrs.len();
        let (k, values) = b
            .attrs
            .get_mut(key as usize)
            .ok_or_else(|| unknown_id("attribute key", key, n))?;
        let v = b.b.attr_value(*k, name).map_err(capture_fail)?;
        // SAFETY: the caller's contract.
        unsafe { put(value, values.len() as u32, "value") }?;
        values.push(v);
        Ok(LOOPTIME_OK)
    })
}

/// Declare background thread `name` (1 to 48 ASCII letters, digits, `_` or
/// `-`; not `control`) on the control thread's builder `b`, recorded with
/// the settings registered so far on `thread` (its stages, phases, values,
/// attributes, capacities, ring). `looptime_recorder_new(b)` then builds
/// the thread's recorder with the control one, each with its own ring;
/// `looptime_recorder_thread` hands it out, and the control recorder's
/// finish writes its files (`control_timing.<name>.jsonl` and summary).
/// `thread` may be freed or reused afterwards.
///
/// # Safety
/// `b` and `thread` are NULL or live builders; `name` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_thread(
    b: *mut Builder,
    name: *const c_char,
    thread: *const Builder,
) -> i32 {
    guard("looptime_builder_thread", || {
        // SAFETY: the caller's contract.
        let t = unsafe { handle_ref(thread, "thread builder") }?;
        if std::ptr::eq(b.cast_const(), thread) {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                "a builder cannot be its own background thread",
            ));
        }
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "thread name") }?;
        if !t.threads.is_empty() {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!("the builder of thread {name:?} declares threads of its own; only the control thread's may"),
            ));
        }
        if name == looptime_capture::format::CONTROL_THREAD
            || b.threads.iter().any(|(n, _)| n == name)
        {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!("thread {name:?} is already declared (or is the control thread's name)"),
            ));
        }
        let mut snapshot = t.clone();
        snapshot.b.thread(name).map_err(capture_fail)?;
        b.threads.push((name.to_string(), snapshot));
        Ok(LOOPTIME_OK)
    })
}

// --- recorder -------------------------------------------------------------

/// The preallocated recorder of one thread.
#[derive(Debug)]
pub struct CRecorder {
    rec: Recorder,
    stages: Box<[StageId]>,
    phases: Box<[PhaseId]>,
    values: Box<[ValueId]>,
    /// Per attribute key, its values (ids as the builder gave them).
    attrs: Box<[Box<[AttrValue]>]>,
    /// Background threads' recorders, owned here (from `Box::into_raw`,
    /// freed by this one's `Drop`): the handles `looptime_recorder_thread`
    /// gives out live as long as this one. Raw pointers, so that borrowing
    /// this handle never claims the threads' handles, which their own
    /// threads use.
    threads: Vec<(String, *mut CRecorder)>,
    /// True for a background thread's recorder: its control recorder owns
    /// it, frees it and finishes it.
    is_thread: bool,
    finished: Option<PathBuf>,
    /// Open spans of a cycle that a failed finish ended: a retried finish
    /// still returns `LOOPTIME_WARN_LEFT_OPEN`.
    left_open: Option<usize>,
}

/// A recorder that has not finished: recording into a finished one is
/// `LOOPTIME_ERR_STATE`, never a silent no-op.
///
/// # Safety
/// `r` is NULL or points to a live recorder.
#[inline]
unsafe fn live<'a>(r: *mut CRecorder) -> Result<&'a mut CRecorder, Fail> {
    // SAFETY: the caller's contract.
    let h = unsafe { handle(r, "recorder") }?;
    match &h.finished {
        None => Ok(h),
        Some(dir) => Err(finished_error(dir)),
    }
}

#[cold]
#[inline(never)]
fn finished_error(dir: &Path) -> Fail {
    fail(
        LOOPTIME_ERR_STATE,
        format!(
            "this recorder already finished into {}; nothing more can be recorded: build a new recorder for the next episode",
            dir.display()
        ),
    )
}

/// Allocate a recorder from `b` (all of its memory, now) and write it to
/// `*out`. The builder stays usable and must still be freed.
///
/// # Safety
/// `b` is NULL or a live builder; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_recorder_new(b: *const Builder, out: *mut *mut CRecorder) -> i32 {
    guard("looptime_recorder_new", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle_ref(b, "builder") }?;
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        let h = if b.threads.is_empty() {
            Box::new(CRecorder::wrap(b.b.build().map_err(capture_fail)?, b))
        } else {
            let mut reg = Registry::new(b.b.clone());
            for (name, t) in &b.threads {
                reg.thread(name, t.b.clone()).map_err(capture_fail)?;
            }
            let built = reg.build().map_err(capture_fail)?;
            let mut control = CRecorder::wrap(built.control, b);
            for ((name, t), rec) in b.threads.iter().zip(built.threads) {
                let mut th = CRecorder::wrap(rec, t);
                th.is_thread = true;
                control
                    .threads
                    .push((name.clone(), Box::into_raw(Box::new(th))));
            }
            Box::new(control)
        };
        // SAFETY: checked non-NULL above.
        unsafe { out.write(Box::into_raw(h)) };
        Ok(LOOPTIME_OK)
    })
}

impl Drop for CRecorder {
    fn drop(&mut self) {
        for (_, t) in self.threads.drain(..) {
            // SAFETY: from `Box::into_raw` in `looptime_recorder_new`, freed
            // only here.
            drop(unsafe { Box::from_raw(t) });
        }
    }
}

impl CRecorder {
    /// The handle around `rec`, with the ids `b` handed out.
    fn wrap(rec: Recorder, b: &Builder) -> CRecorder {
        let phases = if b.phases.is_empty() {
            vec![rec.default_phase()]
        } else {
            b.phases.clone()
        };
        CRecorder {
            rec,
            stages: b.stages.clone().into(),
            phases: phases.into(),
            values: b.values.clone().into(),
            attrs: b.attrs.iter().map(|(_, v)| v.clone().into()).collect(),
            threads: Vec::new(),
            is_thread: false,
            finished: None,
            left_open: None,
        }
    }
}

/// The recorder of background thread `name`, declared with
/// `looptime_builder_thread`, written to `*out`. It belongs to `r`: it is
/// valid until `looptime_recorder_free(r)`, is never freed on its own, and
/// `r`'s finish writes it. Record on it from that thread only, and finish
/// `r` only after the thread has stopped recording (joined).
///
/// # Safety
/// `r` is NULL or a live recorder; `name` is NULL or a NUL-terminated
/// string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_recorder_thread(
    r: *mut CRecorder,
    name: *const c_char,
    out: *mut *mut CRecorder,
) -> i32 {
    guard("looptime_recorder_thread", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(r, "recorder") }?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "thread name") }?;
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        let Some(i) = h.threads.iter().position(|(n, _)| n == name) else {
            let known: Vec<&str> = h.threads.iter().map(|(n, _)| n.as_str()).collect();
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!(
                    "no background thread {name:?}; declared: {}",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        };
        // SAFETY: checked non-NULL above.
        unsafe { out.write(h.threads[i].1) };
        Ok(LOOPTIME_OK)
    })
}

/// Release a recorder (NULL is ignored) and remove its /dev/shm ring.
/// Finish first: what a recorder freed unfinished held is gone. (A process
/// that dies instead, by kill -9 or a crash, leaves the ring for
/// `looptime recover`.)
///
/// # Safety
/// `r` is NULL or a recorder from `looptime_recorder_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn looptime_recorder_free(r: *mut CRecorder) {
    // SAFETY: the caller's contract: NULL or live.
    if unsafe { r.as_ref() }.is_some_and(|h| h.is_thread) {
        set_last_error(
            "looptime_recorder_free: this is a background thread's recorder; it is freed with its control recorder",
        );
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { free_handle(r, "looptime_recorder_free") }
}

/// Mark the start of the wait before the next cycle.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_wait_begin(r: *mut CRecorder) -> i32 {
    guard("looptime_wait_begin", || {
        // SAFETY: the caller's contract.
        unsafe { live(r) }?.rec.begin_wait();
        Ok(LOOPTIME_OK)
    })
}

/// Mark the end of the wait (after the scheduler's sleep and spin).
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_wait_end(r: *mut CRecorder) -> i32 {
    guard("looptime_wait_end", || {
        // SAFETY: the caller's contract.
        unsafe { live(r) }?.rec.end_wait();
        Ok(LOOPTIME_OK)
    })
}

/// Begin a cycle in `phase`, scheduled for `target_ns` (host monotonic
/// nanoseconds, or `LOOPTIME_NO_TARGET`); `overdue` and `skipped` come from
/// the scheduler's tick. A cycle still open is ended first.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_cycle_begin(
    r: *mut CRecorder,
    phase: u32,
    target_ns: u64,
    overdue: bool,
    skipped: u32,
) -> i32 {
    guard("looptime_cycle_begin", || {
        // SAFETY: the caller's contract.
        let h = unsafe { live(r) }?;
        let p = *h
            .phases
            .get(phase as usize)
            .ok_or_else(|| unknown_id("phase", phase, h.phases.len()))?;
        let release = Release {
            target_ns: (target_ns != LOOPTIME_NO_TARGET).then_some(target_ns),
            overdue,
            skipped,
            ..Release::NONE
        };
        h.rec.begin_cycle(p, release);
        Ok(LOOPTIME_OK)
    })
}

/// Begin a cycle in `phase` for the wait `tick` describes (from
/// `looptime_scheduler_wait`): its release point, overrun, skips, and the
/// spin margin and spin time of the wait, which the evidence keeps with the
/// cycle. Otherwise as `looptime_cycle_begin`.
///
/// # Safety
/// `r` is NULL or a live recorder; `tick` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn looptime_cycle_begin_tick(
    r: *mut CRecorder,
    phase: u32,
    tick: *const Tick,
) -> i32 {
    guard("looptime_cycle_begin_tick", || {
        // SAFETY: the caller's contract.
        let h = unsafe { live(r) }?;
        // SAFETY: the caller's contract.
        let t = *unsafe { tick.as_ref() }.ok_or_else(|| fail(LOOPTIME_ERR_NULL, "tick is NULL"))?;
        let p = *h
            .phases
            .get(phase as usize)
            .ok_or_else(|| unknown_id("phase", phase, h.phases.len()))?;
        let release = Release {
            target_ns: Some(t.target_ns),
            overdue: t.overdue,
            skipped: t.skipped,
            spin_margin_ns: Some(t.spin_margin_ns),
            spin_ns: Some(t.spin_ns),
        };
        h.rec.begin_cycle(p, release);
        Ok(LOOPTIME_OK)
    })
}

/// End the open cycle (nothing happens without one). Spans still open are
/// closed now and marked `closed_by_cycle_end`.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_cycle_end(r: *mut CRecorder) -> i32 {
    guard("looptime_cycle_end", || {
        // SAFETY: the caller's contract.
        unsafe { live(r) }?.rec.end_cycle();
        Ok(LOOPTIME_OK)
    })
}

/// Open a span of `stage`; its id goes to `*span` for `looptime_span_end`.
/// A span that does not fit (slots, depth, or no open cycle) is counted,
/// not an error: `*span` is then `LOOPTIME_NO_SPAN`, as it is after every
/// error (an unknown stage, a finished recorder: `LOOPTIME_ERR_STATE`).
///
/// # Safety
/// `r` is NULL or a live recorder; `span` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_span_begin(r: *mut CRecorder, stage: u32, span: *mut u64) -> i32 {
    guard("looptime_span_begin", || {
        if span.is_null() {
            return Err(null_error("span pointer"));
        }
        // Every path that stores no span leaves LOOPTIME_NO_SPAN behind, so
        // that a caller never ends a stale id.
        // SAFETY: checked non-NULL above; writable by the caller's contract.
        unsafe { span.write(LOOPTIME_NO_SPAN) };
        // SAFETY: the caller's contract.
        let h = unsafe { live(r) }?;
        let s = *h
            .stages
            .get(stage as usize)
            .ok_or_else(|| unknown_id("stage", stage, h.stages.len()))?;
        let token = h.rec.begin_span(s);
        if token.is_recorded() {
            // SAFETY: as above.
            unsafe { span.write(token.to_bits()) };
        }
        Ok(LOOPTIME_OK)
    })
}

/// Close a span. An id of an earlier cycle, of a closed span or
/// `LOOPTIME_NO_SPAN` is ignored.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_span_end(r: *mut CRecorder, span: u64) -> i32 {
    guard("looptime_span_end", || {
        // SAFETY: the caller's contract.
        let h = unsafe { live(r) }?;
        h.rec.end_span(SpanToken::from_bits(span));
        Ok(LOOPTIME_OK)
    })
}

/// Set attribute `key` to its value `value` on an open span (ids from
/// `looptime_builder_attr_key` and `looptime_builder_attr_value`). A span
/// carries up to 4 keys; setting a key again replaces its value. The ids
/// are checked (`LOOPTIME_ERR_UNKNOWN_ID`); a span id of an earlier cycle,
/// of a closed span or `LOOPTIME_NO_SPAN` is ignored, as by
/// `looptime_span_end`. No string is compared and nothing is allocated.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_span_attr(
    r: *mut CRecorder,
    span: u64,
    key: u32,
    value: u32,
) -> i32 {
    guard("looptime_span_attr", || {
        // SAFETY: the caller's contract.
        let h = unsafe { live(r) }?;
        let values = h
            .attrs
            .get(key as usize)
            .ok_or_else(|| unknown_id("attribute key", key, h.attrs.len()))?;
        let v = *values
            .get(value as usize)
            .ok_or_else(|| unknown_value(key, value, values.len()))?;
        h.rec.set_span_attr(SpanToken::from_bits(span), v);
        Ok(LOOPTIME_OK)
    })
}

#[cold]
#[inline(never)]
fn unknown_value(key: u32, value: u32, registered: usize) -> Fail {
    fail(
        LOOPTIME_ERR_UNKNOWN_ID,
        format!("value id {value} of attribute key {key} was not registered ({registered} values)"),
    )
}

/// # Safety
/// `r` is NULL or a live recorder.
unsafe fn value_of<'a>(
    r: *mut CRecorder,
    value: u32,
) -> Result<(&'a mut CRecorder, ValueId), Fail> {
    // SAFETY: the caller's contract.
    let h = unsafe { live(r) }?;
    let v = *h
        .values
        .get(value as usize)
        .ok_or_else(|| unknown_id("value", value, h.values.len()))?;
    Ok((h, v))
}

/// Set an integer caller value for the open cycle.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_set_int(r: *mut CRecorder, value: u32, v: i64) -> i32 {
    guard("looptime_set_int", || {
        // SAFETY: the caller's contract.
        let (h, id) = unsafe { value_of(r, value) }?;
        if id.kind() != ValueKind::Int {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!("value id {value} is a float value; use looptime_set_float"),
            ));
        }
        h.rec.set_int(id, v);
        Ok(LOOPTIME_OK)
    })
}

/// Set a float caller value for the open cycle.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_set_float(r: *mut CRecorder, value: u32, v: f64) -> i32 {
    guard("looptime_set_float", || {
        // SAFETY: the caller's contract.
        let (h, id) = unsafe { value_of(r, value) }?;
        if id.kind() != ValueKind::Float {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!("value id {value} is an integer value; use looptime_set_int"),
            ));
        }
        h.rec.set_float(id, v);
        Ok(LOOPTIME_OK)
    })
}

/// What a recorder holds so far.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RecorderCounts {
    /// Cycles begun.
    pub total_cycles: u64,
    /// Cycles the ring still holds.
    pub retained_cycles: u64,
    /// Earlier cycles the ring overwrote.
    pub dropped_cycles: u64,
    /// Spans that did not fit their cycle.
    pub spans_dropped: u64,
    /// Spans opened outside any cycle.
    pub spans_outside_cycle: u64,
}

/// Write the recorder's counts to `*out`.
///
/// # Safety
/// `r` is NULL or a live recorder; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_recorder_counts(
    r: *const CRecorder,
    out: *mut RecorderCounts,
) -> i32 {
    guard("looptime_recorder_counts", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_ref(r, "recorder") }?;
        let c = RecorderCounts {
            total_cycles: h.rec.total_cycles(),
            retained_cycles: h.rec.retained_cycles(),
            dropped_cycles: h.rec.dropped_cycles(),
            spans_dropped: h.rec.spans_dropped(),
            spans_outside_cycle: h.rec.spans_outside_cycle(),
        };
        // SAFETY: the caller's contract.
        unsafe { put(out, c, "counts") }?;
        Ok(LOOPTIME_OK)
    })
}

/// Write `control_timing.jsonl` and `control_timing_summary.json` into
/// `dir` (atomically: temp file, fsync, rename), with status `complete` or
/// `aborted`. Returns `LOOPTIME_WARN_LEFT_OPEN` when spans or a cycle were
/// still open: the open cycle is ended first, its open spans closed at that
/// instant and marked `closed_by_cycle_end`, and the files are written.
/// A second finish of the same recorder is refused (`LOOPTIME_ERR_STATE`);
/// a finish that failed (`LOOPTIME_ERR_IO`) may be retried.
///
/// # Safety
/// `r` is NULL or a live recorder; `dir` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn looptime_recorder_finish(
    r: *mut CRecorder,
    dir: *const c_char,
    complete: bool,
) -> i32 {
    guard("looptime_recorder_finish", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(r, "recorder") }?;
        // SAFETY: the caller's contract.
        let dir = unsafe { text(dir, "directory") }?;
        if h.is_thread {
            return Err(fail(
                LOOPTIME_ERR_STATE,
                "this is a background thread's recorder: its control recorder's finish writes it",
            ));
        }
        if let Some(done) = &h.finished {
            return Err(fail(
                LOOPTIME_ERR_STATE,
                format!("this recorder already finished into {}; build a new recorder for the next episode", done.display()),
            ));
        }
        // What the first attempt found open stays known across a failed
        // finish, so a retry reports it too.
        if h.rec.in_cycle() {
            h.left_open = Some(h.rec.open_spans());
        }
        h.rec.end_cycle();
        let status = if complete {
            CaptureStatus::Complete
        } else {
            CaptureStatus::Aborted
        };
        // SAFETY: the threads' handles are live while `h` is (it frees
        // them), and by the contract their threads have stopped using them.
        let mut threads: Vec<&mut CRecorder> =
            h.threads.iter().map(|(_, t)| unsafe { &mut **t }).collect();
        for t in threads.iter_mut() {
            t.rec.end_cycle();
        }
        if threads.is_empty() {
            h.rec.finish(Path::new(dir), status)
        } else {
            let refs: Vec<&Recorder> = threads.iter().map(|t| &t.rec).collect();
            h.rec.finish_threads(Path::new(dir), status, &refs)
        }
        .map_err(capture_fail)?;
        for t in threads.iter_mut() {
            t.finished = Some(PathBuf::from(dir));
        }
        h.finished = Some(PathBuf::from(dir));
        if let Some(open) = h.left_open {
            set_last_error(&format!(
                "looptime_recorder_finish: the last cycle was still open with {open} open span(s); it was ended at finish \
                 and its open spans marked closed_by_cycle_end. The evidence is written to {dir}"
            ));
            return Ok(LOOPTIME_WARN_LEFT_OPEN);
        }
        Ok(LOOPTIME_OK)
    })
}

// --- scheduler ------------------------------------------------------------

/// Scheduler settings; start from `looptime_scheduler_config_default`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SchedulerSettings {
    /// Period between release points, in ns (> 0).
    pub period_ns: u64,
    /// Sleep ends this long before the deadline; the rest is spun. At most
    /// half the period and 2 ms.
    pub spin_margin_ns: u64,
    /// `LOOPTIME_POLICY_REBASE` or `LOOPTIME_POLICY_KEEP_PHASE`.
    pub policy: u32,
    /// Upper bound of `dt_measured_ns` (at least one period).
    pub max_dt_ns: u64,
    /// Adapt the margin to the OS sleep latency seen lately, between 50 µs
    /// and the ceiling (`spin_margin_ns` is then the first wait's margin).
    /// False by default.
    pub auto_margin: bool,
}

/// The defaults for `period_ns`: a fixed 200 µs spin margin (less for short
/// periods), rebase, and `dt` bounded at three periods.
#[no_mangle]
pub extern "C" fn looptime_scheduler_config_default(period_ns: u64) -> SchedulerSettings {
    // Integer and float arithmetic only: nothing here can panic.
    let c = SchedulerConfig::new(period_ns);
    SchedulerSettings {
        period_ns: c.period_ns,
        spin_margin_ns: c.spin_margin_ns,
        policy: LOOPTIME_POLICY_REBASE,
        max_dt_ns: c.max_dt_ns,
        auto_margin: c.auto_margin,
    }
}

/// The absolute-deadline scheduler on the host's monotonic clock.
#[derive(Debug)]
pub struct CScheduler {
    s: Scheduler<MonotonicClock>,
}

/// What one `looptime_scheduler_wait` did.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tick {
    /// Cycle index (0 for the first wait).
    pub cycle: u64,
    /// The release point this cycle runs for (host monotonic ns).
    pub target_ns: u64,
    /// When the wait began.
    pub wait_start_ns: u64,
    /// When the absolute sleep returned.
    pub sleep_return_ns: u64,
    /// When the wait ended; the cycle starts here.
    pub wake_ns: u64,
    /// Time spent spinning.
    pub spin_ns: u64,
    /// Measured time since the previous cycle start, bounded by `max_dt_ns`:
    /// the `dt` to hand the controller.
    pub dt_measured_ns: u64,
    /// Whole release points skipped (keep-phase only).
    pub skipped: u32,
    /// The release point had passed when the wait began (an overrun).
    pub overdue: bool,
    /// `dt_measured_ns` was clamped to `max_dt_ns`.
    pub dt_clamped: bool,
    /// The spin margin this wait used (the adaptive margin's value at this
    /// wait, with `auto_margin`).
    pub spin_margin_ns: u64,
}

/// The C view of the runtime's one `Tick`: the same fields, in the order
/// (and so the layout) that `looptime.h` fixes.
impl From<looptime_runtime::scheduler::Tick> for Tick {
    fn from(t: looptime_runtime::scheduler::Tick) -> Tick {
        let looptime_runtime::scheduler::Tick {
            cycle,
            target_ns,
            wait_start_ns,
            sleep_return_ns,
            wake_ns,
            spin_ns,
            spin_margin_ns,
            overdue,
            skipped,
            dt_measured_ns,
            dt_clamped,
        } = t;
        Tick {
            cycle,
            target_ns,
            wait_start_ns,
            sleep_return_ns,
            wake_ns,
            spin_ns,
            dt_measured_ns,
            skipped,
            overdue,
            dt_clamped,
            spin_margin_ns,
        }
    }
}

/// A scheduler with `settings` (NULL: the defaults for 100 Hz), written to
/// `*out`. The first release point is one period after the first wait.
///
/// # Safety
/// `settings` is NULL or readable; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_new(
    settings: *const SchedulerSettings,
    out: *mut *mut CScheduler,
) -> i32 {
    guard("looptime_scheduler_new", || {
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        // SAFETY: the caller's contract.
        let s = unsafe { settings.as_ref() }
            .copied()
            .unwrap_or_else(|| looptime_scheduler_config_default(10_000_000));
        let policy = match s.policy {
            LOOPTIME_POLICY_REBASE => OverrunPolicy::Rebase,
            LOOPTIME_POLICY_KEEP_PHASE => OverrunPolicy::KeepPhase,
            other => {
                return Err(fail(
                    LOOPTIME_ERR_INVALID,
                    format!("policy {other} is neither LOOPTIME_POLICY_REBASE nor LOOPTIME_POLICY_KEEP_PHASE"),
                ))
            }
        };
        let cfg = SchedulerConfig {
            period_ns: s.period_ns,
            spin_margin_ns: s.spin_margin_ns,
            auto_margin: s.auto_margin,
            policy,
            max_dt_ns: s.max_dt_ns,
        };
        let s = Scheduler::new(MonotonicClock, cfg)
            .map_err(|e| fail(LOOPTIME_ERR_INVALID, e.to_string()))?;
        // SAFETY: checked non-NULL above.
        unsafe { out.write(Box::into_raw(Box::new(CScheduler { s }))) };
        Ok(LOOPTIME_OK)
    })
}

/// Release a scheduler (NULL is ignored).
///
/// # Safety
/// `s` is NULL or a scheduler from `looptime_scheduler_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_free(s: *mut CScheduler) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(s, "looptime_scheduler_free") }
}

/// Wait for the next release point (sleep to `deadline − margin`, then
/// spin) and describe it in `*tick`.
///
/// # Safety
/// `s` is NULL or a live scheduler; `tick` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_wait(s: *mut CScheduler, tick: *mut Tick) -> i32 {
    guard("looptime_scheduler_wait", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(s, "scheduler") }?;
        if tick.is_null() {
            return Err(null_error("tick pointer"));
        }
        // SAFETY: checked non-NULL above.
        unsafe { tick.write(Tick::from(h.s.wait())) };
        Ok(LOOPTIME_OK)
    })
}

/// Re-anchor after a pause without counting the gap as an overrun: the
/// next release point is one period from now.
///
/// # Safety
/// `s` is NULL or a live scheduler.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_rephase(s: *mut CScheduler) -> i32 {
    guard("looptime_scheduler_rephase", || {
        // SAFETY: the caller's contract.
        unsafe { handle(s, "scheduler") }?.s.rephase();
        Ok(LOOPTIME_OK)
    })
}

/// Overruns and skipped release points so far.
///
/// # Safety
/// `s` is NULL or a live scheduler; `overruns` and `skipped` are NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_scheduler_counts(
    s: *const CScheduler,
    overruns: *mut u64,
    skipped: *mut u64,
) -> i32 {
    guard("looptime_scheduler_counts", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_ref(s, "scheduler") }?;
        // SAFETY: the caller's contract.
        unsafe {
            put(overruns, h.s.overruns(), "overruns")?;
            put(skipped, h.s.skipped(), "skipped")?;
        }
        Ok(LOOPTIME_OK)
    })
}

// --- episode --------------------------------------------------------------

/// What a program declares about its episode.
#[repr(C)]
#[derive(Debug)]
pub struct ProgramInfo {
    /// The program's path (typically `argv[0]`).
    pub program: *const c_char,
    /// Source files whose SHA-256 the manifest records (may be NULL when
    /// `n_sources` is 0).
    pub sources: *const *const c_char,
    /// Entries in `sources`.
    pub n_sources: usize,
    /// Whether the recorder runs (`--control-timing`).
    pub control_timing: bool,
    /// The recorder's cycle capacity.
    pub timing_max_cycles: u64,
    /// The scheduler the loop runs (NULL: the defaults for 100 Hz).
    pub scheduler: *const SchedulerSettings,
    /// Setting names recorded under the manifest's `config.program` (may be
    /// NULL when `n_settings` is 0).
    pub setting_keys: *const *const c_char,
    /// Their values, as text.
    pub setting_values: *const *const c_char,
    /// Entries in `setting_keys` and `setting_values`.
    pub n_settings: usize,
}

/// A program's episode directory (`<runs>/session-<UTC>/rollout-000`).
#[derive(Debug)]
pub struct CEpisode {
    ep: HostEpisode,
    dir: CString,
    realtime: Option<RealtimeObtained>,
}

/// # Safety
/// `list` is NULL (only with `n == 0`) or holds `n` strings.
unsafe fn strings<'a>(
    list: *const *const c_char,
    n: usize,
    what: &str,
) -> Result<Vec<&'a str>, Fail> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() {
        return Err(fail(
            LOOPTIME_ERR_NULL,
            format!("{what} is NULL with a count of {n}"),
        ));
    }
    (0..n)
        // SAFETY: `list` holds `n` pointers, each NULL or a string.
        .map(|i| unsafe { text(*list.add(i), &format!("{what}[{i}]")) })
        .collect()
}

/// Create the episode's directories under `runs_dir`, write `session.json`
/// and a `running` manifest, and point `<runs_dir>/latest` at the rollout.
/// The handle goes to `*out`; `looptime_episode_dir` gives the directory to
/// finish the recorder into.
///
/// # Safety
/// `runs_dir` is NULL or a NUL-terminated string; `info` is NULL or a
/// readable `looptime_program` whose pointers obey their comments; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_episode_create(
    runs_dir: *const c_char,
    info: *const ProgramInfo,
    out: *mut *mut CEpisode,
) -> i32 {
    guard("looptime_episode_create", || {
        // SAFETY: the caller's contract.
        let runs = unsafe { text(runs_dir, "runs directory") }?;
        // SAFETY: the caller's contract.
        let info = unsafe { handle_ref(info, "program info") }?;
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        // SAFETY: the caller's contract.
        let (program, sources, keys, values) = unsafe {
            (
                text(info.program, "program")?,
                strings(info.sources, info.n_sources, "sources")?,
                strings(info.setting_keys, info.n_settings, "setting_keys")?,
                strings(info.setting_values, info.n_settings, "setting_values")?,
            )
        };
        // SAFETY: the caller's contract.
        let sched = unsafe { info.scheduler.as_ref() }
            .copied()
            .unwrap_or_else(|| looptime_scheduler_config_default(10_000_000));
        let facts = ProgramFacts {
            producer: format!("looptime-c {}", env!("CARGO_PKG_VERSION")),
            program: program.to_string(),
            sources: sources.iter().map(PathBuf::from).collect(),
            control_timing: info.control_timing,
            timing_max_cycles: info.timing_max_cycles,
            nominal_period_ns: sched.period_ns,
            spin_margin_ns: sched.spin_margin_ns,
            spin_margin_auto: sched.auto_margin,
            overrun_policy: if sched.policy == LOOPTIME_POLICY_KEEP_PHASE {
                "keep-phase"
            } else {
                "rebase"
            },
            settings: keys
                .iter()
                .zip(&values)
                .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
                .collect(),
        };
        let (ep, notes) = HostEpisode::create(Path::new(runs), facts)
            .map_err(|e| fail(LOOPTIME_ERR_IO, looptime_capture::error_chain(&e)))?;
        for n in notes {
            eprintln!("{n}");
        }
        let dir = CString::new(ep.dir().as_os_str().as_encoded_bytes()).map_err(|_| {
            fail(
                LOOPTIME_ERR_INVALID,
                "the runs directory contains a NUL byte",
            )
        })?;
        // SAFETY: checked non-NULL above.
        unsafe {
            out.write(Box::into_raw(Box::new(CEpisode {
                ep,
                dir,
                realtime: None,
            })))
        };
        Ok(LOOPTIME_OK)
    })
}

/// The rollout directory (valid while the episode handle lives), or NULL
/// for a NULL handle.
///
/// # Safety
/// `e` is NULL or a live episode.
#[no_mangle]
pub unsafe extern "C" fn looptime_episode_dir(e: *const CEpisode) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { e.as_ref() } {
        Some(h) => h.dir.as_ptr(),
        None => {
            set_last_error("looptime_episode_dir: the episode is NULL");
            std::ptr::null()
        }
    }
}

/// Prepare the calling thread as a control thread: ask for 1 ns timer slack
/// (so absolute sleeps wake on time), and write the slack obtained to
/// `*timer_slack_ns` when it is not NULL. With an episode, what was obtained
/// goes into its manifest. Returns `LOOPTIME_WARN_DEGRADED`, with a message,
/// when the kernel refused; the loop still runs, with sleeps that may wake
/// up to 50 µs late.
///
/// # Safety
/// `e` is NULL or a live episode; `timer_slack_ns` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_control_thread_setup(
    e: *mut CEpisode,
    timer_slack_ns: *mut u64,
) -> i32 {
    guard("looptime_control_thread_setup", || {
        let obtained = setup_control_thread(&RealtimeRequest::default());
        if !timer_slack_ns.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { timer_slack_ns.write(obtained.timer_slack_ns.unwrap_or(0)) };
        }
        let warning = obtained.warnings.join("; ");
        // SAFETY: the caller's contract.
        if let Some(h) = unsafe { e.as_mut() } {
            h.realtime = Some(obtained);
        }
        if warning.is_empty() {
            Ok(LOOPTIME_OK)
        } else {
            set_last_error(&format!("looptime_control_thread_setup: {warning}"));
            Ok(LOOPTIME_WARN_DEGRADED)
        }
    })
}

/// Rewrite the manifest with how the loop ended and mark the rollout and the
/// session in `session.json`. `rec` (may be NULL) supplies the ring file and
/// whether the evidence was written; `sched` (may be NULL) the cycle,
/// overrun and skip counts (else the recorder's cycle count is used).
/// Call it after `looptime_recorder_finish`. A second call is refused.
///
/// # Safety
/// Each handle is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn looptime_episode_finish(
    e: *mut CEpisode,
    rec: *const CRecorder,
    sched: *const CScheduler,
    complete: bool,
    planned_cycles: u64,
) -> i32 {
    guard("looptime_episode_finish", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(e, "episode") }?;
        if h.ep.is_finished() {
            return Err(fail(
                LOOPTIME_ERR_STATE,
                format!("the episode {} is already finished", h.ep.dir().display()),
            ));
        }
        // SAFETY: the caller's contract.
        let (rec, sched) = unsafe { (rec.as_ref(), sched.as_ref()) };
        let mut end = EpisodeEnd {
            complete,
            planned_cycles,
            realtime: h.realtime.clone(),
            ..EpisodeEnd::default()
        };
        if let Some(r) = rec {
            end.recorder(&r.rec, r.finished.as_deref(), h.ep.dir());
        }
        if let Some(s) = sched {
            end.scheduler(&s.s);
        }
        h.ep.finish(&end)
            .map_err(|e| fail(LOOPTIME_ERR_IO, looptime_capture::error_chain(&e)))?;
        Ok(LOOPTIME_OK)
    })
}

/// Release an episode handle (NULL is ignored). The files stay.
///
/// # Safety
/// `e` is NULL or an episode from `looptime_episode_create`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn looptime_episode_free(e: *mut CEpisode) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(e, "looptime_episode_free") }
}

// --- benchmark baseline ---------------------------------------------------

/// Run `n` spans of `stage` from Rust, in the open cycle, and write the
/// elapsed host-monotonic nanoseconds to `*elapsed_ns`. This is the Rust
/// span that `bench/c_span` compares a span through this ABI with, on the
/// same recorder in the same process; it has no other use.
///
/// # Safety
/// `r` is NULL or a live recorder; `elapsed_ns` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_bench_rust_spans(
    r: *mut CRecorder,
    stage: u32,
    n: u64,
    elapsed_ns: *mut u64,
) -> i32 {
    guard("looptime_bench_rust_spans", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(r, "recorder") }?;
        let s = *h
            .stages
            .get(stage as usize)
            .ok_or_else(|| unknown_id("stage", stage, h.stages.len()))?;
        let t0 = looptime_capture::clock::monotonic_ns();
        for _ in 0..n {
            let _span = std::hint::black_box(h.rec.span(s));
        }
        let t1 = looptime_capture::clock::monotonic_ns();
        // SAFETY: the caller's contract.
        unsafe { put(elapsed_ns, t1 - t0, "elapsed_ns") }?;
        Ok(LOOPTIME_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        // SAFETY: looptime_last_error returns a NUL-terminated string.
        unsafe { CStr::from_ptr(looptime_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_a_code_and_a_message_not_an_unwind() {
        let code = guard("looptime_test", || panic!("boom {}", 7));
        assert_eq!(code, LOOPTIME_ERR_PANIC);
        let msg = last();
        assert!(
            msg.contains("looptime_test") && msg.contains("boom 7"),
            "{msg}"
        );
        let code = guard("looptime_test", || std::panic::panic_any(42u8));
        assert_eq!(code, LOOPTIME_ERR_PANIC);
        assert!(last().contains("unknown panic"));
    }

    #[test]
    fn errors_and_warnings_keep_their_codes() {
        assert_eq!(
            guard("t", || Err(fail(LOOPTIME_ERR_STATE, "twice"))),
            LOOPTIME_ERR_STATE
        );
        assert_eq!(last(), "t: twice");
        assert_eq!(
            guard("t", || Ok(LOOPTIME_WARN_LEFT_OPEN)),
            LOOPTIME_WARN_LEFT_OPEN
        );
        // A message with a NUL byte is still a C string.
        assert_eq!(
            guard("t", || Err(fail(LOOPTIME_ERR_INVALID, "a\0b"))),
            LOOPTIME_ERR_INVALID
        );
        assert_eq!(last(), "t: a b");
    }

    #[test]
    fn the_c_tick_is_the_runtime_tick_field_for_field() {
        // Distinct values in every field, so a swapped pair shows.
        let t = looptime_runtime::scheduler::Tick {
            cycle: 1,
            target_ns: 2,
            wait_start_ns: 3,
            sleep_return_ns: 4,
            wake_ns: 5,
            spin_ns: 6,
            overdue: true,
            skipped: 7,
            dt_measured_ns: 8,
            dt_clamped: false,
            spin_margin_ns: 9,
        };
        let c = Tick::from(t);
        assert_eq!(
            (c.cycle, c.target_ns, c.wait_start_ns, c.sleep_return_ns),
            (1, 2, 3, 4)
        );
        assert_eq!((c.wake_ns, c.spin_ns, c.dt_measured_ns), (5, 6, 8));
        assert_eq!((c.skipped, c.overdue, c.dt_clamped), (7, true, false));
        assert_eq!(c.spin_margin_ns, 9);
        // The ABI layout looptime.h fixes: seven u64, a u32, two bools,
        // padded to 8 bytes, then the margin (added last, so the fields
        // before it keep their offsets).
        assert_eq!(std::mem::size_of::<Tick>(), 7 * 8 + 4 + 2 + 2 + 8);
        assert_eq!(std::mem::offset_of!(Tick, skipped), 56);
        assert_eq!(std::mem::offset_of!(Tick, overdue), 60);
        assert_eq!(std::mem::offset_of!(Tick, dt_clamped), 61);
        assert_eq!(std::mem::offset_of!(Tick, spin_margin_ns), 64);
    }
}
