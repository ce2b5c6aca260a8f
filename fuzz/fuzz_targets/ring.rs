//! A shared-memory ring left by a dead process, damaged anyhow. There are
//! no ring fixtures: each input seeds a small real ring (its first bytes
//! choose how many cycles, spans and samples it holds), then the rest of
//! the input, read as (offset, byte) pairs, is XORed into a copy of its
//! bytes. The copy goes through the ring reader and through recover, into
//! a directory this target gives (never one a fuzzed ring names). What
//! must hold: no panic; the cycles read back come in increasing order;
//! recovered evidence reads back in the evidence reader with as many
//! cycles as the recovery reported.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use looptime_capture::ring::{self, RingReader};
use looptime_capture::{EvidenceReader, RecorderBuilder, Release, RingStorage, SourceSpec};

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
}

/// A ring of `cycles` cycles (capacity 16, so that more wrap) with nested
/// spans, a value and a sample each; its bytes.
fn seed_ring(cycles: u8, input_paced: bool) -> Vec<u8> {
    let shm = dir().path().join("shm");
    std::fs::create_dir_all(&shm).unwrap();
    let mut b = RecorderBuilder::new();
    b.max_cycles(16)
        .max_spans_per_cycle(4)
        .measure_overhead(false)
        .ring(RingStorage::SharedMemory(shm))
        .episode_dir(dir().path().join("named"));
    let running = b.phase("running").unwrap();
    let outer = b.stage("outer").unwrap();
    let inner = b.stage("inner").unwrap();
    let seq = b
        .value("seq", looptime_capture::ValueKind::Int, "count")
        .unwrap();
    let cam = b.source("camera", SourceSpec::default()).unwrap();
    let mut rec = b.build().expect("a small ring");
    for i in 0..cycles as u64 {
        let release = if input_paced && i % 2 == 1 {
            Release::input(i * 1_000_000, Some(i))
        } else {
            Release::at(i * 1_000_000)
        };
        rec.begin_cycle(running, release);
        rec.set_int(seq, i as i64);
        rec.sample(cam, i, i * 1000);
        {
            let mut o = rec.span(outer);
            let _i = o.span(inner);
        }
        rec.end_cycle();
    }
    let path = rec.ring_path().expect("a ring file").to_path_buf();
    let bytes = std::fs::read(&path).expect("read the ring");
    drop(rec);
    let _ = std::fs::remove_file(&path);
    bytes
}

fuzz_target!(|data: &[u8]| {
    let (&cycles, rest) = data.split_first().unwrap_or((&3, &[]));
    let mut bytes = seed_ring(cycles % 40, cycles & 0x80 != 0);
    let len = bytes.len().max(1);
    for pair in rest.chunks_exact(4) {
        let offset = u32::from_le_bytes([pair[0], pair[1], pair[2], 0]) as usize;
        if let Some(b) = bytes.get_mut(offset % len) {
            *b ^= pair[3];
        }
    }
    let path = dir().path().join("fuzzed.ring");
    std::fs::write(&path, &bytes).unwrap();
    if let Ok(reader) = RingReader::open(&path) {
        if let Ok(read) = reader.read(None) {
            let idx: Vec<u64> = read.cycles.iter().map(|c| c.cycle).collect();
            assert!(
                idx.windows(2).all(|w| w[0] < w[1]),
                "cycles in order: {idx:?}"
            );
        }
    }
    let out = dir().path().join("out");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    if let Ok(report) = ring::recover_into(&path, &out) {
        let (_, back) = EvidenceReader::open(&report.cycles_path)
            .and_then(|r| r.read_all())
            .expect("recovered evidence reads back");
        assert_eq!(back.len() as u64, report.summary.capture.retained_cycles);
    }
    assert!(
        !dir().path().join("named").exists(),
        "nothing written where the ring points"
    );
});
