//! Defects found by independent recomputation and fault injection (the
//! hardening issue), one test or more per point. Each failed before the fix.
//! Episodes are built here from a template header so that every expected
//! figure follows from the few numbers written below.

use super::*;
use serde_json::json;

const P: u64 = 10_000_000; // 100 Hz nominal period, ns
const T0: u64 = 1_000_000_000;

/// The serve fixture's header with the given tables and schedule facts.
fn header(
    stages: &[&str],
    phases: &[&str],
    values: &[(&str, &str)],
    nominal: Option<u64>,
    target_clock: &str,
    rtf: &str,
) -> Value {
    let text = std::fs::read_to_string(fixture("v1/serve-episode/control_timing.jsonl")).unwrap();
    let mut h: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    h["stages"] = stages
        .iter()
        .map(|s| json!({"name": s, "cpu_time": false}))
        .collect();
    h["phases"] = json!(phases);
    h["attributes"] = json!([{"key": "a", "values": ["1", "2"]}, {"key": "b", "values": ["x"]}]);
    h["value_defs"] = values
        .iter()
        .map(|(n, k)| json!({"name": n, "kind": k, "unit": "count"}))
        .collect();
    h["nominal_period_ns"] = json!(nominal);
    h["clocks"]["target_ns"] = json!(target_clock);
    h["metadata"] = json!({"rtf": rtf});
    h
}

fn cycle(i: u64, phase: &str, start: u64, work: u64) -> Value {
    json!({"type": "cycle", "cycle": i, "phase": phase, "start_ns": start,
           "end_ns": start + work, "values": {}, "spans": [
               {"stage": "executor", "depth": 0, "start_ns": start, "wall_ns": work}]})
}

/// Write an episode directory (JSONL only, plus `extra` files).
fn episode(lines: &[Value]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(tmp.path().join("control_timing.jsonl"), text).unwrap();
    tmp
}

fn default_header() -> Value {
    header(
        &["executor", "camera_read", "policy"],
        &["running"],
        &[("robot_state_seq", "int"), ("rate", "float")],
        Some(P),
        "host_monotonic",
        "1",
    )
}

/// A 100 Hz rebase schedule: `work(i)` per cycle and `wake_late(i)` added
/// to a cycle's wake. A cycle whose predecessor ended after its release
/// point is overdue and starts at that end; the schedule then re-phases
/// onto it. Otherwise it waits from the predecessor's end to its target and
/// starts 200 ns after the target (plus `wake_late`).
fn rebase_run(n: u64, work: impl Fn(u64) -> u64, wake_late: impl Fn(u64) -> u64) -> Vec<Value> {
    let mut out = vec![default_header()];
    let mut target = T0;
    let mut prev_end = T0 - P;
    for i in 0..n {
        let overdue = prev_end > target;
        let start = if overdue {
            prev_end
        } else {
            target + 200 + wake_late(i)
        };
        let mut c = cycle(i, "running", start, work(i));
        c["target_ns"] = json!(target);
        c["overdue"] = json!(overdue);
        if !overdue {
            c["sleep_start_ns"] = json!(prev_end);
            c["wake_ns"] = json!(start - 100);
        }
        out.push(c);
        prev_end = start + work(i);
        target = if overdue { start + P } else { target + P };
    }
    out
}

fn text(dir: &Path) -> Run {
    analyze(&["--episode", dir.to_str().unwrap()])
}

// ---- 8. exact integers ----

#[test]
fn int_values_above_2_53_stay_exact() {
    // seq 2^53+1, +2, +3 on adjacent cycles: nothing lost, min and max exact.
    // Through float64 these round to 2^53, 2^53+2, 2^53+4 and show a loss.
    let base: i64 = (1 << 53) + 1;
    let mut lines = vec![default_header()];
    for i in 0..3u64 {
        let mut c = cycle(i, "running", T0 + i * P, 1_000_000);
        c["values"] = json!({"robot_state_seq": base + i as i64});
        lines.push(c);
    }
    let ep = episode(&lines);
    let r = analyze_json(ep.path(), &[]);
    let v = &r["values"][0];
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["min"], json!(base));
    assert_eq!(v["max"], json!(base + 2));
    assert!(text(ep.path())
        .stdout
        .contains(&format!("max {}", base + 2)));
}

#[test]
fn a_mean_above_2_53_is_the_nearest_double_as_documented() {
    // One cycle with 2^53 + 1: the exact sum 2^53 + 1 becomes the nearest
    // double, 2^53 (ties to even), divided by 1; x·1e6 = 2^59·15625 is
    // exact, so the 1e-6 rounding changes nothing: mean = 9007199254740992
    // (docs/metrics.md, Caller values), while min and max stay exact.
    let base: i64 = (1 << 53) + 1;
    let mut c = cycle(0, "running", T0, 1_000_000);
    c["values"] = json!({"robot_state_seq": base});
    let ep = episode(&[default_header(), c]);
    let v = &analyze_json(ep.path(), &[])["values"][0];
    assert_eq!(v["mean"].as_f64(), Some(9_007_199_254_740_992.0), "{v}");
    assert_eq!(v["min"], json!(base));
}

#[test]
fn int_values_beyond_i64_are_refused_with_the_line() {
    let mut lines = vec![default_header()];
    let mut c = cycle(0, "running", T0, 1);
    c["values"] = json!({"robot_state_seq": u64::MAX});
    lines.push(c);
    let ep = episode(&lines);
    let r = text(ep.path());
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("control_timing.jsonl:2:"), "{}", r.stderr);
    assert!(r.stderr.contains("beyond the int range"), "{}", r.stderr);
    // A fraction in an int value is refused too, never truncated.
    lines[1]["values"] = json!({"robot_state_seq": 1.5});
    let r = text(episode(&lines).path());
    assert!(
        r.stderr.contains("declared int but holds 1.5"),
        "{}",
        r.stderr
    );
}

// ---- 9. range checks ----

#[test]
fn a_target_far_from_the_start_is_refused_as_absurd() {
    let mut lines = vec![default_header()];
    let mut c = cycle(0, "running", T0, 1);
    c["target_ns"] = json!(i64::MAX);
    lines.push(c);
    let r = text(episode(&lines).path());
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stderr.contains(":2:") && r.stderr.contains("deadline lag"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("absurd"), "{}", r.stderr);
}

#[test]
fn a_zero_nominal_period_is_no_period_and_never_inf_hz() {
    let mut lines = rebase_run(5, |_| 1_000_000, |_| 0);
    lines[0]["nominal_period_ns"] = json!(0);
    let ep = episode(&lines);
    let r = text(ep.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains("inf"), "{}", r.stdout);
    assert!(r.stdout.contains("nominal_period_ns is 0"), "{}", r.stdout);
    let j = analyze_json(ep.path(), &[]);
    assert!(j["capture"]["nominal_period_ns"].is_null());
}

// ---- 10. summary cross-check ----

fn doctored_summary(edit: impl FnOnce(&mut Value)) -> Value {
    let tmp = damaged("v1/serve-episode", joined);
    let p = tmp.path().join("control_timing_summary.json");
    let mut s: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut s);
    std::fs::write(&p, s.to_string()).unwrap();
    analyze_json(tmp.path(), &[])
}

fn mismatched(r: &Value) -> Vec<String> {
    r["crosscheck"]["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["figure"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_cross_check_compares_stage_counts_and_segment_phases() {
    let r = doctored_summary(|s| {
        let c = s["stages"][0]["count"].as_u64().unwrap();
        s["stages"][0]["count"] = json!(c + 1);
        s["segments"][0]["phase"] = json!("running");
    });
    let m = mismatched(&r);
    assert!(
        m.iter()
            .any(|f| f.ends_with("].count") && f.starts_with("stages[")),
        "{m:?}"
    );
    assert!(m.contains(&"segments[0].phase".to_string()), "{m:?}");
    let phase = r["crosscheck"]["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["figure"] == "segments[0].phase")
        .unwrap()
        .clone();
    assert_eq!(
        (phase["summary"].clone(), phase["recomputed"].clone()),
        (json!("running"), json!("warmup"))
    );
}

#[test]
fn loop_hz_is_held_to_the_documented_tolerance() {
    // docs/metrics.md: 1e-6 relative + 5e-5 Hz. At 100 Hz that is 1.5e-4 Hz;
    // an error of 1.8e-4 Hz must be flagged (the old 2e-4 let it pass) and
    // one of 1.2e-4 must not.
    let flagged = |delta: f64| {
        let r = doctored_summary(|s| {
            let hz = s["segments"][1]["loop_hz"].as_f64().unwrap();
            s["segments"][1]["loop_hz"] = json!(hz + delta);
        });
        mismatched(&r).contains(&"segments[1].loop_hz".to_string())
    };
    assert!(flagged(1.8e-4));
    assert!(!flagged(1.2e-4));
}

// ---- 11. diagnosis by per-cycle attribution ----

#[test]
fn rare_long_work_that_causes_every_overrun_is_blamed_on_the_work() {
    // 1,000 cycles of 3 ms work; cycles 50, 150, ..., 950 (1 %) work 30 ms,
    // so each following cycle is overdue (20 ms lag). Period p99 is then
    // 30 ms while work p99 is 3 ms: the old p99 cascade said "scheduling".
    let lines = rebase_run(
        1000,
        |i| if i % 100 == 50 { 30_000_000 } else { 3_000_000 },
        |_| 0,
    );
    let ep = episode(&lines);
    let r = analyze_json(ep.path(), &[]);
    let l = &r["late_cycles"];
    assert_eq!(l["late"], 10, "{l}");
    assert_eq!(l["work_over_budget"], 10);
    assert_eq!(l["late_wake"], 0);
    assert_eq!(l["stages"][0]["path"], "executor");
    assert_eq!(l["stages"][0]["cycles"], 10);
    let d = r["diagnosis"][0].as_str().unwrap();
    assert!(d.starts_with("running: the work itself"), "{d}");
    assert!(d.contains("dominated by executor (10 of 10)"), "{d}");
}

#[test]
fn late_wakes_after_short_work_are_blamed_on_scheduling() {
    // 3 ms work everywhere; 20 cycles wake 3 ms late (over the 1 ms
    // threshold, 10 % of the period) without being overdue.
    let lines = rebase_run(
        1000,
        |_| 3_000_000,
        |i| if i % 50 == 7 { 3_000_000 } else { 0 },
    );
    let r = analyze_json(episode(&lines).path(), &[]);
    let l = &r["late_cycles"];
    assert_eq!(
        (l["late"].clone(), l["late_wake"].clone()),
        (json!(20), json!(20)),
        "{l}"
    );
    assert_eq!(l["late_start_threshold_ns"], 1_000_000);
    let d = r["diagnosis"][0].as_str().unwrap();
    assert!(d.starts_with("running: scheduling"), "{d}");
    // The HTML's stage-breakdown caption follows the diagnosis: not "the
    // longest bar is the first thing to shorten" under a scheduling one.
    let ep = episode(&lines);
    let out = tempfile::tempdir().unwrap();
    let h = analyze(&[
        "--episode",
        ep.path().to_str().unwrap(),
        "--html",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let page = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(
        page.contains("The diagnosis is scheduling"),
        "no scheduling caption"
    );
    assert!(
        !page.contains("first thing to shorten"),
        "a caption contradicts the diagnosis"
    );
}

#[test]
fn an_uncapped_run_is_not_judged_against_the_nominal_period() {
    // rtf 0 on the simulation clock, one cycle every 3.02 ms (331 Hz).
    let mut lines = vec![header(
        &["executor"],
        &["running"],
        &[],
        Some(P),
        "simulation",
        "0",
    )];
    for i in 0..200 {
        let mut c = cycle(i, "running", T0 + i * 3_020_000, 3_000_000);
        c["target_ns"] = json!(i * P);
        lines.push(c);
    }
    let r = analyze_json(episode(&lines).path(), &[]);
    let d = r["diagnosis"][0].as_str().unwrap();
    assert!(d.contains("uncapped run"), "{d}");
    assert!(!d.contains("on rate"), "{d}");
    assert_eq!(r["pace"]["kind"], "uncapped");
}

#[test]
fn rtf_2_is_judged_against_the_effective_period() {
    // Nominal 10 ms at rtf 2: the schedule's period is 5 ms, and cycles
    // 5 ms apart are on rate.
    let mut lines = vec![header(
        &["executor"],
        &["running"],
        &[],
        Some(P),
        "host_monotonic",
        "2",
    )];
    for i in 0..100 {
        let mut c = cycle(i, "running", T0 + i * P / 2 + 200, 1_000_000);
        c["target_ns"] = json!(T0 + i * P / 2);
        lines.push(c);
    }
    let r = analyze_json(episode(&lines).path(), &[]);
    assert_eq!(r["pace"]["effective_ns"], 5_000_000);
    let d = r["diagnosis"][0].as_str().unwrap();
    assert!(
        d.contains("on rate") && d.contains("effective 5.000 ms"),
        "{d}"
    );
}

#[test]
fn a_tie_for_the_most_cycles_judges_the_phase_that_came_first() {
    // No `running` phase; `b` and `a` have 3 cycles each, `a` first.
    let mut lines = vec![header(
        &["executor"],
        &["b", "a"],
        &[],
        Some(P),
        "host_monotonic",
        "1",
    )];
    for i in 0..6u64 {
        lines.push(cycle(
            i,
            if i < 3 { "a" } else { "b" },
            T0 + i * P,
            1_000_000,
        ));
    }
    let r = analyze_json(episode(&lines).path(), &[]);
    assert_eq!(r["late_cycles"]["phase"], "a");
    assert!(r["diagnosis"][0].as_str().unwrap().starts_with("a: "));
}

// ---- 12. ambiguities, as documented ----

#[test]
fn lost_counts_only_adjacent_cycles_that_both_set_the_counter() {
    // seq set on cycles 0, 1, 3 (1, 2, 5): 1 → 2 loses nothing; cycle 2 did
    // not set it, so 2 … 5 is not an adjacent pair and is not counted.
    let mut lines = vec![default_header()];
    for (i, v) in [(0u64, Some(1)), (1, Some(2)), (2, None), (3, Some(5))] {
        let mut c = cycle(i, "running", T0 + i * P, 1);
        if let Some(v) = v {
            c["values"] = json!({"robot_state_seq": v});
        }
        lines.push(c);
    }
    let r = analyze_json(episode(&lines).path(), &[]);
    assert_eq!(r["values"][0]["lost"], 0);
    assert_eq!(r["values"][0]["count"], 3);
}

#[test]
fn distributions_are_signed_and_labels_sort_attributes_by_key() {
    // Cycle 1 starts 300 ns before its target: lag −300 stays negative.
    let mut lines = vec![default_header()];
    for i in 0..2u64 {
        let mut c = cycle(i, "running", T0 + i * P, 1_000);
        c["target_ns"] = json!(T0 + i * P + if i == 1 { 300 } else { 0 });
        c["spans"][0]["attrs"] = json!({"b": "x", "a": "2"});
        lines.push(c);
    }
    let ep = episode(&lines);
    let r = analyze_json(ep.path(), &[]);
    assert_eq!(r["phases"][0]["deadline_lag"]["min_ns"], -300);
    assert!(text(ep.path()).stdout.contains("executor [a=2,b=x]"));
}

#[test]
fn a_header_without_cycles_says_so_and_judges_nothing() {
    let ep = episode(&[default_header()]);
    let r = analyze_json(ep.path(), &[]);
    assert!(r["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c.as_str().unwrap().starts_with("no cycles")));
    assert_eq!(r["diagnosis"][0], "no cycles to judge");
}

// ---- 13. input edge cases ----

fn serve_copy(edit: impl FnOnce(Vec<u8>) -> Vec<u8>) -> tempfile::TempDir {
    let tmp = damaged("v1/serve-episode", joined);
    let p = tmp.path().join("control_timing.jsonl");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, edit(bytes)).unwrap();
    tmp
}

fn caveats(r: &Value) -> Vec<String> {
    r["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn crlf_blank_lines_and_a_bom_are_accepted_with_a_caveat_each_and_change_no_figure() {
    let plain = analyze_json(&fixture("v1/serve-episode"), &[]);
    let tmp = serve_copy(|b| {
        let text = String::from_utf8(b).unwrap();
        let mut out = String::from("\u{feff}");
        for (i, l) in text.lines().enumerate() {
            out.push_str(l);
            out.push_str("\r\n");
            if i == 10 {
                out.push_str("\r\n\r\n");
            }
        }
        out.into_bytes()
    });
    let r = analyze_json(tmp.path(), &[]);
    let c = caveats(&r);
    assert!(c.iter().any(|x| x.contains("byte-order mark")), "{c:?}");
    assert!(c.iter().any(|x| x.contains("CRLF")), "{c:?}");
    assert!(c.iter().any(|x| x.starts_with("2 blank line(s)")), "{c:?}");
    assert_eq!(r["phases"], plain["phases"]);
    assert_eq!(r["stages"], plain["stages"]);
}

#[test]
fn a_cycle_with_more_spans_than_the_header_allows_is_refused() {
    let mut lines = vec![default_header()];
    lines[0]["capacity"]["max_spans_per_cycle"] = json!(2);
    let mut c = cycle(0, "running", T0, 10);
    let s = c["spans"][0].clone();
    c["spans"] = json!([s, s, s]);
    lines.push(c);
    let r = text(episode(&lines).path());
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains(":2:") && r.stderr.contains("max_spans_per_cycle is 2"),
        "{}",
        r.stderr
    );
}

#[test]
fn header_problems_name_line_1() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            b"{\"type\":\"cycle\",\"cycle\":0,\"phase\":\"running\",\"start_ns\":1}\n".to_vec(),
            "header line",
        ),
        (
            b"{\"type\":\"header\",\"sch\xffema\":1}\n".to_vec(),
            "UTF-8",
        ),
        (
            format!(
                "{}\n",
                default_header()
                    .to_string()
                    .replace("\"schema_version\":1", "\"schema_version\":9")
            )
            .into_bytes(),
            "schema_version 9",
        ),
    ];
    for (bytes, needle) in cases {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("control_timing.jsonl"), bytes).unwrap();
        let r = text(tmp.path());
        assert_eq!(r.code, 2);
        assert!(
            r.stderr.contains("control_timing.jsonl:1:") && r.stderr.contains(needle),
            "{needle}: {}",
            r.stderr
        );
    }
}

/// A header that is JSON but of the wrong shape gets what a bad cycle line
/// gets: the field path, what was wrong, the column, and what to do; never
/// serde's bare "at line 1 column 53".
#[test]
fn header_field_errors_name_the_field_the_column_and_what_to_do() {
    let h = default_header();
    let mut wrong_type = h.clone();
    wrong_type["stages"][0]["name"] = 5.into();
    let mut bad_variant = h.clone();
    bad_variant["clocks"]["start_ns"] = "sundial".into();
    let mut missing = h.clone();
    missing["tsc"]
        .as_object_mut()
        .unwrap()
        .remove("ns_per_tick");
    let cases = [
        (
            wrong_type,
            "field `stages[0].name`: invalid type: integer `5`, expected a string (column ",
        ),
        (
            bad_variant,
            "field `clocks.start_ns`: unknown variant `sundial`",
        ),
        (missing, "field `tsc`: missing field `ns_per_tick` (column "),
    ];
    for (header, needle) in cases {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("control_timing.jsonl"),
            format!("{header}\n"),
        )
        .unwrap();
        let r = text(tmp.path());
        assert_eq!(r.code, 2, "{}", r.stderr);
        let err = r.stderr.trim();
        assert!(
            err.contains("control_timing.jsonl:1: the header: "),
            "{err}"
        );
        assert!(err.contains(needle), "{needle}: {err}");
        assert!(
            err.contains("restore the file as the recorder wrote it"),
            "{err}"
        );
        assert!(!err.contains("at line 1 column"), "{err}");
    }
    // Not JSON at all: the column, and the same kind of advice.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("control_timing.jsonl"),
        "{\"type\": header}\n",
    )
    .unwrap();
    let r = text(tmp.path());
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("control_timing.jsonl:1: the header: not valid JSON at column 10")
            && r.stderr.contains("restore the file as it was written"),
        "{}",
        r.stderr
    );
}

#[test]
fn missing_manifest_and_leftover_temporaries_are_caveats() {
    let tmp = damaged("v1/serve-episode", joined);
    std::fs::remove_file(tmp.path().join("manifest.json")).unwrap();
    std::fs::write(tmp.path().join(".events.jsonl.4242.tmp"), b"{").unwrap();
    let c = caveats(&analyze_json(tmp.path(), &[]));
    assert!(c.iter().any(|x| x.starts_with("no manifest.json")), "{c:?}");
    assert!(
        c.iter()
            .any(|x| x.starts_with("an interrupted finish left .events.jsonl.4242.tmp")),
        "{c:?}"
    );
}

// ---- 14. terminal safety ----

#[test]
fn control_characters_in_names_never_reach_the_terminal() {
    let evil = "exec\u{1b}[31mutor\u{7}";
    let mut lines = vec![header(
        &[evil],
        &["running"],
        &[],
        Some(P),
        "host_monotonic",
        "1",
    )];
    let mut c = cycle(0, "running", T0, 10);
    c["spans"][0]["stage"] = json!(evil);
    lines.push(c);
    let ep = episode(&lines);
    let r = text(ep.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains('\u{1b}') && !r.stdout.contains('\u{7}'));
    assert!(
        r.stdout.contains("exec\\u{1b}[31mutor\\u{7}"),
        "{}",
        r.stdout
    );
    // An error that quotes the name is made safe as well.
    lines[1]["spans"][0]["stage"] = json!("un\u{1b}]0;title\u{7}known");
    let r = text(episode(&lines).path());
    assert_eq!(r.code, 2);
    assert!(!r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
    assert!(r.stderr.contains("un\\u{1b}]0;title"), "{}", r.stderr);
}

// ---- 7. plot messages ----

#[test]
fn a_plot_that_cannot_be_written_is_one_sentence_naming_the_path() {
    let out = tempfile::tempdir().unwrap();
    let blocker = out.path().join("period_timeline.png");
    std::fs::create_dir(&blocker).unwrap();
    let r = analyze(&[
        "plots",
        fixture("v1/serve-episode").to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let msg = r.stderr.trim();
    assert_eq!(
        msg,
        format!(
            "error: cannot write plot {}: Is a directory (os error 21); free space or fix the permissions there, or pass another directory",
            blocker.display()
        )
    );
}

#[test]
fn a_recovered_episode_tells_the_cycle_lost_at_the_kill_from_ring_overflow() {
    // A summary as `looptime recover` writes it for a 70-cycle run killed
    // with one cycle in progress: the ring never wrapped (capacity 20000),
    // total 71 begun, 70 retained, so capture.dropped_cycles = 71 - 70 = 1,
    // and that one is the in-progress record, not overflow.
    let r = doctored_summary(|s| killed_with_one_in_progress(s, 1898756712776));
    assert_eq!(r["state"], "recovered");
    assert_eq!(r["capture"]["dropped_cycles"], 0, "no ring overflow");
    assert_eq!(r["capture"]["lost_at_kill"], 1);
    let said = caveats(&r);
    assert!(!said.iter().any(|c| c.starts_with("ring full")), "{said:?}");
    assert!(
        said.iter()
            .any(|c| c.starts_with("lost at the kill: 1 cycle(s)")),
        "{said:?}"
    );
    // A recovered ring that did wrap: 3 dropped by overflow besides the one
    // in progress (dropped_cycles 4 in the summary).
    let r = doctored_summary(|s| {
        s["status"] = "recovered".into();
        s["capture"]["dropped_cycles"] = 4.into();
        s["recovery"] = serde_json::json!({
            "ring_file": "r", "writer_pid": 1, "ring_state": "recording",
            "cycles_recovered": 70, "in_progress_records": 1, "torn_records": 0,
            "last_complete_cycle": 69, "last_complete_end_ns": 1898756712776u64
        });
    });
    assert_eq!(r["capture"]["dropped_cycles"], 3);
    assert!(caveats(&r)
        .iter()
        .any(|c| c.starts_with("ring full: 3 earlier")));
    // A complete episode has no lost_at_kill field at all.
    let r = doctored_summary(|_| {});
    assert!(r["capture"].get("lost_at_kill").is_none());
}

#[test]
fn write_errors_state_the_os_error_once_and_exit_3() {
    // --output into a missing directory.
    let ep = fixture("v1/serve-episode");
    let r = analyze(&[
        "--episode",
        ep.to_str().unwrap(),
        "--json",
        "--output",
        "/nonexistent/x.json",
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(
        r.stderr.trim(),
        "error: cannot write /nonexistent/x.json: No such file or directory (os error 2)"
    );
    // stdout is a pipe whose reader is gone before the analyzer starts: it
    // ends as `cat` does, by SIGPIPE, quietly (a closed pipe is the
    // reader's choice, not a failed write; tests/cli/gate.rs holds it for
    // a reader that goes away mid-stream).
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_analyze_control_timing"))
        .args(["--episode", ep.to_str().unwrap()])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{stderr}");
    assert_eq!(stderr.trim(), "");
}

#[test]
fn an_html_report_that_cannot_be_written_exits_3_naming_the_file() {
    // report.html's place is taken by a directory: the page cannot be
    // written, exit 3, one line naming it with the OS error once.
    let out = tempfile::tempdir().unwrap();
    let blocker = out.path().join("report.html");
    std::fs::create_dir(&blocker).unwrap();
    let r = analyze(&[
        "--episode",
        fixture("v1/serve-episode").to_str().unwrap(),
        "--html",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(
        r.stderr.trim(),
        format!(
            "error: cannot write {}: Is a directory (os error 21)",
            blocker.display()
        )
    );
}

/// A plot whose file cannot be written on a full disk: the file opens, the
/// write fails with ENOSPC. `/dev/full` behaves exactly so, behind a link in
/// the plot's place. Both the report's and the comparison's HTML must exit 3
/// with one line: the file, the OS error once, what to do, and none of
/// plotters' debug chain (`ImageError(IoError(Custom { .. }))`).
#[test]
fn a_plot_on_a_full_disk_exits_3_with_one_line_naming_the_os_error_once() {
    let ep = fixture("v1/serve-episode");
    let ep = ep.to_str().unwrap();
    for (args, plot) in [
        (vec!["--episode", ep], "period_timeline.png"),
        (vec!["compare", ep, ep], "compare_period_cdf.png"),
    ] {
        let out = tempfile::tempdir().unwrap();
        let full = out.path().join(plot);
        std::os::unix::fs::symlink("/dev/full", &full).unwrap();
        let mut args = args.clone();
        args.extend(["--html", out.path().to_str().unwrap()]);
        let r = analyze(&args);
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        let err = r.stderr.trim();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("error: cannot write plot {}: ", full.display())),
            "{err}"
        );
        assert_eq!(
            err.matches("No space left on device (os error 28)").count(),
            1,
            "{err}"
        );
        assert!(err.ends_with("or pass another directory"), "{err}");
        assert!(
            !err.contains("Error(") && !err.contains("Custom {"),
            "{err}"
        );
    }
}

/// Edit a 70-cycle summary `s` as `looptime recover` writes it for a run
/// killed with one cycle in progress (ending at `last_end_ns`): 71 begun,
/// 70 retained, so `capture.dropped_cycles` = 71 − 70 = 1.
fn killed_with_one_in_progress(s: &mut Value, last_end_ns: u64) {
    s["status"] = "recovered".into();
    s["capture"]["total_cycles"] = 71.into();
    s["capture"]["dropped_cycles"] = 1.into();
    s["recovery"] = serde_json::json!({
        "ring_file": "/dev/shm/looptime-1-x.ring", "writer_pid": 1, "ring_state": "recording",
        "cycles_recovered": 70, "in_progress_records": 1, "torn_records": 0,
        "last_complete_cycle": 69, "last_complete_end_ns": last_end_ns
    });
}

/// The v2 serve fixture with its `policy_worker` thread's summary edited as
/// `recover` writes it for a thread killed with one cycle in progress:
/// 70 retained of 71 begun, so its `dropped_cycles` is 71 − 70 = 1, and
/// that one is the in-progress record, not overflow.
fn recovered_thread_episode() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_episode(&fixture("v2/serve-episode"), tmp.path());
    let p = tmp.path().join("control_timing_summary.policy_worker.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    killed_with_one_in_progress(&mut s, 25869999565642);
    std::fs::write(&p, serde_json::to_vec_pretty(&s).unwrap()).unwrap();
    tmp
}

#[test]
fn a_recovered_threads_cycle_lost_at_the_kill_is_not_called_ring_drops_in_text_or_json() {
    let tmp = recovered_thread_episode();
    let r = analyze_json(tmp.path(), &[]);
    let t = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread"] == "policy_worker")
        .unwrap();
    assert_eq!(t["capture"]["dropped_cycles"], 0, "{t}");
    assert_eq!(t["capture"]["lost_at_kill"], 1, "{t}");
    let said = caveats(&r);
    assert!(
        !said.iter().any(|c| c.contains("its ring dropped")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|c| c.starts_with("thread policy_worker: lost at the kill: 1 cycle(s)")),
        "{said:?}"
    );
    // The text report says the same words.
    let text = analyze(&["--episode", tmp.path().to_str().unwrap()]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(!text.stdout.contains("its ring dropped"), "{}", text.stdout);
    assert!(text
        .stdout
        .contains("thread policy_worker: lost at the kill: 1 cycle(s)"));
}

/// A summary that counts values dropped for not being finite gets a caveat
/// naming the count; a count of 0 gets none.
#[test]
fn values_dropped_for_not_being_finite_are_named_in_a_caveat() {
    let r = doctored_summary(|s| s["capture"]["values_dropped"] = 3.into());
    assert_eq!(r["capture"]["values_dropped"], 3);
    assert!(
        caveats(&r)
            .iter()
            .any(|c| c.starts_with("3 value(s) were set to a number that is not finite")),
        "{:?}",
        caveats(&r)
    );
    let r = doctored_summary(|s| s["capture"]["values_dropped"] = 0.into());
    assert_eq!(r["capture"]["values_dropped"], 0);
    assert!(!caveats(&r).iter().any(|c| c.contains("not finite")));
}

/// A directory where a subcommand goes (`analyze_control_timing
/// runs/latest`) is refused as clap refuses it, with the command that
/// would analyze it.
#[test]
fn a_directory_in_place_of_a_subcommand_gets_the_report_command_as_a_hint() {
    let ep = fixture("v1/serve-episode");
    let ep = ep.to_str().unwrap();
    let r = analyze(&[ep]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("unrecognized subcommand"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "hint: {ep} is a directory: to analyze it, run `analyze_control_timing report {ep}`"
        )),
        "{}",
        r.stderr
    );
    // A word that is not a directory gets clap's message alone.
    let r = analyze(&["reprot"]);
    assert_eq!(r.code, 2);
    assert!(!r.stderr.contains("hint:"), "{}", r.stderr);
}

/// A session directory or a runs directory where one episode goes is named
/// for what it is, with what to run: never "the process most likely died".
#[test]
fn a_session_or_runs_directory_is_named_for_what_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let session = runs.join("session-20261205T000000Z");
    copy_episode(&fixture("v1/serve-episode"), &session.join("rollout-000"));
    copy_episode(&fixture("v1/serve-episode"), &session.join("rollout-001"));
    std::os::unix::fs::symlink(session.join("rollout-001"), runs.join("latest")).unwrap();
    let r = analyze(&["--episode", session.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("is a session directory with 2 rollout(s) (rollout-000, rollout-001)")
            && r.stderr.contains(&format!(
                "analyze_control_timing report {}/rollout-000",
                session.display()
            )),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("died"), "{}", r.stderr);
    let r = analyze(&["--episode", runs.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("is a runs directory with 1 session(s) (session-20261205T000000Z)")
            && r.stderr
                .contains(&format!("report {}/latest", runs.display())),
        "{}",
        r.stderr
    );
    // export says the same.
    let out = tmp.path().join("t.json");
    let r = analyze(&[
        "export",
        session.to_str().unwrap(),
        "--format",
        "chrome",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is a session directory"), "{}", r.stderr);
}

/// A report of `runs/latest` names the run it describes, so it can be
/// traced once `latest` moves on: the resolved rollout, its session, the
/// config and host from the manifest, in the text, the JSON, the HTML
/// title, the Chrome trace's process name and the HdrHistogram header.
#[test]
fn reports_and_exports_name_their_run_not_just_the_path_given() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let rollout = runs.join("session-20261205T000000Z/rollout-003");
    copy_episode(&fixture("v1/serve-episode"), &rollout);
    let latest = runs.join("latest");
    std::os::unix::fs::symlink("session-20261205T000000Z/rollout-003", &latest).unwrap();
    let l = latest.to_str().unwrap();
    // The fixture's manifest names its own session and rollout.
    let j = analyze_json(&latest, &[]);
    let run = &j["run"];
    assert_eq!(run["dir"], rollout.display().to_string(), "{run}");
    assert_eq!(run["session"], "session-20261202T143058Z");
    assert_eq!(run["rollout"], "rollout-000");
    assert_eq!(run["config_source"], "embedded default");
    assert!(
        run["config_hash"].is_string() && run["host"].is_string() && run["created_utc"].is_string()
    );
    let t = analyze(&["--episode", l]);
    assert!(
        t.stdout.contains(&format!(
            "run: session-20261202T143058Z/rollout-000 ({})",
            rollout.display()
        )),
        "{}",
        t.stdout
    );
    let html = tmp.path().join("html");
    assert_eq!(
        analyze(&["--episode", l, "--html", html.to_str().unwrap()]).code,
        0
    );
    let page = std::fs::read_to_string(html.join("report.html")).unwrap();
    assert!(
        page.contains("<title>looptime: session-20261202T143058Z/rollout-000 ("),
        "title"
    );
    let trace = tmp.path().join("t.json");
    let r = analyze(&[
        "export",
        l,
        "--format",
        "chrome",
        "--out",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let trace = std::fs::read_to_string(&trace).unwrap();
    assert!(
        trace.contains("\"name\":\"looptime session-20261202T143058Z/rollout-000\""),
        "process name"
    );
    let hlog = tmp.path().join("e.hlog");
    let r = analyze(&[
        "export",
        l,
        "--format",
        "hdr",
        "--out",
        hlog.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let head = std::fs::read_to_string(&hlog).unwrap();
    assert!(
        head.lines()
            .nth(1)
            .unwrap()
            .contains("session-20261202T143058Z/rollout-000"),
        "{}",
        head.lines().nth(1).unwrap()
    );
}

#[test]
fn the_manifest_fills_a_missing_period_and_its_counts_are_held_to_the_evidence() {
    // The serve fixture (its manifest: schedule.nominal_period_ns 10 ms,
    // counts.cycles what the recorder recorded) with the header's period
    // removed: the manifest's is used, and the report says so; the card is
    // judged against it.
    let tmp = damaged("v1/serve-episode", |mut lines| {
        let mut h: Value = serde_json::from_str(&lines[0]).unwrap();
        h["nominal_period_ns"] = Value::Null;
        lines[0] = h.to_string();
        joined(lines)
    });
    let r = analyze_json(tmp.path(), &[]);
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains("manifest's schedule.nominal_period_ns (10 ms) was used"),
        "{caveats}"
    );
    let running = r["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["phase"] == "running")
        .unwrap();
    assert_ne!(running["state"], "not_judged", "{running}");
    // Counts that disagree with the evidence (a scheduler's counts summed
    // over two rollouts): the report warns.
    let manifest = tmp.path().join("manifest.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let cycles = m["counts"]["cycles"].as_u64().unwrap();
    m["counts"]["cycles"] = json!(cycles * 2);
    std::fs::write(&manifest, m.to_string()).unwrap();
    let r = analyze_json(tmp.path(), &[]);
    assert!(
        r["caveats"].to_string().contains(&format!(
            "the manifest counts {} cycles but the evidence recorded {cycles}",
            cycles * 2
        )),
        "{}",
        r["caveats"]
    );
    // No manifest beside a summary that says the finish was orderly: the
    // caveat says what is known, and does not guess a death.
    std::fs::remove_file(&manifest).unwrap();
    let r = analyze_json(tmp.path(), &[]);
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains("the summary says the recorder finished in order (complete)")
            && !caveats.contains("died"),
        "{caveats}"
    );
}

#[test]
fn only_jsons_whitespace_is_trimmed_and_every_files_form_is_named() {
    // A form feed before a cycle line is not JSON whitespace: the line is
    // refused by number, as a vertical tab always was.
    for ch in ["\u{c}", "\u{b}"] {
        let tmp = damaged("v1/serve-episode", |mut lines| {
            lines[3] = format!("{ch}{}", lines[3]);
            joined(lines)
        });
        let r = analyze(&["--episode", tmp.path().to_str().unwrap()]);
        assert_ne!(r.code, 0, "{ch:?} accepted");
        assert!(r.stderr.contains(":4"), "{ch:?}: {}", r.stderr);
    }
    // CRLF on the cycle lines under an LF header: named.
    let tmp = damaged("v1/serve-episode", |lines| {
        let mut t = lines[0].clone() + "\n";
        for l in &lines[1..] {
            t.push_str(l);
            t.push_str("\r\n");
        }
        t
    });
    let r = analyze_json(tmp.path(), &[]);
    assert!(
        r["caveats"]
            .to_string()
            .contains("the JSONL has CRLF line endings"),
        "{}",
        r["caveats"]
    );
    // A background thread's file with CRLF endings, a blank line and a bad
    // line (--lenient): each named with the thread's file.
    let tmp = tempfile::tempdir().unwrap();
    copy_episode(&fixture("v2/synthetic-threads"), tmp.path());
    let worker = tmp.path().join("control_timing.worker.jsonl");
    let text = std::fs::read_to_string(&worker).unwrap();
    let mut lines: Vec<String> = text.lines().map(|l| format!("{l}\r")).collect();
    lines.insert(2, String::new());
    lines.insert(3, "{\"type\":\"cycle\",\"oops\"".into());
    std::fs::write(&worker, lines.join("\n") + "\n").unwrap();
    let r = analyze_json(tmp.path(), &["--lenient"]);
    let caveats = r["caveats"].to_string();
    for want in [
        "control_timing.worker.jsonl has CRLF line endings",
        "1 blank line(s) between records of control_timing.worker.jsonl",
        "--lenient skipped 1 bad line(s) of control_timing.worker.jsonl",
    ] {
        assert!(caveats.contains(want), "missing {want:?} in {caveats}");
    }
}

#[test]
fn a_blank_first_line_and_a_mistyped_header_field_are_named() {
    // A blank line before the header: not "empty", the blank line named.
    let tmp = damaged("v1/serve-episode", |lines| {
        "\n".to_string() + &joined(lines)
    });
    let r = analyze(&["--episode", tmp.path().to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("line 1 is blank") && !r.stderr.contains("is empty"),
        "{}",
        r.stderr
    );
    // schema_version as a string, type as a number: the field is named,
    // and the column said once.
    for (field, bad) in [("schema_version", json!("2")), ("type", json!(7))] {
        let tmp = damaged("v1/serve-episode", |mut lines| {
            let mut h: Value = serde_json::from_str(&lines[0]).unwrap();
            h[field] = bad.clone();
            lines[0] = h.to_string();
            joined(lines)
        });
        let r = analyze(&["--episode", tmp.path().to_str().unwrap()]);
        assert_ne!(r.code, 0);
        assert!(
            r.stderr.contains(&format!("field `{field}`")),
            "{}",
            r.stderr
        );
        assert_eq!(r.stderr.matches("column").count(), 1, "{}", r.stderr);
    }
}

#[test]
fn a_command_stage_that_is_no_stage_is_named_with_the_stages_there_are() {
    // The v1 serve fixture, deadline-paced, its commands sent by
    // robot_send_command. `--command-stage nope`: before, commands 0 and
    // command Hz `-` with no word; now a caveat names `nope`, where it came
    // from, and the stages to choose from.
    let ep = fixture("v1/serve-episode");
    let r = analyze_json(&ep, &["--command-stage", "nope"]);
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains("the command stage `nope` (--command-stage) is no stage of this evidence")
            && caveats.contains("robot_send_command"),
        "{caveats}"
    );
    // Its own stage, or none named: no such caveat.
    for args in [&["--command-stage", "robot_send_command"][..], &[][..]] {
        let r = analyze_json(&ep, args);
        assert!(!r["caveats"]
            .to_string()
            .contains("is no stage of this evidence"));
    }
}

#[test]
fn a_manifest_period_that_contradicts_the_header_is_named_and_the_header_judges() {
    // The v1 serve fixture: header 10 ms, rtf 1, its running card PASS.
    // Its manifest edited to an effective period of 1 ms: before, the run
    // was judged against 1,000 Hz without a word and FAILed. Now the
    // header's 10 ms judges it (the evidence's own), the card is as
    // before, and a caveat names both periods.
    let tmp = tempfile::tempdir().unwrap();
    let ep = tmp.path().join("ep");
    copy_episode(&fixture("v1/serve-episode"), &ep);
    let path = ep.join("manifest.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["schedule"]["effective_period_ns"] = serde_json::json!(1_000_000);
    std::fs::write(&path, m.to_string()).unwrap();
    let r = analyze_json(&ep, &[]);
    let caveats = r["caveats"].to_string();
    assert!(
        caveats.contains("schedule.effective_period_ns (1.000 ms) contradicts the header's nominal period at rtf 1 (10.000 ms)"),
        "{caveats}"
    );
    let before = analyze_json(&fixture("v1/serve-episode"), &[]);
    let state = |r: &Value| {
        r["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["phase"] == "running")
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state(&r), state(&before));
    assert_eq!(state(&r), "pass");
}

#[test]
fn the_manifest_count_caveat_says_which_side_is_short_and_names_a_count_that_is_not_one() {
    // The v1 serve fixture (70 cycles, the manifest counts 70) without its
    // summary, its last cycle line cut in half: the evidence holds 69.
    // Before, the caveat said the manifest's counts "are not this
    // rollout's own … so trust the evidence's"; the manifest is right.
    let tmp = tempfile::tempdir().unwrap();
    let ep = tmp.path().join("ep");
    copy_episode(&fixture("v1/serve-episode"), &ep);
    let _ = std::fs::remove_file(ep.join("control_timing_summary.json"));
    let jsonl = ep.join("control_timing.jsonl");
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let cut = text.trim_end().rfind('\n').unwrap() + 40;
    std::fs::write(&jsonl, &text[..cut]).unwrap();
    let caveats = analyze_json(&ep, &[])["caveats"].to_string();
    assert!(
        caveats.contains("the manifest counts 70 cycles and the evidence holds 69: the evidence is short (its last line is truncated"),
        "{caveats}"
    );
    assert!(!caveats.contains("not this rollout's own"), "{caveats}");
    // counts.cycles that is not a count: named, not silently ignored.
    let path = ep.join("manifest.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for bad in [
        serde_json::json!("70"),
        serde_json::json!(-3),
        serde_json::json!(69.5),
    ] {
        m["counts"]["cycles"] = bad.clone();
        std::fs::write(&path, m.to_string()).unwrap();
        let caveats = analyze_json(&ep, &[])["caveats"].to_string();
        assert!(
            caveats.contains("not a count of cycles"),
            "{bad}: {caveats}"
        );
    }
}
