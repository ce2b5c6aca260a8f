//! The first glance from the command line: a card per phase in the JSON,
//! the same words opening the text report, the thresholds' flags (which
//! change states, never figures) and their usage errors.

use super::*;

#[test]
fn every_phase_has_a_card_and_the_text_opens_with_them() {
    let dir = fixture("v1/serve-episode");
    let r = analyze_json(&dir, &[]);
    let cards = r["summary"].as_array().unwrap();
    let phases: Vec<&Value> = r["phases"].as_array().unwrap().iter().collect();
    assert_eq!(cards.len(), phases.len());
    for (c, p) in cards.iter().zip(&phases) {
        assert_eq!(c["phase"], p["phase"]);
        assert_eq!(c["loop_hz"], p["loop_hz"]);
        assert_eq!(c["overruns"], p["overruns"]);
        assert_eq!(c["period_p99_ns"], p["period"]["p99_ns"]);
    }
    // The diagnosis is on the judged phase's card only.
    let judged: Vec<&Value> = cards.iter().filter(|c| !c["diagnosis"].is_null()).collect();
    assert_eq!(judged.len(), 1);
    assert_eq!(judged[0]["phase"], r["late_cycles"]["phase"]);
    assert_eq!(r["thresholds"]["rate_pass_pct"], 0.5);
    // The text report: the cards' words right after the state line.
    let t = analyze(&["--episode", dir.to_str().unwrap()]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    let lines: Vec<&str> = t.stdout.lines().collect();
    let state = lines.iter().position(|l| l.starts_with("state:")).unwrap();
    for (k, c) in cards.iter().enumerate() {
        assert_eq!(lines[state + 2 + k], c["words"].as_str().unwrap());
    }
}

#[test]
fn the_threshold_flags_change_states_not_figures() {
    let dir = fixture("v1/synthetic-basic");
    let loose = analyze_json(&dir, &[]);
    // Nothing passes a 0 % band unless it is exact: the rate's distance
    // from the effective rate is not 0 in this fixture.
    let strict = analyze_json(
        &dir,
        &[
            "--pass-rate-within",
            "0",
            "--warn-rate-within",
            "0",
            "--pass-p99-within",
            "0",
            "--warn-p99-within",
            "0",
        ],
    );
    assert_eq!(strict["thresholds"]["rate_warn_pct"], 0.0);
    let running = |r: &Value| -> Value {
        r["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["phase"] == "running")
            .unwrap()
            .clone()
    };
    let (a, b) = (running(&loose), running(&strict));
    assert_eq!(b["state"], "fail", "{b}");
    assert_eq!(a["loop_hz"], b["loop_hz"]);
    assert_eq!(a["checks"][0]["value"], b["checks"][0]["value"]);
    assert_eq!(loose["phases"], strict["phases"]);
    // The same flags on the `report` subcommand.
    let r = analyze(&[
        "report",
        dir.to_str().unwrap(),
        "--json",
        "--pass-overruns",
        "1000",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["thresholds"]["overruns_pass"], 1000);
}

#[test]
fn bad_thresholds_are_usage_errors() {
    let dir = fixture("v1/synthetic-basic");
    for (args, needle) in [
        (
            vec!["--pass-rate-within", "2", "--warn-rate-within", "1"],
            "--warn-rate-within 1 is below --pass-rate-within 2",
        ),
        (
            vec!["--pass-p99-within", "-1"],
            "--pass-p99-within -1 is not a percentage",
        ),
        (
            vec!["--warn-overruns-within", "NaN"],
            "--warn-overruns-within NaN is not a percentage",
        ),
    ] {
        let mut a = vec!["--episode", dir.to_str().unwrap()];
        a.extend(args);
        let r = analyze(&a);
        assert_eq!(r.code, 2, "{a:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{a:?}: {}", r.stderr);
    }
}
