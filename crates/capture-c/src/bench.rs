//! The span benchmark's baseline: spans recorded from Rust through the
//! same recorder, so that bench/c_span.sh sets the C call's cost beside
//! the Rust one in one process.

use crate::consts::*;
use crate::error::{guard, unknown_id};
use crate::ptr::{handle, put};
use crate::recorder::CRecorder;

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
