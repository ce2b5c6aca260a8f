//! The summary file's types (`control_timing_summary.json`): how the
//! capture ended, what it kept and lost, the distributions the recorder
//! summarised while writing, and the recovery record. Part of the schema
//! ([`crate::format`]).

use serde::{Deserialize, Serialize};

use super::Overhead;

/// How a capture ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureStatus {
    /// `finish` after the run ended normally.
    Complete,
    /// `finish` after an orderly abort (Ctrl-C, SIGTERM, error).
    Aborted,
    /// Rebuilt by `recover` from the ring file of a process that died
    /// (kill -9, crash, OOM kill); [`Summary::recovery`] says what was found.
    Recovered,
}

/// What `recover` found in the ring file of a process that died.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// The ring file read (removed after the files were written).
    pub ring_file: String,
    /// The pid of the process that wrote it.
    pub writer_pid: u32,
    /// What the writer last said it was doing: `recording` or `finishing`.
    pub ring_state: String,
    /// Complete cycles read from the ring and written to the JSONL.
    pub cycles_recovered: u64,
    /// Cycles begun and not ended when the process died (0 or 1): lost.
    pub in_progress_records: u64,
    /// Records whose sequence number or contents did not check out: lost.
    pub torn_records: u64,
    /// Index of the last complete cycle.
    pub last_complete_cycle: Option<u64>,
    /// `end_ns` of the last complete cycle: the last instant the evidence
    /// covers (host monotonic ns).
    pub last_complete_end_ns: Option<u64>,
}

/// Counts that say what the capture kept and what it lost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureInfo {
    /// Ring capacity in cycles.
    pub capacity_cycles: u64,
    /// Cycles begun since the recorder was built.
    pub total_cycles: u64,
    /// Cycles written to the JSONL.
    pub retained_cycles: u64,
    /// Earlier cycles overwritten by the ring (`total − retained`).
    pub dropped_cycles: u64,
    /// Spans that did not fit their cycle, over the whole run (including
    /// cycles later dropped).
    pub spans_dropped: u64,
    /// Spans dropped in the retained cycles only (the sum of their
    /// `spans_dropped`).
    pub spans_dropped_retained: u64,
    /// Spans opened while no cycle was open (not stored).
    pub spans_outside_cycle: u64,
    /// Caller values of the retained cycles that were set but not written
    /// because they were not finite (NaN, ±inf: JSON has no number for
    /// them). Absent in files written before this field (schema 2,
    /// additive); the analyzer names a non-zero count in a caveat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values_dropped: Option<u64>,
    /// First retained cycle index.
    pub first_cycle: Option<u64>,
    /// Last retained cycle index.
    pub last_cycle: Option<u64>,
    /// `start_ns` of the first retained cycle.
    pub first_start_ns: Option<u64>,
    /// `start_ns` of the last retained cycle.
    pub last_start_ns: Option<u64>,
}

/// A distribution of nanosecond values, from an HDR histogram with three
/// significant figures (values are exact to 0.1 %).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Number of values.
    pub count: u64,
    /// Values below zero that were recorded as zero (clock-mapping noise).
    #[serde(default)]
    pub negative_count: u64,
    /// Arithmetic mean (ns).
    pub mean_ns: f64,
    /// Smallest value (ns).
    pub min_ns: u64,
    /// Median (ns).
    pub p50_ns: u64,
    /// 90th percentile (ns).
    pub p90_ns: u64,
    /// 99th percentile (ns).
    pub p99_ns: u64,
    /// 99.9th percentile (ns).
    pub p999_ns: u64,
    /// Largest value (ns).
    pub max_ns: u64,
}

/// A continuous run of cycles in one phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentSummary {
    /// Phase name.
    pub phase: String,
    /// First cycle index of the segment.
    pub first_cycle: u64,
    /// Last cycle index of the segment.
    pub last_cycle: u64,
    /// Cycles in the segment.
    pub cycles: u64,
    /// `(cycles − 1) / (last start − first start)`, in hertz; absent with
    /// fewer than two cycles.
    pub loop_hz: Option<f64>,
    /// Adjacent start-to-start intervals within the segment.
    pub period: Option<Distribution>,
    /// Cycles marked overdue.
    pub overdue: u64,
    /// Release points skipped.
    pub skipped: u64,
}

/// Wall and CPU distributions of one stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    /// Stage name.
    pub stage: String,
    /// Spans stored.
    pub count: u64,
    /// Wall time of the spans.
    pub wall: Distribution,
    /// CPU time of the spans that measured it.
    pub cpu: Option<Distribution>,
}

/// `control_timing_summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Schema version of this file.
    pub schema_version: u32,
    /// Name and version of the writer.
    pub producer: String,
    /// Complete or aborted.
    pub status: CaptureStatus,
    /// What was kept and lost.
    pub capture: CaptureInfo,
    /// Phase segments, in time order.
    pub segments: Vec<SegmentSummary>,
    /// `end_ns − start_ns` of every cycle that ended.
    pub work: Option<Distribution>,
    /// `wake_ns − target_ns` of every cycle that waited, when comparable.
    pub sleep_overshoot: Option<Distribution>,
    /// `start_ns − target_ns` of every cycle with a target, when comparable.
    pub deadline_lag: Option<Distribution>,
    /// Why `sleep_overshoot` and `deadline_lag` are absent, when they are.
    #[serde(default)]
    pub schedule_metrics_absent_reason: Option<String>,
    /// Per-stage distributions, in stage id order.
    pub stages: Vec<StageSummary>,
    /// The recorder's own cost (copied from the header).
    pub overhead: Overhead,
    /// Present only with status `recovered`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// In the control thread's summary: each background thread's files, as
    /// finish wrote them (schema 2; empty without background threads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadFiles>,
}

/// A background thread's files in an episode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadFiles {
    /// The thread's name.
    pub name: String,
    /// Its JSONL.
    pub cycles_file: String,
    /// Its summary.
    pub summary_file: String,
    /// Cycles it retained.
    pub retained_cycles: u64,
}
