//! Errors at the boundary: the thread-local last-error message, the
//! `Fail` every entry point's body returns, and [`guard`], which turns a
//! failure or a panic into a code (no unwind crosses into C). The capture
//! error's one classification ([`looptime_capture::ErrorClass`]) is mapped
//! to codes here, and nowhere else.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::consts::*;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

pub(crate) struct Fail {
    pub(crate) code: i32,
    pub(crate) message: String,
}

pub(crate) fn fail(code: i32, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
    }
}

pub(crate) fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// Run `f`, turn its failure or panic into a code and the thread's message.
/// The error paths are out of line and cold, so that the recording calls
/// stay small.
#[inline]
pub(crate) fn guard(what: &'static str, f: impl FnOnce() -> Result<i32, Fail>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => report(what, e),
        Err(payload) => report_panic(what, payload),
    }
}

#[cold]
#[inline(never)]
pub(crate) fn report(what: &str, e: Fail) -> i32 {
    set_last_error(&format!("{what}: {}", e.message));
    e.code
}

#[cold]
#[inline(never)]
pub(crate) fn report_panic(what: &str, payload: Box<dyn std::any::Any + Send>) -> i32 {
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
pub(crate) fn null_error(what: &str) -> Fail {
    fail(LOOPTIME_ERR_NULL, format!("the {what} is NULL"))
}

#[cold]
#[inline(never)]
pub(crate) fn unknown_id(kind: &str, id: u32, registered: usize) -> Fail {
    fail(
        LOOPTIME_ERR_UNKNOWN_ID,
        format!("{kind} id {id} was not registered ({registered} {kind}s)"),
    )
}

pub(crate) fn capture_fail(e: looptime_capture::CaptureError) -> Fail {
    // The capture error's one classification, mapped here and nowhere else.
    let code = match e.class() {
        looptime_capture::ErrorClass::Io => LOOPTIME_ERR_IO,
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
