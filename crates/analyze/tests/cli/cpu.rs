//! The CPU-time modes from the analyzer's side: each mode's figures appear
//! where they were recorded and nowhere else, the per-cycle figures
//! against hand-computed values, and older evidence (no mode in its
//! header) read as the mode it was.

use super::*;
use serde_json::json;

/// The v1 synthetic fixture turned into `cycle`-mode evidence: the header
/// names the mode, and three of the four running cycles carry a work CPU
/// time (cycle 5 none, as if another producer left it out).
fn cycle_mode_fixture() -> tempfile::TempDir {
    damaged("v1/synthetic-basic", |lines| {
        let mut out = Vec::new();
        for l in lines {
            let mut v: Value = serde_json::from_str(&l).unwrap();
            if v["type"] == "header" {
                v["thread_cpu_mode"] = json!("cycle");
            } else {
                let cpu = match v["cycle"].as_u64().unwrap() {
                    2 => Some(3_000_000),
                    3 => Some(5_000_000),
                    4 => Some(2_000_100),
                    _ => None,
                };
                if let Some(c) = cpu {
                    v["cpu_ns"] = json!(c);
                }
            }
            out.push(v.to_string());
        }
        joined(out)
    })
}

#[test]
fn cycle_mode_figures_against_hand_computed_values() {
    let dir = cycle_mode_fixture();
    let r = analyze_json(dir.path(), &[]);
    assert_eq!(r["capture"]["thread_cpu"], "cycle");
    let running = phase(&r, "running");
    // Running cycles 2..=5 work 4, 11, 2 and 1 ms (end − start in the
    // fixture); CPU 3, 5 and 2.0001 ms on cycles 2, 3 and 4.
    let cpu = &running["work_cpu"];
    assert_eq!(cpu["count"], 3);
    assert_eq!(cpu["min_ns"], 2_000_100);
    assert_eq!(cpu["max_ns"], 5_000_000);
    // (3,000,000 + 5,000,000 + 2,000,100) / 3 = 3,333,366.67, to 0.1 ns.
    assert_eq!(cpu["mean_ns"], 3_333_366.7);
    // Off-CPU per cycle: 4 − 3 = 1 ms, 11 − 5 = 6 ms, and 2 − 2.0001
    // clamped to 0.
    let off = &running["off_cpu"];
    assert_eq!(
        (&off["count"], &off["min_ns"], &off["max_ns"]),
        (&json!(3), &json!(0), &json!(6_000_000))
    );
    // Share: (1 + 6 + 0) ms / (4 + 11 + 2) ms = 7/17 = 0.41176…, to 10^-4;
    // cycle 5 (no CPU time) is in neither sum.
    assert_eq!(running["off_cpu_share"], 0.4118);
    // Warmup has no CPU time: no figure, not a zero.
    let warmup = phase(&r, "warmup");
    for k in ["work_cpu", "off_cpu", "off_cpu_share"] {
        assert!(warmup.get(k).is_none(), "{k}");
    }

    // The text report says the mode and prints the share.
    let t = analyze(&["--episode", dir.path().to_str().unwrap()]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    assert!(
        t.stdout.contains("thread CPU time: per cycle"),
        "{}",
        t.stdout
    );
    assert!(t
        .stdout
        .contains("work CPU, the thread's CPU time over the work"));
    assert!(t
        .stdout
        .contains("off-CPU share of the work's wall time: running 41.18 %"));
}

#[test]
fn an_absurd_cycle_cpu_time_is_a_bad_line() {
    let dir = damaged("v1/synthetic-basic", |mut lines| {
        let mut v: Value = serde_json::from_str(&lines[3]).unwrap();
        v["cpu_ns"] = json!(4_000_000_000_000u64);
        lines[3] = v.to_string();
        joined(lines)
    });
    let r = analyze(&["--episode", dir.path().to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("control_timing.jsonl:4:"), "{}", r.stderr);
    assert!(r.stderr.contains("cpu_ns is absurd"), "{}", r.stderr);
}

#[test]
fn older_evidence_reads_as_the_mode_it_was() {
    // v1 and v2 headers carry `thread_cpu_time: true` and no mode: per
    // span. Their stages keep their CPU figures; no cycle has any.
    for ep in ["v1/serve-episode", "v1/synthetic-basic", "v2/serve-episode"] {
        let r = analyze_json(&fixture(ep), &[]);
        assert_eq!(r["capture"]["thread_cpu"], "spans", "{ep}");
        for p in r["phases"].as_array().unwrap() {
            assert!(p.get("work_cpu").is_none(), "{ep}");
        }
        assert!(
            r["stages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| !s["cpu"].is_null()),
            "{ep}"
        );
    }
    // `thread_cpu_time: false` and no mode: off.
    let off = damaged("v1/synthetic-basic", |mut lines| {
        lines[0] = lines[0].replace("\"thread_cpu_time\":true", "\"thread_cpu_time\":false");
        joined(lines)
    });
    let r = analyze_json(off.path(), &[]);
    assert_eq!(r["capture"]["thread_cpu"], "off");
}

#[test]
fn serve_records_in_each_mode_and_the_analyzer_reads_each() {
    let _lock = serve_lock();
    // `true` and `false` are the configs written before the modes.
    for (setting, mode) in [
        ("\"cycle\"", "cycle"),
        ("\"spans\"", "spans"),
        ("\"off\"", "off"),
        ("true", "spans"),
        ("false", "off"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = tmp.path().join("cpu.toml");
        std::fs::write(
            &cfg,
            format!("[run]\ntiming_thread_cpu = {setting}\ntiming_threads = false\n"),
        )
        .unwrap();
        let dir = serve(
            &[
                "--config",
                cfg.to_str().unwrap(),
                "--rtf",
                "0",
                "--warmup",
                "0",
                "--duration",
                "0.3",
            ],
            tmp.path(),
        );
        let r = analyze_json(&dir, &[]);
        assert_eq!(r["capture"]["thread_cpu"], mode, "{setting}");
        let running = phase(&r, "running");
        let cycle = mode == "cycle";
        assert_eq!(running.get("work_cpu").is_some(), cycle, "{setting}");
        assert_eq!(running.get("off_cpu_share").is_some(), cycle, "{setting}");
        if cycle {
            assert_eq!(running["work_cpu"]["count"], running["work"]["count"]);
            let share = running["off_cpu_share"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&share), "{share}");
        }
        let stage_cpu = r["stages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| !s["cpu"].is_null());
        assert_eq!(stage_cpu, mode == "spans", "{setting}");
        assert_eq!(r["crosscheck"]["mismatches"].as_array().unwrap().len(), 0);
    }
}

#[test]
fn spin_figures_against_hand_computed_values() {
    // The v1 synthetic fixture with the scheduler's margin and spin on the
    // running cycles 2..=5 (warmup has none): margins 200, 200, 300 and
    // 250 µs; spins 150, 100 and 200 µs on cycles 2..=4, none on 5.
    let dir = damaged("v1/synthetic-basic", |lines| {
        let mut out = Vec::new();
        for l in lines {
            let mut v: Value = serde_json::from_str(&l).unwrap();
            let (margin, spin) = match v["cycle"].as_u64() {
                Some(2) => (Some(200_000), Some(150_000)),
                Some(3) => (Some(200_000), Some(100_000)),
                Some(4) => (Some(300_000), Some(200_000)),
                Some(5) => (Some(250_000), None),
                _ => (None, None),
            };
            if let Some(m) = margin {
                v["spin_margin_ns"] = json!(m);
            }
            if let Some(s) = spin {
                v["spin_ns"] = json!(s);
            }
            out.push(v.to_string());
        }
        joined(out)
    });
    let r = analyze_json(dir.path(), &[]);
    assert!(phase(&r, "warmup").get("spin").is_none());
    let s = &phase(&r, "running")["spin"];
    assert_eq!(
        (&s["margin_min_ns"], &s["margin_max_ns"]),
        (&json!(200_000), &json!(300_000))
    );
    // 200 → 200 → 300 → 250: two changes.
    assert_eq!(s["margin_changes"], 2);
    assert_eq!(s["spin"]["count"], 3);
    assert_eq!(s["spin"]["mean_ns"], 150_000.0);
    // Cycles with a spin and a period: 3 (period 1,030,001,500 −
    // 1,020,000,400 = 10,001,100) and 4 (1,041,002,000 − 1,030,001,500 =
    // 11,000,500); cycle 2 starts the segment, cycle 5 has no spin.
    // (100,000 + 200,000) / 21,001,600 = 0.014285…, to 10^-4.
    assert_eq!(s["spin_share"], 0.0143);
    let t = analyze(&["--episode", dir.path().to_str().unwrap()]);
    assert!(
        t.stdout
            .contains("running    margin 200.0–300.0 µs (2 changes)"),
        "{}",
        t.stdout
    );
    assert!(
        t.stdout.contains("spinning 1.43 % of one core"),
        "{}",
        t.stdout
    );
}

/// In `cycle` mode no stage has CPU time, so the text report's stage table
/// leaves out the CPU columns (they would be `-` throughout); in `spans`
/// mode (the v1 serve fixture) they stay. Counters print no mean, and a
/// value in `us` prints as µs.
#[test]
fn the_stage_table_shows_cpu_columns_only_when_stages_have_cpu_time() {
    // The cycle-mode fixture with its spans wall-only, as a `cycle`-mode
    // recorder writes them.
    let tmp = cycle_mode_fixture();
    let p = tmp.path().join("control_timing.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&p)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if let Some(spans) = v.get_mut("spans").and_then(|s| s.as_array_mut()) {
                for s in spans {
                    s.as_object_mut().unwrap().remove("cpu_ns");
                }
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let r = analyze(&["--episode", tmp.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("wall ms") && !r.stdout.contains("cpu ms"),
        "{}",
        r.stdout
    );
    let r = analyze(&["--episode", fixture("v1/serve-episode").to_str().unwrap()]);
    assert!(r.stdout.contains("cpu ms"), "{}", r.stdout);
    let seq = r
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("robot_state_seq"))
        .unwrap();
    assert!(
        seq.contains("mean -") && seq.contains("lost states 0"),
        "{seq}"
    );
    assert!(
        r.stdout.contains("camera_frame_age_us (µs)"),
        "{}",
        r.stdout
    );
}
