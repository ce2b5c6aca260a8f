//! A damaged robot recording handed to `--into` must be refused without
//! asking for memory it announces but does not hold. The `mcap_into` fuzz
//! target found a 1 KB recording whose Metadata record's name claimed
//! 2.6 GB: the MCAP crate allocates a string's announced length before
//! reading it, so the merge asked for 2.6 GB (an abort where memory is
//! capped). This test binary counts the largest allocation it makes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Cursor;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use looptime_analyze::export::mcap::Compression;
use looptime_analyze::export::mcap_into::write_into;
use looptime_analyze::{analyze, load_episode, LoadOptions};

struct Largest;
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: p came from System.alloc with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LARGEST.fetch_max(n, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Largest = Largest;

/// One record: opcode, length, body.
fn record(out: &mut Vec<u8>, op: u8, body: &[u8]) {
    out.push(op);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
}

fn string(out: &mut Vec<u8>, s: &[u8], claimed: u32) {
    out.extend_from_slice(&claimed.to_le_bytes());
    out.extend_from_slice(s);
}

#[test]
fn a_string_longer_than_its_record_is_refused_without_allocating_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/serve-episode");
    let mut ev = load_episode(&dir, LoadOptions::default()).unwrap();
    ev.header.wall_clock = Some(looptime_capture::WallClock {
        start: looptime_capture::WallClockAnchor {
            realtime_ns: 1,
            monotonic_ns: 1,
            uncertainty_ns: 0,
        },
        end: None,
    });
    let a = analyze(ev).unwrap();
    // The magic, a good Header (profile "ros2", library "x"), then a
    // Metadata record of 16 bytes whose name announces 0x9B00_0000 bytes
    // (2.6 GB), as in the fuzzer's input; then a Footer.
    let mut bytes = mcap::MAGIC.to_vec();
    let mut header = Vec::new();
    string(&mut header, b"ros2", 4);
    string(&mut header, b"x", 1);
    record(&mut bytes, 0x01, &header);
    let mut meta = Vec::new();
    string(&mut meta, b"samples_dropped", 0x9B00_0000);
    refused_without_allocating(&a, &with_metadata(&bytes, &meta));
    // A good name, then a map whose one value announces 1 GB.
    let mut map = Vec::new();
    string(&mut map, b"k", 1);
    string(&mut map, b"v", 1 << 30);
    let mut meta = Vec::new();
    string(&mut meta, b"robot", 5);
    string(&mut meta, &map, map.len() as u32);
    refused_without_allocating(&a, &with_metadata(&bytes, &meta));
    // The fuzzer's inputs: the first, one whose summary section (read by
    // the crate's summary reader) holds a record announcing 4 GB, and one
    // whose chunk index announces a chunk of 60 TB uncompressed.
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/mcap_into");
    for name in [
        "regression_metadata_string_length",
        "regression_summary_record_length",
        "regression_chunk_uncompressed_size",
    ] {
        refused_without_allocating(&a, &std::fs::read(corpus.join(name)).unwrap());
    }
}

/// `start` (the magic and a Header), then the Metadata body `meta`, then
/// a Footer.
fn with_metadata(start: &[u8], meta: &[u8]) -> Vec<u8> {
    let mut bytes = start.to_vec();
    record(&mut bytes, 0x0C, meta);
    record(&mut bytes, 0x02, &[0u8; 20]);
    bytes.extend_from_slice(mcap::MAGIC);
    bytes
}

/// `bytes` merged: refused, naming the recording as damaged, without a
/// large allocation.
fn refused_without_allocating(a: &looptime_analyze::Analysis, bytes: &[u8]) {
    let before = LARGEST.swap(0, Ordering::Relaxed);
    let err = write_into(
        a,
        Cursor::new(bytes),
        Path::new("damaged.mcap"),
        true,
        Compression::None,
        Cursor::new(Vec::new()),
        Path::new("merged.mcap"),
    )
    .unwrap_err()
    .to_string();
    let largest = LARGEST.load(Ordering::Relaxed);
    // The merge's own buffers are 64 KiB; the analysis before it is done.
    assert!(
        largest < 16 << 20,
        "the refusal asked for {largest} bytes at once (before it: {before}): {err}"
    );
    assert!(err.contains("damaged.mcap"), "{err}");
    assert!(err.contains("damaged"), "{err}");
}
