//! Input-paced phases on hand-built episodes whose every figure is derived
//! by hand below: the arrival period and rate, answer latency and late
//! answers, lost inputs split by cause, gaps and a burst, a repeated and a
//! reset counter, the robot's success rate, the verdict and the card; a
//! phase that mixes kinds gets its caveat; malformed input-paced lines are
//! refused with their line.

use super::*;
use serde_json::json;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const T0: u64 = 1_000_000_000_000;

/// The v1 serve fixture's header (P = 10 ms; phases warmup, running,
/// paused; the value `command_success_rate`).
fn header() -> String {
    let text = std::fs::read_to_string(fixture("v1/serve-episode/control_timing.jsonl")).unwrap();
    text.lines().next().unwrap().to_string()
}

/// A deadline-paced cycle `index` in `phase` at `start` (1 ms of work, on time).
fn deadline_cycle(index: u64, phase: &str, start: u64) -> String {
    json!({"type": "cycle", "cycle": index, "phase": phase, "start_ns": start,
        "end_ns": start + MS, "target_ns": start, "sleep_start_ns": start - 5 * MS,
        "wake_ns": start, "overdue": false, "skipped": 0, "spans_dropped": 0,
        "values": {}, "spans": []})
    .to_string()
}

/// An input-paced cycle: released 50 µs after its arrival, its command
/// span `answer` after the arrival (none when `None`), and its work ending
/// 100 µs after the command span's start (at least 1 ms after its start).
fn input_cycle(
    index: u64,
    phase: &str,
    arrival: u64,
    seq: u64,
    answer: Option<u64>,
    rate: Option<f64>,
) -> String {
    let start = arrival + 50 * US;
    let mut spans = vec![];
    let mut end = start + MS;
    if let Some(a) = answer {
        spans.push(
            json!({"stage": "robot_send_command", "parent": null, "depth": 0,
            "start_ns": arrival + a, "wall_ns": 100 * US, "cpu_ns": null,
            "closed_by_cycle_end": false, "attrs": {}}),
        );
        end = end.max(arrival + a + 100 * US);
    }
    let mut values = json!({});
    if let Some(r) = rate {
        values["command_success_rate"] = json!(r);
    }
    json!({"type": "cycle", "cycle": index, "phase": phase, "start_ns": start,
        "end_ns": end, "pace": "input", "arrival_ns": arrival, "input_seq": seq,
        "overdue": false, "skipped": 0, "spans_dropped": 0, "values": values,
        "spans": spans})
    .to_string()
}

fn write(dir: &Path, lines: &[String]) {
    std::fs::write(dir.join("control_timing.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// The running phase's arrivals (ms after T0, in µs), counters and answer
/// latencies (µs); `None`: no command span.
const RUNNING: [(u64, u64, Option<u64>); 18] = [
    (0, 100, Some(500)),
    (10_000, 101, Some(500)),
    (20_000, 102, Some(500)),
    (30_000, 104, Some(500)),    // 103 lost before arrival
    (40_000, 105, Some(12_000)), // late: 12 ms > P
    (52_200, 107, Some(500)),    // 106 lost after the late answer
    (60_000, 108, Some(500)),
    (70_000, 109, Some(500)),
    (95_000, 110, Some(500)),  // a 25 ms gap; a burst begins
    (95_500, 112, Some(300)),  // in the burst: 111 discarded
    (96_000, 113, Some(300)),  // in the burst
    (100_000, 114, Some(500)), // 4 ms ≥ P/4: the burst ended
    (110_000, 115, Some(500)),
    (140_000, 117, Some(500)), // a 30 ms gap, alone: 116 lost before arrival
    (150_000, 118, Some(500)),
    (160_000, 119, None),      // no command span
    (170_000, 119, Some(500)), // the counter repeated
    (180_000, 5, Some(500)),   // the counter went back: a reset
];

#[test]
fn every_input_paced_figure_matches_the_hand_derived_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![header()];
    lines.push(deadline_cycle(0, "warmup", T0 - 30 * MS));
    lines.push(deadline_cycle(1, "warmup", T0 - 20 * MS));
    for (i, &(at_us, seq, answer)) in RUNNING.iter().enumerate() {
        // The success rate: unset in the cycle with no answer, 0.95 and
        // 0.97 in cycles 5 and 6, 0 in the first (left out), else 1.
        let rate = match i {
            15 => None,
            0 => Some(0.0),
            5 => Some(0.95),
            6 => Some(0.97),
            _ => Some(1.0),
        };
        let answer = answer.map(|a| a * US);
        lines.push(input_cycle(
            i as u64 + 2,
            "running",
            T0 + at_us * US,
            seq,
            answer,
            rate,
        ));
    }
    write(dir.path(), &lines);
    let r = analyze_json(dir.path(), &[]);
    let p = &r["input_paced"]["phases"][0];
    assert_eq!(r["input_paced"]["phases"].as_array().unwrap().len(), 1);
    assert_eq!(
        (&p["phase"], &p["cycles"], &p["deadline_cycles"]),
        (&json!("running"), &json!(18), &json!(0))
    );
    assert_eq!(
        (&p["period_ns"], &p["period_from"]),
        (&json!(10 * MS), &json!("nominal"))
    );
    // Intervals (ms): 10 ×10, 12.2, 7.8, 25, 0.5, 0.5, 4, 30: 17 summing to
    // 180 ms (the last arrival − the first). Sorted: 0.5, 0.5, 4, 7.8,
    // 10 ×10, 12.2, 25, 30. Nearest rank: p50 = 9th = 10, p90 = 16th = 25,
    // p99 = 17th = 30; mean 180 / 17 = 10.5882353 ms.
    let ap = &p["arrival_period"];
    assert_eq!(
        (
            &ap["count"],
            &ap["min_ns"],
            &ap["p50_ns"],
            &ap["p90_ns"],
            &ap["p99_ns"],
            &ap["max_ns"]
        ),
        (
            &json!(17),
            &json!(500 * US),
            &json!(10 * MS),
            &json!(25 * MS),
            &json!(30 * MS),
            &json!(30 * MS)
        )
    );
    assert_eq!(ap["mean_ns"], 10_588_235.3);
    // 17 intervals in 0.18 s: 94.4444 Hz, (94.4444 − 100) / 100 = −5.5556 %.
    assert_eq!(p["arrival_hz"], 94.4444);
    assert_eq!(p["arrival_rate_error_pct"], -5.5556);
    // Answers: 17 (cycle 15 has none): 0.3 ×2, 0.5 ×14, 12 ms. p50 = 9th
    // = 0.5, p90 = 16th = 0.5, p99 = 17th = 12; one over the 10 ms budget
    // (the period): 1 / 17 = 0.0588.
    let al = &p["answer_latency"];
    assert_eq!(
        (
            &al["count"],
            &al["min_ns"],
            &al["p50_ns"],
            &al["p90_ns"],
            &al["p99_ns"]
        ),
        (
            &json!(17),
            &json!(300 * US),
            &json!(500 * US),
            &json!(500 * US),
            &json!(12 * MS)
        )
    );
    assert_eq!(
        (&p["budget_ns"], &p["budget_from"]),
        (&json!(10 * MS), &json!("period"))
    );
    assert_eq!(
        (&p["late_answers"], &p["late_share"], &p["unanswered"]),
        (&json!(1), &json!(0.0588), &json!(1))
    );
    // The counter over 17 steps: 103 and 116 lost before arrival (after
    // on-time answers, outside a burst), 106 after the late answer, 111
    // discarded in the burst; 119 repeated; 119 → 5 a reset.
    assert_eq!(
        p["lost"],
        json!({"compared": 17, "total": 4, "before_arrival": 2, "after_late_answer": 1,
               "discarded_in_bursts": 1, "repeated": 1, "resets": 1})
    );
    // Gaps over 15 ms: 25 and 30 ms. The burst: the arrival after the 25 ms
    // gap and the two 0.5 ms after it; the counter advanced 113 − 109 = 4
    // over its 3 arrivals: 1 discarded. The 30 ms gap has one arrival: no burst.
    assert_eq!(p["gaps"], 2);
    assert_eq!(
        p["bursts"],
        json!({"count": 1, "after_late_answer": 0, "arrivals": 3, "states": 4,
               "states_max": 4, "discarded": 1})
    );
    // Success rate over cycles 1..17 that set it (16): 0.95, 0.97, 1 ×14.
    // p1 = 1st = 0.95, p10 = 2nd = 0.97, p50 = 8th = 1; mean 15.92 / 16 =
    // 0.995; 2 below 1.
    assert_eq!(
        p["success_rate"],
        json!({"value": "command_success_rate", "count": 16, "mean": 0.995, "min": 0.95,
               "p1": 0.95, "p10": 0.97, "p50": 1.0, "below_one": 2})
    );
    // A late answer and gaps: both.
    assert_eq!(p["verdict"], "the loop and the link");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("1 of 17 answers later than 10.000 ms"),
        "{}",
        p["reason"]
    );
    // No overshoot or lag for the input-paced phase, and the report says why.
    let running = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["phase"] == "running")
        .unwrap();
    assert!(
        running["overshoot"].is_null() && running["lag"].is_null(),
        "{running}"
    );
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains("input-paced: phase `running`")
            && caveats.contains("sleep overshoot and deadline lag are not reported"),
        "{caveats}"
    );
    assert!(!caveats.contains("mixed pace"), "{caveats}");
    // The card: late answers 1 / 17 = 5.882353 % > 1 %: fail, with the
    // input verdict; the check judges that exact share and prints it to
    // 10⁻⁴ of a % (5.8824), not the report's late_share (0.0588) × 100.
    let (card, check) = late_answers_check(&r);
    assert_eq!(
        (&check["value"], &check["state"]),
        (&json!(5.8824), &json!("fail"))
    );
    assert_eq!(card["diagnosis"]["verdict"], "the loop and the link");
    assert!(
        card["words"]
            .as_str()
            .unwrap()
            .contains("input-paced, diagnosis: the loop and the link (1 of 17 answers late)"),
        "{}",
        card["words"]
    );

    // A budget of 13 ms: no answer is late by the loop's count, and 106 now
    // counts as lost before arrival (its predecessor's answer was on time).
    // The robot's success rate fell below 1 in 2 cycles (0.95, 0.97): it
    // counted answers late or missing that the loop did not, so the verdict
    // names what the evidence cannot separate instead of "the link" alone.
    let r = analyze_json(dir.path(), &["--answer-budget-us", "13000"]);
    let p = &r["input_paced"]["phases"][0];
    assert_eq!(
        (&p["late_answers"], &p["budget_from"], &p["verdict"]),
        (
            &json!(0),
            &json!("flag"),
            &json!("the link or the loop's socket queue")
        )
    );
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("fell below 1 in 2 of 16 cycles (min 0.9500)"),
        "{}",
        p["reason"]
    );
    assert_eq!(
        (
            &p["lost"]["before_arrival"],
            &p["lost"]["after_late_answer"]
        ),
        (&json!(3), &json!(0))
    );

    // The text report carries the section.
    let t = analyze(&["--episode", dir.path().to_str().unwrap()]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    for want in [
        "input-paced: cycles released by an input's arrival",
        "phase running: 18 input-paced cycles, P = 10.000 ms (nominal), arrivals at 94.44 Hz (-5.56 % against 1/P)",
        "late answers: 1 (5.88 %) over 10.000 ms (period); 1 cycles with no command span",
        "lost inputs (the counter): 4 = 2 before arrival + 1 after a late answer + 1 discarded in bursts",
        "bursts: 1 (0 after a late answer), 3 arrivals carrying 4 states (at most 4 in one), 1 discarded",
        "diagnosis: the loop and the link:",
        "running: input-paced, the loop and the link: 1 of 17 answers",
    ] {
        assert!(t.stdout.contains(want), "missing {want:?} in\n{}", t.stdout);
    }
    // The HTML report plots the answer latency, the budget dashed, right
    // after the period plot; a deadline-only episode has no such plot.
    let html = dir.path().join("html");
    let h = analyze(&[
        "--episode",
        dir.path().to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let svg = std::fs::read_to_string(html.join("answer_latency.svg")).unwrap();
    assert!(svg.contains("late beyond 10.000 ms"), "the budget is drawn");
    let page = std::fs::read_to_string(html.join("report.html")).unwrap();
    // The HTML card shows every check the text card shows: the late
    // answers (5.8824 %, FAIL) beside the rate, p99 and overruns.
    for want in [
        "5.88 % late answers: FAIL",
        "from the effective rate: ",
        "from the effective period: ",
        "overruns: PASS",
    ] {
        assert!(page.contains(want), "the HTML card lacks {want:?}");
    }
    let (period, answer) = (
        page.find("Period over time").unwrap(),
        page.find("Answer latency").unwrap(),
    );
    assert!(period < answer, "the answer plot follows the period plot");
    let plain = tempfile::tempdir().unwrap();
    write(
        plain.path(),
        &[
            header(),
            deadline_cycle(0, "running", T0),
            deadline_cycle(1, "running", T0 + 10 * MS),
        ],
    );
    let html = plain.path().join("html");
    let h = analyze(&[
        "--episode",
        plain.path().to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    assert!(!html.join("answer_latency.svg").exists());
}

/// The exports carry the per-cycle release: MCAP's `/looptime/cycle`
/// and the Parquet dataset's `cycles` table (pace, arrival, counter and
/// the answer latency, which is the command span's start − the arrival).
#[test]
fn the_exports_carry_the_release_and_the_answer_latency() {
    use polars_io::SerReader;
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        header(),
        deadline_cycle(0, "warmup", T0 - 10 * MS),
        input_cycle(1, "running", T0, 7, Some(400 * US), None),
        input_cycle(2, "running", T0 + 10 * MS, 9, None, None),
    ];
    write(dir.path(), &lines);
    let ep = dir.path().to_str().unwrap();
    let mcap_out = dir.path().join("e.mcap");
    let r = analyze(&[
        "export",
        ep,
        "--format",
        "mcap",
        "--out",
        mcap_out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bytes = std::fs::read(&mcap_out).unwrap();
    let got: Vec<Value> = mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(|m| m.unwrap())
        .filter(|m| m.channel.topic == "/looptime/cycle")
        .map(|m| serde_json::from_slice::<Value>(&m.data).unwrap())
        .map(|v| {
            json!([
                v["pace"],
                v["arrival_ns"],
                v["input_seq"],
                v["answer_latency_ns"]
            ])
        })
        .collect();
    assert_eq!(
        got,
        [
            json!(["deadline", null, null, null]),
            json!(["input", T0, 7, 400 * US]),
            json!(["input", T0 + 10 * MS, 9, null]),
        ]
    );
    let out = dir.path().join("dataset");
    let r = analyze(&[
        "export",
        ep,
        "--format",
        "parquet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let part = walk(&out.join("cycles"))
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let df = polars_io::parquet::read::ParquetReader::new(std::fs::File::open(part).unwrap())
        .finish()
        .unwrap();
    let col = |name: &str| {
        format!(
            "{:?}",
            df.column(name)
                .unwrap()
                .as_materialized_series()
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
        )
    };
    assert_eq!(col("pace"), r#"["\"deadline\"", "\"input\"", "\"input\""]"#);
    assert_eq!(col("input_seq"), r#"["null", "7", "9"]"#);
    assert_eq!(col("answer_latency_ns"), r#"["null", "400000", "null"]"#);
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_phase_that_mixes_kinds_gets_its_caveat() {
    let dir = tempfile::tempdir().unwrap();
    // Two input-paced cycles, then a deadline-paced one, all in `running`.
    let lines = vec![
        header(),
        input_cycle(0, "running", T0, 1, Some(500 * US), None),
        input_cycle(1, "running", T0 + 10 * MS, 2, Some(500 * US), None),
        deadline_cycle(2, "running", T0 + 20 * MS),
    ];
    write(dir.path(), &lines);
    let r = analyze_json(dir.path(), &[]);
    let p = &r["input_paced"]["phases"][0];
    assert_eq!(
        (&p["cycles"], &p["deadline_cycles"], &p["verdict"]),
        (&json!(2), &json!(1), &json!("on rate"))
    );
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains(
            "mixed pace: phase `running` holds 2 input-paced and 1 deadline-paced cycles"
        ),
        "{caveats}"
    );
    // A deadline-only episode has no section.
    let plain = tempfile::tempdir().unwrap();
    write(plain.path(), &[header(), deadline_cycle(0, "running", T0)]);
    assert!(analyze_json(plain.path(), &[]).get("input_paced").is_none());
}

#[test]
fn malformed_input_paced_lines_are_refused_with_their_line() {
    let cases = [
        // pace input without an arrival
        (
            json!({"pace": "input"}),
            json!({"arrival_ns": null}),
            "pace is `input` but it has no arrival_ns",
        ),
        // an arrival on a deadline-paced cycle
        (
            json!({}),
            json!({"pace": "deadline", "arrival_ns": T0}),
            "has an arrival_ns but its pace is not `input`",
        ),
        // an unknown pace
        (json!({}), json!({"pace": "bus"}), "unknown variant `bus`"),
    ];
    for (_, edit, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut c: Value =
            serde_json::from_str(&input_cycle(0, "running", T0, 1, Some(500 * US), None)).unwrap();
        for (k, v) in edit.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        if c["pace"] == "deadline" {
            c.as_object_mut().unwrap().remove("input_seq");
        }
        write(dir.path(), &[header(), c.to_string()]);
        let r = analyze(&["--episode", dir.path().to_str().unwrap()]);
        assert_ne!(r.code, 0, "{edit}: accepted");
        assert!(
            r.stderr.contains("control_timing.jsonl:2") && r.stderr.contains(want),
            "{edit}: {}",
            r.stderr
        );
    }
}

/// `looptime serve` against its robot peer over loopback UDP, at 1 kHz,
/// with one injected fault, analysed: what the report must find.
fn serve_udp(robot: &str) -> (tempfile::TempDir, Value) {
    serve_udp_with(robot, 2.0)
}

/// As [`serve_udp`], each stage costing `stage_us`.
fn serve_udp_with(robot: &str, stage_us: f64) -> (tempfile::TempDir, Value) {
    let _serve = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("udp.toml");
    // Stages of a few µs each, so that a cycle's work stays far below P/4
    // (the burst rule's spacing) even on a loaded host.
    let mut text = String::from("[run]\nrate_hz = 1000.0\nduration_s = 1.5\nwarmup_s = 0.1\n");
    for stage in [
        "camera_read",
        "viewer_control",
        "adapter_decode",
        "executor",
        "robot_send_command",
        "recording",
    ] {
        text += &format!("[stages.{stage}.cost]\nmean_us = {stage_us}\n");
    }
    text += &format!("[robot]\ntransport = \"udp\"\n{robot}\n");
    std::fs::write(&cfg, text).unwrap();
    let ep = serve(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("runs"),
    );
    let r = analyze_json(&ep, &[]);
    drop(_serve);
    (tmp, r)
}

/// The running phase's card and its `late_answers` check.
fn late_answers_check(r: &Value) -> (&Value, &Value) {
    let card = r["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["phase"] == "running")
        .unwrap();
    let check = card["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "late_answers")
        .unwrap();
    (card, check)
}

fn running(r: &Value) -> &Value {
    r["input_paced"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "running")
        .expect("an input-paced running phase")
}

#[test]
fn a_stalling_robot_link_is_found_as_bursts_and_called_the_link() {
    // The peer's transmit path stalls the last 5 ms of every 250: in the
    // running phase (100 to 1,600 ms) the stalls end at 250, 500, ...,
    // 1,500 ms, 6 of them, each holding 5 states that arrive with the next
    // in a burst of 6. Only what the faults must cause is asserted: a
    // loaded host may add late answers, never remove a stall.
    let (_tmp, r) = serve_udp("stall_every_ms = 250.0\nstall_ms = 5.0");
    let p = running(&r);
    assert_eq!(p["cycles"], 1500, "{p}");
    let b = &p["bursts"];
    let on_time = b["count"].as_u64().unwrap() - b["after_late_answer"].as_u64().unwrap();
    assert!(
        on_time >= 3,
        "the stalls are bursts after on-time answers: {b}"
    );
    assert!(
        b["states_max"].as_u64().unwrap() >= 6,
        "a stall's burst carries its held states and the next: {b}"
    );
    assert!(p["gaps"].as_u64().unwrap() >= 3, "{p}");
    assert!(p["verdict"].as_str().unwrap().contains("the link"), "{p}");
    // Every state arrived: the counter lost none.
    assert_eq!(p["lost"]["total"], 0, "{p}");
    assert_eq!(p["success_rate"]["value"], "control_command_success_rate");
    // The peer's own record, a background thread: one send_state span per
    // state (100 warmup + 1,500 running), the stalls as sends closer than
    // P/4 and intervals of 5 ms and more.
    let peer = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread"] == "robot_peer")
        .expect("the peer's evidence");
    assert_eq!(peer["stages"][0]["stage"], "send_state");
    assert_eq!(peer["stages"][0]["count"], 1600, "{peer}");
    let period = &peer["phases"][0]["period"];
    assert!(period["min_ns"].as_i64().unwrap() < 250_000, "{period}");
    assert!(period["max_ns"].as_i64().unwrap() >= 5_000_000, "{period}");
}

#[test]
fn injected_late_answers_are_found_with_the_robots_success_dip() {
    // Every 50th cycle answers 2 ms late (P = 1 ms): 1,600 cycles hold 32
    // such answers, 30 of them in the running phase (cycles 149, 199, ...,
    // 1599). Each is late by construction; a loaded host may add more.
    let (_tmp, r) = serve_udp("late_answer_every = 50\nlate_answer_us = 2000.0");
    let p = running(&r);
    assert!(p["late_answers"].as_u64().unwrap() >= 30, "{p}");
    assert!(
        p["answer_latency"]["max_ns"].as_i64().unwrap() >= 2_000_000,
        "{p}"
    );
    assert!(
        p["verdict"].as_str().unwrap().starts_with("the loop"),
        "{p}"
    );
    // The robot counts those answers missing: its windowed rate dips to
    // at most 0.98 (2 of every 100 states answered late).
    let s = &p["success_rate"];
    assert!(s["min"].as_f64().unwrap() <= 0.98, "{s}");
    assert!(s["below_one"].as_u64().unwrap() > 0, "{s}");
    // The card judges the late answers: 2 % is over the warn band (1 %).
    let (card, check) = late_answers_check(&r);
    assert_eq!(check["state"], "fail", "{card}");
}

#[test]
fn states_that_waited_in_the_socket_while_the_loop_was_behind_show_as_socket_wait() {
    // Every 50th cycle is busy 5 ms before it answers (P = 1 ms): 30 such
    // stretches in the running phase. The states that reach the host
    // meanwhile wait in the socket; with the kernel's receive stamp as the
    // arrival, the next cycles' states waited about 4, 3, 2 and 1 ms when
    // the loop reads them (its work is µs). So at least 3 × 30 = 90 of the
    // 1,500 running cycles (6 %) waited 2 ms or more (less a loaded
    // host's slack): the wait's p99 is over 1.5 ms, its max over 3.5 ms.
    // Before kernel stamps, arrival was the read and these waits were 0.
    // Only the queueing the stretches must cause is asserted: a loaded
    // host adds waits (the peer thread is preempted too), never removes one.
    let (_tmp, r) = serve_udp("late_answer_every = 50\nlate_answer_us = 5000.0");
    let p = running(&r);
    let sw = &p["socket_wait"];
    assert_eq!(
        sw["stamped"], p["cycles"],
        "every state carries the kernel's stamp: {sw}"
    );
    let wait = &sw["wait"];
    assert!(wait["max_ns"].as_i64().unwrap() >= 3_500_000, "{sw}");
    assert!(wait["p99_ns"].as_i64().unwrap() >= 1_500_000, "{sw}");
    // Each arrival is converted within a bound far below the waits.
    assert!(sw["bound_max_ns"].as_i64().unwrap() < 1_000_000, "{sw}");
    // The answers of the queued states count from their arrival: each
    // stretch makes its own late answer and the queued ones late too.
    assert!(p["late_answers"].as_u64().unwrap() >= 60, "{p}");
}

#[test]
fn a_loop_slower_than_its_robot_loses_states_after_late_answers_and_is_cut_short() {
    // Six stages of 400 µs: 2.4 ms of work a cycle against a 1 ms state
    // stream. Every answer is late, the states pile up in the socket until
    // the kernel drops them (counter gaps after late answers: ours), and
    // the loop, which cannot catch up, gets fewer than its 1,600 cycles.
    // The robot finished its stream (it did not stop): the rollout is
    // complete, its shortfall counted, never called an abort.
    let (_tmp, r) = serve_udp_with("", 400.0);
    assert_eq!(r["state"], "complete", "{}", r["caveats"]);
    let cycles: u64 = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cycles"].as_u64().unwrap())
        .sum();
    assert!(cycles < 1600, "a shortfall: {cycles} cycles");
    let p = &r["input_paced"]["phases"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let lost = &p["lost"];
    assert!(lost["after_late_answer"].as_u64().unwrap() > 0, "{lost}");
    assert_eq!(lost["before_arrival"], 0, "{lost}");
    assert!(p["late_share"].as_f64().unwrap() > 0.9, "{p}");
    assert!(
        p["verdict"].as_str().unwrap().starts_with("the loop"),
        "{p}"
    );
}

/// Eight running cycles 10 ms apart (P = 10 ms, the fixture header's),
/// counters 1..8 with none lost, every answer 0.5 ms after its arrival
/// except cycle 4's, answered `answer4_us` after; cycle 5 arrives 25.2 ms
/// after cycle 4 (over 1.5 P = 15 ms: the only gap; the interval after it
/// is 10 ms, so no burst).
fn one_gap_after_cycle_4(answer4_us: u64) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![header()];
    let mut at = T0;
    for i in 0..8u64 {
        if i == 5 {
            at += 15_200 * US; // 10 ms + 15.2 ms: 25.2 ms after cycle 4
        }
        let answer = if i == 4 { answer4_us } else { 500 } * US;
        lines.push(input_cycle(i, "running", at, i + 1, Some(answer), None));
        at += 10 * MS;
    }
    write(dir.path(), &lines);
    analyze_json(dir.path(), &[])
}

#[test]
fn a_gap_after_the_loops_own_late_answer_is_the_loops_not_the_links() {
    // Cycle 4 answers 25 ms after its arrival (over the 10 ms budget: the
    // one late answer of 8), and the next arrival comes 25.2 ms later: the
    // gap followed the late answer, nothing was lost, so the verdict is
    // exactly "the loop" (docs/input-paced.md), not "the loop and the link".
    let r = one_gap_after_cycle_4(25_000);
    let p = &r["input_paced"]["phases"][0];
    assert_eq!(
        (&p["late_answers"], &p["gaps"], &p["gaps_after_late_answer"]),
        (&json!(1), &json!(1), &json!(1)),
        "{p}"
    );
    assert_eq!(p["lost"]["total"], 0, "{p}");
    assert_eq!(p["verdict"], "the loop", "{p}");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("1 of 8 answers later than 10.000 ms after their input (0 inputs lost, 1 gaps and 0 bursts right after a late answer)"),
        "{}",
        p["reason"]
    );
    // The same gap after an on-time answer (cycle 4 at 0.5 ms) is the
    // link's: no late answer, one gap after an on-time answer.
    let r = one_gap_after_cycle_4(500);
    let p = &r["input_paced"]["phases"][0];
    assert_eq!(
        (&p["late_answers"], &p["gaps"], &p["gaps_after_late_answer"]),
        (&json!(0), &json!(1), &json!(0)),
        "{p}"
    );
    assert_eq!(p["verdict"], "the link", "{p}");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .starts_with("1 gaps in the arrivals and 0 bursts after an on-time answer"),
        "{}",
        p["reason"]
    );
}

#[test]
fn the_command_stage_comes_from_the_recording_and_none_found_is_said() {
    // Eight input-paced cycles answered in `robot_send_command` spans, the
    // header declaring the command stage `executor` (which no cycle has):
    // the analyzer takes the header's stage, finds no answer, says so in a
    // caveat naming the stages the phase has and the flag, and gives no
    // link/loop verdict built on zero answers.
    let dir = tempfile::tempdir().unwrap();
    let mut h: Value = serde_json::from_str(&header()).unwrap();
    h["command_stage"] = json!("executor");
    let mut lines = vec![h.to_string()];
    for i in 0..8u64 {
        lines.push(input_cycle(
            i,
            "running",
            T0 + i * 10 * MS,
            i + 1,
            Some(500 * US),
            None,
        ));
    }
    write(dir.path(), &lines);
    let r = analyze_json(dir.path(), &[]);
    let p = &r["input_paced"]["phases"][0];
    assert_eq!(
        (&p["unanswered"], &p["verdict"]),
        (&json!(8), &json!("no answers")),
        "{p}"
    );
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains("no span of the command stage `executor` (declared by the recording)")
            && caveats.contains("its stages are robot_send_command")
            && caveats.contains("--command-stage NAME"),
        "{caveats}"
    );
    // The flag overrides the recording: the answers are timed again.
    let r = analyze_json(dir.path(), &["--command-stage", "robot_send_command"]);
    let p = &r["input_paced"]["phases"][0];
    assert_eq!(
        (&p["unanswered"], &p["verdict"]),
        (&json!(0), &json!("on rate")),
        "{p}"
    );
    assert!(!r["caveats"]
        .to_string()
        .contains("no span of the command stage"));
}

#[test]
fn the_robots_count_of_late_answers_is_not_put_down_to_the_link() {
    // Eight cycles, every answer 0.5 ms after its arrival (on time by the
    // loop's count), no gap, no loss; the robot's rate 1.0 except 0.97 in
    // cycles 5 and 6: the robot counted answers late that the loop did not,
    // so the verdict is not "on rate" but names both candidates.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![header()];
    for i in 0..8u64 {
        let rate = if i == 5 || i == 6 { 0.97 } else { 1.0 };
        lines.push(input_cycle(
            i,
            "running",
            T0 + i * 10 * MS,
            i + 1,
            Some(500 * US),
            Some(rate),
        ));
    }
    write(dir.path(), &lines);
    let p = &analyze_json(dir.path(), &[])["input_paced"]["phases"][0];
    assert_eq!(p["late_answers"], 0, "{p}");
    assert_eq!(p["verdict"], "the link or the loop's socket queue", "{p}");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("the evidence cannot separate a state that waited in the socket"),
        "{}",
        p["reason"]
    );
    // The same cycles with kernel arrivals (each read 40 µs after its
    // arrival, bound 60 ns; cycle 3 read 1 ms *before* its arrival, as
    // when the system clock steps back while the state is in the socket:
    // a clock step, left out of the wait): the socket's wait is in every
    // latency, so what the robot counted is before the kernel's stamp or
    // on the way back.
    let stamped: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["type"] == "cycle" {
                let a = v["arrival_ns"].as_u64().unwrap();
                v["read_ns"] = json!(if v["cycle"] == 3 { a - MS } else { a + 40 * US });
                v["arrival_bound_ns"] = json!(60);
            }
            v.to_string()
        })
        .collect();
    write(dir.path(), &stamped);
    let p = &analyze_json(dir.path(), &[])["input_paced"]["phases"][0];
    assert_eq!(p["verdict"], "the link or the host's receive path", "{p}");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("a state held before the kernel stamped it"),
        "{}",
        p["reason"]
    );
    let sw = &p["socket_wait"];
    assert_eq!(
        (
            &sw["stamped"],
            &sw["wait"]["count"],
            &sw["wait"]["max_ns"],
            &sw["bound_max_ns"],
            &sw["clock_steps"]
        ),
        (&json!(8), &json!(7), &json!(40 * US), &json!(60), &json!(1)),
        "{sw}"
    );
}

/// An input-paced episode of `n` running cycles 10 ms apart (P, the
/// fixture header's), counters without a gap, every answer 0.5 ms after
/// its arrival except every `every`-th (0: none), answered 12 ms after
/// (over P: late); the robot's rate 1.0.
fn paced_episode(dir: &Path, n: u64, every: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let mut lines = vec![header()];
    for i in 0..n {
        let answer = if every > 0 && i % every == every - 1 {
            12 * MS
        } else {
            500 * US
        };
        lines.push(input_cycle(
            i,
            "running",
            T0 + i * 10 * MS,
            i + 1,
            Some(answer),
            Some(1.0),
        ));
    }
    write(dir, &lines);
}

#[test]
fn compare_tests_the_input_paced_figures_and_the_gate_trips_on_late_answers() {
    // A: 1,200 cycles, every answer on time; B: every 50th answered 12 ms
    // after its arrival (over P = 10 ms): 24 late answers, 20 per 1,000
    // answers, far above the floor (max(1, 25 % of A's 0)). B's answer
    // latency p99 is 12 ms (24 of 1,200 = 2 % lie at 12 ms, so the 99th
    // percentile's rank falls among them) against A's 0.5 ms. Nothing was
    // lost and no burst happened on either side: those rates do not move.
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    paced_episode(&a, 1200, 0);
    paced_episode(&b, 1200, 50);
    let r = analyze(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    let rate = |m: &str| running_rate(&c, m);
    let late = rate("late_answers");
    assert_eq!(
        (&late["a_per_1000"], &late["b_per_1000"]),
        (&json!(0.0), &json!(20.0)),
        "{late}"
    );
    assert_eq!(late["verdict"], "worse", "{late}");
    for m in [
        "lost_before_arrival",
        "lost_after_late_answer",
        "lost_discarded",
        "bursts",
        "success_shortfall",
        "success_below_one",
    ] {
        let x = rate(m);
        assert_eq!(
            (&x["b_per_1000"], &x["verdict"]),
            (&json!(0.0), &json!("no_clear_change")),
            "{x}"
        );
    }
    let latency = c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["phase"] == "running" && m["metric"] == "answer_latency")
        .expect("an answer-latency test");
    assert_eq!(latency["diff_p99_ns"], json!(11_500 * US), "{latency}");
    assert_eq!(latency["verdict_p99"], "worse", "{latency}");
    // The gate names them, and trips on the late answers' share.
    let g = analyze(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--fail-on",
        "worse",
        "--gate",
        "running/late_answers:share,running/answer_latency:p99",
        "--markdown",
        tmp.path().join("summary.md").to_str().unwrap(),
    ]);
    assert_eq!(g.code, 5, "{}{}", g.stdout, g.stderr);
    let md = std::fs::read_to_string(tmp.path().join("summary.md")).unwrap();
    assert!(md.contains("late answers, per 1,000 answers"), "{md}");
    // A compared with itself: nothing moved.
    let same = analyze(&[
        "compare",
        b.to_str().unwrap(),
        b.to_str().unwrap(),
        "--fail-on",
        "worse",
    ]);
    assert_eq!(same.code, 0, "{}", same.stdout);
}
