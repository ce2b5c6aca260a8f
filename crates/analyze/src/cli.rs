//! The `analyze_control_timing` command line: arguments are parsed, then
//! validated into [`Command`]; nothing past this module sees raw strings.

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::error::{AnalyzeError, Result};
use crate::load::{load_episode, LoadOptions};
use crate::metrics::{analyze, AnalyzeOptions, Report};

/// Exit code: the analysis ran.
pub const EXIT_OK: i32 = 0;
/// Exit code: the input is unusable (missing, empty, corrupt, unknown version).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code: the report could not be written.
pub const EXIT_WRITE: i32 = 3;
/// Exit code: command-line usage error (clap's own).
pub const EXIT_USAGE: i32 = 2;

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
    /// Print the full report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also save the JSON report to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Skip corrupt or inconsistent lines (and report how many).
    #[arg(long)]
    pub lenient: bool,
    /// Write a self-contained HTML report (and PNG/SVG plots) into this directory.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// The stage whose span starts count as command submissions.
    #[arg(long, default_value = "robot_send_command")]
    pub command_stage: String,
    /// Subcommands.
    #[command(subcommand)]
    pub command: Option<Sub>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Analyze one episode (same as --episode).
    Report {
        /// The episode directory.
        episode: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Save the JSON report.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Skip bad lines.
        #[arg(long)]
        lenient: bool,
        /// Write a self-contained HTML report (and PNG/SVG plots) here.
        #[arg(long)]
        html: Option<PathBuf>,
    },
    /// Write the episode's plots as PNG and SVG files.
    Plots {
        /// The episode directory.
        episode: PathBuf,
        /// Output directory (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// Skip bad lines.
        #[arg(long)]
        lenient: bool,
    },
    /// Compare two episodes that differ in one setting.
    Compare {
        /// Episode A (the baseline).
        a: PathBuf,
        /// Episode B (the change).
        b: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Save the JSON comparison.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Skip bad lines.
        #[arg(long)]
        lenient: bool,
        /// Bootstrap resamples per metric.
        #[arg(long, default_value_t = 400)]
        resamples: u32,
        /// Bootstrap seed.
        #[arg(long, default_value_t = 0x5EED_1007)]
        seed: u64,
        /// Write a self-contained HTML comparison (and PNG/SVG plots) here.
        #[arg(long)]
        html: Option<PathBuf>,
    },
}

/// A validated comparison request.
#[derive(Debug)]
pub struct CompareRequest {
    /// Episode A.
    pub a: PathBuf,
    /// Episode B.
    pub b: PathBuf,
    /// JSON to stdout.
    pub json: bool,
    /// Save JSON here.
    pub output: Option<PathBuf>,
    /// Loader options.
    pub load: LoadOptions,
    /// Analysis options.
    pub analyze: AnalyzeOptions,
    /// Bootstrap settings.
    pub bootstrap: crate::compare::BootstrapConfig,
    /// HTML output directory.
    pub html: Option<PathBuf>,
}

/// A validated request.
#[derive(Debug)]
pub struct ReportRequest {
    /// Episode directory.
    pub episode: PathBuf,
    /// JSON to stdout.
    pub json: bool,
    /// Save JSON here.
    pub output: Option<PathBuf>,
    /// Loader options.
    pub load: LoadOptions,
    /// Analysis options.
    pub analyze: AnalyzeOptions,
    /// HTML output directory.
    pub html: Option<PathBuf>,
    /// Only write plots (PNG and SVG) into this directory.
    pub plots_only: Option<PathBuf>,
}

/// What to do.
#[derive(Debug)]
pub enum Command {
    /// Analyze one episode.
    Report(ReportRequest),
    /// Compare two episodes.
    Compare(CompareRequest),
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
        let analyze = AnalyzeOptions {
            command_stage: self.command_stage,
        };
        match self.command {
            Some(Sub::Report {
                episode,
                json,
                output,
                lenient,
                html,
            }) => Ok(Command::Report(ReportRequest {
                episode,
                json,
                output,
                load: LoadOptions {
                    lenient,
                    progress: true,
                    command_stage: analyze.command_stage.clone(),
                },
                analyze,
                html,
                plots_only: None,
            })),
            Some(Sub::Plots {
                episode,
                out,
                lenient,
            }) => Ok(Command::Report(ReportRequest {
                episode,
                json: false,
                output: None,
                load: LoadOptions {
                    lenient,
                    progress: true,
                    command_stage: analyze.command_stage.clone(),
                },
                analyze,
                html: None,
                plots_only: Some(out),
            })),
            Some(Sub::Compare {
                a,
                b,
                json,
                output,
                lenient,
                resamples,
                seed,
                html,
            }) => {
                if resamples == 0 {
                    return Err(UsageError("--resamples must be at least 1".into()));
                }
                Ok(Command::Compare(CompareRequest {
                    a,
                    b,
                    json,
                    output,
                    load: LoadOptions {
                        lenient,
                        progress: true,
                        command_stage: analyze.command_stage.clone(),
                    },
                    analyze,
                    bootstrap: crate::compare::BootstrapConfig { resamples, seed },
                    html,
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
                    json: self.json,
                    output: self.output,
                    load: LoadOptions {
                        lenient: self.lenient,
                        progress: true,
                        command_stage: analyze.command_stage.clone(),
                    },
                    analyze,
                    html: self.html,
                    plots_only: None,
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
    std::fs::write(&path, text).map_err(|source| AnalyzeError::Write { path, source })
}

/// Deterministic JSON of a report (struct field order, sorted maps).
///
/// # Errors
/// Never in practice (the report is plain data).
pub fn report_json(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
    s.push('\n');
    s
}

/// Analyze one episode.
///
/// # Errors
/// [`AnalyzeError`] for unusable input or a failed write.
pub fn run_report(req: &ReportRequest, out: &mut dyn Write) -> Result<Report> {
    let ev = load_episode(&req.episode, req.load.clone())?;
    let report = analyze(&ev, &req.analyze)?;
    if let Some(dir) = &req.plots_only {
        make_dir(dir)?;
        let plots = crate::plots::episode_plots(&ev, &report, Some(dir))?;
        for p in &plots {
            let _ = writeln!(out, "{}", dir.join(format!("{}.png", p.name)).display());
            let _ = writeln!(out, "{}", dir.join(format!("{}.svg", p.name)).display());
        }
        return Ok(report);
    }
    if let Some(dir) = &req.html {
        make_dir(dir)?;
        let plots = crate::plots::episode_plots(&ev, &report, Some(dir))?;
        write_text(
            dir.join("report.html"),
            &crate::html::report_page(&report, &plots),
        )?;
        eprintln!("wrote {}", dir.join("report.html").display());
    }
    emit(
        out,
        &report_json(&report),
        || crate::text::render(&report),
        req.json,
        req.output.as_deref(),
    )?;
    Ok(report)
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
    let shown = if as_json { json.to_string() } else { text() };
    out.write_all(shown.as_bytes())
        .map_err(|source| AnalyzeError::Write {
            path: PathBuf::from("<stdout>"),
            source,
        })
}

/// Compare two episodes.
///
/// # Errors
/// [`AnalyzeError`] for unusable input on either side or a failed write.
pub fn run_compare(
    req: &CompareRequest,
    out: &mut dyn Write,
) -> Result<crate::compare::Comparison> {
    let ea = load_episode(&req.a, req.load.clone())?;
    let ra = analyze(&ea, &req.analyze)?;
    let eb = load_episode(&req.b, req.load.clone())?;
    let rb = analyze(&eb, &req.analyze)?;
    let c = crate::compare::compare((&ea, &ra), (&eb, &rb), req.bootstrap);
    if let Some(dir) = &req.html {
        make_dir(dir)?;
        let plots = crate::plots::compare_plots((&ea, &ra), (&eb, &rb), &c, Some(dir))?;
        write_text(
            dir.join("compare.html"),
            &crate::html::compare_page(&c, &plots),
        )?;
        eprintln!("wrote {}", dir.join("compare.html").display());
    }
    let mut json = serde_json::to_string_pretty(&c).unwrap_or_default();
    json.push('\n');
    emit(
        out,
        &json,
        || crate::compare::render(&c),
        req.json,
        req.output.as_deref(),
    )?;
    Ok(c)
}

/// Run the CLI; returns the exit code. Errors are printed once to stderr.
pub fn run(cli: Cli) -> i32 {
    let cmd = match cli.validate() {
        Ok(c) => c,
        Err(UsageError(msg)) => {
            eprintln!("error: {msg}");
            return EXIT_USAGE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    let result = match &cmd {
        Command::Report(req) => run_report(req, &mut stdout).map(|_| ()),
        Command::Compare(req) => run_compare(req, &mut stdout).map(|_| ()),
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("error: {e}");
            match e {
                AnalyzeError::Write { .. } | AnalyzeError::Plot(_) => EXIT_WRITE,
                _ => EXIT_BAD_INPUT,
            }
        }
    }
}
