//! Data age on a hand-built episode whose every figure is derived by hand
//! below: ages at use and at command, staleness, reuse, skipped sequence
//! numbers, a sequence reset, a stamp after its use, a source on another
//! clock, publication (rate, wait to first use, never used) and samples
//! dropped beyond a cycle's slots.

use super::*;
use serde_json::json;

const MS: u64 = 1_000_000;
const P: u64 = 10 * MS;
const T0: u64 = 1_000_000_000_000;

/// The v1 serve fixture's header with three sources: `camera` on the host
/// clock (stale beyond 30 ms), `state` on the robot's own clock.
fn header() -> String {
    let text = std::fs::read_to_string(fixture("v1/serve-episode/control_timing.jsonl")).unwrap();
    let mut h: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    h["capacity"]["max_samples_per_cycle"] = json!(4);
    h["sources"] = json!([
        {"name": "camera", "clock": "host_monotonic", "max_age_ns": 30 * MS},
        {"name": "state", "clock": "robot_controller"}
    ]);
    h.to_string()
}

/// Cycle `i` (running, start `T0 + i·P`, 5 ms of work) with its samples
/// and, unless `i` is 5, a `robot_send_command` span starting 3 ms in.
fn cycle(i: u64, samples: Value, dropped: u32) -> String {
    let start = T0 + i * P;
    let mut spans = vec![];
    if i != 5 {
        spans.push(
            json!({"stage": "robot_send_command", "parent": null, "depth": 0,
            "start_ns": start + 3 * MS, "wall_ns": 100_000, "cpu_ns": null,
            "closed_by_cycle_end": false, "attrs": {}}),
        );
    }
    let mut c = json!({"type": "cycle", "cycle": i, "phase": "running", "start_ns": start,
        "end_ns": start + 5 * MS, "target_ns": start, "sleep_start_ns": start - 5 * MS,
        "wake_ns": start, "overdue": false, "skipped": 0, "spans_dropped": 0, "values": {},
        "spans": spans, "samples": samples});
    if dropped > 0 {
        c["samples_dropped"] = json!(dropped);
    }
    c.to_string()
}

fn used(source: &str, seq: u64, stamp: u64, at: u64) -> Value {
    json!({"source": source, "seq": seq, "stamp_ns": stamp, "at_ns": at})
}

fn published(seq: u64, at: u64) -> Value {
    json!({"source": "camera", "seq": seq, "stamp_ns": at, "at_ns": at, "produced": true})
}

#[test]
fn every_data_age_figure_matches_the_hand_derived_answer() {
    let dir = tempfile::tempdir().unwrap();
    // Camera uses at 1 ms into each cycle (seq, stamp):
    //   0: (1, T0 − 5 ms)           age  6 ms
    //   1: (1, T0 − 5 ms)           age 16 ms, the same seq: reused
    //   2: (3, T0 + 2P − 35 ms)     age 36 ms > 30 ms: stale; seq 2 skipped
    //   3: (4, T0 + 3P + 2 ms)      stamped 1 ms after its use: left out
    //   4: (2, T0 + 4P − 1 ms)      age  2 ms; 2 < 4: a sequence reset
    //   5: (5, T0 + 5P − 10 ms)     age 11 ms; seqs 3 and 4 skipped
    // Ages sorted: 2, 6, 11, 16, 36 ms. Nearest rank: p50 = 3rd = 11,
    // p90 = p99 = 5th = 36; mean 71 / 5 = 14.2 ms; 1 stale of 5 = 0.2.
    // At command (3 ms into cycles 0-4; cycle 5 has no command span, 3
    // has no age): 0: 8, 1: 18, 2: 38, 4: 4 ms. Sorted 4, 8, 18, 38:
    // p50 = 2nd = 8 ms, max 38.
    // Publication of camera in cycles 0, 1, 2, 5 at 0.5 ms in, seqs 1, 2, 3, 6:
    // 4 in 50 ms: 3 / 0.05 s = 60 Hz. Waits to first use: seq 1 0.5 ms,
    // seq 2 used in cycle 4: 30.5 ms, seq 3 0.5 ms; seq 6 is published
    // before the last use (cycle 5 at 1 ms) and never used. Published seqs
    // in time order 1, 2, 3, 6: seqs 4 and 5 never recorded, 2 gaps.
    let cam = [
        (1, T0 - 5 * MS),
        (1, T0 - 5 * MS),
        (3, T0 + 2 * P - 35 * MS),
        (4, T0 + 3 * P + 2 * MS),
        (2, T0 + 4 * P - MS),
        (5, T0 + 5 * P - 10 * MS),
    ];
    let mut lines = vec![header()];
    for (i, &(seq, stamp)) in cam.iter().enumerate() {
        let i = i as u64;
        let start = T0 + i * P;
        let mut samples = vec![];
        if [0, 1, 2, 5].contains(&i) {
            let seq = [1, 2, 3, 0, 0, 6][i as usize];
            samples.push(published(seq, start + MS / 2));
        }
        samples.push(used("camera", seq, stamp, start + MS));
        // The robot's state on its own clock: seqs 1..6, never comparable.
        samples.push(used("state", i + 1, 77, start + 2 * MS));
        lines.push(cycle(i, Value::from(samples), if i == 5 { 2 } else { 0 }));
    }
    std::fs::write(
        dir.path().join("control_timing.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();

    let r = analyze_json(dir.path(), &[]);
    let d = &r["data_age"];
    assert_eq!(d["samples_dropped"], 2);
    let cam = &d["sources"][0];
    assert_eq!(cam["source"], "camera");
    assert!(cam["not_comparable"].is_null());
    let p = &cam["phases"][0];
    assert_eq!(p["phase"], "running");
    assert_eq!(
        (
            &p["uses"],
            &p["reused"],
            &p["skipped"],
            &p["seq_resets"],
            &p["stamped_in_future"]
        ),
        (&json!(6), &json!(1), &json!(3), &json!(1), &json!(1))
    );
    let a = &p["age_at_use"];
    assert_eq!(
        [
            &a["count"],
            &a["min_ns"],
            &a["p50_ns"],
            &a["p90_ns"],
            &a["p99_ns"],
            &a["max_ns"]
        ],
        [
            &json!(5),
            &json!(2 * MS),
            &json!(11 * MS),
            &json!(36 * MS),
            &json!(36 * MS),
            &json!(36 * MS)
        ]
    );
    assert_eq!(a["mean_ns"], 14_200_000.0);
    assert_eq!((&p["stale"], &p["stale_share"]), (&json!(1), &json!(0.2)));
    let c = &p["age_at_command"];
    assert_eq!(
        [&c["count"], &c["p50_ns"], &c["max_ns"]],
        [&json!(4), &json!(8 * MS), &json!(38 * MS)]
    );
    let pr = &cam["production"];
    assert_eq!(
        (
            &pr["produced"],
            &pr["never_used"],
            &pr["rate_hz"],
            &pr["seq_gaps"]
        ),
        (&json!(4), &json!(1), &json!(60.0), &json!(2))
    );
    let w = &pr["wait_to_first_use"];
    assert_eq!(
        [&w["count"], &w["p50_ns"], &w["max_ns"]],
        [&json!(3), &json!(MS / 2), &json!(3 * P + MS / 2)]
    );

    let state = &d["sources"][1];
    assert!(state["not_comparable"]
        .as_str()
        .unwrap()
        .contains("robot_controller"));
    let p = &state["phases"][0];
    assert_eq!(
        (&p["uses"], &p["skipped"], &p["reused"]),
        (&json!(6), &json!(0), &json!(0))
    );
    assert!(p["age_at_use"].is_null() && p["stale"].is_null());
    assert!(state["production"].is_null());

    // The Chrome trace draws a flow arrow from each publication to each
    // use of it: seq 1 (cycles 0 and 1), 3 (cycle 2) and 2 (cycle 4); seqs
    // 4 and 5 were never published, 6 never used: 4 arrows.
    let trace = dir.path().join("trace.json");
    let t = analyze(&[
        "export",
        dir.path().to_str().unwrap(),
        "--format",
        "chrome",
        "--out",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let flows: Vec<&Value> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "sample")
        .collect();
    let seqs = |ph: &str| -> Vec<u64> {
        flows
            .iter()
            .filter(|e| e["ph"] == ph)
            .map(|e| e["args"]["seq"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(seqs("s"), [1, 1, 3, 2]);
    assert_eq!(seqs("f"), [1, 1, 3, 2]);
    // The text report says the same.
    let text = analyze(&["--episode", dir.path().to_str().unwrap()]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    // The HTML report plots the host-clock source's ages; the foreign
    // clock's get no plot (they have no ages).
    let html = dir.path().join("html");
    let h = analyze(&[
        "--episode",
        dir.path().to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let svg = std::fs::read_to_string(html.join("age_camera.svg")).unwrap();
    assert!(svg.contains("stale beyond 30.000 ms"), "the limit is drawn");
    assert!(!html.join("age_state.svg").exists());
    let page = std::fs::read_to_string(html.join("report.html")).unwrap();
    assert!(page.contains("Data age: camera"));
    for needle in [
        "data age:",
        "camera (clock host_monotonic, stale beyond 30.000 ms)",
        "running: 6 uses, 1 reused, 3 skipped, 1 sequence resets, 1 stale (20.00 %), 1 stamped after their use (left out)",
        "ages not comparable: its stamps are on the clock `robot_controller`",
        "published by control: 4 samples at 60.00 Hz",
        "2 sample(s) beyond a cycle's slots",
    ] {
        assert!(text.stdout.contains(needle), "missing {needle:?} in:\n{}", text.stdout);
    }
}

#[test]
fn a_sample_of_an_undeclared_source_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        header(),
        cycle(0, json!([used("lidar", 1, T0, T0 + MS)]), 0),
    ];
    std::fs::write(
        dir.path().join("control_timing.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();
    let r = analyze(&["--episode", dir.path().to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("control_timing.jsonl:2:")
            && r.stderr.contains("source `lidar` is not declared"),
        "{}",
        r.stderr
    );
}

/// An episode of `n` running cycles whose camera use `i` is
/// `base + u(0, 2 ms)` old (u from a seeded LCG), stale beyond 12 ms.
fn aged_episode(dir: &Path, n: u64, base: u64, seed: u64) {
    let mut h: Value = serde_json::from_str(&header()).unwrap();
    h["sources"][0]["max_age_ns"] = json!(12 * MS);
    let mut lines = vec![h.to_string()];
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let age = base + (x >> 33) % (2 * MS);
        let at = T0 + i * P + MS;
        lines.push(cycle(i, json!([used("camera", i + 1, at - age, at)]), 0));
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("control_timing.jsonl"), lines.join("\n") + "\n").unwrap();
}

#[test]
fn compare_finds_a_known_age_shift_and_an_aa_pair_finds_none() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, a2, b) = (
        tmp.path().join("a"),
        tmp.path().join("a2"),
        tmp.path().join("b"),
    );
    // 1,200 cycles a side. A and A2: 5-7 ms old (seeds 1 and 2); B: 15-17
    // ms, every use over the 12 ms limit. Medians about 6 and 16 ms: a
    // +10 ms shift, far above the noise floor (5 % of 6 ms = 0.3 ms).
    aged_episode(&a, 1200, 5 * MS, 1);
    aged_episode(&a2, 1200, 5 * MS, 2);
    aged_episode(&b, 1200, 15 * MS, 3);
    let run = |x: &Path, y: &Path| -> Value {
        let r = analyze(&[
            "compare",
            x.to_str().unwrap(),
            y.to_str().unwrap(),
            "--json",
            "--resamples",
            "200",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap()
    };
    let age = |c: &Value| {
        c["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == "age_at_use" && m["stage"] == "camera")
            .cloned()
            .expect("an age test")
    };
    let stale = |c: &Value| {
        c["rates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"] == "stale:camera")
            .cloned()
            .expect("a stale-use test")
    };
    let ab = run(&a, &b);
    let m = age(&ab);
    let d = m["diff_median_ns"].as_i64().unwrap();
    assert!((9_500_000..=10_500_000).contains(&d), "{d}");
    assert_eq!(m["verdict"], "worse", "{m}");
    let r = stale(&ab);
    assert_eq!(
        (r["a_per_1000"].as_f64(), r["b_per_1000"].as_f64()),
        (Some(0.0), Some(1000.0))
    );
    assert_eq!(r["verdict"], "worse");
    let aa = run(&a, &a2);
    assert_eq!(age(&aa)["verdict"], "no_clear_change", "{}", age(&aa));
    assert_eq!(stale(&aa)["verdict"], "no_clear_change");
    // The HTML holds the two sides' age CDFs.
    let html = tmp.path().join("html");
    let h = analyze(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--resamples",
        "100",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let svg = std::fs::read_to_string(html.join("compare_age_camera.svg")).unwrap();
    assert!(svg.contains("Data age: camera"));
    // The text names the test.
    let t = analyze(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--resamples",
        "200",
    ]);
    assert!(t.stdout.contains("age_at_use camera"), "{}", t.stdout);
    assert!(
        t.stdout
            .contains("stale camera uses, per 1,000 uses (age > 12.000 ms)"),
        "{}",
        t.stdout
    );
}

#[test]
fn a_sample_used_before_its_publication_is_counted_and_named() {
    // Cycle 0 publishes camera seq 1 at 2 ms in, after its own use of it at
    // 1 ms in (the producer recorded produced() too late); cycle 1 publishes
    // seq 2 at 0.5 ms and uses it at 1 ms. So 1 of 2 published samples was
    // used before its publication: left out of wait_to_first_use (1 wait,
    // 0.5 ms, remains), counted, and named in a caveat.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![header()];
    for i in 0..2u64 {
        let start = T0 + i * P;
        let at = if i == 0 { 2 * MS } else { MS / 2 };
        let samples = vec![
            published(i + 1, start + at),
            used("camera", i + 1, start, start + MS),
        ];
        lines.push(cycle(i, Value::from(samples), 0));
    }
    std::fs::write(
        dir.path().join("control_timing.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();
    let r = analyze_json(dir.path(), &[]);
    let pr = &r["data_age"]["sources"][0]["production"];
    assert_eq!(
        (&pr["produced"], &pr["used_before_published"]),
        (&json!(2), &json!(1)),
        "{pr}"
    );
    assert_eq!(pr["wait_to_first_use"]["count"], 1);
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains(
            "1 of 2 published `camera` samples were used before their publication was recorded"
        ),
        "{caveats}"
    );
}
