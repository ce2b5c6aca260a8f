//! A program's session of several rollouts (as `serve --episodes N`): the
//! session directory and `session.json`, to which the program adds rollouts
//! one after another, each a `looptime_episode`.

use std::collections::BTreeMap;
use std::ffi::{c_char, CString};
use std::path::Path;

use looptime_runtime::embed::HostSession;
use looptime_runtime::error::ServeError;

use crate::consts::*;
use crate::episode::{program_facts, strings, CEpisode, ProgramInfo};
use crate::error::{fail, guard, set_last_error, Fail};
use crate::ptr::{free_handle, handle_ref, text};

/// A program's session directory (`<runs>/session-<UTC>`).
#[derive(Debug)]
pub struct CSession {
    pub(crate) s: HostSession,
    pub(crate) dir: CString,
}

/// A refused request is a state error; anything else the file system's.
fn session_err(e: &ServeError) -> Fail {
    let code = if matches!(e, ServeError::Session { .. }) {
        LOOPTIME_ERR_STATE
    } else {
        LOOPTIME_ERR_IO
    };
    fail(code, looptime_capture::error_chain(e))
}

/// Create a session under `runs_dir`: `session-<UTC>` with its
/// `session.json` (`planned_rollouts` not run yet, or 0 for as many as the
/// program starts) and `<runs_dir>/latest-session`. Each
/// `looptime_session_rollout` then starts `rollout-000`, `rollout-001`, ...
///
/// # Safety
/// `runs_dir` is NULL or a NUL-terminated string; `info` is NULL or a
/// readable `looptime_program` whose pointers obey their comments; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_session_create(
    runs_dir: *const c_char,
    info: *const ProgramInfo,
    planned_rollouts: u32,
    out: *mut *mut CSession,
) -> i32 {
    guard("looptime_session_create", || {
        // SAFETY: the caller's contract.
        let runs = unsafe { text(runs_dir, "runs directory") }?;
        // SAFETY: the caller's contract.
        let info = unsafe { handle_ref(info, "program info") }?;
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        // SAFETY: the caller's contract.
        let facts = unsafe { program_facts(info) }?;
        let (s, notes) = HostSession::create(Path::new(runs), facts, planned_rollouts)
            .map_err(|e| session_err(&e))?;
        for n in notes {
            eprintln!("{n}");
        }
        let dir = CString::new(s.dir().as_os_str().as_encoded_bytes()).map_err(|_| {
            fail(
                LOOPTIME_ERR_INVALID,
                "the runs directory contains a NUL byte",
            )
        })?;
        // SAFETY: checked non-NULL above.
        unsafe { out.write(Box::into_raw(Box::new(CSession { s, dir }))) };
        Ok(LOOPTIME_OK)
    })
}

/// The session directory (valid while the handle lives), or NULL for a
/// NULL handle.
///
/// # Safety
/// `s` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn looptime_session_dir(s: *const CSession) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { s.as_ref() } {
        Some(h) => h.dir.as_ptr(),
        None => {
            set_last_error("looptime_session_dir: the session is NULL");
            std::ptr::null()
        }
    }
}

/// Start the session's next rollout: its directory, a `running` manifest
/// and `<runs>/latest`; the episode handle goes to `*out` (finish it with
/// `looptime_episode_finish`, free it with `looptime_episode_free`).
/// `LOOPTIME_ERR_STATE` while the previous rollout is not finished, or
/// once the session is closed or every planned rollout has started.
///
/// # Safety
/// `s` is NULL or a live session; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_session_rollout(
    s: *const CSession,
    out: *mut *mut CEpisode,
) -> i32 {
    guard("looptime_session_rollout", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_ref(s, "session") }?;
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        let ep = h.s.rollout(BTreeMap::new()).map_err(|e| session_err(&e))?;
        let e = CEpisode::wrap(ep)?;
        // SAFETY: checked non-NULL above.
        unsafe { out.write(Box::into_raw(Box::new(e))) };
        Ok(LOOPTIME_OK)
    })
}

/// Start the session's next rollout with settings of its own (`n`
/// key/value pairs, as text), recorded over the session's under the
/// manifest's `config.program`; a setting named `seed` is the run's seed,
/// `config.run.seed` (a whole number as text is written as the number),
/// which `compare` exempts from what differs between rollouts. Otherwise
/// as [`looptime_session_rollout`].
///
/// # Safety
/// `s` is NULL or a live session; `keys` and `values` are NULL (with `n`
/// 0) or point to `n` NUL-terminated strings each; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_session_rollout_with(
    s: *const CSession,
    keys: *const *const c_char,
    values: *const *const c_char,
    n: usize,
    out: *mut *mut CEpisode,
) -> i32 {
    guard("looptime_session_rollout_with", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_ref(s, "session") }?;
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        // SAFETY: the caller's contract.
        let (k, v) = unsafe { (strings(keys, n, "keys")?, strings(values, n, "values")?) };
        let settings: BTreeMap<String, serde_json::Value> = k
            .iter()
            .zip(&v)
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
            .collect();
        let ep = h.s.rollout(settings).map_err(|e| session_err(&e))?;
        let e = CEpisode::wrap(ep)?;
        // SAFETY: checked non-NULL above.
        unsafe { out.write(Box::into_raw(Box::new(e))) };
        Ok(LOOPTIME_OK)
    })
}

/// Close the session: `session.json` says `complete` when every planned
/// rollout ran and completed, else `aborted` with why (`why` when not
/// NULL, else which rollouts did not run or ended early). Closing twice
/// changes nothing.
///
/// # Safety
/// `s` is NULL or a live session; `why` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn looptime_session_close(s: *const CSession, why: *const c_char) -> i32 {
    guard("looptime_session_close", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_ref(s, "session") }?;
        let why = if why.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            Some(unsafe { text(why, "why") }?)
        };
        h.s.close(why).map_err(|e| session_err(&e))?;
        Ok(LOOPTIME_OK)
    })
}

/// Release a session handle (NULL is ignored). The files stay; a session
/// not closed stays `running` in `session.json`, as one killed would.
///
/// # Safety
/// `s` is NULL or a session from `looptime_session_create`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn looptime_session_free(s: *mut CSession) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(s, "looptime_session_free") }
}
