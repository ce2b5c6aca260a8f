//! The `analyze_control_timing` command line: arguments are parsed, then
//! validated into [`Command`]; nothing past this module sees raw strings.

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::analysis::analyze;
use crate::error::{AnalyzeError, Result};
use crate::evidence::{load_episode, LoadOptions};
use crate::metrics::{Report, Thresholds};

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
    /// Subcommands.
    #[command(subcommand)]
    pub command: Option<Sub>,
}

/// How to read evidence (shared by every command).
#[derive(Debug, Clone, clap::Args)]
pub struct InputArgs {
    /// Skip corrupt or inconsistent lines (and report how many).
    #[arg(long)]
    pub lenient: bool,
    /// The stage whose span starts count as command submissions.
    #[arg(long, default_value = "robot_send_command")]
    pub command_stage: String,
}

impl InputArgs {
    fn load(self) -> LoadOptions {
        LoadOptions {
            lenient: self.lenient,
            progress: true,
            command_stage: self.command_stage,
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
        for (what, pass, warn) in [
            ("rate", t.rate_pass_pct, t.rate_warn_pct),
            ("p99", t.p99_pass_pct, t.p99_warn_pct),
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

impl Cli {
    /// Turn raw arguments into a [`Command`].
    ///
    /// # Errors
    /// [`UsageError`] when no episode is given.
    pub fn validate(self) -> std::result::Result<Command, UsageError> {
        match self.command {
            Some(Sub::Report {
                episode,
                input,
                output,
                judge,
            }) => Ok(Command::Report(ReportRequest {
                episode,
                load: input.load(),
                output,
                plots_only: None,
                thresholds: judge.thresholds()?,
            })),
            Some(Sub::Plots {
                episode,
                out,
                input,
            }) => Ok(Command::Report(ReportRequest {
                episode,
                load: input.load(),
                output: OutputArgs {
                    json: false,
                    output: None,
                    html: None,
                },
                plots_only: Some(out),
                thresholds: Thresholds::default(),
            })),
            Some(Sub::Compare {
                a_path,
                b_path,
                more_a,
                more_b,
                input,
                output,
                resamples,
                seed,
            }) => {
                if resamples == 0 {
                    return Err(UsageError("--resamples must be at least 1".into()));
                }
                let side = |first: Option<PathBuf>, more: Vec<PathBuf>| -> Vec<PathBuf> {
                    first.into_iter().chain(more).collect()
                };
                let (a, b) = (side(a_path, more_a), side(b_path, more_b));
                if a.is_empty() || b.is_empty() {
                    return Err(UsageError(
                        "give both sides: analyze_control_timing compare A B (each an episode or a session directory)".into(),
                    ));
                }
                Ok(Command::Compare(CompareRequest {
                    a,
                    b,
                    load: input.load(),
                    output,
                    bootstrap: crate::compare::BootstrapConfig { resamples, seed },
                }))
            }
            Some(Sub::Export {
                episodes,
                format,
                out,
                into,
                force,
                compression,
                input,
            }) => {
                if compression.is_some() && format != ExportFormat::Mcap {
                    return Err(UsageError(
                        "--compression applies to MCAP output: it needs --format mcap".into(),
                    ));
                }
                if into.is_some() && format != ExportFormat::Mcap {
                    return Err(UsageError(
                        "--into merges into an MCAP recording: it needs --format mcap".into(),
                    ));
                }
                if force && into.is_none() {
                    return Err(UsageError(
                        "--force only applies to --into (merging into a recording)".into(),
                    ));
                }
                if let Some(r) = &into {
                    let same = match (r.canonicalize(), out.canonicalize()) {
                        (Ok(a), Ok(b)) => a == b,
                        _ => r == &out,
                    };
                    if same {
                        return Err(UsageError(format!(
                            "--out {} is the recording itself: --into never modifies the recording, so write the merged file elsewhere",
                            out.display()
                        )));
                    }
                }
                if format != ExportFormat::Parquet && episodes.len() != 1 {
                    return Err(UsageError(format!(
                        "--format {} exports one episode; {} given (a Parquet dataset takes several: --format parquet)",
                        match format {
                            ExportFormat::Chrome => "chrome",
                            ExportFormat::Mcap => "mcap",
                            _ => "hdr",
                        },
                        episodes.len()
                    )));
                }
                Ok(Command::Export(ExportRequest {
                    episodes,
                    format,
                    out,
                    into,
                    force,
                    compression: match compression {
                        None | Some(McapCompression::Zstd) => {
                            crate::export::mcap::Compression::Zstd
                        }
                        Some(McapCompression::Lz4) => crate::export::mcap::Compression::Lz4,
                        Some(McapCompression::None) => crate::export::mcap::Compression::None,
                    },
                    load: input.load(),
                }))
            }
            Some(Sub::Completions { shell }) => Ok(Command::Completions(shell)),
            Some(Sub::Man { dir }) => Ok(Command::Man(dir)),
            Some(Sub::Fleet {
                roots,
                out,
                jobs,
                worst,
                json,
                input,
            }) => {
                if jobs == Some(0) {
                    return Err(UsageError("--jobs must be at least 1".into()));
                }
                let jobs = jobs.unwrap_or_else(|| {
                    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
                });
                Ok(Command::Fleet(FleetRequest {
                    roots,
                    out,
                    jobs,
                    worst,
                    json,
                    load: input.load(),
                }))
            }
            None => {
                let episode = self.episode.ok_or_else(|| {
                    UsageError(
                        "give an episode directory: analyze_control_timing --episode runs/latest"
                            .into(),
                    )
                })?;
                Ok(Command::Report(ReportRequest {
                    episode,
                    load: self.input.load(),
                    output: self.output,
                    plots_only: None,
                    thresholds: self.judge.thresholds()?,
                }))
            }
        }
    }
}

fn make_dir(dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| AnalyzeError::Write {
        path: dir.to_path_buf(),
        source,
    })
}

fn write_text(path: PathBuf, text: &str) -> Result<()> {
    crate::atomic::write_bytes(&path, text.as_bytes()).map(|_| ())
}

/// Analyze one episode.
///
/// # Errors
/// [`AnalyzeError`] for unusable input or a failed write.
pub fn run_report(req: &ReportRequest, out: &mut dyn Write) -> Result<Report> {
    let mut a = analyze(load_episode(&req.episode, req.load.clone())?)?;
    if req.thresholds != Thresholds::default() {
        a.judge(&req.thresholds);
    }
    if let Some(dir) = &req.plots_only {
        make_dir(dir)?;
        let plots = crate::render::plots::episode_plots(&a, Some(dir))?;
        for p in &plots {
            let _ = writeln!(out, "{}", dir.join(format!("{}.png", p.name)).display());
            let _ = writeln!(out, "{}", dir.join(format!("{}.svg", p.name)).display());
        }
        return Ok(a.report);
    }
    let report = &a.report;
    if let Some(dir) = &req.output.html {
        make_dir(dir)?;
        let plots = crate::render::plots::episode_plots(&a, Some(dir))?;
        write_text(
            dir.join("report.html"),
            &crate::render::html::report_page(report, &plots),
        )?;
        eprintln!("wrote {}", dir.join("report.html").display());
    }
    let s = crate::profile::step("render: text or JSON, and write");
    emit(
        out,
        &crate::render::json(report),
        || crate::render::text::render(report),
        req.output.json,
        req.output.output.as_deref(),
    )?;
    drop(s);
    Ok(a.report)
}

/// Save `json` to `output` (if given), then print JSON or the text form.
fn emit(
    out: &mut dyn Write,
    json: &str,
    text: impl FnOnce() -> String,
    as_json: bool,
    output: Option<&std::path::Path>,
) -> Result<()> {
    if let Some(path) = output {
        write_text(path.to_path_buf(), json)?;
    }
    let shown = if as_json {
        json.to_string()
    } else {
        crate::render::text::terminal_safe(&text()).into_owned()
    };
    out.write_all(shown.as_bytes())
        .map_err(|source| AnalyzeError::Write {
            path: PathBuf::from("<stdout>"),
            source,
        })
}

/// Export one episode to a file (written to a temporary beside it, then
/// renamed, so a failed export leaves no partial file).
///
/// # Errors
/// [`AnalyzeError`] for unusable input or a failed write.
pub fn run_export(req: &ExportRequest) -> Result<()> {
    if let Some(recording) = &req.into {
        return run_into(req, recording);
    }
    type Writer = fn(
        &crate::analysis::Analysis,
        &mut std::io::BufWriter<std::fs::File>,
        &std::path::Path,
        &ExportRequest,
    ) -> Result<String>;
    let write: Writer = match req.format {
        ExportFormat::Parquet => return run_dataset_export(req),
        ExportFormat::Chrome => write_chrome,
        ExportFormat::Hdr => write_hdr,
        ExportFormat::Mcap => write_mcap,
    };
    let a = analyze(load_episode(&req.episodes[0], req.load.clone())?)?;
    let out = &req.out;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        make_dir(dir)?;
    }
    let mut what = String::new();
    crate::atomic::write_atomic(out, |w| {
        what = write(&a, w, out, req)?;
        Ok(())
    })?;
    eprintln!("wrote {} ({what})", out.display());
    Ok(())
}

/// `export --format mcap --into RECORDING`: the recording copied whole with
/// the episode's channels added, written atomically to `--out`.
fn run_into(req: &ExportRequest, recording: &std::path::Path) -> Result<()> {
    let file = std::fs::File::open(recording).map_err(|e| AnalyzeError::Recording {
        path: recording.to_path_buf(),
        why: format!("cannot be read ({e}); give the .mcap file of the recording"),
    })?;
    let a = analyze(load_episode(&req.episodes[0], req.load.clone())?)?;
    let out = &req.out;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        make_dir(dir)?;
    }
    let mut done = None;
    crate::atomic::write_atomic(out, |w| {
        done = Some(crate::export::mcap_into::write_into(
            &a,
            &file,
            recording,
            req.force,
            req.compression,
            w,
            out,
        )?);
        Ok(())
    })?;
    if let Some(s) = done {
        let added: u64 = s.added.messages.values().sum();
        eprintln!(
            "wrote {} ({} messages and {} schema, channel, attachment and metadata records of {}, unchanged; {added} looptime messages on {} channels, on its wall-clock timeline)",
            out.display(),
            s.copied_messages,
            s.copied_records,
            recording.display(),
            s.added.messages.len()
        );
    }
    Ok(())
}

/// The MCAP file of `a` into `w` (errors name `out`).
fn write_mcap(
    a: &crate::analysis::Analysis,
    w: &mut std::io::BufWriter<std::fs::File>,
    out: &std::path::Path,
    req: &ExportRequest,
) -> Result<String> {
    let s = crate::export::mcap::write(a, w, out, req.compression)?;
    let total: u64 = s.messages.values().sum();
    let timebase = match s.anchor_uncertainty_ns {
        Some(u) => format!("times are wall-clock ns through the evidence's start anchor (±{u} ns)"),
        None => "times are host-monotonic ns: the evidence has no wall-clock anchor (recorded before looptime wrote one), so they will not line up with a robot recording's wall-clock times".to_string(),
    };
    Ok(format!(
        "{total} messages on {} channels; {timebase}",
        s.messages.len()
    ))
}

/// The trace of `ev` into `w` (errors name `out`).
fn write_chrome(
    a: &crate::analysis::Analysis,
    w: &mut std::io::BufWriter<std::fs::File>,
    out: &std::path::Path,
    _req: &ExportRequest,
) -> Result<String> {
    let n = crate::export::chrome::write(a, w, out)?;
    Ok(format!("{n} trace events"))
}

/// The HdrHistogram log of `ev` into `w` (errors name `out`).
fn write_hdr(
    a: &crate::analysis::Analysis,
    w: &mut std::io::BufWriter<std::fs::File>,
    out: &std::path::Path,
    _req: &ExportRequest,
) -> Result<String> {
    let log = crate::export::hdr_log(a)?;
    let n = log.lines().filter(|l| l.starts_with("Tag=")).count();
    w.write_all(log.as_bytes())
        .map_err(|source| AnalyzeError::Write {
            path: out.to_path_buf(),
            source,
        })?;
    Ok(format!("{n} histograms"))
}

/// Export episodes (and sessions' rollouts) into a Parquet dataset. A bad
/// episode is reported and skipped; the others are written.
///
/// # Errors
/// The only episode's error when none could be written;
/// [`AnalyzeError::Partial`] (after writing the others) when some were
/// left out, bad or without evidence.
pub fn run_dataset_export(req: &ExportRequest) -> Result<()> {
    let found = crate::evidence::find_episodes(&req.episodes, crate::evidence::Search::Sessions)?;
    make_dir(&req.out)?;
    let mut load = req.load.clone();
    load.progress = false;
    for d in &found.without_evidence {
        eprintln!(
            "note: {} has no {}; left out of the dataset (`looptime recover` may rebuild it)",
            d.display(),
            looptime_capture::format::CYCLES_FILE
        );
    }
    let (mut bytes, mut rows, mut written, mut first_error) = (0u64, [0u64; 4], 0usize, None);
    let total = found.episodes.len();
    for (i, dir) in found.episodes.iter().enumerate() {
        let done = (|| -> Result<crate::export::parquet::Written> {
            let a = analyze(load_episode(dir, load.clone())?)?;
            crate::export::parquet::write_episode(&req.out, &a)
        })();
        match done {
            Ok(w) => {
                written += 1;
                bytes += w.bytes;
                for (r, x) in rows.iter_mut().zip(w.rows) {
                    *r += x;
                }
            }
            Err(e) => {
                eprintln!(
                    "\nerror: {}: {}",
                    dir.display(),
                    crate::render::text::terminal_safe(&looptime_capture::error_chain(&e))
                );
                // Its earlier export, if any, would otherwise stay as if
                // this one had succeeded.
                for part in crate::export::parquet::remove_episode(&req.out, dir)? {
                    eprintln!(
                        "removed {}'s earlier export from the dataset: {} (in every table)",
                        dir.display(),
                        part.display()
                    );
                }
                first_error.get_or_insert(e);
            }
        }
        eprint!("\rexported {}/{total} episodes", i + 1);
    }
    eprintln!(
        "\nwrote {} ({} cycles, {} spans, {} values, {written} episodes; {:.1} MB)",
        req.out.display(),
        rows[0],
        rows[1],
        rows[2],
        bytes as f64 / 1e6
    );
    let left_out = total - written + found.without_evidence.len();
    match first_error {
        // Nothing usable: the first episode's error, exit 2 (docs/dataset.md).
        Some(e) if written == 0 => Err(e),
        _ if left_out > 0 => Err(AnalyzeError::Partial {
            used: written,
            found: total + found.without_evidence.len(),
            left_out,
            where_listed: "named above".into(),
            hint: if found.without_evidence.is_empty() {
                String::new()
            } else {
                RECOVER_HINT.into()
            },
        }),
        _ => Ok(()),
    }
}

/// Analyze every episode under the roots into the fleet table, print the
/// summary, and return the fleet.
///
/// # Errors
/// A root that is not a directory or no episode found
/// ([`AnalyzeError::NoEpisodes`]); a failed write;
/// [`AnalyzeError::FleetFailed`] when no episode could be analyzed;
/// [`AnalyzeError::Partial`] (after writing everything) when some failed.
pub fn run_fleet(req: &FleetRequest, out: &mut dyn Write) -> Result<crate::fleet::Fleet> {
    use crate::fleet::table;
    let dirs = crate::fleet::discover(&req.roots)?;
    if dirs.is_empty() {
        return Err(AnalyzeError::NoEpisodes {
            roots: req.roots.clone(),
        });
    }
    let bar = indicatif::ProgressBar::new(dirs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} episodes, {per_sec}, eta {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let failed = std::sync::atomic::AtomicUsize::new(0);
    let started = std::time::Instant::now();
    let fleet = crate::fleet::analyze_all(&dirs, req.jobs, &req.load, &|_, bad| {
        if bad {
            let n = failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            bar.set_message(format!("({n} failed)"));
        }
        bar.inc(1);
    });
    bar.finish_and_clear();
    // Found = analyzed + failed, or the table would silently miss episodes
    // (docs/fleet.md); `analyze_all` keeps it by construction, and this is
    // the last line of defence before anything is written.
    if !fleet.is_whole() {
        return Err(AnalyzeError::Partial {
            used: fleet.analyzed,
            found: fleet.found,
            left_out: fleet.found - fleet.analyzed.min(fleet.found),
            where_listed: format!(
                "{} of them unaccounted for, an internal error; please report it",
                fleet.found - (fleet.analyzed + fleet.failures.len()).min(fleet.found)
            ),
            hint: String::new(),
        });
    }
    let elapsed = started.elapsed().as_secs_f64();
    let summary = fleet.summary(req.worst);
    let text = crate::render::fleet_text::render(&summary, elapsed, req.jobs);
    table::write(&req.out, &fleet, &text)?;
    let shown = if req.json {
        crate::render::json(&summary)
    } else {
        crate::render::text::terminal_safe(&text).into_owned()
    };
    out.write_all(shown.as_bytes())
        .map_err(|source| AnalyzeError::Write {
            path: PathBuf::from("<stdout>"),
            source,
        })?;
    eprintln!(
        "wrote {} ({} rows; {}, {}, {}, {})",
        req.out.display(),
        fleet.rows.len(),
        table::TABLE_PARQUET,
        table::TABLE_CSV,
        table::ERRORS_CSV,
        table::SUMMARY_TXT
    );
    let errors = req.out.join(table::ERRORS_CSV);
    if fleet.analyzed == 0 {
        return Err(AnalyzeError::FleetFailed {
            found: fleet.found,
            errors,
        });
    }
    if !fleet.failures.is_empty() {
        let no_evidence = fleet.failures.iter().any(|f| f.kind == "no_evidence");
        return Err(AnalyzeError::Partial {
            used: fleet.analyzed,
            found: fleet.found,
            left_out: fleet.failures.len(),
            where_listed: format!("listed with their errors in {}", errors.display()),
            hint: if no_evidence {
                RECOVER_HINT.into()
            } else {
                String::new()
            },
        });
    }
    Ok(fleet)
}

/// The advice for rollouts without evidence.
const RECOVER_HINT: &str =
    "; a rollout without control_timing.jsonl may need `looptime recover` (docs/durability.md)";

/// Write `cmd`'s man page and one per subcommand (named `NAME-SUB`) into
/// `dir`, each through the one atomic write.
///
/// # Errors
/// [`AnalyzeError::Write`] for a page or a directory that cannot be written.
pub fn man_pages(cmd: clap::Command, dir: &std::path::Path) -> Result<()> {
    make_dir(dir)?;
    let name = cmd.get_name().to_string();
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .map(|s| s.clone().name(format!("{name}-{}", s.get_name())))
        .collect();
    for page in std::iter::once(cmd).chain(subs) {
        let path = dir.join(format!("{}.1", page.get_name()));
        crate::atomic::write_atomic(&path, |w| {
            clap_mangen::Man::new(page)
                .render(w)
                .map_err(|source| AnalyzeError::Write {
                    path: path.clone(),
                    source,
                })
        })?;
    }
    eprintln!("wrote the man pages into {}", dir.display());
    Ok(())
}

/// Compare two episodes.
///
/// # Errors
/// [`AnalyzeError`] for unusable input on either side or a failed write.
pub fn run_compare(
    req: &CompareRequest,
    out: &mut dyn Write,
) -> Result<crate::compare::Comparison> {
    let mut left_out = Vec::new();
    let mut load_side = |label: &str,
                         paths: &[PathBuf]|
     -> Result<Vec<crate::analysis::Analysis>> {
        let found = crate::evidence::find_episodes(paths, crate::evidence::Search::Sessions)?;
        for d in &found.without_evidence {
            eprintln!(
                "note: {} has no {}; left out of the comparison (`looptime recover` may rebuild it)",
                d.display(),
                looptime_capture::format::CYCLES_FILE
            );
            left_out.push(format!("{label}: {}", d.display()));
        }
        let mut out = Vec::new();
        for dir in found.episodes {
            out.push(analyze(load_episode(&dir, req.load.clone())?)?);
        }
        Ok(out)
    };
    let (la, lb) = (load_side("A", &req.a)?, load_side("B", &req.b)?);
    let (sa, sb): (Vec<_>, Vec<_>) = (la.iter().collect(), lb.iter().collect());
    let mut c = crate::compare::compare(&sa, &sb, req.bootstrap);
    c.left_out = left_out;
    if let Some(dir) = &req.output.html {
        make_dir(dir)?;
        let plots = crate::render::plots::compare_plots(&sa, &sb, &c, Some(dir))?;
        write_text(
            dir.join("compare.html"),
            &crate::render::html::compare_page(&c, &plots),
        )?;
        eprintln!("wrote {}", dir.join("compare.html").display());
    }
    emit(
        out,
        &crate::render::json(&c),
        || crate::render::compare_text::render(&c),
        req.output.json,
        req.output.output.as_deref(),
    )?;
    if !c.left_out.is_empty() {
        let used = c.a_episodes.len() + c.b_episodes.len();
        return Err(AnalyzeError::Partial {
            used,
            found: used + c.left_out.len(),
            left_out: c.left_out.len(),
            where_listed: "listed under `left out` in the comparison".into(),
            hint: RECOVER_HINT.into(),
        });
    }
    Ok(c)
}

/// Run the CLI; returns the exit code. Errors are printed once to stderr.
pub fn run(cli: Cli) -> i32 {
    let cmd = match cli.validate() {
        Ok(c) => c,
        Err(UsageError(msg)) => {
            eprintln!("error: {}", crate::render::text::terminal_safe(&msg));
            return EXIT_USAGE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    let result = match &cmd {
        Command::Report(req) => run_report(req, &mut stdout).map(|_| ()),
        Command::Compare(req) => run_compare(req, &mut stdout).map(|_| ()),
        Command::Export(req) => run_export(req),
        Command::Fleet(req) => run_fleet(req, &mut stdout).map(|_| ()),
        Command::Completions(shell) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut cmd, "analyze_control_timing", &mut stdout);
            Ok(())
        }
        Command::Man(dir) => man_pages(<Cli as clap::CommandFactory>::command(), dir),
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            let message = looptime_capture::error_chain(&e);
            eprintln!("error: {}", crate::render::text::terminal_safe(&message));
            match e {
                AnalyzeError::Write { .. } | AnalyzeError::Plot(_) => EXIT_WRITE,
                AnalyzeError::Partial { .. } => EXIT_PARTIAL,
                _ => EXIT_BAD_INPUT,
            }
        }
    }
}
