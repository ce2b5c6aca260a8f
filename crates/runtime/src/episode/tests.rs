//! The episode layout's tests: names, links, the manifest's order.
use super::*;

#[test]
fn a_value_without_a_json_form_is_an_error_naming_the_file_never_empty_text() {
    // A map whose keys are not strings has no JSON form: the manifest or
    // session file would have been written empty.
    let mut m = BTreeMap::new();
    m.insert((1u8, 2u8), 3u8);
    let err = pretty_json(&m, Path::new("/x/manifest.json")).unwrap_err();
    let text = looptime_capture::error_chain(&err);
    assert!(text.contains("/x/manifest.json"), "{text}");
    assert!(text.contains("key must be a string"), "{text}");
    // A plain value: its JSON and a newline.
    assert_eq!(
        pretty_json(&[1, 2], Path::new("f")).unwrap(),
        b"[\n  1,\n  2\n]\n"
    );
}

#[test]
fn hashes_are_sha256_as_sha256sum_prints_them() {
    // FIPS 180-2's test vector for "abc".
    assert_eq!(
        sha256(b"abc"),
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert!(SOURCE_HASH.starts_with("sha256:") && SOURCE_HASH.len() == 7 + 64);
}

#[test]
fn utc_stamps_have_the_documented_shapes() {
    let r = utc_rfc3339();
    assert_eq!(r.len(), 20, "{r}");
    assert!(r.ends_with('Z') && r.as_bytes()[10] == b'T', "{r}");
    let s = utc_stamp();
    assert_eq!(s.len(), 16, "{s}");
    assert!(s.chars().enumerate().all(|(i, c)| match i {
        8 => c == 'T',
        15 => c == 'Z',
        _ => c.is_ascii_digit(),
    }));
}

/// The top-level keys of a manifest's text, in the order written.
fn keys_in_order(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("  \"")) // two spaces: top level
        .map(|l| l[..l.find('"').unwrap()].to_string())
        .collect()
}

/// A running manifest (a serve one without `program`, with `dma`; a
/// program's with `program`) written into `dir`, as text.
fn written_manifest(
    dir: &std::path::Path,
    program: Option<ProgramRecord<'_>>,
    dma: Option<bool>,
) -> String {
    let host = crate::rt::host_facts();
    let rt = RealtimeObtained::default();
    let cfg = serde_json::json!({"run": {"rtf": 1.0}});
    let m = Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        producer: "looptime-test 0",
        created_utc: utc_rfc3339(),
        session: "session-x".into(),
        rollout: "rollout-000",
        status: ManifestStatus::Running,
        writer: WriterProcess::while_running(ManifestStatus::Running),
        config_source: "test",
        config: &cfg,
        config_hash: sha256(cfg.to_string().as_bytes()),
        source_hash: SOURCE_HASH,
        program,
        host: &host,
        realtime: dma.map(|_| &rt),
        cpu_dma_latency_held: dma,
        recorder: None,
        schedule: ScheduleFacts {
            nominal_period_ns: 10_000_000,
            effective_period_ns: 10_000_000,
            spin_margin_ns: 200_000,
            spin_margin_auto: false,
            overrun_policy: "rebase",
            clock: "host_monotonic",
        },
        counts: Counts {
            cycles: 0,
            planned_cycles: 0,
            overruns: 0,
            skipped: 0,
            stats_dropped: 0,
            events_dropped: 0,
        },
        files: manifest_files(&["events.jsonl"], true),
    };
    m.write(dir).unwrap();
    std::fs::read_to_string(dir.join("manifest.json")).unwrap()
}

#[test]
fn one_manifest_type_writes_serve_and_program_manifests_in_their_documented_order() {
    let tmp = tempfile::tempdir().unwrap();
    let hashes = BTreeMap::from([("p.py".to_string(), sha256(b"x"))]);
    let manifest = |program, dma| written_manifest(tmp.path(), program, dma);
    // serve's manifest: no `program`, a `cpu_dma_latency_held` after
    // `realtime` (the order docs/runtime.md's table gives).
    let serve = manifest(None, Some(false));
    let common = [
        "schema_version",
        "producer",
        "created_utc",
        "session",
        "rollout",
        "status",
        "writer",
        "config_source",
        "config",
        "config_hash",
        "source_hash",
    ];
    let tail = ["recorder", "schedule", "counts", "files"];
    let mut want: Vec<&str> = common.to_vec();
    want.extend(["host", "realtime", "cpu_dma_latency_held"]);
    want.extend(tail);
    assert_eq!(keys_in_order(&serve), want, "{serve}");
    // An embedded program's: `program` before `host`, `realtime` null
    // when the program did not set it up, no DMA hold.
    let program = manifest(
        Some(ProgramRecord {
            path: "p.py",
            source_hashes: &hashes,
        }),
        None,
    );
    let mut want: Vec<&str> = common.to_vec();
    want.extend(["program", "host", "realtime"]);
    want.extend(tail);
    assert_eq!(keys_in_order(&program), want, "{program}");
    assert!(program.contains("\"realtime\": null"), "{program}");
    // The files list: manifest.json, the extras and the evidence, sorted.
    let v: serde_json::Value = serde_json::from_str(&serve).unwrap();
    assert_eq!(
        v["files"],
        serde_json::json!([
            "control_timing.jsonl",
            "control_timing_summary.json",
            "events.jsonl",
            "manifest.json"
        ])
    );
    assert_eq!(manifest_files(&[], false), vec!["manifest.json"]);
}
