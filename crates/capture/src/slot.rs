//! The fixed memory layout of a cycle and its spans, shared by the recorder
//! (which fills it), the ring storages (which hold it, in the heap or in a
//! file another process maps) and the ring reader (which copies it back):
//! the slots, the raw view of one cycle turned into a record, and the TSC
//! calibration that maps raw ticks onto nanoseconds. It imports none of
//! those modules; they import it.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use crate::format::{ClockAnchor, Header, TscCalibration, ValueKind, WallClockAnchor};
use crate::sys;

/// Attributes stored per span.
pub const MAX_ATTRS_PER_SPAN: usize = 4;
/// The span index that names no span (and a top-level span's parent).
pub(crate) const NO_SPAN: u16 = u16::MAX;
/// Anchors closer than this use quanta's calibration instead of their own slope.
pub const MIN_FIT_SPAN_NS: u64 = 50_000_000;

/// One cycle of the ring. `repr(C)` and plain integers (bytes as flags), so
/// that a reader in another process can copy it whatever its bytes; `seq`
/// comes first and is written last (see [`crate::ring`]).
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct CycleSlot {
    pub(crate) seq: AtomicU64,
    pub(crate) index: u64,
    pub(crate) target_ns: u64,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) sleep_start: u64,
    pub(crate) wake: u64,
    pub(crate) cpu_start: u64,
    pub(crate) cpu_end: u64,
    pub(crate) spin_margin: u64,
    pub(crate) spin: u64,
    /// The releasing input's arrival (host monotonic ns) and counter.
    pub(crate) arrival: u64,
    pub(crate) input_seq: u64,
    /// When the loop read that input (host monotonic ns), beside a kernel
    /// arrival, and the arrival's conversion bound (layout version 4).
    pub(crate) read: u64,
    pub(crate) arrival_bound: u64,
    pub(crate) spans_dropped: u32,
    pub(crate) skipped: u32,
    pub(crate) phase: u16,
    pub(crate) n_spans: u16,
    pub(crate) values_set: u16,
    pub(crate) n_samples: u16,
    pub(crate) samples_dropped: u16,
    pub(crate) overdue: u8,
    pub(crate) has_target: u8,
    pub(crate) has_wait: u8,
    pub(crate) ended: u8,
    pub(crate) has_cpu: u8,
    pub(crate) has_margin: u8,
    pub(crate) has_spin: u8,
    /// 1: released by an input ([`crate::format::PaceKind::Input`]).
    pub(crate) pace_input: u8,
    pub(crate) has_arrival: u8,
    pub(crate) has_input_seq: u8,
    pub(crate) has_read: u8,
    pub(crate) has_arrival_bound: u8,
    _pad: [u8; 2],
}

/// One sample slot (data age): which sample of which source a cycle used or
/// published, its stamp (ns on its source's clock) and when the recorder
/// was told (raw ticks). `repr(C)`, plain integers, as [`CycleSlot`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SampleSlot {
    pub(crate) seq: u64,
    pub(crate) stamp: u64,
    pub(crate) at: u64,
    pub(crate) source: u16,
    pub(crate) produced: u8,
    _pad: [u8; 5],
}

/// One span slot; `repr(C)`, plain integers, as [`CycleSlot`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SpanSlot {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) cpu_start: u64,
    pub(crate) cpu_end: u64,
    pub(crate) attrs: [(u16, u16); MAX_ATTRS_PER_SPAN],
    pub(crate) stage: u16,
    pub(crate) parent: u16,
    pub(crate) depth: u8,
    pub(crate) n_attrs: u8,
    pub(crate) cpu: u8,
    pub(crate) open: u8,
    pub(crate) closed_by_cycle_end: u8,
    _pad: [u8; 7],
}

/// One cycle's slots seen together: the view the writer's records and the
/// ring reader's are made from.
pub(crate) struct RawCycle<'a> {
    slot: &'a CycleSlot,
    spans: &'a [SpanSlot],
    samples: &'a [SampleSlot],
    values: &'a [u64],
    open: bool,
}

impl<'a> RawCycle<'a> {
    /// A cycle that is not open (as read back from a ring).
    pub(crate) fn new(
        slot: &'a CycleSlot,
        spans: &'a [SpanSlot],
        samples: &'a [SampleSlot],
        values: &'a [u64],
    ) -> Self {
        RawCycle {
            slot,
            spans,
            samples,
            values,
            open: false,
        }
    }

    /// A cycle of a live recorder; `open` while it is the cycle in progress
    /// (then it has no end, and its open spans end with it).
    pub(crate) fn live(
        slot: &'a CycleSlot,
        spans: &'a [SpanSlot],
        samples: &'a [SampleSlot],
        values: &'a [u64],
        open: bool,
    ) -> Self {
        RawCycle {
            slot,
            spans,
            samples,
            values,
            open,
        }
    }

    /// How many values this cycle set that its record cannot carry: floats
    /// that are not finite (NaN, ±inf have no JSON number). The record
    /// leaves them out; finish and recover count them into the summary's
    /// `values_dropped`, so that none is dropped without a word.
    pub(crate) fn nonfinite_values(&self, header: &Header) -> u64 {
        header
            .values
            .iter()
            .enumerate()
            .filter(|(i, info)| {
                self.slot.values_set & (1 << i) != 0
                    && info.kind == ValueKind::Float
                    && !f64::from_bits(self.values[*i]).is_finite()
            })
            .count() as u64
    }

    /// The record written for this cycle, with names from `header`.
    // long-fn: the writer's per-cycle conversion, field for field, hot at finish
    pub(crate) fn to_record(&self, header: &Header, map: &TscMap) -> crate::format::CycleRecord {
        use crate::format::{CycleRecord, CycleTag, SampleRecord, SpanRecord};
        let spec = header;
        let c = self.slot;
        let ended = c.ended != 0 && !self.open;
        let mut values = BTreeMap::new();
        for (i, info) in spec.values.iter().enumerate() {
            if c.values_set & (1 << i) == 0 {
                continue;
            }
            let bits = self.values[i];
            let number = match info.kind {
                ValueKind::Int => Some(serde_json::Number::from(bits as i64)),
                ValueKind::Float => serde_json::Number::from_f64(f64::from_bits(bits)),
            };
            if let Some(n) = number {
                values.insert(info.name.clone(), n);
            }
        }
        let end_raw = if ended { Some(c.end) } else { None };
        let spans = self
            .spans
            .iter()
            .map(|s| {
                // A span left open by an aborted cycle ends at the cycle's
                // end, or at its own start when the cycle never ended.
                let open = s.open != 0;
                let end = if open {
                    end_raw.unwrap_or(s.start)
                } else {
                    s.end
                };
                SpanRecord {
                    stage: spec
                        .stages
                        .get(s.stage as usize)
                        .map(|st| st.name.clone())
                        .unwrap_or_default(),
                    parent: (s.parent != NO_SPAN).then_some(s.parent as u32),
                    depth: s.depth as u32,
                    start_ns: map.to_ns(s.start),
                    wall_ns: map.to_ns(end).saturating_sub(map.to_ns(s.start)),
                    cpu_ns: (s.cpu != 0 && !open).then(|| s.cpu_end.saturating_sub(s.cpu_start)),
                    closed_by_cycle_end: s.closed_by_cycle_end != 0 || open,
                    attrs: s.attrs[..(s.n_attrs as usize).min(MAX_ATTRS_PER_SPAN)]
                        .iter()
                        .filter_map(|&(k, v)| {
                            let a = spec.attributes.get(k as usize)?;
                            Some((a.key.clone(), a.values.get(v as usize)?.clone()))
                        })
                        .collect(),
                }
            })
            .collect();
        CycleRecord {
            kind: CycleTag::Cycle,
            cycle: c.index,
            phase: spec
                .phases
                .get(c.phase as usize)
                .cloned()
                .unwrap_or_default(),
            start_ns: map.to_ns(c.start),
            end_ns: end_raw.map(|e| map.to_ns(e)),
            cpu_ns: (c.has_cpu != 0 && ended).then(|| c.cpu_end.saturating_sub(c.cpu_start)),
            target_ns: (c.has_target != 0).then_some(c.target_ns),
            sleep_start_ns: (c.has_wait != 0).then(|| map.to_ns(c.sleep_start)),
            spin_margin_ns: (c.has_margin != 0).then_some(c.spin_margin),
            spin_ns: (c.has_spin != 0).then_some(c.spin),
            wake_ns: (c.has_wait != 0).then(|| map.to_ns(c.wake)),
            overdue: c.overdue != 0,
            skipped: c.skipped,
            pace: if c.pace_input != 0 {
                crate::format::PaceKind::Input
            } else {
                crate::format::PaceKind::Deadline
            },
            arrival_ns: (c.has_arrival != 0).then_some(c.arrival),
            input_seq: (c.has_input_seq != 0).then_some(c.input_seq),
            read_ns: (c.has_read != 0).then_some(c.read),
            arrival_bound_ns: (c.has_arrival_bound != 0).then_some(c.arrival_bound),
            spans_dropped: c.spans_dropped,
            values,
            spans,
            samples: self
                .samples
                .iter()
                .map(|x| SampleRecord {
                    source: spec
                        .sources
                        .get(x.source as usize)
                        .map(|s| s.name.clone())
                        .unwrap_or_default(),
                    seq: x.seq,
                    stamp_ns: x.stamp,
                    at_ns: map.to_ns(x.at),
                    produced: x.produced != 0,
                })
                .collect(),
            samples_dropped: c.samples_dropped as u32,
        }
    }
}

/// Maps raw ticks onto host monotonic nanoseconds (fixed point, 32
/// fractional bits).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TscMap {
    raw0: u64,
    ns0: u64,
    scale_q32: i128,
}

impl TscMap {
    pub(crate) fn new(start: ClockAnchor, ns_per_tick: f64) -> TscMap {
        TscMap {
            raw0: start.raw,
            ns0: start.monotonic_ns,
            scale_q32: (ns_per_tick * (1u64 << 32) as f64).round() as i128,
        }
    }

    pub(crate) fn to_ns(self, raw: u64) -> u64 {
        let dt = raw as i128 - self.raw0 as i128;
        let ns = self.ns0 as i128 + ((dt * self.scale_q32) >> 32);
        ns.clamp(0, u64::MAX as i128) as u64
    }
}

/// Builds the calibration written to the header from the start anchor and a
/// fresh end anchor.
pub(crate) fn calibrate(clock: &quanta::Clock, start: ClockAnchor) -> TscCalibration {
    let end = take_anchor(clock);
    let span_ns = end.monotonic_ns.saturating_sub(start.monotonic_ns);
    let (ns_per_tick, source) = if span_ns >= MIN_FIT_SPAN_NS && end.raw > start.raw {
        (span_ns as f64 / (end.raw - start.raw) as f64, "anchors")
    } else {
        let ticks = 1u64 << 30;
        (
            clock.delta_as_nanos(0, ticks) as f64 / ticks as f64,
            "quanta",
        )
    };
    TscCalibration {
        start,
        end,
        ns_per_tick,
        slope_source: source.to_string(),
    }
}

/// A wall-clock anchor: the tightest of several (monotonic, realtime,
/// monotonic) brackets. `None` when the kernel refuses either clock.
pub(crate) fn take_wall_anchor() -> Option<WallClockAnchor> {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..16 {
        let m1 = sys::monotonic_ns();
        let real = sys::realtime_ns();
        let m2 = sys::monotonic_ns();
        if m1 == 0 || real == 0 || m2 < m1 {
            continue;
        }
        let width = m2 - m1;
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, real, m1 + width / 2));
        }
    }
    best.map(|(width, real, mono)| WallClockAnchor {
        realtime_ns: real,
        monotonic_ns: mono,
        uncertainty_ns: width / 2 + 1,
    })
}

/// Takes the tightest of several (raw, monotonic, raw) brackets.
pub(crate) fn take_anchor(clock: &quanta::Clock) -> ClockAnchor {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..32 {
        let r1 = clock.raw();
        let mono = sys::monotonic_ns();
        let r2 = clock.raw();
        let width = r2.wrapping_sub(r1);
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, r1 / 2 + r2 / 2 + (r1 % 2 + r2 % 2) / 2, mono));
        }
    }
    let (width, raw, mono) = best.unwrap_or((0, clock.raw(), sys::monotonic_ns()));
    ClockAnchor {
        raw,
        monotonic_ns: mono,
        uncertainty_ns: clock.delta_as_nanos(0, width) / 2 + 1,
    }
}
