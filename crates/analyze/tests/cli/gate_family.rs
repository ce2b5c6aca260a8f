//! The gate's own family and "undecided" (docs/ci.md): Holm over the gated
//! tests alone, at `--alpha`, and the looks of a workflow that records
//! more rollouts while the gate is undecided, on synthetic sessions whose
//! every rollout carries a host offset on adapter_decode (a run-to-run
//! spread built in, never live timing).

use super::*;
use synthetic::{write, Synth};

/// Each rollout's host offset on adapter_decode, µs: the first three, then
/// three more, then three more (looks at 3, 6 and 9 rollouts a side). The
/// same offsets on both sides; B adds 500 µs to every rollout.
const OFFSETS_US: [u64; 9] = [0, 200, 400, 100, 300, 50, 250, 150, 350];

const DECODE: &str = "running/stage_wall/adapter_decode:median";

/// `--a DIR …` and `--b DIR …` for the first `n` rollouts a side.
fn sides(tmp: &Path, n: usize) -> Vec<String> {
    let mut args = Vec::new();
    for (side, shift) in [("a", 0), ("b", 500_000)] {
        for (r, off) in OFFSETS_US.iter().take(n).enumerate() {
            let dir = write(
                &tmp.join(format!("{side}{r}")),
                &Synth {
                    seed: 1 + r as u64 + if side == "b" { 100 } else { 0 },
                    cycles: 1_200,
                    host_offset_ns: off * 1_000 + shift,
                    ..Synth::default()
                },
            );
            args.push(format!("--{side}"));
            args.push(dir.to_str().unwrap().to_string());
        }
    }
    args
}

fn run(tmp: &Path, n: usize, extra: &[&str]) -> Run {
    let mut args = vec!["compare".to_string()];
    args.extend(sides(tmp, n));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    analyze(&args)
}

#[test]
fn a_gated_test_is_judged_within_the_gate_and_the_report_keeps_the_whole_family() {
    // Three rollouts a side: decode's rollout medians sit at about
    // 300 + {0, 200, 400} µs in A and 500 µs more in B, so the tested Δ is
    // +500 µs with S² = 40,000 µs² a side: se ≈ √(2 · 40,000 / 3) = 163 µs
    // at ν ≈ 4, t ≈ 3.06, p ≈ 0.037. Alone in the gate's family (Holm over
    // one test at α 0.05) that is worse; Holm over the comparison's whole
    // family (tens of tests) is not.
    let tmp = tempfile::tempdir().unwrap();
    let r = run(
        tmp.path(),
        3,
        &["--json", "--gate", DECODE, "--fail-on", "worse"],
    );
    assert_eq!(r.code, 5, "{}", r.stderr);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    let m = c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["metric"] == "stage_wall" && m["stage"] == "adapter_decode" && m["phase"] == "running"
        })
        .unwrap();
    let p = m["p_median"].as_f64().unwrap();
    assert!(p > 0.01 && p < 0.05, "{p}");
    assert_eq!(m["verdict_median"], "no_clear_change", "{m}");
    let g = &c["gate"];
    assert_eq!(g["named"], true);
    assert_eq!(g["tests"].as_array().unwrap().len(), 1);
    assert_eq!(g["tests"][0]["name"], DECODE);
    assert_eq!(g["tests"][0]["verdict"], "worse", "{g}");
    assert_eq!(g["tests"][0]["p_holm"].as_f64().unwrap(), p);
    // The gate's message reads the gate's verdict; "what moved" the
    // family's.
    assert!(
        r.stderr.contains(&format!("{DECODE} (worse:")),
        "{}",
        r.stderr
    );
    let r = run(tmp.path(), 3, &["--gate", DECODE, "--fail-on", "worse"]);
    assert!(
        r.stdout.contains("what moved: nothing beyond noise"),
        "{}",
        r.stdout
    );
}

#[test]
fn the_looks_record_more_rollouts_while_undecided_and_stop_at_a_decision() {
    // α 0.05 over three looks: 0.0167 each (Bonferroni). Look 1, 3
    // rollouts a side: t ≈ 3.06 at ν ≈ 4 is short of t_{1−0.0083}(4) ≈ 4.3;
    // the detectable shift, (4.3 + 0.94) · 163 ≈ 860 µs, is above the
    // 300 µs asked: undecided, exit 6, with the rollouts that would decide
    // it. Look 2, 6 rollouts a side: S² = 23,750 µs², se ≈ 89 µs at ν ≈ 10,
    // t ≈ 5.6: worse, exit 5, and the workflow stops there.
    let tmp = tempfile::tempdir().unwrap();
    let gate = [
        "--gate",
        DECODE,
        "--alpha",
        "0.0167",
        "--fail-on",
        "undecided",
        "--min-effect",
        "running/stage_wall/adapter_decode:median=0.3",
    ];
    let r = run(tmp.path(), 3, &gate);
    assert_eq!(r.code, 6, "{}\n{}", r.stderr, r.stdout);
    assert!(r.stderr.contains("gate undecided"), "{}", r.stderr);
    assert!(
        r.stderr.contains("more than the 0.300 ms it must see"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("rollouts a side would decide it"),
        "{}",
        r.stderr
    );
    let mut json = gate.to_vec();
    json.push("--json");
    let r = run(tmp.path(), 3, &json);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    let t = &c["gate"]["tests"][0];
    assert_eq!(t["undecided"], true, "{t}");
    // The rollouts that would bring the detectable shift to 300 µs at
    // the measured spread: se 163 · √(3 / R') at ν' = 2R' − 2; at R' = 11,
    // (2.72 + 0.86) · 85 ≈ 304 µs, so about 11 or 12 (look 2 decides
    // earlier: its 500 µs shift is above what it needed to see).
    let need = t["rollouts_to_decide"].as_u64().unwrap();
    assert!((9..=14).contains(&need), "{t}");
    let r = run(tmp.path(), 6, &gate);
    assert_eq!(r.code, 5, "{}\n{}", r.stderr, r.stdout);
    assert!(
        r.stderr.contains(&format!("{DECODE} (worse:")),
        "{}",
        r.stderr
    );
    // With --fail-on worse an undecided gate passes; its Markdown says
    // what the test could not see.
    let md = tmp.path().join("summary.md");
    let mut worse = gate[..4].to_vec();
    worse.extend(["--fail-on", "worse", "--min-effect", gate[7]]);
    worse.extend(["--markdown", md.to_str().unwrap()]);
    let r = run(tmp.path(), 3, &worse);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("undecided: a shift of"), "{md}");
    // Undecided needs the effect named: without --min-effect, a usage
    // error (under load, three rollouts a side cannot see twice any
    // recommended test's noise floor, so no default would mean anything:
    // docs/compare.md, The gate under load).
    let r = run(tmp.path(), 3, &["--gate", DECODE, "--fail-on", "undecided"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--fail-on undecided needs"),
        "{}",
        r.stderr
    );
    // An --alpha above the 95 % intervals' 0.05 is refused by name.
    let r = run(tmp.path(), 3, &["--alpha", "0.1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--alpha 0.1"), "{}", r.stderr);
}
