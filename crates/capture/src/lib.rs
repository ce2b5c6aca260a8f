//! `looptime-capture`: a preallocated, bounded recorder for control-loop
//! timing, and the evidence file format it writes.
//!
//! Inside the loop the [`Recorder`] stores, for every cycle, its phase,
//! start, scheduled target, the wait before it, the end of its work, caller
//! values, and nested spans with wall and thread-CPU time. It allocates all
//! its memory when it is built and never allocates, locks, formats or does
//! I/O afterwards. [`Recorder::finish`] then writes `control_timing.jsonl`
//! and `control_timing_summary.json` atomically; [`mod@format`] defines both.
//!
//! ```
//! use looptime_capture::{CaptureStatus, EvidenceReader, RecorderBuilder, Release};
//!
//! let mut b = RecorderBuilder::new();
//! b.max_cycles(100).nominal_period_ns(10_000_000);
//! let running = b.phase("running")?;
//! let sense = b.stage("sense")?;
//! let decode = b.stage("decode")?;
//! let mut rec = b.build()?;
//!
//! for _ in 0..3 {
//!     rec.begin_wait();
//!     // ... the scheduler sleeps until the release point ...
//!     rec.end_wait();
//!     rec.begin_cycle(running, Release::NONE);
//!     {
//!         let mut outer = rec.span(sense);
//!         let _inner = outer.span(decode); // nested: depth 1, parent 0
//!     }
//!     rec.end_cycle();
//! }
//!
//! let dir = tempfile::tempdir()?;
//! let report = rec.finish(dir.path(), CaptureStatus::Complete)?;
//! assert_eq!(report.summary.capture.retained_cycles, 3);
//!
//! let (_header, cycles) = EvidenceReader::open(&report.cycles_path)?.read_all()?;
//! assert_eq!(cycles[2].spans[1].parent, Some(0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod builder;
pub mod cycle;
mod error;
mod finish;
pub mod format;
pub mod json_error;
pub mod net;
pub mod quantile;
mod recorder;
mod registry;
mod release;
pub mod ring;
mod slot;
pub mod status;
pub mod summary;
mod sys;
mod writer;

pub use error::{error_chain, CaptureError, ErrorClass, Result};
pub use format::{
    thread_files, CaptureStatus, ClockDomain, CpuTimeMode, CycleRecord, EvidenceReader, Header,
    HeaderNotes, Recovery, SampleRecord, SourceInfo, SpanRecord, Summary, ThreadFiles, ThreadInfo,
    ValueKind, WallClock, WallClockAnchor, CONTROL_THREAD, CYCLES_FILE, MAX_HEADER_BYTES,
    SCHEMA_VERSION, SUMMARY_FILE,
};
pub use recorder::{
    footprint_bytes, AttrKey, AttrValue, PaceKind, PhaseId, Recorder, RecorderBuilder, Release,
    SourceClock, SourceId, SourceSpec, SpanGuard, SpanToken, StageId, ValueId, DEFAULT_MAX_CYCLES,
    DEFAULT_MAX_SAMPLES_PER_CYCLE, DEFAULT_MAX_SPANS_PER_CYCLE, MAX_ATTRS_PER_SPAN,
    MAX_CYCLES_CEILING, MAX_DECLARED_NS, MAX_METADATA_ENTRIES, MAX_SAMPLES_CEILING,
    MAX_SPANS_CEILING, MAX_SPAN_DEPTH, MAX_VALUES, UNDECLARED_NS,
};
pub use registry::{Recorders, Registry};
pub use ring::RingStorage;
pub use writer::{parse_temp_name, sync_dir, temp_path, write_atomic, FinishReport};

/// Clock reads used by the recorder, exposed for schedulers that want the
/// same clocks.
pub mod clock {
    pub use crate::sys::{monotonic_ns, thread_cpu_ns};
}
