//! What a recorder reports, off the control path: its counters, its
//! evidence header, its ring, a reset for the next episode, and its live
//! status (updated at each cycle's end, read by another thread).

use super::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::error::{CaptureError, Result};
use crate::format::{
    Capacity, ClockAnchor, ClockDomain, ClockTable, CpuTimeMode, Header, HeaderTag, Overhead,
    StageInfo, ThreadInfo, TscCalibration, WallClock, SCHEMA_VERSION,
};
use crate::ring::{RingMeta, RingState};
use crate::slot::{take_anchor, take_wall_anchor, RawCycle};

pub use crate::slot::MAX_ATTRS_PER_SPAN;

pub use crate::builder::{RecorderBuilder, MAX_SPAN_DEPTH};

impl Recorder {
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
            self.next_anchor = self.start_anchor.raw.saturating_add(self.anchor_every);
            self.run_anchor = self.start_anchor;
            self.wall_start = take_wall_anchor();
            live.set_wall(self.wall_start);
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

    /// Why a recorder built with [`RingStorage::Auto`](crate::RingStorage::Auto) keeps its ring on the
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
    /// ring's meta region (a directory path of many kilobytes);
    /// [`CaptureError::Ring`] for a directory whose path is not UTF-8. Either
    /// way the recorder keeps the directory it had.
    pub fn set_episode_dir(&mut self, dir: impl Into<PathBuf>) -> Result<()> {
        let before = self.spec.episode_dir.replace(dir.into());
        if let Some(ring) = &self.ring {
            let meta = ring_meta_json(
                &self.spec,
                &self.overhead,
                self.start_anchor,
                &self.clock,
                ring.path(),
            )
            .and_then(|meta| {
                if ring.write_meta(&meta) {
                    Ok(())
                } else {
                    Err(CaptureError::InvalidOption {
                        option: "episode directory length",
                        value: meta.len() as u64,
                        expected: "a ring meta that fits the space reserved at build",
                    })
                }
            });
            if let Err(e) = meta {
                // The ring keeps its meta, and the recorder the directory
                // that meta names.
                self.spec.episode_dir = before;
                return Err(e);
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
                RingState::Finished => {
                    ring.keep_on_drop(false);
                    ring.remove_now();
                }
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
        // The end anchor is taken now, when the files are written.
        h.wall_clock = self.wall_start.map(|start| WallClock {
            start,
            end: take_wall_anchor(),
        });
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
                &self.samples[slot * self.max_samples
                    ..slot * self.max_samples + self.cycles[slot].n_samples as usize],
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
            max_samples_per_cycle: spec.sample_slots() as u32,
        },
        nominal_period_ns: spec.nominal_period_ns,
        thread_cpu_time: spec.cpu_mode != CpuTimeMode::Off,
        thread_cpu_mode: Some(spec.cpu_mode),
        stages: spec
            .stages
            .iter()
            .map(|s| StageInfo {
                name: s.name.clone(),
                cpu_time: s.cpu_time && spec.cpu_mode == CpuTimeMode::Spans,
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
        wall_clock: None,
        sources: spec.sources.clone(),
        command_stage: spec
            .command_stage
            .and_then(|s| spec.stages.get(s.0 as usize))
            .map(|s| s.name.clone()),
        compute_budget_ns: spec.compute_budget_ns,
        deadline_tolerance_ns: spec.deadline_tolerance_ns,
    }
}

/// The name and version written as `producer`.
pub(crate) fn producer() -> String {
    format!("looptime-capture {}", env!("CARGO_PKG_VERSION"))
}

/// The ring's meta JSON for `spec`: its evidence header (the clock anchor
/// is kept apart, in the fixed header) and episode directory.
///
/// # Errors
/// [`CaptureError::Ring`] (naming `ring`) when the meta has no JSON form:
/// an episode directory that is not UTF-8. An empty meta would leave a
/// ring that `recover` cannot read.
pub(super) fn ring_meta_json(
    spec: &RecorderBuilder,
    overhead: &Overhead,
    anchor: ClockAnchor,
    clock: &quanta::Clock,
    ring: &std::path::Path,
) -> Result<Vec<u8>> {
    let tsc = TscCalibration {
        start: anchor,
        end: anchor,
        ns_per_tick: quanta_ns_per_tick(clock),
        slope_source: "quanta".to_string(),
    };
    let meta = RingMeta {
        header: header_of(spec, overhead, tsc),
        // Absolute, so that `recover` writes where the recorder meant
        // whatever directory it runs from, and can check the directory's
        // owner (ring::owner).
        episode_dir: spec
            .episode_dir
            .as_ref()
            .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone())),
    };
    serde_json::to_vec(&meta).map_err(|e| CaptureError::Ring {
        path: ring.to_path_buf(),
        what: "describe the episode directory in",
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{e}; give an episode directory whose path is UTF-8"),
        ),
    })
}

/// Nanoseconds per raw tick by quanta's own calibration.
pub(super) fn quanta_ns_per_tick(clock: &quanta::Clock) -> f64 {
    let ticks = 1u64 << 30;
    clock.delta_as_nanos(0, ticks) as f64 / ticks as f64
}

/// The live status ([`crate::status`]): its update at each cycle's end and
/// its handle.
impl Recorder {
    /// Count the cycle just ended in the live status (no allocation, no
    /// lock: a few atomic stores).
    #[inline]
    pub(super) fn update_status(&mut self) {
        let c = &self.cycles[self.cur];
        let (start, end) = (c.start, c.end);
        let host = self.spec.target_clock == crate::format::ClockDomain::HostMonotonic;
        let target_ns = (c.has_target != 0 && host).then_some(c.target_ns);
        let (overdue, skipped, index) = (c.overdue != 0, c.skipped, c.index);
        // Through the newest running anchor and the fitted slope, not
        // quanta's calibration alone (hundreds of ppm off on some hosts: a
        // second an hour against the release points).
        let (a, k) = (self.run_anchor, self.run_ns_per_tick);
        let mono = |raw: u64| {
            let ns = a.monotonic_ns as f64 + (raw as i128 - a.raw as i128) as f64 * k;
            ns.round().max(0.0) as u64
        };
        let ended = crate::status::Ended {
            index,
            start_ns: mono(start),
            end_ns: mono(end),
            target_ns,
            overdue,
            skipped: u64::from(skipped),
            period_ns: self
                .prev_start
                .map(|p| (start.saturating_sub(p) as f64 * k).round() as u64),
        };
        self.prev_start = Some(start);
        if let Some((st, limits)) = &self.status {
            st.record(&ended, limits);
        }
    }

    /// The live status, when the builder asked for it
    /// ([`RecorderBuilder::live_status`]): hand it to the thread that
    /// reports it; [`LiveStatus::snapshot`](crate::status::LiveStatus::snapshot)
    /// never makes this recorder wait. It counts from the build, across
    /// resets.
    pub fn live_status(&self) -> Option<std::sync::Arc<crate::status::LiveStatus>> {
        self.status.as_ref().map(|(s, _)| s.clone())
    }

    /// Take a running clock anchor (three clock reads; the vDSO's
    /// `CLOCK_MONOTONIC`, no system call) and publish it for a ring's
    /// reader, once every 100 ms of recording. A read bracketed wider than
    /// 2 µs (the thread was preempted) is dropped and tried again at the
    /// next cycle's end.
    #[inline(never)]
    pub(super) fn refresh_anchor(&mut self) {
        let r1 = self.clock.raw();
        let mono = sys::monotonic_ns();
        let r2 = self.clock.raw();
        let width = self.clock.delta_as_nanos(r1, r2);
        if width > 2_000 {
            return;
        }
        let anchor = ClockAnchor {
            raw: r1 + (r2 - r1) / 2,
            monotonic_ns: mono,
            uncertainty_ns: width / 2 + 1,
        };
        self.live.get().set_late_anchor(anchor);
        let s = self.start_anchor;
        if anchor.raw > s.raw && mono >= s.monotonic_ns + crate::slot::MIN_FIT_SPAN_NS {
            self.run_ns_per_tick = (mono - s.monotonic_ns) as f64 / (anchor.raw - s.raw) as f64;
        }
        self.run_anchor = anchor;
        self.next_anchor = r2.saturating_add(self.anchor_every);
    }
}
