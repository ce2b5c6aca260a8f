//! The builder: names, capacities and settings registered before the
//! loop, from which `looptime_recorder_new` allocates a recorder.

use std::ffi::c_char;

use looptime_capture::{
    AttrKey, AttrValue, CpuTimeMode, PhaseId, RecorderBuilder, RingStorage, StageId, ValueId,
    ValueKind,
};

use crate::consts::*;
use crate::error::{capture_fail, fail, guard, null_error, unknown_id, Fail};
use crate::ptr::{free_handle, handle, handle_ref, put, text};

/// Registers names and capacities before the loop; then
/// `looptime_recorder_new` allocates the recorder from it.
#[derive(Clone, Debug)]
pub struct Builder {
    pub(crate) b: RecorderBuilder,
    pub(crate) stages: Vec<StageId>,
    pub(crate) phases: Vec<PhaseId>,
    pub(crate) values: Vec<ValueId>,
    /// Data-age sources, in registration order.
    pub(crate) sources: Vec<looptime_capture::SourceId>,
    /// Per attribute key (in registration order): its key and its values.
    pub(crate) attrs: Vec<(AttrKey, Vec<AttrValue>)>,
    /// Background threads declared with `looptime_builder_thread`: each a
    /// snapshot of its builder at that call.
    pub(crate) threads: Vec<(String, Builder)>,
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
            sources: Vec::new(),
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

/// A budget or tolerance as the builder takes it: 0 to 10 s, or
/// `LOOPTIME_UNDECLARED` (left undeclared, so the scheduler's default can
/// be passed on as it is); any other value is refused by name.
fn declared(name: &str, ns: u64) -> Result<(), Fail> {
    if ns == looptime_capture::UNDECLARED_NS || ns <= looptime_capture::MAX_DECLARED_NS {
        return Ok(());
    }
    Err(fail(
        LOOPTIME_ERR_INVALID,
        format!("{name} is {ns} ns; give 0 to 10 s (10000000000 ns), or LOOPTIME_UNDECLARED to leave it undeclared"),
    ))
}

/// Declare the compute budget of each cycle's work (ns), written to the
/// header: work beyond it is a budget overrun, for statistics only.
/// 0 to 10 s; `LOOPTIME_UNDECLARED` leaves it undeclared.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_compute_budget_ns(b: *mut Builder, ns: u64) -> i32 {
    guard("looptime_builder_compute_budget_ns", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        declared("compute_budget_ns", ns)?;
        b.b.compute_budget_ns(ns);
        Ok(LOOPTIME_OK)
    })
}

/// Declare the deadline tolerance (ns), written to the header: a start
/// later than its release plus this is a late start, a finish later than
/// the next release plus this a completion miss.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_deadline_tolerance_ns(b: *mut Builder, ns: u64) -> i32 {
    guard("looptime_builder_deadline_tolerance_ns", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        declared("deadline_tolerance_ns", ns)?;
        b.b.deadline_tolerance_ns(ns);
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

/// The clock of the release points the recorder is given
/// (`LOOPTIME_CLOCK_HOST_MONOTONIC`, the default, or
/// `LOOPTIME_CLOCK_SIMULATION` for a scheduler with `rtf = 0`; ask the
/// scheduler with `looptime_scheduler_clock`).
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_target_clock(b: *mut Builder, clock: u32) -> i32 {
    guard("looptime_builder_target_clock", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        b.b.target_clock(crate::scheduler::domain_of(clock)?);
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

/// Declare stage `id` (from `looptime_builder_stage`) as the one whose
/// spans send the loop's commands: written to the header's
/// `command_stage`, so the analyzer times command Hz and input-paced
/// answers by it without `--command-stage`. `LOOPTIME_ERR_UNKNOWN_ID` for
/// an id this builder did not give.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_command_stage(b: *mut Builder, id: u32) -> i32 {
    guard("looptime_builder_command_stage", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        let Some(&s) = b.stages.get(id as usize) else {
            return Err(fail(
                LOOPTIME_ERR_UNKNOWN_ID,
                format!("stage id {id} was not registered on this builder"),
            ));
        };
        b.b.command_stage(s);
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

/// Declare a data source whose samples cycles use (data age): its id (0,
/// 1, ... in registration order) is written to `*id`. `max_age_ns` is the
/// age beyond which a use counts as stale (0: no limit); `clock` names the
/// clock of its stamps: NULL or `"host_monotonic"` for this host's
/// `CLOCK_MONOTONIC` (ages are computed), another name for another clock
/// (a device's, another host's: the analyzer computes no age from it).
///
/// # Safety
/// As `looptime_builder_stage`; `clock` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_source(
    b: *mut Builder,
    name: *const c_char,
    max_age_ns: u64,
    clock: *const c_char,
    id: *mut u32,
) -> i32 {
    guard("looptime_builder_source", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(b, "builder") }?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "source name") }?;
        let clock = if clock.is_null() {
            looptime_capture::SourceClock::HostMonotonic
        } else {
            // SAFETY: the caller's contract.
            match unsafe { text(clock, "clock") }? {
                "host_monotonic" => looptime_capture::SourceClock::HostMonotonic,
                other => looptime_capture::SourceClock::Named(other.to_string()),
            }
        };
        if id.is_null() {
            return Err(null_error("id pointer"));
        }
        let spec = looptime_capture::SourceSpec {
            max_age_ns: (max_age_ns > 0).then_some(max_age_ns),
            clock,
        };
        let s = b.b.source(name, spec).map_err(capture_fail)?;
        // SAFETY: the caller's contract.
        unsafe { put(id, b.sources.len() as u32, "id") }?;
        b.sources.push(s);
        Ok(LOOPTIME_OK)
    })
}

/// Sample slots per cycle (data age; default 8, 1 to 256). Taken only
/// when a source is declared.
///
/// # Safety
/// `b` is NULL or a live builder.
#[no_mangle]
pub unsafe extern "C" fn looptime_builder_max_samples_per_cycle(
    b: *mut Builder,
    samples: u32,
) -> i32 {
    guard("looptime_builder_max_samples_per_cycle", || {
        if samples == 0 || samples as usize > looptime_capture::MAX_SAMPLES_CEILING {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!("max_samples_per_cycle must be 1 to 256, not {samples}"),
            ));
        }
        // SAFETY: the caller's contract.
        unsafe { handle(b, "builder") }?
            .b
            .max_samples_per_cycle(samples as usize);
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
