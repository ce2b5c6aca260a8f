//! The in-loop recorder.
//!
//! # What keeps this off the control path
//!
//! * Every buffer (cycle ring, span slots, value slots, the open-span stack,
//!   the per-stage CPU switches) is allocated in [`RecorderBuilder::build`];
//!   nothing on the recording methods allocates, resizes or frees.
//! * Names (stages, phases, attribute keys and values, caller values) are
//!   registered on the builder and turned into small typed ids; the control
//!   thread only copies `u16`s and `u64`s.
//! * Wall time is a raw TSC read (quanta); ticks are converted to
//!   nanoseconds only when the files are written. Thread CPU time is one
//!   `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` per span edge and can be turned
//!   off for the whole recorder or per stage.
//! * There are no locks, no I/O and no formatting. Overflow is counted:
//!   the ring overwrites its oldest cycle (`dropped_cycles`), a cycle that is
//!   out of span slots (or nesting depth) counts the span in `spans_dropped`,
//!   a span outside any cycle counts in `spans_outside_cycle`. No method
//!   panics on overflow or blocks.

use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

use crate::error::{CaptureError, Result};
use crate::format::{
    Capacity, ClockAnchor, ClockDomain, ClockTable, Header, HeaderTag, Overhead, StageInfo,
    ThreadInfo, TscCalibration, ValueKind, SCHEMA_VERSION,
};
use crate::ring::{
    Layout, LiveRef, RingFile, RingMeta, RingState, RingStorage, Slab, DEFAULT_RING_DIR,
};
use crate::slot::{take_anchor, CycleSlot, RawCycle, SpanSlot, NO_SPAN};

pub use crate::format::{MAX_METADATA_ENTRIES, MAX_VALUES};
use crate::sys;

pub use crate::slot::MAX_ATTRS_PER_SPAN;

pub use crate::builder::{
    footprint_bytes, AttrKey, AttrValue, PhaseId, RecorderBuilder, Release, StageId, ValueId,
    DEFAULT_MAX_CYCLES, DEFAULT_MAX_SPANS_PER_CYCLE, MAX_CYCLES_CEILING, MAX_SPANS_CEILING,
    MAX_SPAN_DEPTH,
};

/// A boxed slice of `n` copies of `value`, or [`CaptureError::OutOfMemory`]
/// when the allocator refuses: never an abort. Every page is written here,
/// so none faults in later on the control thread.
fn try_boxed<T: Default>(what: &'static str, n: usize) -> Result<Slab<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| CaptureError::OutOfMemory {
            what,
            bytes: (n as u64).saturating_mul(std::mem::size_of::<T>() as u64),
        })?;
    v.resize_with(n, T::default);
    Ok(Slab::from_box(v.into_boxed_slice()))
}

/// The recorder's buffers, on the heap or in a ring file.
struct Storage {
    cycles: Slab<CycleSlot>,
    spans: Slab<SpanSlot>,
    values: Slab<u64>,
    live: LiveRef,
    ring: Option<RingFile>,
    note: Option<String>,
}

impl Storage {
    fn new(
        spec: &RecorderBuilder,
        overhead: &Overhead,
        clock: &quanta::Clock,
        anchor: ClockAnchor,
    ) -> Result<Storage> {
        let dir = match &spec.ring {
            RingStorage::Heap => return Storage::heap(spec, None),
            RingStorage::Auto => PathBuf::from(DEFAULT_RING_DIR),
            RingStorage::SharedMemory(dir) => dir.clone(),
        };
        match Storage::ring(spec, overhead, clock, anchor, &dir) {
            Ok(s) => Ok(s),
            Err(e) if spec.ring == RingStorage::Auto => {
                let why = crate::error::error_chain(&e);
                Storage::heap(spec, Some(format!("{why}; the ring is on the heap, so a kill -9 or crash loses this recording")))
            }
            Err(e) => Err(e),
        }
    }

    fn heap(spec: &RecorderBuilder, note: Option<String>) -> Result<Storage> {
        // The largest buffer first: a refusal then costs nothing.
        let spans = try_boxed("span slots", spec.max_cycles.saturating_mul(spec.max_spans))?;
        let cycles = try_boxed("cycle ring", spec.max_cycles)?;
        let values = try_boxed("value slots", spec.max_cycles * spec.values.len())?;
        Ok(Storage {
            cycles,
            spans,
            values,
            live: LiveRef::heap(),
            ring: None,
            note,
        })
    }

    fn ring(
        spec: &RecorderBuilder,
        overhead: &Overhead,
        clock: &quanta::Clock,
        anchor: ClockAnchor,
        dir: &Path,
    ) -> Result<Storage> {
        let meta = ring_meta_json(spec, overhead, anchor, clock);
        let layout = Layout::new(
            spec.max_cycles,
            spec.max_spans,
            spec.values.len(),
            meta.len(),
        )
        .ok_or(CaptureError::OutOfMemory {
            what: "ring file",
            bytes: u64::MAX,
        })?;
        let parts = RingFile::create(dir, layout, &meta, anchor, quanta_ns_per_tick(clock))?;
        Ok(Storage {
            cycles: parts.cycles,
            spans: parts.spans,
            values: parts.values,
            live: parts.live,
            ring: Some(parts.file),
            note: None,
        })
    }
}

/// Nanoseconds per raw tick by quanta's own calibration.
fn quanta_ns_per_tick(clock: &quanta::Clock) -> f64 {
    let ticks = 1u64 << 30;
    clock.delta_as_nanos(0, ticks) as f64 / ticks as f64
}

/// The ring's meta JSON for `spec`: its evidence header (the clock anchor
/// is kept apart, in the fixed header) and episode directory.
fn ring_meta_json(
    spec: &RecorderBuilder,
    overhead: &Overhead,
    anchor: ClockAnchor,
    clock: &quanta::Clock,
) -> Vec<u8> {
    let tsc = TscCalibration {
        start: anchor,
        end: anchor,
        ns_per_tick: quanta_ns_per_tick(clock),
        slope_source: "quanta".to_string(),
    };
    let meta = RingMeta {
        header: header_of(spec, overhead, tsc),
        episode_dir: spec.episode_dir.clone(),
    };
    serde_json::to_vec(&meta).unwrap_or_default()
}

impl RecorderBuilder {
    /// Allocate the recorder. If no phase was registered, one phase named
    /// `running` is registered (its id is `PhaseId` index 0, see
    /// [`Recorder::default_phase`]).
    ///
    /// # Errors
    /// [`CaptureError::InvalidOption`] when a capacity is out of range or
    /// there are more than [`MAX_METADATA_ENTRIES`] metadata entries, and
    /// [`CaptureError::OutOfMemory`] when the allocator refuses the ring.
    pub fn build(&self) -> Result<Recorder> {
        if self.metadata.len() > MAX_METADATA_ENTRIES {
            return Err(CaptureError::InvalidOption {
                option: "metadata entries",
                value: self.metadata.len() as u64,
                expected: "at most 4096 entries",
            });
        }
        if self.max_cycles == 0 || self.max_cycles > MAX_CYCLES_CEILING {
            return Err(CaptureError::InvalidOption {
                option: "max_cycles",
                value: self.max_cycles as u64,
                expected: "1 to 50,000,000 cycles",
            });
        }
        if self.max_spans == 0 || self.max_spans > MAX_SPANS_CEILING {
            return Err(CaptureError::InvalidOption {
                option: "max_spans_per_cycle",
                value: self.max_spans as u64,
                expected: "1 to 1024 spans",
            });
        }
        let mut spec = self.clone();
        if spec.phases.is_empty() {
            spec.phases.push("running".to_string());
        }
        let overhead = if spec.measure_overhead {
            measure_overhead()
        } else {
            Overhead::default()
        };
        Recorder::allocate(spec, overhead)
    }
}

/// The preallocated, bounded recorder. See the module docs for what keeps
/// it off the control path.
#[derive(Debug)]
pub struct Recorder {
    enabled: bool,
    clock: quanta::Clock,
    spec: RecorderBuilder,
    overhead: Overhead,
    start_anchor: ClockAnchor,
    cycles: Slab<CycleSlot>,
    spans: Slab<SpanSlot>,
    values: Slab<u64>,
    live: LiveRef,
    stage_cpu: Box<[bool]>,
    max_spans: usize,
    head: usize,
    len: usize,
    total: u64,
    in_cycle: bool,
    cur: usize,
    generation: u64,
    stack: [u16; MAX_SPAN_DEPTH],
    depth: usize,
    pending_sleep_start: Option<u64>,
    pending_wake: Option<u64>,
    spans_dropped: u64,
    spans_outside_cycle: u64,
    /// The OS thread id that recorded, taken at the first cycle (0 before).
    tid: u64,
    /// The open cycle was begun by a top-level span (implicit cycles).
    implicit_open: bool,
    ring_note: Option<String>,
    // Last: unmapped after every slab pointing into it is dropped.
    ring: Option<RingFile>,
}

impl Recorder {
    fn allocate(spec: RecorderBuilder, overhead: Overhead) -> Result<Recorder> {
        let clock = quanta::Clock::new();
        let stage_cpu: Box<[bool]> = spec
            .stages
            .iter()
            .map(|s| s.cpu_time && spec.thread_cpu)
            .collect();
        let start_anchor = take_anchor(&clock);
        let storage = Storage::new(&spec, &overhead, &clock, start_anchor)?;
        Ok(Recorder {
            enabled: true,
            cycles: storage.cycles,
            spans: storage.spans,
            values: storage.values,
            live: storage.live,
            stage_cpu,
            max_spans: spec.max_spans,
            clock,
            spec,
            overhead,
            start_anchor,
            head: 0,
            len: 0,
            total: 0,
            in_cycle: false,
            cur: 0,
            generation: 0,
            stack: [NO_SPAN; MAX_SPAN_DEPTH],
            depth: 0,
            pending_sleep_start: None,
            pending_wake: None,
            spans_dropped: 0,
            spans_outside_cycle: 0,
            tid: 0,
            implicit_open: false,
            ring_note: storage.note,
            ring: storage.ring,
        })
    }

    /// A recorder that records nothing and allocates nothing: every method is
    /// a single branch. Used when `--control-timing` is off.
    pub fn disabled() -> Recorder {
        let spec = RecorderBuilder::new();
        Recorder {
            enabled: false,
            clock: quanta::Clock::new(),
            overhead: Overhead::default(),
            start_anchor: ClockAnchor {
                raw: 0,
                monotonic_ns: 0,
                uncertainty_ns: 0,
            },
            cycles: Slab::from_box(Box::new([])),
            spans: Slab::from_box(Box::new([])),
            values: Slab::from_box(Box::new([])),
            live: LiveRef::disabled(),
            stage_cpu: Box::new([]),
            max_spans: 0,
            spec,
            head: 0,
            len: 0,
            total: 0,
            in_cycle: false,
            cur: 0,
            generation: 0,
            stack: [NO_SPAN; MAX_SPAN_DEPTH],
            depth: 0,
            pending_sleep_start: None,
            pending_wake: None,
            spans_dropped: 0,
            spans_outside_cycle: 0,
            tid: 0,
            implicit_open: false,
            ring_note: None,
            ring: None,
        }
    }

    /// Whether this recorder records (false for [`Recorder::disabled`]).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The phase registered first (or the implicit `running` phase).
    pub fn default_phase(&self) -> PhaseId {
        PhaseId(0)
    }

    /// A raw TSC read on the recorder's clock.
    #[inline]
    pub fn now_raw(&self) -> u64 {
        self.clock.raw()
    }

    /// Mark the start of the wait before the next cycle.
    #[inline]
    pub fn begin_wait(&mut self) {
        if self.enabled {
            self.pending_sleep_start = Some(self.clock.raw());
            self.pending_wake = None;
        }
    }

    /// Mark the end of the wait (after sleep and spin). Ignored without a
    /// preceding [`begin_wait`](Self::begin_wait).
    #[inline]
    pub fn end_wait(&mut self) {
        if self.enabled && self.pending_sleep_start.is_some() {
            self.pending_wake = Some(self.clock.raw());
        }
    }

    /// Begin a cycle in `phase`. A cycle still open is ended first. When the
    /// ring is full the oldest cycle is overwritten and counted as dropped.
    #[inline]
    pub fn begin_cycle(&mut self, phase: PhaseId, release: Release) {
        if !self.enabled {
            return;
        }
        if self.in_cycle {
            self.end_cycle();
        }
        if self.tid == 0 {
            // Once, at the first cycle: the thread that records, which is
            // not the one that built the recorder.
            self.tid = sys::gettid();
            self.live.get().tid.store(self.tid, Ordering::Relaxed);
        }
        self.implicit_open = false;
        let cap = self.cycles.len();
        let slot = self.head;
        self.head += 1;
        if self.head == cap {
            self.head = 0;
        }
        if self.len < cap {
            self.len += 1;
        }
        let (has_wait, sleep_start, wake) = match (self.pending_sleep_start, self.pending_wake) {
            (Some(s), Some(w)) => (true, s, w),
            _ => (false, 0, 0),
        };
        self.pending_sleep_start = None;
        self.pending_wake = None;
        let index = self.total;
        self.total += 1;
        self.live.get().total.store(self.total, Ordering::Relaxed);
        let c = &mut self.cycles[slot];
        // In progress first, then the fields (see crate::ring).
        c.seq.store(2 * index + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        c.index = index;
        c.phase = phase.0;
        c.n_spans = 0;
        c.spans_dropped = 0;
        c.skipped = release.skipped;
        c.overdue = release.overdue as u8;
        c.has_target = release.target_ns.is_some() as u8;
        c.has_wait = has_wait as u8;
        c.ended = 0;
        c.values_set = 0;
        c.target_ns = release.target_ns.unwrap_or(0);
        c.end = 0;
        c.sleep_start = sleep_start;
        c.wake = wake;
        self.cur = slot;
        self.in_cycle = true;
        self.depth = 0;
        self.generation = self.generation.wrapping_add(1);
        c.start = self.clock.raw();
    }

    /// End the open cycle (no-op without one). Spans still open are closed
    /// at this instant and marked `closed_by_cycle_end`.
    #[inline]
    pub fn end_cycle(&mut self) {
        if !self.enabled || !self.in_cycle {
            return;
        }
        let now = self.clock.raw();
        let base = self.cur * self.max_spans;
        for d in 0..self.depth {
            let s = &mut self.spans[base + self.stack[d] as usize];
            if s.open != 0 {
                if s.cpu != 0 {
                    s.cpu_end = sys::thread_cpu_ns();
                }
                s.end = now;
                s.open = 0;
                s.closed_by_cycle_end = 1;
            }
        }
        self.depth = 0;
        let c = &mut self.cycles[self.cur];
        c.end = now;
        c.ended = 1;
        // Complete, after every field of the cycle (see crate::ring).
        c.seq.store(2 * c.index + 2, Ordering::Release);
        self.in_cycle = false;
        self.implicit_open = false;
        self.generation = self.generation.wrapping_add(1);
    }

    /// Open a span of `stage`; it closes when the guard drops. Nest spans by
    /// opening them on the guard (`outer.span(inner_stage)`).
    #[inline]
    pub fn span(&mut self, stage: StageId) -> SpanGuard<'_> {
        let idx = self.open_span(stage);
        let generation = self.generation;
        SpanGuard {
            rec: self,
            idx,
            generation,
        }
    }

    /// Open a span of `stage` without a guard, for callers that cannot hold
    /// a borrow across the span (the C ABI, the Python binding). Close it
    /// with [`end_span`](Self::end_span); a span left open is closed at the
    /// cycle's end and marked `closed_by_cycle_end`, like a guard's.
    #[inline]
    pub fn begin_span(&mut self, stage: StageId) -> SpanToken {
        let idx = self.open_span(stage);
        SpanToken::pack(idx, self.generation)
    }

    /// Close a span opened with [`begin_span`](Self::begin_span). A token
    /// of an earlier cycle, of a span already closed, or of a span that was
    /// not stored is ignored.
    #[inline]
    pub fn end_span(&mut self, span: SpanToken) {
        let (idx, generation) = span.unpack(self.generation);
        self.close_span(idx, generation);
    }

    /// Set an attribute on a span opened with
    /// [`begin_span`](Self::begin_span) (see [`SpanGuard::set`]).
    #[inline]
    pub fn set_span_attr(&mut self, span: SpanToken, value: AttrValue) {
        let (idx, generation) = span.unpack(self.generation);
        self.set_attr(idx, generation, value);
    }

    /// Spans open in the current cycle (0 outside a cycle).
    pub fn open_spans(&self) -> usize {
        if self.in_cycle {
            self.depth
        } else {
            0
        }
    }

    #[inline]
    fn open_span(&mut self, stage: StageId) -> u16 {
        if !self.enabled {
            return NO_SPAN;
        }
        if !self.in_cycle && self.spec.implicit_cycles {
            self.begin_cycle(PhaseId(0), Release::NONE);
            self.implicit_open = true;
        }
        if !self.in_cycle {
            self.spans_outside_cycle += 1;
            let n = self.spans_outside_cycle;
            self.live
                .get()
                .spans_outside_cycle
                .store(n, Ordering::Relaxed);
            return NO_SPAN;
        }
        let c = &mut self.cycles[self.cur];
        if c.n_spans as usize >= self.max_spans || self.depth >= MAX_SPAN_DEPTH {
            c.spans_dropped = c.spans_dropped.saturating_add(1);
            self.spans_dropped += 1;
            let n = self.spans_dropped;
            self.live.get().spans_dropped.store(n, Ordering::Relaxed);
            return NO_SPAN;
        }
        let i = c.n_spans;
        c.n_spans += 1;
        let parent = if self.depth > 0 {
            self.stack[self.depth - 1]
        } else {
            NO_SPAN
        };
        self.stack[self.depth] = i;
        let depth = self.depth as u8;
        self.depth += 1;
        let cpu = self
            .stage_cpu
            .get(stage.0 as usize)
            .copied()
            .unwrap_or(false);
        let s = &mut self.spans[self.cur * self.max_spans + i as usize];
        s.stage = stage.0;
        s.parent = parent;
        s.depth = depth;
        s.n_attrs = 0;
        s.cpu = cpu as u8;
        s.open = 1;
        s.closed_by_cycle_end = 0;
        s.end = 0;
        s.cpu_end = 0;
        // CPU first and wall last, so the wall time excludes the system call.
        if cpu {
            s.cpu_start = sys::thread_cpu_ns();
        }
        s.start = self.clock.raw();
        i
    }

    #[inline]
    fn close_span(&mut self, idx: u16, generation: u64) {
        if idx == NO_SPAN || generation != self.generation || !self.in_cycle {
            return;
        }
        let end = self.clock.raw();
        let s = &mut self.spans[self.cur * self.max_spans + idx as usize];
        if s.open == 0 {
            return;
        }
        s.end = end;
        if s.cpu != 0 {
            s.cpu_end = sys::thread_cpu_ns();
        }
        s.open = 0;
        // Pop to this span; guards nest, so it is normally the top.
        if let Some(pos) = self.stack[..self.depth].iter().rposition(|&x| x == idx) {
            self.depth = pos;
        }
        if self.implicit_open && self.depth == 0 {
            self.end_cycle();
        }
    }

    #[inline]
    fn set_attr(&mut self, idx: u16, generation: u64, value: AttrValue) {
        if idx == NO_SPAN || generation != self.generation || !self.in_cycle {
            return;
        }
        let s = &mut self.spans[self.cur * self.max_spans + idx as usize];
        let n = s.n_attrs as usize;
        if let Some(existing) = s.attrs[..n].iter_mut().find(|(k, _)| *k == value.key) {
            existing.1 = value.value;
        } else if n < MAX_ATTRS_PER_SPAN {
            s.attrs[n] = (value.key, value.value);
            s.n_attrs += 1;
        }
    }

    /// Set an integer value for the open cycle (ignored outside a cycle, or
    /// if `id` is a float value).
    #[inline]
    pub fn set_int(&mut self, id: ValueId, v: i64) {
        if id.kind == ValueKind::Int {
            self.set_bits(id, v as u64);
        }
    }

    /// Set a float value for the open cycle (ignored outside a cycle, or if
    /// `id` is an integer value).
    #[inline]
    pub fn set_float(&mut self, id: ValueId, v: f64) {
        if id.kind == ValueKind::Float {
            self.set_bits(id, v.to_bits());
        }
    }

    #[inline]
    fn set_bits(&mut self, id: ValueId, bits: u64) {
        if !self.enabled || !self.in_cycle {
            return;
        }
        let n = self.spec.values.len();
        let i = id.index as usize;
        if i >= n {
            return;
        }
        self.values[self.cur * n + i] = bits;
        self.cycles[self.cur].values_set |= 1 << i;
    }

    /// Cycles begun since the recorder was built (or reset).
    pub fn total_cycles(&self) -> u64 {
        self.total
    }

    /// Cycles currently retained.
    pub fn retained_cycles(&self) -> u64 {
        self.len as u64
    }

    /// Earlier cycles overwritten by the ring.
    pub fn dropped_cycles(&self) -> u64 {
        self.total - self.len as u64
    }

    /// Spans that did not fit their cycle, over the whole run.
    pub fn spans_dropped(&self) -> u64 {
        self.spans_dropped
    }

    /// Spans opened outside any cycle.
    pub fn spans_outside_cycle(&self) -> u64 {
        self.spans_outside_cycle
    }

    /// Whether a cycle is open.
    pub fn in_cycle(&self) -> bool {
        self.in_cycle
    }

    /// Bytes preallocated for the cycle ring, span slots and value slots.
    pub fn footprint_bytes(&self) -> u64 {
        self.spec.footprint_bytes()
    }

    /// The thread this recorder records ([`CONTROL_THREAD`](crate::CONTROL_THREAD) or a background
    /// thread's name).
    pub fn thread_name(&self) -> &str {
        &self.spec.thread
    }

    /// Whether each top-level span outside a cycle is a cycle of its own
    /// ([`RecorderBuilder::implicit_cycles`]).
    pub fn implicit_cycles(&self) -> bool {
        self.spec.implicit_cycles
    }

    /// The background threads declared in this (control) recorder's header.
    pub(crate) fn spec_threads(&self) -> &[String] {
        &self.spec.threads
    }

    /// The OS thread id that recorded, once a cycle was begun.
    pub fn tid(&self) -> Option<u64> {
        (self.tid != 0).then_some(self.tid)
    }

    /// The overhead measured when the recorder was built.
    pub fn overhead(&self) -> &Overhead {
        &self.overhead
    }

    /// Forget every recorded cycle and counter, keeping the memory and the
    /// registered names (for the next episode). Does not allocate.
    pub fn reset(&mut self) {
        self.head = 0;
        self.len = 0;
        self.total = 0;
        self.in_cycle = false;
        self.depth = 0;
        self.generation = self.generation.wrapping_add(1);
        self.pending_sleep_start = None;
        self.pending_wake = None;
        self.spans_dropped = 0;
        self.spans_outside_cycle = 0;
        if self.enabled {
            // No slot of the last episode may read as one of the next.
            for c in self.cycles.iter() {
                c.seq.store(0, Ordering::Relaxed);
            }
            let live = self.live.get();
            live.total.store(0, Ordering::Relaxed);
            live.spans_dropped.store(0, Ordering::Relaxed);
            live.spans_outside_cycle.store(0, Ordering::Relaxed);
            self.start_anchor = take_anchor(&self.clock);
            live.set_anchor(self.start_anchor);
            live.set_state(RingState::Recording);
        }
    }

    /// The ring file this recorder writes, when it has one (see
    /// [`crate::ring`]): what `looptime recover` and `looptime watch` read.
    pub fn ring_path(&self) -> Option<&Path> {
        self.ring.as_ref().map(|r| r.path())
    }

    /// Whether the ring file's pages are locked in memory (`mlock`); false
    /// without a ring file or when the memory-lock limit refused it.
    pub fn ring_locked(&self) -> bool {
        self.ring.as_ref().is_some_and(|r| r.locked())
    }

    /// Why a recorder built with [`RingStorage::Auto`] keeps its ring on the
    /// heap (so a kill loses it), when it does.
    pub fn ring_note(&self) -> Option<&str> {
        self.ring_note.as_deref()
    }

    /// Name (or rename) the episode directory the ring's evidence belongs
    /// in, for [`crate::ring::recover`]. Not for the control path: it
    /// formats the ring's meta again.
    ///
    /// # Errors
    /// [`CaptureError::InvalidOption`] when the new meta does not fit the
    /// ring's meta region (a directory path of many kilobytes).
    pub fn set_episode_dir(&mut self, dir: impl Into<PathBuf>) -> Result<()> {
        self.spec.episode_dir = Some(dir.into());
        if let Some(ring) = &self.ring {
            let meta = ring_meta_json(&self.spec, &self.overhead, self.start_anchor, &self.clock);
            if !ring.write_meta(&meta) {
                return Err(CaptureError::InvalidOption {
                    option: "episode directory length",
                    value: meta.len() as u64,
                    expected: "a ring meta that fits the space reserved at build",
                });
            }
        }
        Ok(())
    }

    pub(crate) fn set_ring_state(&self, state: RingState) {
        if self.enabled {
            self.live.get().set_state(state);
        }
        if let Some(ring) = &self.ring {
            // Recording is set back after a failed finish: keep the ring
            // for `recover` until a finish succeeds.
            match state {
                RingState::Recording => ring.keep_on_drop(true),
                RingState::Finished => ring.keep_on_drop(false),
                _ => {}
            }
        }
    }

    // ----- read-out, used by the writer (not on the control path) -----

    pub(crate) fn clock(&self) -> &quanta::Clock {
        &self.clock
    }

    pub(crate) fn start_anchor(&self) -> ClockAnchor {
        self.start_anchor
    }

    pub(crate) fn header(&self, tsc: TscCalibration) -> Header {
        let mut h = header_of(&self.spec, &self.overhead, tsc);
        if let Some(t) = h.thread.as_mut() {
            t.tid = (self.tid != 0).then_some(self.tid);
        }
        h
    }

    /// Retained cycles, oldest first, as raw views.
    pub(crate) fn retained(&self) -> impl Iterator<Item = RawCycle<'_>> + '_ {
        let cap = self.cycles.len();
        let first = (self.head + cap - self.len) % cap.max(1);
        let n_values = self.spec.values.len();
        (0..self.len).map(move |i| {
            let slot = (first + i) % cap;
            RawCycle::live(
                &self.cycles[slot],
                &self.spans[slot * self.max_spans
                    ..slot * self.max_spans + self.cycles[slot].n_spans as usize],
                &self.values[slot * n_values..(slot + 1) * n_values],
                self.in_cycle && slot == self.cur,
            )
        })
    }
}

/// The evidence header of a recorder built from `spec`.
pub(crate) fn header_of(
    spec: &RecorderBuilder,
    overhead: &Overhead,
    tsc: TscCalibration,
) -> Header {
    Header {
        kind: HeaderTag::Header,
        schema_version: SCHEMA_VERSION,
        producer: producer(),
        clocks: ClockTable {
            start_ns: ClockDomain::TscHostMonotonic,
            end_ns: ClockDomain::TscHostMonotonic,
            sleep_start_ns: ClockDomain::TscHostMonotonic,
            wake_ns: ClockDomain::TscHostMonotonic,
            target_ns: spec.target_clock,
            span_start_ns: ClockDomain::TscHostMonotonic,
        },
        tsc,
        capacity: Capacity {
            max_cycles: spec.max_cycles as u64,
            max_spans_per_cycle: spec.max_spans as u32,
            max_attrs_per_span: MAX_ATTRS_PER_SPAN as u32,
            max_span_depth: MAX_SPAN_DEPTH as u32,
        },
        nominal_period_ns: spec.nominal_period_ns,
        thread_cpu_time: spec.thread_cpu,
        stages: spec
            .stages
            .iter()
            .map(|s| StageInfo {
                name: s.name.clone(),
                cpu_time: s.cpu_time && spec.thread_cpu,
            })
            .collect(),
        phases: spec.phases.clone(),
        attributes: spec.attributes.clone(),
        values: spec.values.clone(),
        overhead: overhead.clone(),
        metadata: spec.metadata.clone(),
        thread: Some(ThreadInfo {
            name: spec.thread.clone(),
            tid: None,
        }),
        threads: spec.threads.clone(),
        implicit_cycles: spec.implicit_cycles,
    }
}

/// The name and version written as `producer`.
pub(crate) fn producer() -> String {
    format!("looptime-capture {}", env!("CARGO_PKG_VERSION"))
}

/// A span opened with [`Recorder::begin_span`]: its slot and the cycle
/// generation it belongs to, packed into 64 bits (16 for the slot, 48 for
/// the generation) so that a C caller can hold it as a `uint64_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpanToken(u64);

const GENERATION_BITS: u32 = 48;
const GENERATION_MASK: u64 = (1 << GENERATION_BITS) - 1;

impl SpanToken {
    /// A token that refers to no span: ending it does nothing.
    pub const NONE: SpanToken = SpanToken(NO_SPAN as u64);

    fn pack(idx: u16, generation: u64) -> SpanToken {
        SpanToken(((generation & GENERATION_MASK) << 16) | idx as u64)
    }

    /// Slot and generation, the generation widened back to the recorder's
    /// current one when the low 48 bits agree (any other value never
    /// matches it, so the token is then ignored).
    fn unpack(self, current: u64) -> (u16, u64) {
        let idx = (self.0 & 0xffff) as u16;
        let low = self.0 >> 16;
        let generation = if low == current & GENERATION_MASK {
            current
        } else {
            current.wrapping_add(1)
        };
        (idx, generation)
    }

    /// The packed value, for a C caller.
    pub fn to_bits(self) -> u64 {
        self.0
    }

    /// A token from [`to_bits`](Self::to_bits). Any value is safe: one that
    /// names no open span of the current cycle is ignored.
    pub fn from_bits(bits: u64) -> SpanToken {
        SpanToken(bits)
    }

    /// Whether the span is stored (false when it was dropped for lack of
    /// slots or depth, opened outside a cycle, or the recorder is disabled).
    pub fn is_recorded(self) -> bool {
        (self.0 & 0xffff) as u16 != NO_SPAN
    }
}

/// Closes its span when dropped. Derefs to the [`Recorder`], so a nested span
/// is opened on the guard and the borrow checker keeps the nesting honest.
#[must_use = "a span closes when its guard is dropped; bind it with `let _span = ...`"]
#[derive(Debug)]
pub struct SpanGuard<'a> {
    rec: &'a mut Recorder,
    idx: u16,
    generation: u64,
}

impl SpanGuard<'_> {
    /// Set an attribute on this span (replacing a value of the same key; at
    /// most [`MAX_ATTRS_PER_SPAN`] keys, extra keys are ignored).
    #[inline]
    pub fn set(&mut self, value: AttrValue) {
        let (idx, generation) = (self.idx, self.generation);
        self.rec.set_attr(idx, generation, value);
    }

    /// Whether this span is stored (false when it was dropped for lack of
    /// slots or depth, opened outside a cycle, or the recorder is disabled).
    pub fn is_recorded(&self) -> bool {
        self.idx != NO_SPAN
    }
}

impl std::ops::Deref for SpanGuard<'_> {
    type Target = Recorder;
    fn deref(&self) -> &Recorder {
        self.rec
    }
}

impl std::ops::DerefMut for SpanGuard<'_> {
    fn deref_mut(&mut self) -> &mut Recorder {
        self.rec
    }
}

impl Drop for SpanGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        let (idx, generation) = (self.idx, self.generation);
        self.rec.close_span(idx, generation);
    }
}

/// Times the recorder's own operations on a scratch recorder.
fn measure_overhead() -> Overhead {
    const BATCHES: usize = 31;
    const PER: usize = 64;
    let mut spec = RecorderBuilder::new();
    spec.max_cycles(PER)
        .max_spans_per_cycle(PER)
        .ring(RingStorage::Heap);
    spec.phases.push("overhead".into());
    spec.stages.push(StageInfo {
        name: "wall".into(),
        cpu_time: false,
    });
    spec.stages.push(StageInfo {
        name: "cpu".into(),
        cpu_time: true,
    });
    // A few hundred kilobytes; if even that is refused, report no overhead.
    let Ok(mut rec) = Recorder::allocate(spec, Overhead::default()) else {
        return Overhead::default();
    };
    let clock = rec.clock.clone();
    let phase = PhaseId(0);
    let per_op = |t0: u64, t1: u64| clock.delta_as_nanos(t0, t1) as f64 / PER as f64;
    let mut cycle = Vec::with_capacity(BATCHES);
    let mut wall = Vec::with_capacity(BATCHES);
    let mut cpu = Vec::with_capacity(BATCHES);
    let mut raw_read = Vec::with_capacity(BATCHES);
    let mut cpu_read = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let t0 = clock.raw();
        for _ in 0..PER {
            rec.begin_cycle(phase, Release::NONE);
            rec.end_cycle();
        }
        cycle.push(per_op(t0, clock.raw()));

        for (stage, out) in [(StageId(0), &mut wall), (StageId(1), &mut cpu)] {
            rec.begin_cycle(phase, Release::NONE);
            let t0 = clock.raw();
            for _ in 0..PER {
                let _s = rec.span(stage);
            }
            out.push(per_op(t0, clock.raw()));
            rec.end_cycle();
        }

        let t0 = clock.raw();
        let mut acc = 0u64;
        for _ in 0..PER {
            acc = acc.wrapping_add(std::hint::black_box(clock.raw()));
        }
        std::hint::black_box(acc);
        raw_read.push(per_op(t0, clock.raw()));

        let t0 = clock.raw();
        for _ in 0..PER {
            acc = acc.wrapping_add(std::hint::black_box(sys::thread_cpu_ns()));
        }
        std::hint::black_box(acc);
        cpu_read.push(per_op(t0, clock.raw()));
    }
    Overhead {
        clock_read_ns: median(&mut raw_read),
        thread_cpu_read_ns: median(&mut cpu_read),
        cycle_ns: median(&mut cycle),
        span_wall_ns: median(&mut wall),
        span_cpu_ns: median(&mut cpu),
        samples: BATCHES as u32,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.get(v.len() / 2).copied().unwrap_or(0.0);
    (m * 10.0).round() / 10.0
}
