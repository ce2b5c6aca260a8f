//! The only system interaction of the recorder: clock reads, and the
//! thread id once per recorder; and, for the loop's own receive
//! ([`crate::net`]), a datagram read with the kernel's receive timestamp.
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

/// Ask the kernel to stamp each datagram `fd` receives with its software
/// receive time (`SO_TIMESTAMPNS`, on `CLOCK_REALTIME`).
pub fn enable_rx_timestamps(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: `on` is a valid c_int that outlives the call; setsockopt
    // only reads `size_of::<c_int>()` bytes of it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// One `recvmsg` of `fd` into `buf`: the datagram's length and, when the
/// socket has `SO_TIMESTAMPNS` on, the kernel's receive time (ns since the
/// Unix epoch on `CLOCK_REALTIME`). No allocation: the control message
/// lives on the stack.
pub fn recv_timestamped(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<i64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a few control messages (one timespec needs 32 bytes),
    // aligned as cmsghdr needs.
    let mut control = [0u64; 16];
    // SAFETY: an all-zero msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at iov (buf, its length) and control, all valid
    // and writable for the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays within msg_control/msg_controllen as
    // the kernel filled them; the timespec is read unaligned from its data.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// Wait until `fd` is readable, at most `timeout_ms` (`poll`): false when
/// the time ran out.
pub fn wait_readable(fd: std::os::fd::RawFd, timeout_ms: i32) -> std::io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid, writable pollfd for the call.
    let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc > 0)
}
