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
