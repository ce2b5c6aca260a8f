//! The evidence file format: one set of types, written by the recorder and
//! read by the analyzer.
//!
//! One idea, the schema, in files of one module: this one (the header,
//! the cycle and span records), `clocks` (the clock domains, anchors and
//! TSC calibration the header's times are read with), `summary_file` (the
//! summary's types) and `reader` (the limits a reader enforces and the
//! reader itself). They change together: a change to any one is a change of
//! the file format and its version.
//!
//! An episode directory holds two files written by [`crate::Recorder::finish`]:
//!
//! * [`CYCLES_FILE`] (`control_timing.jsonl`): one [`Header`] line, then one
//!   [`CycleRecord`] line per retained cycle, oldest first.
//! * [`SUMMARY_FILE`] (`control_timing_summary.json`): one [`Summary`]
//!   object. It is written last, so its presence means the finish completed.
//!
//! Since schema version 2 an episode may also hold one pair of files per
//! background thread that recorded (a camera reader, a viewer transport, a
//! policy worker): `control_timing.<thread>.jsonl` and
//! `control_timing_summary.<thread>.json` ([`thread_files`]), in the same
//! format. The control thread's header lists them in [`Header::threads`];
//! every header names its own thread ([`Header::thread`]). A file per
//! thread, rather than one file with a thread field per line, because each
//! thread has its own ring, cycle numbering, capacity and clock calibration:
//! each file is then a complete, independently checkable stream that its
//! own ring writes (at finish) or recovers (after a crash), and the control
//! thread's file stays exactly what a v1 reader expects. The version is
//! bumped (not a field added within version 1) because the control file no
//! longer holds all of an episode's evidence: a v1 reader must refuse a v2
//! episode rather than silently ignore its threads.
//!
//! Every timestamp is an integer number of nanoseconds, and the header's
//! [`ClockTable`] names the clock domain of every timestamp field. The full
//! field reference, with units and absence rules, is `docs/evidence-format.md`.
//!
//! Invariant kept by this module: a field is only ever added with
//! `#[serde(default)]` inside one schema version; anything that changes the
//! meaning of an existing field bumps [`SCHEMA_VERSION`], and the reader keeps
//! accepting every older version listed in [`SUPPORTED_SCHEMA_VERSIONS`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod clocks;
mod fields;
mod pace;
mod reader;
mod samples;
mod summary_file;

pub use clocks::*;
pub use pace::PaceKind;
pub use reader::*;
pub use samples::*;
pub use summary_file::*;

/// Most per-cycle caller values (a schema limit: the reader refuses a
/// header that declares more).
pub const MAX_VALUES: usize = 16;

/// Most free-form metadata entries a header may carry (the reader refuses more).
pub const MAX_METADATA_ENTRIES: usize = 4096;

/// The schema version this crate writes.
pub const SCHEMA_VERSION: u32 = 2;
/// Every schema version this crate can read.
pub const SUPPORTED_SCHEMA_VERSIONS: &[u32] = &[1, 2];
/// The name of the control thread, in [`Header::thread`] (background
/// threads take any other name).
pub const CONTROL_THREAD: &str = "control";

/// The JSONL and summary file names of thread `name`: the plain
/// [`CYCLES_FILE`] and [`SUMMARY_FILE`] for the control thread,
/// `control_timing.<name>.jsonl` and `control_timing_summary.<name>.json`
/// for a background thread.
pub fn thread_files(name: &str) -> (String, String) {
    if name == CONTROL_THREAD {
        (CYCLES_FILE.to_string(), SUMMARY_FILE.to_string())
    } else {
        (
            format!("control_timing.{name}.jsonl"),
            format!("control_timing_summary.{name}.json"),
        )
    }
}

/// The thread a file's records come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// `control` for the control thread, else the background thread's name.
    pub name: String,
    /// The OS thread id (`gettid`) that recorded; absent when it never
    /// recorded a cycle.
    #[serde(default)]
    pub tid: Option<u64>,
}
/// File name of the per-cycle evidence inside an episode directory.
pub const CYCLES_FILE: &str = "control_timing.jsonl";
/// File name of the capture summary inside an episode directory.
pub const SUMMARY_FILE: &str = "control_timing_summary.json";

/// Fixed capacities the recorder was built with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    /// Most cycles kept in the ring (`run.timing_max_cycles`).
    pub max_cycles: u64,
    /// Most spans stored per cycle; extra spans are counted in `spans_dropped`.
    pub max_spans_per_cycle: u32,
    /// Most attributes stored per span.
    pub max_attrs_per_span: u32,
    /// Deepest span nesting stored.
    pub max_span_depth: u32,
    /// Most samples stored per cycle (schema 2, added with data age; absent,
    /// read as 0, in older files); extra ones are counted in the cycle's
    /// `samples_dropped`.
    #[serde(default, skip_serializing_if = "fields::is_zero_u32")]
    pub max_samples_per_cycle: u32,
}

/// Where a recorder reads the thread's CPU clock
/// (`CLOCK_THREAD_CPUTIME_ID`, a system call of about 0.1 to 0.8 µs).
///
/// The default is [`Cycle`](CpuTimeMode::Cycle): two reads a cycle keep a
/// 1 kHz loop with 10 spans under 0.5 % of its period in the recorder even
/// where a read costs 0.8 µs, where [`Spans`](CpuTimeMode::Spans) would
/// spend 1.6 % on reads alone (docs/performance.md, CPU-time modes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuTimeMode {
    /// Two reads per span (open and close), for the stages registered with
    /// CPU time; cycles carry none.
    Spans,
    /// Two reads per cycle (at its start and at the end of its work); the
    /// cycle record carries the work's CPU time and spans are wall-only.
    #[default]
    Cycle,
    /// No reads of the CPU clock.
    Off,
}

impl CpuTimeMode {
    /// Every mode, in the order the docs list them.
    pub const ALL: [CpuTimeMode; 3] = [CpuTimeMode::Spans, CpuTimeMode::Cycle, CpuTimeMode::Off];

    /// The name written to the header and accepted by the configs.
    pub fn name(self) -> &'static str {
        match self {
            CpuTimeMode::Spans => "spans",
            CpuTimeMode::Cycle => "cycle",
            CpuTimeMode::Off => "off",
        }
    }

    /// The mode of the on/off switch of the releases before the modes (the
    /// header's `thread_cpu_time`, the builder's and the bindings' boolean,
    /// the configs' `true`/`false`): on was per span, off was off.
    pub fn from_switch(on: bool) -> CpuTimeMode {
        if on {
            CpuTimeMode::Spans
        } else {
            CpuTimeMode::Off
        }
    }

    /// The mode named `s` (`spans`, `cycle` or `off`).
    pub fn from_name(s: &str) -> Option<CpuTimeMode> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }
}

impl std::fmt::Display for CpuTimeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A registered stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageInfo {
    /// Stage name, as it appears in `SpanRecord::stage`.
    pub name: String,
    /// Whether thread CPU time is measured for this stage's spans (only
    /// in the `spans` CPU-time mode).
    pub cpu_time: bool,
}

/// A registered attribute key with the values it may take.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeInfo {
    /// Key name, as it appears in `SpanRecord::attrs`.
    pub key: String,
    /// Every value registered for this key.
    pub values: Vec<String>,
}

/// Kind of a per-cycle caller value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    /// A signed 64-bit integer (counters, sequence numbers, robot timestamps).
    Int,
    /// A 64-bit float (rates, ratios).
    Float,
}

/// A registered per-cycle caller value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueInfo {
    /// Name, as it appears in `CycleRecord::values`.
    pub name: String,
    /// Integer or float.
    pub kind: ValueKind,
    /// Free-text unit (`ms`, `ratio`, `count`), for the reader.
    pub unit: String,
}

/// What the recorder's own bookkeeping costs, measured when it was built.
///
/// Each figure is the median over `samples` batches of the per-operation
/// time, in nanoseconds of wall time on the thread that built the recorder.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// One raw TSC read.
    pub clock_read_ns: f64,
    /// One `CLOCK_THREAD_CPUTIME_ID` read (a system call).
    pub thread_cpu_read_ns: f64,
    /// Beginning and ending one cycle with no spans.
    pub cycle_ns: f64,
    /// Opening and closing one span, wall time only.
    pub span_wall_ns: f64,
    /// Opening and closing one span with thread CPU time.
    pub span_cpu_ns: f64,
    /// Beginning and ending one cycle with its CPU time (the `cycle`
    /// CPU-time mode); absent (0) in files written before the modes.
    #[serde(default)]
    pub cycle_cpu_ns: f64,
    /// Batches the medians were taken over.
    pub samples: u32,
}

/// Marker for the header line (`"type": "header"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum HeaderTag {
    /// The only value.
    #[default]
    #[serde(rename = "header")]
    Header,
}

/// Marker for a cycle line (`"type": "cycle"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CycleTag {
    /// The only value.
    #[default]
    #[serde(rename = "cycle")]
    Cycle,
}

/// The first line of `control_timing.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always `"header"`.
    #[serde(rename = "type")]
    pub kind: HeaderTag,
    /// Schema version of this file.
    pub schema_version: u32,
    /// Name and version of the writer, e.g. `looptime-capture 0.1.0`.
    pub producer: String,
    /// Clock domain of every timestamp field.
    pub clocks: ClockTable,
    /// How TSC ticks became nanoseconds.
    pub tsc: TscCalibration,
    /// Fixed capacities.
    pub capacity: Capacity,
    /// The loop's nominal period, when the caller declared one.
    #[serde(default)]
    pub nominal_period_ns: Option<u64>,
    /// Whether the recorder measured thread CPU time at all.
    pub thread_cpu_time: bool,
    /// Where it measured it (schema 2, added with the CPU-time modes;
    /// absent in older files, where `thread_cpu_time` true means per span).
    /// Read it with [`Header::cpu_mode`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_cpu_mode: Option<CpuTimeMode>,
    /// Registered stages, in id order.
    pub stages: Vec<StageInfo>,
    /// Registered phases, in id order.
    pub phases: Vec<String>,
    /// Registered attribute keys and values.
    pub attributes: Vec<AttributeInfo>,
    /// Registered per-cycle values. Written as `value_defs`, so that no key
    /// of the header line has another type in the cycle lines (polars'
    /// `read_ndjson` needs one type per key).
    #[serde(rename = "value_defs")]
    pub values: Vec<ValueInfo>,
    /// The recorder's own measured cost.
    pub overhead: Overhead,
    /// Free-form caller metadata (run id, config hash, ...).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The thread this file's records come from (schema 2; absent in v1,
    /// whose one file is the control thread's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadInfo>,
    /// In the control thread's file: the background threads recorded into
    /// the same episode, each in its own [`thread_files`] (schema 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<String>,
    /// True when the thread marks no cycles of its own: each top-level span
    /// is then a cycle by itself (phase `spans`), so its cycles have no
    /// rate to speak of (schema 2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub implicit_cycles: bool,
    /// Wall-clock anchors: `CLOCK_REALTIME` against `CLOCK_MONOTONIC`, at
    /// the start and at finish (schema 2, added with the MCAP export;
    /// absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_clock: Option<WallClock>,
    /// Declared data sources, in id order (schema 2, added with data age;
    /// absent in older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceInfo>,
    /// The stage whose spans are the loop's commands (their starts are
    /// command submissions, and an input-paced cycle's answer), when the
    /// recorder declared one; absent in older files and when not declared
    /// (the analyzer then uses `robot_send_command`, or its flag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_stage: Option<String>,
    /// The compute budget the runtime declared for each cycle's work (ns):
    /// work beyond it is a budget overrun, counted for statistics only.
    /// Absent unless declared (the analyzer then uses the period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_budget_ns: Option<u64>,
    /// The deadline tolerance the runtime declared (ns): a start later than
    /// its release plus this is a late start (a wake miss), a finish later
    /// than the next release plus this a completion miss. Absent unless
    /// declared (the analyzer then uses 10 % of the period for late starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_tolerance_ns: Option<u64>,
}

impl Header {
    /// The CPU-time mode the file was recorded in: the header's
    /// `thread_cpu_mode`, or for a file written before the modes, `spans`
    /// when `thread_cpu_time` is true and `off` when it is false.
    pub fn cpu_mode(&self) -> CpuTimeMode {
        self.thread_cpu_mode
            .unwrap_or(CpuTimeMode::from_switch(self.thread_cpu_time))
    }

    /// The thread's name: `control` for a v1 file.
    pub fn thread_name(&self) -> &str {
        self.thread
            .as_ref()
            .map_or(CONTROL_THREAD, |t| t.name.as_str())
    }
}

/// One retained cycle: a line of `control_timing.jsonl` after the header.
///
/// A cycle is: wait for the release point (`sleep_start_ns` to `wake_ns`),
/// start (`start_ns`), work with spans, end of work (`end_ns`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CycleRecord {
    /// Always `"cycle"`.
    #[serde(rename = "type")]
    pub kind: CycleTag,
    /// Cycle index, counted from 0 when the recorder was built; never reset.
    pub cycle: u64,
    /// Phase name (one of `Header::phases`).
    pub phase: String,
    /// Start of the cycle's work.
    pub start_ns: u64,
    /// End of the cycle's work; absent when the run stopped inside the cycle.
    #[serde(default)]
    pub end_ns: Option<u64>,
    /// Thread CPU time from the start of the cycle's work to its end; only
    /// in the `cycle` CPU-time mode, and absent when the cycle never ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
    /// The release point the cycle was scheduled for; absent when the caller
    /// gave none.
    #[serde(default)]
    pub target_ns: Option<u64>,
    /// When the wait before this cycle began; absent when there was no wait
    /// (the cycle was overdue, or the caller did not mark it).
    #[serde(default)]
    pub sleep_start_ns: Option<u64>,
    /// When the wait before this cycle ended (after sleep and spin).
    #[serde(default)]
    pub wake_ns: Option<u64>,
    /// The spin margin the scheduler's wait before this cycle used (fixed,
    /// or the adaptive margin's value then); absent when the caller gave
    /// none. Added within schema 2; older files have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin_margin_ns: Option<u64>,
    /// How long that wait spun, ns; absent when the caller gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin_ns: Option<u64>,
    /// True when the release point had already passed when the scheduler
    /// came to wait for it (the previous cycle overran).
    #[serde(default, deserialize_with = "fields::null_is_default")]
    pub overdue: bool,
    /// Release points skipped entirely before this cycle (keep-phase policy).
    #[serde(default, deserialize_with = "fields::null_is_default")]
    pub skipped: u32,
    /// What released the cycle: `deadline` (absent: the loop's own
    /// deadline, or no schedule) or `input` (an input's arrival; added
    /// within schema 2, with the input-paced release).
    #[serde(
        default,
        deserialize_with = "fields::null_is_default",
        skip_serializing_if = "PaceKind::is_deadline"
    )]
    pub pace: PaceKind,
    /// When the releasing input arrived (host monotonic ns); input-paced
    /// cycles only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_ns: Option<u64>,
    /// The releasing input's own counter, when it carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_seq: Option<u64>,
    /// When the loop read the releasing input (host monotonic ns, right
    /// after its receive returned), recorded when `arrival_ns` is the
    /// kernel's receive stamp: `read_ns − arrival_ns` is how long the input
    /// waited in the socket (added within schema 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ns: Option<u64>,
    /// The bound (ns) of that stamp's conversion from the realtime clock
    /// onto the host monotonic one: the spread of the two monotonic reads
    /// around the realtime read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_bound_ns: Option<u64>,
    /// Spans of this cycle that did not fit its slots and were not stored.
    #[serde(default, deserialize_with = "fields::null_is_default")]
    pub spans_dropped: u32,
    /// Caller values set during the cycle, by name.
    #[serde(default, deserialize_with = "fields::null_is_default")]
    pub values: BTreeMap<String, serde_json::Number>,
    /// Stored spans, in the order they were opened.
    #[serde(default, deserialize_with = "fields::null_is_default")]
    pub spans: Vec<SpanRecord>,
    /// Samples the cycle used or published, in call order (schema 2, added
    /// with data age; absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<SampleRecord>,
    /// Samples beyond the cycle's slots, counted and not stored.
    #[serde(default, skip_serializing_if = "fields::is_zero_u32")]
    pub samples_dropped: u32,
}

/// One stored span.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanRecord {
    /// Stage name (one of `Header::stages`).
    pub stage: String,
    /// Index in this cycle's `spans` of the enclosing span; absent at depth 0.
    #[serde(default)]
    pub parent: Option<u32>,
    /// Nesting depth, 0 for a top-level span.
    pub depth: u32,
    /// When the span opened.
    pub start_ns: u64,
    /// Wall time from open to close. A parent's time includes its children's.
    pub wall_ns: u64,
    /// Thread CPU time from open to close; absent when not measured.
    #[serde(default)]
    pub cpu_ns: Option<u64>,
    /// True when the span was still open when its cycle ended and was closed
    /// at the cycle's end.
    #[serde(default)]
    pub closed_by_cycle_end: bool,
    /// Attributes set on the span, by key.
    #[serde(default, deserialize_with = "fields::null_is_default")]
    pub attrs: BTreeMap<String, String>,
}
