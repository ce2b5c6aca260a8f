//! The runtime's error type.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::scheduler::SchedulerError;

/// Errors of a serve run.
#[derive(Debug, Error)]
pub enum ServeError {
    /// A directory or file of the episode could not be written (the OS
    /// error is the source, printed once after this message).
    #[error("cannot write {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A thread could not be started.
    #[error("cannot start the {thread} thread")]
    Thread {
        /// Thread name.
        thread: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The control thread panicked.
    #[error("the control thread panicked; evidence of this episode is lost")]
    ControlPanicked,
    /// Invalid scheduler settings.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// The recorder could not be built or could not write its files.
    #[error(transparent)]
    Capture(#[from] looptime_capture::CaptureError),
    /// A program's session refused a request (a rollout after the session
    /// closed, or while the previous one runs).
    #[error("session {}: {why}", session.display())]
    Session {
        /// The session directory.
        session: PathBuf,
        /// What was refused and what to do.
        why: String,
    },
}

/// Map an I/O error on `path` into [`ServeError::Io`].
pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ServeError + '_ {
    move |source| ServeError::Io {
        path: path.to_path_buf(),
        source,
    }
}
