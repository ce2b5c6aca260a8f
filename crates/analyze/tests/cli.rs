//! The analyzer's integration tests: one binary, topic modules, and a helper
//! that runs the CLI against `fixtures/` (or a damaged copy of it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> PathBuf {
    repo().join("fixtures").join(rel)
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn analyze(args: &[&str]) -> Run {
    analyze_in(Path::new("."), args)
}

/// Run the analyzer with `args` from the directory `cwd`.
fn analyze_in(cwd: &Path, args: &[&str]) -> Run {
    // Analyses use both cores (polars, rayon): never run one while another
    // test is recording, unless this thread is the one recording.
    let _shared =
        (!HOLDS_SERVE.with(|h| h.get())).then(|| SERVE.read().unwrap_or_else(|e| e.into_inner()));
    let out = Command::new(env!("CARGO_BIN_EXE_analyze_control_timing"))
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("run analyze_control_timing");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn analyze_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["--episode", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let r = analyze(&args);
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    serde_json::from_str(&r.stdout).expect("valid JSON report")
}

/// A copy of a fixture directory whose JSONL lines pass through `edit`.
fn damaged(src: &str, edit: impl FnOnce(Vec<String>) -> String) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let from = fixture(src);
    for e in std::fs::read_dir(&from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
    }
    let jsonl = tmp.path().join("control_timing.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    std::fs::write(&jsonl, edit(lines)).unwrap();
    tmp
}

/// Copy the flat episode directory `from` into `to`.
fn copy_episode(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

fn joined(lines: Vec<String>) -> String {
    lines.join("\n") + "\n"
}

fn phase<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap_or_else(|| panic!("no phase {name}"))
}

/// A declared compute budget and deadline tolerance.
#[path = "cli/budget.rs"]
mod budget;
/// The comparison calibrated where CI runs, on recorded pairs.
#[path = "cli/calibrated.rs"]
mod calibrated;
#[path = "cli/callbacks.rs"]
mod callbacks;
#[path = "cli/cpu.rs"]
mod cpu;
/// Data age on a hand-built episode with known ages.
#[path = "cli/data_age.rs"]
mod data_age;
#[path = "cli/export_mcap.rs"]
mod export_mcap;
#[path = "cli/fleet.rs"]
mod fleet;
#[path = "cli/gate.rs"]
mod gate;
/// The gate's own family, undecided tests and the looks.
#[path = "cli/gate_family.rs"]
mod gate_family;
#[path = "cli/golden.rs"]
mod golden;
#[path = "cli/hardening.rs"]
mod hardening;
/// Input-paced phases on hand-built episodes.
#[path = "cli/input_paced.rs"]
mod input_paced;
#[path = "cli/summary.rs"]
mod summary;

/// The rules every multi-episode command shares.
#[path = "cli/multi.rs"]
mod multi;
/// Synthetic serve-like episodes with known answers.
#[path = "cli/synthetic.rs"]
mod synthetic;
/// Comparison verdicts on 1,000+ synthetic cycles a side.
#[path = "cli/verdicts.rs"]
mod verdicts;

mod fixtures {
    use super::*;

    #[test]
    fn synthetic_basic_matches_hand_computed() {
        // Every expected value is derived in fixtures/v1/synthetic-basic/EXPECTED.md.
        let r = analyze_json(&fixture("v1/synthetic-basic"), &[]);
        assert_eq!(r["state"], "incomplete");
        assert!(r["caveats"][0].as_str().unwrap().starts_with("incomplete"));
        assert_eq!(r["segments"].as_array().unwrap().len(), 2);

        let w = phase(&r, "warmup");
        assert_eq!(w["period"]["count"], 1);
        assert_eq!(w["period"]["p50_ns"], 9_999_800);
        assert_eq!(w["loop_hz"], 100.002);
        assert_eq!(w["overruns"], 0);
        assert_eq!(
            (w["commands"].clone(), w["command_hz"].clone()),
            (2.into(), 100.002.into())
        );

        let p = phase(&r, "running");
        let per = &p["period"];
        assert_eq!(per["count"], 3);
        assert_eq!(per["mean_ns"], 10_334_066.7);
        assert_eq!(per["min_ns"], 10_000_600);
        assert_eq!(per["p50_ns"], 10_001_100);
        assert_eq!(per["p90_ns"], 11_000_500);
        assert_eq!(per["max_ns"], 11_000_500);
        assert_eq!(p["loop_hz"], 96.7673);
        assert_eq!(p["work"]["mean_ns"], 4_500_000.0);
        assert_eq!(p["work"]["p50_ns"], 2_000_000);
        assert_eq!(p["work"]["p90_ns"], 11_000_000);
        assert_eq!(p["sleep_overshoot"]["count"], 3);
        assert_eq!(p["sleep_overshoot"]["mean_ns"], 433.3);
        assert_eq!(p["sleep_overshoot"]["p50_ns"], 200);
        assert_eq!(p["sleep_overshoot"]["max_ns"], 1_000);
        assert_eq!(p["deadline_lag"]["mean_ns"], 251_125.0);
        assert_eq!(p["deadline_lag"]["p50_ns"], 600);
        assert_eq!(p["deadline_lag"]["max_ns"], 1_002_000);
        assert_eq!(p["overruns"], 1);
        assert_eq!(p["commands"], 4);
        assert_eq!(p["command_hz"], 96.7673);

        let stages = r["stages"].as_array().unwrap();
        let find = |path: &str, mode: Option<&str>| {
            stages
                .iter()
                .find(|s| {
                    s["phase"] == "running"
                        && s["path"] == path
                        && mode.is_none_or(|m| s["attrs"]["mode"] == m)
                })
                .unwrap_or_else(|| panic!("no stage {path} {mode:?}"))
        };
        let inline = find("sense", Some("inline"));
        assert_eq!(inline["count"], 2);
        assert_eq!(inline["wall"]["mean_ns"], 4_350_000.0);
        assert_eq!(inline["wall"]["p50_ns"], 700_000);
        assert_eq!(inline["wall"]["max_ns"], 8_000_000);
        assert_eq!(inline["mean_share_of_period"], 0.435);
        let bg = find("sense", Some("background"));
        assert_eq!(bg["wall"]["mean_ns"], 350_000.0);
        assert_eq!(bg["wall"]["p50_ns"], 300_000);
        let decode = find("sense/decode", None);
        assert_eq!(
            (decode["count"].clone(), decode["depth"].clone()),
            (4.into(), 1.into())
        );
        assert!(decode["cpu"].is_null());
        let send = find("robot_send_command", None);
        assert_eq!(send["cpu"]["p50_ns"], 90_000);

        let values = r["values"].as_array().unwrap();
        let seq = values
            .iter()
            .find(|v| v["name"] == "robot_state_seq")
            .unwrap();
        assert_eq!(
            (seq["lost"].clone(), seq["min"].clone(), seq["max"].clone()),
            // int values stay exact integers: 1 and 7, not 1.0 and 7.0.
            (1.into(), 1.into(), 7.into())
        );
        let rate = values
            .iter()
            .find(|v| v["name"] == "command_success_rate")
            .unwrap();
        assert_eq!(
            (
                rate["min"].clone(),
                rate["mean"].clone(),
                rate["max"].clone()
            ),
            (0.5.into(), 0.75.into(), 1.0.into())
        );
        assert!(rate["lost"].is_null());
        // No summary: nothing to cross-check.
        assert_eq!(r["crosscheck"]["checked"], 0);
    }

    #[test]
    fn serve_episode_recomputes_and_cross_checks_clean() {
        let r = analyze_json(&fixture("v1/serve-episode"), &[]);
        assert_eq!(r["state"], "complete");
        assert!(
            r["caveats"].as_array().unwrap().is_empty(),
            "{}",
            r["caveats"]
        );
        assert_eq!(phase(&r, "warmup")["cycles"], 20);
        assert_eq!(phase(&r, "running")["cycles"], 50);
        let x = &r["crosscheck"];
        assert!(x["checked"].as_u64().unwrap() > 100);
        assert_eq!(
            x["mismatches"].as_array().unwrap().len(),
            0,
            "{}",
            x["mismatches"]
        );
    }

    #[test]
    fn v2_serve_episode_reports_its_threads_and_cross_checks_clean() {
        let r = analyze_json(&fixture("v2/serve-episode"), &[]);
        assert_eq!(r["state"], "complete");
        assert!(
            r["caveats"].as_array().unwrap().is_empty(),
            "{}",
            r["caveats"]
        );
        assert_eq!(phase(&r, "running")["cycles"], 50);
        let threads: Vec<_> = r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["thread"].as_str().unwrap())
            .collect();
        assert_eq!(
            threads,
            ["camera_reader", "viewer_transport", "policy_worker"]
        );
        for t in r["threads"].as_array().unwrap() {
            assert_eq!(t["state"], "complete");
            assert!(!t["stages"].as_array().unwrap().is_empty());
        }
        // Every control stage of every phase has an overlap row per thread.
        let overlap = r["overlap"].as_array().unwrap();
        assert!(!overlap.is_empty());
        for o in overlap {
            let share = o["share"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&share), "{o}");
            assert!(o["overlap_ns"].as_i64().unwrap() <= o["wall_ns"].as_i64().unwrap());
        }
        assert_eq!(r["crosscheck"]["mismatches"].as_array().unwrap().len(), 0);
        // The text report has the per-thread stage tables and the overlap.
        let text = analyze(&["--episode", fixture("v2/serve-episode").to_str().unwrap()]);
        assert_eq!(text.code, 0, "{}", text.stderr);
        for needle in [
            "background threads",
            "camera_grab",
            "policy_infer",
            "overlap: share",
        ] {
            assert!(text.stdout.contains(needle), "{needle} missing");
        }
    }

    #[test]
    fn synthetic_threads_overlap_matches_hand_computed() {
        // Every expected value is derived in fixtures/v2/synthetic-threads/EXPECTED.md.
        let r = analyze_json(&fixture("v2/synthetic-threads"), &[]);
        let t = &r["threads"][0];
        assert_eq!(t["thread"], "worker");
        assert_eq!(t["tid"], 101);
        assert_eq!(t["implicit_cycles"], true);
        assert_eq!(t["capture"]["retained_cycles"], 3);
        let job = &t["stages"][0];
        assert_eq!(job["stage"], "job");
        assert_eq!(job["count"], 3);
        assert_eq!(job["wall"]["p50_ns"], 1_250_000);
        assert_eq!(job["wall"]["max_ns"], 5_000_000);
        let row = |stage: &str| {
            r["overlap"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["stage"] == stage && o["thread"] == "worker")
                .unwrap_or_else(|| panic!("no overlap row for {stage}"))
                .clone()
        };
        let sense = row("sense");
        assert_eq!(sense["spans"], 3);
        assert_eq!(sense["wall_ns"], 3_000_000);
        assert_eq!(sense["overlap_ns"], 1_250_000);
        assert_eq!(sense["share"], 0.4167);
        let act = row("act");
        assert_eq!(act["overlap_ns"], 1_500_000);
        assert_eq!(act["share"], 0.5);
    }

    #[test]
    fn a_declared_thread_whose_file_is_missing_is_a_caveat() {
        let tmp = damaged("v2/synthetic-threads", joined);
        std::fs::remove_file(tmp.path().join("control_timing.worker.jsonl")).unwrap();
        let r = analyze_json(tmp.path(), &[]);
        let caveats = r["caveats"].to_string();
        assert!(
            caveats.contains("thread worker") && caveats.contains("looptime recover"),
            "{caveats}"
        );
        assert!(r.get("threads").is_none() || r["threads"].as_array().unwrap().is_empty());
    }

    #[test]
    fn compare_covers_per_thread_metrics() {
        let ep = fixture("v2/serve-episode");
        let run = analyze(&[
            "compare",
            ep.to_str().unwrap(),
            ep.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let c: Value = serde_json::from_str(&run.stdout).unwrap();
        let metrics = c["metrics"].as_array().unwrap();
        let has = |phase: &str, metric: &str| {
            metrics
                .iter()
                .any(|m| m["phase"].as_str().unwrap().starts_with(phase) && m["metric"] == metric)
        };
        assert!(
            has("camera_reader/", "stage_wall"),
            "no thread stage metric"
        );
        assert!(has("running", "overlap:policy_worker"), "no overlap metric");
    }

    #[test]
    fn a_doctored_summary_figure_is_flagged() {
        let tmp = damaged("v1/serve-episode", joined);
        let path = tmp.path().join("control_timing_summary.json");
        let mut s: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // Make the running segment's p99 period 5 % larger than recorded.
        let p99 = s["segments"][1]["period"]["p99_ns"].as_u64().unwrap();
        s["segments"][1]["period"]["p99_ns"] = (p99 + p99 / 20).into();
        std::fs::write(&path, s.to_string()).unwrap();
        let r = analyze_json(tmp.path(), &[]);
        let m = r["crosscheck"]["mismatches"].as_array().unwrap();
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0]["figure"], "segments[1].period.p99_ns");
    }

    #[test]
    fn json_output_is_deterministic_and_saved_by_output() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("report.json");
        let a = analyze(&[
            "--episode",
            fixture("v1/serve-episode").to_str().unwrap(),
            "--json",
        ]);
        let b = analyze(&[
            "--episode",
            fixture("v1/serve-episode").to_str().unwrap(),
            "--json",
            "--output",
            out.to_str().unwrap(),
        ]);
        assert_eq!(a.stdout, b.stdout);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), a.stdout);
    }

    #[test]
    fn text_report_shows_phases_stages_and_diagnosis() {
        let r = analyze(&["--episode", fixture("v1/serve-episode").to_str().unwrap()]);
        assert_eq!(r.code, 0);
        for needle in [
            "state: complete",
            "loop Hz",
            "camera_read [mode=inline]",
            "  robot_send_command",
            "diagnosis",
            "cross-check: ",
        ] {
            assert!(
                r.stdout.contains(needle),
                "missing {needle:?} in\n{}",
                r.stdout
            );
        }
    }
}

mod bad_input {
    use super::*;

    fn fails(dir: &Path, needles: &[&str]) -> Run {
        let r = analyze(&["--episode", dir.to_str().unwrap()]);
        assert_eq!(r.code, 2, "stdout {}\nstderr {}", r.stdout, r.stderr);
        for n in needles {
            assert!(r.stderr.contains(n), "missing {n:?} in: {}", r.stderr);
        }
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        r
    }

    #[test]
    fn missing_directory() {
        fails(
            Path::new("/nonexistent/episode"),
            &["/nonexistent/episode", "does not exist"],
        );
    }

    #[test]
    fn missing_file() {
        // An episode directory that kill -9 left empty: say the process
        // most likely died, not that --control-timing was forgotten.
        let tmp = tempfile::tempdir().unwrap();
        let r = fails(
            tmp.path(),
            &["control_timing.jsonl", "is missing", "most likely died"],
        );
        assert!(!r.stderr.contains("--control-timing"), "{}", r.stderr);
    }

    #[test]
    fn missing_file_of_a_run_without_control_timing_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("manifest.json"),
            r#"{"config":{"run":{"control_timing":false}}}"#,
        )
        .unwrap();
        fails(tmp.path(), &["is missing", "without --control-timing"]);
    }

    #[test]
    fn missing_file_with_a_leftover_temporary_names_it() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join(".control_timing.jsonl.4242.tmp"),
            b"{\"type\":\"header\"",
        )
        .unwrap();
        fails(
            tmp.path(),
            &[".control_timing.jsonl.4242.tmp", "interrupted", "4242"],
        );
    }

    #[test]
    fn missing_file_beside_thread_files_says_the_process_died_while_finishing() {
        // SIGINT, then SIGKILL 50-100 ms later: the finish had written one
        // thread's file and was writing another's when the process died.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("manifest.json"), "{}").unwrap();
        std::fs::write(
            tmp.path().join("control_timing.policy_worker.jsonl"),
            b"{}\n",
        )
        .unwrap();
        std::fs::write(
            tmp.path()
                .join(".control_timing.camera_reader.jsonl.4243.tmp"),
            b"{",
        )
        .unwrap();
        let r = fails(
            tmp.path(),
            &[
                "died while finishing",
                "control_timing.policy_worker.jsonl written",
                ".control_timing.camera_reader.jsonl.4243.tmp",
                "looptime recover",
            ],
        );
        assert!(!r.stderr.contains("before its finish"), "{}", r.stderr);
    }

    #[test]
    fn empty_file() {
        let tmp = damaged("v1/serve-episode", |_| String::new());
        fails(tmp.path(), &["control_timing.jsonl", "empty"]);
    }

    #[test]
    fn unknown_schema_version() {
        let tmp = damaged("v1/serve-episode", |mut l| {
            l[0] = l[0].replace("\"schema_version\":1", "\"schema_version\":99");
            joined(l)
        });
        fails(tmp.path(), &["schema_version 99 is not supported"]);
    }

    #[test]
    fn truncated_last_line_is_accepted_with_a_warning() {
        // Cut the last line in half and drop the final newline: an abrupt end.
        let tmp = damaged("v1/serve-episode", |mut l| {
            let last = l.pop().unwrap();
            l.push(last[..last.len() / 2].to_string());
            l.join("\n")
        });
        std::fs::remove_file(tmp.path().join("control_timing_summary.json")).unwrap();
        let r = analyze_json(tmp.path(), &[]);
        assert_eq!(r["capture"]["truncated_last_line"], true);
        assert_eq!(r["capture"]["retained_cycles"], 69);
        assert!(r["caveats"].to_string().contains("truncated"));
        assert_eq!(r["state"], "incomplete");
    }

    #[test]
    fn corrupt_line_in_the_middle_names_file_and_line() {
        let tmp = damaged("v1/serve-episode", |mut l| {
            l[10] = "{\"type\":\"cycle\",\"cycle\":9, garbage".into();
            joined(l)
        });
        fails(tmp.path(), &["control_timing.jsonl:11:", "--lenient"]);
        // --lenient skips it and says how many.
        let r = analyze_json(tmp.path(), &["--lenient"]);
        assert_eq!(r["capture"]["lines_skipped"], 1);
        assert_eq!(r["capture"]["retained_cycles"], 69);
        assert!(r["caveats"].to_string().contains("line 11"));
    }

    #[test]
    fn wrong_field_type() {
        let tmp = damaged("v1/serve-episode", |mut l| {
            let v: &mut String = &mut l[5];
            let mut j: Value = serde_json::from_str(v).unwrap();
            j["start_ns"] = "soon".into();
            *v = j.to_string();
            joined(l)
        });
        fails(tmp.path(), &["control_timing.jsonl:6:", "invalid type"]);
    }

    #[test]
    fn negative_duration() {
        let tmp = damaged("v1/serve-episode", |mut l| {
            let mut j: Value = serde_json::from_str(&l[5]).unwrap();
            j["spans"][0]["wall_ns"] = (-5).into();
            l[5] = j.to_string();
            joined(l)
        });
        fails(tmp.path(), &["control_timing.jsonl:6:", "wall_ns"]);
        // End before start is a negative work duration.
        let tmp = damaged("v1/serve-episode", |mut l| {
            let mut j: Value = serde_json::from_str(&l[7]).unwrap();
            let start = j["start_ns"].as_u64().unwrap();
            j["end_ns"] = (start - 1).into();
            l[7] = j.to_string();
            joined(l)
        });
        fails(
            tmp.path(),
            &["control_timing.jsonl:8:", "negative work duration"],
        );
    }

    #[test]
    fn absurd_duration() {
        let tmp = damaged("v1/serve-episode", |mut l| {
            let mut j: Value = serde_json::from_str(&l[5]).unwrap();
            j["spans"][1]["wall_ns"] = 7_200_000_000_000u64.into(); // two hours
            l[5] = j.to_string();
            joined(l)
        });
        fails(tmp.path(), &["control_timing.jsonl:6:", "absurd"]);
    }

    #[test]
    fn non_monotonic_cycle_starts() {
        let tmp = damaged("v1/serve-episode", |mut l| {
            let mut j: Value = serde_json::from_str(&l[20]).unwrap();
            let start = j["start_ns"].as_u64().unwrap();
            j["start_ns"] = (start - 1_000_000_000).into();
            j["end_ns"] = (start - 999_000_000).into();
            j["sleep_start_ns"] = Value::Null;
            j["wake_ns"] = Value::Null;
            l[20] = j.to_string();
            joined(l)
        });
        fails(
            tmp.path(),
            &["control_timing.jsonl:21:", "must not go back"],
        );
    }

    #[test]
    fn duplicate_cycle_indices() {
        let tmp = damaged("v1/serve-episode", |mut l| {
            let dup = l[30].clone();
            l.insert(31, dup);
            joined(l)
        });
        fails(tmp.path(), &["control_timing.jsonl:32:", "appears twice"]);
        let r = analyze_json(tmp.path(), &["--lenient"]);
        assert_eq!(r["capture"]["lines_skipped"], 1);
        assert_eq!(r["capture"]["retained_cycles"], 70);
        // The duplicate's spans went with it (not someone else's): every
        // stage figure is the undamaged episode's.
        let whole = analyze_json(&fixture("v1/serve-episode"), &[]);
        assert_eq!(r["stages"], whole["stages"]);
        assert_eq!(r["late_cycles"], whole["late_cycles"]);
    }

    #[test]
    fn a_file_instead_of_a_directory() {
        fails(
            &fixture("v1/serve-episode/control_timing.jsonl"),
            &["not a directory"],
        );
    }

    #[test]
    fn no_episode_argument_is_a_usage_error() {
        let r = analyze(&[]);
        assert_eq!(r.code, 2);
        assert!(r.stderr.contains("--episode"), "{}", r.stderr);
    }
}

/// Tests that run `looptime serve` hold this lock exclusively; every other
/// analyzer run holds it shared. A recording measures timing, so nothing
/// else of this test binary competes with it for the two cores of CI.
static SERVE: std::sync::RwLock<()> = std::sync::RwLock::new(());

thread_local! {
    static HOLDS_SERVE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

struct ServeGuard(#[allow(dead_code)] std::sync::RwLockWriteGuard<'static, ()>);

impl Drop for ServeGuard {
    fn drop(&mut self) {
        HOLDS_SERVE.with(|h| h.set(false));
    }
}

fn serve_lock() -> ServeGuard {
    let g = SERVE.write().unwrap_or_else(|e| e.into_inner());
    HOLDS_SERVE.with(|h| h.set(true));
    ServeGuard(g)
}

fn looptime_bin() -> PathBuf {
    let exe =
        PathBuf::from(env!("CARGO_BIN_EXE_analyze_control_timing")).with_file_name("looptime");
    if !exe.exists() {
        let st = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "looptime-runtime", "--bin", "looptime"])
            .current_dir(repo())
            .status()
            .unwrap();
        assert!(st.success());
    }
    exe
}

/// Run `looptime serve --control-timing ARGS --runs-dir RUNS` to the end (it
/// must succeed) and return the episode directory it wrote.
/// The `running` phase's rate test `metric` of a `compare --json` output.
fn running_rate(c: &Value, metric: &str) -> Value {
    c["rates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["phase"] == "running" && x["metric"] == metric)
        .cloned()
        .unwrap_or_else(|| panic!("no {metric} rate in {}", c["rates"]))
}

fn serve(args: &[&str], runs: &Path) -> PathBuf {
    let out = Command::new(looptime_bin())
        .args(["serve", "--control-timing"])
        .args(args)
        .arg("--runs-dir")
        .arg(runs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::canonicalize(runs.join("latest")).unwrap()
}

mod compare {
    use super::*;

    fn compare_json(a: &Path, b: &Path) -> Value {
        let r = analyze(&[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap()
    }

    fn metric<'a>(c: &'a Value, phase: &str, metric: &str, stage: Option<&str>) -> &'a Value {
        c["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| {
                m["phase"] == phase
                    && m["metric"] == metric
                    && stage.is_none_or(|s| m["stage"] == s)
            })
            .unwrap_or_else(|| panic!("no metric {phase}/{metric}/{stage:?}"))
    }

    #[test]
    fn paired_runs_name_what_differs_and_what_moved() {
        // Synthetic episodes (tests/cli/synthetic.rs): the verdicts follow
        // from the seeds, not from how loaded the machine is. 400 cycles
        // a side.
        use synthetic::{write, Synth};
        let tmp = tempfile::tempdir().unwrap();
        let a = write(&tmp.path().join("a"), &Synth::default());
        let a2 = write(
            &tmp.path().join("a2"),
            &Synth {
                seed: 2,
                ..Synth::default()
            },
        );
        let bg = write(
            &tmp.path().join("bg"),
            &Synth {
                seed: 3,
                camera_mode: "background",
                ..Synth::default()
            },
        );
        let two = write(
            &tmp.path().join("two"),
            &Synth {
                seed: 4,
                camera_mode: "background",
                spin_margin_us: 300.0,
                ..Synth::default()
            },
        );
        // A's own stream with 1 ms more in every adapter_decode span.
        let slow = write(
            &tmp.path().join("slow"),
            &Synth {
                decode_extra_ns: 1_000_000,
                ..Synth::default()
            },
        );

        // Camera reader mode: exactly one setting differs; camera_read went
        // from 1.5 ms to 20 µs (medians within their jitter of that).
        let c = compare_json(&a, &bg);
        assert_eq!(
            c["settings_differing"],
            serde_json::json!(["stages.camera_read.mode"])
        );
        assert!(
            !c["warnings"].to_string().contains("settings differ"),
            "{}",
            c["warnings"]
        );
        let cam = metric(&c, "running", "stage_wall", Some("camera_read"));
        assert_eq!(cam["verdict"], "better", "{cam}");
        let d = cam["diff_median_ns"].as_i64().unwrap();
        assert!(
            (-1_480_000 - 300_000..-1_480_000 + 300_000).contains(&d),
            "{cam}"
        );

        // Two settings: a warning that the change cannot be attributed.
        let c = compare_json(&a, &two);
        assert_eq!(c["settings_differing"].as_array().unwrap().len(), 2);
        assert!(
            c["warnings"].to_string().contains("2 settings differ"),
            "{}",
            c["warnings"]
        );

        // A/A (one configuration, two seeds): no clear change on the
        // headline metrics.
        let c = compare_json(&a, &a2);
        assert!(c["settings_differing"].as_array().unwrap().is_empty());
        assert!(c["warnings"].to_string().contains("A/A"));
        for m in looptime_analyze::compare::HEADLINE_METRICS {
            let x = metric(&c, "running", m, None);
            assert_eq!(x["verdict"], "no_clear_change", "A/A moved {m}: {x}");
        }

        // Extra fixed cost: adapter_decode worse by exactly 1 ms (slow is
        // A's stream plus 1,000,000 ns in every decode span, so every
        // quantile moves by that much), and so is work.
        let c = compare_json(&a, &slow);
        assert_eq!(
            c["settings_differing"],
            serde_json::json!(["stages.adapter_decode.cost.mean_us"])
        );
        let d = metric(&c, "running", "stage_wall", Some("adapter_decode"));
        assert_eq!(d["verdict"], "worse", "{d}");
        assert_eq!(d["diff_median_ns"], 1_000_000, "{d}");
        let ci = d["ci_median_ns"].as_array().unwrap();
        assert!(ci[0].as_i64().unwrap() > 0, "{d}");
        let w = metric(&c, "running", "work", None);
        assert_eq!(w["verdict"], "worse", "{w}");
        assert_eq!(w["diff_median_ns"], 1_000_000, "{w}");
        // The other stages are the same stream: Δ = 0, no verdict.
        for stage in ["camera_read", "recording", "executor"] {
            let m = metric(&c, "running", "stage_wall", Some(stage));
            assert_eq!(m["diff_median_ns"], 0, "{m}");
            assert_eq!(m["verdict"], "no_clear_change", "{m}");
        }
    }

    #[test]
    fn compare_is_deterministic_and_text_shows_differences_first() {
        let a = fixture("v1/serve-episode");
        let r1 = analyze(&[
            "compare",
            a.to_str().unwrap(),
            a.to_str().unwrap(),
            "--json",
        ]);
        let r2 = analyze(&[
            "compare",
            a.to_str().unwrap(),
            a.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(r1.stdout, r2.stdout);
        let c: Value = serde_json::from_str(&r1.stdout).unwrap();
        // An episode against itself: every difference is exactly 0.
        for m in c["metrics"].as_array().unwrap() {
            assert_eq!(m["diff_median_ns"], 0);
            assert_eq!(m["verdict"], "no_clear_change");
        }
        let t = analyze(&["compare", a.to_str().unwrap(), a.to_str().unwrap()]);
        let pos = |s: &str| t.stdout.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(pos("what differs") < pos("metrics ("));
    }

    #[test]
    fn sessions_compare_rollout_by_rollout_with_run_level_intervals() {
        // Two sessions of three synthetic rollouts (150 cycles each, seeds
        // 1-3 and 11-13); B has 1 ms more in every adapter_decode span.
        use synthetic::{write, Synth};
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        for k in 0..3u64 {
            let rollout = format!("rollout-{k:03}");
            let base = Synth {
                cycles: 150,
                ..Synth::default()
            };
            write(
                &a.join(&rollout),
                &Synth {
                    seed: 1 + k,
                    ..base.clone()
                },
            );
            write(
                &b.join(&rollout),
                &Synth {
                    seed: 11 + k,
                    decode_extra_ns: 1_000_000,
                    ..base
                },
            );
        }
        let c = compare_json(&a, &b);
        assert_eq!(
            c["a_episodes"].as_array().unwrap().len(),
            3,
            "{}",
            c["a_episodes"]
        );
        assert!(
            c["a"].as_str().unwrap().starts_with("3 rollouts in "),
            "{}",
            c["a"]
        );
        let d = metric(&c, "running", "stage_wall", Some("adapter_decode"));
        assert_eq!(d["verdict"], "worse", "{d}");
        // Each rollout's own median and p99, beside the pooled figure; the
        // pooled median lies within the rollouts' range.
        let per = d["b_rollouts"].as_array().unwrap();
        assert_eq!(per.len(), 3, "{d}");
        let medians: Vec<i64> = per
            .iter()
            .map(|r| r["median_ns"].as_i64().unwrap())
            .collect();
        let pooled = d["b"]["median_ns"].as_i64().unwrap();
        assert!(
            *medians.iter().min().unwrap() <= pooled && pooled <= *medians.iter().max().unwrap(),
            "{medians:?} vs {pooled}"
        );
        assert_eq!(
            d["b"]["count"].as_u64().unwrap(),
            per.iter()
                .map(|r| r["count"].as_u64().unwrap())
                .sum::<u64>()
        );
        // The same side twice, once as a session and once rollout by
        // rollout with --a: the same comparison of A with itself.
        let rollouts: Vec<String> = c["a_episodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap().to_string())
            .collect();
        let r = analyze(&[
            "compare",
            a.to_str().unwrap(),
            "--b",
            &rollouts[0],
            "--b",
            &rollouts[1],
            "--b",
            &rollouts[2],
            "--json",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let same: Value = serde_json::from_str(&r.stdout).unwrap();
        for m in same["metrics"].as_array().unwrap() {
            assert_eq!(m["diff_median_ns"], 0, "{m}");
            assert_eq!(m["verdict"], "no_clear_change", "{m}");
        }
        // The text shows each rollout's figures.
        let t = analyze(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
        assert!(
            t.stdout.contains("per rollout, p50/p99: A "),
            "{}",
            t.stdout
        );
        // Both sides hold 3 rollouts: the run-level test (docs/compare.md).
        assert!(t.stdout.contains("run-level CI"), "{}", t.stdout);
        assert_eq!(d["test_median"]["method"], "rollouts", "{d}");
        assert_eq!(d["test_median"]["rollouts"], serde_json::json!([3, 3]));
    }

    #[test]
    fn a_session_without_evidence_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let session = tmp.path().join("session-x");
        std::fs::create_dir_all(session.join("rollout-000")).unwrap();
        std::fs::create_dir_all(session.join("rollout-001")).unwrap();
        let a = fixture("v1/serve-episode");
        let r = analyze(&["compare", a.to_str().unwrap(), session.to_str().unwrap()]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("session-x"), "{}", r.stderr);
        assert!(r.stderr.contains("none of its 2 rollout"), "{}", r.stderr);
    }

    #[test]
    fn compare_with_a_bad_side_names_it() {
        let a = fixture("v1/serve-episode");
        let r = analyze(&["compare", a.to_str().unwrap(), "/nonexistent/b"]);
        assert_eq!(r.code, 2);
        assert!(r.stderr.contains("/nonexistent/b"));
    }
}

mod plots_and_html {
    use super::*;

    #[test]
    fn plots_writes_png_and_svg_with_labelled_axes() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("plots");
        let r = analyze(&[
            "plots",
            fixture("v1/serve-episode").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        for name in [
            "period_timeline",
            "period_distribution",
            "work_distribution",
            "stage_breakdown",
        ] {
            let png = std::fs::read(out.join(format!("{name}.png"))).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}.png is a PNG");
            assert!(png.len() > 5_000, "{name}.png has content");
            let svg = std::fs::read_to_string(out.join(format!("{name}.svg"))).unwrap();
            assert!(svg.contains("<svg"), "{name}.svg");
        }
        let t = std::fs::read_to_string(out.join("period_timeline.svg")).unwrap();
        assert!(
            t.contains("period, start to start (ms)") && t.contains("(s)"),
            "axis units"
        );
        assert!(
            t.contains("warmup") && t.contains("running"),
            "phases in the legend"
        );
        let w = std::fs::read_to_string(out.join("work_distribution.svg")).unwrap();
        assert!(w.contains("work (ms)") && w.contains("CDF"));
    }

    #[test]
    fn html_report_is_self_contained_and_escapes_evidence_names() {
        // Rename a stage to markup, in the header and in every span.
        let evil = "<script>alert(1)</script>&\\\"";
        let tmp = damaged("v1/serve-episode", |lines| {
            let lines: Vec<String> = lines
                .into_iter()
                .map(|l| l.replace("\"viewer_control\"", &serde_json::to_string(evil).unwrap()))
                .collect();
            joined(lines)
        });
        std::fs::remove_file(tmp.path().join("control_timing_summary.json")).unwrap();
        let html_dir = tmp.path().join("html");
        let r = analyze(&[
            "--episode",
            tmp.path().to_str().unwrap(),
            "--html",
            html_dir.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let page = std::fs::read_to_string(html_dir.join("report.html")).unwrap();
        assert!(!page.contains("<script"), "evidence markup must be escaped");
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;"),
            "escaped name shown"
        );
        assert!(
            !page.contains("src=\"http") && !page.contains("href=\"http"),
            "no external assets"
        );
        assert!(page.matches("<svg").count() >= 4, "plots are inline SVG");
        assert!(
            !page.contains("viewer_control"),
            "the stage really was renamed"
        );
        // The stage table has one row per (phase, stage): the fixture's 7
        // stages in each of warmup and running, 14 rows under one header.
        let stages = page
            .split("<h2>Stages</h2>")
            .nth(1)
            .and_then(|t| t.split("</table>").next())
            .unwrap();
        assert_eq!(stages.matches("<tr>").count(), 1 + 14, "{stages}");
        assert_eq!(stages.matches("&lt;script&gt;alert(1)").count(), 2);
    }

    #[test]
    fn html_report_has_a_stage_table_per_thread_and_the_overlap() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("html");
        let r = analyze(&[
            "--episode",
            fixture("v2/synthetic-threads").to_str().unwrap(),
            "--html",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
        let threads = page
            .split("<h2>Background threads</h2>")
            .nth(1)
            .expect("threads section");
        assert!(threads.contains("<h3>worker</h3>"));
        // The worker's stage table: a header row and its one stage, `job`.
        let worker = threads.split("</table>").next().unwrap();
        assert_eq!(worker.matches("<tr>").count(), 2, "{worker}");
        assert!(worker.contains(">job<"));
        // The overlap table: header, sense and act (hand-computed in
        // fixtures/v2/synthetic-threads/EXPECTED.md: 41.7 % and 50.0 %).
        let overlap = threads
            .split("<h3>Overlap with the control stages</h3>")
            .nth(1)
            .unwrap();
        let overlap = overlap.split("</table>").next().unwrap();
        assert_eq!(overlap.matches("<tr>").count(), 3, "{overlap}");
        assert!(
            overlap.contains("41.7") && overlap.contains("50.0"),
            "{overlap}"
        );
    }

    #[test]
    fn compare_html_holds_tables_and_overlaid_cdfs() {
        let tmp = tempfile::tempdir().unwrap();
        let ep = fixture("v1/serve-episode");
        let dir = tmp.path().join("cmp");
        let r = analyze(&[
            "compare",
            ep.to_str().unwrap(),
            ep.to_str().unwrap(),
            "--html",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let page = std::fs::read_to_string(dir.join("compare.html")).unwrap();
        assert!(page.contains("What differs") && page.contains("no clear change"));
        assert!(page.contains("CDF, A against B"));
        assert!(dir.join("compare_period_cdf.png").exists());
        // The forest plot: one row per metric with a nonzero A median.
        let c: Value = serde_json::from_str(
            &analyze(&[
                "compare",
                ep.to_str().unwrap(),
                ep.to_str().unwrap(),
                "--json",
            ])
            .stdout,
        )
        .unwrap();
        let rows = c["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["a"]["median_ns"] != 0)
            .count();
        assert!(rows > 10);
        let forest = page
            .split("<h2>Forest plot</h2>")
            .nth(1)
            .expect("forest plot");
        let forest = forest.split("</svg>").next().unwrap();
        assert_eq!(
            forest.matches("<g class=\"row\">").count(),
            rows,
            "{forest}"
        );
        assert!(page.contains("Holm-adjusted"));
    }

    #[test]
    fn compare_counts_its_tests_and_judges_deadline_misses_with_holm() {
        // B: every running cycle of the serve fixture marked overdue (50 of
        // 50), so its deadline-miss rate is 1,000 per 1,000 against A's 0.
        let b = damaged("v1/serve-episode", |lines| {
            joined(
                lines
                    .into_iter()
                    .map(|l| {
                        if l.contains("\"phase\":\"running\"") {
                            l.replace("\"overdue\":false", "\"overdue\":true")
                        } else {
                            l
                        }
                    })
                    .collect(),
            )
        });
        std::fs::remove_file(b.path().join("control_timing_summary.json")).unwrap();
        let a = fixture("v1/serve-episode");
        let run = analyze(&[
            "compare",
            a.to_str().unwrap(),
            b.path().to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let c: Value = serde_json::from_str(&run.stdout).unwrap();
        let mu = &c["multiplicity"];
        assert_eq!(mu["method"], "holm");
        // One median test per metric, one p99 test for metrics with at
        // least 1,000 samples a side (none in this 70-cycle fixture), one
        // test per rate, one per loop or command Hz: tests = metrics here.
        assert_eq!(mu["tests"], mu["metrics"]);
        let n_metrics = c["metrics"].as_array().unwrap().len()
            + c["rates"].as_array().unwrap().len()
            + c["hz"].as_array().unwrap().len();
        assert_eq!(mu["metrics"], n_metrics);
        let miss = c["rates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["phase"] == "running" && r["metric"] == "deadline_miss")
            .unwrap();
        assert_eq!(miss["a_per_1000"], 0.0);
        assert_eq!(miss["b_per_1000"], 1000.0);
        assert_eq!(miss["verdict"], "worse");
        assert!(miss["p_holm"].as_f64().unwrap() < 0.05);
        // Every p-value is adjusted upwards, never down.
        for m in c["metrics"].as_array().unwrap() {
            assert!(m["p_median_holm"].as_f64().unwrap() >= m["p_median"].as_f64().unwrap());
            // 50 running cycles: ⌈0.999 × 50⌉ = 50, the p99.9 is the
            // maximum, with no cycle beyond it.
            assert_eq!(
                m["tail_warning"],
                "the p99.9 is a side's maximum: no cycle lies beyond it"
            );
        }
    }
}

mod end_to_end {
    use super::*;

    #[test]
    fn serve_then_analyze() {
        let _lock = serve_lock();
        let tmp = tempfile::tempdir().unwrap();
        let dir = serve(&["--warmup", "0.3", "--duration", "1.5"], tmp.path());
        let r = analyze_json(&dir, &[]);
        assert_eq!(r["state"], "complete");
        let running = phase(&r, "running");
        assert_eq!(running["cycles"], 150);
        // No rate claim here (it would fail on a loaded machine; the rate
        // is a benchmark's, docs/performance.md): loop Hz is what the
        // report's own mean period says, to its 10^-4 Hz rounding.
        let hz = running["loop_hz"].as_f64().unwrap();
        let mean = running["period"]["mean_ns"].as_f64().unwrap();
        assert!((hz - 1e9 / mean).abs() < 1e-3, "{hz} against 1e9/{mean}");
        assert_eq!(r["crosscheck"]["mismatches"].as_array().unwrap().len(), 0);
        assert!(r["diagnosis"][0].as_str().unwrap().starts_with("running:"));
    }

    #[test]
    fn uncapped_run_says_why_schedule_metrics_are_absent() {
        let _lock = serve_lock();
        let tmp = tempfile::tempdir().unwrap();
        let dir = serve(
            &["--rtf", "0", "--warmup", "0", "--duration", "0.5"],
            tmp.path(),
        );
        let r = analyze_json(&dir, &[]);
        assert!(r["schedule_metrics_absent"]
            .as_str()
            .unwrap()
            .contains("simulation"));
        assert!(phase(&r, "running")["sleep_overshoot"].is_null());
        assert!(r["caveats"].to_string().contains("clocks not comparable"));
        // No host-time period to judge: every card says so.
        for c in r["summary"].as_array().unwrap() {
            assert_eq!(c["state"], "not_judged", "{c}");
            assert!(c["words"].as_str().unwrap().contains("NOT JUDGED"));
        }
    }
}

mod export {
    use super::*;
    use std::collections::{BTreeMap, HashMap, HashSet};

    /// µs with three decimals back to integer ns (exact by construction).
    fn ns(v: &Value) -> i64 {
        (v.as_f64().unwrap() * 1000.0).round() as i64
    }

    /// The Trace Event Format rules the export promises (docs/export.md),
    /// checked on the v2 fixture (control thread and three background
    /// threads): the shape of every event; names for every thread used;
    /// complete events strictly nested per thread; one span event per
    /// recorded span (counted from the JSONL files here); balanced phase
    /// events; counters with numeric values.
    #[test]
    fn chrome_trace_follows_the_format_rules() {
        let ep = fixture("v2/serve-episode");
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("trace.json");
        let r = analyze(&[
            "export",
            ep.to_str().unwrap(),
            "--format",
            "chrome",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let mut thread_names: HashMap<i64, String> = HashMap::new();
        let mut complete: BTreeMap<i64, Vec<(i64, i64, String)>> = BTreeMap::new();
        let mut open_phases: HashMap<i64, i64> = HashMap::new();
        let mut counters: HashSet<String> = HashSet::new();
        let mut spans_per_thread: HashMap<String, usize> = HashMap::new();
        for e in events {
            let ph = e["ph"].as_str().unwrap();
            assert_eq!(e["pid"], 1, "{e}");
            assert!(e["name"].is_string(), "{e}");
            match ph {
                "M" => {
                    let name = e["args"]["name"].as_str().unwrap().to_string();
                    if e["name"] == "thread_name" {
                        thread_names.insert(e["tid"].as_i64().unwrap(), name);
                    } else {
                        assert_eq!(e["name"], "process_name", "{e}");
                    }
                }
                "X" => {
                    let (ts, dur) = (ns(&e["ts"]), ns(&e["dur"]));
                    assert!(ts >= 0 && dur >= 0, "{e}");
                    let tid = e["tid"].as_i64().unwrap();
                    complete.entry(tid).or_default().push((
                        ts,
                        ts + dur,
                        e["name"].as_str().unwrap().into(),
                    ));
                    if e["cat"] == "stage" {
                        assert!(e["args"]["path"].is_string(), "{e}");
                        if let Some(t) = e.get("tdur") {
                            assert!(t.as_f64().unwrap() >= 0.0, "{e}");
                        }
                        *spans_per_thread.entry(tid.to_string()).or_default() += 1;
                    }
                }
                "C" => {
                    assert!(e["args"]["value"].is_number(), "{e}");
                    counters.insert(e["name"].as_str().unwrap().into());
                }
                "b" => {
                    assert_eq!(e["cat"], "phase");
                    assert!(open_phases
                        .insert(e["id"].as_i64().unwrap(), ns(&e["ts"]))
                        .is_none());
                }
                "e" => {
                    let start = open_phases.remove(&e["id"].as_i64().unwrap()).unwrap();
                    assert!(ns(&e["ts"]) >= start, "{e}");
                }
                other => panic!("unexpected ph {other}: {e}"),
            }
        }
        assert!(open_phases.is_empty(), "unclosed phases {open_phases:?}");
        for c in ["period_ms", "sleep_overshoot_us", "deadline_lag_us"] {
            assert!(counters.contains(c), "no counter {c}");
        }
        // Strict nesting per thread: sorted by start (longest first), each
        // event ends before its enclosing one does, or starts after it.
        for (tid, evs) in &mut complete {
            assert!(
                thread_names.contains_key(tid),
                "tid {tid} has no thread_name"
            );
            evs.sort_by_key(|&(s, e, _)| (s, -e));
            let mut stack: Vec<(i64, i64, String)> = Vec::new();
            for ev in evs.iter() {
                while stack.last().is_some_and(|top| ev.0 >= top.1) {
                    stack.pop();
                }
                if let Some(top) = stack.last() {
                    assert!(ev.1 <= top.1, "tid {tid}: {ev:?} overlaps {top:?}");
                }
                stack.push(ev.clone());
            }
        }
        // One span event per span in each JSONL, counted here from the files.
        let count_spans = |file: &str| -> usize {
            std::fs::read_to_string(ep.join(file))
                .unwrap()
                .lines()
                .skip(1)
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .map(|v| v["spans"].as_array().map_or(0, |s| s.len()))
                .sum()
        };
        let by_name: HashMap<&str, i64> =
            thread_names.iter().map(|(t, n)| (n.as_str(), *t)).collect();
        let threads = [
            ("control", "control_timing.jsonl"),
            ("camera_reader", "control_timing.camera_reader.jsonl"),
            ("policy_worker", "control_timing.policy_worker.jsonl"),
            ("viewer_transport", "control_timing.viewer_transport.jsonl"),
        ];
        for (name, file) in threads {
            let tid = by_name[name];
            assert_eq!(
                spans_per_thread.get(&tid.to_string()).copied().unwrap_or(0),
                count_spans(file),
                "{name}"
            );
        }
        // 70 cycles in the control JSONL (71 lines less the header): as
        // many cycle events on the cycles track.
        let cycles = complete[&by_name["cycles"]]
            .iter()
            .filter(|e| e.2 == "cycle")
            .count();
        assert_eq!(cycles, 70);
    }

    #[test]
    fn export_of_a_bad_episode_names_it_and_leaves_no_file() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("x.hlog");
        let r = analyze(&[
            "export",
            "/nonexistent/ep",
            "--format",
            "hdr",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 2);
        assert!(r.stderr.contains("/nonexistent/ep"), "{}", r.stderr);
    }

    #[test]
    fn an_export_whose_write_fails_midway_leaves_no_temp_and_the_old_file() {
        // The analyzer runs with RLIMIT_FSIZE = 4 KiB (SIGXFSZ ignored, so
        // the write fails with EFBIG instead of killing it): the trace's
        // temporary is created and written until the limit, then the write
        // fails. The temporary must be gone and the earlier export intact.
        use std::os::unix::process::CommandExt;
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("trace.json");
        std::fs::write(&out, "the previous export\n").unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_analyze_control_timing"));
        cmd.args(["export"])
            .arg(fixture("v1/serve-episode"))
            .args(["--format", "chrome", "--out"])
            .arg(&out);
        // SAFETY: signal and setrlimit are async-signal-safe; this runs in
        // the child between fork and exec and touches nothing shared.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let lim = libc::rlimit {
                    rlim_cur: 4096,
                    rlim_max: 4096,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let o = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains("File too large"), "{stderr}");
        let names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["trace.json"], "no temporary left");
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "the previous export\n"
        );
    }
}
