//! A ring opened read-only: what `looptime watch` shows of a running
//! loop and what [`super::recover`] rebuilds evidence from.

#![allow(unsafe_code)]

use std::mem::{size_of, MaybeUninit};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use super::*;
use crate::error::Result;
use crate::format::{ClockAnchor, CycleRecord, Header};
use crate::slot::{CycleSlot, RawCycle, SampleSlot, SpanSlot, TscMap};

/// A ring file opened read-only by another process: `looptime watch` and
/// [`recover`]. The mapping is `PROT_READ`, so the reader cannot write to
/// the ring even by mistake.
#[derive(Debug)]
pub struct RingReader {
    path: PathBuf,
    base: NonNull<u8>,
    len: usize,
    fixed: Fixed,
}

// SAFETY: a read-only mapping; every read goes through volatile copies or
// atomics.
unsafe impl Send for RingReader {}

impl Drop for RingReader {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// Cycles read from a ring, with what could not be read.
#[derive(Debug, Clone)]
pub struct RingRead {
    /// The evidence header (its `tsc` from the ring's start anchor and the
    /// writer's newest running anchor, or quanta's slope when there is
    /// none 50 ms after the start).
    pub header: Header,
    /// Complete cycles, oldest first.
    pub cycles: Vec<CycleRecord>,
    /// Cycles begun since the recorder was built or reset.
    pub total_cycles: u64,
    /// The newest cycle, begun and not ended (0 or 1).
    pub in_progress: u64,
    /// Records whose sequence number does not match their place: torn
    /// (writer dead) or overwritten while read (writer alive).
    pub torn: u64,
    /// Records that fail a consistency check (a span count over capacity,
    /// an unknown phase): damaged, skipped.
    pub damaged: u64,
    /// Spans dropped over the whole run (the writer's counter).
    pub spans_dropped: u64,
    /// Spans opened outside a cycle (the writer's counter).
    pub spans_outside_cycle: u64,
    /// Values of the complete cycles read that were set but not finite, so
    /// not in their records.
    pub values_dropped: u64,
}

impl RingReader {
    /// Map `path` read-only and check its header.
    ///
    /// # Errors
    /// [`CaptureError::NotYourRing`] for a ring that is not the caller's
    /// (never opened), [`CaptureError::Ring`] when it cannot be opened or
    /// mapped, and [`CaptureError::BadRing`] when it is not a ring file of
    /// this layout.
    pub fn open(path: &Path) -> Result<RingReader> {
        // Only the caller's own ring is ever opened (owner.rs).
        let file = super::owner::open_mine(path)?;
        let len = file.metadata().map_err(ring_err(path, "open"))?.len() as usize;
        if len < HEADER_BYTES {
            return Err(bad_ring(
                path,
                format!("{len} bytes is shorter than a ring header ({HEADER_BYTES} bytes)"),
            ));
        }
        let base = map_file(path, &file, len, false)?;
        // SAFETY: `len >= HEADER_BYTES > size_of::<Fixed>()`; Fixed is plain
        // integers, valid for any bytes.
        let fixed = unsafe { std::ptr::read_volatile(base.as_ptr() as *const Fixed) };
        let reader = RingReader {
            path: path.to_path_buf(),
            base,
            len,
            fixed,
        };
        reader.check()?;
        Ok(reader)
    }

    fn check(&self) -> Result<()> {
        let f = &self.fixed;
        let p = &self.path;
        if f.magic != RING_MAGIC {
            return Err(bad_ring(
                p,
                "no looptime ring magic (not a ring file, or one still being created)",
            ));
        }
        if f.layout_version != RING_LAYOUT_VERSION {
            return Err(bad_ring(p, format!("ring layout version {} is not the {RING_LAYOUT_VERSION} this build reads: use the looptime build that wrote it", f.layout_version)));
        }
        if f.cycle_slot_bytes as usize != size_of::<CycleSlot>()
            || f.span_slot_bytes as usize != size_of::<SpanSlot>()
            || f.sample_slot_bytes as usize != size_of::<SampleSlot>()
        {
            return Err(bad_ring(
                p,
                "slot sizes differ from this build's: use the looptime build that wrote it",
            ));
        }
        let layout = Layout::new(
            f.capacity as usize,
            f.max_spans as usize,
            f.max_samples as usize,
            f.n_values as usize,
            (f.meta_capacity as usize).saturating_sub(META_SLACK),
        );
        let fits = layout.is_some_and(|l| {
            l.cycles_offset as u64 == f.cycles_offset
                && l.spans_offset as u64 == f.spans_offset
                && l.samples_offset as u64 == f.samples_offset
                && l.values_offset as u64 == f.values_offset
                && l.file_bytes as u64 == f.file_bytes
                && l.file_bytes <= self.len
        });
        if !fits || f.capacity == 0 || f.meta_offset != HEADER_BYTES as u64 {
            return Err(bad_ring(
                p,
                format!(
                    "the header's regions do not fit the file ({} bytes): truncated or damaged",
                    self.len
                ),
            ));
        }
        Ok(())
    }

    fn live(&self) -> &Live {
        // SAFETY: inside the header page (len checked), 64-aligned; loads
        // of atomics from a read-only mapping are fine.
        unsafe { &*(self.base.as_ptr().add(LIVE_OFFSET) as *const Live) }
    }

    /// The ring file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The writer's pid.
    pub fn pid(&self) -> u32 {
        self.fixed.pid
    }

    /// When the ring was created, in nanoseconds since the Unix epoch.
    pub fn created_unix_ns(&self) -> u64 {
        self.fixed.created_unix_ns
    }

    /// Ring capacity in cycles.
    pub fn capacity(&self) -> u64 {
        self.fixed.capacity
    }

    /// What the writer last said it was doing.
    pub fn state(&self) -> RingState {
        RingState::from_u32(self.live().state.load(Ordering::Acquire))
    }

    /// Cycles begun so far.
    pub fn total_cycles(&self) -> u64 {
        self.live().total.load(Ordering::Acquire)
    }

    /// Whether the process that wrote the ring still runs: its pid exists
    /// and started when the ring's writer did (a reused pid does not count).
    pub fn writer_alive(&self) -> bool {
        pid_alive(self.fixed.pid, self.fixed.proc_start_ticks)
    }

    /// The meta region, read consistently (retried while the writer
    /// rewrites it).
    ///
    /// # Errors
    /// [`CaptureError::BadRing`] when it never reads consistently or is not
    /// valid JSON.
    pub fn meta(&self) -> Result<RingMeta> {
        let live = self.live();
        for _ in 0..1000 {
            let s1 = live.meta_seq.load(Ordering::Acquire);
            let n = live.meta_len.load(Ordering::Relaxed) as usize;
            if s1 % 2 == 1 || n > self.fixed.meta_capacity as usize {
                std::thread::yield_now();
                continue;
            }
            let mut bytes = vec![0u8; n];
            // SAFETY: the meta region is inside the mapping (checked) and
            // `n` is within its capacity.
            unsafe {
                let src = self.base.as_ptr().add(self.fixed.meta_offset as usize);
                for (i, b) in bytes.iter_mut().enumerate() {
                    *b = std::ptr::read_volatile(src.add(i));
                }
            }
            fence(Ordering::Acquire);
            if live.meta_seq.load(Ordering::Relaxed) != s1 {
                continue;
            }
            let meta: RingMeta = serde_json::from_slice(&bytes).map_err(|e| {
                bad_ring(
                    &self.path,
                    format!("its meta region is not valid JSON ({e})"),
                )
            })?;
            // Found by the `ring` fuzz target: a damaged schema_version was
            // recovered into evidence no reader accepts.
            let v = meta.header.schema_version;
            if !crate::format::SUPPORTED_SCHEMA_VERSIONS.contains(&v) {
                return Err(bad_ring(
                    &self.path,
                    format!(
                        "its header says schema_version {v}, which no reader of evidence accepts (this build reads {:?}): damaged",
                        crate::format::SUPPORTED_SCHEMA_VERSIONS
                    ),
                ));
            }
            // The slots hold `n_values` values a cycle; a header that
            // declares more would read past them.
            if meta.header.values.len() > self.fixed.n_values as usize {
                return Err(bad_ring(
                    &self.path,
                    format!(
                        "its header declares {} values but its slots hold {}: damaged",
                        meta.header.values.len(),
                        self.fixed.n_values
                    ),
                ));
            }
            return Ok(meta);
        }
        Err(bad_ring(
            &self.path,
            "its meta region kept changing while read",
        ))
    }

    fn anchor(&self) -> ClockAnchor {
        let live = self.live();
        let unc = live.anchor_unc.load(Ordering::Acquire);
        ClockAnchor {
            raw: live.anchor_raw.load(Ordering::Relaxed),
            monotonic_ns: live.anchor_mono.load(Ordering::Relaxed),
            uncertainty_ns: unc,
        }
    }

    /// The thread whose recorder writes this ring (`control`, or a
    /// background thread's name), from its meta; `None` when the meta
    /// cannot be read.
    pub fn thread_name(&self) -> Option<String> {
        self.meta().ok().map(|m| m.header.thread_name().to_string())
    }

    /// Read the newest `last` cycles (all retained ones with `None`).
    ///
    /// # Errors
    /// As [`meta`](Self::meta).
    pub fn read(&self, last: Option<u64>) -> Result<RingRead> {
        let meta = self.meta()?;
        let mut header = meta.header;
        let tid = self.live().tid.load(Ordering::Relaxed);
        if let Some(t) = header.thread.as_mut() {
            t.tid = (tid != 0).then_some(tid);
        }
        let anchor = self.anchor();
        header.tsc.start = anchor;
        header.tsc.end = anchor;
        header.tsc.ns_per_tick = f64::from_bits(self.fixed.ns_per_tick_bits);
        header.tsc.slope_source = "quanta".to_string();
        // The writer's newest running anchor, when it took one at least
        // 50 ms after the start anchor: the slope between the two, as a
        // finished recording's (quanta's calibration can be off by
        // hundreds of ppm, a millisecond over a few seconds).
        if let Some(late) = self.live().late_anchor().filter(|l| {
            l.raw > anchor.raw
                && l.monotonic_ns
                    >= anchor
                        .monotonic_ns
                        .saturating_add(crate::slot::MIN_FIT_SPAN_NS)
        }) {
            header.tsc.end = late;
            header.tsc.ns_per_tick =
                (late.monotonic_ns - anchor.monotonic_ns) as f64 / (late.raw - anchor.raw) as f64;
            header.tsc.slope_source = "anchors".to_string();
        }
        // The start wall-clock anchor; a dead writer took no end anchor.
        header.wall_clock = self
            .live()
            .wall()
            .map(|start| crate::format::WallClock { start, end: None });
        let map = TscMap::new(anchor, header.tsc.ns_per_tick);
        let live = self.live();
        let total = live.total.load(Ordering::Acquire);
        let cap = self.fixed.capacity;
        let mut lo = total.saturating_sub(cap);
        if let Some(n) = last {
            lo = lo.max(total.saturating_sub(n));
        }
        let mut out = RingRead {
            header,
            cycles: Vec::with_capacity((total - lo) as usize),
            total_cycles: total,
            in_progress: 0,
            torn: 0,
            damaged: 0,
            spans_dropped: live.spans_dropped.load(Ordering::Relaxed),
            spans_outside_cycle: live.spans_outside_cycle.load(Ordering::Relaxed),
            values_dropped: 0,
        };
        let mut spans = Vec::with_capacity(self.fixed.max_spans as usize);
        let mut samples = Vec::with_capacity(self.fixed.max_samples as usize);
        let mut values = vec![0u64; self.fixed.n_values as usize];
        for k in lo..total {
            match self.read_slot(k, &mut spans, &mut samples, &mut values) {
                SlotRead::Complete(slot) => {
                    // A slot whose own index is not its place was damaged
                    // after it was written (its sequence number says it is
                    // cycle k): its record would break the file's order.
                    if slot.index != k || !slot_consistent(&slot, &spans, &samples, &out.header) {
                        out.damaged += 1;
                        continue;
                    }
                    let raw = RawCycle::new(&slot, &spans, &samples, &values);
                    out.values_dropped += raw.nonfinite_values(&out.header);
                    out.cycles.push(raw.to_record(&out.header, &map));
                }
                SlotRead::InProgress if k + 1 == total => out.in_progress += 1,
                SlotRead::InProgress | SlotRead::Mismatch => out.torn += 1,
            }
        }
        Ok(out)
    }

    fn read_slot(
        &self,
        k: u64,
        spans: &mut Vec<SpanSlot>,
        samples: &mut Vec<SampleSlot>,
        values: &mut [u64],
    ) -> SlotRead {
        let f = &self.fixed;
        let slot_i = (k % f.capacity) as usize;
        let want = 2 * k + 2;
        // SAFETY: slot_i < capacity; the regions were checked to fit the
        // mapping. CycleSlot, SpanSlot and u64 are plain integers (and
        // atomics of them), valid for any bytes, so volatile copies are
        // sound even while the writer changes them; the sequence number
        // says whether the copy is usable.
        unsafe {
            let base = self.base.as_ptr();
            let cptr = base
                .add(f.cycles_offset as usize)
                .cast::<CycleSlot>()
                .add(slot_i);
            let seq = &*(cptr as *const AtomicU64);
            let s1 = seq.load(Ordering::Acquire);
            if s1 == want - 1 {
                return SlotRead::InProgress;
            }
            if s1 != want {
                return SlotRead::Mismatch;
            }
            let slot: CycleSlot = read_plain(cptr);
            let n = (slot.n_spans as usize).min(f.max_spans as usize);
            let sptr = base
                .add(f.spans_offset as usize)
                .cast::<SpanSlot>()
                .add(slot_i * f.max_spans as usize);
            spans.clear();
            for i in 0..n {
                spans.push(read_plain(sptr.add(i)));
            }
            let n = (slot.n_samples as usize).min(f.max_samples as usize);
            let xptr = base
                .add(f.samples_offset as usize)
                .cast::<SampleSlot>()
                .add(slot_i * f.max_samples as usize);
            samples.clear();
            for i in 0..n {
                samples.push(read_plain(xptr.add(i)));
            }
            let nv = f.n_values as usize;
            let vptr = base
                .add(f.values_offset as usize)
                .cast::<u64>()
                .add(slot_i * nv);
            for (i, v) in values.iter_mut().enumerate() {
                *v = std::ptr::read_volatile(vptr.add(i));
            }
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) != want {
                return SlotRead::Mismatch;
            }
            SlotRead::Complete(slot)
        }
    }
}

enum SlotRead {
    Complete(CycleSlot),
    InProgress,
    Mismatch,
}

/// A volatile byte copy of a `T` of plain integers.
///
/// # Safety
/// `src` must be readable for `size_of::<T>()` bytes, and every bit
/// pattern must be a valid `T`.
unsafe fn read_plain<T>(src: *const T) -> T {
    let mut out = MaybeUninit::<T>::uninit();
    let dst = out.as_mut_ptr() as *mut u8;
    let src = src as *const u8;
    for i in 0..size_of::<T>() {
        // SAFETY: within both objects.
        unsafe { *dst.add(i) = std::ptr::read_volatile(src.add(i)) };
    }
    // SAFETY: fully written, and any bytes are a valid T (caller).
    unsafe { out.assume_init() }
}

fn slot_consistent(
    slot: &CycleSlot,
    spans: &[SpanSlot],
    samples: &[SampleSlot],
    header: &Header,
) -> bool {
    (slot.phase as usize) < header.phases.len()
        && slot.n_spans as usize == spans.len()
        && slot.n_samples as usize == samples.len()
        && samples
            .iter()
            .all(|x| (x.source as usize) < header.sources.len())
        && spans.iter().enumerate().all(|(i, s)| {
            (s.stage as usize) < header.stages.len()
                && (s.parent == u16::MAX || (s.parent as usize) < i)
                && s.n_attrs as usize <= crate::slot::MAX_ATTRS_PER_SPAN
        })
}
