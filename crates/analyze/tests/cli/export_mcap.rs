//! `export --format mcap`, read back with the mcap crate's own reader:
//! a message per cycle, per span and per background-thread span, in time
//! order per channel, with the `looptime` metadata naming the timebase.
//! (tests/mcap_check.py checks the same files with the Python reader and
//! jsonschema, and the wall-clock mapping on fresh and recovered evidence.)

use super::*;
use std::collections::BTreeMap;

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn spans(cycles: &[Value]) -> usize {
    cycles
        .iter()
        .map(|c| c["spans"].as_array().unwrap().len())
        .sum()
}

#[test]
fn every_cycle_and_span_is_a_message_in_time_order() {
    let ep = fixture("v2/serve-episode");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("e.mcap");
    let r = analyze(&[
        "export",
        ep.to_str().unwrap(),
        "--format",
        "mcap",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The fixture predates the wall-clock anchor: host-monotonic times, and
    // the output says so.
    assert!(r.stderr.contains("host-monotonic ns"), "{}", r.stderr);
    let bytes = std::fs::read(&out).unwrap();
    let mut by_topic: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        assert_eq!(m.channel.message_encoding, "json");
        let schema = m.channel.schema.as_ref().unwrap();
        assert_eq!(schema.encoding, "jsonschema");
        let _: Value = serde_json::from_slice(&m.data).unwrap();
        by_topic
            .entry(m.channel.topic.clone())
            .or_default()
            .push(m.log_time);
    }
    let control = lines(&ep.join("control_timing.jsonl"));
    assert_eq!(by_topic["/looptime/cycle"].len(), control.len());
    assert_eq!(by_topic["/looptime/span"].len(), spans(&control));
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(ep.join("control_timing.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let threads = header["threads"].as_array().unwrap();
    assert!(!threads.is_empty());
    for t in threads {
        let name = t.as_str().unwrap();
        let tc = lines(&ep.join(format!("control_timing.{name}.jsonl")));
        assert_eq!(
            by_topic[&format!("/looptime/thread/{name}/span")].len(),
            spans(&tc),
            "{name}"
        );
    }
    // The events: a phase change for each segment start, at least one.
    assert!(!by_topic["/looptime/event"].is_empty());
    for (topic, times) in &by_topic {
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{topic}");
    }
    // Host-monotonic: the first cycle's time is its start_ns.
    assert_eq!(
        by_topic["/looptime/cycle"][0],
        control[0]["start_ns"].as_u64().unwrap()
    );
}

#[test]
fn a_bad_episode_is_an_error_and_leaves_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x.mcap");
    let r = analyze(&[
        "export",
        tmp.path().join("nope").to_str().unwrap(),
        "--format",
        "mcap",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("nope"), "{}", r.stderr);
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn into_is_refused_where_it_cannot_mean_anything() {
    let ep = fixture("v2/serve-episode");
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("robot.mcap");
    let out = tmp.path().join("merged.mcap");
    // A recording made with the crate's writer: one JSON channel.
    {
        let mut w = mcap::Writer::new(std::io::BufWriter::new(
            std::fs::File::create(&rec).unwrap(),
        ))
        .unwrap();
        let s = w.add_schema("robot.Status", "jsonschema", b"{}").unwrap();
        let c = w
            .add_channel(s, "/robot/status", "json", &BTreeMap::new())
            .unwrap();
        let h = mcap::records::MessageHeader {
            channel_id: c,
            sequence: 0,
            log_time: 1,
            publish_time: 1,
        };
        w.write_to_known_channel(&h, b"{}").unwrap();
        w.finish().unwrap();
    }
    let run = |extra: &[&str]| {
        let mut a = vec![
            "export",
            ep.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        analyze(&a)
    };
    let rec_s = rec.to_str().unwrap();
    for (extra, needle) in [
        (
            vec!["--format", "chrome", "--into", rec_s],
            "needs --format mcap",
        ),
        (
            vec!["--format", "mcap", "--force"],
            "--force only applies to --into",
        ),
        // The v2 fixture predates the wall-clock anchor.
        (
            vec!["--format", "mcap", "--into", rec_s],
            "no wall-clock anchor",
        ),
    ] {
        let r = run(&extra);
        assert_eq!(r.code, 2, "{extra:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{extra:?}: {}", r.stderr);
        assert!(!out.exists());
    }
}

/// The v1 serve fixture with a wall-clock anchor added to its header, so
/// that it can be merged into a recording: its first cycle starts at
/// 2026-01-01T00:00:00Z (1_767_225_600 s), the others follow on host time.
fn anchored_episode() -> (tempfile::TempDir, u64, u64) {
    let tmp = tempfile::tempdir().unwrap();
    copy_episode(&fixture("v1/serve-episode"), tmp.path());
    let p = tmp.path().join("control_timing.jsonl");
    let text = std::fs::read_to_string(&p).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut h: Value = serde_json::from_str(&lines[0]).unwrap();
    let starts: Vec<u64> = lines[1..]
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["start_ns"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let (first, last) = (starts[0], *starts.last().unwrap());
    let wall0 = 1_767_225_600_000_000_000u64;
    h["wall_clock"] = serde_json::json!({
        "start": {"realtime_ns": wall0, "monotonic_ns": first, "uncertainty_ns": 50}
    });
    lines[0] = h.to_string();
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    (tmp, wall0, wall0 + (last - first))
}

/// A recording over [t0, t1] made with the crate's writer: header profile
/// `profile`, a CDR-like channel at 100 Hz, an attachment and a metadata
/// record; `options` changes how it is written.
fn recording(
    path: &Path,
    t0: u64,
    t1: u64,
    profile: &str,
    options: impl FnOnce(mcap::WriteOptions) -> mcap::WriteOptions,
) -> u64 {
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = options(mcap::WriteOptions::new().profile(profile))
        .create(f)
        .unwrap();
    let s = w
        .add_schema(
            "sensor_msgs/msg/JointState",
            "ros2msg",
            b"float64[] position",
        )
        .unwrap();
    let c = w
        .add_channel(s, "/joint_states", "cdr", &BTreeMap::new())
        .unwrap();
    let mut n = 0u64;
    let mut t = t0 - 50_000_000;
    while t <= t1 + 50_000_000 {
        let h = mcap::records::MessageHeader {
            channel_id: c,
            sequence: n as u32,
            log_time: t,
            publish_time: t,
        };
        let data: Vec<u8> = (0..64)
            .map(|i| (n as u8).wrapping_mul(31).wrapping_add(i))
            .collect();
        w.write_to_known_channel(&h, &data).unwrap();
        n += 1;
        t += 10_000_000;
    }
    w.attach(&mcap::Attachment {
        log_time: t0,
        create_time: t0,
        name: "calibration.yaml".into(),
        media_type: "application/yaml".into(),
        data: std::borrow::Cow::Borrowed(b"camera: {fx: 600}\n"),
    })
    .unwrap();
    w.write_metadata(&mcap::records::Metadata {
        name: "robot".into(),
        metadata: BTreeMap::from([("serial".to_string(), "R-17".to_string())]),
    })
    .unwrap();
    w.finish().unwrap();
    n
}

/// The header's profile and each chunk's compression.
fn header_and_chunks(path: &Path) -> (String, Vec<String>) {
    let bytes = std::fs::read(path).unwrap();
    let mut profile = None;
    let mut chunks = Vec::new();
    for r in mcap::read::LinearReader::new(&bytes).unwrap() {
        match r.unwrap() {
            mcap::records::Record::Header(h) => profile = Some(h.profile),
            mcap::records::Record::Chunk { header, .. } => chunks.push(header.compression),
            _ => {}
        }
    }
    (profile.unwrap(), chunks)
}

fn into(ep: &Path, rec: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut a = vec![
        "export",
        ep.to_str().unwrap(),
        "--format",
        "mcap",
        "--into",
        rec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    analyze(&a)
}

/// A rosbag2 recording's header (profile `ros2`) is kept; the output's
/// chunks are zstd by default, as asked otherwise; every message, the
/// attachment and the metadata come back; the plain export is compressed
/// too.
#[test]
fn into_keeps_the_profile_and_compresses_its_output() {
    let (ep, t0, t1) = anchored_episode();
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("bag.mcap");
    let n = recording(&rec, t0, t1, "ros2", |o| o);
    for (extra, want) in [
        (&[][..], "zstd"),
        (&["--compression", "lz4"][..], "lz4"),
        (&["--compression", "none"][..], ""),
    ] {
        let out = tmp.path().join(format!("merged-{want}.mcap"));
        let r = into(ep.path(), &rec, &out, extra);
        assert_eq!(r.code, 0, "{extra:?}: {}", r.stderr);
        let (profile, chunks) = header_and_chunks(&out);
        assert_eq!(profile, "ros2", "the recording's profile is kept");
        assert!(
            !chunks.is_empty() && chunks.iter().all(|c| c == want),
            "{extra:?}: {chunks:?}"
        );
        let bytes = std::fs::read(&out).unwrap();
        let copied = mcap::MessageStream::new(&bytes)
            .unwrap()
            .filter(|m| m.as_ref().unwrap().channel.topic == "/joint_states")
            .count() as u64;
        assert_eq!(copied, n);
        let s = mcap::Summary::read(&bytes).unwrap().unwrap();
        assert_eq!(s.attachment_indexes.len(), 1);
        let names: Vec<&str> = s.metadata_indexes.iter().map(|m| m.name.as_str()).collect();
        assert!(
            names.contains(&"robot") && names.contains(&"looptime"),
            "{names:?}"
        );
    }
    let plain = tmp.path().join("plain.mcap");
    let r = analyze(&[
        "export",
        ep.path().to_str().unwrap(),
        "--format",
        "mcap",
        "--out",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (profile, chunks) = header_and_chunks(&plain);
    assert_eq!(profile, "");
    assert!(
        !chunks.is_empty() && chunks.iter().all(|c| c == "zstd"),
        "{chunks:?}"
    );
    let r = analyze(&[
        "export",
        ep.path().to_str().unwrap(),
        "--format",
        "chrome",
        "--compression",
        "lz4",
        "--out",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--compression applies to MCAP output"),
        "{}",
        r.stderr
    );
}

/// Merging into a file that already holds looptime channels is refused,
/// naming them and the episode of the first merge, with the usage exit
/// code; nothing is written.
#[test]
fn a_second_merge_is_refused_naming_the_first_episode() {
    let (ep, t0, t1) = anchored_episode();
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("bag.mcap");
    recording(&rec, t0, t1, "ros2", |o| o);
    let once = tmp.path().join("once.mcap");
    let r = into(ep.path(), &rec, &once, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let twice = tmp.path().join("twice.mcap");
    let r = into(ep.path(), &once, &twice, &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    for needle in [
        "already holds looptime channels (/looptime/cycle, /looptime/event, /looptime/span)",
        &format!("from episode {}", ep.path().display()),
        "merge each episode into the original recording instead",
    ] {
        assert!(r.stderr.contains(needle), "{needle}: {}", r.stderr);
    }
    assert!(!twice.exists());
}

/// What --into cannot copy unchanged is refused by name, never dropped: a
/// recording without a summary, one with messages outside chunks, and one
/// holding a record of a kind the MCAP crate does not model.
#[test]
fn recordings_it_cannot_copy_whole_are_refused_by_name() {
    let (ep, t0, t1) = anchored_episode();
    let tmp = tempfile::tempdir().unwrap();
    let no_summary = tmp.path().join("no_summary.mcap");
    recording(&no_summary, t0, t1, "", |o| {
        o.emit_summary_records(false)
            .emit_summary_offsets(false)
            .emit_statistics(false)
            .emit_chunk_indexes(false)
            .emit_attachment_indexes(false)
            .emit_metadata_indexes(false)
            .repeat_channels(false)
            .repeat_schemas(false)
    });
    let unchunked = tmp.path().join("unchunked.mcap");
    recording(&unchunked, t0, t1, "", |o| o.use_chunks(false));
    // A custom record (opcode 0x80, allowed by the spec for private use)
    // right after the header record (magic, then opcode, length, body).
    let custom = tmp.path().join("custom.mcap");
    let good = tmp.path().join("good.mcap");
    recording(&good, t0, t1, "", |o| o);
    let bytes = std::fs::read(&good).unwrap();
    let header_len = u64::from_le_bytes(bytes[9..17].try_into().unwrap()) as usize;
    let at = 8 + 9 + header_len;
    let mut edited = bytes[..at].to_vec();
    edited.extend_from_slice(&[0x80]);
    edited.extend_from_slice(&3u64.to_le_bytes());
    edited.extend_from_slice(b"abc");
    edited.extend_from_slice(&bytes[at..]);
    std::fs::write(&custom, edited).unwrap();
    for (rec, needle) in [
        (&no_summary, "it has no summary section"),
        (&unchunked, "it holds a message outside any chunk"),
        (
            &custom,
            &format!("it holds a record of opcode 0x80 at byte {at}")[..],
        ),
    ] {
        let out = tmp.path().join("out.mcap");
        let r = into(ep.path(), rec, &out, &[]);
        assert_eq!(r.code, 2, "{}: {}", rec.display(), r.stderr);
        assert!(r.stderr.contains(needle), "{needle}: {}", r.stderr);
        assert!(!out.exists());
    }
}
