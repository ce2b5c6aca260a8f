//! The `looptime` command line.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::config::{Config, SpinMargin};
use crate::probe::{self, ProbeOptions};
use crate::serve::{self, ServeOptions};

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
    /// Turn the ring files of processes that died (kill -9, crash, OOM
    /// kill) into evidence in the episode directories they name.
    Recover(RecoverArgs),
    /// Watch a running loop live, read-only, from its ring file.
    Watch(WatchArgs),
    /// Run the robot peer for a loop in another program: a state every
    /// period over loopback UDP, to a client that sends any datagram first
    /// (docs/input-paced.md).
    RobotPeer(RobotPeerArgs),
    /// Print the embedded default config (equal to configs/default.toml).
    DefaultConfig,
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell) on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write a man page for `looptime` and one per subcommand into DIR
    /// (`looptime.1`, `looptime-serve.1`, …).
    Man {
        /// Where the pages go (created if missing).
        dir: PathBuf,
    },
}

/// Write `cmd`'s man page and one per subcommand (named `NAME-SUB`) into
/// `dir`, each through the one atomic write; returns the files.
///
/// # Errors
/// A page that cannot be written.
pub fn man_pages(cmd: clap::Command, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = cmd.get_name().to_string();
    let mut pages = vec![(name.clone(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let full = format!("{name}-{}", sub.get_name());
        pages.push((full.clone(), sub.clone().name(full)));
    }
    let mut out = Vec::new();
    for (page, c) in pages {
        let file = format!("{page}.1");
        let (path, _) =
            looptime_capture::write_atomic(dir, &file, |w| clap_mangen::Man::new(c).render(w))?;
        out.push(path);
    }
    Ok(out)
}

/// `looptime recover`
#[derive(Debug, clap::Args)]
pub struct RecoverArgs {
    /// One ring file; without it, every ring in --ring-dir whose writer is dead.
    #[arg(long)]
    pub ring: Option<PathBuf>,
    /// Where ring files are (run.timing_ring_dir).
    #[arg(long, default_value = looptime_capture::ring::DEFAULT_RING_DIR)]
    pub ring_dir: PathBuf,
}

/// `looptime watch`
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The ring of this process (its newest).
    #[arg(long, conflicts_with = "ring")]
    pub pid: Option<u32>,
    /// This ring file.
    #[arg(long)]
    pub ring: Option<PathBuf>,
    /// Your runs directory: among your running rings, one recording into it
    /// is preferred.
    #[arg(long, default_value = "runs")]
    pub runs_dir: PathBuf,
    /// Where ring files are (run.timing_ring_dir); your newest running ring
    /// there is watched by default (other users' rings are never opened).
    #[arg(long, default_value = looptime_capture::ring::DEFAULT_RING_DIR)]
    pub ring_dir: PathBuf,
    /// Cycles in the sliding window.
    #[arg(long, default_value_t = 500)]
    pub window: u64,
    /// Refresh interval in milliseconds (at most 500: at least 2 a second).
    #[arg(long, default_value_t = 250)]
    pub interval_ms: u64,
    /// Print one snapshot and exit (text, or JSON with --json).
    #[arg(long)]
    pub once: bool,
    /// With --once: the snapshot as JSON.
    #[arg(long, requires = "once")]
    pub json: bool,
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
    /// Running-phase length in simulated seconds (run.duration_s; default 5).
    #[arg(long, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Warmup length in simulated seconds (run.warmup_s; default 1).
    #[arg(long, allow_negative_numbers = true)]
    pub warmup: Option<f64>,
    /// Episodes to run (run.episodes; default 1).
    #[arg(long, allow_negative_numbers = true)]
    pub episodes: Option<i64>,
    /// Real-time factor, 0 = uncapped (run.rtf; default 1).
    #[arg(long, allow_negative_numbers = true)]
    pub rtf: Option<f64>,
    /// Loop rate in hertz (run.rate_hz; default 100). An unwritten spin
    /// margin follows it (at most half the period).
    #[arg(long, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// The simulated robot's seed (run.seed; default 1; each rollout of a
    /// session adds its index).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where sessions are written (run.runs_dir; default runs).
    #[arg(long)]
    pub runs_dir: Option<PathBuf>,
    /// A name for this session (run.label): in the manifest, every
    /// report's header and `compare`'s side names; not in config_hash.
    #[arg(long)]
    pub label: Option<String>,
}

/// `looptime probe`
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// Loop rate in hertz.
    #[arg(long, default_value_t = 100.0, allow_negative_numbers = true)]
    pub rate: f64,
    /// Seconds to run.
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub duration: f64,
    /// Spin margin in microseconds (default 200, at most half the period),
    /// or `auto`: adapt it to the OS sleep latency seen lately.
    #[arg(long, allow_negative_numbers = true)]
    pub spin_margin_us: Option<SpinMargin>,
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

/// `looptime robot-peer`.
#[derive(Debug, clap::Args)]
pub struct RobotPeerArgs {
    /// The robot's state rate in hertz.
    #[arg(long, default_value_t = 1000.0, allow_negative_numbers = true)]
    pub rate: f64,
    /// Seconds of states to send.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
    pub duration: f64,
    /// The UDP port on 127.0.0.1 (0: one the system picks; printed).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// The transmit path stalls once every this many ms (0: never)…
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub stall_every_ms: f64,
    /// …for this many ms, then sends the held states in a burst.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub stall_ms: f64,
    /// Seconds to wait for the client's first datagram.
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true)]
    pub wait: f64,
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
        // A count that cannot reach the u32 key (negative, or past u32) is
        // refused here by the same key and range `validate` states, with
        // the value typed; any other count is range-checked there.
        if u32::try_from(e).is_err() {
            return Err(crate::config::ConfigError::OutOfRange {
                key: "run.episodes".into(),
                value: e.to_string(),
                expected: "1 to 1000".into(),
            })
            .context("after applying command-line flags");
        }
        cfg.run.episodes = u32::try_from(e).unwrap_or(u32::MAX);
    }
    if let Some(r) = args.rtf {
        cfg.run.rtf = r;
    }
    if let Some(r) = args.rate {
        cfg.run.rate_hz = r;
        cfg.fit_default_margin();
    }
    if let Some(s) = args.seed {
        cfg.run.seed = s;
    }
    if let Some(l) = &args.label {
        cfg.run.label = Some(l.clone());
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
/// Exit code: a bad config or flag value (named by its key), or a failure
/// to write.
pub const EXIT_ERROR: i32 = 1;
/// Exit code: the command line does not parse (clap: an unknown flag, a
/// missing or malformed value).
pub const EXIT_USAGE: i32 = 2;
/// Exit code: the run was aborted by SIGINT/SIGTERM (evidence written).
pub const EXIT_ABORTED: i32 = 130;

/// The whole command: parse the process's arguments, run, and return the
/// exit code (`--help` and `--version` 0, a usage error [`EXIT_USAGE`], an
/// error [`EXIT_ERROR`] after printing it). The binary's `main` and the
/// commands wheel (`crates/commands`) both call it.
pub fn main_entry() -> i32 {
    use clap::Parser;
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    if !matches!(cli.command, Command::Serve(_) | Command::RobotPeer(_)) {
        quiet_on_closed_pipe();
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            EXIT_ERROR
        }
    }
}

/// A command that prints and ends (`looptime default-config | head -3`,
/// `probe`, `watch`, `recover`) ends quietly on a closed stdout or stderr,
/// as `cat` does: SIGPIPE's default action is restored (Rust's runtime
/// ignores it, and `println!` would panic on the write error). `serve` and
/// `robot-peer` keep it ignored: a reader that goes away must not end a
/// recording or a peer mid-run, so their every write ignores a closed
/// pipe instead.
fn quiet_on_closed_pipe() {
    looptime_runtime::sys::default_sigpipe();
}

/// A line on stdout that never panics: a closed pipe is ignored (the
/// long-running commands' output, [`quiet_on_closed_pipe`]).
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut out = std::io::stdout();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}

/// A line on stderr that never panics.
macro_rules! warn_line {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Run the CLI; returns the process exit code.
///
/// # Errors
/// Any error worth printing; `main` prints it once and exits 1.
pub fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "looptime", &mut std::io::stdout());
            Ok(EXIT_OK)
        }
        Command::Man { dir } => {
            let pages = man_pages(<Cli as clap::CommandFactory>::command(), &dir)?;
            eprintln!("wrote {} man pages into {}", pages.len(), dir.display());
            Ok(EXIT_OK)
        }
        Command::DefaultConfig => {
            print!("{}", Config::default().to_toml()?);
            Ok(EXIT_OK)
        }
        Command::Recover(a) => Ok(recover(&a)),
        Command::Watch(a) => crate::watch::run(&crate::watch::WatchOptions {
            pid: a.pid,
            runs_dir: Some(a.runs_dir.clone()),
            ring: a.ring.clone(),
            ring_dir: a.ring_dir.clone(),
            window: a.window,
            interval_ms: a.interval_ms,
            once: a.once,
            json: a.json,
        })
        .map(|()| EXIT_OK),
        Command::Probe(a) => run_probe(&a),
        Command::RobotPeer(a) => robot_peer(&a),
        Command::Serve(a) => {
            let (config, config_source) = resolve_config(&a)?;
            let stop = Arc::new(AtomicBool::new(false));
            let state = Arc::new(crate::control::LoopState::default());
            let watcher = SignalWatcher::start(stop.clone(), state.clone())?;
            let opts = ServeOptions {
                config,
                config_source,
            };
            let mut out = std::io::stdout();
            let outcome =
                serve::serve(&opts, stop, state, &mut out, || Box::new(std::io::stderr()));
            watcher.stop();
            let outcome = outcome?;
            // A reader that went away (`serve | head -3`) loses the rest of
            // the lines, never the recording: it is written by now.
            let _ = out.flush();
            Ok(if outcome.stopped {
                EXIT_ABORTED
            } else {
                EXIT_OK
            })
        }
    }
}

/// `looptime recover`: one ring, or every dead ring of the user's in the
/// directory; the exit code says whether any failed.
fn recover(a: &RecoverArgs) -> i32 {
    let mut out = std::io::stdout();
    let summary = match &a.ring {
        Some(ring) => crate::recover::recover_file(ring, &mut out),
        None => crate::recover::recover_dir(&a.ring_dir, crate::recover::Scope::All, &mut out),
    };
    for (ring, pid) in &summary.live {
        println!(
            "[recover] {}: process {pid} still runs; `looptime watch --ring {}` shows it live",
            ring.display(),
            ring.display()
        );
    }
    if a.ring.is_none()
        && summary.written.is_empty()
        && summary.removed.is_empty()
        && summary.failed.is_empty()
    {
        println!(
            "[recover] no ring of yours of a dead process in {}",
            a.ring_dir.display()
        );
    }
    if summary.failed.is_empty() {
        EXIT_OK
    } else {
        EXIT_ERROR
    }
}

/// `looptime robot-peer`: the peer's address on stdout, then its run.
fn robot_peer(a: &RobotPeerArgs) -> Result<i32> {
    let ok = |v: f64, lo: f64, hi: f64| v.is_finite() && (lo..=hi).contains(&v);
    anyhow::ensure!(
        ok(a.rate, 1.0, 10_000.0),
        "--rate must be 1 to 10,000 Hz, not {}",
        a.rate
    );
    anyhow::ensure!(
        ok(a.duration, 0.0, 3_600.0),
        "--duration must be 0 to 3,600 s, not {}",
        a.duration
    );
    anyhow::ensure!(
        ok(a.stall_every_ms, 0.0, 3_600_000.0),
        "--stall-every-ms must be 0 (never) to 3,600,000, not {}",
        a.stall_every_ms
    );
    anyhow::ensure!(
        ok(a.stall_ms, 0.0, a.stall_every_ms),
        "--stall-ms must be 0 to --stall-every-ms, not {}",
        a.stall_ms
    );
    anyhow::ensure!(
        ok(a.wait, 0.001, 3_600.0),
        "--wait must be 0.001 to 3,600 s, not {}",
        a.wait
    );
    let period_ns = (1e9 / a.rate).round() as u64;
    let spec = crate::robot::PeerSpec {
        period_ns,
        states: (a.duration * a.rate).round() as u64,
        stall_every_ns: (a.stall_every_ms * 1e6) as u64,
        stall_ns: (a.stall_ms * 1e6) as u64,
    };
    let sock = std::net::UdpSocket::bind(("127.0.0.1", a.port))
        .context("binding the robot peer's UDP socket")?;
    say!("robot-peer: listening on {}", sock.local_addr()?);
    let stop = AtomicBool::new(false);
    let wait = std::time::Duration::from_secs_f64(a.wait);
    let r = crate::robot::serve_client(&sock, spec, wait, &stop).context("robot peer")?;
    say!(
        "robot-peer: sent {} states ({} held by stalls and sent in bursts), {} answered before the next was due",
        r.sent, r.held, r.answered_in_time
    );
    Ok(EXIT_OK)
}

/// `looptime probe`: the host's fitness report, as text or JSON.
fn run_probe(a: &ProbeArgs) -> Result<i32> {
    let r = probe::probe(ProbeOptions {
        rate_hz: a.rate,
        duration_s: a.duration,
        spin_margin_ns: match a.spin_margin_us {
            Some(SpinMargin::Us(u)) => Some((u * 1e3) as u64),
            _ => None,
        },
        auto_margin: a.spin_margin_us == Some(SpinMargin::Auto),
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

/// SIGINT and SIGTERM, handled on a thread of their own. The first sets the
/// stop flag and says what it meets ([`crate::control::LoopState`]): a
/// running loop ends after its current cycle and its evidence is written
/// marked aborted; a loop that had already ended is being written and stays
/// complete. Later ones do not cut the finish short: they say
/// on stderr that the evidence is being written and how to stop at once
/// (SIGKILL, which loses what is not yet written; the next `serve` removes
/// its temporary files). Nothing is ever exited silently.
struct SignalWatcher {
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

impl SignalWatcher {
    fn start(
        stop: Arc<AtomicBool>,
        state: Arc<crate::control::LoopState>,
    ) -> Result<SignalWatcher> {
        use crate::control::StopMeets;
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .context("installing signal handlers")?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let mut seen = 0u32;
                for sig in signals.forever() {
                    seen += 1;
                    let meets = state.request_stop();
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                    if seen == 1 {
                        match meets {
                            StopMeets::RunningLoop => warn_line!("[run] {name}: stopping after the current cycle; its evidence is written and marked aborted, and no further rollout starts"),
                            StopMeets::Finishing => warn_line!("[run] {name}: the loop had already run its last cycle; its evidence is being written and stays complete, and no further rollout starts"),
                            StopMeets::NoLoop => warn_line!("[run] {name}: no loop is running; a rollout being prepared stops before its first cycle (written marked aborted), and no further rollout starts"),
                        }
                    } else {
                        warn_line!(
                            "[run] {name} again: still stopping; the evidence being written will be complete in a moment and is not skipped. `kill -9 {}` stops at once and loses what is not yet written",
                            std::process::id()
                        );
                    }
                }
            })
            .context("starting the signal thread")?;
        Ok(SignalWatcher { handle, thread })
    }

    fn stop(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}
