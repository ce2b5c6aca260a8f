//! The `analyze_control_timing` command line: arguments are parsed, then
//! validated into [`Command`]; nothing past this module sees raw strings.

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::analysis::analyze;
use crate::error::{AnalyzeError, Result};
use crate::evidence::{load_episode, LoadOptions};
use crate::metrics::Report;

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
    /// How to read the evidence.
    #[command(flatten)]
    pub input: InputArgs,
    /// Where the report goes.
    #[command(flatten)]
    pub output: OutputArgs,
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
    /// Compare two episodes that differ in one setting.
    Compare {
        /// Episode A (the baseline).
        a: PathBuf,
        /// Episode B (the change).
        b: PathBuf,
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
}

/// A validated comparison request.
#[derive(Debug)]
pub struct CompareRequest {
    /// Episode A.
    pub a: PathBuf,
    /// Episode B.
    pub b: PathBuf,
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
        match self.command {
            Some(Sub::Report {
                episode,
                input,
                output,
            }) => Ok(Command::Report(ReportRequest {
                episode,
                load: input.load(),
                output,
                plots_only: None,
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
            })),
            Some(Sub::Compare {
                a,
                b,
                input,
                output,
                resamples,
                seed,
            }) => {
                if resamples == 0 {
                    return Err(UsageError("--resamples must be at least 1".into()));
                }
                Ok(Command::Compare(CompareRequest {
                    a,
                    b,
                    load: input.load(),
                    output,
                    bootstrap: crate::compare::BootstrapConfig { resamples, seed },
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

/// Analyze one episode.
///
/// # Errors
/// [`AnalyzeError`] for unusable input or a failed write.
pub fn run_report(req: &ReportRequest, out: &mut dyn Write) -> Result<Report> {
    let ev = load_episode(&req.episode, req.load.clone())?;
    let report = analyze(&ev)?;
    if let Some(dir) = &req.plots_only {
        make_dir(dir)?;
        let plots = crate::render::plots::episode_plots(&ev, &report, Some(dir))?;
        for p in &plots {
            let _ = writeln!(out, "{}", dir.join(format!("{}.png", p.name)).display());
            let _ = writeln!(out, "{}", dir.join(format!("{}.svg", p.name)).display());
        }
        return Ok(report);
    }
    if let Some(dir) = &req.output.html {
        make_dir(dir)?;
        let plots = crate::render::plots::episode_plots(&ev, &report, Some(dir))?;
        write_text(
            dir.join("report.html"),
            &crate::render::html::report_page(&report, &plots),
        )?;
        eprintln!("wrote {}", dir.join("report.html").display());
    }
    emit(
        out,
        &crate::render::json(&report),
        || crate::render::text::render(&report),
        req.output.json,
        req.output.output.as_deref(),
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

/// Compare two episodes.
///
/// # Errors
/// [`AnalyzeError`] for unusable input on either side or a failed write.
pub fn run_compare(
    req: &CompareRequest,
    out: &mut dyn Write,
) -> Result<crate::compare::Comparison> {
    let ea = load_episode(&req.a, req.load.clone())?;
    let ra = analyze(&ea)?;
    let eb = load_episode(&req.b, req.load.clone())?;
    let rb = analyze(&eb)?;
    let c = crate::compare::compare((&ea, &ra), (&eb, &rb), req.bootstrap);
    if let Some(dir) = &req.output.html {
        make_dir(dir)?;
        let plots = crate::render::plots::compare_plots((&ea, &ra), (&eb, &rb), &c, Some(dir))?;
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
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            let message = looptime_capture::error_chain(&e);
            eprintln!("error: {}", crate::render::text::terminal_safe(&message));
            match e {
                AnalyzeError::Write { .. } | AnalyzeError::Plot(_) => EXIT_WRITE,
                _ => EXIT_BAD_INPUT,
            }
        }
    }
}
