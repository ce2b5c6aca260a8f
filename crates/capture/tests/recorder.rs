//! Behaviour of the recorder and its files: ring semantics, round trip,
//! atomic finish, nesting, overflow accounting.

use std::fs;
use std::path::Path;

use looptime_capture::format::{read_summary, CaptureStatus};
use looptime_capture::{
    CaptureError, CpuTimeMode, EvidenceReader, RecorderBuilder, Release, ValueKind, CYCLES_FILE,
    MAX_SPAN_DEPTH, SUMMARY_FILE,
};
use proptest::prelude::*;

/// A heap-ring recorder without the overhead self-measurement: some of
/// these tests make `finish` fail on purpose, and a shared-memory ring
/// would then (rightly) stay in /dev/shm for `recover`.
fn quiet_builder() -> RecorderBuilder {
    let mut b = RecorderBuilder::new();
    b.measure_overhead(false)
        .ring(looptime_capture::RingStorage::Heap);
    b
}

fn lines_of(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn round_trip_preserves_everything_recorded() {
    let mut b = quiet_builder();
    b.max_cycles(8)
        .max_spans_per_cycle(3)
        .cpu_time_mode(CpuTimeMode::Spans)
        .nominal_period_ns(10_000_000)
        .metadata("run", "unit-test");
    let warmup = b.phase("warmup").unwrap();
    let running = b.phase("running").unwrap();
    let cam = b.stage("camera_read").unwrap();
    let decode = b.stage_with_cpu_time("decode", false).unwrap();
    let mode = b.attr_key("mode").unwrap();
    let inline = b.attr_value(mode, "inline").unwrap();
    let background = b.attr_value(mode, "background").unwrap();
    let seq = b.value("robot_seq", ValueKind::Int, "count").unwrap();
    let rate = b.value("success_rate", ValueKind::Float, "ratio").unwrap();
    let mut rec = b.build().unwrap();

    for i in 0..5u64 {
        rec.begin_wait();
        rec.end_wait();
        let phase = if i < 2 { warmup } else { running };
        rec.begin_cycle(
            phase,
            Release::at(1_000 + i * 10_000_000)
                .with_overdue(i == 3)
                .with_skipped((i == 4) as u32)
                .with_spin(Some(200_000 + i), (i % 2 == 0).then_some(i * 10)),
        );
        rec.set_int(seq, 100 + i as i64);
        if i % 2 == 0 {
            rec.set_float(rate, 0.5);
        }
        {
            let mut c = rec.span(cam);
            c.set(if i % 2 == 0 { inline } else { background });
            let _d = c.span(decode);
        }
        rec.end_cycle();
    }
    let dir = tempfile::tempdir().unwrap();
    let report = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let (header, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();

    assert_eq!(header.phases, ["warmup", "running"]);
    assert_eq!(header.stages.len(), 2);
    assert!(header.stages[0].cpu_time && !header.stages[1].cpu_time);
    assert_eq!(header.thread_cpu_mode, Some(CpuTimeMode::Spans));
    assert_eq!(header.nominal_period_ns, Some(10_000_000));
    assert_eq!(header.metadata["run"], "unit-test");
    assert_eq!(cycles.len(), 5);
    for (i, c) in cycles.iter().enumerate() {
        let i = i as u64;
        assert_eq!(c.cycle, i);
        assert_eq!(c.phase, if i < 2 { "warmup" } else { "running" });
        assert_eq!(c.target_ns, Some(1_000 + i * 10_000_000));
        assert_eq!(c.overdue, i == 3);
        assert_eq!(c.skipped, (i == 4) as u32);
        assert_eq!(c.spin_margin_ns, Some(200_000 + i));
        assert_eq!(c.spin_ns, (i % 2 == 0).then_some(i * 10));
        assert_eq!(c.values["robot_seq"].as_i64(), Some(100 + i as i64));
        assert_eq!(
            c.values.get("success_rate").and_then(|v| v.as_f64()),
            (i % 2 == 0).then_some(0.5)
        );
        let (sleep, wake, end) = (
            c.sleep_start_ns.unwrap(),
            c.wake_ns.unwrap(),
            c.end_ns.unwrap(),
        );
        assert!(sleep <= wake && wake <= c.start_ns && c.start_ns <= end);
        assert_eq!(c.spans.len(), 2);
        let (outer, inner) = (&c.spans[0], &c.spans[1]);
        assert_eq!(
            (outer.stage.as_str(), outer.depth, outer.parent),
            ("camera_read", 0, None)
        );
        assert_eq!(
            (inner.stage.as_str(), inner.depth, inner.parent),
            ("decode", 1, Some(0))
        );
        assert_eq!(
            outer.attrs["mode"],
            if i % 2 == 0 { "inline" } else { "background" }
        );
        assert!(outer.cpu_ns.is_some() && inner.cpu_ns.is_none());
        assert_eq!(c.cpu_ns, None, "spans mode: cycles carry no CPU time");
        // The child lies inside its parent, which lies inside the cycle.
        assert!(outer.start_ns >= c.start_ns && outer.start_ns + outer.wall_ns <= end);
        assert!(inner.start_ns >= outer.start_ns);
        assert!(inner.start_ns + inner.wall_ns <= outer.start_ns + outer.wall_ns);
    }

    // Lossless: re-serialising what was read gives the file byte for byte.
    let lines = lines_of(&report.cycles_path);
    assert_eq!(serde_json::to_string(&header).unwrap(), lines[0]);
    for (c, line) in cycles.iter().zip(&lines[1..]) {
        assert_eq!(&serde_json::to_string(c).unwrap(), line);
    }
    let summary = read_summary(&report.summary_path).unwrap();
    assert_eq!(summary, report.summary);
    assert_eq!(summary.status, CaptureStatus::Complete);
    // Two segments: warmup (cycles 0-1) and running (2-4).
    assert_eq!(summary.segments.len(), 2);
    assert_eq!(
        (
            summary.segments[0].first_cycle,
            summary.segments[0].last_cycle
        ),
        (0, 1)
    );
    assert_eq!(summary.segments[1].cycles, 3);
    assert_eq!(summary.segments[1].overdue, 1);
    assert_eq!(summary.segments[1].skipped, 1);
}

#[test]
fn open_cycle_at_abort_is_written_without_end() {
    let mut b = quiet_builder();
    let s = b.stage("work").unwrap();
    let mut rec = b.build().unwrap();
    let p = rec.default_phase();
    rec.begin_cycle(p, Release::NONE);
    rec.end_cycle();
    rec.begin_cycle(p, Release::NONE);
    let guard = rec.span(s);
    std::mem::forget(guard); // the span is still open when we abort
    let dir = tempfile::tempdir().unwrap();
    let report = rec.finish(dir.path(), CaptureStatus::Aborted).unwrap();
    let (_, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(cycles.len(), 2);
    assert!(cycles[0].end_ns.is_some());
    assert_eq!(cycles[1].end_ns, None);
    assert!(cycles[1].spans[0].closed_by_cycle_end);
    assert_eq!(report.summary.status, CaptureStatus::Aborted);
    // Only the ended cycle has a work duration.
    assert_eq!(report.summary.work.as_ref().unwrap().count, 1);
}

#[test]
fn depth_beyond_the_limit_is_counted_not_stored() {
    fn nest(g: &mut looptime_capture::Recorder, stage: looptime_capture::StageId, left: usize) {
        if left == 0 {
            return;
        }
        let mut s = g.span(stage);
        nest(&mut s, stage, left - 1);
    }
    let mut b = quiet_builder();
    b.max_spans_per_cycle(64);
    let s = b.stage("s").unwrap();
    let mut rec = b.build().unwrap();
    rec.begin_cycle(rec.default_phase(), Release::NONE);
    nest(&mut rec, s, MAX_SPAN_DEPTH + 4);
    rec.end_cycle();
    assert_eq!(rec.spans_dropped(), 4);
    let dir = tempfile::tempdir().unwrap();
    let report = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let (_, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(cycles[0].spans.len(), MAX_SPAN_DEPTH);
    assert_eq!(cycles[0].spans_dropped, 4);
    assert_eq!(
        cycles[0].spans.last().unwrap().depth as usize,
        MAX_SPAN_DEPTH - 1
    );
}

#[test]
fn finishing_into_a_vanished_directory_fails_cleanly() {
    let rec = quiet_builder().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("episode");
    fs::create_dir(&gone).unwrap();
    fs::remove_dir(&gone).unwrap();
    let err = rec.finish(&gone, CaptureStatus::Complete).unwrap_err();
    assert!(
        matches!(err, CaptureError::MissingDirectory { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("episode"));
    assert!(!gone.exists());
}

#[test]
fn finishing_into_an_unwritable_directory_is_a_write_error() {
    // /proc refuses new files even for root, so this holds on CI as root.
    let rec = quiet_builder().build().unwrap();
    let err = rec
        .finish(Path::new("/proc/self"), CaptureStatus::Complete)
        .unwrap_err();
    assert!(matches!(err, CaptureError::Write { .. }), "{err}");
}

#[test]
fn a_jsonl_that_cannot_be_put_in_place_leaves_no_temp_and_no_summary() {
    // The JSONL's temporary is written in full, then its rename onto a
    // non-empty directory of the same name fails: the temporary must be
    // removed, and the summary (written after the JSONL) must not appear.
    let mut rec = quiet_builder().build().unwrap();
    rec.begin_cycle(rec.default_phase(), Release::NONE);
    rec.end_cycle();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(CYCLES_FILE).join("occupied")).unwrap();
    let err = rec.finish(dir.path(), CaptureStatus::Complete).unwrap_err();
    assert!(matches!(err, CaptureError::Write { .. }), "{err}");
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        [CYCLES_FILE.to_string()],
        "only the blocking directory"
    );
    assert!(!dir.path().join(SUMMARY_FILE).exists());
}

#[test]
fn failed_summary_write_leaves_no_summary_and_no_temp_file() {
    let mut b = quiet_builder();
    b.max_cycles(4);
    let mut rec = b.build().unwrap();
    rec.begin_cycle(rec.default_phase(), Release::NONE);
    rec.end_cycle();
    let dir = tempfile::tempdir().unwrap();
    // A non-empty directory where the summary should go: rename must fail.
    fs::create_dir_all(dir.path().join(SUMMARY_FILE).join("blocker")).unwrap();
    let err = rec.finish(dir.path(), CaptureStatus::Complete).unwrap_err();
    assert!(matches!(err, CaptureError::Write { .. }), "{err}");
    assert!(
        dir.path().join(SUMMARY_FILE).is_dir(),
        "summary slot untouched"
    );
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[test]
fn builder_rejects_bad_capacities_and_names() {
    let mut b = quiet_builder();
    b.max_cycles(0);
    assert!(matches!(
        b.build(),
        Err(CaptureError::InvalidOption {
            option: "max_cycles",
            ..
        })
    ));
    let mut b = quiet_builder();
    b.max_spans_per_cycle(5000);
    assert!(b.build().is_err());
    let mut b = quiet_builder();
    b.stage("x").unwrap();
    assert!(matches!(
        b.stage("x"),
        Err(CaptureError::Registration { .. })
    ));
    assert!(b.phase("").is_err());
}

#[test]
fn overhead_is_measured_and_written() {
    let rec = RecorderBuilder::new().build().unwrap();
    let o = rec.overhead();
    assert!(o.samples > 0);
    assert!(o.clock_read_ns > 0.0 && o.span_wall_ns > 0.0 && o.thread_cpu_read_ns > 0.0);
    // A span with CPU time does two more clock_gettime calls than one without.
    assert!(o.span_cpu_ns > o.span_wall_ns);
    // And the header the finish writes carries exactly these figures.
    let want = serde_json::to_value(o.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let (header, _) = EvidenceReader::open(dir.path().join(CYCLES_FILE))
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(serde_json::to_value(&header.overhead).unwrap(), want);
}

#[derive(Debug, Clone)]
struct Script {
    capacity: usize,
    max_spans: usize,
    /// For each cycle, how many top-level spans and whether each has a child.
    cycles: Vec<Vec<bool>>,
}

fn script() -> impl Strategy<Value = Script> {
    (
        1usize..12,
        1usize..5,
        prop::collection::vec(prop::collection::vec(any::<bool>(), 0..5), 0..40),
    )
        .prop_map(|(capacity, max_spans, cycles)| Script {
            capacity,
            max_spans,
            cycles,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn ring_keeps_exactly_the_latest_cycles(s in script()) {
        let mut b = quiet_builder();
        b.max_cycles(s.capacity).max_spans_per_cycle(s.max_spans).thread_cpu_time(false);
        let stage = b.stage("s").unwrap();
        let child = b.stage("c").unwrap();
        let mut rec = b.build().unwrap();
        let mut expected_dropped_spans = Vec::new();
        for spans in &s.cycles {
            rec.begin_cycle(rec.default_phase(), Release::NONE);
            let mut opened = 0usize;
            for &has_child in spans {
                let mut g = g_span(&mut rec, stage);
                opened += 1;
                if has_child {
                    let _c = g.span(child);
                    opened += 1;
                }
            }
            rec.end_cycle();
            expected_dropped_spans.push(opened.saturating_sub(s.max_spans));
        }
        let total = s.cycles.len();
        let retained = total.min(s.capacity);
        let dir = tempfile::tempdir().unwrap();
        let report = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
        let (_, cycles) = EvidenceReader::open(&report.cycles_path).unwrap().read_all().unwrap();

        prop_assert_eq!(cycles.len(), retained);
        let first = (total - retained) as u64;
        for (k, c) in cycles.iter().enumerate() {
            let i = first as usize + k;
            prop_assert_eq!(c.cycle, i as u64);
            prop_assert_eq!(c.spans_dropped as usize, expected_dropped_spans[i]);
            let opened: usize = s.cycles[i].iter().map(|&h| 1 + h as usize).sum();
            prop_assert_eq!(c.spans.len(), opened.min(s.max_spans));
        }
        let cap = &report.summary.capture;
        prop_assert_eq!(cap.total_cycles, total as u64);
        prop_assert_eq!(cap.retained_cycles, retained as u64);
        prop_assert_eq!(cap.dropped_cycles, (total - retained) as u64);
        prop_assert_eq!(cap.spans_dropped, expected_dropped_spans.iter().sum::<usize>() as u64);
        prop_assert_eq!(
            cap.spans_dropped_retained,
            expected_dropped_spans[total - retained..].iter().sum::<usize>() as u64
        );
    }
}

fn g_span(
    rec: &mut looptime_capture::Recorder,
    s: looptime_capture::StageId,
) -> looptime_capture::SpanGuard<'_> {
    rec.span(s)
}

#[test]
fn span_tokens_nest_and_stale_tokens_are_ignored() {
    let mut b = quiet_builder();
    let outer = b.stage("outer").unwrap();
    let inner = b.stage("inner").unwrap();
    let key = b.attr_key("source").unwrap();
    let cam = b.attr_value(key, "camera").unwrap();
    let mut rec = b.build().unwrap();
    let p = rec.default_phase();

    rec.begin_cycle(p, Release::NONE);
    let o = rec.begin_span(outer);
    let i = rec.begin_span(inner);
    assert_eq!(rec.open_spans(), 2);
    rec.set_span_attr(i, cam);
    rec.end_span(i);
    rec.end_span(i); // twice: the second is ignored
    rec.end_span(o);
    assert_eq!(rec.open_spans(), 0);
    rec.end_cycle();

    // A token of the previous cycle names slot 0 of a different
    // generation: ending it must not close this cycle's first span.
    rec.begin_cycle(p, Release::NONE);
    let fresh = rec.begin_span(outer);
    rec.end_span(o);
    assert_eq!(rec.open_spans(), 1);
    rec.end_span(fresh);
    // Arbitrary bits and the NONE token are harmless.
    rec.end_span(looptime_capture::SpanToken::from_bits(u64::MAX));
    rec.end_span(looptime_capture::SpanToken::NONE);
    assert!(!looptime_capture::SpanToken::NONE.is_recorded());
    rec.end_cycle();

    let dir = tempfile::tempdir().unwrap();
    let report = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let (_, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(cycles[0].spans.len(), 2);
    assert_eq!(cycles[0].spans[1].parent, Some(0));
    assert_eq!(cycles[0].spans[1].attrs["source"], "camera");
    assert!(!cycles[0].spans[1].closed_by_cycle_end);
    assert!(!cycles[0].spans[0].closed_by_cycle_end);
    // The stale end left the second cycle's span open until its own end.
    assert_eq!(cycles[1].spans.len(), 1);
    assert!(!cycles[1].spans[0].closed_by_cycle_end);
}

/// A float value set to NaN or ±inf has no JSON number, so its record
/// leaves it out; the summary counts it (`capture.values_dropped`), and so
/// does a reader of the live ring (what `recover` writes from).
#[test]
fn values_that_are_not_finite_are_counted_not_dropped_silently() {
    let shm = tempfile::tempdir().unwrap();
    let mut b = RecorderBuilder::new();
    b.ring(looptime_capture::RingStorage::SharedMemory(
        shm.path().to_path_buf(),
    ));
    let running = b.phase("running").unwrap();
    let rate = b.value("rate", ValueKind::Float, "ratio").unwrap();
    let seq = b.value("seq", ValueKind::Int, "count").unwrap();
    let mut rec = b.build().unwrap();
    // Cycles 1, 3 and 5 set NaN, +inf and −inf: three dropped; the others
    // set i / 10; every cycle sets the integer.
    let bad = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    for i in 0..7u64 {
        rec.begin_cycle(running, Release::NONE);
        rec.set_int(seq, i as i64);
        rec.set_float(
            rate,
            if i % 2 == 1 {
                bad[(i / 2) as usize]
            } else {
                i as f64 / 10.0
            },
        );
        rec.end_cycle();
    }
    let live = looptime_capture::ring::RingReader::open(rec.ring_path().unwrap())
        .unwrap()
        .read(None)
        .unwrap();
    assert_eq!(live.values_dropped, 3);
    let dir = tempfile::tempdir().unwrap();
    let report = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    assert_eq!(report.summary.capture.values_dropped, Some(3));
    let (_, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    for (i, c) in cycles.iter().enumerate() {
        assert_eq!(c.values["seq"].as_i64(), Some(i as i64));
        assert_eq!(
            c.values.get("rate").and_then(|v| v.as_f64()),
            (i % 2 == 0).then_some(i as f64 / 10.0),
            "cycle {i}"
        );
    }
    // The saved summary carries the count too.
    let saved = read_summary(&report.summary_path).unwrap();
    assert_eq!(saved.capture.values_dropped, Some(3));
}

#[test]
fn a_budget_or_tolerance_is_declared_up_to_ten_seconds_and_the_sentinel_means_undeclared() {
    use looptime_capture::{MAX_DECLARED_NS, UNDECLARED_NS};
    // The sentinel: undeclared (before, 2^64 − 1 ns went to the header
    // and a healthy loop read every cycle over its budget).
    let mut b = quiet_builder();
    b.compute_budget_ns(UNDECLARED_NS)
        .deadline_tolerance_ns(UNDECLARED_NS);
    let h = header_of(b);
    assert!(
        h.get("compute_budget_ns").is_none_or(|v| v.is_null()),
        "{h}"
    );
    assert!(
        h.get("deadline_tolerance_ns").is_none_or(|v| v.is_null()),
        "{h}"
    );
    // 10 s exactly: declared.
    let mut b = quiet_builder();
    b.compute_budget_ns(MAX_DECLARED_NS);
    assert_eq!(header_of(b)["compute_budget_ns"], MAX_DECLARED_NS);
    // Anything else above it: the build fails, naming the field.
    for (budget, tolerance, name) in [
        (MAX_DECLARED_NS + 1, None, "compute_budget_ns"),
        (0, Some(1u64 << 63), "deadline_tolerance_ns"),
    ] {
        let mut b = quiet_builder();
        b.compute_budget_ns(budget);
        if let Some(t) = tolerance {
            b.deadline_tolerance_ns(t);
        }
        match b.build() {
            Err(CaptureError::InvalidOption { option, .. }) => assert_eq!(option, name),
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// The header a recorder of `b` writes (finished with no cycle).
fn header_of(b: RecorderBuilder) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let rec = b.build().unwrap();
    rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let first = lines_of(&dir.path().join("control_timing.jsonl"))[0].clone();
    serde_json::from_str(&first).unwrap()
}
