//! The comparison calibrated where CI runs (docs/compare.md, The run-level
//! test), on the two recorded pairs of `fixtures/calibration/` (make.py
//! there builds each rollout to exact medians, so every expected figure
//! below follows from its docstring), never on live timing.

use super::*;

fn pair(name: &str, extra: &[&str]) -> Run {
    let (a, b) = (
        fixture(&format!("calibration/{name}/a")),
        fixture(&format!("calibration/{name}/b")),
    );
    let mut args = vec!["compare", a.to_str().unwrap(), b.to_str().unwrap()];
    args.extend_from_slice(extra);
    analyze(&args)
}

fn metric<'a>(c: &'a Value, metric: &str, stage: Option<&str>) -> &'a Value {
    c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == metric && m["stage"].as_str() == stage)
        .unwrap_or_else(|| panic!("no {metric} {stage:?}"))
}

#[test]
fn a_run_to_run_offset_in_an_a_a_pair_does_not_trip_the_gate() {
    // step's rollout medians: A 39.5, 39.1, 39.0 µs; B 42.0, 48.8, 41.9
    // µs. Tested Δ = mean(B) − mean(A) = 44.2333 − 39.2 = 5.0333 µs; the
    // spread between B's rollouts (S² = 15.54 µs²) gives se ≥ 2.28 µs at
    // ν ≈ 2: t ≈ 2.2, p ≈ 0.16 before any adjustment. Blind to the
    // rollouts (degrees of freedom from blocks, in the thousands), the
    // same pair read Holm p 0.014 and tripped the ungated gate.
    let r = pair("aa-offset", &["--fail-on", "worse"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    assert!(
        r.stdout.contains("what moved: nothing beyond noise"),
        "{}",
        r.stdout
    );
    let r = pair("aa-offset", &["--json"]);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    let step = metric(&c, "stage_wall", Some("step"));
    let t = &step["test_median"];
    assert_eq!(t["method"], "rollouts");
    assert_eq!(t["rollouts"], serde_json::json!([3, 3]));
    assert!(
        (t["estimate"].as_f64().unwrap() - 5_033.3).abs() < 0.1,
        "{t}"
    );
    assert!(t["se"].as_f64().unwrap() >= 2_281.0, "{t}");
    let df = t["df"].as_f64().unwrap();
    assert!((2.0..=4.0).contains(&df), "{t}");
    let p = step["p_median"].as_f64().unwrap();
    assert!(p > 0.1, "{p}");
    // The interval is the same test's: it holds zero.
    let ci = &step["ci_median_ns"];
    assert!(
        ci[0].as_i64().unwrap() < 0 && ci[1].as_i64().unwrap() > 0,
        "{ci}"
    );
    // Gated on the very test, with the gate's message saying what it
    // could have seen.
    let tmp = tempfile::tempdir().unwrap();
    let md = tmp.path().join("summary.md");
    let r = pair(
        "aa-offset",
        &[
            "--fail-on",
            "worse",
            "--gate",
            "running/stage_wall/step:median",
            "--markdown",
            md.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("would have been called with 80 % probability (3 rollouts a side)"),
        "{md}"
    );
}

#[test]
fn a_missed_work_shift_says_how_large_a_shift_it_could_have_seen() {
    // +0.5 ms of work on B (3.14, 3.18, 3.16 ms) against A's 2.64, 2.68
    // and a slowed 3.93 ms: the tested Δ is mean(B) − mean(A) = 3.16 −
    // 3.0833 = +0.0767 ms, and A's spread (S² = 0.5357 ms²) makes its se
    // at least √(0.5357 / 3) = 0.4226 ms at ν ≈ 2. The pinned outcome (the
    // seed makes it deterministic): no clear change, the interval holding
    // zero, and a minimum detectable shift far above the +0.5 ms missed:
    // (t_{1−level/2}(2.01) + t_{0.8}(2.01)) · se, about 5.4 ms at the
    // level of its Holm rank.
    let r = pair("work-shift", &["--json"]);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    let work = metric(&c, "work", None);
    assert_eq!(work["verdict_median"], "no_clear_change");
    assert_eq!(work["why_median"], "the interval holds zero");
    let t = &work["test_median"];
    assert!(
        (t["estimate"].as_f64().unwrap() - 76_666.7).abs() < 0.1,
        "{t}"
    );
    assert!(t["se"].as_f64().unwrap() >= 422_600.0, "{t}");
    let mds = t["detectable"].as_f64().unwrap();
    assert!(mds > 500_000.0, "{t}");
    assert!((5_000_000.0..6_000_000.0).contains(&mds), "{t}");
    // The gate's message and its JUnit case say it too, at the test's
    // level in the gate's own family (one test: α itself, so a smaller
    // detectable shift than at its rank among the comparison's tests,
    // still far above the +0.5 ms).
    let tmp = tempfile::tempdir().unwrap();
    let xml = tmp.path().join("timing.xml");
    let gate = ["--fail-on", "worse", "--gate", "running/work:median"];
    let mut args = gate.to_vec();
    args.extend(["--junit", xml.to_str().unwrap()]);
    let r = pair("work-shift", &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut args = gate.to_vec();
    args.push("--json");
    let g: Value = serde_json::from_str(&pair("work-shift", &args).stdout).unwrap();
    let own = &g["gate"]["tests"][0];
    assert_eq!(own["level"], 0.05, "{own}");
    let at_gate = own["detectable"].as_f64().unwrap();
    assert!(at_gate > 500_000.0 && at_gate < mds, "{own}");
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(
        xml.contains(&format!(
            "a shift of {:.3} ms would have been called with 80 % probability (3 rollouts a side)",
            at_gate / 1e6
        )),
        "{xml}"
    );
    // The CPU time is not fooled by the slowed host: policy's stage_cpu
    // medians are 2.619, 2.659, 2.639 ms against 3.119, 3.159, 3.139 ms,
    // +0.5 ms with a spread of 20 µs: worse.
    let cpu = metric(&c, "stage_cpu", Some("policy"));
    assert_eq!(cpu["verdict_median"], "worse", "{cpu}");
}
