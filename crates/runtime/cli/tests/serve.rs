//! End-to-end tests of `looptime serve` and the config rules.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use looptime_capture::format::read_summary;
use looptime_capture::{
    CaptureStatus, CycleRecord, EvidenceReader, Header, CYCLES_FILE, SUMMARY_FILE,
};
use looptime_cli::config::{Config, ConfigError};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn looptime() -> Command {
    Command::new(env!("CARGO_BIN_EXE_looptime"))
}

/// The analyzer binary, built beside this one by `cargo test --workspace`.
fn analyzer() -> PathBuf {
    let a = Path::new(env!("CARGO_BIN_EXE_looptime")).with_file_name("analyze_control_timing");
    assert!(
        a.exists(),
        "{} is missing: run the tests with `cargo test --workspace`, which builds the analyzer too",
        a.display()
    );
    a
}

/// Serve-running tests take this lock: recordings never compete for the
/// two cores of a CI machine (timing is what they record).
static SERVE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serve_lock() -> std::sync::MutexGuard<'static, ()> {
    SERVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The newest rollout: `latest` (which points only at rollouts with
/// evidence), else, for runs without --control-timing, the newest rollout
/// of `latest-session`.
fn latest(runs: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(runs.join("latest")) {
        return p;
    }
    let session = std::fs::canonicalize(runs.join("latest-session")).expect("latest-session link");
    let mut rollouts: Vec<PathBuf> = std::fs::read_dir(&session)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"))
        })
        .collect();
    rollouts.sort();
    rollouts.pop().expect("a rollout")
}

/// Run `looptime serve ARGS --runs-dir RUNS` to the end; it must succeed.
fn serve(args: &[&str], runs: &Path) -> Output {
    let out = looptime()
        .arg("serve")
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
    out
}

fn read_cycles(dir: &Path) -> (Header, Vec<CycleRecord>) {
    EvidenceReader::open(dir.join(CYCLES_FILE))
        .unwrap()
        .read_all()
        .unwrap()
}

#[test]
fn embedded_default_equals_configs_default_toml() {
    let path = repo_root().join("configs/default.toml");
    let from_file = Config::load(&path).unwrap();
    assert_eq!(from_file, Config::default());
}

#[test]
fn shipped_configs_all_load() {
    for entry in std::fs::read_dir(repo_root().join("configs")).unwrap() {
        let p = entry.unwrap().path();
        Config::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let err = Config::from_toml("[run]\nrate_hzz = 5\n", Path::new("x.toml")).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }));
    assert!(err.to_string().contains("rate_hzz"), "{err}");
    let err = Config::from_toml(
        "[stages.camera_read.cost]\nmeann_us = 1\n",
        Path::new("x.toml"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("meann_us"), "{err}");
}

#[test]
fn out_of_range_values_are_rejected_by_key() {
    let cases = [
        ("[run]\nrate_hz = 0.0\n", "run.rate_hz"),
        (
            "[scheduler]\nspin_margin_us = 6000.0\n",
            "scheduler.spin_margin_us",
        ),
        (
            "[stages.robot_send_command]\nacceptance_rate = 1.5\n",
            "acceptance_rate",
        ),
        (
            "[stages.executor.cost]\nmean_us = 10.0\njitter_us = 20.0\n",
            "stages.executor.cost.jitter_us",
        ),
        ("[run]\ntiming_max_cycles = 0\n", "run.timing_max_cycles"),
        (
            "[stages.robot_send_command]\nreply_delay_us = 100.0\nreply_jitter_us = 200.0\n",
            "stages.robot_send_command.reply_jitter_us",
        ),
    ];
    for (text, key) in cases {
        let err = Config::from_toml(text, Path::new("x.toml")).unwrap_err();
        assert!(
            matches!(err, ConfigError::OutOfRange { .. }),
            "{text}: {err}"
        );
        assert!(err.to_string().contains(key), "{text}: {err}");
    }
}

#[test]
fn serve_writes_a_complete_episode_the_schema_reads_back() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    serve(
        &["--control-timing", "--duration", "2", "--warmup", "0.5"],
        tmp.path(),
    );
    let dir = latest(tmp.path());
    assert!(dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("rollout-000"));
    assert!(dir
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("session-"));
    let (header, cycles) = read_cycles(&dir);
    // 0.5 s warmup + 2 s running at 100 Hz.
    assert_eq!(cycles.len(), 250);
    assert_eq!(cycles.iter().filter(|c| c.phase == "warmup").count(), 50);
    assert_eq!(header.nominal_period_ns, Some(10_000_000));
    let stages: Vec<&str> = cycles[100].spans.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(
        stages,
        [
            "camera_read",
            "viewer_control",
            "policy",
            "adapter_decode",
            "executor",
            "robot_send_command",
            "recording"
        ]
    );
    assert_eq!(
        cycles[100].spans[5].parent,
        Some(4),
        "send is nested in the executor"
    );
    // Absolute deadlines (no rate claim, which a loaded machine could
    // fail; the rate is benchmarked in bench/loop_vs_cyclictest.sh): a
    // cycle that was on time is released one period after the previous
    // on-time release, and under rebase an overdue one re-phases the
    // schedule onto its own start (which the evidence's clock does not
    // give exactly, so only the first rule is checked).
    let mut checked = 0;
    for w in cycles.windows(2) {
        let (prev, c) = (&w[0], &w[1]);
        let (Some(pt), Some(t)) = (prev.target_ns, c.target_ns) else {
            continue;
        };
        if !prev.overdue && prev.phase == c.phase {
            assert_eq!(t - pt, 10_000_000, "cycle {}", c.cycle);
            checked += 1;
        }
    }
    assert!(checked > 0, "no pair of cycles was checked");
    let summary = read_summary(dir.join(SUMMARY_FILE)).unwrap();
    assert_eq!(summary.status, CaptureStatus::Complete);
    assert_eq!(summary.capture.dropped_cycles, 0);
    // Each cycle records the measured dt it was handed: bounded at three
    // periods, and about one period when the loop is on time.
    let mut dts: Vec<f64> = cycles
        .iter()
        .map(|c| c.values["dt_measured_us"].as_f64().unwrap())
        .collect();
    // (A median near 10 ms would hold only on an idle machine: not here.)
    assert!(dts.iter().all(|&d| d > 0.0 && d <= 30_000.0), "dt bound");
    dts.sort_by(f64::total_cmp);

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["config"]["run"]["control_timing"], true);
    assert_eq!(manifest["config"]["run"]["timing_max_cycles"], 20000);
    assert_eq!(manifest["status"], "complete");
    for key in [
        "kernel_release",
        "cpu_model",
        "clocksource",
        "governor",
        "preempt_rt",
    ] {
        assert!(!manifest["host"][key].is_null(), "host.{key}");
    }
    assert!(manifest["realtime"]["timer_slack_ns"].is_u64());
    assert!(manifest["realtime"]["sched_policy"].is_string());
    assert!(manifest["source_hash"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert!(manifest["config_hash"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let kinds: Vec<String> = events
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        ["prepare", "warmup", "running", "finish", "evidence_written"]
    );
}

#[test]
fn without_control_timing_no_evidence_is_written() {
    // A run with evidence, then one without: the second writes its
    // session, rollout and manifest (control_timing false) but leaves
    // `latest` on the first, so `--episode runs/latest` still reads
    // evidence.
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    serve(
        &[
            "--duration",
            "0.3",
            "--warmup",
            "0",
            "--rtf",
            "0",
            "--control-timing",
        ],
        tmp.path(),
    );
    let with = latest(tmp.path());
    std::thread::sleep(std::time::Duration::from_millis(1100)); // a new session name
    serve(&["--duration", "0.3", "--warmup", "0"], tmp.path());
    assert_eq!(latest(tmp.path()), with, "latest stays on the evidence");
    let session = std::fs::canonicalize(tmp.path().join("latest-session")).unwrap();
    let dir = session.join("rollout-000");
    assert_ne!(dir, with);
    assert!(!dir.join(CYCLES_FILE).exists());
    assert!(dir.join("manifest.json").exists());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["config"]["run"]["control_timing"], false);
    let out = Command::new(analyzer())
        .arg("--episode")
        .arg(tmp.path().join("latest"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Interrupt a long serve with `signal` and check the orderly abort.
fn signal_mid_run_leaves_complete_evidence_marked_aborted(signal: &str) {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = looptime()
        .args([
            "serve",
            "--control-timing",
            "--duration",
            "30",
            "--warmup",
            "0.2",
            "--runs-dir",
        ])
        .arg(tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "serve did not stop after {signal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code.code(), Some(130));
    let dir = latest(tmp.path());
    let summary = read_summary(dir.join(SUMMARY_FILE)).unwrap();
    assert_eq!(summary.status, CaptureStatus::Aborted);
    let (_, cycles) = read_cycles(&dir);
    assert!(
        cycles.len() > 50 && cycles.len() < 3020,
        "{} cycles",
        cycles.len()
    );
    assert_eq!(summary.capture.retained_cycles, cycles.len() as u64);
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"status\": \"aborted\""));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("\"abort\""));
}

#[test]
fn sigint_mid_run_leaves_complete_evidence_marked_aborted() {
    signal_mid_run_leaves_complete_evidence_marked_aborted("-INT");
}

#[test]
fn sigterm_mid_run_leaves_complete_evidence_marked_aborted() {
    signal_mid_run_leaves_complete_evidence_marked_aborted("-TERM");
}

#[test]
fn provoked_spikes_overrun_and_print_the_shutdown_line() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let spiky = repo_root().join("configs/spiky.toml");
    let out = serve(
        &["--control-timing", "--config", spiky.to_str().unwrap()],
        tmp.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("cycles overran the control period"))
        .unwrap_or_else(|| panic!("no shutdown line in:\n{stdout}"));
    let n: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(n > 0);
    assert!(line.contains("of 350 cycles"), "{line}");
    let dir = latest(tmp.path());
    let (_, cycles) = read_cycles(&dir);
    assert_eq!(cycles.iter().filter(|c| c.overdue).count() as u64, n);
}

#[test]
fn the_shutdown_line_appears_exactly_when_cycles_overran() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let out = serve(
        &["--control-timing", "--duration", "0.5", "--warmup", "0"],
        tmp.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The default costs are about 3 ms of a 10 ms period, so normally no
    // cycle overruns; a loaded host can still preempt one. Either way the
    // line must agree with the evidence: absent at 0, "N of M" otherwise.
    let (_, cycles) = read_cycles(&latest(tmp.path()));
    let overdue = cycles.iter().filter(|c| c.overdue).count();
    let line = stdout
        .lines()
        .find(|l| l.contains("overran the control period"));
    match (overdue, line) {
        (0, None) => {}
        (n, Some(l)) if n > 0 => assert!(l.contains(&format!("{n} of 50 cycles")), "{l}"),
        (n, l) => panic!("{n} overdue cycles but shutdown line {l:?}\n{stdout}"),
    }
}

#[test]
fn uncapped_runs_are_deterministic_and_use_the_simulation_clock() {
    let _lock = serve_lock();
    let run = || {
        let tmp = tempfile::tempdir().unwrap();
        let t0 = Instant::now();
        serve(
            &[
                "--control-timing",
                "--rtf",
                "0",
                "--duration",
                "3",
                "--warmup",
                "0.5",
            ],
            tmp.path(),
        );
        let elapsed = t0.elapsed();
        let (header, cycles) = read_cycles(&latest(tmp.path()));
        (header, cycles, elapsed, tmp)
    };
    let (h, a, _, _keep_a) = run();
    let (_, b, _, _keep_b) = run();
    assert_eq!(
        h.clocks.target_ns,
        looptime_capture::ClockDomain::Simulation
    );
    assert_eq!(a.len(), 350);
    assert_eq!(a.len(), b.len());
    // Same robot-side state every cycle: it follows the simulation clock.
    let state = |c: &looptime_capture::CycleRecord| {
        ["robot_state_seq", "robot_time_ms", "command_success_rate"]
            .map(|k| c.values[k].to_string())
    };
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(state(x), state(y), "cycle {}", x.cycle);
    }
    // The robot's state sequence advances exactly one per cycle.
    assert_eq!(a[349].values["robot_state_seq"].as_i64(), Some(350));
}

#[test]
fn probe_reports_the_host_and_an_empty_loop_and_refuses_bad_settings() {
    let _lock = serve_lock();
    let o = looptime()
        .args(["probe", "--duration", "0.3", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in [
        "kernel_release",
        "preempt_rt",
        "clocksource",
        "governor",
        "cpus",
    ] {
        assert!(!r["host"][key].is_null(), "host.{key}");
    }
    assert!(r["realtime"]["timer_slack_ns"].is_u64());
    // A permission, not a serde `Result` (`{"Ok": null}`).
    let fifo = &r["sched_fifo"];
    assert!(fifo["permitted"].is_boolean(), "{fifo}");
    assert_eq!(
        fifo["permitted"] == false,
        fifo["why"].is_string(),
        "{fifo}"
    );
    assert!(
        fifo.get("Ok").is_none() && fifo.get("Err").is_none(),
        "{fifo}"
    );
    assert!(r["realtime"]["sched_policy"].is_string());
    // Counts and settings, not timings: 0.3 s x 100 Hz = 30 cycles, at the
    // default 200 µs margin.
    assert_eq!(r["cycles"], 30);
    assert_eq!(r["period_ns"], 10_000_000);
    assert_eq!(r["spin_margin_ns"], 200_000);
    for d in ["wake_latency", "os_sleep_latency"] {
        let x = &r[d];
        assert_eq!(x["count"], 30, "{d}");
        let q = |k: &str| x[k].as_i64().unwrap();
        assert!(
            q("p50_ns") <= q("p99_ns")
                && q("p99_ns") <= q("p999_ns")
                && q("p999_ns") <= q("max_ns"),
            "{d}: {x}"
        );
    }
    // `within_1us` is the share of wake latencies ≤ 1 µs, so it agrees
    // with the nearest-rank percentiles of the same samples: all within
    // exactly when the max is, at least half exactly when the p50 is.
    let share = r["within_1us"].as_f64().unwrap();
    let wake = |k: &str| r["wake_latency"][k].as_i64().unwrap();
    assert_eq!(share == 1.0, wake("max_ns") <= 1_000, "{r}");
    assert_eq!(share >= 0.5, wake("p50_ns") <= 1_000, "{r}");
    assert!(
        r["spin_margin_bounds_ns"].is_null(),
        "a fixed margin has no bounds"
    );
    // The probe answers its question, by the documented rule (the rule's
    // own cases are unit-tested in probe.rs).
    let fit = r["verdict"]["fit"].as_str().unwrap();
    let late = r["wake_latency"]["p99_ns"].as_i64().unwrap() > 1_000_000
        || r["overruns"].as_u64().unwrap() > 0;
    assert_eq!(fit == "not_fit", late, "{r}");
    assert!(
        ["fit", "fit_with_adaptive_margin", "not_fit"].contains(&fit),
        "{fit}"
    );
    assert!(
        r["verdict"]["reason"]
            .as_str()
            .unwrap()
            .contains("at 100 Hz"),
        "{r}"
    );
    // With no margin there is nothing to spin: the absolute sleep returns at
    // or after the deadline, so the spin share stays near zero (1 % of a
    // core at 100 Hz would be 100 µs of spin a cycle).
    let o = looptime()
        .args([
            "probe",
            "--duration",
            "0.2",
            "--spin-margin-us",
            "0",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let z: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(z["spin_margin_ns"], 0);
    assert!(z["spin_cpu_share"].as_f64().unwrap() < 0.01, "{z}");
    // The text form says the same and ends with its hints.
    let t = looptime()
        .args(["probe", "--duration", "0.1"])
        .output()
        .unwrap();
    assert!(t.status.success());
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(text.contains("empty loop: 10 cycles at 100 Hz"), "{text}");
    assert!(text.contains("\nverdict: "), "{text}");
    // Bad settings: a clear error naming the flag, never a panic.
    for (args, needle) in [
        (&["--rate", "0"][..], "--rate 0 Hz is out of range"),
        (&["--rate", "NaN"], "--rate NaN Hz is out of range"),
        (&["--duration", "-1"], "--duration -1 s is out of range"),
        (&["--spin-margin-us", "9000"], "spin margin"),
    ] {
        let o = looptime().arg("probe").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn the_auto_probe_reports_where_the_margin_settled_within_its_bounds() {
    let _lock = serve_lock();
    let o = looptime()
        .args([
            "probe",
            "--duration",
            "0.5",
            "--spin-margin-us",
            "auto",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["spin_margin_auto"], true);
    assert_eq!(r["cycles"], 50);
    // At 100 Hz: the ceiling is half the period capped at 2 ms = 2 ms, the
    // floor 50 µs (looptime_runtime::margin::AUTO_MARGIN_FLOOR_NS).
    let bounds = |i: usize| r["spin_margin_bounds_ns"][i].as_u64().unwrap();
    assert_eq!((bounds(0), bounds(1)), (50_000, 2_000_000), "{r}");
    // The settled margin (the last wait's) lies in the range the waits
    // used, which starts at the first wait's 200 µs default and stays
    // within the floor and the ceiling.
    let settled = r["spin_margin_ns"].as_u64().unwrap();
    let (lo, hi) = (
        r["spin_margin_range_ns"][0].as_u64().unwrap(),
        r["spin_margin_range_ns"][1].as_u64().unwrap(),
    );
    assert!(
        bounds(0) <= lo && lo <= settled && settled <= hi && hi <= bounds(1),
        "{r}"
    );
    assert!(
        lo <= 200_000 && 200_000 <= hi,
        "the first wait's margin is in the range: {r}"
    );
    // Spinning costs at most the highest margin per period, with room for
    // preemption while spinning.
    let spin = r["spin_cpu_share"].as_f64().unwrap();
    assert!(spin <= hi as f64 / 10e6 + 0.05, "{r}");
    // The text says the same, with the bounds.
    let t = looptime()
        .args(["probe", "--duration", "0.2", "--spin-margin-us", "auto"])
        .output()
        .unwrap();
    assert!(t.status.success());
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(
        text.contains("spin margin auto, settled at ")
            && text.contains("floor 50.0 µs, ceiling 2000.0 µs)"),
        "{text}"
    );
}

#[test]
fn a_refused_realtime_setting_warns_carries_on_and_is_in_the_manifest() {
    // Pinning to a CPU that does not exist is refused on every host, as
    // root too: the run goes on unpinned, says so once, and the manifest
    // records what was obtained and the warning.
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("rt.toml");
    std::fs::write(
        &cfg,
        "[run]\nwarmup_s = 0\nduration_s = 0.05\n[stats]\ninterval_s = 0\n[realtime]\nenabled = true\ncpu = 99\n",
    )
    .unwrap();
    let o = serve(
        &["--config", cfg.to_str().unwrap(), "--control-timing"],
        tmp.path(),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let warning = "real-time: pinning to CPU 99 refused";
    assert_eq!(stdout.matches(warning).count(), 1, "{stdout}");
    let dir = latest(tmp.path());
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let rt = &m["realtime"];
    assert!(rt["cpu"].is_null(), "{rt}");
    let warnings: Vec<&str> = rt["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(warnings.iter().any(|w| w.starts_with(warning)), "{rt}");
    // What else was asked (SCHED_FIFO 80, mlockall) is either obtained or
    // warned about, depending on the host's permissions, never silent.
    if rt["sched_policy"] == "SCHED_FIFO" {
        assert_eq!(rt["sched_priority"], 80, "{rt}");
    } else {
        assert!(warnings.iter().any(|w| w.contains("SCHED_FIFO")), "{rt}");
    }
    if rt["mlockall"] != true {
        assert!(warnings.iter().any(|w| w.contains("mlockall")), "{rt}");
    }
    // The evidence was written as usual.
    assert!(dir.join(CYCLES_FILE).exists());
}

/// SHA-256 as `sha256:<hex>`.
fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(bytes);
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[test]
fn the_config_and_source_hashes_are_what_runtime_md_defines() {
    let _lock = serve_lock();
    // config_hash: SHA-256 of the resolved config's canonical TOML. The run
    // takes a short config file plus flags; the resolved config is the
    // file's values with the flags applied, and its canonical
    // TOML is what `Config::to_toml` prints (the file's own text, comments
    // and order, does not count).
    let tmp = tempfile::tempdir().unwrap();
    let text = "# a comment\n[stats]\ninterval_s = 0\n[run]\nduration_s = 0.05\nwarmup_s = 0\n";
    let cfg_path = tmp.path().join("h.toml");
    std::fs::write(&cfg_path, text).unwrap();
    serve(
        &["--config", cfg_path.to_str().unwrap(), "--control-timing"],
        tmp.path(),
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(latest(tmp.path()).join("manifest.json")).unwrap(),
    )
    .unwrap();
    // The flags are part of the resolved config: --control-timing and
    // --runs-dir (which the helper passes).
    let mut resolved = Config::from_toml(text, &cfg_path).unwrap();
    resolved.run.control_timing = true;
    resolved.run.runs_dir = tmp.path().display().to_string();
    assert_eq!(
        m["config_hash"],
        sha256(resolved.hash_text().unwrap().as_bytes())
    );
    assert_ne!(m["config_hash"], sha256(text.as_bytes()));
    // Where the output goes is not part of the hash: the same loop
    // recorded into another runs directory hashes alike.
    let other = tmp.path().join("elsewhere");
    serve(
        &["--config", cfg_path.to_str().unwrap(), "--control-timing"],
        &other,
    );
    let m2: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(latest(&other).join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m2["config_hash"], m["config_hash"]);
    assert_ne!(
        m2["config"]["run"]["runs_dir"],
        m["config"]["run"]["runs_dir"]
    );
    // For the embedded default, `looptime default-config` without its
    // runs_dir and timing_ring_dir lines, through sha256sum.
    let printed = looptime().arg("default-config").output().unwrap().stdout;
    let kept: String = String::from_utf8(printed)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("runs_dir = ") && !l.starts_with("timing_ring_dir = "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        sha256(kept.as_bytes()),
        sha256(Config::default().hash_text().unwrap().as_bytes())
    );

    // source_hash: SHA-256 over the capture, runtime, runtime/cli and
    // analyze crates' src/**/*.rs and *.toml, their Cargo.toml, the root Cargo.toml and
    // Cargo.lock, sorted by repository-relative path, each as that path, a
    // NUL byte, then its contents. Recomputed here from the tree the binary
    // was built from.
    let root = repo_root();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs" || x == "toml") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for krate in ["capture", "runtime", "runtime/cli", "analyze"] {
        walk(&root.join("crates").join(krate).join("src"), &mut files);
        files.push(root.join("crates").join(krate).join("Cargo.toml"));
    }
    files.push(root.join("Cargo.toml"));
    files.push(root.join("Cargo.lock"));
    let mut rel: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| (p.strip_prefix(&root).unwrap().display().to_string(), p))
        .collect();
    // By path, component by component (as a PathBuf sorts), not as text.
    rel.sort_by(|a, b| Path::new(&a.0).cmp(Path::new(&b.0)));
    let mut bytes = Vec::new();
    for (name, p) in rel {
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&std::fs::read(p).unwrap());
    }
    assert_eq!(m["source_hash"], sha256(&bytes));
}

#[test]
fn completions_for_three_shells_and_a_man_page_per_subcommand() {
    for (shell, marker) in [
        ("bash", "_looptime()"),
        ("zsh", "#compdef looptime"),
        ("fish", "complete -c looptime"),
    ] {
        let o = looptime().args(["completions", shell]).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{shell}");
        assert!(
            text.contains(marker),
            "{shell}: {}",
            &text[..text.len().min(200)]
        );
        assert!(
            text.contains("serve") && text.contains("recover"),
            "{shell}"
        );
    }
    // The bash script completes a subcommand name: `looptime se<TAB>`.
    let bin = env!("CARGO_BIN_EXE_looptime");
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source <(\"{bin}\" completions bash); COMP_WORDS=(looptime se); COMP_CWORD=1; \
             _looptime looptime se looptime; echo \"${{COMPREPLY[*]}}\""
        ))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "serve");
    // One page for the binary and one per subcommand, each a roff page
    // titled with its name.
    let dir = tempfile::tempdir().unwrap();
    let o = looptime().arg("man").arg(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for page in [
        "looptime",
        "looptime-serve",
        "looptime-probe",
        "looptime-recover",
        "looptime-watch",
    ] {
        let text = std::fs::read_to_string(dir.path().join(format!("{page}.1"))).unwrap();
        assert!(text.contains(&format!(".TH {page} 1")), "{page}");
    }
}

/// One word for one idea (docs/metrics.md, Vocabulary): the live `[stats]`
/// line counts overruns, as the report does, never "overdue".
#[test]
fn the_live_stats_line_says_overruns() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("stats.toml");
    std::fs::write(
        &cfg,
        "[run]\nwarmup_s = 0\nduration_s = 0.5\n[stats]\ninterval_s = 0.1\n",
    )
    .unwrap();
    let out = serve(&["--config", cfg.to_str().unwrap()], tmp.path());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Vec<&str> = text.lines().filter(|l| l.starts_with("[stats]")).collect();
    assert!(!stats.is_empty(), "{text}");
    for l in stats {
        assert!(l.ends_with(" overruns") && !l.contains("overdue"), "{l}");
    }
}

/// A declared budget and tolerance reach the live line: with a 1 µs
/// budget every cycle's work is over it, so each `[stats]` line's budget
/// overruns equal its cycles; the wake and completion misses are counted
/// (how many depends on the host, so only that the counts are there).
#[test]
fn the_live_stats_line_counts_a_declared_budget() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("budget.toml");
    std::fs::write(
        &cfg,
        "[run]\nwarmup_s = 0\nduration_s = 0.5\n[stats]\ninterval_s = 0.1\n\
         [scheduler]\ncompute_budget_us = 1\ndeadline_tolerance_us = 500\n",
    )
    .unwrap();
    let out = serve(&["--config", cfg.to_str().unwrap()], tmp.path());
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    let stats: Vec<&str> = text.lines().filter(|l| l.starts_with("[stats]")).collect();
    assert!(!stats.is_empty(), "{text}");
    for l in stats {
        let cycles: u64 = l["[stats] ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(l.contains(&format!(", {cycles} budget overruns, ")), "{l}");
        assert!(
            l.contains(" wake misses, ") && l.contains(" completion misses, "),
            "{l}"
        );
    }
}

/// `serve --rate` and `--seed` set run.rate_hz and run.seed, as the Python
/// example's flags do; an unwritten spin margin follows the rate (5 kHz:
/// at most half the 200 µs period), and `--help` shows each default.
#[test]
fn serve_takes_rate_and_seed_and_its_help_shows_defaults() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    serve(
        &[
            "--rate",
            "5000",
            "--seed",
            "42",
            "--rtf",
            "0",
            "--duration",
            "0.02",
            "--warmup",
            "0",
        ],
        tmp.path(),
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(latest(tmp.path()).join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["config"]["run"]["rate_hz"], 5000.0);
    assert_eq!(m["config"]["run"]["seed"], 42);
    assert_eq!(m["config"]["scheduler"]["spin_margin_us"], 100.0);
    assert_eq!(m["schedule"]["nominal_period_ns"], 200_000);
    let help = looptime().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for d in ["default 100", "default 5", "default 1", "default runs"] {
        assert!(help.contains(d), "{d}: {help}");
    }
}

/// `serve --label NAME` names the session: in the manifest (outside
/// config_hash), every report's header and `compare`'s side name; and
/// `runs/latest-session` points at the newest session.
#[test]
fn a_labelled_session_is_named_in_reports_and_comparisons() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let flags = [
        "--rtf",
        "0",
        "--duration",
        "0.2",
        "--warmup",
        "0",
        "--control-timing",
    ];
    let mut a = flags.to_vec();
    a.extend(["--label", "inline-camera"]);
    serve(&a, tmp.path());
    let first = std::fs::canonicalize(tmp.path().join("latest-session")).unwrap();
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(latest(tmp.path()).join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["config"]["run"]["label"], "inline-camera");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    serve(&flags, tmp.path());
    let second = std::fs::canonicalize(tmp.path().join("latest-session")).unwrap();
    assert_ne!(first, second, "latest-session moves to the newest session");
    let m2: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(latest(tmp.path()).join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        m2["config_hash"], m["config_hash"],
        "the label is not hashed"
    );
    let analyzer =
        Path::new(env!("CARGO_BIN_EXE_looptime")).with_file_name("analyze_control_timing");
    let r = Command::new(&analyzer)
        .arg("--episode")
        .arg(first.join("rollout-000"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&r.stdout).contains("run: label inline-camera, "));
    let c = Command::new(&analyzer)
        .arg("compare")
        .arg(&first)
        .arg(&second)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(text.contains("  A: inline-camera ("), "{text}");
}

/// The age at use of `source` in the running phase, from the analyzer's
/// JSON report of `episode`: (uses, p50 ns).
fn age_at_use(episode: &Path, source: &str) -> (u64, i64) {
    let out = std::process::Command::new(analyzer())
        .args(["--episode", episode.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = r["data_age"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == source)
        .unwrap_or_else(|| panic!("no source {source}"))
        .clone();
    let p = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "running")
        .unwrap()
        .clone();
    (
        p["uses"].as_u64().unwrap(),
        p["age_at_use"]["p50_ns"].as_i64().unwrap(),
    )
}

#[test]
fn a_background_camera_reader_hands_the_loop_older_frames_than_an_inline_read() {
    // The trade docs/runtime.md describes: the background reader makes
    // camera_read cheap, and its frames older. An inline frame is stamped
    // as it is read, so its age at use is the few µs to the sample call; a
    // background frame is as old as the reader's last capture (60 Hz: up
    // to 16.7 ms). Both serve runs on the same host, uncapped (simulation
    // clock) for 1 s of 100 Hz; the frames' ages are host time.
    let _g = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let mut ages = Vec::new();
    for config in ["default", "camera_background"] {
        let runs = tmp.path().join(config);
        let cfg = repo_root().join(format!("configs/{config}.toml"));
        serve(
            &[
                "--config",
                cfg.to_str().unwrap(),
                "--control-timing",
                "--rtf",
                "0",
                "--duration",
                "1",
                "--warmup",
                "0",
            ],
            &runs,
        );
        let (uses, p50) = age_at_use(&latest(&runs), "camera");
        // One frame a running cycle; a cycle that runs before the
        // background reader's first frame has none to use.
        assert!((90..=100).contains(&uses), "{config}: {uses} uses");
        ages.push(p50);
    }
    let (inline, background) = (ages[0], ages[1]);
    assert!(
        inline < 1_000_000,
        "an inline frame is used as it is read: {inline} ns"
    );
    assert!(
        background > inline,
        "background frames must be older: inline {inline} ns, background {background} ns"
    );
}

#[test]
fn a_declared_budget_counts_overruns_and_leaves_the_release_timeline_alone() {
    // The same seeded run uncapped (--rtf 0), without and with a compute
    // budget of 100 µs (below the default stages' cost) and a tolerance:
    // the release points are the same, the header declares both only in
    // the second, and the analyzer counts budget overruns there.
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    let budgeted = tmp.path().join("budgeted");
    let cfg = tmp.path().join("budget.toml");
    std::fs::write(
        &cfg,
        "[run]\nduration_s = 0.3\nwarmup_s = 0\n[scheduler]\ncompute_budget_us = 100.0\ndeadline_tolerance_us = 1000.0\n",
    )
    .unwrap();
    serve(
        &[
            "--rtf",
            "0",
            "--control-timing",
            "--duration",
            "0.3",
            "--warmup",
            "0",
        ],
        &plain,
    );
    serve(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--rtf",
            "0",
            "--control-timing",
        ],
        &budgeted,
    );
    let (h_plain, c_plain) = read_cycles(&latest(&plain));
    let (h_budget, c_budget) = read_cycles(&latest(&budgeted));
    assert_eq!(h_plain.compute_budget_ns, None);
    assert_eq!(h_plain.deadline_tolerance_ns, None);
    assert_eq!(h_budget.compute_budget_ns, Some(100_000));
    assert_eq!(h_budget.deadline_tolerance_ns, Some(1_000_000));
    let targets = |c: &[CycleRecord]| c.iter().map(|c| c.target_ns).collect::<Vec<_>>();
    assert_eq!(
        targets(&c_plain),
        targets(&c_budget),
        "the release timeline is unchanged"
    );
    let out = Command::new(analyzer())
        .args(["--json", "--episode"])
        .arg(latest(&budgeted))
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let over = &r["budget"]["phases"][0]["budget_overruns"];
    assert!(over["count"].as_u64().unwrap() > 0, "{over}");
    assert_eq!(over["judged"], c_budget.len() as u64, "{over}");
}
