//! The in-loop recorder.
//!
//! Submodules: `memory` (what happens at build: the buffers on the heap or
//! in a ring file, `build`, the overhead measurement), `samples` (data
//! age: the samples a cycle uses or a thread publishes) and `state` (what a
//! recorder reports: counters, the header, the ring, reset, the live
//! status). This file is the struct and the rest of the hot path.
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
//!   `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` per cycle edge (the default
//!   `cycle` mode), per span edge (`spans`, for the stages that ask for
//!   it), or none (`off`): [`CpuTimeMode`](crate::CpuTimeMode).
//! * There are no locks, no I/O and no formatting. Overflow is counted:
//!   the ring overwrites its oldest cycle (`dropped_cycles`), a cycle that is
//!   out of span slots (or nesting depth) counts the span in `spans_dropped`,
//!   a span outside any cycle counts in `spans_outside_cycle`. No method
//!   panics on overflow or blocks.

use std::sync::atomic::{fence, Ordering};

use crate::format::{ClockAnchor, Overhead, ValueKind};
use crate::ring::{LiveRef, RingFile, Slab};
use crate::slot::{CycleSlot, SampleSlot, SpanSlot, NO_SPAN};

pub use crate::format::{MAX_METADATA_ENTRIES, MAX_VALUES};
use crate::sys;

pub use crate::slot::MAX_ATTRS_PER_SPAN;

pub use crate::builder::{
    footprint_bytes, AttrKey, AttrValue, PaceKind, PhaseId, RecorderBuilder, Release, SourceClock,
    SourceId, SourceSpec, StageId, ValueId, DEFAULT_MAX_CYCLES, DEFAULT_MAX_SAMPLES_PER_CYCLE,
    DEFAULT_MAX_SPANS_PER_CYCLE, MAX_CYCLES_CEILING, MAX_DECLARED_NS, MAX_SAMPLES_CEILING,
    MAX_SPANS_CEILING, MAX_SPAN_DEPTH, UNDECLARED_NS,
};

mod memory;
mod samples;
mod state;

/// The preallocated, bounded recorder. See the module docs for what keeps
/// it off the control path.
#[derive(Debug)]
pub struct Recorder {
    enabled: bool,
    clock: quanta::Clock,
    spec: RecorderBuilder,
    overhead: Overhead,
    start_anchor: ClockAnchor,
    /// The start wall-clock anchor, taken at build and at reset.
    wall_start: Option<crate::format::WallClockAnchor>,
    cycles: Slab<CycleSlot>,
    spans: Slab<SpanSlot>,
    samples: Slab<SampleSlot>,
    values: Slab<u64>,
    live: LiveRef,
    stage_cpu: Box<[bool]>,
    /// The `cycle` CPU-time mode: read the CPU clock at each cycle's start
    /// and end.
    cycle_cpu: bool,
    max_spans: usize,
    /// Sample slots per cycle (0 without a declared source).
    max_samples: usize,
    samples_dropped: u64,
    samples_outside_cycle: u64,
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
    /// The live status and the limits it judges by ([`RecorderBuilder::live_status`]).
    status: Option<(
        std::sync::Arc<crate::status::LiveStatus>,
        crate::status::Limits,
    )>,
    /// The last cycle's start (raw ticks), for the status's periods.
    prev_start: Option<u64>,
    /// When (raw ticks) to take the next running clock anchor, and how
    /// many ticks apart they are taken.
    next_anchor: u64,
    anchor_every: u64,
    /// The newest running anchor and the TSC's slope fitted from the start
    /// anchor to it (quanta's until one is 50 ms away): how the live status
    /// maps a cycle's ticks onto `CLOCK_MONOTONIC`, as a ring's reader does.
    run_anchor: ClockAnchor,
    run_ns_per_tick: f64,
    ring_note: Option<String>,
    // Last: unmapped after every slab pointing into it is dropped.
    ring: Option<RingFile>,
}

impl Recorder {
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
        c.n_samples = 0;
        c.samples_dropped = 0;
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
        c.has_cpu = self.cycle_cpu as u8;
        c.has_margin = release.spin_margin_ns.is_some() as u8;
        c.spin_margin = release.spin_margin_ns.unwrap_or(0);
        c.has_spin = release.spin_ns.is_some() as u8;
        c.spin = release.spin_ns.unwrap_or(0);
        c.pace_input = (release.pace == crate::format::PaceKind::Input) as u8;
        c.has_arrival = release.arrival_ns.is_some() as u8;
        c.arrival = release.arrival_ns.unwrap_or(0);
        c.has_input_seq = release.input_seq.is_some() as u8;
        c.input_seq = release.input_seq.unwrap_or(0);
        c.has_read = release.read_ns.is_some() as u8;
        c.read = release.read_ns.unwrap_or(0);
        c.has_arrival_bound = release.arrival_bound_ns.is_some() as u8;
        c.arrival_bound = release.arrival_bound_ns.unwrap_or(0);
        c.cpu_end = 0;
        self.cur = slot;
        self.in_cycle = true;
        self.depth = 0;
        self.generation = self.generation.wrapping_add(1);
        // Wall first, so that the CPU read does not delay the start (and
        // the deadline lag); it falls inside the work it measures instead.
        c.start = self.clock.raw();
        if self.cycle_cpu {
            c.cpu_start = sys::thread_cpu_ns();
        }
    }

    /// End the open cycle (no-op without one). Spans still open are closed
    /// at this instant and marked `closed_by_cycle_end`.
    #[inline]
    pub fn end_cycle(&mut self) {
        if !self.enabled || !self.in_cycle {
            return;
        }
        let now = self.clock.raw();
        // After the wall read, so that the work's end excludes it.
        let cpu_end = if self.cycle_cpu {
            sys::thread_cpu_ns()
        } else {
            0
        };
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
        c.cpu_end = cpu_end;
        c.ended = 1;
        // Complete, after every field of the cycle (see crate::ring).
        c.seq.store(2 * c.index + 2, Ordering::Release);
        self.in_cycle = false;
        self.implicit_open = false;
        self.generation = self.generation.wrapping_add(1);
        if self.status.is_some() {
            self.update_status();
        }
        if now >= self.next_anchor {
            self.refresh_anchor();
        }
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
