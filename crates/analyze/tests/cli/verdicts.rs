//! The comparison's verdicts that need at least 1,000 samples a side
//! (`MIN_SAMPLES_FOR_P99_VERDICT`): p99 worse and better, mixed both ways,
//! the noise-floor boundary, Holm over median and p99 tests, the
//! late-start rate, `period` judged on |period − nominal|, and the
//! warnings. Every pair is synthetic (tests/cli/synthetic.rs), so each
//! expected figure follows from the generator's numbers, written next to
//! it, and no verdict depends on the machine's load.

use super::*;
use synthetic::{write, Synth};

/// Cycles a side: above the 1,000 a p99 verdict needs.
const N: u64 = 1_200;

fn base() -> Synth {
    Synth {
        cycles: N,
        ..Synth::default()
    }
}

fn pair(a: &Synth, b: &Synth) -> (tempfile::TempDir, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let (da, db) = (
        write(&tmp.path().join("a"), a),
        write(&tmp.path().join("b"), b),
    );
    let r = analyze(&[
        "compare",
        da.to_str().unwrap(),
        db.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    (tmp, serde_json::from_str(&r.stdout).unwrap())
}

fn decode(c: &Value) -> &Value {
    c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["phase"] == "running" && m["metric"] == "stage_wall" && m["stage"] == "adapter_decode"
        })
        .unwrap()
}

/// A 2 % tail of +2 ms in adapter_decode: every 50th cycle (24 of 1,200,
/// more than the 12 above the p99), so the p99 moves by about 2 ms and
/// the median (the same stream elsewhere) by at most a few µs.
fn with_tail() -> Synth {
    Synth {
        decode_tail_every: 50,
        decode_tail_ns: 2_000_000,
        ..base()
    }
}

#[test]
fn a_tail_alone_is_a_p99_verdict_worse_one_way_and_better_the_other() {
    let (_t, c) = pair(&base(), &with_tail());
    let d = decode(&c);
    assert!(
        !d["p_p99"].is_null(),
        "p99 is tested above 1,000 samples: {d}"
    );
    // The median's move: 24 cycles of the same stream moved up by 2 ms,
    // so B's median is A's value at rank 600 shifted by at most 24 ranks
    // of a ±60 µs uniform spread: well below the 20 µs floor.
    assert!(d["diff_median_ns"].as_i64().unwrap().abs() < 20_000, "{d}");
    // The p99's: A's p99 is within the ±60 µs spread (at most 360 µs);
    // B's is a tail value, at least 2 ms + 240 µs.
    assert!(d["diff_p99_ns"].as_i64().unwrap() > 1_800_000, "{d}");
    assert_eq!(d["verdict"], "worse", "{d}");
    let (_t, c) = pair(&with_tail(), &base());
    assert_eq!(decode(&c)["verdict"], "better", "{}", decode(&c));
}

#[test]
fn a_median_and_a_p99_moving_apart_are_mixed_both_ways() {
    // B: every decode 100 µs more (median +100,000 ns exactly, same
    // stream; above the 20 µs floor) and no tail. A: the 2 % tail. So B's
    // median is worse and its p99 better (by about 2 ms − 100 µs).
    let b = Synth {
        decode_extra_ns: 100_000,
        ..base()
    };
    let (_t, c) = pair(&with_tail(), &b);
    let d = decode(&c);
    assert!(d["diff_median_ns"].as_i64().unwrap() > 80_000, "{d}");
    assert!(d["diff_p99_ns"].as_i64().unwrap() < -1_500_000, "{d}");
    assert_eq!(d["verdict"], "mixed", "{d}");
    // The reverse: median better, p99 worse.
    let (_t, c) = pair(&b, &with_tail());
    assert_eq!(decode(&c)["verdict"], "mixed", "{}", decode(&c));
}

#[test]
fn the_median_noise_floor_is_20_us_here() {
    // A's decode median is about 300 µs, so the floor is max(5 % of it,
    // 20 µs) = 20 µs. B is A's stream plus a constant: the median moves by
    // exactly that constant, with p far below 0.05 (no spread in the
    // shift). 19,999 ns is under the floor; 20,000 is on it.
    for (extra, want) in [(19_999, "no_clear_change"), (20_000, "worse")] {
        let b = Synth {
            decode_extra_ns: extra,
            ..base()
        };
        let (_t, c) = pair(&base(), &b);
        let d = decode(&c);
        assert_eq!(d["diff_median_ns"], extra, "{d}");
        assert!(d["p_median_holm"].as_f64().unwrap() < 0.05, "{d}");
        // The p99 moves by the same constant, under its own floor
        // (max(25 % of A's p99, 50 µs) ≥ 75 µs).
        assert_eq!(d["diff_p99_ns"], extra, "{d}");
        assert_eq!(d["verdict"], want, "+{extra} ns: {d}");
    }
}

#[test]
fn holm_runs_over_every_median_p99_and_rate_test_of_the_comparison() {
    let (_t, c) = pair(&base(), &with_tail());
    // The family in the documented order: each metric's median test, then
    // its p99 test when it has one, then each rate's test, then each loop
    // and command Hz test.
    let mut family: Vec<(f64, f64)> = Vec::new();
    for m in c["metrics"].as_array().unwrap() {
        family.push((
            m["p_median"].as_f64().unwrap(),
            m["p_median_holm"].as_f64().unwrap(),
        ));
        if !m["p_p99"].is_null() {
            family.push((
                m["p_p99"].as_f64().unwrap(),
                m["p_p99_holm"].as_f64().unwrap(),
            ));
        }
    }
    for r in c["rates"].as_array().unwrap() {
        family.push((r["p"].as_f64().unwrap(), r["p_holm"].as_f64().unwrap()));
    }
    let hz = c["hz"].as_array().unwrap();
    assert!(!hz.is_empty());
    for h in hz {
        family.push((h["p"].as_f64().unwrap(), h["p_holm"].as_f64().unwrap()));
    }
    assert_eq!(c["multiplicity"]["tests"], family.len() as u64);
    assert!(family.len() > 20, "{}", family.len());
    // Holm, recomputed here from its definition: sort the p-values, the
    // k-th smallest (0-based) is multiplied by (m − k), capped at 1, and
    // each adjusted value is at least the one before it.
    let m = family.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| family[i].0.total_cmp(&family[j].0));
    let mut running: f64 = 0.0;
    let mut want = vec![0.0; m];
    for (k, &i) in order.iter().enumerate() {
        running = running.max(((m - k) as f64 * family[i].0).min(1.0));
        want[i] = running;
    }
    for (i, (p, got)) in family.iter().enumerate() {
        assert!(
            (got - want[i]).abs() < 1e-9,
            "test {i}: p {p}, holm {got}, want {}",
            want[i]
        );
    }
}

#[test]
fn late_starts_are_a_rate_verdict() {
    // B starts every 20th cycle 2 ms late (60 of 1,200: 50 per 1,000), not
    // overdue; A never. The late-start threshold is 10 % of the 10 ms
    // period, 1 ms. Deadline misses stay at 0 on both sides.
    let b = Synth {
        late_every: 20,
        ..base()
    };
    let (_t, c) = pair(&base(), &b);
    let rate = |name: &str| {
        c["rates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["phase"] == "running" && r["metric"] == name)
            .unwrap_or_else(|| panic!("no rate {name}: {}", c["rates"]))
            .clone()
    };
    let late = rate("late_start");
    assert_eq!(late["threshold_ns"], 1_000_000, "{late}");
    assert_eq!(late["a_per_1000"], 0.0, "{late}");
    assert_eq!(late["b_per_1000"], 50.0, "{late}");
    assert_eq!(late["verdict"], "worse", "{late}");
    let miss = rate("deadline_miss");
    assert_eq!(
        (miss["a_per_1000"].as_f64(), miss["b_per_1000"].as_f64()),
        (Some(0.0), Some(0.0))
    );
    assert_eq!(miss["verdict"], "no_clear_change", "{miss}");
}

#[test]
fn period_is_judged_on_its_distance_from_the_nominal_period() {
    // Both sides have the same mean period (10 ms: starts scatter around
    // their release points). B scatters ±400 µs instead of ±25 µs, so
    // |period − nominal| grows: period is worse though loop Hz is not.
    let b = Synth {
        start_jitter_ns: 400_000,
        ..base()
    };
    let (_t, c) = pair(&base(), &b);
    let p = c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["phase"] == "running" && m["metric"] == "period")
        .unwrap();
    assert_eq!(p["judged_on"], "|period − nominal|", "{p}");
    // A: the difference of two u(0..50 µs) draws, median |.| about 15 µs;
    // B: of two u(0..800 µs) draws, about 234 µs.
    assert!(p["a"]["median_ns"].as_i64().unwrap() < 30_000, "{p}");
    assert!(p["b"]["median_ns"].as_i64().unwrap() > 150_000, "{p}");
    assert_eq!(p["verdict"], "worse", "{p}");
}

#[test]
fn warnings_name_a_different_source_or_host_and_a_side_of_two() {
    let other = Synth {
        source_hash: Some("sha256:other"),
        hostname: Some("other-host"),
        ..base()
    };
    let (_t, c) = pair(&base(), &other);
    let w = c["warnings"].to_string();
    assert!(w.contains("different source (source_hash differs)"), "{w}");
    assert!(w.contains("different hosts or kernels"), "{w}");
    // A side of two rollouts, the second of another host: both are said.
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    write(
        &a.join("rollout-000"),
        &Synth {
            cycles: 150,
            ..base()
        },
    );
    write(
        &a.join("rollout-001"),
        &Synth {
            cycles: 150,
            seed: 2,
            hostname: Some("other-host"),
            ..base()
        },
    );
    let b = write(
        &tmp.path().join("b"),
        &Synth {
            cycles: 150,
            ..base()
        },
    );
    let r = analyze(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    let w = c["warnings"].to_string();
    assert!(w.contains("A has 2 rollouts"), "{w}");
    assert!(w.contains("in hostname"), "{w}");
    assert!(w.contains("more than run-to-run noise"), "{w}");
}

/// The words of a comparison a newcomer misread: an untested p99 says so
/// in its cell, the header says the intervals are unadjusted, the seed
/// prints as the decimal `--help` takes, one rollout a side is warned
/// about, no zero prints as -0.000, and a session compared with itself is
/// "the same rollouts on both sides", not an A/A pair.
#[test]
fn a_comparison_says_what_it_did_not_test_and_what_it_compared() {
    let (sa, sb) = (fixture("v1/serve-episode"), fixture("v1/synthetic-basic"));
    let r = analyze(&["compare", sa.to_str().unwrap(), sb.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = &r.stdout;
    // Each side of these fixtures has fewer than 1,000 cycles.
    assert!(t.contains("not tested (n < 1,000)"), "{t}");
    assert!(
        t.contains("the intervals shown are each test's own, unadjusted"),
        "{t}"
    );
    // The default seed, 0x5EED1007, as --seed takes it.
    assert!(t.contains("seed 1592594439"), "{t}");
    // No negative zero at three decimals (an end below half a µs shows
    // six: -0.000400).
    for z in ["-0.000 ", "-0.000,", "-0.000]"] {
        assert!(!t.contains(z), "{t}");
    }
    assert!(
        t.contains("A has 1 rollout: the variance between runs is not measured"),
        "{t}"
    );
    let same = analyze(&[
        "compare",
        fixture("v1/serve-episode").to_str().unwrap(),
        fixture("v1/serve-episode").to_str().unwrap(),
    ]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(
        same.stdout.contains("the same rollouts on both sides"),
        "{}",
        same.stdout
    );
    assert!(!same.stdout.contains("A/A comparison"), "{}", same.stdout);
}

/// A comparison leads with what moved: a known +2 ms tail in
/// adapter_decode is the first test listed, before the warnings and the
/// full table, marked WORSE.
#[test]
fn a_comparison_leads_with_what_moved() {
    let tmp = tempfile::tempdir().unwrap();
    let (da, db) = (
        write(&tmp.path().join("a"), &base()),
        write(&tmp.path().join("b"), &with_tail()),
    );
    let r = analyze(&["compare", da.to_str().unwrap(), db.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = &r.stdout;
    let head = t.find("what moved: ").expect(t);
    assert!(head < t.find("\nwarnings").unwrap_or(usize::MAX), "{t}");
    assert!(head < t.find("\nmetrics (").unwrap(), "{t}");
    // The moved tests, each with its adjusted p, in ascending order; the
    // tail's own test among them.
    let block: Vec<&str> = t[head..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(
        block
            .iter()
            .any(|l| l.contains("stage_wall adapter_decode") && l.contains("WORSE")),
        "{block:?}"
    );
    let ps: Vec<f64> = block
        .iter()
        .map(|l| l.rsplit("p ").next().unwrap().trim().parse().unwrap())
        .collect();
    assert!(ps.windows(2).all(|w| w[0] <= w[1]), "{ps:?}");
    // With nothing moved, the headline says so.
    let r = analyze(&["compare", da.to_str().unwrap(), da.to_str().unwrap()]);
    assert!(
        r.stdout.contains("what moved: nothing beyond noise"),
        "{}",
        r.stdout
    );
}

/// Issue 47, point 7: the overlap rows that are zero on both sides (a
/// control stage that never ran while the thread worked) are folded into
/// one line of the text; the JSON keeps every row. The v2 serve fixture
/// against itself: 42 overlap metrics, of which 34 are all zero (the
/// camera reader's and the viewer transport's, and the policy worker's on
/// the stages it never overlapped), counted by the JSON below.
#[test]
fn zero_overlap_rows_are_folded_in_the_text_and_kept_in_the_json() {
    let ep = fixture("v2/serve-episode");
    let ep = ep.to_str().unwrap();
    let j = analyze(&["compare", ep, ep, "--json", "--resamples", "50"]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let c: Value = serde_json::from_str(&j.stdout).unwrap();
    let overlap: Vec<&Value> = c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["metric"].as_str().unwrap().starts_with("overlap:"))
        .collect();
    let zero = overlap
        .iter()
        .filter(|m| {
            ["a", "b"].iter().all(|s| {
                ["median_ns", "p99_ns", "p999_ns"]
                    .iter()
                    .all(|f| m[*s][*f] == 0)
            })
        })
        .count();
    assert!(
        zero > 0 && zero < overlap.len(),
        "{zero} of {}",
        overlap.len()
    );
    let t = analyze(&["compare", ep, ep, "--resamples", "50"]);
    let shown = t.stdout.lines().filter(|l| l.contains(" overlap:")).count();
    assert_eq!(shown, overlap.len() - zero, "{}", t.stdout);
    assert!(
        t.stdout
            .contains(&format!("({zero} overlap row(s) zero on both sides folded")),
        "{}",
        t.stdout
    );
    // The HTML table folds the same rows, with the same count.
    let dir = tempfile::tempdir().unwrap();
    let h = analyze(&[
        "compare",
        ep,
        ep,
        "--resamples",
        "50",
        "--html",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let page = std::fs::read_to_string(dir.path().join("compare.html")).unwrap();
    let rows = page.matches("<td class=\"l\">overlap:").count();
    assert_eq!(rows, overlap.len() - zero);
    assert!(page.contains(&format!("{zero} overlap row(s) zero on both sides folded")));
}
