//! The runtime's TOML configuration.
//!
//! Every table rejects unknown keys (the error names the key), and
//! [`Config::validate`] rejects out-of-range values with the key's dotted
//! name. [`Config::default`] is the embedded default used without
//! `--config`; `configs/default.toml` spells out the same values, and a test
//! keeps the two equal. The `[stages.*]` tables (the simulated work's costs
//! and modes) are in `stages`, `[robot]` in `robot`, the checks in
//! `validate`, the recorder's footprint in `footprint`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use looptime_capture::CpuTimeMode;
use looptime_runtime::scheduler::{OverrunPolicy, SchedulerConfig, DEFAULT_SPIN_MARGIN_NS};

/// Caller values the simulated runtime registers (the control loop's
/// `build_recorder`); here because the recorder's footprint, which the
/// config bounds, depends on it.
pub const SIM_VALUE_COUNT: u64 = 4;

/// Span slots per cycle of a background thread (it records two spans);
/// here for the same reason.
pub const THREAD_SPANS_PER_CYCLE: u64 = 4;

/// Default `run.timing_memory_budget_mb`: 1 GiB, which holds the default
/// recorder (about 20 MB) fifty times over and stops a typo of a few zeros.
pub const DEFAULT_TIMING_MEMORY_BUDGET_MB: u64 = 1024;
/// Largest accepted `run.timing_memory_budget_mb` (1 TiB).
pub const MAX_TIMING_MEMORY_BUDGET_MB: u64 = 1 << 20;

/// A config that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The TOML is malformed or has an unknown key.
    #[error("config {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's message (it names the key and the line).
        message: String,
    },
    /// A value is out of range.
    #[error("config key `{key}` = {value} is out of range: expected {expected}")]
    OutOfRange {
        /// Dotted key name.
        key: String,
        /// The value as written.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// The resolved config has no TOML form, so the manifest could neither
    /// record it nor hash it.
    #[error("the resolved config cannot be written as TOML for the manifest and its config_hash ({message}); keep every integer setting at most 9223372036854775807")]
    Unwritable {
        /// toml's message.
        message: String,
    },
    /// The recorder these settings ask for is larger than the budget.
    #[error("config keys `run.timing_max_cycles` = {cycles} and `run.timing_max_spans_per_cycle` = {spans} need a recorder of {footprint_bytes} bytes ({:.1} MiB) for the control thread and {threads_bytes} bytes for the background threads (`run.timing_threads`), over the budget `run.timing_memory_budget_mb` = {budget_mb} MiB: lower either key, or raise the budget if the host has the memory", *footprint_bytes as f64 / 1048576.0)]
    OverBudget {
        /// `run.timing_max_cycles`.
        cycles: u64,
        /// `run.timing_max_spans_per_cycle`.
        spans: u32,
        /// Bytes the control thread's recorder would preallocate.
        footprint_bytes: u64,
        /// Bytes the background threads' recorders would preallocate.
        threads_bytes: u64,
        /// `run.timing_memory_budget_mb`.
        budget_mb: u64,
    },
}

/// The whole configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[run]`
    pub run: RunConfig,
    /// `[scheduler]`
    pub scheduler: SchedulerSection,
    /// `[realtime]`
    pub realtime: RealtimeSection,
    /// `[lifecycle]`
    pub lifecycle: LifecycleSection,
    /// `[stats]`
    pub stats: StatsSection,
    /// `[stages]`
    pub stages: StagesSection,
    /// `[robot]`
    pub robot: RobotLink,
}

/// `[run]`: rate, duration and capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Control rate in hertz.
    pub rate_hz: f64,
    /// Length of the running phase in simulated seconds.
    pub duration_s: f64,
    /// Length of the warmup phase in simulated seconds.
    pub warmup_s: f64,
    /// Episodes (rollouts) per session.
    pub episodes: u32,
    /// Real-time factor: effective period = nominal / rtf; 0 = uncapped.
    pub rtf: f64,
    /// Record control timing (`--control-timing`).
    pub control_timing: bool,
    /// Cycles kept by the recorder.
    pub timing_max_cycles: u64,
    /// Span slots per cycle.
    pub timing_max_spans_per_cycle: u32,
    /// Where the recorder reads the thread's CPU clock: `"cycle"` (the
    /// default), `"spans"` or `"off"`; `true` and `false`, from configs
    /// before the modes, read as `"spans"` and `"off"`.
    #[serde(deserialize_with = "cpu_mode")]
    pub timing_thread_cpu: CpuTimeMode,
    /// Most memory the recorder may preallocate, in MiB (2^20 bytes).
    pub timing_memory_budget_mb: u64,
    /// Seed of the simulated costs.
    pub seed: u64,
    /// Where sessions are written.
    pub runs_dir: String,
    /// Where the recorder's ring lives: `shm` (a file that survives a kill
    /// of the process, for `looptime recover`) or `heap`.
    pub timing_ring: RingKind,
    /// Directory of the ring files (a tmpfs: `/dev/shm`).
    pub timing_ring_dir: String,
    /// Also record the background threads (camera reader, viewer
    /// transport, policy worker), each into its own file of the episode.
    pub timing_threads: bool,
    /// A name for the session (`serve --label`): recorded in the manifest,
    /// shown by every report, `compare`'s side name. Not part of
    /// `config_hash`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `run.timing_thread_cpu`: a mode name, or a boolean of the configs
/// written before the modes (`true` per span, `false` off).
fn cpu_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<CpuTimeMode, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bool(bool),
        Name(String),
    }
    let raw = Raw::deserialize(d).map_err(|_| {
        serde::de::Error::custom(
            "timing_thread_cpu is \"cycle\", \"spans\" or \"off\" (or true for \"spans\", false for \"off\")",
        )
    })?;
    match raw {
        Raw::Bool(on) => Ok(CpuTimeMode::from_switch(on)),
        Raw::Name(s) => CpuTimeMode::from_name(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{s}` is not a CPU-time mode: use \"cycle\" (two CPU-clock reads a cycle), \"spans\" (two a span) or \"off\""
            ))
        }),
    }
}

/// `run.timing_ring`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RingKind {
    /// A shared-memory ring file in `run.timing_ring_dir`; the heap, with a
    /// warning, when it cannot be made.
    #[default]
    Shm,
    /// Process memory: a kill loses the rollout's evidence.
    Heap,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            rate_hz: 100.0,
            duration_s: 5.0,
            warmup_s: 1.0,
            episodes: 1,
            rtf: 1.0,
            control_timing: false,
            timing_max_cycles: 20_000,
            timing_max_spans_per_cycle: 16,
            timing_thread_cpu: CpuTimeMode::Cycle,
            timing_memory_budget_mb: DEFAULT_TIMING_MEMORY_BUDGET_MB,
            seed: 1,
            runs_dir: "runs".into(),
            timing_ring: RingKind::Shm,
            timing_ring_dir: looptime_capture::ring::DEFAULT_RING_DIR.into(),
            timing_threads: true,
            label: None,
        }
    }
}

/// `[scheduler]`
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSection {
    /// `rebase` or `keep-phase`.
    pub overrun_policy: OverrunPolicy,
    /// Sleep ends this many microseconds before the deadline, or `"auto"`:
    /// the margin follows the OS sleep latency seen lately.
    pub spin_margin_us: SpinMargin,
    /// `dt_measured` is bounded at this many periods.
    pub max_dt_periods: f64,
    /// The compute budget of each cycle's work, µs: work beyond it is a
    /// budget overrun (statistics only; the release timeline is unchanged).
    /// Declared only when set; written to the evidence header then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_budget_us: Option<f64>,
    /// The deadline tolerance, µs: a start later than its release plus this
    /// is a late start, a finish later than the next release plus this a
    /// completion miss; it replaces `stats.late_warn_us` for the live
    /// warning. Declared only when set; written to the header then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_tolerance_us: Option<f64>,
    /// Whether the config file wrote `spin_margin_us` (not serialized): an
    /// unwritten margin follows the rate's ceiling
    /// ([`Config::fit_default_margin`]).
    #[serde(skip)]
    pub margin_written: bool,
}

/// Two sections are equal when their settings are: whether the file wrote
/// the margin is bookkeeping, not a setting.
impl PartialEq for SchedulerSection {
    fn eq(&self, other: &Self) -> bool {
        self.overrun_policy == other.overrun_policy
            && self.spin_margin_us == other.spin_margin_us
            && self.max_dt_periods == other.max_dt_periods
            && self.compute_budget_us == other.compute_budget_us
            && self.deadline_tolerance_us == other.deadline_tolerance_us
    }
}

impl Default for SchedulerSection {
    fn default() -> Self {
        Self {
            overrun_policy: OverrunPolicy::Rebase,
            spin_margin_us: SpinMargin::Us(DEFAULT_SPIN_MARGIN_NS as f64 / 1e3),
            max_dt_periods: 3.0,
            compute_budget_us: None,
            deadline_tolerance_us: None,
            margin_written: false,
        }
    }
}

/// `[realtime]`: off by default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RealtimeSection {
    /// Ask for SCHED_FIFO on the control thread.
    pub enabled: bool,
    /// SCHED_FIFO priority.
    pub priority: i32,
    /// Pin the control thread to this CPU (-1 = no pinning).
    pub cpu: i64,
    /// mlockall while running.
    pub mlockall: bool,
    /// Hold /dev/cpu_dma_latency at 0 while running (needs root).
    pub cpu_dma_latency: bool,
}

impl Default for RealtimeSection {
    fn default() -> Self {
        Self {
            enabled: false,
            priority: 80,
            cpu: -1,
            mlockall: true,
            cpu_dma_latency: false,
        }
    }
}

/// `[lifecycle]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct LifecycleSection {
    /// Pause at this many seconds into the running phase (0 = never).
    pub pause_at_s: f64,
    /// Pause length in seconds.
    pub pause_s: f64,
}

/// `[stats]`: live statistics off the control thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatsSection {
    /// Seconds between summaries (0 = no periodic summaries).
    pub interval_s: f64,
    /// A cycle starting later than this after its release point counts for
    /// the deadline warning.
    pub late_warn_us: f64,
}

impl Default for StatsSection {
    fn default() -> Self {
        Self {
            interval_s: 1.0,
            late_warn_us: 1000.0,
        }
    }
}

impl Config {
    /// Parse TOML text; `origin` names the source in errors.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for malformed TOML or unknown keys,
    /// [`ConfigError::OutOfRange`] for values out of range.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })?;
        // The default margin follows the ceiling rule of the rate the file
        // sets (half the period): a file that sets only `rate_hz = 5000`
        // gets 100 µs, not a refusal of a margin it never wrote. A margin
        // the file does write is checked as written.
        cfg.scheduler.margin_written = toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| t.get("scheduler")?.get("spin_margin_us").cloned())
            .is_some();
        cfg.fit_default_margin();
        cfg.validate()?;
        Ok(cfg)
    }

    /// Read and parse a TOML file.
    ///
    /// # Errors
    /// As [`Config::from_toml`], plus [`ConfigError::Read`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text, path)
    }

    /// The loop's nominal period (1 / `run.rate_hz`), in ns.
    pub fn nominal_period_ns(&self) -> u64 {
        (1e9 / self.run.rate_hz).round() as u64
    }

    /// The effective period: nominal / rtf (the nominal one when uncapped,
    /// since then the schedule runs on the simulation clock).
    pub fn effective_period_ns(&self) -> u64 {
        if self.run.rtf == 0.0 {
            self.nominal_period_ns()
        } else {
            (self.nominal_period_ns() as f64 / self.run.rtf)
                .round()
                .max(1.0) as u64
        }
    }

    /// The scheduler settings this config resolves to.
    pub fn scheduler_config(&self) -> SchedulerConfig {
        let period = self.effective_period_ns();
        let ceiling = SchedulerConfig::margin_ceiling(period);
        let (margin_ns, auto) = match self.scheduler.spin_margin_us {
            SpinMargin::Us(us) => (((us * 1e3) as u64).min(ceiling), false),
            // The first wait's margin; the estimator takes over after.
            SpinMargin::Auto => (DEFAULT_SPIN_MARGIN_NS.min(ceiling), true),
        };
        SchedulerConfig {
            period_ns: period,
            spin_margin_ns: margin_ns,
            auto_margin: auto,
            policy: self.scheduler.overrun_policy,
            max_dt_ns: (period as f64 * self.scheduler.max_dt_periods) as u64,
            compute_budget_ns: self
                .scheduler
                .compute_budget_us
                .map(|us| (us * 1e3).round() as u64),
            deadline_tolerance_ns: self
                .scheduler
                .deadline_tolerance_us
                .map(|us| (us * 1e3).round() as u64),
        }
    }

    /// Cycles in the warmup phase.
    pub fn warmup_cycles(&self) -> u64 {
        (self.run.warmup_s * self.run.rate_hz).round() as u64
    }

    /// Cycles in the running phase (pauses included).
    pub fn running_cycles(&self) -> u64 {
        (self.run.duration_s * self.run.rate_hz).round() as u64
    }
}

mod footprint;
mod robot;
mod spin_margin;
mod stages;
mod text;
mod validate;

pub use robot::{RobotLink, Transport};
pub use spin_margin::SpinMargin;
pub use stages::*;

#[cfg(test)]
mod tests;
