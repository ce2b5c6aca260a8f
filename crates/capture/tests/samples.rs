//! Data age in capture: declared sources in the header, the samples a
//! cycle used or published in its record (with the moment of use read at
//! the call), and every overflow counted: beyond the cycle's slots, outside
//! a cycle, an id of no declared source.

use looptime_capture::{
    CaptureError, CaptureStatus, EvidenceReader, RecorderBuilder, Release, RingStorage,
    SourceClock, SourceSpec,
};

#[test]
fn a_cycle_records_the_samples_it_used_in_call_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = RecorderBuilder::new();
    b.ring(RingStorage::Heap).max_samples_per_cycle(3);
    let running = b.phase("running").unwrap();
    let camera = b
        .source(
            "camera",
            SourceSpec {
                max_age_ns: Some(50_000_000),
                clock: SourceClock::HostMonotonic,
            },
        )
        .unwrap();
    let state = b
        .source(
            "robot_state",
            SourceSpec {
                max_age_ns: None,
                clock: SourceClock::Named("robot_controller".into()),
            },
        )
        .unwrap();
    let mut rec = b.build().unwrap();
    rec.begin_cycle(running, Release::NONE);
    rec.sample(camera, 7, 1_000);
    rec.produced(state, 3, 2_000);
    rec.sample(state, 2, 1_500);
    rec.sample(camera, 8, 3_000); // the 4th into 3 slots: dropped
    rec.end_cycle();
    rec.sample(camera, 9, 4_000); // outside a cycle
    rec.begin_cycle(running, Release::NONE);
    rec.end_cycle();
    assert_eq!((rec.samples_dropped(), rec.samples_outside_cycle()), (1, 1));
    rec.finish(dir.path(), CaptureStatus::Complete).unwrap();

    let (h, cycles) = EvidenceReader::open(dir.path().join("control_timing.jsonl"))
        .unwrap()
        .read_all()
        .unwrap();
    let names: Vec<_> = h
        .sources
        .iter()
        .map(|s| (s.name.as_str(), s.clock.as_str(), s.max_age_ns))
        .collect();
    assert_eq!(
        names,
        [
            ("camera", "host_monotonic", Some(50_000_000)),
            ("robot_state", "robot_controller", None)
        ]
    );
    assert_eq!(h.capacity.max_samples_per_cycle, 3);
    let c = &cycles[0];
    let got: Vec<_> = c
        .samples
        .iter()
        .map(|x| (x.source.as_str(), x.seq, x.stamp_ns, x.produced))
        .collect();
    assert_eq!(
        got,
        [
            ("camera", 7, 1_000, false),
            ("robot_state", 3, 2_000, true),
            ("robot_state", 2, 1_500, false)
        ]
    );
    assert_eq!(c.samples_dropped, 1);
    let end = c.end_ns.unwrap();
    assert!(c
        .samples
        .windows(2)
        .all(|w| c.start_ns <= w[0].at_ns && w[0].at_ns <= w[1].at_ns && w[1].at_ns <= end));
    // A cycle without samples writes neither key.
    assert!(cycles[1].samples.is_empty() && cycles[1].samples_dropped == 0);
    let line = std::fs::read_to_string(dir.path().join("control_timing.jsonl")).unwrap();
    let last = line.lines().last().unwrap();
    assert!(!last.contains("samples"), "{last}");
}

#[test]
fn without_a_source_no_sample_slot_is_taken_and_a_bad_setting_is_refused() {
    let mut b = RecorderBuilder::new();
    b.ring(RingStorage::Heap).max_cycles(1000);
    let without = b.footprint_bytes();
    b.source("camera", SourceSpec::default()).unwrap();
    // 1000 cycles × 8 default slots × 32 bytes.
    assert_eq!(b.footprint_bytes() - without, 1000 * 8 * 32);
    let err = b.source("camera", SourceSpec::default()).unwrap_err();
    assert!(err.to_string().contains("already registered"), "{err}");
    let err = b
        .source(
            "imu",
            SourceSpec {
                max_age_ns: None,
                clock: SourceClock::Named(String::new()),
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("named clock"), "{err}");
    b.max_samples_per_cycle(0);
    match b.build() {
        Err(CaptureError::InvalidOption { option, .. }) => {
            assert_eq!(option, "max_samples_per_cycle")
        }
        other => panic!("expected InvalidOption, got {other:?}"),
    }
}

#[test]
fn an_id_of_another_recorder_beyond_this_ones_sources_is_dropped_and_counted() {
    let mut other = RecorderBuilder::new();
    other.source("a", SourceSpec::default()).unwrap();
    let second = other.source("b", SourceSpec::default()).unwrap();
    let mut b = RecorderBuilder::new();
    b.ring(RingStorage::Heap);
    b.source("only", SourceSpec::default()).unwrap();
    let running = b.phase("running").unwrap();
    let mut rec = b.build().unwrap();
    rec.begin_cycle(running, Release::NONE);
    rec.sample(second, 1, 1);
    rec.end_cycle();
    assert_eq!(rec.samples_dropped(), 1);
}
