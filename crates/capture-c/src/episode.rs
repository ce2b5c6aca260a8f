//! The episode layout `looptime serve` writes (session and rollout
//! directories, manifest, `latest` link), for programs that record their
//! own loop.

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};

use looptime_runtime::embed::{EpisodeEnd, HostEpisode, ProgramFacts};
use looptime_runtime::rt::{setup_control_thread, RealtimeObtained, RealtimeRequest};

use crate::consts::*;
use crate::error::{fail, guard, set_last_error, Fail};
use crate::ptr::{free_handle, handle, handle_ref, text};
use crate::recorder::CRecorder;
use crate::scheduler::{looptime_scheduler_config_default, CScheduler, SchedulerSettings};

/// What a program declares about its episode.
#[repr(C)]
#[derive(Debug)]
pub struct ProgramInfo {
    /// The program's path (typically `argv[0]`).
    pub program: *const c_char,
    /// Source files whose SHA-256 the manifest records (may be NULL when
    /// `n_sources` is 0).
    pub sources: *const *const c_char,
    /// Entries in `sources`.
    pub n_sources: usize,
    /// Whether the recorder runs (`--control-timing`).
    pub control_timing: bool,
    /// The recorder's cycle capacity.
    pub timing_max_cycles: u64,
    /// The scheduler the loop runs (NULL: the defaults for 100 Hz, unless
    /// `input_period_ns` says the loop's inputs pace it).
    pub scheduler: *const SchedulerSettings,
    /// Setting names recorded under the manifest's `config.program` (may be
    /// NULL when `n_settings` is 0).
    pub setting_keys: *const *const c_char,
    /// Their values, as text.
    pub setting_values: *const *const c_char,
    /// Entries in `setting_keys` and `setting_values`.
    pub n_settings: usize,
    /// The session's name (recorded as `config.run.label`, as
    /// `serve --label`; reports show it and `compare` names the side by
    /// it), or NULL.
    pub label: *const c_char,
    /// For a loop its inputs pace (docs/input-paced.md), which runs no
    /// scheduler: the inputs' nominal period in ns (the robot's state
    /// period), with `scheduler` NULL. The manifest's schedule then states
    /// it, with no spin margin and the policy `none`. 0 (the default): the
    /// loop runs `scheduler`.
    pub input_period_ns: u64,
}

abi_layout!(ProgramInfo, size 88,
    program @ 0, sources @ 8, n_sources @ 16, control_timing @ 24, timing_max_cycles @ 32,
    scheduler @ 40, setting_keys @ 48, setting_values @ 56, n_settings @ 64, label @ 72,
    input_period_ns @ 80);

/// A program's episode directory (`<runs>/session-<UTC>/rollout-000`).
#[derive(Debug)]
pub struct CEpisode {
    pub(crate) ep: HostEpisode,
    pub(crate) dir: CString,
    pub(crate) realtime: Option<RealtimeObtained>,
}

/// # Safety
/// `list` is NULL (only with `n == 0`) or holds `n` strings.
pub(crate) unsafe fn strings<'a>(
    list: *const *const c_char,
    n: usize,
    what: &str,
) -> Result<Vec<&'a str>, Fail> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() {
        return Err(fail(
            LOOPTIME_ERR_NULL,
            format!("{what} is NULL with a count of {n}"),
        ));
    }
    (0..n)
        // SAFETY: `list` holds `n` pointers, each NULL or a string.
        .map(|i| unsafe { text(*list.add(i), &format!("{what}[{i}]")) })
        .collect()
}

/// Create the episode's directories under `runs_dir`, write `session.json`
/// and a `running` manifest, and point `<runs_dir>/latest` at the rollout.
/// The handle goes to `*out`; `looptime_episode_dir` gives the directory to
/// finish the recorder into.
///
/// # Safety
/// `runs_dir` is NULL or a NUL-terminated string; `info` is NULL or a
/// readable `looptime_program` whose pointers obey their comments; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_episode_create(
    runs_dir: *const c_char,
    info: *const ProgramInfo,
    out: *mut *mut CEpisode,
) -> i32 {
    guard("looptime_episode_create", || {
        // SAFETY: the caller's contract.
        let runs = unsafe { text(runs_dir, "runs directory") }?;
        // SAFETY: the caller's contract.
        let info = unsafe { handle_ref(info, "program info") }?;
        if out.is_null() {
            return Err(fail(LOOPTIME_ERR_NULL, "the out pointer is NULL"));
        }
        // SAFETY: the caller's contract.
        let facts = unsafe { program_facts(info) }?;
        let (ep, notes) = HostEpisode::create(Path::new(runs), facts)
            .map_err(|e| fail(LOOPTIME_ERR_IO, looptime_capture::error_chain(&e)))?;
        for n in notes {
            eprintln!("{n}");
        }
        let e = CEpisode::wrap(ep)?;
        // SAFETY: checked non-NULL above.
        unsafe { out.write(Box::into_raw(Box::new(e))) };
        Ok(LOOPTIME_OK)
    })
}

impl CEpisode {
    /// The C handle's contents for a started rollout.
    pub(crate) fn wrap(ep: HostEpisode) -> Result<CEpisode, Fail> {
        let dir = CString::new(ep.dir().as_os_str().as_encoded_bytes()).map_err(|_| {
            fail(
                LOOPTIME_ERR_INVALID,
                "the runs directory contains a NUL byte",
            )
        })?;
        Ok(CEpisode {
            ep,
            dir,
            realtime: None,
        })
    }
}

/// What `info` declares, checked.
///
/// # Safety
/// `info`'s pointers obey their comments.
pub(crate) unsafe fn program_facts(info: &ProgramInfo) -> Result<ProgramFacts, Fail> {
    // SAFETY: the caller's contract.
    let (program, sources, keys, values) = unsafe {
        (
            text(info.program, "program")?,
            strings(info.sources, info.n_sources, "sources")?,
            strings(info.setting_keys, info.n_settings, "setting_keys")?,
            strings(info.setting_values, info.n_settings, "setting_values")?,
        )
    };
    let label = if info.label.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        let l = unsafe { text(info.label, "label") }?;
        if l.is_empty() || l.chars().any(char::is_control) {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!("label must be a non-empty name without control characters, not {l:?}"),
            ));
        }
        Some(l.to_string())
    };
    // SAFETY: the caller's contract.
    let given = unsafe { info.scheduler.as_ref() }.copied();
    let (sched, policy) = match (given, info.input_period_ns) {
        (Some(_), p) if p > 0 => return Err(fail(
            LOOPTIME_ERR_INVALID,
            "give a scheduler or input_period_ns, not both: the scheduler's period is the loop's",
        )),
        (Some(s), _) => (s, None),
        (None, 0) => (looptime_scheduler_config_default(10_000_000), None),
        (None, p) if p > looptime_runtime::scheduler::MAX_PERIOD_NS => {
            return Err(fail(
                LOOPTIME_ERR_INVALID,
                format!("input_period_ns {p} is longer than one hour"),
            ))
        }
        (None, p) => {
            // Paced by its inputs: no wait of its own, no margin, no policy.
            let mut s = looptime_scheduler_config_default(p);
            s.spin_margin_ns = 0;
            s.auto_margin = false;
            (s, Some("none"))
        }
    };
    Ok(ProgramFacts {
        producer: format!("looptime-c {}", env!("CARGO_PKG_VERSION")),
        program: program.to_string(),
        sources: sources.iter().map(PathBuf::from).collect(),
        control_timing: info.control_timing,
        timing_max_cycles: info.timing_max_cycles,
        nominal_period_ns: sched.period_ns,
        spin_margin_ns: sched.spin_margin_ns,
        spin_margin_auto: sched.auto_margin,
        overrun_policy: policy.unwrap_or(if sched.policy == LOOPTIME_POLICY_KEEP_PHASE {
            "keep-phase"
        } else {
            "rebase"
        }),
        rtf: sched.rtf,
        label,
        settings: keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
            .collect(),
    })
}

/// The rollout directory (valid while the episode handle lives), or NULL
/// for a NULL handle.
///
/// # Safety
/// `e` is NULL or a live episode.
#[no_mangle]
pub unsafe extern "C" fn looptime_episode_dir(e: *const CEpisode) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { e.as_ref() } {
        Some(h) => h.dir.as_ptr(),
        None => {
            set_last_error("looptime_episode_dir: the episode is NULL");
            std::ptr::null()
        }
    }
}

/// Prepare the calling thread as a control thread: ask for 1 ns timer slack
/// (so absolute sleeps wake on time), and write the slack obtained to
/// `*timer_slack_ns` when it is not NULL. With an episode, what was obtained
/// goes into its manifest. Returns `LOOPTIME_WARN_DEGRADED`, with a message,
/// when the kernel refused; the loop still runs, with sleeps that may wake
/// up to 50 µs late.
///
/// # Safety
/// `e` is NULL or a live episode; `timer_slack_ns` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn looptime_control_thread_setup(
    e: *mut CEpisode,
    timer_slack_ns: *mut u64,
) -> i32 {
    guard("looptime_control_thread_setup", || {
        let obtained = setup_control_thread(&RealtimeRequest::default());
        if !timer_slack_ns.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { timer_slack_ns.write(obtained.timer_slack_ns.unwrap_or(0)) };
        }
        let warning = obtained.warnings.join("; ");
        // SAFETY: the caller's contract.
        if let Some(h) = unsafe { e.as_mut() } {
            h.realtime = Some(obtained);
        }
        if warning.is_empty() {
            Ok(LOOPTIME_OK)
        } else {
            set_last_error(&format!("looptime_control_thread_setup: {warning}"));
            Ok(LOOPTIME_WARN_DEGRADED)
        }
    })
}

/// Rewrite the manifest with how the loop ended and mark the rollout and the
/// session in `session.json`. `rec` (may be NULL) supplies the ring file and
/// whether the evidence was written; `sched` (may be NULL) the cycle,
/// overrun and skip counts when it waited at all (else the recorder's cycle
/// count is used: a loop its inputs pace). `planned_cycles` is what the
/// program planned: for a loop its inputs pace, the inputs it expected.
/// Call it after `looptime_recorder_finish`. A second call is refused.
///
/// # Safety
/// Each handle is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn looptime_episode_finish(
    e: *mut CEpisode,
    rec: *const CRecorder,
    sched: *const CScheduler,
    complete: bool,
    planned_cycles: u64,
) -> i32 {
    guard("looptime_episode_finish", || {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(e, "episode") }?;
        if h.ep.is_finished() {
            return Err(fail(
                LOOPTIME_ERR_STATE,
                format!("the episode {} is already finished", h.ep.dir().display()),
            ));
        }
        // SAFETY: the caller's contract.
        let (rec, sched) = unsafe { (rec.as_ref(), sched.as_ref()) };
        let mut end = EpisodeEnd {
            complete,
            planned_cycles,
            realtime: h.realtime.clone(),
            ..EpisodeEnd::default()
        };
        if let Some(r) = rec {
            end.recorder(&r.rec, r.finished.as_deref(), h.ep.dir());
        }
        // A scheduler that never waited counts nothing: the recorder's
        // cycles stand.
        if let Some(s) = sched.filter(|s| s.s.cycles() > 0) {
            end.scheduler(&s.s);
        }
        h.ep.finish(&end)
            .map_err(|e| fail(LOOPTIME_ERR_IO, looptime_capture::error_chain(&e)))?;
        Ok(LOOPTIME_OK)
    })
}

/// Release an episode handle (NULL is ignored). The files stay.
///
/// # Safety
/// `e` is NULL or an episode from `looptime_episode_create`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn looptime_episode_free(e: *mut CEpisode) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(e, "looptime_episode_free") }
}
