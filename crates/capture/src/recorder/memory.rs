//! The recorder's memory, taken at build: its buffers on the heap or in a
//! ring file, `RecorderBuilder::build`, and the measurement of the
//! recorder's own cost written into the header.

use super::state::{quanta_ns_per_tick, ring_meta_json};
use super::*;
use std::path::{Path, PathBuf};

use crate::error::{CaptureError, Result};
use crate::format::{ClockAnchor, CpuTimeMode, Overhead, StageInfo};
use crate::ring::{try_boxed, Layout, LiveRef, RingFile, RingStorage, Slab, DEFAULT_RING_DIR};
use crate::slot::{take_anchor, take_wall_anchor, CycleSlot, SampleSlot, SpanSlot, NO_SPAN};

pub use crate::format::MAX_METADATA_ENTRIES;
use crate::sys;

/// How often the recorder refreshes the running clock anchor a ring's
/// reader fits the TSC's slope by (`Live::late_anchor`): 100 ms.
const ANCHOR_EVERY_NS: u64 = 100_000_000;

pub use crate::builder::{
    PhaseId, RecorderBuilder, Release, StageId, MAX_CYCLES_CEILING, MAX_DECLARED_NS,
    MAX_SAMPLES_CEILING, MAX_SPANS_CEILING, MAX_SPAN_DEPTH,
};

/// The recorder's buffers, on the heap or in a ring file.
struct Storage {
    cycles: Slab<CycleSlot>,
    spans: Slab<SpanSlot>,
    samples: Slab<SampleSlot>,
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
        let samples = try_boxed(
            "sample slots",
            spec.max_cycles.saturating_mul(spec.sample_slots()),
        )?;
        let values = try_boxed("value slots", spec.max_cycles * spec.values.len())?;
        Ok(Storage {
            cycles,
            spans,
            samples,
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
        let meta = ring_meta_json(spec, overhead, anchor, clock, dir)?;
        let layout = Layout::new(
            spec.max_cycles,
            spec.max_spans,
            spec.sample_slots(),
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
            samples: parts.samples,
            values: parts.values,
            live: parts.live,
            ring: Some(parts.file),
            note: None,
        })
    }
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
        for (option, declared) in [
            ("compute_budget_ns", self.compute_budget_ns),
            ("deadline_tolerance_ns", self.deadline_tolerance_ns),
        ] {
            if let Some(ns) = declared.filter(|&ns| ns > MAX_DECLARED_NS) {
                return Err(CaptureError::InvalidOption {
                    option,
                    value: ns,
                    expected: "0 to 10 s (10,000,000,000 ns), or LOOPTIME_UNDECLARED (u64::MAX) to leave it undeclared",
                });
            }
        }
        if self.max_samples == 0 || self.max_samples > MAX_SAMPLES_CEILING {
            return Err(CaptureError::InvalidOption {
                option: "max_samples_per_cycle",
                value: self.max_samples as u64,
                expected: "1 to 256 samples",
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

impl Recorder {
    fn allocate(spec: RecorderBuilder, overhead: Overhead) -> Result<Recorder> {
        let clock = quanta::Clock::new();
        let stage_cpu: Box<[bool]> = spec
            .stages
            .iter()
            .map(|s| s.cpu_time && spec.cpu_mode == CpuTimeMode::Spans)
            .collect();
        let cycle_cpu = spec.cpu_mode == CpuTimeMode::Cycle;
        let start_anchor = take_anchor(&clock);
        let wall_start = take_wall_anchor();
        let storage = Storage::new(&spec, &overhead, &clock, start_anchor)?;
        storage.live.get().set_wall(wall_start);
        let status = spec.live_status.then(|| {
            let limits = crate::status::Limits {
                tolerance_ns: spec.deadline_tolerance_ns,
                period_ns: spec.nominal_period_ns,
                budget_ns: spec.compute_budget_ns,
            };
            (
                std::sync::Arc::new(crate::status::LiveStatus::new(&limits)),
                limits,
            )
        });
        let anchor_every = (ANCHOR_EVERY_NS as f64 / quanta_ns_per_tick(&clock)) as u64;
        Ok(Recorder {
            status,
            prev_start: None,
            next_anchor: start_anchor.raw.saturating_add(anchor_every),
            anchor_every,
            run_anchor: start_anchor,
            run_ns_per_tick: quanta_ns_per_tick(&clock),
            enabled: true,
            cycles: storage.cycles,
            spans: storage.spans,
            samples: storage.samples,
            values: storage.values,
            live: storage.live,
            stage_cpu,
            cycle_cpu,
            max_spans: spec.max_spans,
            max_samples: spec.sample_slots(),
            samples_dropped: 0,
            samples_outside_cycle: 0,
            clock,
            spec,
            overhead,
            start_anchor,
            wall_start,
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
            wall_start: None,
            cycles: Slab::from_box(Box::new([])),
            spans: Slab::from_box(Box::new([])),
            samples: Slab::from_box(Box::new([])),
            values: Slab::from_box(Box::new([])),
            live: LiveRef::disabled(),
            stage_cpu: Box::new([]),
            cycle_cpu: false,
            max_spans: 0,
            max_samples: 0,
            samples_dropped: 0,
            samples_outside_cycle: 0,
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
            status: None,
            prev_start: None,
            next_anchor: u64::MAX,
            anchor_every: 0,
            run_anchor: ClockAnchor {
                raw: 0,
                monotonic_ns: 0,
                uncertainty_ns: 0,
            },
            run_ns_per_tick: 0.0,
            ring_note: None,
            ring: None,
        }
    }
}

/// The scratch recorder's spec: `per` cycles and spans, one phase, a
/// wall-only and a CPU-timed stage, on the heap.
fn scratch_spec(per: usize) -> RecorderBuilder {
    let mut spec = RecorderBuilder::new();
    spec.max_cycles(per)
        .max_spans_per_cycle(per)
        .cpu_time_mode(CpuTimeMode::Spans)
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
    spec
}

/// The time of one `read`, averaged over `n` back to back (generic, so
/// that the read is inlined as the recorder inlines it).
#[inline(always)]
fn per_read(n: usize, clock: &quanta::Clock, read: impl Fn() -> u64) -> f64 {
    let t0 = clock.raw();
    let mut acc = 0u64;
    for _ in 0..n {
        acc = acc.wrapping_add(std::hint::black_box(read()));
    }
    std::hint::black_box(acc);
    clock.delta_as_nanos(t0, clock.raw()) as f64 / n as f64
}

/// Times the recorder's own operations on a scratch recorder.
fn measure_overhead() -> Overhead {
    const BATCHES: usize = 31;
    const PER: usize = 64;
    // A few hundred kilobytes; if even that is refused, report no overhead.
    let Ok(mut rec) = Recorder::allocate(scratch_spec(PER), Overhead::default()) else {
        return Overhead::default();
    };
    let clock = rec.clock.clone();
    let phase = PhaseId(0);
    let per_op = |t0: u64, t1: u64| clock.delta_as_nanos(t0, t1) as f64 / PER as f64;
    let mut cycle = Vec::with_capacity(BATCHES);
    let mut cycle_cpu = Vec::with_capacity(BATCHES);
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

        rec.cycle_cpu = true;
        let t0 = clock.raw();
        for _ in 0..PER {
            rec.begin_cycle(phase, Release::NONE);
            rec.end_cycle();
        }
        cycle_cpu.push(per_op(t0, clock.raw()));
        rec.cycle_cpu = false;

        for (stage, out) in [(StageId(0), &mut wall), (StageId(1), &mut cpu)] {
            rec.begin_cycle(phase, Release::NONE);
            let t0 = clock.raw();
            for _ in 0..PER {
                let _s = rec.span(stage);
            }
            out.push(per_op(t0, clock.raw()));
            rec.end_cycle();
        }

        raw_read.push(per_read(PER, &clock, || clock.raw()));
        cpu_read.push(per_read(PER, &clock, sys::thread_cpu_ns));
    }
    Overhead {
        clock_read_ns: median(&mut raw_read),
        thread_cpu_read_ns: median(&mut cpu_read),
        cycle_ns: median(&mut cycle),
        span_wall_ns: median(&mut wall),
        span_cpu_ns: median(&mut cpu),
        cycle_cpu_ns: median(&mut cycle_cpu),
        samples: BATCHES as u32,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.get(v.len() / 2).copied().unwrap_or(0.0);
    (m * 10.0).round() / 10.0
}
