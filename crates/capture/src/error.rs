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
    /// The episode directory is missing or not a directory.
    #[error(
        "episode directory {path} does not exist or is not a directory; create it before finishing"
    )]
    MissingDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// Writing, syncing or renaming an evidence file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An evidence file could not be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An evidence file could not be read.
    #[error("cannot read {path}: {source}")]
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
    /// A line is not valid JSON of the expected shape.
    #[error("{path}:{line}: {source}")]
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
    #[error("{path}: schema_version {} is not supported (this build reads {supported:?}); use a looptime build that knows it", found.map_or_else(|| "missing".to_string(), |v| v.to_string()))]
    UnsupportedSchema {
        /// The file.
        path: PathBuf,
        /// The version found, if any.
        found: Option<u32>,
        /// Versions this build reads.
        supported: &'static [u32],
    },
}
