//! The wall-clock anchors: a (CLOCK_REALTIME, CLOCK_MONOTONIC) pair taken
//! at build and at finish, written to the header; the start pair also
//! reaches a reader of the ring (and so recovered evidence), without an end.

use std::time::{SystemTime, UNIX_EPOCH};

use looptime_capture::ring::RingReader;
use looptime_capture::{CaptureStatus, EvidenceReader, RecorderBuilder, Release, RingStorage};

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn the_header_carries_a_start_and_an_end_pair() {
    let before = unix_ns();
    let mut b = RecorderBuilder::new();
    b.measure_overhead(false).ring(RingStorage::Heap);
    let p = b.phase("running").unwrap();
    let mut rec = b.build().unwrap();
    for _ in 0..3 {
        rec.begin_cycle(p, Release::NONE);
        rec.end_cycle();
    }
    let dir = tempfile::tempdir().unwrap();
    let r = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let after = unix_ns();
    let (h, cycles) = EvidenceReader::open(&r.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    let w = h.wall_clock.expect("a wall-clock anchor");
    let end = w.end.expect("an end anchor at finish");
    // Both wall-clock readings lie between the test's own readings of the
    // same clock, the start before the end, on both clocks.
    assert!(before <= w.start.realtime_ns && w.start.realtime_ns <= end.realtime_ns);
    assert!(end.realtime_ns <= after);
    assert!(w.start.monotonic_ns <= end.monotonic_ns);
    // The cycles (host monotonic) lie between the two anchors' monotonic
    // readings, so their wall-clock times lie between the two wall-clock
    // readings, up to the pairs' uncertainty.
    let slack = w.start.uncertainty_ns + end.uncertainty_ns;
    for c in &cycles {
        let wall = w.start.wall_ns(c.start_ns);
        assert!(wall + slack >= w.start.realtime_ns && wall <= end.realtime_ns + slack);
    }
    // The uncertainty is half the gap between two monotonic reads around
    // the wall-clock read: positive, and far below a second on any host.
    assert!(w.start.uncertainty_ns >= 1 && w.start.uncertainty_ns < 1_000_000_000);
}

#[test]
fn a_ring_reader_gets_the_start_pair_and_no_end() {
    let shm = tempfile::tempdir().unwrap();
    let mut b = RecorderBuilder::new();
    b.measure_overhead(false)
        .ring(RingStorage::SharedMemory(shm.path().to_path_buf()));
    let p = b.phase("running").unwrap();
    let mut rec = b.build().unwrap();
    rec.begin_cycle(p, Release::NONE);
    rec.end_cycle();
    let read = RingReader::open(rec.ring_path().unwrap())
        .unwrap()
        .read(None)
        .unwrap();
    let w = read
        .header
        .wall_clock
        .expect("the start pair from the ring");
    assert!(w.end.is_none());
    assert!(
        w.start.realtime_ns > 1_600_000_000_000_000_000,
        "after 2020"
    );
    // Reset takes a new start pair, and the ring holds it.
    std::thread::sleep(std::time::Duration::from_millis(2));
    rec.reset();
    let again = RingReader::open(rec.ring_path().unwrap())
        .unwrap()
        .read(None)
        .unwrap()
        .header
        .wall_clock
        .unwrap();
    assert!(again.start.realtime_ns > w.start.realtime_ns);
}
