//! The arguments as clap parses them, the exit codes, and the validated
//! requests the rest of the program sees ([`Command`]). The bottom rung of
//! `cli`: it knows no subcommand's work.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::evidence::LoadOptions;
use crate::metrics::Thresholds;

/// Exit code: the analysis ran.
pub const EXIT_OK: i32 = 0;
/// Exit code: the input is unusable (missing, empty, corrupt, unknown version).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code: the report could not be written.
pub const EXIT_WRITE: i32 = 3;
/// Exit code: command-line usage error (clap's own).
pub const EXIT_USAGE: i32 = 2;
/// Partial input: a multi-episode command (`compare`, `export --format
/// parquet`, `fleet`) wrote its output from some episodes and left others
/// out, listed in its output and on stderr.
pub const EXIT_PARTIAL: i32 = 4;
/// The timing gate tripped (`--fail-on`, docs/ci.md): the report and its
/// summaries were still written. A write failure (3) wins over it, and it
/// wins over partial input (4).
pub const EXIT_GATE: i32 = 5;
/// The compare gate is undecided (`--fail-on undecided`, docs/ci.md): no
/// gated test got worse, but some could not have seen the effect asked of
/// them (`--min-effect`); more rollouts a side would decide. The comparison
/// and its summaries were written.
pub const EXIT_UNDECIDED: i32 = 6;

/// Recompute control-loop timing from saved looptime evidence.
#[derive(Debug, Parser)]
#[command(
    name = "analyze_control_timing",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// The episode (rollout) directory holding control_timing.jsonl.
    #[arg(long)]
    pub episode: Option<PathBuf>,
    /// How to read the evidence.
    #[command(flatten)]
    pub input: InputArgs,
    /// Where the report goes.
    #[command(flatten)]
    pub output: OutputArgs,
    /// The summary's thresholds.
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// The CI gate and its summaries.
    #[command(flatten)]
    pub gate: GateArgs,
    /// Subcommands.
    #[command(subcommand)]
    pub command: Option<Sub>,
}

/// The timing gate for CI (docs/ci.md), shared by the report and
/// `compare`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GateArgs {
    /// Exit 5 when the gate trips: for a report `warn` or `fail` (a judged
    /// summary card reaching that state); for `compare` `worse` or `mixed`
    /// (a gated test with that verdict), or `undecided` (a gated test
    /// worse, else exit 6 for one that could not have seen its
    /// `--min-effect`).
    #[arg(long, value_name = "LEVEL")]
    pub fail_on: Option<String>,
    /// compare: the gate's family-wise error rate (Holm over the gated
    /// tests), above 0 and at most 0.05; split it across looks when more
    /// rollouts are recorded while the gate is undecided (docs/ci.md).
    #[arg(long, value_name = "ALPHA", default_value_t = crate::compare::FAMILY_ALPHA)]
    pub alpha: f64,
    /// compare: the smallest shift a gated test must be able to see,
    /// `TEST=VALUE` in the test's unit (ms, per 1,000 for a rate, Hz for loop_hz);
    /// repeatable. A test without one is never undecided.
    #[arg(long, value_name = "TEST=VALUE", value_parser = parse_min_effect)]
    pub min_effect: Vec<(String, f64)>,
    /// compare: the tests the gate reads, comma-separated, each
    /// `PHASE/METRIC[/STAGE]:median|p99` or `PHASE/RATE:rate` (default:
    /// every test of the family, as Holm judged it).
    #[arg(long, value_name = "TESTS", value_delimiter = ',')]
    pub gate: Vec<String>,
    /// compare: a warning about the pair itself (another host, too few
    /// rollouts) trips the gate too.
    #[arg(long)]
    pub strict: bool,
    /// Let a gate that checked nothing (every card not judged, every test
    /// not gated, or none at all) pass; without it such a gate trips.
    #[arg(long)]
    pub allow_empty_gate: bool,
    /// Write a GitHub-flavoured Markdown summary here (append it to
    /// $GITHUB_STEP_SUMMARY in a workflow).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the gate as JUnit XML here (one test case per card or test).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// `TEST=VALUE` of `--min-effect`: a test name and a positive number.
fn parse_min_effect(s: &str) -> Result<(String, f64), String> {
    let (name, value) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("`{s}`: give TEST=VALUE, e.g. running/work:median=0.3"))?;
    let v: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("`{value}` in `{s}` is not a number (ms, per 1,000 for a rate, Hz for loop_hz and command_hz)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{s}`: the effect must be above 0"));
    }
    Ok((name.trim().to_string(), v))
}

/// How to read evidence (shared by every command).
#[derive(Debug, Clone, clap::Args)]
pub struct InputArgs {
    /// Skip corrupt or inconsistent lines (and report how many).
    #[arg(long)]
    pub lenient: bool,
    /// The stage whose span starts count as command submissions (and an
    /// input-paced cycle's answer). Default: the stage the recording
    /// declares (its header's `command_stage`), else `robot_send_command`.
    #[arg(long, value_name = "STAGE")]
    pub command_stage: Option<String>,
    /// Input-paced cycles: an answer (the command span's start) later than
    /// this many µs after its input's arrival is late (default: the period).
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(1..))]
    pub answer_budget_us: Option<u64>,
}

impl InputArgs {
    pub(crate) fn load(self) -> LoadOptions {
        LoadOptions {
            lenient: self.lenient,
            progress: true,
            command_stage: self.command_stage,
            answer_budget_ns: self.answer_budget_us.map(|us| us.saturating_mul(1_000)),
            serde_only: false,
        }
    }
}

/// Where a report or comparison goes (shared by report and compare).
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Print the full result as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also save the JSON result to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Write a self-contained HTML page (and PNG/SVG plots) into this directory.
    #[arg(long)]
    pub html: Option<PathBuf>,
}

/// The thresholds of the summary's states (docs/metrics.md, Summary): each
/// flag replaces one default.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct JudgeArgs {
    /// Loop Hz within this many % of the effective rate passes [default: 0.5].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub pass_rate_within: Option<f64>,
    /// Loop Hz within this many % warns, beyond it fails [default: 2].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub warn_rate_within: Option<f64>,
    /// p99 period within this many % of the effective period passes [default: 10].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub pass_p99_within: Option<f64>,
    /// p99 period within this many % warns, beyond it fails [default: 25].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub warn_p99_within: Option<f64>,
    /// At most this many overruns pass [default: 0].
    #[arg(long, value_name = "N")]
    pub pass_overruns: Option<u64>,
    /// Overruns in at most this % of the cycles warn, more fail [default: 0.1].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub warn_overruns_within: Option<f64>,
    /// Stale data-age uses (older than their source's limit) in at most this
    /// % of a source's uses pass [default: 0.1].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub pass_stale_within: Option<f64>,
    /// Stale uses in at most this % warn, more fail [default: 1].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub warn_stale_within: Option<f64>,
    /// Late answers of an input-paced phase in at most this % of its
    /// answers pass [default: 0.1].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub pass_late_answers_within: Option<f64>,
    /// Late answers in at most this % warn, more fail [default: 1].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub warn_late_answers_within: Option<f64>,
    /// Budget overruns and completion misses (evidence that declares a
    /// compute budget or deadline tolerance) in at most this % of the
    /// cycles pass [default: 0.1].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub pass_budget_within: Option<f64>,
    /// Budget overruns and completion misses in at most this % warn, more
    /// fail [default: 1].
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub warn_budget_within: Option<f64>,
}

impl JudgeArgs {
    /// The thresholds: the defaults with the flags given.
    ///
    /// # Errors
    /// [`UsageError`] for a negative or non-finite percentage, or a warn
    /// threshold below its pass threshold.
    pub fn thresholds(&self) -> std::result::Result<Thresholds, UsageError> {
        let mut t = Thresholds::default();
        let pct = |flag: &str, v: Option<f64>, dflt: f64| match v {
            Some(x) if !(x.is_finite() && x >= 0.0) => Err(UsageError(format!(
                "--{flag} {x} is not a percentage: give a number of % at least 0"
            ))),
            Some(x) => Ok(x),
            None => Ok(dflt),
        };
        t.rate_pass_pct = pct("pass-rate-within", self.pass_rate_within, t.rate_pass_pct)?;
        t.rate_warn_pct = pct("warn-rate-within", self.warn_rate_within, t.rate_warn_pct)?;
        t.p99_pass_pct = pct("pass-p99-within", self.pass_p99_within, t.p99_pass_pct)?;
        t.p99_warn_pct = pct("warn-p99-within", self.warn_p99_within, t.p99_warn_pct)?;
        t.overruns_pass = self.pass_overruns.unwrap_or(t.overruns_pass);
        t.overruns_warn_pct = pct(
            "warn-overruns-within",
            self.warn_overruns_within,
            t.overruns_warn_pct,
        )?;
        t.stale_pass_pct = pct(
            "pass-stale-within",
            self.pass_stale_within,
            t.stale_pass_pct,
        )?;
        t.stale_warn_pct = pct(
            "warn-stale-within",
            self.warn_stale_within,
            t.stale_warn_pct,
        )?;
        t.late_answers_pass_pct = pct(
            "pass-late-answers-within",
            self.pass_late_answers_within,
            t.late_answers_pass_pct,
        )?;
        t.late_answers_warn_pct = pct(
            "warn-late-answers-within",
            self.warn_late_answers_within,
            t.late_answers_warn_pct,
        )?;
        t.budget_pass_pct = pct(
            "pass-budget-within",
            self.pass_budget_within,
            t.budget_pass_pct,
        )?;
        t.budget_warn_pct = pct(
            "warn-budget-within",
            self.warn_budget_within,
            t.budget_warn_pct,
        )?;
        for (what, pass, warn) in [
            ("budget", t.budget_pass_pct, t.budget_warn_pct),
            ("rate", t.rate_pass_pct, t.rate_warn_pct),
            ("p99", t.p99_pass_pct, t.p99_warn_pct),
            ("stale", t.stale_pass_pct, t.stale_warn_pct),
            (
                "late-answers",
                t.late_answers_pass_pct,
                t.late_answers_warn_pct,
            ),
        ] {
            if warn < pass {
                return Err(UsageError(format!(
                    "--warn-{what}-within {warn} is below --pass-{what}-within {pass}: the warn band lies beyond the pass band"
                )));
            }
        }
        Ok(t)
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Analyze one episode (same as --episode).
    Report {
        /// The episode directory.
        episode: PathBuf,
        /// How to read the evidence.
        #[command(flatten)]
        input: InputArgs,
        /// Where the report goes.
        #[command(flatten)]
        output: OutputArgs,
        /// The summary's thresholds.
        #[command(flatten)]
        judge: JudgeArgs,
        /// The CI gate and its summaries.
        #[command(flatten)]
        gate: GateArgs,
    },
    /// Write the episode's plots as PNG and SVG files.
    Plots {
        /// The episode directory.
        episode: PathBuf,
        /// Output directory (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// How to read the evidence.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Export evidence for other tools: a Chrome/Perfetto trace, an MCAP
    /// file for Foxglove or an HdrHistogram log of one episode, or a
    /// Parquet dataset of many.
    Export {
        /// Episode directories (or, for parquet, session directories too).
        #[arg(required = true)]
        episodes: Vec<PathBuf>,
        /// What to write.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// The output file (chrome, hdr, mcap) or dataset directory (parquet).
        #[arg(long)]
        out: PathBuf,
        /// With --format mcap: a recording (.mcap) to copy whole into --out,
        /// the loop's timing added on its timeline. The recording is never
        /// modified.
        #[arg(long, value_name = "RECORDING.mcap")]
        into: Option<PathBuf>,
        /// With --into: merge even when the recording's and the episode's
        /// time ranges do not overlap.
        #[arg(long)]
        force: bool,
        /// With --format mcap: how the output's chunks are compressed
        /// [default: zstd].
        #[arg(long, value_enum)]
        compression: Option<McapCompression>,
        /// How to read the evidence.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Analyze every episode under some roots in parallel into one table
    /// (Parquet and CSV), and name the worst episodes and the outliers.
    Fleet {
        /// Directories to search for episodes (runs dirs, sessions, episodes).
        #[arg(required = true)]
        roots: Vec<PathBuf>,
        /// Output directory for fleet.parquet, fleet.csv, errors.csv and
        /// fleet_summary.txt (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// Episodes analyzed at once (default: the number of CPUs). Memory
        /// is bounded by this many episodes.
        #[arg(long)]
        jobs: Option<usize>,
        /// Rows in each phase's worst list.
        #[arg(long, default_value_t = 5)]
        worst: usize,
        /// Print the summary as JSON (format looptime-fleet/1) instead of
        /// text.
        #[arg(long)]
        json: bool,
        /// How to read the evidence.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Compare two runs that differ in one setting. Each side is an episode
    /// directory or a session directory (all its rollouts); --a and --b add
    /// further episodes or sessions to a side.
    Compare {
        /// Side A (the baseline): an episode or a session directory.
        #[arg(value_name = "A", required_unless_present = "more_a")]
        a_path: Option<PathBuf>,
        /// Side B (the change): an episode or a session directory.
        #[arg(value_name = "B", required_unless_present = "more_b")]
        b_path: Option<PathBuf>,
        /// Another episode or session of side A (repeatable).
        #[arg(long = "a", value_name = "DIR")]
        more_a: Vec<PathBuf>,
        /// Another episode or session of side B (repeatable).
        #[arg(long = "b", value_name = "DIR")]
        more_b: Vec<PathBuf>,
        /// How to read the evidence.
        #[command(flatten)]
        input: InputArgs,
        /// Where the comparison goes.
        #[command(flatten)]
        output: OutputArgs,
        /// Bootstrap resamples per metric.
        #[arg(long, default_value_t = 400)]
        resamples: u32,
        /// Bootstrap seed.
        #[arg(long, default_value_t = 0x5EED_1007)]
        seed: u64,
        /// The CI gate and its summaries.
        #[command(flatten)]
        gate: GateArgs,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell) on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write a man page for `analyze_control_timing` and one per subcommand
    /// into DIR (`analyze_control_timing.1`, `analyze_control_timing-compare.1`, …).
    Man {
        /// Where the pages go (created if missing).
        dir: PathBuf,
    },
}

/// How an MCAP export's chunks are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum McapCompression {
    /// zstd (the MCAP tools' and rosbag2's usual choice).
    Zstd,
    /// lz4: faster to write, larger.
    Lz4,
    /// No compression.
    None,
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Trace Event Format JSON (ui.perfetto.dev, chrome://tracing, Tracy's importer).
    Chrome,
    /// HdrHistogram interval log (V2 compressed histograms, base64).
    Hdr,
    /// A Hive-partitioned Parquet dataset (a directory; several episodes).
    Parquet,
    /// MCAP with JSON messages and JSON Schemas (Foxglove), on the wall-clock timeline.
    Mcap,
}

/// A validated export request.
#[derive(Debug)]
pub struct ExportRequest {
    /// Episode or session directories (one for chrome, hdr and mcap).
    pub episodes: Vec<PathBuf>,
    /// What to write.
    pub format: ExportFormat,
    /// Where.
    pub out: PathBuf,
    /// With mcap: the recording to merge into.
    pub into: Option<PathBuf>,
    /// With `into`: merge even without overlapping time ranges.
    pub force: bool,
    /// With mcap: how the output's chunks are compressed.
    pub compression: crate::export::mcap::Compression,
    /// Loader options.
    pub load: LoadOptions,
}

/// A validated fleet request.
#[derive(Debug)]
pub struct FleetRequest {
    /// Directories to search.
    pub roots: Vec<PathBuf>,
    /// Output directory.
    pub out: PathBuf,
    /// Workers (at least 1).
    pub jobs: usize,
    /// Rows per worst list.
    pub worst: usize,
    /// Print JSON.
    pub json: bool,
    /// Loader options.
    pub load: LoadOptions,
}

/// A validated comparison request.
#[derive(Debug)]
pub struct CompareRequest {
    /// Side A: episode or session directories, as given.
    pub a: Vec<PathBuf>,
    /// Side B.
    pub b: Vec<PathBuf>,
    /// Loader options.
    pub load: LoadOptions,
    /// JSON, file and HTML outputs.
    pub output: OutputArgs,
    /// Bootstrap settings.
    pub bootstrap: crate::compare::BootstrapConfig,
    /// The gate.
    pub gate: GateArgs,
}

/// A validated request.
#[derive(Debug)]
pub struct ReportRequest {
    /// Episode directory.
    pub episode: PathBuf,
    /// Loader options.
    pub load: LoadOptions,
    /// JSON, file and HTML outputs.
    pub output: OutputArgs,
    /// Only write plots (PNG and SVG) into this directory.
    pub plots_only: Option<PathBuf>,
    /// The summary's thresholds.
    pub thresholds: Thresholds,
    /// The gate.
    pub gate: GateArgs,
}

/// What to do.
#[derive(Debug)]
pub enum Command {
    /// Analyze one episode.
    Report(ReportRequest),
    /// Compare two episodes.
    Compare(CompareRequest),
    /// Export one episode.
    Export(ExportRequest),
    /// Analyze a fleet.
    Fleet(FleetRequest),
    /// Print a shell completion script.
    Completions(clap_complete::Shell),
    /// Write the man pages into a directory.
    Man(PathBuf),
}

/// Validation failure of the arguments.
#[derive(Debug)]
pub struct UsageError(pub String);
