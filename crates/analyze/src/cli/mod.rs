//! The `analyze_control_timing` command line: arguments are parsed, then
//! validated into [`Command`]; nothing past this module sees raw strings.
//!
//! Modules: `args` (what clap parses, the exit codes and the validated
//! requests), this file (validation: raw arguments into a [`Command`], and
//! [`run`], the entry point), `run` (each subcommand's work).

mod args;
mod run;

pub use args::*;
pub use run::*;

use std::path::PathBuf;

use crate::error::AnalyzeError;
use crate::metrics::Thresholds;

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
                gate,
            }) => Ok(Command::Report(ReportRequest {
                episode,
                load: input.load(),
                output,
                plots_only: None,
                thresholds: judge.thresholds()?,
                gate: report_gate_args(gate)?,
            })),
            Some(Sub::Plots {
                episode,
                out,
                input,
            }) => Ok(plots_request(episode, out, input)),
            Some(Sub::Compare {
                a_path,
                b_path,
                more_a,
                more_b,
                input,
                output,
                resamples,
                seed,
                gate,
            }) => compare_request(
                a_path,
                b_path,
                more_a,
                more_b,
                input,
                output,
                (resamples, seed),
                gate,
            ),
            Some(Sub::Export {
                episodes,
                format,
                out,
                into,
                force,
                compression,
                input,
            }) => export_request(episodes, format, out, into, force, compression, input),
            Some(Sub::Completions { shell }) => Ok(Command::Completions(shell)),
            Some(Sub::Man { dir }) => Ok(Command::Man(dir)),
            Some(Sub::Fleet {
                roots,
                out,
                jobs,
                worst,
                json,
                input,
            }) => fleet_request(roots, out, jobs, worst, json, input),
            None => self.bare_report(),
        }
    }

    /// The bare form, `--episode DIR` with the report's flags.
    fn bare_report(self) -> std::result::Result<Command, UsageError> {
        let episode = self.episode.ok_or_else(|| {
            UsageError(
                "give an episode directory: analyze_control_timing --episode runs/latest".into(),
            )
        })?;
        Ok(Command::Report(ReportRequest {
            episode,
            load: self.input.load(),
            output: self.output,
            plots_only: None,
            thresholds: self.judge.thresholds()?,
            gate: report_gate_args(self.gate)?,
        }))
    }
}

/// `plots`: the report's plots only, into `out`.
fn plots_request(episode: PathBuf, out: PathBuf, input: InputArgs) -> Command {
    Command::Report(ReportRequest {
        episode,
        load: input.load(),
        output: OutputArgs {
            json: false,
            output: None,
            html: None,
        },
        plots_only: Some(out),
        thresholds: Thresholds::default(),
        gate: GateArgs::default(),
    })
}

/// `fleet`: at least one job; the CPU count when not given.
fn fleet_request(
    roots: Vec<PathBuf>,
    out: PathBuf,
    jobs: Option<usize>,
    worst: usize,
    json: bool,
    input: InputArgs,
) -> std::result::Result<Command, UsageError> {
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

/// `--fail-on` takes one of this command's two levels; the error names the
/// other command's levels too, since the two are easy to mix up.
fn check_fail_on(
    gate: &GateArgs,
    levels: &[&str],
    (this, other): (&str, &str),
) -> std::result::Result<(), UsageError> {
    let list = |l: &[&str]| {
        let quoted: Vec<String> = l.iter().map(|x| format!("`{x}`")).collect();
        match quoted.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => quoted.join(""),
        }
    };
    match gate.fail_on.as_deref() {
        Some(l) if !levels.contains(&l) => {
            let theirs: &[&str] = if levels[0] == "warn" {
                &COMPARE_LEVELS
            } else {
                &REPORT_LEVELS
            };
            Err(UsageError(format!(
                "--fail-on {l}: {this} gate takes {} ({other} takes {})",
                list(levels),
                list(theirs)
            )))
        }
        _ => Ok(()),
    }
}

/// A report's `--fail-on` levels.
const REPORT_LEVELS: [&str; 2] = ["warn", "fail"];
/// compare's `--fail-on` levels.
const COMPARE_LEVELS: [&str; 3] = ["worse", "mixed", "undecided"];

/// A report's gate: `--fail-on warn|fail`; `--gate` and `--strict` are
/// compare's.
fn report_gate_args(gate: GateArgs) -> std::result::Result<GateArgs, UsageError> {
    check_fail_on(&gate, &REPORT_LEVELS, ("a report's", "compare's"))?;
    if !gate.gate.is_empty()
        || gate.strict
        || !gate.min_effect.is_empty()
        || gate.alpha != crate::compare::FAMILY_ALPHA
    {
        return Err(UsageError(
            "--gate, --strict, --alpha and --min-effect apply to compare's gate: analyze_control_timing compare A B --fail-on worse --gate ...".into(),
        ));
    }
    Ok(gate)
}

/// `compare A B`: both sides given, at least one resample.
#[allow(clippy::too_many_arguments)]
fn compare_request(
    a_path: Option<PathBuf>,
    b_path: Option<PathBuf>,
    more_a: Vec<PathBuf>,
    more_b: Vec<PathBuf>,
    input: InputArgs,
    output: OutputArgs,
    (resamples, seed): (u32, u64),
    gate: GateArgs,
) -> std::result::Result<Command, UsageError> {
    check_fail_on(&gate, &COMPARE_LEVELS, ("compare's", "a report's"))?;
    if gate.fail_on.as_deref() == Some("undecided") && gate.min_effect.is_empty() {
        return Err(UsageError(
            "--fail-on undecided needs the effect each test must see: --min-effect TEST=VALUE (e.g. running/work:median=0.3, in ms; docs/ci.md, Undecided)".into(),
        ));
    }
    if !(gate.alpha > 0.0 && gate.alpha <= crate::compare::FAMILY_ALPHA) {
        return Err(UsageError(format!(
            "--alpha {}: the gate's family-wise error rate must be above 0 and at most {} (the intervals shown are 95 %)",
            gate.alpha,
            crate::compare::FAMILY_ALPHA
        )));
    }
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
        gate,
    }))
}

/// `export`: the flags that only mean something together, one episode
/// unless it is a dataset, `--out` never the recording.
fn export_request(
    episodes: Vec<PathBuf>,
    format: ExportFormat,
    out: PathBuf,
    into: Option<PathBuf>,
    force: bool,
    compression: Option<McapCompression>,
    input: InputArgs,
) -> std::result::Result<Command, UsageError> {
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
            None | Some(McapCompression::Zstd) => crate::export::mcap::Compression::Zstd,
            Some(McapCompression::Lz4) => crate::export::mcap::Compression::Lz4,
            Some(McapCompression::None) => crate::export::mcap::Compression::None,
        },
        load: input.load(),
    }))
}

/// The whole command: parse the process's arguments, run, and return the
/// exit code (`--help` and `--version` 0, a usage error
/// [`EXIT_USAGE`] with a hint). The binary's `main` and the commands wheel
/// (`crates/commands`) both call it.
pub fn main_entry() -> i32 {
    use clap::Parser;
    quiet_on_closed_pipe();
    match Cli::try_parse() {
        Ok(cli) => run(cli),
        Err(e) => {
            let _ = e.print();
            if let Some(hint) = usage_hint(&e) {
                eprintln!("{hint}");
            }
            if e.use_stderr() {
                EXIT_USAGE
            } else {
                EXIT_OK
            }
        }
    }
}

/// A closed stdout or stderr (`analyze_control_timing … | head -5`) ends
/// the program quietly, as it ends `cat` or `grep`: SIGPIPE's default
/// action is restored (Rust's runtime ignores it, so a write to a closed
/// pipe would return an error that `println!` turns into a panic, exit 101).
/// Files the program writes are written atomically (`atomic`), so a
/// reader that goes away never leaves half a file behind.
#[allow(unsafe_code)]
fn quiet_on_closed_pipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler of ours and
    // touches no Rust state; it runs once, before any thread is spawned.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A hint after clap's own message, for the mistakes a newcomer makes: a
/// directory given where a subcommand goes (`analyze_control_timing
/// runs/latest`) is an episode for `report` (or `--episode`).
pub fn usage_hint(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidSubcommand {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidSubcommand) else {
        return None;
    };
    std::path::Path::new(arg).is_dir().then(|| {
        format!(
            "hint: {arg} is a directory: to analyze it, run `analyze_control_timing report {arg}` (or `analyze_control_timing --episode {arg}`); `compare` and `fleet` take several"
        )
    })
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
                AnalyzeError::GateTripped { .. } => EXIT_GATE,
                AnalyzeError::GateUndecided { .. } => EXIT_UNDECIDED,
                _ => EXIT_BAD_INPUT,
            }
        }
    }
}
