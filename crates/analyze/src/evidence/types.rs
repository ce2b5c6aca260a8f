//! What the loader gives: the evidence of one thread (its header, cycle
//! rows, caller values, the span table and its groups), the row types and
//! the group naming the exports share. The bottom rung of `evidence`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use looptime_capture::{Header, HeaderNotes, Summary};
use polars::prelude::DataFrame;

use crate::error::Result;

/// One caller value of one cycle. Integers stay exact 64-bit integers from
/// the file to the report; only their mean is a float.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    /// The cycle did not set the value.
    Unset,
    /// An `int` value.
    Int(i64),
    /// A `float` value.
    Float(f64),
}

/// A temporary file of an interrupted finish found in the episode directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftoverTemp {
    /// Its file name (`.control_timing.jsonl.<pid>.tmp`).
    pub name: String,
    /// The file it was to become.
    pub target: String,
    /// The pid of the process that was writing it.
    pub pid: u32,
    /// Its size.
    pub bytes: u64,
}

/// One cycle, compact.
#[derive(Clone, Copy, Debug)]
pub struct CycleRow {
    /// 1-based line in the JSONL.
    pub line: u64,
    /// Cycle index.
    pub cycle: u64,
    /// Index into `Header::phases`.
    pub phase: u32,
    /// Start of work.
    pub start_ns: i64,
    /// End of work.
    pub end_ns: Option<i64>,
    /// Thread CPU time over the work (the `cycle` CPU-time mode).
    pub cpu_ns: Option<i64>,
    /// The spin margin of the wait before the cycle.
    pub spin_margin_ns: Option<i64>,
    /// How long that wait spun.
    pub spin_ns: Option<i64>,
    /// Release point.
    pub target_ns: Option<i64>,
    /// Wait start.
    pub sleep_start_ns: Option<i64>,
    /// Wait end.
    pub wake_ns: Option<i64>,
    /// Release point had passed.
    pub overdue: bool,
    /// Skipped release points.
    pub skipped: u32,
    /// Released by an input's arrival (`"pace": "input"`), not a deadline.
    pub input_paced: bool,
    /// When the releasing input arrived (input-paced cycles).
    pub arrival_ns: Option<i64>,
    /// The releasing input's own counter, when it carries one.
    pub input_seq: Option<u64>,
    /// When the loop read that input, beside a kernel arrival.
    pub read_ns: Option<i64>,
    /// The kernel arrival's conversion bound (ns).
    pub arrival_bound_ns: Option<i64>,
    /// Spans dropped in this cycle.
    pub spans_dropped: u32,
    /// Data-age samples beyond this cycle's slots (counted, not stored).
    pub samples_dropped: u32,
    /// Spans stored in this cycle.
    pub n_spans: u32,
    /// Row of this cycle's first span in [`Evidence::spans`]; its spans are
    /// rows `span_row .. span_row + n_spans`.
    pub span_row: u64,
    /// First of this cycle's rows in its piece's span columns (internal).
    pub(crate) span_start: u32,
}

/// One data-age sample a cycle used or published (schema 2), in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleRow {
    /// Row of its cycle in [`Evidence::cycles`].
    pub row: u32,
    /// Index into `Header::sources`.
    pub source: u16,
    /// The producer's sequence number.
    pub seq: u64,
    /// Its stamp on its source's clock.
    pub stamp_ns: i64,
    /// When the cycle used it (or published it), host monotonic.
    pub at_ns: i64,
    /// Published by this thread rather than used.
    pub produced: bool,
}

/// A 64-bit mix (SplitMix64 finaliser) used to build path and group keys.
#[inline]
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The path key of a top-level span's (non-existent) parent.
pub const ROOT_PATH_KEY: u64 = 0x6C6F_6F70_7469_6D65;

/// What one stage-report group is: recorded once, the first time its key is
/// seen. The key folds in the phase, the tree path and the attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDecode {
    /// The key in the span table's `key` column.
    pub key: u64,
    /// Index into `Header::phases`.
    pub phase: u32,
    /// Index into `Header::stages`.
    pub stage: u32,
    /// Nesting depth.
    pub depth: u32,
    /// Stage names from the top-level ancestor down, `/`-joined.
    pub path: String,
    /// Attributes, by key.
    pub attrs: BTreeMap<String, String>,
    /// Path keys from the top-level ancestor down to this span.
    pub chain: Vec<u64>,
}

/// Everything read from an episode directory.
#[derive(Debug)]
pub struct Evidence {
    /// The episode directory.
    pub dir: PathBuf,
    /// JSONL header.
    pub header: Header,
    /// The summary, when present and readable.
    pub summary: Option<Summary>,
    /// Why the summary could not be used, when it is present but bad.
    pub summary_problem: Option<String>,
    /// `manifest.json`, when present.
    pub manifest: Option<serde_json::Value>,
    /// Cycles in file order.
    pub cycles: Vec<CycleRow>,
    /// Caller values, `cycles.len() × header.values.len()`, row-major.
    pub values: Vec<Cell>,
    /// The span table: `key` (u64, see [`GroupDecode`]), `stage` (u32),
    /// `wall_ns` (i64), `cpu_ns` (i64, −1 when not measured), `start_ns`
    /// (i64); one chunk per parsed piece, never copied.
    pub spans: DataFrame,
    /// Stage-report groups in order of first appearance.
    pub groups: Vec<GroupDecode>,
    /// Command-stage spans: (row in `cycles`, span start).
    pub commands: Vec<(u32, i64)>,
    /// Data-age samples, in file order (schema 2; empty without sources).
    pub samples: Vec<SampleRow>,
    /// Lines skipped in lenient mode.
    pub skipped_lines: u64,
    /// The first skipped lines and why.
    pub skipped_examples: Vec<String>,
    /// The last line was cut off (an abrupt end).
    pub truncated_last_line: bool,
    /// Blank lines between records, skipped.
    pub blank_lines: u64,
    /// Cycle lines that ended in CRLF (read as LF).
    pub cr_lines: u64,
    /// What the header reader accepted (a byte-order mark, CRLF endings).
    pub header_notes: HeaderNotes,
    /// Temporary files an interrupted finish left in the directory.
    pub leftover_temps: Vec<LeftoverTemp>,
    /// Size of the JSONL.
    pub bytes: u64,
    /// The background threads' evidence (schema 2), in the order the
    /// control header declares them; each read from its own files.
    pub threads: Vec<Evidence>,
    /// Background threads the header declares whose JSONL is missing.
    pub missing_threads: Vec<String>,
    /// How many times cycle columns were computed from this evidence. It
    /// belongs to the evidence (not to a thread), so a view that computed
    /// them again on any thread would be counted: a test holds every view
    /// of an [`crate::Analysis`] to the one computation it makes.
    pub(crate) columns_computed: std::sync::atomic::AtomicUsize,
    /// The answer budget of input-paced cycles the loader was given
    /// ([`super::LoadOptions::answer_budget_ns`]).
    pub answer_budget_ns: Option<u64>,
    /// The header declared no nominal period and `header.nominal_period_ns`
    /// holds the manifest's `schedule.nominal_period_ns` instead (the
    /// report says so in a caveat).
    pub period_from_manifest: bool,
    /// The command stage used, and where its name came from (`flag`,
    /// `header` or `default`).
    pub command_stage: (String, &'static str),
}

/// One span, read back from [`Evidence::spans`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanRow {
    /// Group key ([`GroupDecode::key`]).
    pub key: u64,
    /// Index into `Header::stages`.
    pub stage: u32,
    /// Start (ns, the cycle clock).
    pub start_ns: i64,
    /// Wall time (ns).
    pub wall_ns: i64,
    /// Thread CPU time (ns); −1 when not measured.
    pub cpu_ns: i64,
}

/// A stage group's name as the exports and `fleet` write it: its tree
/// path, then `[k=v;…]` (keys sorted) when it has attributes.
pub fn group_name(path: &str, attrs: &BTreeMap<String, String>) -> String {
    if attrs.is_empty() {
        return path.to_string();
    }
    let kv: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{path}[{}]", kv.join(";"))
}

impl Evidence {
    /// The string at JSON `pointer` in the manifest (`/created_utc`, say),
    /// when there is a manifest and the value is a string.
    pub fn manifest_str(&self, pointer: &str) -> Option<String> {
        self.manifest
            .as_ref()
            .and_then(|m| m.pointer(pointer))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    }

    /// The name of phase index `i` (empty for an index the header lacks).
    pub fn phase_name(&self, i: u32) -> String {
        self.header
            .phases
            .get(i as usize)
            .cloned()
            .unwrap_or_default()
    }

    /// Every span in file order (the order of [`CycleRow::span_row`]).
    ///
    /// # Errors
    /// A span table without the loader's columns (a bug).
    pub fn span_rows(&self) -> Result<Vec<SpanRow>> {
        let col = |name: &str| self.spans.column(name);
        let (key, stage) = (col("key")?.u64()?, col("stage")?.u32()?);
        let (start, wall, cpu) = (
            col("start_ns")?.i64()?,
            col("wall_ns")?.i64()?,
            col("cpu_ns")?.i64()?,
        );
        Ok(key
            .into_no_null_iter()
            .zip(stage.into_no_null_iter())
            .zip(start.into_no_null_iter())
            .zip(wall.into_no_null_iter())
            .zip(cpu.into_no_null_iter())
            .map(|((((key, stage), start_ns), wall_ns), cpu_ns)| SpanRow {
                key,
                stage,
                start_ns,
                wall_ns,
                cpu_ns,
            })
            .collect())
    }
}
