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
//! | sample slots | `capacity × max_samples` sample records (version 3: data age; 0 without a declared source) |
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
//! This module (with its submodules) and `sys` are the only ones of the
//! crate allowed `unsafe`.
//!
//! Submodules, each importing only this one and the crate's lower modules:
//! `heap` (the heap slab) and `shm` (the shared-memory ring file), the two
//! storages the recorder writes, `reader` (a ring opened read-only: `watch`, and `recover`'s
//! input) and `recover` (a dead writer's ring handed to the writer as
//! records). This file holds what they share: the layout, the live
//! counters, the ring states and the process checks.

#![allow(unsafe_code)]

pub mod owner;

use std::fs::{self, File};
use std::io;
use std::mem::size_of;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{CaptureError, Result};
use crate::format::{ClockAnchor, Header, WallClockAnchor};
use crate::slot::{CycleSlot, SampleSlot, SpanSlot};

mod heap;
mod reader;
mod recover;
mod shm;

pub(crate) use heap::{try_boxed, Slab};
pub use reader::{RingRead, RingReader};
pub use recover::{recover, recover_into, Recovered};
pub(crate) use shm::RingFile;

/// The first eight bytes of every ring file.
pub const RING_MAGIC: [u8; 8] = *b"LOOPTRNG";
/// Version of the ring file layout this build writes and reads (3: the
/// sample slots of data age; 4: an input's read time and its kernel
/// arrival's conversion bound in each cycle slot).
pub const RING_LAYOUT_VERSION: u32 = 4;
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
    /// The start wall-clock anchor (all 0: none; rings of builds before it
    /// was added read as zeros).
    pub(crate) wall_real: AtomicU64,
    pub(crate) wall_mono: AtomicU64,
    pub(crate) wall_unc: AtomicU64,
    /// The newest clock anchor the recorder took while it ran (every
    /// 100 ms of recording; its generation odd while it is written, 0:
    /// none, as in rings of earlier builds), so that a reader of a live or
    /// dead writer's ring fits the TSC's slope between two anchors instead
    /// of quanta's calibration. In the block's padding: the layout stays.
    pub(crate) late_seq: AtomicU64,
    pub(crate) late_raw: AtomicU64,
    pub(crate) late_mono: AtomicU64,
    pub(crate) late_unc: AtomicU64,
}

// The live counters keep their two cache lines: fields are added only in
// the padding, so rings of earlier builds read the same.
const _: () = assert!(std::mem::size_of::<Live>() == 128);

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
            wall_real: AtomicU64::new(0),
            wall_mono: AtomicU64::new(0),
            wall_unc: AtomicU64::new(0),
            late_seq: AtomicU64::new(0),
            late_raw: AtomicU64::new(0),
            late_mono: AtomicU64::new(0),
            late_unc: AtomicU64::new(0),
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

    /// Publish the newest anchor (one writer: the recorder's thread).
    pub(crate) fn set_late_anchor(&self, a: ClockAnchor) {
        let g = self.late_seq.load(Ordering::Relaxed);
        self.late_seq.store(g | 1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        self.late_raw.store(a.raw, Ordering::Relaxed);
        self.late_mono.store(a.monotonic_ns, Ordering::Relaxed);
        self.late_unc.store(a.uncertainty_ns, Ordering::Relaxed);
        self.late_seq.store((g | 1) + 1, Ordering::Release);
    }

    /// The newest anchor, read whole (None: none was taken, or the writer
    /// kept rewriting it).
    pub(crate) fn late_anchor(&self) -> Option<ClockAnchor> {
        for _ in 0..1000 {
            let g = self.late_seq.load(Ordering::Acquire);
            if g == 0 {
                return None;
            }
            if g % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let a = ClockAnchor {
                raw: self.late_raw.load(Ordering::Relaxed),
                monotonic_ns: self.late_mono.load(Ordering::Relaxed),
                uncertainty_ns: self.late_unc.load(Ordering::Relaxed),
            };
            std::sync::atomic::fence(Ordering::Acquire);
            if self.late_seq.load(Ordering::Relaxed) == g {
                return Some(a);
            }
        }
        None
    }

    pub(crate) fn set_wall(&self, a: Option<WallClockAnchor>) {
        let a = a.unwrap_or(WallClockAnchor {
            realtime_ns: 0,
            monotonic_ns: 0,
            uncertainty_ns: 0,
        });
        self.wall_real.store(a.realtime_ns, Ordering::Relaxed);
        self.wall_mono.store(a.monotonic_ns, Ordering::Relaxed);
        self.wall_unc.store(a.uncertainty_ns, Ordering::Release);
    }

    pub(crate) fn wall(&self) -> Option<WallClockAnchor> {
        let unc = self.wall_unc.load(Ordering::Acquire);
        let a = WallClockAnchor {
            realtime_ns: self.wall_real.load(Ordering::Relaxed),
            monotonic_ns: self.wall_mono.load(Ordering::Relaxed),
            uncertainty_ns: unc,
        };
        (a.realtime_ns != 0).then_some(a)
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
    sample_slot_bytes: u32,
    _pad: u32,
    max_samples: u64,
    samples_offset: u64,
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
    pub(crate) max_samples: usize,
    pub(crate) n_values: usize,
    meta_offset: usize,
    meta_capacity: usize,
    cycles_offset: usize,
    spans_offset: usize,
    samples_offset: usize,
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
        max_samples: usize,
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
        let samples_offset = align_up(spans_offset.checked_add(spans_bytes)?, 64)?;
        let samples_bytes = capacity
            .checked_mul(max_samples)?
            .checked_mul(size_of::<SampleSlot>())?;
        let values_offset = align_up(samples_offset.checked_add(samples_bytes)?, 64)?;
        let values_bytes = capacity.checked_mul(n_values)?.checked_mul(8)?;
        let file_bytes = align_up(values_offset.checked_add(values_bytes)?, PAGE)?;
        Some(Layout {
            capacity,
            max_spans,
            max_samples,
            n_values,
            meta_offset,
            meta_capacity,
            cycles_offset,
            spans_offset,
            samples_offset,
            values_offset,
            file_bytes,
        })
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

/// The caller's own ring files in `dir` (named `looptime-*.ring`, regular
/// files owned by the caller's uid), oldest first by modification time. A
/// missing directory gives an empty list. Everyone else's rings are left
/// out: [`owner::list`] lists them, from `lstat` alone.
pub fn list_rings(dir: &Path) -> Vec<PathBuf> {
    owner::list(dir).mine.into_iter().map(|r| r.path).collect()
}

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

/// Whether process `pid` runs and, when `start_ticks` is not 0, is the
/// one that started then (a later process that reuses the pid is not):
/// what tells a ring, or a `running` manifest, of a live writer from a dead
/// one's.
pub fn process_alive(pid: u32, start_ticks: u64) -> bool {
    pid_alive(pid, start_ticks)
}

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), `None` when it cannot be read.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    proc_start_ticks(pid)
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

fn bad_ring(path: &Path, message: impl Into<String>) -> CaptureError {
    CaptureError::BadRing {
        path: path.to_path_buf(),
        message: message.into(),
    }
}
