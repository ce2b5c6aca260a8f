//! The capture crate's error type.

use std::path::PathBuf;

use thiserror::Error;

/// Result alias for this crate.
pub type Result<T, E = CaptureError> = std::result::Result<T, E>;

/// Everything that can go wrong building a recorder, writing evidence or
/// reading it back.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// A builder option is out of range.
    #[error("recorder option `{option}` = {value} is out of range: {expected}")]
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: u64,
        /// What is accepted.
        expected: &'static str,
    },
    /// A name table is full or a name was registered twice.
    #[error("cannot register {table} `{name}`: {reason}")]
    Registration {
        /// `stage`, `phase`, `attribute key`, `attribute value` or `value`.
        table: &'static str,
        /// The name.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The allocator refused the recorder's memory.
    #[error("cannot allocate the recorder's {what} ({bytes} bytes): lower run.timing_max_cycles or run.timing_max_spans_per_cycle")]
    OutOfMemory {
        /// Which buffer.
        what: &'static str,
        /// Bytes asked for.
        bytes: u64,
    },
    /// The episode directory is missing or not a directory.
    #[error(
        "episode directory {path} does not exist or is not a directory; create it before finishing"
    )]
    MissingDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// Writing, syncing or renaming an evidence file failed. The OS error is
    /// the [`source`](std::error::Error::source), not part of this message,
    /// so a printer that walks the chain shows it once.
    #[error("cannot write {path}")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An evidence file could not be opened (the OS error is the source).
    #[error("cannot open {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An evidence file could not be read (the OS error is the source).
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An evidence file has no header line.
    #[error("{path} is empty: expected a header line; the run probably ended before its capture was finished")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The header line is unusable: missing, not UTF-8, too large, or
    /// holding more entries than a header may.
    #[error("{path}:{line}: {message}")]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// 1-based line number (1: the header).
        line: u64,
        /// What was wrong and what to do.
        message: String,
    },
    /// A line is not valid JSON of the expected shape (serde's message is
    /// the source).
    #[error("{path}:{line}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What serde found.
        #[source]
        source: serde_json::Error,
    },
    /// The file declares a schema version this build cannot read.
    #[error("{path}:1: {}; this build reads schema versions {supported:?}: use a looptime build that knows it", found.map_or_else(|| "the header has no schema_version".to_string(), |v| format!("schema_version {v} is not supported")))]
    UnsupportedSchema {
        /// The file.
        path: PathBuf,
        /// The version found, if any.
        found: Option<u32>,
        /// Versions this build reads.
        supported: &'static [u32],
    },
    /// A ring file could not be created, sized, mapped, opened or removed
    /// (the OS error is the source).
    #[error("cannot {what} ring file {path}")]
    Ring {
        /// The ring file.
        path: PathBuf,
        /// `create`, `allocate`, `map`, `open` or `remove`.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A ring file that is not the caller's (or not a regular file): never
    /// opened, written or removed (docs/durability.md, "Whose rings").
    #[error("{why}")]
    NotYourRing {
        /// The ring file.
        path: PathBuf,
        /// Whose it is, its size and age, and that it was left alone.
        why: String,
    },
    /// The episode directory a ring names is not the caller's to write
    /// into; the ring is left in place.
    #[error("its episode directory {path} is not yours to write into: {why}; the ring is left in place (recover it as the directory's owner)")]
    NotYourDirectory {
        /// The episode directory the ring names.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// A file is not a usable ring file.
    #[error("{path} is not a usable looptime ring: {message}")]
    BadRing {
        /// The file.
        path: PathBuf,
        /// What was wrong and what to do.
        message: String,
    },
    /// The ring's writer still runs, so it is not recovered.
    #[error("{path} belongs to process {pid}, which is still running: watch it with `looptime watch --ring {path}` instead of recovering it")]
    RingInUse {
        /// The ring file.
        path: PathBuf,
        /// Its writer's pid.
        pid: u32,
    },
}

/// What kind of failure a [`CaptureError`] is, for the bindings that map
/// errors to codes or exception types of their own (C: `LOOPTIME_ERR_IO`
/// or `LOOPTIME_ERR_INVALID`; Python: `OSError` or `ValueError`). One
/// classification, so that the bindings cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The operating system refused: a file, directory or ring could not be
    /// created, written, mapped, opened, read or removed.
    Io,
    /// The call or the input was wrong: an option, a name, a file's
    /// contents, a ring that is not the caller's.
    Invalid,
}

impl CaptureError {
    /// This error's [`ErrorClass`].
    pub fn class(&self) -> ErrorClass {
        match self {
            CaptureError::Write { .. }
            | CaptureError::MissingDirectory { .. }
            | CaptureError::Ring { .. }
            | CaptureError::Open { .. }
            | CaptureError::Read { .. } => ErrorClass::Io,
            _ => ErrorClass::Invalid,
        }
    }
}

/// `error` and every error in its [`source`](std::error::Error::source)
/// chain, joined by `": "`: one line that shows each cause once. Every error
/// type of the workspace keeps its cause out of its own message and in the
/// chain, so printing through this never repeats the OS error.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        let text = e.to_string();
        // A message that already quotes its source (`cannot write X: {source}`)
        // states it once, not twice.
        if !text.is_empty() && !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_failures_and_wrong_input_are_classified_apart() {
        let io = CaptureError::MissingDirectory {
            path: PathBuf::from("x"),
        };
        assert_eq!(io.class(), ErrorClass::Io);
        let ring = CaptureError::Ring {
            path: PathBuf::from("r"),
            what: "map",
            source: std::io::Error::other("no"),
        };
        assert_eq!(ring.class(), ErrorClass::Io);
        let bad = CaptureError::InvalidOption {
            option: "max_cycles",
            value: 0,
            expected: "at least 1",
        };
        assert_eq!(bad.class(), ErrorClass::Invalid);
        let theirs = CaptureError::NotYourRing {
            path: PathBuf::from("r"),
            why: "someone else's".into(),
        };
        assert_eq!(theirs.class(), ErrorClass::Invalid);
    }
}
