//! The analyzer's error type: every variant names the file (and line) and
//! says what to do.

use std::path::PathBuf;

use thiserror::Error;

/// Result alias for this crate.
pub type Result<T, E = AnalyzeError> = std::result::Result<T, E>;

/// Unusable input or a failure to write the report.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// The episode directory does not exist.
    #[error("episode directory {path} does not exist; pass the rollout directory that `looptime serve` printed (or runs/latest)")]
    MissingDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The path is a file.
    #[error("{path} is not a directory; pass the episode (rollout) directory, not a file in it")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// No JSONL in the directory.
    #[error("{path} is missing: {why}")]
    MissingCycles {
        /// The expected JSONL path.
        path: PathBuf,
        /// What the rest of the directory says about why.
        why: String,
    },
    /// A session or runs directory given where one episode goes.
    #[error("{path} is {what}, not one episode (rollout): {advice}")]
    NotAnEpisode {
        /// The directory given.
        path: PathBuf,
        /// What it is, with its rollouts or sessions.
        what: String,
        /// What to run instead.
        advice: String,
    },
    /// A rollout whose writer still runs: its evidence is written at its
    /// finish.
    #[error("{path} is still recording (pid {pid}): its evidence is written when it finishes; `looptime watch --pid {pid}` shows it live")]
    StillRecording {
        /// The rollout directory.
        path: PathBuf,
        /// The writer's pid.
        pid: u32,
    },
    /// A session directory none of whose rollouts holds a JSONL.
    #[error("{path} is a session directory, but none of its {rollouts} rollout directories holds control_timing.jsonl; run `looptime recover` if the session was killed, or pass episode directories")]
    EmptySession {
        /// The session directory.
        path: PathBuf,
        /// Its rollout directories.
        rollouts: usize,
    },
    /// `fleet` found no episode under its roots.
    #[error("no episode directory (one holding control_timing.jsonl, a summary or a manifest) under {}; pass runs directories, sessions or episodes", roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", "))]
    NoEpisodes {
        /// The roots searched.
        roots: Vec<PathBuf>,
    },
    /// A multi-episode command produced its output from some episodes and
    /// left others out (exit code 4, docs/metrics.md).
    #[error("partial input: {used} of {found} episodes used; {left_out} left out ({where_listed}){hint}")]
    Partial {
        /// Episodes used.
        used: usize,
        /// Episodes found (used and left out).
        found: usize,
        /// Episodes left out.
        left_out: usize,
        /// Where the left-out episodes are listed.
        where_listed: String,
        /// Advice (for example, `looptime recover`), with its leading `; `.
        hint: String,
    },
    /// The timing gate tripped (`--fail-on`, exit 5); the report and its
    /// summaries were written.
    #[error("gate tripped ({subject}, --fail-on {level}): {what}")]
    GateTripped {
        /// What was gated.
        subject: String,
        /// The `--fail-on` level.
        level: String,
        /// The failed cases (or the warning, with --strict), and, when some
        /// input was left out too, that.
        what: String,
    },
    /// The compare gate tripped on undecided tests alone (`--fail-on
    /// undecided`): exit 6; more rollouts a side would decide it.
    #[error("gate undecided ({subject}, --fail-on undecided): {what}")]
    GateUndecided {
        /// What was gated.
        subject: String,
        /// The undecided tests, each with what it could have seen and the
        /// rollouts that would decide it.
        what: String,
    },
    /// A usage error found only once the input was read (a `--gate` name
    /// that is no test of the comparison): exit 2.
    #[error("{0}")]
    Usage(String),
    /// `fleet` could not analyze any of the episodes it found.
    #[error("none of the {found} episodes could be analyzed; they are listed with their errors in {}", errors.display())]
    FleetFailed {
        /// Episodes found.
        found: usize,
        /// The errors file.
        errors: PathBuf,
    },
    /// A line of the JSONL is unusable.
    #[error(
        "{path}:{line}: {message}; fix or remove the line, or pass --lenient to skip bad lines"
    )]
    BadLine {
        /// The JSONL.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What was wrong.
        message: String,
    },
    /// manifest.json is not JSON.
    #[error("{path}: not valid JSON ({message}); the manifest is optional, move it away to analyze without it")]
    BadManifest {
        /// The manifest.
        path: PathBuf,
        /// serde's message.
        message: String,
    },
    /// The capture layer refused the file (empty, unknown version, bad header).
    #[error(transparent)]
    Capture(#[from] looptime_capture::CaptureError),
    /// polars failed while aggregating (a bug: please report it).
    #[error("aggregation failed: {0}")]
    Polars(#[from] polars::error::PolarsError),
    /// A plot could not be drawn or written.
    #[error(transparent)]
    Plot(#[from] PlotError),
    /// The HdrHistogram crate refused to encode a histogram (a bug: please
    /// report it).
    #[error("encoding the HdrHistogram log failed: {0}")]
    Encode(String),
    /// A recording `--into` cannot take, or evidence it cannot place.
    #[error("{path}: {why}")]
    Recording {
        /// The recording (or the episode).
        path: PathBuf,
        /// Why, and what to do.
        why: String,
    },
    /// Writing the report failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The output path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl AnalyzeError {
    /// A short, stable name of the kind of error, for tables of failures
    /// (`fleet`'s `errors.csv`, docs/fleet.md).
    pub fn kind(&self) -> &'static str {
        use looptime_capture::CaptureError as C;
        match self {
            AnalyzeError::MissingDirectory { .. } => "missing_directory",
            AnalyzeError::NotADirectory { .. } => "not_a_directory",
            AnalyzeError::MissingCycles { .. } | AnalyzeError::EmptySession { .. } => "no_evidence",
            AnalyzeError::NotAnEpisode { .. } => "not_an_episode",
            AnalyzeError::StillRecording { .. } => "recording",
            AnalyzeError::NoEpisodes { .. } | AnalyzeError::FleetFailed { .. } => "no_episodes",
            AnalyzeError::Partial { .. } => "partial",
            AnalyzeError::GateTripped { .. } => "gate",
            AnalyzeError::GateUndecided { .. } => "gate_undecided",
            AnalyzeError::Usage(_) => "usage",
            AnalyzeError::BadLine { .. } => "bad_line",
            AnalyzeError::BadManifest { .. } => "bad_manifest",
            AnalyzeError::Recording { .. } => "bad_recording",
            AnalyzeError::Capture(c) => match c {
                C::Empty { .. } => "empty_file",
                C::BadHeader { .. } | C::Parse { line: 1, .. } => "bad_header",
                C::Parse { .. } => "bad_line",
                C::UnsupportedSchema { .. } => "unsupported_schema",
                C::Open { .. } | C::Read { .. } => "unreadable",
                _ => "capture",
            },
            AnalyzeError::Polars(_) | AnalyzeError::Encode(_) => "internal",
            AnalyzeError::Plot(_) | AnalyzeError::Write { .. } => "write",
        }
    }
}

/// A plot that could not be drawn.
#[derive(Debug, Error)]
pub enum PlotError {
    /// No font file found.
    #[error("no font for plot text: install fonts-dejavu-core (apt-get install fonts-dejavu-core) or set LOOPTIME_FONT to a .ttf file")]
    NoFont,
    /// plotters failed.
    #[error("drawing {plot}: {message}")]
    Draw {
        /// Which plot.
        plot: String,
        /// plotters' message.
        message: String,
    },
    /// A plot file could not be written: one line with the OS error once
    /// and what to do.
    #[error("cannot write plot {path}: {error}; free space or fix the permissions there, or pass another directory")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error (in the message, so not a separate source).
        error: std::io::Error,
    },
}
