//! The ABI's constants: result codes, sentinels and the choices a setter
//! takes, and the library's version. The bottom rung: it imports nothing
//! of this crate.

use std::ffi::c_char;

/// Success.
pub const LOOPTIME_OK: i32 = 0;
/// Warning from `looptime_recorder_finish`: spans or a cycle were still
/// open. They were closed at finish (marked `closed_by_cycle_end`) and the
/// evidence was written.
pub const LOOPTIME_WARN_LEFT_OPEN: i32 = 1;
/// Warning from `looptime_control_thread_setup`: the kernel refused a
/// setting (see `looptime_last_error`); the loop runs without it.
pub const LOOPTIME_WARN_DEGRADED: i32 = 2;
/// Warning from `looptime_recv_stamped`: no datagram within the socket's
/// timeout (or none waiting on a non-blocking socket); nothing received.
pub const LOOPTIME_WARN_TIMEOUT: i32 = 3;
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
/// A compute budget or deadline tolerance that is not declared
/// (`looptime_scheduler_config`).
pub const LOOPTIME_UNDECLARED: u64 = u64::MAX;
/// `seq` of an input that carries no counter (`looptime_cycle_begin_input`).
pub const LOOPTIME_NO_SEQ: u64 = u64::MAX;
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
/// Clock of the release points: the host's `CLOCK_MONOTONIC` (a paced
/// scheduler, `rtf > 0`).
pub const LOOPTIME_CLOCK_HOST_MONOTONIC: u32 = 0;
/// Clock of the release points: the simulation clock (an uncapped
/// scheduler, `rtf = 0`).
pub const LOOPTIME_CLOCK_SIMULATION: u32 = 1;
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

/// The library version, `"0.1.0"`: a static string.
#[no_mangle]
pub extern "C" fn looptime_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
