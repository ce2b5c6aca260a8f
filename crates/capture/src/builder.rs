//! Registering a recorder: its names (stages, phases, attributes, caller
//! values), capacities and options, each name turned into a small typed id
//! before the loop starts. Below the recorder: [`RecorderBuilder::build`]
//! is written beside the `Recorder` it allocates, so this module imports
//! none of the recorder, the ring storage or the writer.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{CaptureError, Result};
use crate::format::{
    AttributeInfo, ClockDomain, CpuTimeMode, SourceInfo, StageInfo, ValueInfo, ValueKind,
    CONTROL_THREAD, MAX_VALUES,
};
use crate::ring::RingStorage;
use crate::slot::{CycleSlot, SampleSlot, SpanSlot};

/// Default number of cycles kept (`run.timing_max_cycles`).
pub const DEFAULT_MAX_CYCLES: usize = 20_000;
/// Default number of span slots per cycle.
pub const DEFAULT_MAX_SPANS_PER_CYCLE: usize = 16;
/// Deepest span nesting stored; deeper spans are counted as dropped.
pub const MAX_SPAN_DEPTH: usize = 16;
/// Largest accepted ring capacity (cycles).
pub const MAX_CYCLES_CEILING: usize = 50_000_000;
/// Largest accepted span slot count per cycle.
pub const MAX_SPANS_CEILING: usize = 1024;
/// Default number of sample slots per cycle (data age).
pub const DEFAULT_MAX_SAMPLES_PER_CYCLE: usize = 8;
/// Largest accepted sample slot count per cycle.
pub const MAX_SAMPLES_CEILING: usize = 256;
/// Largest compute budget or deadline tolerance a recorder declares: 10 s
/// (the scheduler's limit, `looptime_runtime::MAX_DECLARED_NS`).
pub const MAX_DECLARED_NS: u64 = 10_000_000_000;
/// The sentinel that means "undeclared" wherever a budget or tolerance can
/// be passed (C's `LOOPTIME_UNDECLARED`, `UINT64_MAX`).
pub const UNDECLARED_NS: u64 = u64::MAX;

pub(crate) const NAME_TABLE_MAX: usize = u16::MAX as usize - 1;

/// Bytes the recorder preallocates for `max_cycles` cycles of
/// `max_spans_per_cycle` span slots, `max_samples_per_cycle` sample slots
/// and `n_values` caller values: the cycle ring, the span, sample and value
/// slots (what dominates; the name tables and the open-span stack are a few
/// kilobytes). Saturates instead of overflowing, so an absurd request gives
/// an absurd number, never a wrap.
pub fn footprint_bytes(
    max_cycles: u64,
    max_spans_per_cycle: u64,
    max_samples_per_cycle: u64,
    n_values: u64,
) -> u64 {
    let cycle = std::mem::size_of::<CycleSlot>() as u64;
    let span = std::mem::size_of::<SpanSlot>() as u64;
    let sample = std::mem::size_of::<SampleSlot>() as u64;
    let per_cycle = cycle
        .saturating_add(span.saturating_mul(max_spans_per_cycle))
        .saturating_add(sample.saturating_mul(max_samples_per_cycle))
        .saturating_add(8u64.saturating_mul(n_values));
    max_cycles.saturating_mul(per_cycle)
}

/// A registered stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StageId(pub(crate) u16);
/// A registered phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PhaseId(pub(crate) u16);
/// A registered attribute key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttrKey(pub(crate) u16);
/// A registered value of one attribute key (it carries its key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttrValue {
    pub(crate) key: u16,
    pub(crate) value: u16,
}
/// A registered data source (see [`RecorderBuilder::source`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceId(pub(crate) u16);

impl SourceId {
    /// Position in the header's source table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The clock a source's stamps are on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum SourceClock {
    /// The host's `CLOCK_MONOTONIC` (what
    /// [`clock::monotonic_ns`](crate::clock::monotonic_ns) reads): stamps
    /// are comparable with the recorder's times, so ages are computed.
    #[default]
    HostMonotonic,
    /// Another clock, by the caller's name for it (a camera's own clock,
    /// another host's): ages are not computed from it, and the analyzer
    /// says why, until its stamps are mapped onto this host's clock.
    Named(String),
}

/// How a source is declared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceSpec {
    /// The age beyond which a use counts as stale (none: never stale).
    pub max_age_ns: Option<u64>,
    /// The clock its stamps are on.
    pub clock: SourceClock,
}

/// A registered per-cycle caller value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ValueId {
    pub(crate) index: u8,
    pub(crate) kind: ValueKind,
}

impl StageId {
    /// Position in the header's stage table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ValueId {
    /// Integer or float.
    pub fn kind(self) -> ValueKind {
        self.kind
    }
}

impl AttrValue {
    /// The key it is a value of: its position in the header's attribute
    /// table.
    pub fn key_index(self) -> usize {
        self.key as usize
    }
}

impl PhaseId {
    /// Position in the header's phase table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

pub use crate::format::PaceKind;

pub use crate::release::Release;

/// Registers names and capacities, then allocates the [`Recorder`](crate::Recorder).
///
/// ```
/// use looptime_capture::{RecorderBuilder, Release};
/// let mut b = RecorderBuilder::new();
/// b.max_cycles(1_000).max_spans_per_cycle(8);
/// let running = b.phase("running").unwrap();
/// let read = b.stage("camera_read").unwrap();
/// let mut rec = b.build().unwrap();
/// rec.begin_cycle(running, Release::NONE);
/// {
///     let _span = rec.span(read);
/// }
/// rec.end_cycle();
/// assert_eq!(rec.total_cycles(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct RecorderBuilder {
    pub(crate) max_cycles: usize,
    pub(crate) max_spans: usize,
    pub(crate) max_samples: usize,
    pub(crate) sources: Vec<SourceInfo>,
    pub(crate) cpu_mode: CpuTimeMode,
    pub(crate) measure_overhead: bool,
    pub(crate) nominal_period_ns: Option<u64>,
    pub(crate) command_stage: Option<StageId>,
    pub(crate) compute_budget_ns: Option<u64>,
    pub(crate) deadline_tolerance_ns: Option<u64>,
    pub(crate) live_status: bool,
    pub(crate) target_clock: ClockDomain,
    pub(crate) stages: Vec<StageInfo>,
    pub(crate) phases: Vec<String>,
    pub(crate) attributes: Vec<AttributeInfo>,
    pub(crate) values: Vec<ValueInfo>,
    pub(crate) metadata: BTreeMap<String, String>,
    pub(crate) ring: RingStorage,
    pub(crate) episode_dir: Option<PathBuf>,
    pub(crate) thread: String,
    pub(crate) threads: Vec<String>,
    pub(crate) implicit_cycles: bool,
}

impl Default for RecorderBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RecorderBuilder {
    /// Defaults: 20,000 cycles, 16 spans a cycle, thread CPU time per cycle,
    /// targets on host monotonic time, overhead self-measurement on.
    pub fn new() -> Self {
        Self {
            max_cycles: DEFAULT_MAX_CYCLES,
            max_spans: DEFAULT_MAX_SPANS_PER_CYCLE,
            max_samples: DEFAULT_MAX_SAMPLES_PER_CYCLE,
            sources: Vec::new(),
            cpu_mode: CpuTimeMode::Cycle,
            measure_overhead: true,
            nominal_period_ns: None,
            command_stage: None,
            compute_budget_ns: None,
            deadline_tolerance_ns: None,
            live_status: false,
            target_clock: ClockDomain::HostMonotonic,
            stages: Vec::new(),
            phases: Vec::new(),
            attributes: Vec::new(),
            values: Vec::new(),
            metadata: BTreeMap::new(),
            ring: RingStorage::Auto,
            episode_dir: None,
            thread: CONTROL_THREAD.to_string(),
            threads: Vec::new(),
            implicit_cycles: false,
        }
    }

    /// The thread this recorder records: [`CONTROL_THREAD`] (the default)
    /// or a background thread's name, 1 to 48 ASCII letters, digits, `_`
    /// or `-` (it becomes part of a file name). A background thread's
    /// recorder joins an episode through a [`Registry`](crate::Registry).
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for a name that is not allowed.
    pub fn thread(&mut self, name: &str) -> Result<&mut Self> {
        let ok = !name.is_empty()
            && name.len() <= 48
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(CaptureError::Registration {
                table: "thread",
                name: name.to_string(),
                reason: "a thread name is 1 to 48 ASCII letters, digits, '_' or '-'",
            });
        }
        self.thread = name.to_string();
        Ok(self)
    }

    /// For a thread that marks no cycles of its own: each top-level span
    /// opened outside a cycle begins a cycle (phase `spans`, registered
    /// first when no phase is) that ends when the span closes. Off by
    /// default: spans outside a cycle are counted and not stored.
    pub fn implicit_cycles(&mut self, on: bool) -> &mut Self {
        self.implicit_cycles = on;
        if on && self.phases.is_empty() {
            self.phases.push("spans".to_string());
        }
        self
    }

    /// Where the ring lives (default [`RingStorage::Auto`]: a ring file in
    /// `/dev/shm`, which survives a kill of this process, else the heap).
    pub fn ring(&mut self, storage: RingStorage) -> &mut Self {
        self.ring = storage;
        self
    }

    /// The episode directory this recording's evidence belongs in, written
    /// into the ring file for [`crate::ring::recover`] (also settable later
    /// with [`Recorder::set_episode_dir`](crate::Recorder::set_episode_dir)).
    pub fn episode_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.episode_dir = Some(dir.into());
        self
    }

    /// Cycles kept in the ring (1 to [`MAX_CYCLES_CEILING`]).
    pub fn max_cycles(&mut self, n: usize) -> &mut Self {
        self.max_cycles = n;
        self
    }

    /// Span slots per cycle (1 to [`MAX_SPANS_CEILING`]).
    pub fn max_spans_per_cycle(&mut self, n: usize) -> &mut Self {
        self.max_spans = n;
        self
    }

    /// Sample slots per cycle (1 to [`MAX_SAMPLES_CEILING`], default
    /// [`DEFAULT_MAX_SAMPLES_PER_CYCLE`]). A recorder without sources
    /// takes none: the slots cost memory only once a source is declared.
    pub fn max_samples_per_cycle(&mut self, n: usize) -> &mut Self {
        self.max_samples = n;
        self
    }

    /// The sample slots per cycle [`build`](Self::build) will take: 0
    /// without a declared source.
    pub(crate) fn sample_slots(&self) -> usize {
        if self.sources.is_empty() {
            0
        } else {
            self.max_samples
        }
    }

    /// Where to read the thread's CPU clock (default
    /// [`CpuTimeMode::Cycle`]): per span (for the stages registered with
    /// CPU time), per cycle, or not at all.
    pub fn cpu_time_mode(&mut self, mode: CpuTimeMode) -> &mut Self {
        self.cpu_mode = mode;
        self
    }

    /// The switch of the releases before the CPU-time modes: `true` is
    /// [`CpuTimeMode::Spans`], `false` is [`CpuTimeMode::Off`].
    pub fn thread_cpu_time(&mut self, on: bool) -> &mut Self {
        self.cpu_time_mode(CpuTimeMode::from_switch(on))
    }

    /// Time the recorder's own bookkeeping when building (default on; takes
    /// about a millisecond). When off, the header's overhead is all zeros.
    pub fn measure_overhead(&mut self, on: bool) -> &mut Self {
        self.measure_overhead = on;
        self
    }

    /// Declare the stage whose spans are the loop's commands (written to
    /// the header as `command_stage`): the analyzer counts their starts as
    /// command submissions and, in an input-paced cycle, as its answer,
    /// without being told the stage's name.
    pub fn command_stage(&mut self, stage: StageId) -> &mut Self {
        self.command_stage = Some(stage);
        self
    }

    /// [`command_stage`](Self::command_stage) by the stage's name (the
    /// bindings' form).
    ///
    /// # Errors
    /// [`CaptureError::Registration`] when no stage of that name was
    /// registered on this builder.
    pub fn command_stage_named(&mut self, name: &str) -> Result<&mut Self> {
        let Some(i) = self.stages.iter().position(|s| s.name == name) else {
            return Err(CaptureError::Registration {
                table: "stage",
                name: name.to_string(),
                reason: "the command stage must be one of the recorder's stages",
            });
        };
        self.command_stage = Some(StageId(i as u16));
        Ok(self)
    }

    /// Declare the compute budget of each cycle's work (written to the
    /// header): work beyond it is a budget overrun, for statistics only
    /// (the release timeline is the scheduler's). Undeclared, the analyzer
    /// judges work against the period.
    ///
    /// 0 to [`MAX_DECLARED_NS`]; [`UNDECLARED_NS`] leaves it undeclared
    /// (so the scheduler's default can be passed on as it is); any other
    /// value makes the build fail, naming it.
    pub fn compute_budget_ns(&mut self, ns: u64) -> &mut Self {
        self.compute_budget_ns = (ns != UNDECLARED_NS).then_some(ns);
        self
    }

    /// Declare the deadline tolerance (written to the header): a start
    /// later than its release plus this is a late start, a finish later
    /// than the next release plus this a completion miss. Undeclared, the
    /// analyzer's late-start threshold is 10 % of the period.
    ///
    /// 0 to [`MAX_DECLARED_NS`], or [`UNDECLARED_NS`], as
    /// [`compute_budget_ns`](Self::compute_budget_ns).
    pub fn deadline_tolerance_ns(&mut self, ns: u64) -> &mut Self {
        self.deadline_tolerance_ns = (ns != UNDECLARED_NS).then_some(ns);
        self
    }

    /// Keep a live status another thread may read while the loop runs
    /// ([`Recorder::live_status`](crate::Recorder::live_status), [`crate::status`]): counts, the last
    /// miss and the period's p99, updated at each cycle's end in atomics.
    /// Off by default; on, each cycle's end costs a few more stores.
    pub fn live_status(&mut self, on: bool) -> &mut Self {
        self.live_status = on;
        self
    }

    /// Declare the loop's nominal period (written to the header).
    pub fn nominal_period_ns(&mut self, ns: u64) -> &mut Self {
        self.nominal_period_ns = Some(ns);
        self
    }

    /// The clock domain of [`Release::target_ns`] (default host monotonic).
    pub fn target_clock(&mut self, domain: ClockDomain) -> &mut Self {
        self.target_clock = domain;
        self
    }

    /// Bytes [`build`](Self::build) will allocate with the capacities and
    /// values registered so far (see [`footprint_bytes`]).
    pub fn footprint_bytes(&self) -> u64 {
        footprint_bytes(
            self.max_cycles as u64,
            self.max_spans as u64,
            self.sample_slots() as u64,
            self.values.len() as u64,
        )
    }

    /// Free-form metadata copied to the header (at most
    /// [`MAX_METADATA_ENTRIES`](crate::MAX_METADATA_ENTRIES) entries; [`build`](Self::build) refuses more).
    pub fn metadata(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    fn check_name(table: &'static str, name: &str, taken: bool, len: usize) -> Result<()> {
        let reason = if name.is_empty() {
            Some("the name is empty")
        } else if taken {
            Some("it is already registered")
        } else if len >= NAME_TABLE_MAX {
            Some("the table is full")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(CaptureError::Registration {
                table,
                name: name.to_string(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// Register a stage whose spans measure thread CPU time (when the
    /// recorder does so per span, [`CpuTimeMode::Spans`]).
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for an empty or duplicate name.
    pub fn stage(&mut self, name: &str) -> Result<StageId> {
        self.stage_with_cpu_time(name, true)
    }

    /// Register a stage, choosing whether its spans measure thread CPU time.
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for an empty or duplicate name.
    pub fn stage_with_cpu_time(&mut self, name: &str, cpu_time: bool) -> Result<StageId> {
        let taken = self.stages.iter().any(|s| s.name == name);
        Self::check_name("stage", name, taken, self.stages.len())?;
        self.stages.push(StageInfo {
            name: name.to_string(),
            cpu_time,
        });
        Ok(StageId((self.stages.len() - 1) as u16))
    }

    /// Register a phase.
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for an empty or duplicate name.
    pub fn phase(&mut self, name: &str) -> Result<PhaseId> {
        let taken = self.phases.iter().any(|p| p == name);
        Self::check_name("phase", name, taken, self.phases.len())?;
        self.phases.push(name.to_string());
        Ok(PhaseId((self.phases.len() - 1) as u16))
    }

    /// Register an attribute key.
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for an empty or duplicate name.
    pub fn attr_key(&mut self, name: &str) -> Result<AttrKey> {
        let taken = self.attributes.iter().any(|a| a.key == name);
        Self::check_name("attribute key", name, taken, self.attributes.len())?;
        self.attributes.push(AttributeInfo {
            key: name.to_string(),
            values: Vec::new(),
        });
        Ok(AttrKey((self.attributes.len() - 1) as u16))
    }

    /// Register a value of attribute `key`.
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for an empty or duplicate value.
    pub fn attr_value(&mut self, key: AttrKey, name: &str) -> Result<AttrValue> {
        let Some(attr) = self.attributes.get_mut(key.0 as usize) else {
            return Err(CaptureError::Registration {
                table: "attribute value",
                name: name.to_string(),
                reason: "its key was registered on another builder",
            });
        };
        let taken = attr.values.iter().any(|v| v == name);
        Self::check_name("attribute value", name, taken, attr.values.len())?;
        attr.values.push(name.to_string());
        Ok(AttrValue {
            key: key.0,
            value: (attr.values.len() - 1) as u16,
        })
    }

    /// Register a per-cycle caller value (at most [`MAX_VALUES`]).
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for an empty or duplicate name, or when
    /// [`MAX_VALUES`] are already registered.
    pub fn value(&mut self, name: &str, kind: ValueKind, unit: &str) -> Result<ValueId> {
        let taken = self.values.iter().any(|v| v.name == name);
        Self::check_name("value", name, taken, self.values.len())?;
        if self.values.len() >= MAX_VALUES {
            return Err(CaptureError::Registration {
                table: "value",
                name: name.to_string(),
                reason: "at most 16 values can be registered",
            });
        }
        self.values.push(ValueInfo {
            name: name.to_string(),
            kind,
            unit: unit.to_string(),
        });
        Ok(ValueId {
            index: (self.values.len() - 1) as u8,
            kind,
        })
    }

    /// Declare a data source whose samples cycles use: a camera, a robot
    /// state stream, a policy's output. A cycle then records which sample
    /// it used with [`Recorder::sample`](crate::Recorder::sample), and a
    /// producer thread what it published with
    /// [`Recorder::produced`](crate::Recorder::produced); the analyzer
    /// reports each source's age at use.
    ///
    /// # Errors
    /// [`CaptureError::Registration`] for an empty or duplicate name, an
    /// empty clock name, or a full table.
    pub fn source(&mut self, name: &str, spec: SourceSpec) -> Result<SourceId> {
        let taken = self.sources.iter().any(|s| s.name == name);
        Self::check_name("source", name, taken, self.sources.len())?;
        let clock = match spec.clock {
            SourceClock::HostMonotonic => ClockDomain::HostMonotonic.as_str().to_string(),
            SourceClock::Named(n) if n.is_empty() || n == ClockDomain::HostMonotonic.as_str() => {
                return Err(CaptureError::Registration {
                    table: "source",
                    name: name.to_string(),
                    reason: "a named clock needs a name other than host_monotonic (use SourceClock::HostMonotonic)",
                })
            }
            SourceClock::Named(n) => n,
        };
        self.sources.push(SourceInfo {
            name: name.to_string(),
            clock,
            max_age_ns: spec.max_age_ns,
        });
        Ok(SourceId((self.sources.len() - 1) as u16))
    }
}
