//! System calls of the runtime: absolute sleep, timer slack, scheduling
//! policy, CPU affinity, memory locking. The only module allowed `unsafe`.

#![allow(unsafe_code)]

use std::io;

/// Sleep until `deadline_ns` on `CLOCK_MONOTONIC` with `TIMER_ABSTIME`,
/// resuming after signal interruptions.
pub fn sleep_until_monotonic_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remaining
        // time argument is unused and may be null.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Set this thread's timer slack; returns the slack the kernel reports
/// afterwards, in nanoseconds.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<u64> {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long by value.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    timer_slack_ns()
}

/// This thread's current timer slack in nanoseconds.
pub fn timer_slack_ns() -> io::Result<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer and returns the slack.
    let rc = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as u64)
}

/// Ask for `SCHED_FIFO` at `priority` for the calling thread.
pub fn set_fifo_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pthread_self() is the calling thread; `param` is valid for
    // the call.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// The calling thread's scheduling policy name and priority.
pub fn current_policy() -> (String, i32) {
    let mut policy: libc::c_int = 0;
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: both out-pointers are valid for writes.
    let rc = unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) };
    if rc != 0 {
        return ("unknown".into(), 0);
    }
    let name = match policy {
        libc::SCHED_OTHER => "SCHED_OTHER",
        libc::SCHED_FIFO => "SCHED_FIFO",
        libc::SCHED_RR => "SCHED_RR",
        libc::SCHED_BATCH => "SCHED_BATCH",
        libc::SCHED_IDLE => "SCHED_IDLE",
        _ => "unknown",
    };
    (name.into(), param.sched_priority)
}

/// Pin the calling thread to `cpu`.
pub fn set_affinity(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cpu index too large",
        ));
    }
    // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Lock current and future pages in memory.
pub fn mlockall() -> io::Result<()> {
    // SAFETY: mlockall takes flags only.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Undo [`mlockall`].
pub fn munlockall() {
    // SAFETY: no arguments.
    unsafe { libc::munlockall() };
}

/// `uname -v` (the kernel version string, which names PREEMPT_RT builds).
pub fn kernel_version_string() -> String {
    // SAFETY: utsname is plain data; zeroed is valid before uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let bytes: Vec<u8> = u
        .version
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// CPU time of the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    looptime_capture::clock::thread_cpu_ns()
}

/// Restore SIGPIPE's default action (end the process, quietly), which
/// Rust's runtime sets to ignored: a command that prints and ends then
/// stops on a closed pipe as `cat` does, instead of getting a write error
/// that `println!` turns into a panic. Call it before spawning threads.
pub fn default_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler and touches no
    // Rust state.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
