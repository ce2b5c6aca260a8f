//! `serve`'s manifest: what a rollout's `manifest.json` records, filled from
//! the resolved [`Config`] and what the loop did, and written through the
//! runtime library's one [`Manifest`] type (the same that embedded programs
//! write through `looptime_runtime::embed`).

use std::path::Path;

use looptime_runtime::episode::{
    file_name, manifest_files, sha256, utc_rfc3339, Counts, Manifest, ManifestStatus,
    RecorderFacts, ScheduleFacts, MANIFEST_SCHEMA_VERSION, SOURCE_HASH,
};
use looptime_runtime::error::ServeError;
use looptime_runtime::rt::{HostFacts, RealtimeObtained};

use crate::config::Config;

/// What the manifest records of an episode whose loop has ended.
#[derive(Debug)]
pub struct ManifestFacts<'a> {
    /// The episode's resolved config.
    pub config: &'a Config,
    /// Where the config came from.
    pub config_source: &'a str,
    /// The session directory.
    pub session: &'a Path,
    /// `rollout-NNN`.
    pub rollout: &'a str,
    /// Host facts.
    pub host: &'a HostFacts,
    /// Complete, aborted, or running (before the first cycle).
    pub status: ManifestStatus,
    /// Cycles run.
    pub cycles: u64,
    /// Overruns.
    pub overruns: u64,
    /// Skipped release points.
    pub skipped: u64,
    /// Whether the evidence files are (about to be) written.
    pub evidence: bool,
    /// Real-time settings obtained.
    pub realtime: &'a RealtimeObtained,
    /// Whether /dev/cpu_dma_latency was held at 0.
    pub dma_held: bool,
    /// Live statistics and events dropped.
    pub live_dropped: (u64, u64),
    /// The ring file, when the recorder has one.
    pub ring_file: Option<&'a Path>,
    /// Why the ring is on the heap, when `shm` was asked for.
    pub ring_note: Option<&'a str>,
}

/// Write `dir/manifest.json` atomically.
///
/// # Errors
/// [`ServeError::Capture`] when it cannot be written.
pub fn write_manifest(dir: &Path, r: &ManifestFacts) -> Result<(), ServeError> {
    let cfg = r.config;
    let sc = cfg.scheduler_config();
    let producer = format!("looptime {}", env!("CARGO_PKG_VERSION"));
    // Validation refused a config without a TOML form; should one reach
    // here anyway, the manifest is not written with the hash of "".
    let toml = cfg.hash_text().map_err(|e| ServeError::Io {
        path: dir.join("manifest.json"),
        source: std::io::Error::other(e.to_string()),
    })?;
    Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        producer: &producer,
        created_utc: utc_rfc3339(),
        session: file_name(r.session),
        rollout: r.rollout,
        status: r.status,
        writer: looptime_runtime::episode::WriterProcess::while_running(r.status),
        config_source: r.config_source,
        config: cfg,
        config_hash: sha256(toml.as_bytes()),
        source_hash: SOURCE_HASH,
        program: None,
        host: r.host,
        realtime: Some(r.realtime),
        cpu_dma_latency_held: Some(r.dma_held),
        recorder: cfg.run.control_timing.then(|| RecorderFacts {
            footprint_bytes: cfg.recorder_footprint_bytes(),
            budget_bytes: cfg.run.timing_memory_budget_mb << 20,
            ring_file: r.ring_file.map(|p| p.display().to_string()),
            ring_note: r.ring_note.map(str::to_string),
        }),
        schedule: ScheduleFacts {
            nominal_period_ns: cfg.nominal_period_ns(),
            effective_period_ns: sc.period_ns,
            spin_margin_ns: sc.spin_margin_ns,
            spin_margin_auto: sc.auto_margin,
            overrun_policy: sc.policy.as_str(),
            clock: if cfg.run.rtf == 0.0 {
                "simulation"
            } else {
                "host_monotonic"
            },
        },
        counts: Counts {
            cycles: r.cycles,
            planned_cycles: cfg.warmup_cycles() + cfg.running_cycles(),
            overruns: r.overruns,
            skipped: r.skipped,
            stats_dropped: r.live_dropped.0,
            events_dropped: r.live_dropped.1,
        },
        files: manifest_files(&["events.jsonl"], r.evidence),
    }
    .write(dir)
}
