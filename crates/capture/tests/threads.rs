//! Several threads recording one episode: a recorder per thread from one
//! registry, the files finish writes, implicit cycles for a thread that
//! only records spans, and the registry's refusals.

use looptime_capture::format::read_summary;
use looptime_capture::{
    CaptureError, CaptureStatus, EvidenceReader, RecorderBuilder, Registry, Release, RingStorage,
};

fn heap() -> RecorderBuilder {
    let mut b = RecorderBuilder::new();
    b.ring(RingStorage::Heap).measure_overhead(false);
    b
}

#[test]
fn three_threads_record_at_once_and_finish_into_one_episode() {
    let mut control = heap();
    let act = control.stage("act").unwrap();
    let mut reg = Registry::new(control);
    let mut stages = Vec::new();
    for name in ["camera_reader", "viewer_transport", "policy_worker"] {
        let mut b = heap();
        stages.push(b.stage("work").unwrap());
        reg.thread(name, b).unwrap();
    }
    let mut set = reg.build().unwrap();
    // Each background thread records 30 cycles of one span while the
    // control thread records 50 cycles.
    let handles: Vec<_> = set
        .threads
        .drain(..)
        .zip(stages)
        .map(|(mut rec, stage)| {
            std::thread::spawn(move || {
                let p = rec.default_phase();
                for _ in 0..30 {
                    rec.begin_cycle(p, Release::NONE);
                    let _s = rec.span(stage);
                    drop(_s);
                    rec.end_cycle();
                }
                rec
            })
        })
        .collect();
    let p = set.control.default_phase();
    for i in 0..50 {
        set.control.begin_cycle(p, Release::at(i * 1_000_000));
        let _s = set.control.span(act);
        drop(_s);
        set.control.end_cycle();
    }
    let threads: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let dir = tempfile::tempdir().unwrap();
    let refs: Vec<_> = threads.iter().collect();
    let report = set
        .control
        .finish_threads(dir.path(), CaptureStatus::Complete, &refs)
        .unwrap();

    let names: Vec<_> = report
        .summary
        .threads
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["camera_reader", "viewer_transport", "policy_worker"]
    );
    assert!(report
        .summary
        .threads
        .iter()
        .all(|t| t.retained_cycles == 30));
    let (header, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(header.schema_version, 2);
    assert_eq!(header.threads, names);
    assert_eq!(cycles.len(), 50);
    let control_tid = header.thread.unwrap().tid.unwrap();
    let mut tids = vec![control_tid];
    for name in names {
        let path = dir.path().join(format!("control_timing.{name}.jsonl"));
        let (h, c) = EvidenceReader::open(&path).unwrap().read_all().unwrap();
        assert_eq!(h.thread_name(), name);
        assert!(h.threads.is_empty());
        assert_eq!(c.len(), 30);
        assert_eq!(c[0].spans[0].stage, "work");
        tids.push(h.thread.unwrap().tid.unwrap());
        let s = read_summary(
            dir.path()
                .join(format!("control_timing_summary.{name}.json")),
        )
        .unwrap();
        assert_eq!(s.capture.retained_cycles, 30);
    }
    tids.sort_unstable();
    tids.dedup();
    assert_eq!(tids.len(), 4, "each thread has its own OS id");
}

#[test]
fn a_thread_without_cycles_gets_one_implicit_cycle_per_top_level_span() {
    let mut b = heap();
    b.implicit_cycles(true);
    let outer = b.stage("request").unwrap();
    let inner = b.stage("decode").unwrap();
    let mut rec = b.build().unwrap();
    for _ in 0..3 {
        let mut o = rec.span(outer);
        let _i = o.span(inner);
    }
    assert!(!rec.in_cycle(), "the cycle ends with its top-level span");
    assert_eq!(rec.spans_outside_cycle(), 0);
    let dir = tempfile::tempdir().unwrap();
    let report = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let (h, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    assert!(h.implicit_cycles);
    assert_eq!(h.phases, ["spans"]);
    assert_eq!(cycles.len(), 3);
    for c in &cycles {
        assert_eq!(c.phase, "spans");
        assert_eq!(c.spans.len(), 2);
        assert_eq!(c.spans[1].parent, Some(0));
        // The cycle holds its top-level span: begun just before it opened,
        // ended just after it closed (one clock read later).
        assert!(c.start_ns <= c.spans[0].start_ns);
        assert!(c.end_ns.unwrap() >= c.spans[0].start_ns + c.spans[0].wall_ns);
    }
}

#[test]
fn the_registry_refuses_bad_and_duplicate_names() {
    let mut reg = Registry::new(heap());
    reg.thread("camera_reader", heap()).unwrap();
    for bad in ["camera_reader", "control", "", "has space", "dot.ted"] {
        let e = reg.thread(bad, heap()).unwrap_err();
        assert!(
            matches!(
                e,
                CaptureError::Registration {
                    table: "thread",
                    ..
                }
            ),
            "{bad}: {e}"
        );
    }
    // A recorder of another registry is refused at finish, and nothing is written.
    let set = reg.build().unwrap();
    let mut other = Registry::new(heap());
    other.thread("stranger", heap()).unwrap();
    let stranger = other.build().unwrap().threads.remove(0);
    let dir = tempfile::tempdir().unwrap();
    let e = set
        .control
        .finish_threads(dir.path(), CaptureStatus::Complete, &[&stranger])
        .unwrap_err();
    assert!(e.to_string().contains("stranger"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
