//! Committed evidence of every schema version must stay readable.

use std::path::Path;

use looptime_capture::format::{read_summary, CaptureStatus};
use looptime_capture::EvidenceReader;

fn fixture(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

#[test]
fn v1_serve_episode_reads_back() {
    let dir = fixture("v1/serve-episode");
    let (header, cycles) = EvidenceReader::open(dir.join("control_timing.jsonl"))
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(header.schema_version, 1);
    // 0.2 s warmup + 0.5 s running at 100 Hz.
    assert_eq!(cycles.len(), 70);
    assert_eq!(cycles[0].phase, "warmup");
    assert_eq!(cycles[69].phase, "running");
    assert!(cycles.windows(2).all(|w| w[1].cycle == w[0].cycle + 1));
    let summary = read_summary(dir.join("control_timing_summary.json")).unwrap();
    assert_eq!(summary.status, CaptureStatus::Complete);
    assert_eq!(summary.capture.retained_cycles, 70);
    assert_eq!(summary.segments.len(), 2);
    // The recorder's stage table covers every stage seen in the spans.
    for c in &cycles {
        for s in &c.spans {
            assert!(
                header.stages.iter().any(|h| h.name == s.stage),
                "{}",
                s.stage
            );
        }
    }
}

#[test]
fn v2_serve_episode_reads_back_with_its_threads() {
    // `looptime serve --config configs/camera_background.toml
    // --control-timing --warmup 0.2 --duration 0.5`: the control thread and
    // three background threads, each in its own pair of files.
    let dir = fixture("v2/serve-episode");
    let (header, cycles) = EvidenceReader::open(dir.join("control_timing.jsonl"))
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(header.schema_version, 2);
    assert_eq!(cycles.len(), 70);
    assert_eq!(header.thread_name(), "control");
    assert_eq!(
        header.threads,
        ["camera_reader", "viewer_transport", "policy_worker"]
    );
    let summary = read_summary(dir.join("control_timing_summary.json")).unwrap();
    assert_eq!(summary.threads.len(), 3);
    let control_tid = header.thread.as_ref().unwrap().tid;
    for t in &summary.threads {
        let (h, c) = EvidenceReader::open(dir.join(&t.cycles_file))
            .unwrap()
            .read_all()
            .unwrap();
        assert_eq!(h.thread_name(), t.name);
        assert_eq!(c.len() as u64, t.retained_cycles);
        assert!(!c.is_empty(), "{}", t.name);
        assert_ne!(h.thread.as_ref().unwrap().tid, control_tid);
        assert_eq!(h.implicit_cycles, t.name == "policy_worker");
        let s = read_summary(dir.join(&t.summary_file)).unwrap();
        assert_eq!(s.capture.retained_cycles, t.retained_cycles);
    }
}
