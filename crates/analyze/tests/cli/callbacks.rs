//! A background thread's callbacks grouped by their `name` attribute
//! (looptime.ros's executor threads; docs/metrics.md, Threads), on a
//! hand-built episode whose figures are derived in the test's comment.

use super::*;
use serde_json::json;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

#[test]
fn a_threads_callbacks_are_grouped_by_name_with_their_periods_and_skips() {
    // The synthetic-threads fixture with its worker's spans named as
    // looptime.ros names callbacks, and the control header declaring the
    // timer `t1`'s period, 10 ms (`period_ns.t1`). The worker's spans:
    //   t1 at 0, 10, 40, 50 ms   -> 4 calls, periods 10, 30, 10 ms:
    //      p50 10 ms, max 30 ms; skipped round(30/10) − 1 = 2 (and 0, 0);
    //   /joint_states at 5, 6 ms -> 2 calls, one period of 1 ms, no
    //      declared period (a subscription): no skipped figure;
    //   other at 20 ms           -> 1 call, no period; the caveat counts it.
    // The two /joint_states calls set the worker's value
    // `dds_leg_ns./joint_states` to 60 and 90 µs: n=2, min 60 000, max
    // 90 000, mean 75 000 ns (a thread's values, reported as the control's).
    let tmp = tempfile::tempdir().unwrap();
    copy_episode(&fixture("v2/synthetic-threads"), tmp.path());
    let control = tmp.path().join("control_timing.jsonl");
    let text = std::fs::read_to_string(&control).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut h: Value = serde_json::from_str(&lines[0]).unwrap();
    h["metadata"]["period_ns.t1"] = json!("10000000");
    lines[0] = h.to_string();
    std::fs::write(&control, lines.join("\n") + "\n").unwrap();
    let worker = tmp.path().join("control_timing.worker.jsonl");
    let wtext = std::fs::read_to_string(&worker).unwrap();
    let mut wh: Value = serde_json::from_str(wtext.lines().next().unwrap()).unwrap();
    wh["attributes"] = json!([{"key": "kind", "values": ["timer", "subscription"]},
                              {"key": "name", "values": ["t1", "/joint_states", "other"]}]);
    wh["value_defs"] = json!([{"name": "dds_leg_ns./joint_states", "kind": "int", "unit": "ns"}]);
    let t0 = 1_000_000_000u64;
    let calls = [
        (0, "timer", "t1"),
        (5, "subscription", "/joint_states"),
        (6, "subscription", "/joint_states"),
        (10, "timer", "t1"),
        (20, "timer", "other"),
        (40, "timer", "t1"),
        (50, "timer", "t1"),
    ];
    let mut out = vec![wh.to_string()];
    for (i, (at_ms, kind, name)) in calls.iter().enumerate() {
        let s = t0 + at_ms * MS;
        let values = match (i, *name) {
            (1, "/joint_states") => json!({"dds_leg_ns./joint_states": 60 * US}),
            (2, "/joint_states") => json!({"dds_leg_ns./joint_states": 90 * US}),
            _ => json!({}),
        };
        out.push(json!({"type": "cycle", "cycle": i, "phase": "spans", "start_ns": s, "end_ns": s + 100 * US,
            "overdue": false, "skipped": 0, "spans_dropped": 0, "values": values,
            "spans": [{"stage": "job", "parent": null, "depth": 0, "start_ns": s, "wall_ns": 100 * US,
                       "attrs": {"kind": kind, "name": name}}]}).to_string());
    }
    std::fs::write(&worker, out.join("\n") + "\n").unwrap();
    let r = analyze_json(tmp.path(), &[]);
    let cbs = r["threads"][0]["callbacks"].as_array().unwrap().clone();
    let by = |name: &str| {
        cbs.iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {cbs:?}"))
            .clone()
    };
    let t1 = by("t1");
    assert_eq!(
        (&t1["calls"], &t1["kind"], &t1["period_ns"], &t1["skipped"]),
        (&json!(4), &json!("timer"), &json!(10 * MS), &json!(2)),
        "{t1}"
    );
    assert_eq!(
        (&t1["period"]["p50_ns"], &t1["period"]["max_ns"]),
        (&json!(10 * MS), &json!(30 * MS))
    );
    let js = by("/joint_states");
    assert_eq!(
        (&js["calls"], &js["period"]["max_ns"], &js["skipped"]),
        (&json!(2), &json!(MS), &Value::Null)
    );
    assert_eq!(by("other")["period"], Value::Null);
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains(
            "thread `worker`: 1 calls of callbacks created after the node was instrumented"
        ),
        "{caveats}"
    );
    let v = &r["threads"][0]["values"][0];
    assert_eq!(
        (&v["name"], &v["count"], &v["min"], &v["max"], &v["mean"]),
        (
            &json!("dds_leg_ns./joint_states"),
            &json!(2),
            &json!(60 * US),
            &json!(90 * US),
            &json!(75_000.0)
        ),
        "{v}"
    );
    let t = analyze(&["--episode", tmp.path().to_str().unwrap()]);
    assert!(t.stdout.contains("callbacks by name"), "{}", t.stdout);
    assert!(
        t.stdout.contains("dds_leg_ns./joint_states (ns)  n=2"),
        "{}",
        t.stdout
    );
}
