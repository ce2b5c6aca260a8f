//! The only system interaction of the recorder: clock reads, and the
//! thread id once per recorder.
//!
//! This is the one module of the crate allowed to use `unsafe`.

#![allow(unsafe_code)]

/// Reads `clock_id` with `clock_gettime` and returns nanoseconds.
///
/// Returns 0 if the kernel refuses the clock (it never does for the clocks
/// used here on Linux); the recorder never panics on the control path.
#[inline]
fn read(clock_id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call;
    // clock_gettime writes only into it.
    let rc = unsafe { libc::clock_gettime(clock_id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// CPU time consumed by the calling thread, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`, a system call on Linux).
#[inline]
pub fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `CLOCK_MONOTONIC` in nanoseconds (served by the vDSO, no system call).
#[inline]
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` (wall-clock time since the Unix epoch) in nanoseconds.
/// Read only at build and at finish, never in the loop.
#[inline]
pub fn realtime_ns() -> u64 {
    read(libc::CLOCK_REALTIME)
}

/// The calling thread's OS id (`gettid`).
pub fn gettid() -> u64 {
    // SAFETY: gettid has no arguments and cannot fail.
    (unsafe { libc::gettid() }) as u64
}
