//! The recording path: the calls a control loop makes every cycle
//! (`looptime_wait_*`, `looptime_cycle_*`, `looptime_span_*`,
//! `looptime_set_*`).
//!
//! **The rule this module keeps, and the only module it covers:** after
//! the recorder is built, these calls do not allocate, lock, format or do
//! I/O, except to write the thread's error message when they are called
//! wrongly (a cold, out-of-line path). The counting-malloc test
//! (`tests/c/no_alloc.c`) runs them over 100,000 cycles. The scheduler's
//! wait, the other call of every cycle, lives with the scheduler.

use looptime_capture::{Release, SpanToken, ValueId, ValueKind};

use crate::consts::*;
use crate::error::{fail, guard, null_error, unknown_id, Fail};
use crate::recorder::{live, CRecorder};
use crate::scheduler::Tick;

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
        let release = if target_ns == LOOPTIME_NO_TARGET {
            Release::NONE
        } else {
            Release::at(target_ns)
        }
        .with_overdue(overdue)
        .with_skipped(skipped);
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
        let release = Release::at(t.target_ns)
            .with_overdue(t.overdue)
            .with_skipped(t.skipped)
            .with_spin(Some(t.spin_margin_ns), Some(t.spin_ns));
        h.rec.begin_cycle(p, release);
        Ok(LOOPTIME_OK)
    })
}

/// Begin a cycle in `phase` released by an input (docs/input-paced.md):
/// the loop blocked in its own receive, which `looptime_wait_begin` and
/// `looptime_wait_end` may wrap, and the input arrived at `arrival_ns`
/// (`CLOCK_MONOTONIC` ns, read right after the receive returned) carrying
/// the counter `seq` (`LOOPTIME_NO_SEQ` when it has none). The cycle has no
/// target of its own. Otherwise as `looptime_cycle_begin`.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_cycle_begin_input(
    r: *mut CRecorder,
    phase: u32,
    arrival_ns: u64,
    seq: u64,
) -> i32 {
    guard("looptime_cycle_begin_input", || {
        // SAFETY: the caller's contract.
        let h = unsafe { live(r) }?;
        let p = *h
            .phases
            .get(phase as usize)
            .ok_or_else(|| unknown_id("phase", phase, h.phases.len()))?;
        let seq = (seq != LOOPTIME_NO_SEQ).then_some(seq);
        h.rec.begin_cycle(p, Release::input(arrival_ns, seq));
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
pub(crate) fn unknown_value(key: u32, value: u32, registered: usize) -> Fail {
    fail(
        LOOPTIME_ERR_UNKNOWN_ID,
        format!("value id {value} of attribute key {key} was not registered ({registered} values)"),
    )
}

/// # Safety
/// `r` is NULL or a live recorder.
pub(crate) unsafe fn value_of<'a>(
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

/// Record that the open cycle used sample `seq` of `source` (an id from
/// `looptime_builder_source`), stamped `stamp_ns` on the source's clock
/// (for a host-monotonic source, a `CLOCK_MONOTONIC` reading): its capture
/// time, or for a polled state its request time. The moment of use is read
/// now (one TSC read). Outside a cycle the sample is counted, not stored;
/// beyond the cycle's slots it is counted in the cycle's `samples_dropped`.
/// `LOOPTIME_ERR_UNKNOWN_ID` for an unregistered source.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_sample(
    r: *mut CRecorder,
    source: u32,
    seq: u64,
    stamp_ns: u64,
) -> i32 {
    guard("looptime_sample", || {
        // SAFETY: the caller's contract.
        let (h, id) = unsafe { source_of(r, source) }?;
        h.rec.sample(id, seq, stamp_ns);
        Ok(LOOPTIME_OK)
    })
}

/// Record that this thread published sample `seq` of `source`, stamped
/// `stamp_ns` (a producer thread's recorder: a camera reader), as
/// `looptime_sample` otherwise.
///
/// # Safety
/// `r` is NULL or a live recorder.
#[no_mangle]
pub unsafe extern "C" fn looptime_produced(
    r: *mut CRecorder,
    source: u32,
    seq: u64,
    stamp_ns: u64,
) -> i32 {
    guard("looptime_produced", || {
        // SAFETY: the caller's contract.
        let (h, id) = unsafe { source_of(r, source) }?;
        h.rec.produced(id, seq, stamp_ns);
        Ok(LOOPTIME_OK)
    })
}

/// # Safety
/// `r` is NULL or a live recorder.
unsafe fn source_of<'a>(
    r: *mut CRecorder,
    source: u32,
) -> Result<(&'a mut CRecorder, looptime_capture::SourceId), Fail> {
    // SAFETY: the caller's contract.
    let h = unsafe { live(r) }?;
    let s = *h
        .sources
        .get(source as usize)
        .ok_or_else(|| unknown_id("source", source, h.sources.len()))?;
    Ok((h, s))
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
