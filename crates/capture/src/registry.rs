//! Several threads' recorders of one episode, built together before the
//! loop: above the builder and the recorder.

use crate::builder::RecorderBuilder;
use crate::error::{CaptureError, Result};
use crate::format::CONTROL_THREAD;
use crate::recorder::Recorder;

/// The recorders of one episode recorded by several threads: the control
/// thread's and one per background thread (a camera reader, a viewer
/// transport, a policy worker), all built here, before the loop starts.
/// Each gets its own preallocated ring (and ring file), so threads share no
/// lock and no cache line; each records under the same hot-path rules.
///
/// ```
/// use looptime_capture::{CaptureStatus, RecorderBuilder, Registry, Release};
/// let mut control = RecorderBuilder::new();
/// let act = control.stage("act")?;
/// let mut camera = RecorderBuilder::new();
/// let grab = camera.stage("grab")?;
/// let mut reg = Registry::new(control);
/// reg.thread("camera_reader", camera)?;
/// let mut set = reg.build()?;
/// let mut cam = set.threads.remove(0);
/// let t = std::thread::spawn(move || {
///     let p = cam.default_phase();
///     cam.begin_cycle(p, Release::NONE);
///     { let _s = cam.span(grab); }
///     cam.end_cycle();
///     cam // handed back for the finish
/// });
/// let p = set.control.default_phase();
/// set.control.begin_cycle(p, Release::NONE);
/// { let _s = set.control.span(act); }
/// set.control.end_cycle();
/// let cam = t.join().unwrap();
/// let dir = tempfile::tempdir()?;
/// let report = set.control.finish_threads(dir.path(), CaptureStatus::Complete, &[&cam])?;
/// assert_eq!(report.summary.threads[0].cycles_file, "control_timing.camera_reader.jsonl");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Registry {
    control: RecorderBuilder,
    threads: Vec<RecorderBuilder>,
}

/// What [`Registry::build`] returns.
#[derive(Debug)]
pub struct Recorders {
    /// The control thread's recorder; its finish
    /// ([`Recorder::finish_threads`]) writes the episode.
    pub control: Recorder,
    /// The background threads' recorders, in registration order.
    pub threads: Vec<Recorder>,
}

impl Registry {
    /// A registry around the control thread's builder.
    pub fn new(control: RecorderBuilder) -> Registry {
        Registry {
            control,
            threads: Vec::new(),
        }
    }

    /// Add a background thread `name` recorded by `builder`'s settings.
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for a name that is not allowed,
    /// `control`, or already registered.
    pub fn thread(&mut self, name: &str, mut builder: RecorderBuilder) -> Result<&mut Self> {
        builder.thread(name)?;
        let taken = name == CONTROL_THREAD || self.threads.iter().any(|t| t.thread == name);
        if taken {
            return Err(CaptureError::Registration {
                table: "thread",
                name: name.to_string(),
                reason: "it is already registered (or is the control thread's name)",
            });
        }
        self.threads.push(builder);
        Ok(self)
    }

    /// Build every recorder. The control thread's header declares the
    /// background threads; a background builder without an episode
    /// directory takes the control thread's (so `recover` writes each ring
    /// into the same episode).
    ///
    /// # Errors
    /// As [`RecorderBuilder::build`], for the first recorder that fails.
    pub fn build(mut self) -> Result<Recorders> {
        self.control.thread = CONTROL_THREAD.to_string();
        self.control.threads = self.threads.iter().map(|t| t.thread.clone()).collect();
        // The control thread's first: when memory is short, its refusal is
        // the one to report.
        let control = self.control.build()?;
        let mut threads = Vec::with_capacity(self.threads.len());
        for t in &mut self.threads {
            if t.episode_dir.is_none() {
                t.episode_dir.clone_from(&self.control.episode_dir);
            }
            threads.push(t.build()?);
        }
        Ok(Recorders { control, threads })
    }
}
