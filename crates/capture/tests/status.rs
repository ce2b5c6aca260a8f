//! The live status's timing verdicts against CLOCK_MONOTONIC over a run
//! long enough for a TSC calibration error to show.

use looptime_capture::{clock, RecorderBuilder, Release, RingStorage};

#[test]
fn the_status_measures_lateness_on_the_monotonic_clock_through_the_run() {
    // 60 cycles 20 ms apart (1.2 s), each released 1 ms before the
    // CLOCK_MONOTONIC read that precedes its start: its deadline lag is
    // 1 ms plus the time to the start, so with a tolerance of 0 every
    // cycle is a late start, and the status's "by how much" must lie in
    // [1 ms, 1 ms + the bracket + 20 µs]. Mapped with quanta's calibration
    // alone (20 to 250 ppm off here, from one process to the next) the
    // last cycles were 22 to 300 µs off.
    let mut b = RecorderBuilder::new();
    b.ring(RingStorage::Heap)
        .measure_overhead(false)
        .live_status(true)
        .nominal_period_ns(20_000_000)
        .deadline_tolerance_ns(0);
    let phase = b.phase("running").unwrap();
    let mut rec = b.build().unwrap();
    let status = rec.live_status().unwrap();
    for i in 0..60u64 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let m0 = clock::monotonic_ns();
        rec.begin_cycle(phase, Release::at(m0 - 1_000_000));
        let m1 = clock::monotonic_ns();
        rec.end_cycle();
        let s = status.snapshot().unwrap();
        let miss = s.last_miss.unwrap();
        assert_eq!((s.late_starts, miss.index), (i + 1, i));
        assert!(
            (1_000_000..=1_000_000 + (m1 - m0) + 20_000).contains(&miss.by_ns),
            "cycle {i}: late by {} ns, bracket {} ns",
            miss.by_ns,
            m1 - m0
        );
    }
}
