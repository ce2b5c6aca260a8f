//! Pointers from C: handles checked for NULL, strings for NUL termination
//! and UTF-8, out-pointers for NULL, and the one way a handle is freed.

use std::ffi::{c_char, CStr};

use crate::consts::*;
use crate::error::{fail, guard, null_error, Fail};

/// Free a handle allocated with `Box::into_raw`, catching a panic in its
/// destructor (reported through `looptime_last_error`).
///
/// # Safety
/// `p` is NULL or came from `Box::into_raw` and was not freed.
pub(crate) unsafe fn free_handle<T>(p: *mut T, what: &'static str) {
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
pub(crate) unsafe fn handle<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Fail> {
    // SAFETY: the caller's contract; NULL is checked here.
    unsafe { p.as_mut() }.ok_or_else(|| null_error(what))
}

/// # Safety
/// `p` is NULL or points to a live `T`.
#[inline]
pub(crate) unsafe fn handle_ref<'a, T>(p: *const T, what: &str) -> Result<&'a T, Fail> {
    // SAFETY: the caller's contract; NULL is checked here.
    unsafe { p.as_ref() }.ok_or_else(|| null_error(what))
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Fail> {
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
pub(crate) unsafe fn put<T>(out: *mut T, value: T, what: &str) -> Result<(), Fail> {
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
