//! Where the recorder's memory lives, and how another process reads it.
//!
//! A recorder keeps its cycle ring, span slots and value slots either on the
//! heap or in a *ring file*: a shared-memory file (under `/dev/shm` unless
//! configured) that the recorder maps once, when it is built, and that
//! outlives the process. A kill -9, a crash, an OOM kill or a watchdog then
//! leaves the ring behind, and [`recover`] turns it into the normal evidence
//! files. [`RingReader`] also lets `looptime watch` read a running loop's
//! ring read-only.
//!
//! # Layout (version [`RING_LAYOUT_VERSION`])
//!
//! | bytes | what |
//! |---|---|
//! | 0..4096 | fixed header: magic `LOOPTRNG`, layout version, pid and process start time, capacities, slot sizes, region offsets, the clock anchor, then the live counters on their own cache line |
//! | meta region | JSON [`RingMeta`]: the evidence header (names, capacities, clocks) and the episode directory; guarded by a sequence number |
//! | cycle ring | `capacity` fixed-size cycle records |
//! | span slots | `capacity × max_spans` span records |
//! | value slots | `capacity × n_values` 8-byte values |
//!
//! # Torn and in-progress records
//!
//! Every cycle record starts with a sequence number. The recorder stores
//! `2·index + 1` (in progress) before it writes the record's fields, and
//! `2·index + 2` (complete) with release ordering when the cycle ends, after
//! every field of the cycle, its spans and its values. A reader loads the
//! number with acquire ordering, copies the record, and loads it again: a
//! record counts only when both loads read `2·index + 2`. Anything else is
//! in progress (the newest cycle), overwritten while it was read (a live
//! reader lapped by the writer), or torn.
//!
//! # What the control thread pays
//!
//! The file is created, sized with `posix_fallocate` (so a full `/dev/shm`
//! is an error at build time, never a `SIGBUS` in the loop), mapped with
//! `MAP_POPULATE`, every page written once, and locked with `mlock` where
//! the memory-lock limit allows. On the control path the ring file is plain
//! memory: the same stores as the heap ring, plus the two sequence-number
//! stores and one relaxed counter store per cycle. No system call.
//!
//! This module and `sys` are the only ones of the crate allowed `unsafe`.

#![allow(unsafe_code)]

use std::fs::{self, File, OpenOptions};
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{CaptureError, Result};
use crate::format::{CaptureStatus, ClockAnchor, CycleRecord, Header, Recovery};
use crate::slot::{CycleSlot, RawCycle, SpanSlot, TscMap};
use crate::writer::{write_evidence, Counts, FinishReport};

/// The first eight bytes of every ring file.
pub const RING_MAGIC: [u8; 8] = *b"LOOPTRNG";
/// Version of the ring file layout this build writes and reads.
pub const RING_LAYOUT_VERSION: u32 = 1;
/// Where ring files go unless configured: a tmpfs, so the loop never
/// causes disk I/O.
pub const DEFAULT_RING_DIR: &str = "/dev/shm";
/// Ring files are named `looptime-<pid>-<n>.ring`.
pub const RING_PREFIX: &str = "looptime-";
/// See [`RING_PREFIX`].
pub const RING_SUFFIX: &str = ".ring";

const HEADER_BYTES: usize = 4096;
const PAGE: usize = 4096;
const LIVE_OFFSET: usize = 512;
/// Room left in the meta region for a longer episode directory.
const META_SLACK: usize = 8192;

/// Where a recorder keeps its ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RingStorage {
    /// A ring file in [`DEFAULT_RING_DIR`] when it can be made there, else
    /// the heap; [`Recorder::ring_note`](crate::Recorder::ring_note) then
    /// says why. The default.
    Auto,
    /// A ring file in this directory; [`build`](crate::RecorderBuilder::build)
    /// fails when it cannot be made.
    SharedMemory(PathBuf),
    /// Process memory only: nothing survives the process.
    Heap,
}

/// Lifecycle of a ring, as its writer last set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RingState {
    /// The loop is recording (or died while it was).
    Recording,
    /// `finish` was writing the evidence files (or died while it was).
    Finishing,
    /// `finish` wrote the evidence files; the ring holds nothing new.
    Finished,
    /// A value this build does not know (a damaged file).
    Unknown,
}

impl RingState {
    fn from_u32(v: u32) -> RingState {
        match v {
            1 => RingState::Recording,
            2 => RingState::Finishing,
            3 => RingState::Finished,
            _ => RingState::Unknown,
        }
    }

    fn as_u32(self) -> u32 {
        match self {
            RingState::Recording => 1,
            RingState::Finishing => 2,
            RingState::Finished => 3,
            RingState::Unknown => 0,
        }
    }

    /// The name used in the summary's `recovery.ring_state`.
    pub fn as_str(self) -> &'static str {
        match self {
            RingState::Recording => "recording",
            RingState::Finishing => "finishing",
            RingState::Finished => "finished",
            RingState::Unknown => "unknown",
        }
    }
}

/// The counters the recorder publishes while it runs, on their own cache
/// line of the header (or of a heap block for a heap ring).
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub(crate) total: AtomicU64,
    pub(crate) spans_dropped: AtomicU64,
    pub(crate) spans_outside_cycle: AtomicU64,
    pub(crate) state: AtomicU32,
    pub(crate) meta_seq: AtomicU32,
    pub(crate) meta_len: AtomicU64,
    pub(crate) anchor_raw: AtomicU64,
    pub(crate) anchor_mono: AtomicU64,
    pub(crate) anchor_unc: AtomicU64,
    /// The recording thread's OS id (0 until its first cycle; 0 in rings of
    /// builds before it was added, whose header area reads as zeros).
    pub(crate) tid: AtomicU64,
}

impl Live {
    const fn new() -> Live {
        Live {
            total: AtomicU64::new(0),
            spans_dropped: AtomicU64::new(0),
            spans_outside_cycle: AtomicU64::new(0),
            state: AtomicU32::new(0),
            meta_seq: AtomicU32::new(0),
            meta_len: AtomicU64::new(0),
            anchor_raw: AtomicU64::new(0),
            anchor_mono: AtomicU64::new(0),
            anchor_unc: AtomicU64::new(0),
            tid: AtomicU64::new(0),
        }
    }

    pub(crate) fn set_state(&self, s: RingState) {
        self.state.store(s.as_u32(), Ordering::Release);
    }

    pub(crate) fn set_anchor(&self, a: ClockAnchor) {
        self.anchor_raw.store(a.raw, Ordering::Relaxed);
        self.anchor_mono.store(a.monotonic_ns, Ordering::Relaxed);
        self.anchor_unc.store(a.uncertainty_ns, Ordering::Release);
    }
}

/// Where a recorder publishes its [`Live`] counters: its own heap block,
/// the header of its ring file, or (disabled recorders) a shared static
/// nobody reads.
pub(crate) struct LiveRef {
    ptr: NonNull<Live>,
    _owned: Option<Box<Live>>,
}

static DISABLED_LIVE: Live = Live::new();

// SAFETY: `Live` is atomics only; the pointer targets the owned box, a
// mapping that outlives the recorder, or a static.
unsafe impl Send for LiveRef {}
// SAFETY: as above; only `&Live` is handed out.
unsafe impl Sync for LiveRef {}

impl LiveRef {
    pub(crate) fn heap() -> LiveRef {
        let b = Box::new(Live::new());
        LiveRef {
            ptr: NonNull::from(&*b),
            _owned: Some(b),
        }
    }

    pub(crate) fn disabled() -> LiveRef {
        LiveRef {
            ptr: NonNull::from(&DISABLED_LIVE),
            _owned: None,
        }
    }

    #[inline]
    pub(crate) fn get(&self) -> &Live {
        // SAFETY: see the type's docs; the target outlives `self`.
        unsafe { self.ptr.as_ref() }
    }
}

impl std::fmt::Debug for LiveRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveRef")
            .field("total", &self.get().total)
            .finish()
    }
}

/// The fixed part of the header. Plain integers only, so any bytes read
/// back are a valid value (the reader then checks them).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Fixed {
    magic: [u8; 8],
    layout_version: u32,
    header_bytes: u32,
    pid: u32,
    cycle_slot_bytes: u32,
    span_slot_bytes: u32,
    n_values: u32,
    max_spans: u64,
    capacity: u64,
    proc_start_ticks: u64,
    created_unix_ns: u64,
    ns_per_tick_bits: u64,
    meta_offset: u64,
    meta_capacity: u64,
    cycles_offset: u64,
    spans_offset: u64,
    values_offset: u64,
    file_bytes: u64,
}

/// What the meta region holds, as JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RingMeta {
    /// The evidence header the files will carry (its `tsc` is rebuilt from
    /// the fixed header's anchor when read).
    pub header: Header,
    /// The episode directory the evidence belongs in, when the owner set one.
    pub episode_dir: Option<PathBuf>,
}

/// Byte offsets and sizes of one ring file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub(crate) capacity: usize,
    pub(crate) max_spans: usize,
    pub(crate) n_values: usize,
    meta_offset: usize,
    meta_capacity: usize,
    cycles_offset: usize,
    spans_offset: usize,
    values_offset: usize,
    pub(crate) file_bytes: usize,
}

fn align_up(n: usize, to: usize) -> Option<usize> {
    n.checked_add(to - 1).map(|v| v / to * to)
}

impl Layout {
    pub(crate) fn new(
        capacity: usize,
        max_spans: usize,
        n_values: usize,
        meta_len: usize,
    ) -> Option<Layout> {
        let meta_offset = HEADER_BYTES;
        let meta_capacity = align_up(meta_len.checked_add(META_SLACK)?, PAGE)?;
        let cycles_offset = meta_offset.checked_add(meta_capacity)?;
        let cycles_bytes = capacity.checked_mul(size_of::<CycleSlot>())?;
        let spans_offset = align_up(cycles_offset.checked_add(cycles_bytes)?, 64)?;
        let spans_bytes = capacity
            .checked_mul(max_spans)?
            .checked_mul(size_of::<SpanSlot>())?;
        let values_offset = align_up(spans_offset.checked_add(spans_bytes)?, 64)?;
        let values_bytes = capacity.checked_mul(n_values)?.checked_mul(8)?;
        let file_bytes = align_up(values_offset.checked_add(values_bytes)?, PAGE)?;
        Some(Layout {
            capacity,
            max_spans,
            n_values,
            meta_offset,
            meta_capacity,
            cycles_offset,
            spans_offset,
            values_offset,
            file_bytes,
        })
    }
}

/// A block of `len` values of `T`, on the heap or inside a mapping. Derefs
/// to a slice, so the recorder indexes both the same way.
pub(crate) struct Slab<T> {
    ptr: NonNull<T>,
    len: usize,
    heap: bool,
}

// SAFETY: a Slab owns its elements exclusively (heap) or is the only writer
// of its part of a mapping that lives as long as the recorder holding both;
// it hands out `&[T]` / `&mut [T]` only through `&self` / `&mut self`.
unsafe impl<T: Send> Send for Slab<T> {}
// SAFETY: as above; shared access gives only `&[T]`.
unsafe impl<T: Sync> Sync for Slab<T> {}

impl<T> Slab<T> {
    pub(crate) fn from_box(b: Box<[T]>) -> Slab<T> {
        let len = b.len();
        let raw = Box::into_raw(b) as *mut T;
        Slab {
            // SAFETY: Box::into_raw never returns null.
            ptr: unsafe { NonNull::new_unchecked(raw) },
            len,
            heap: true,
        }
    }

    /// # Safety
    /// `ptr` must point at `len` initialised, properly aligned `T`s that stay
    /// valid (and are written by nobody else) for the slab's whole life.
    unsafe fn mapped(ptr: *mut T, len: usize) -> Slab<T> {
        Slab {
            // SAFETY: the caller passes a pointer into a live mapping.
            ptr: unsafe { NonNull::new_unchecked(ptr) },
            len,
            heap: false,
        }
    }
}

impl<T> std::ops::Deref for Slab<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: see the constructors.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for Slab<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: see the constructors; `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for Slab<T> {
    fn drop(&mut self) {
        if self.heap {
            let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
            // SAFETY: built by `from_box` from exactly this slice.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

impl<T> std::fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Slab({} x {} bytes, {})",
            self.len,
            size_of::<T>(),
            if self.heap { "heap" } else { "ring file" }
        )
    }
}

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
    pub(crate) values: Slab<u64>,
    pub(crate) live: LiveRef,
}

static RING_COUNTER: AtomicU64 = AtomicU64::new(0);

fn ring_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(io::Error) -> CaptureError + 'a {
    move |source| CaptureError::Ring {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Field 22 of `/proc/<pid>/stat`: the process start time in clock ticks
/// since boot, which tells a live writer from a later process that reuses
/// its pid. `None` when unreadable.
pub(crate) fn proc_start_ticks(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, ticks)| ticks)
}

/// The state letter (field 3) and start time (field 22) of
/// `/proc/<pid>/stat`.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

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
        let (cycles, spans, values) = unsafe {
            (
                Slab::mapped(base.add(l.cycles_offset) as *mut CycleSlot, l.capacity),
                Slab::mapped(
                    base.add(l.spans_offset) as *mut SpanSlot,
                    l.capacity * l.max_spans,
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
}

impl Drop for RingFile {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no slab pointing into it is
        // used after this (they are dropped first).
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
        if !std::thread::panicking() && !self.keep.load(Ordering::Relaxed) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Map `len` bytes of `file` shared: read-write and prefaulted
/// (`MAP_POPULATE`) for the writer, read-only for a reader.
fn map_file(path: &Path, file: &File, len: usize, write: bool) -> Result<NonNull<u8>> {
    let (prot, flags) = if write {
        (
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
        )
    } else {
        (libc::PROT_READ, libc::MAP_SHARED)
    };
    // SAFETY: mapping an open file; the kernel picks the address, and the
    // result is checked before any use.
    let base = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, file.as_raw_fd(), 0) };
    if base == libc::MAP_FAILED {
        return Err(CaptureError::Ring {
            path: path.to_path_buf(),
            what: "map",
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: a successful mmap never returns null.
    Ok(unsafe { NonNull::new_unchecked(base as *mut u8) })
}

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
    /// The evidence header (its `tsc` from the ring's anchor and quanta's
    /// slope; there is no end anchor).
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
}

fn bad_ring(path: &Path, message: impl Into<String>) -> CaptureError {
    CaptureError::BadRing {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

impl RingReader {
    /// Map `path` read-only and check its header.
    ///
    /// # Errors
    /// [`CaptureError::Ring`] when it cannot be opened or mapped, and
    /// [`CaptureError::BadRing`] when it is not a ring file of this layout.
    pub fn open(path: &Path) -> Result<RingReader> {
        let file = File::open(path).map_err(ring_err(path, "open"))?;
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
        {
            return Err(bad_ring(
                p,
                "slot sizes differ from this build's: use the looptime build that wrote it",
            ));
        }
        let layout = Layout::new(
            f.capacity as usize,
            f.max_spans as usize,
            f.n_values as usize,
            (f.meta_capacity as usize).saturating_sub(META_SLACK),
        );
        let fits = layout.is_some_and(|l| {
            l.cycles_offset as u64 == f.cycles_offset
                && l.spans_offset as u64 == f.spans_offset
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
            return serde_json::from_slice(&bytes).map_err(|e| {
                bad_ring(
                    &self.path,
                    format!("its meta region is not valid JSON ({e})"),
                )
            });
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
        };
        let mut spans = Vec::with_capacity(self.fixed.max_spans as usize);
        let mut values = vec![0u64; self.fixed.n_values as usize];
        for k in lo..total {
            match self.read_slot(k, &mut spans, &mut values) {
                SlotRead::Complete(slot) => {
                    if !slot_consistent(&slot, &spans, &out.header) {
                        out.damaged += 1;
                        continue;
                    }
                    let raw = RawCycle::new(&slot, &spans, &values);
                    out.cycles.push(raw.to_record(&out.header, &map));
                }
                SlotRead::InProgress if k + 1 == total => out.in_progress += 1,
                SlotRead::InProgress | SlotRead::Mismatch => out.torn += 1,
            }
        }
        Ok(out)
    }

    fn read_slot(&self, k: u64, spans: &mut Vec<SpanSlot>, values: &mut [u64]) -> SlotRead {
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

fn slot_consistent(slot: &CycleSlot, spans: &[SpanSlot], header: &Header) -> bool {
    (slot.phase as usize) < header.phases.len()
        && slot.n_spans as usize == spans.len()
        && spans.iter().enumerate().all(|(i, s)| {
            (s.stage as usize) < header.stages.len()
                && (s.parent == u16::MAX || (s.parent as usize) < i)
        })
}

/// Whether `pid` runs and (when `start_ticks` is known) started then.
fn pid_alive(pid: u32, start_ticks: u64) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    let exists = rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    match proc_stat(pid) {
        // A zombie has died; only its exit status waits to be collected.
        Some(('Z' | 'X', _)) => false,
        Some((_, now)) => start_ticks == 0 || start_ticks == now,
        None => true,
    }
}

/// Ring files in `dir` (named `looptime-*.ring`), oldest first by name.
/// A missing directory gives an empty list.
pub fn list_rings(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut rings: Vec<(u64, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            if !(name.starts_with(RING_PREFIX) && name.ends_with(RING_SUFFIX)) {
                return None;
            }
            let modified = e
                .metadata()
                .ok()?
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_nanos() as u64;
            Some((modified, e.path()))
        })
        .collect();
    rings.sort();
    rings.into_iter().map(|(_, p)| p).collect()
}

/// What [`recover`] did with one ring.
#[derive(Debug)]
pub enum Recovered {
    /// The evidence files were written from the ring, which was removed.
    Written {
        /// The ring file (now removed).
        ring: PathBuf,
        /// The episode directory written into.
        dir: PathBuf,
        /// The files and the summary.
        report: Box<FinishReport>,
    },
    /// The writer had finished: its files were already written, so the
    /// ring was only removed.
    AlreadyFinished {
        /// The ring file (now removed).
        ring: PathBuf,
        /// The episode directory named in the ring, if any.
        dir: Option<PathBuf>,
    },
}

/// Turn the ring at `path`, left by a process that died, into the normal
/// evidence files in the episode directory its header names (created if
/// missing), with status `recovered`, then remove it.
///
/// # Errors
/// [`CaptureError::RingInUse`] when the writer still runs (watch it
/// instead), [`CaptureError::BadRing`] for a damaged ring or one that names
/// no episode directory, and the write errors of
/// [`Recorder::finish`](crate::Recorder::finish). The ring is kept on any
/// error.
pub fn recover(path: &Path) -> Result<Recovered> {
    let reader = RingReader::open(path)?;
    if reader.writer_alive() {
        return Err(CaptureError::RingInUse {
            path: path.to_path_buf(),
            pid: reader.pid(),
        });
    }
    let state = reader.state();
    let meta = reader.meta()?;
    if state == RingState::Finished {
        drop(reader);
        fs::remove_file(path).map_err(ring_err(path, "remove"))?;
        return Ok(Recovered::AlreadyFinished {
            ring: path.to_path_buf(),
            dir: meta.episode_dir,
        });
    }
    let Some(dir) = meta.episode_dir.clone() else {
        return Err(bad_ring(path, "it names no episode directory (its recorder was built without one); nothing to write into"));
    };
    fs::create_dir_all(&dir).map_err(|source| CaptureError::Write {
        path: dir.clone(),
        source,
    })?;
    let read = reader.read(None)?;
    let last = read.cycles.last();
    let recovery = Recovery {
        ring_file: path.display().to_string(),
        writer_pid: reader.pid(),
        ring_state: state.as_str().to_string(),
        cycles_recovered: read.cycles.len() as u64,
        in_progress_records: read.in_progress,
        torn_records: read.torn + read.damaged,
        last_complete_cycle: last.map(|c| c.cycle),
        last_complete_end_ns: last.and_then(|c| c.end_ns),
    };
    let counts = Counts {
        total_cycles: read.total_cycles,
        spans_dropped: read.spans_dropped,
        spans_outside_cycle: read.spans_outside_cycle,
    };
    let report = write_evidence(
        &dir,
        &read.header,
        read.cycles.into_iter(),
        CaptureStatus::Recovered,
        counts,
        Some(recovery),
        Vec::new(),
    )?;
    drop(reader);
    fs::remove_file(path).map_err(ring_err(path, "remove"))?;
    Ok(Recovered::Written {
        ring: path.to_path_buf(),
        dir,
        report: Box::new(report),
    })
}
