//! The shared-memory storage of a recorder's ring: a ring file (under
//! `/dev/shm` unless configured) that the recorder maps once, at build, and
//! that outlives the process (see the layout in [`super`]).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::mem::size_of;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use super::heap::Slab;
use super::*;
use crate::error::{CaptureError, Result};
use crate::format::ClockAnchor;
use crate::slot::{CycleSlot, SampleSlot, SpanSlot};

/// The recorder's view of its ring file: the mapping, its path, and whether
/// it was locked. Unmapped on drop, and the file removed unless the thread
/// is panicking or the last finish failed (then it stays, for [`recover`]).
#[derive(Debug)]
pub(crate) struct RingFile {
    path: PathBuf,
    base: NonNull<u8>,
    len: usize,
    layout: Layout,
    locked: bool,
    keep: std::sync::atomic::AtomicBool,
    /// The file was removed already ([`RingFile::remove_now`]).
    removed: std::sync::atomic::AtomicBool,
}

// SAFETY: the mapping is process-wide memory; the RingFile only unmaps it
// on drop, after the slabs that point into it (field order in Recorder).
unsafe impl Send for RingFile {}
// SAFETY: shared access reads only the path and sizes.
unsafe impl Sync for RingFile {}

/// Parts carved out of a fresh ring file for the recorder.
pub(crate) struct RingParts {
    pub(crate) file: RingFile,
    pub(crate) cycles: Slab<CycleSlot>,
    pub(crate) spans: Slab<SpanSlot>,
    pub(crate) samples: Slab<SampleSlot>,
    pub(crate) values: Slab<u64>,
    pub(crate) live: LiveRef,
}

static RING_COUNTER: AtomicU64 = AtomicU64::new(0);

impl RingFile {
    /// Create, size, map, prefault and (where allowed) lock a ring file in
    /// `dir`, write its header and meta, and carve the recorder's slabs.
    pub(crate) fn create(
        dir: &Path,
        layout: Layout,
        meta: &[u8],
        anchor: ClockAnchor,
        ns_per_tick: f64,
    ) -> Result<RingParts> {
        let pid = std::process::id();
        let n = RING_COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{RING_PREFIX}{pid}-{n}{RING_SUFFIX}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(ring_err(&path, "create"))?;
        match Self::map_new(&path, &file, layout) {
            Ok(ring) => Ok(ring.init(meta, anchor, ns_per_tick)),
            Err(e) => {
                let _ = fs::remove_file(&path);
                Err(e)
            }
        }
    }

    fn map_new(path: &Path, file: &File, layout: Layout) -> Result<RingFile> {
        let len = layout.file_bytes;
        // SAFETY: a valid open descriptor; posix_fallocate only sizes it.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
        if rc != 0 {
            return Err(CaptureError::Ring {
                path: path.to_path_buf(),
                what: "allocate",
                source: io::Error::from_raw_os_error(rc),
            });
        }
        let base = map_file(path, file, len, true)?.as_ptr();
        // Write every page once, so none faults in on the control thread.
        for off in (0..len).step_by(PAGE) {
            // SAFETY: `off < len`, inside the writable mapping.
            unsafe { std::ptr::write_volatile(base.add(off), 0) };
        }
        // SAFETY: locking our own mapping; failure (RLIMIT_MEMLOCK) is fine.
        let locked = unsafe { libc::mlock(base as *const libc::c_void, len) } == 0;
        Ok(RingFile {
            path: path.to_path_buf(),
            // SAFETY: from a successful mmap, so not null.
            base: unsafe { NonNull::new_unchecked(base) },
            len,
            layout,
            locked,
            keep: std::sync::atomic::AtomicBool::new(false),
            removed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn live(&self) -> &Live {
        // SAFETY: LIVE_OFFSET is inside the header page, 64-aligned, and the
        // zeroed bytes there are a valid `Live` (atomics of zero).
        unsafe { &*(self.base.as_ptr().add(LIVE_OFFSET) as *const Live) }
    }

    fn live_ref(&self) -> LiveRef {
        LiveRef {
            // SAFETY: as in `live`; the recorder drops this LiveRef before
            // the RingFile (field order).
            ptr: unsafe {
                NonNull::new_unchecked(self.base.as_ptr().add(LIVE_OFFSET) as *mut Live)
            },
            _owned: None,
        }
    }

    fn init(self, meta: &[u8], anchor: ClockAnchor, ns_per_tick: f64) -> RingParts {
        let l = self.layout;
        let fixed = Fixed {
            magic: [0; 8],
            layout_version: RING_LAYOUT_VERSION,
            header_bytes: HEADER_BYTES as u32,
            pid: std::process::id(),
            cycle_slot_bytes: size_of::<CycleSlot>() as u32,
            span_slot_bytes: size_of::<SpanSlot>() as u32,
            n_values: l.n_values as u32,
            max_spans: l.max_spans as u64,
            capacity: l.capacity as u64,
            proc_start_ticks: proc_start_ticks(std::process::id()).unwrap_or(0),
            created_unix_ns: unix_ns(),
            ns_per_tick_bits: ns_per_tick.to_bits(),
            meta_offset: l.meta_offset as u64,
            meta_capacity: l.meta_capacity as u64,
            cycles_offset: l.cycles_offset as u64,
            spans_offset: l.spans_offset as u64,
            values_offset: l.values_offset as u64,
            file_bytes: l.file_bytes as u64,
            sample_slot_bytes: size_of::<SampleSlot>() as u32,
            _pad: 0,
            max_samples: l.max_samples as u64,
            samples_offset: l.samples_offset as u64,
        };
        let base = self.base.as_ptr();
        // SAFETY: the header page is ours and large enough for `Fixed`.
        unsafe { std::ptr::write(base as *mut Fixed, fixed) };
        let live = self.live_ref();
        live.get().set_anchor(anchor);
        live.get().set_state(RingState::Recording);
        self.write_meta(meta);
        // SAFETY: each region lies inside the mapping (Layout::new) and is
        // aligned for its type; zero bytes are valid slots of each type.
        let (cycles, spans, samples, values) = unsafe {
            (
                Slab::mapped(base.add(l.cycles_offset) as *mut CycleSlot, l.capacity),
                Slab::mapped(
                    base.add(l.spans_offset) as *mut SpanSlot,
                    l.capacity * l.max_spans,
                ),
                Slab::mapped(
                    base.add(l.samples_offset) as *mut SampleSlot,
                    l.capacity * l.max_samples,
                ),
                Slab::mapped(
                    base.add(l.values_offset) as *mut u64,
                    l.capacity * l.n_values,
                ),
            )
        };
        // The magic goes last: a reader that sees it sees a whole header.
        fence(Ordering::Release);
        // SAFETY: the first 8 bytes of the header page.
        unsafe { std::ptr::write_volatile(base as *mut [u8; 8], RING_MAGIC) };
        RingParts {
            file: self,
            cycles,
            spans,
            samples,
            values,
            live,
        }
    }

    /// Replace the meta JSON (seqlock: odd while writing). Returns false
    /// when it does not fit the region.
    pub(crate) fn write_meta(&self, meta: &[u8]) -> bool {
        if meta.len() > self.layout.meta_capacity {
            return false;
        }
        let live = self.live();
        let seq = live.meta_seq.load(Ordering::Relaxed);
        live.meta_seq
            .store(seq.wrapping_add(1) | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        // SAFETY: the meta region is inside the mapping and `meta` fits it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                meta.as_ptr(),
                self.base.as_ptr().add(self.layout.meta_offset),
                meta.len(),
            );
        }
        live.meta_len.store(meta.len() as u64, Ordering::Relaxed);
        live.meta_seq
            .store((seq | 1).wrapping_add(1), Ordering::Release);
        true
    }

    /// The ring file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `mlock` succeeded.
    pub(crate) fn locked(&self) -> bool {
        self.locked
    }

    /// Whether to leave the file behind on drop (its evidence was not
    /// written).
    pub(crate) fn keep_on_drop(&self, keep: bool) {
        self.keep.store(keep, Ordering::Relaxed);
    }

    /// Remove the file now, once its evidence is written: the mapping stays
    /// valid until drop (a removed file's pages live while mapped), and no
    /// ring of a finished recorder lingers in the ring directory while its
    /// owner object lives on (a Python recorder until it is collected).
    pub(crate) fn remove_now(&self) {
        if !self.removed.swap(true, Ordering::AcqRel) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl Drop for RingFile {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no slab pointing into it is
        // used after this (they are dropped first).
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
        if !std::thread::panicking() && !self.keep.load(Ordering::Relaxed) {
            self.remove_now();
        }
    }
}
