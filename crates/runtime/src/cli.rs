//! The `looptime` command line.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::probe::{self, ProbeOptions};
use crate::serve::{self, EpisodeStatus, ServeOptions};

/// looptime: does your control loop really run at its rate?
#[derive(Debug, Parser)]
#[command(name = "looptime", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the simulated robot runtime and write episode directories.
    Serve(ServeArgs),
    /// Check the host and measure an empty loop.
    Probe(ProbeArgs),
    /// Print the embedded default config (equal to configs/default.toml).
    DefaultConfig,
}

/// `looptime serve`
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// TOML config; without it the embedded 100 Hz default is used.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Record control timing (sets run.control_timing = true).
    #[arg(long)]
    pub control_timing: bool,
    /// Running-phase length in simulated seconds (run.duration_s).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Warmup length in simulated seconds (run.warmup_s).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Episodes to run (run.episodes).
    #[arg(long)]
    pub episodes: Option<u32>,
    /// Real-time factor, 0 = uncapped (run.rtf).
    #[arg(long)]
    pub rtf: Option<f64>,
    /// Where sessions are written (run.runs_dir).
    #[arg(long)]
    pub runs_dir: Option<PathBuf>,
}

/// `looptime probe`
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// Loop rate in hertz.
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Seconds to run.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Spin margin in microseconds (default 200, at most half the period).
    #[arg(long)]
    pub spin_margin_us: Option<f64>,
    /// Try SCHED_FIFO priority 80 and mlockall for the probe loop.
    #[arg(long)]
    pub realtime: bool,
    /// Hold /dev/cpu_dma_latency at 0 µs during the loop (needs root).
    #[arg(long)]
    pub dma_latency: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Resolve the serve config: file or embedded default, then flags.
///
/// # Errors
/// When the file cannot be read or a value is out of range.
pub fn resolve_config(args: &ServeArgs) -> Result<(Config, String)> {
    let (mut cfg, source) = match &args.config {
        Some(p) => (Config::load(p)?, p.display().to_string()),
        None => (Config::default(), "embedded default".to_string()),
    };
    if args.control_timing {
        cfg.run.control_timing = true;
    }
    if let Some(d) = args.duration {
        cfg.run.duration_s = d;
    }
    if let Some(w) = args.warmup {
        cfg.run.warmup_s = w;
    }
    if let Some(e) = args.episodes {
        cfg.run.episodes = e;
    }
    if let Some(r) = args.rtf {
        cfg.run.rtf = r;
    }
    if let Some(d) = &args.runs_dir {
        cfg.run.runs_dir = d.display().to_string();
    }
    cfg.validate()
        .context("after applying command-line flags")?;
    Ok((cfg, source))
}

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: bad input (config, flags) or a failure to write.
pub const EXIT_ERROR: i32 = 1;
/// Exit code: the run was aborted by SIGINT/SIGTERM (evidence written).
pub const EXIT_ABORTED: i32 = 130;

/// Run the CLI; returns the process exit code.
///
/// # Errors
/// Any error worth printing; `main` prints it once and exits 1.
pub fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::DefaultConfig => {
            print!("{}", Config::default().to_toml());
            Ok(EXIT_OK)
        }
        Command::Probe(a) => {
            let r = probe::probe(ProbeOptions {
                rate_hz: a.rate,
                duration_s: a.duration,
                spin_margin_ns: a.spin_margin_us.map(|u| (u * 1e3) as u64),
                realtime: a.realtime,
                dma_latency: a.dma_latency,
            })
            .context("probe settings")?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", probe::render(&r));
            }
            Ok(EXIT_OK)
        }
        Command::Serve(a) => {
            let (config, config_source) = resolve_config(&a)?;
            let stop = Arc::new(AtomicBool::new(false));
            for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                // A second signal while the first is being handled exits at once.
                signal_hook::flag::register_conditional_shutdown(sig, EXIT_ABORTED, stop.clone())
                    .context("installing signal handlers")?;
                signal_hook::flag::register(sig, stop.clone())
                    .context("installing signal handlers")?;
            }
            let opts = ServeOptions {
                config,
                config_source,
            };
            let mut out = std::io::stdout();
            let results = serve::serve(&opts, stop, &mut out, || Box::new(std::io::stderr()))?;
            out.flush()?;
            Ok(
                if results.iter().any(|r| r.status == EpisodeStatus::Aborted) {
                    EXIT_ABORTED
                } else {
                    EXIT_OK
                },
            )
        }
    }
}
