//! `Episode`: a program's session and rollout directories and manifest,
//! in `looptime serve`'s layout.

use looptime_runtime::embed::{EpisodeEnd, HostEpisode, ProgramFacts};
use looptime_runtime::rt::{setup_control_thread, RealtimeObtained, RealtimeRequest};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::{Path, PathBuf};

use crate::error::runtime_err;
use crate::recorder::Recorder;
use crate::scheduler::Scheduler;

/// A program's episode directory, in `serve`'s layout.
#[pyclass(module = "looptime._looptime")]
#[derive(Debug)]
pub struct Episode {
    ep: HostEpisode,
    realtime: Option<RealtimeObtained>,
}

#[pymethods]
impl Episode {
    #[new]
    #[pyo3(signature = (runs_dir, program, sources, control_timing, timing_max_cycles, scheduler, settings = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runs_dir: PathBuf,
        program: String,
        sources: Vec<PathBuf>,
        control_timing: bool,
        timing_max_cycles: u64,
        scheduler: PyRef<'_, Scheduler>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut map = std::collections::BTreeMap::new();
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
        let cfg = scheduler.s.config();
        let facts = ProgramFacts {
            producer: format!("looptime-python {}", env!("CARGO_PKG_VERSION")),
            program,
            sources,
            control_timing,
            timing_max_cycles,
            nominal_period_ns: cfg.period_ns,
            spin_margin_ns: cfg.spin_margin_ns,
            spin_margin_auto: cfg.auto_margin,
            overrun_policy: cfg.policy.as_str(),
            settings: map,
        };
        let (ep, notes) = HostEpisode::create(&runs_dir, facts).map_err(runtime_err)?;
        for n in notes {
            eprintln!("{n}");
        }
        Ok(Episode { ep, realtime: None })
    }

    /// The rollout directory (`<runs>/session-<UTC>/rollout-000`).
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
    /// Call it after `Recorder.finish`.
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
        if let Some(s) = &scheduler {
            end.scheduler(&s.s);
        }
        self.ep.finish(&end).map_err(runtime_err)
    }
}
