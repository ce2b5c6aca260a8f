//! A declared compute budget and deadline tolerance (docs/metrics.md,
//! Budget and tolerance) on a hand-built episode whose every figure is
//! derived by hand below; evidence that declares neither reads as before
//! (the goldens hold that byte for byte).

use super::*;
use serde_json::json;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;
const T0: u64 = 1_000_000_000_000;
const P: u64 = 10 * MS;

/// Cycle `i` of `running`: released at T0 + i·P, started `lag` after,
/// working `work`.
fn cycle(i: u64, lag: u64, work: u64, overdue: bool) -> String {
    let target = T0 + i * P;
    let start = target + lag;
    json!({"type": "cycle", "cycle": i, "phase": "running", "start_ns": start,
        "end_ns": start + work, "target_ns": target, "sleep_start_ns": target - 5 * MS,
        "wake_ns": start, "overdue": overdue, "skipped": 0, "spans_dropped": 0,
        "values": {}, "spans": []})
    .to_string()
}

#[test]
fn budget_overruns_completion_misses_and_late_starts_match_the_hand_derived_answer() {
    // P = 10 ms (the v1 fixture's header), a declared budget of 2 ms and
    // tolerance of 1 ms. Cycles (lag, work), in ms:
    //   0: (0, 1)
    //   1: (0.5, 2.5)   over the budget by 0.5
    //   2: (2, 1)       a late start: lag 2 > 1 (tolerance)
    //   3: (0, 11.5)    over the budget by 9.5; ends at its release + 11.5,
    //                   past the next release + 1: a completion miss by 0.5
    //   4: (1.6, 1)     overdue (cycle 3 ended 1.5 ms into its period)
    //   5: (0, 1)
    // Budget overruns: 2 of 6 = 0.3333, excess p99 (2nd of 2) = max = 9.5
    // ms. Completion misses: 1 of 6 = 0.1667, excess 0.5 ms. Late (overdue
    // or lag over the tolerance) among the 5 judged: cycles 2 and 4, each
    // after work over the budget: the work itself, against the declared
    // budget.
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("v1/serve-episode/control_timing.jsonl")).unwrap();
    let mut h: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    h["compute_budget_ns"] = json!(2 * MS);
    h["deadline_tolerance_ns"] = json!(MS);
    let rows = [
        (0, MS, false),
        (500 * US, 2_500 * US, false),
        (2 * MS, MS, false),
        (0, 11_500 * US, false),
        (1_600 * US, MS, true),
        (0, MS, false),
    ];
    let mut lines = vec![h.to_string()];
    for (i, &(lag, work, overdue)) in rows.iter().enumerate() {
        lines.push(cycle(i as u64, lag, work, overdue));
    }
    std::fs::write(
        tmp.path().join("control_timing.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();
    let r = analyze_json(tmp.path(), &[]);
    let b = &r["budget"];
    assert_eq!(
        (&b["compute_budget_ns"], &b["deadline_tolerance_ns"]),
        (&json!(2 * MS), &json!(MS))
    );
    let p = &b["phases"][0];
    let over = &p["budget_overruns"];
    assert_eq!(
        (&over["judged"], &over["count"], &over["share"]),
        (&json!(6), &json!(2), &json!(0.3333))
    );
    assert_eq!(
        (&over["excess"]["p99_ns"], &over["excess"]["max_ns"]),
        (&json!(9_500 * US), &json!(9_500 * US))
    );
    let miss = &p["completion_misses"];
    assert_eq!(
        (&miss["count"], &miss["share"], &miss["excess"]["max_ns"]),
        (&json!(1), &json!(0.1667), &json!(500 * US))
    );
    let l = &r["late_cycles"];
    assert_eq!(
        (
            &l["budget_ns"],
            &l["late_start_threshold_ns"],
            &l["late"],
            &l["work_over_budget"]
        ),
        (&json!(2 * MS), &json!(MS), &json!(2), &json!(2))
    );
    assert_eq!(
        (&l["budget_declared"], &l["tolerance_declared"]),
        (&json!(true), &json!(true))
    );
    let diagnosis = r["diagnosis"].to_string();
    assert!(
        diagnosis.contains("exceeded the declared 2.000 ms compute budget")
            && diagnosis.contains("(the declared deadline tolerance)"),
        "{diagnosis}"
    );
    // The card judges both shares (33.33 % and 16.67 % > 1 %: fail).
    let card = r["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["phase"] == "running")
        .unwrap();
    let check = |name: &str| {
        card["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .cloned()
    };
    assert_eq!(check("budget_overruns").unwrap()["state"], "fail", "{card}");
    assert_eq!(
        check("completion_misses").unwrap()["value"],
        16.6667,
        "{card}"
    );
    // The text carries the section.
    let t = analyze(&["--episode", tmp.path().to_str().unwrap()]);
    assert!(
        t.stdout.contains(
            "budget and tolerance (declared): compute budget 2.000 ms, deadline tolerance 1.000 ms"
        ) && t.stdout.contains(
            "2 of 6 cycles over the compute budget (33.33 %); excess p99 9.500 ms, max 9.500 ms"
        ),
        "{}",
        t.stdout
    );
    // fleet carries the counts and rates per 1,000 judged cycles: 2 of 6
    // is 333.33…, 1 of 6 is 166.66….
    let out = tempfile::tempdir().unwrap();
    analyze(&[
        "fleet",
        tmp.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let csv = std::fs::read_to_string(out.path().join("fleet.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    // The one row's fields from `budget_overruns` on, split from the right
    // (the caveats before them hold commas, quoted; these never do).
    let first = header.iter().position(|h| *h == "budget_overruns").unwrap();
    let n = header.len() - first;
    let mut tail: Vec<&str> = lines.next().unwrap().rsplitn(n + 1, ',').take(n).collect();
    tail.reverse();
    let field = |name: &str| {
        let i = header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no {name}: {csv}"));
        tail[i - first]
    };
    assert_eq!(
        (field("budget_overruns"), field("completion_misses")),
        ("2", "1"),
        "{csv}"
    );
    let rate = |name: &str| field(name).parse::<f64>().unwrap();
    assert!((rate("budget_overruns_per_1000") - 2000.0 / 6.0).abs() < 1e-9);
    assert!((rate("completion_misses_per_1000") - 1000.0 / 6.0).abs() < 1e-9);
    // Undeclared, none of it: no budget section, no such checks.
    let r = analyze_json(&fixture("v1/serve-episode"), &[]);
    assert!(r.get("budget").is_none());
    assert!(!r.to_string().contains("budget_overruns"));
}

/// An episode of `n` running cycles on time, work 1 ms, except every
/// `every`-th cycle (0: none) working 3 ms; a 2 ms budget and a 1 ms
/// tolerance declared.
fn declared_episode(dir: &Path, n: u64, every: u64) {
    let text = std::fs::read_to_string(fixture("v1/serve-episode/control_timing.jsonl")).unwrap();
    let mut h: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    h["compute_budget_ns"] = json!(2 * MS);
    h["deadline_tolerance_ns"] = json!(MS);
    let mut lines = vec![h.to_string()];
    for i in 0..n {
        let work = if every > 0 && i % every == every - 1 {
            3 * MS
        } else {
            MS
        };
        lines.push(cycle(i, 0, work, false));
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("control_timing.jsonl"), lines.join("\n") + "\n").unwrap();
}

#[test]
fn compare_tests_the_declared_budget_and_its_gate_trips_on_it() {
    // A: 1,200 cycles all within the 2 ms budget; B: every 5th over it
    // (200 per 1,000 cycles). Both declared it, so both rates are tested:
    // budget overruns worse (+200 per 1,000, far above the floor of 1),
    // completion misses (none: 3 ms of work ends long before the next
    // release + 1 ms) no clear change; the gate names the rate's test.
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    declared_episode(&a, 1200, 0);
    declared_episode(&b, 1200, 5);
    let r = analyze(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    let rate = |m: &str| running_rate(&c, m);
    let over = rate("budget_overrun");
    assert_eq!(
        (&over["a_per_1000"], &over["b_per_1000"]),
        (&json!(0.0), &json!(200.0))
    );
    assert_eq!(over["verdict"], "worse", "{over}");
    assert_eq!(rate("completion_miss")["verdict"], "no_clear_change");
    let g = analyze(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--fail-on",
        "worse",
        "--gate",
        "running/budget_overrun:rate",
    ]);
    assert_eq!(g.code, 5, "{}", g.stderr);
    // A side that declares nothing has no such series: not tested.
    let plain = analyze(&[
        "compare",
        fixture("v1/serve-episode").to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(!plain.stdout.contains("budget_overrun"), "{}", plain.stdout);
}

#[test]
fn on_the_spiky_config_the_stage_caption_says_what_the_diagnosis_counts() {
    // The shipped spiky config (the executor spends 12 ms in 3 % of its
    // cycles), recorded for 1 s: whatever the loaded host makes of it, the
    // HTML stage caption follows the diagnosis and its counts, and the
    // period plot's overrun legend never says the period is long.
    let _g = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let config = repo().join("configs/spiky.toml");
    let ep = serve(
        &["--config", config.to_str().unwrap(), "--duration", "1"],
        tmp.path(),
    );
    let r = analyze_json(&ep, &[]);
    let html = tmp.path().join("html");
    let h = analyze(&[
        "--episode",
        ep.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let page = std::fs::read_to_string(html.join("report.html")).unwrap();
    let l = &r["late_cycles"];
    let verdict = r["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| c["diagnosis"]["verdict"].as_str())
        .unwrap_or("");
    match verdict {
        "scheduling" => {
            let (woke, over) = (&l["late_wake"], &l["work_over_budget"]);
            let want = if over == 0 {
                format!("every late cycle ({woke}) followed work within its budget")
            } else {
                format!("{woke} late cycles followed work within its budget")
            };
            assert!(page.contains(&want), "wanted {want:?} for {l}");
            if over != 0 {
                assert!(page.contains(&format!("{over} followed work longer than the budget")));
            }
            assert!(!page.contains("the work fits its budget"));
        }
        "the work itself" => assert!(page.contains("The diagnosis is the work itself")),
        _ => assert!(page.contains("no cycle is late") || verdict.is_empty()),
    }
    let svg = std::fs::read_to_string(html.join("period_timeline.svg")).unwrap();
    assert!(
        !svg.contains("its period is long"),
        "the old legend is back"
    );
}

#[test]
fn a_card_that_fails_on_its_budget_names_the_budget_on_every_surface() {
    // 200 running cycles on time, every one working 3 ms against a
    // declared 2 ms budget: the rate, p99 period and overruns all pass;
    // 200 of 200 over the budget (100 % > the 1 % warn share) fail the
    // card. The card's words, which the text, the gate's message, the
    // Markdown and the JUnit failure all print, name that check.
    let tmp = tempfile::tempdir().unwrap();
    declared_episode(tmp.path(), 200, 1);
    let (md, xml) = (tmp.path().join("s.md"), tmp.path().join("t.xml"));
    let r = analyze(&[
        "--episode",
        tmp.path().to_str().unwrap(),
        "--fail-on",
        "fail",
        "--markdown",
        md.to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    let named = "FAIL (over the compute budget 100.00 %)";
    assert!(
        r.stdout.contains(&format!("running: {named}")),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains(named), "{}", r.stderr);
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains(named), "{md}");
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(xml.contains(named), "{xml}");
    // The figure itself stands in the words too.
    assert!(
        r.stdout
            .contains("100.00 % of cycles over the compute budget"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_header_budget_beyond_ten_seconds_is_read_as_undeclared_and_named() {
    // The scheduler's undeclared sentinel written through as a budget
    // (2^64 − 1 ns) and a tolerance of 2^63 ns, on 20 healthy cycles (lag
    // 0, work 1 ms). Before: 20 of 20 cycles over the budget is not
    // possible, but the tolerance's 2^63 made every completion check
    // wrap (198 of 200 misses in the run). Now both are read as
    // undeclared: no budget block figures, the card judged on the period,
    // and a caveat that names each field.
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("v1/serve-episode/control_timing.jsonl")).unwrap();
    let mut h: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    h["compute_budget_ns"] = json!(u64::MAX);
    h["deadline_tolerance_ns"] = json!(1u64 << 63);
    let mut lines = vec![h.to_string()];
    for i in 0..20 {
        lines.push(cycle(i, 0, MS, false));
    }
    std::fs::write(
        tmp.path().join("control_timing.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();
    let r = analyze_json(tmp.path(), &[]);
    let b = &r["budget"];
    assert!(
        b.is_null() || (b["compute_budget_ns"].is_null() && b["deadline_tolerance_ns"].is_null()),
        "{b}"
    );
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains("compute_budget_ns = 18446744073709551615 ns")
            && caveats.contains("deadline_tolerance_ns = 9223372036854775808 ns")
            && caveats.contains("read as undeclared"),
        "{caveats}"
    );
    let card = r["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["phase"] == "running")
        .unwrap();
    assert_ne!(card["state"], "fail", "{card}");
}
