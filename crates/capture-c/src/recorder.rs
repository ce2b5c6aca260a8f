//! The recorder's handle: made from a builder (with its background
//! threads' recorders), looked up, counted, finished and freed. Nothing
//! here is on the recording path ([`crate::record`] is).

use std::ffi::c_char;
use std::path::{Path, PathBuf};

use looptime_capture::{AttrValue, CaptureStatus, PhaseId, Recorder, Registry, StageId, ValueId};

use crate::builder::Builder;
use crate::consts::*;
use crate::error::{capture_fail, fail, guard, set_last_error, Fail};
use crate::ptr::{free_handle, handle, handle_ref, put, text};

/// The preallocated recorder of one thread.
#[derive(Debug)]
pub struct CRecorder {
    pub(crate) rec: Recorder,
    pub(crate) stages: Box<[StageId]>,
    pub(crate) phases: Box<[PhaseId]>,
    pub(crate) values: Box<[ValueId]>,
    /// Data-age sources (ids as the builder gave them).
    pub(crate) sources: Box<[looptime_capture::SourceId]>,
    /// Per attribute key, its values (ids as the builder gave them).
    pub(crate) attrs: Box<[Box<[AttrValue]>]>,
    /// Background threads' recorders, owned here (from `Box::into_raw`,
    /// freed by this one's `Drop`): the handles `looptime_recorder_thread`
    /// gives out live as long as this one. Raw pointers, so that borrowing
    /// this handle never claims the threads' handles, which their own
    /// threads use.
    pub(crate) threads: Vec<(String, *mut CRecorder)>,
    /// True for a background thread's recorder: its control recorder owns
    /// it, frees it and finishes it.
    pub(crate) is_thread: bool,
    pub(crate) finished: Option<PathBuf>,
    /// Open spans of a cycle that a failed finish ended: a retried finish
    /// still returns `LOOPTIME_WARN_LEFT_OPEN`.
    pub(crate) left_open: Option<usize>,
}

/// A recorder that has not finished: recording into a finished one is
/// `LOOPTIME_ERR_STATE`, never a silent no-op.
///
/// # Safety
/// `r` is NULL or points to a live recorder.
#[inline]
pub(crate) unsafe fn live<'a>(r: *mut CRecorder) -> Result<&'a mut CRecorder, Fail> {
    // SAFETY: the caller's contract.
    let h = unsafe { handle(r, "recorder") }?;
    match &h.finished {
        None => Ok(h),
        Some(dir) => Err(finished_error(dir)),
    }
}

#[cold]
#[inline(never)]
pub(crate) fn finished_error(dir: &Path) -> Fail {
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
            sources: b.sources.clone().into(),
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

abi_layout!(RecorderCounts, size 40,
    total_cycles @ 0, retained_cycles @ 8, dropped_cycles @ 16, spans_dropped @ 24,
    spans_outside_cycle @ 32);

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
