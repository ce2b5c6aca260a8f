//! `Session` and `Episode`: a program's session and rollout directories and
//! manifests, in `looptime serve`'s layout.

use looptime_runtime::embed::{EpisodeEnd, HostEpisode, HostSession, ProgramFacts};
use looptime_runtime::rt::{setup_control_thread, RealtimeObtained, RealtimeRequest};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::runtime_err;
use crate::recorder::Recorder;
use crate::scheduler::Scheduler;

/// `settings` as JSON values, through Python's `json` (so what the
/// manifest records is what `json.dumps` would write).
fn json_settings(
    py: Python<'_>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<BTreeMap<String, serde_json::Value>> {
    let mut map = BTreeMap::new();
    if let Some(s) = settings {
        let json = py.import("json")?;
        for (k, v) in s.iter() {
            let key: String = k.extract()?;
            let text: String = json.call_method1("dumps", (v,))?.extract().map_err(|_| {
                PyTypeError::new_err(format!("settings[{key:?}] is not JSON-serialisable"))
            })?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| PyValueError::new_err(format!("settings[{key:?}]: {e}")))?;
            map.insert(key, value);
        }
    }
    Ok(map)
}

/// What the program declares, from the arguments both classes take.
struct Declared<'a, 'py> {
    program: String,
    sources: Vec<PathBuf>,
    control_timing: bool,
    timing_max_cycles: u64,
    /// The loop's scheduler; `None` for a loop its inputs pace, whose
    /// nominal period is then `period_s`.
    scheduler: Option<PyRef<'a, Scheduler>>,
    period_s: Option<f64>,
    settings: Option<&'a Bound<'py, PyDict>>,
    label: Option<String>,
}

impl Declared<'_, '_> {
    fn facts(self, py: Python<'_>) -> PyResult<ProgramFacts> {
        if let Some(l) = &self.label {
            if l.is_empty() || l.chars().any(char::is_control) {
                return Err(PyValueError::new_err(format!(
                    "label must be a non-empty name without control characters, not {l:?}"
                )));
            }
        }
        // (nominal period, spin margin, auto margin, policy, rtf)
        let schedule = match (&self.scheduler, self.period_s) {
            (Some(s), None) => {
                let cfg = s.s.config();
                (
                    s.nominal_period_ns,
                    cfg.spin_margin_ns,
                    cfg.auto_margin,
                    cfg.policy.as_str(),
                    s.rtf,
                )
            }
            (None, Some(p)) if p.is_finite() && p > 0.0 && p <= 3600.0 => {
                // Paced by its inputs: no wait of its own, no policy.
                ((p * 1e9).round() as u64, 0, false, "none", 1.0)
            }
            (None, Some(p)) => {
                return Err(PyValueError::new_err(format!(
                    "period_s must be a positive number of seconds (at most 3600), not {p}"
                )))
            }
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err(
                    "give scheduler or period_s, not both: the scheduler's period is the loop's",
                ))
            }
            (None, None) => {
                return Err(PyValueError::new_err(
                    "give a scheduler, or for a loop its inputs pace period_s: the inputs' nominal period (the robot's state period), which the manifest and the analyzer judge against",
                ))
            }
        };
        Ok(ProgramFacts {
            producer: format!("looptime-python {}", env!("CARGO_PKG_VERSION")),
            program: self.program,
            sources: self.sources,
            control_timing: self.control_timing,
            timing_max_cycles: self.timing_max_cycles,
            nominal_period_ns: schedule.0,
            spin_margin_ns: schedule.1,
            spin_margin_auto: schedule.2,
            overrun_policy: schedule.3,
            rtf: schedule.4,
            label: self.label,
            settings: json_settings(py, self.settings)?,
        })
    }
}

fn print_notes(notes: Vec<String>) {
    for n in notes {
        eprintln!("{n}");
    }
}

/// A program's session (`<runs>/session-<UTC>`), to which it adds rollouts
/// one after another, as `serve --episodes N` does; `compare` takes two
/// session directories. Use it as a context manager: leaving the `with`
/// block closes it (with the exception's text as the reason, when one
/// ends the block).
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct Session {
    s: HostSession,
    /// The scheduler the session was opened with: each rollout restarts
    /// its timeline, and takes its counts from where they stood (none for
    /// a loop its inputs pace).
    scheduler: Option<Py<Scheduler>>,
}

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (runs_dir, program, sources, control_timing, timing_max_cycles, scheduler = None, settings = None, label = None, rollouts = 0, period_s = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runs_dir: PathBuf,
        program: String,
        sources: Vec<PathBuf>,
        control_timing: bool,
        timing_max_cycles: u64,
        scheduler: Option<Bound<'_, Scheduler>>,
        settings: Option<&Bound<'_, PyDict>>,
        label: Option<String>,
        rollouts: u32,
        period_s: Option<f64>,
    ) -> PyResult<Self> {
        let facts = Declared {
            program,
            sources,
            control_timing,
            timing_max_cycles,
            scheduler: scheduler.as_ref().map(|s| s.borrow()),
            period_s,
            settings,
            label,
        }
        .facts(py)?;
        let (s, notes) = HostSession::create(&runs_dir, facts, rollouts).map_err(runtime_err)?;
        print_notes(notes);
        Ok(Session {
            s,
            scheduler: scheduler.map(Bound::unbind),
        })
    }

    /// The session directory.
    #[getter]
    fn dir(&self) -> String {
        self.s.dir().display().to_string()
    }

    /// Rollouts started so far.
    #[getter]
    fn rollouts(&self) -> usize {
        self.s.rollouts()
    }

    /// Start the next rollout (`rollout-NNN`), with `settings` over the
    /// session's under the manifest's `config.program` (a `seed` goes to
    /// `config.run.seed`, the run's seed). The session's scheduler starts a
    /// new timeline at its next wait (the pause between rollouts is no
    /// overrun), and the rollout's manifest counts its own cycles.
    /// Raises `RuntimeError` while the previous rollout is not finished, or
    /// once the session is closed or every planned rollout has started.
    #[pyo3(signature = (settings = None))]
    fn rollout(&self, py: Python<'_>, settings: Option<&Bound<'_, PyDict>>) -> PyResult<Episode> {
        let extra = json_settings(py, settings)?;
        let ep = self.s.rollout(extra).map_err(runtime_err)?;
        let baseline = self.scheduler.as_ref().map(|s| {
            let mut sched = s.bind(py).borrow_mut();
            sched.s.restart();
            [sched.s.cycles(), sched.s.overruns(), sched.s.skipped()]
        });
        Ok(Episode {
            ep,
            realtime: None,
            baseline,
        })
    }

    /// Close the session: `session.json` says `complete` when every planned
    /// rollout ran and completed, else `aborted` with why (`why`, when
    /// given). Closing twice changes nothing.
    #[pyo3(signature = (why = None))]
    fn close(&self, why: Option<&str>) -> PyResult<()> {
        self.s.close(why).map_err(runtime_err)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (_ty = None, value = None, _tb = None))]
    fn __exit__(
        &self,
        _ty: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let why = value.filter(|v| !v.is_none()).map(|v| {
            let name = v
                .get_type()
                .name()
                .map_or_else(|_| "exception".to_string(), |n| n.to_string());
            match v.str() {
                Ok(text) if !text.to_string().is_empty() => format!("{name}: {text}"),
                _ => name,
            }
        });
        self.close(why.as_deref())?;
        Ok(false)
    }
}

/// A program's rollout directory, in `serve`'s layout: from `Session.rollout`,
/// or, built directly, a session of its own holding this one rollout.
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct Episode {
    ep: HostEpisode,
    realtime: Option<RealtimeObtained>,
    /// The session scheduler's cycles, overruns and skips when this
    /// rollout started: its manifest counts what came after.
    baseline: Option<[u64; 3]>,
}

#[pymethods]
impl Episode {
    #[new]
    #[pyo3(signature = (runs_dir, program, sources, control_timing, timing_max_cycles, scheduler = None, settings = None, label = None, period_s = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runs_dir: PathBuf,
        program: String,
        sources: Vec<PathBuf>,
        control_timing: bool,
        timing_max_cycles: u64,
        scheduler: Option<PyRef<'_, Scheduler>>,
        settings: Option<&Bound<'_, PyDict>>,
        label: Option<String>,
        period_s: Option<f64>,
    ) -> PyResult<Self> {
        let facts = Declared {
            program,
            sources,
            control_timing,
            timing_max_cycles,
            scheduler,
            period_s,
            settings,
            label,
        }
        .facts(py)?;
        let (ep, notes) = HostEpisode::create(&runs_dir, facts).map_err(runtime_err)?;
        print_notes(notes);
        Ok(Episode {
            ep,
            realtime: None,
            baseline: None,
        })
    }

    /// The rollout directory (`<runs>/session-<UTC>/rollout-NNN`).
    #[getter]
    fn dir(&self) -> String {
        self.ep.dir().display().to_string()
    }

    /// The session directory.
    #[getter]
    fn session(&self) -> String {
        self.ep.session().display().to_string()
    }

    /// Prepare the calling thread as the control thread: 1 ns timer slack.
    /// Returns the warnings (empty when everything was granted); what was
    /// obtained goes into the manifest.
    fn setup_control_thread(&mut self) -> Vec<String> {
        let obtained = setup_control_thread(&RealtimeRequest::default());
        let warnings = obtained.warnings.clone();
        self.realtime = Some(obtained);
        warnings
    }

    /// Rewrite the manifest with how the loop ended and mark the session.
    /// Call it after `Recorder.finish`. The cycles are the scheduler's
    /// waits when it waited in this rollout, else the recorder's cycles
    /// (a loop its inputs pace). `planned_cycles` is what the program
    /// planned: for a loop its inputs pace, the inputs it expected (the
    /// robot's states in the motion), so that a shortfall counts the
    /// states that released no cycle.
    #[pyo3(signature = (recorder = None, scheduler = None, complete = true, planned_cycles = 0))]
    fn finish(
        &mut self,
        recorder: Option<PyRef<'_, Recorder>>,
        scheduler: Option<PyRef<'_, Scheduler>>,
        complete: bool,
        planned_cycles: u64,
    ) -> PyResult<()> {
        if self.ep.is_finished() {
            return Err(PyRuntimeError::new_err(format!(
                "the episode {} is already finished",
                self.ep.dir().display()
            )));
        }
        let mut end = EpisodeEnd {
            complete,
            planned_cycles,
            realtime: self.realtime.clone(),
            ..EpisodeEnd::default()
        };
        if let Some(r) = &recorder {
            end.recorder(&r.rec, r.finished.as_deref().map(Path::new), self.ep.dir());
        }
        // A session's scheduler counts across rollouts: this rollout's own
        // counts are what came after its start. A scheduler that never
        // waited in it (a loop its inputs pace, handed one anyway) counts
        // nothing: the recorder's cycles stand.
        let [c0, o0, k0] = self.baseline.unwrap_or_default();
        if let Some(s) = scheduler.filter(|s| s.s.cycles() > c0) {
            end.scheduler(&s.s);
            end.cycles -= c0;
            end.overruns = end.overruns.saturating_sub(o0);
            end.skipped = end.skipped.saturating_sub(k0);
        }
        self.ep.finish(&end).map_err(runtime_err)
    }
}
