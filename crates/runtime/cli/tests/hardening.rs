//! Fault injection on `looptime serve`: memory bounds, signals during the
//! finish, leftover temporary files, flags and messages (issue: hardening).
//! Each test here failed on the build before these fixes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use looptime_capture::format::read_summary;
use looptime_capture::{CaptureStatus, EvidenceReader, CYCLES_FILE, SUMMARY_FILE};

fn looptime() -> Command {
    Command::new(env!("CARGO_BIN_EXE_looptime"))
}

/// Recordings never compete for the two cores of a CI machine.
static SERVE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serve_lock() -> std::sync::MutexGuard<'static, ()> {
    SERVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(args: &[&str]) -> Output {
    looptime().args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("test.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// `serve --control-timing` with the config `text`, into `dir/runs`.
fn serve_recording(dir: &Path, text: &str) -> (Output, PathBuf) {
    let runs = dir.join("runs");
    let cfg = write_config(dir, text);
    let o = run(&[
        "serve",
        "--control-timing",
        "--config",
        cfg.to_str().unwrap(),
        "--runs-dir",
        runs.to_str().unwrap(),
    ]);
    (o, runs)
}

/// Every file below `dir`, recursively, by name.
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn temps(dir: &Path) -> Vec<PathBuf> {
    all_files(dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect()
}

fn session_dir(runs: &Path) -> PathBuf {
    let mut s: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("session-")
        })
        .collect();
    assert_eq!(s.len(), 1, "{s:?}");
    s.pop().unwrap()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

// ---- 1. memory bound ----

#[test]
fn a_recorder_over_the_budget_is_refused_by_key_and_bytes_before_any_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (o, runs) = serve_recording(tmp.path(), "[run]\ntiming_max_cycles = 50000000\n");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    // The footprint is cycles x (cycle slot + 16 span slots + 8 sample
    // slots + 4 values), which capture computes; the message must carry
    // that exact number.
    let bytes = looptime_capture::footprint_bytes(50_000_000, 16, 8, 4);
    for needle in [
        "run.timing_max_cycles",
        "run.timing_max_spans_per_cycle",
        "run.timing_memory_budget_mb",
        &bytes.to_string(),
    ] {
        assert!(err.contains(needle), "{needle} missing in: {err}");
    }
    assert!(!runs.exists(), "a refused run must create no directory");
}

#[test]
fn a_refused_allocation_is_an_error_with_exit_1_never_an_abort() {
    // 50M cycles x 16 spans is about 57 GB: inside a budget raised to its
    // ceiling. serve runs under RLIMIT_AS = 4 GiB, so the allocator refuses
    // it on any host, whatever its memory and overcommit setting (without
    // the limit a host with 64 GB would hand it out). Before the fix that
    // refusal aborted the process (SIGABRT).
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let cfg = write_config(
        tmp.path(),
        "[run]\ntiming_max_cycles = 50000000\ntiming_memory_budget_mb = 1048576\n",
    );
    let mut cmd = looptime();
    cmd.args(["serve", "--control-timing", "--config"])
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs);
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; it runs in the child between
    // fork and exec and touches nothing shared.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot allocate the recorder's span slots"),
        "{err}"
    );
    // No rollout directory: the recorder is built before it. The session
    // says it failed and why.
    let session = session_dir(&runs);
    assert!(!session.join("rollout-000").exists());
    let record = json(&session.join("session.json"));
    assert_eq!(record["status"], "failed");
    assert!(record["stop"].as_str().unwrap().contains("cannot allocate"));
}

#[test]
fn the_footprint_is_printed_at_start_and_recorded_in_the_manifest() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&[
        "serve",
        "--control-timing",
        "--duration",
        "0.1",
        "--warmup",
        "0",
        "--runs-dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = looptime_capture::footprint_bytes(20_000, 16, 8, 4);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(&format!("= {bytes} bytes")),
        "no footprint line in {stdout}"
    );
    let m = json(&tmp.path().join("latest/manifest.json"));
    assert_eq!(m["recorder"]["footprint_bytes"], bytes);
    assert_eq!(m["recorder"]["budget_bytes"], 1024u64 << 20);
}

// ---- 2 and 3. signals during the finish ----

/// A session of three uncapped rollouts with free stages, so that each
/// rollout's loop takes a fraction of a second and its finish (about
/// 60,000 cycles of JSONL in a debug build) takes much longer: a signal
/// sent when the JSONL's temporary appears lands inside the finish.
fn spawn_slow_finish_session(runs: &Path, cfg_dir: &Path) -> Child {
    let free = "mean_us = 0.0\njitter_us = 0.0\n";
    let cfg = write_config(
        cfg_dir,
        &format!(
            "[run]\nrtf = 0.0\nduration_s = 600.0\nwarmup_s = 0.0\nepisodes = 3\ntiming_max_cycles = 60000\n\
             [stats]\ninterval_s = 0.0\n\
             [stages.camera_read.cost]\n{free}[stages.viewer_control.cost]\n{free}\
             [stages.adapter_decode.cost]\n{free}[stages.executor.cost]\n{free}\
             [stages.robot_send_command.cost]\n{free}[stages.recording.cost]\n{free}"
        ),
    );
    looptime()
        .args(["serve", "--control-timing", "--config"])
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(runs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until rollout-000's JSONL temporary exists (its finish has begun).
fn wait_for_finish(runs: &Path) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "the finish never began");
        if let Ok(entries) = std::fs::read_dir(runs) {
            for s in entries.flatten() {
                let r0 = s.path().join("rollout-000");
                if let Ok(files) = std::fs::read_dir(&r0) {
                    for f in files.flatten() {
                        let name = f.file_name().to_string_lossy().into_owned();
                        if name.starts_with(".control_timing.jsonl.") {
                            return r0;
                        }
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn finish_signal_case(signals: usize) -> (Output, PathBuf, tempfile::TempDir) {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let child = spawn_slow_finish_session(&runs, tmp.path());
    let rollout = wait_for_finish(&runs);
    for _ in 0..signals {
        kill(&child, "-INT");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out, rollout, tmp)
}

#[test]
fn sigint_during_a_rollouts_finish_stops_the_session_and_says_what_did_not_run() {
    let (out, rollout, tmp) = finish_signal_case(1);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    // rollout-000 ran every cycle before the signal: its evidence is whole
    // and says complete. The other two never started.
    let summary = read_summary(rollout.join(SUMMARY_FILE)).unwrap();
    assert_eq!(summary.status, CaptureStatus::Complete);
    assert_eq!(summary.capture.total_cycles, 60_000);
    let session = rollout.parent().unwrap();
    assert!(!session.join("rollout-001").exists());
    let record = json(&session.join("session.json"));
    assert_eq!(record["status"], "aborted", "{record}");
    let states: Vec<&str> = record["rollouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["complete", "not_run", "not_run"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("not run: rollout-001, rollout-002"),
        "{stdout}"
    );
    assert!(temps(tmp.path()).is_empty(), "{:?}", temps(tmp.path()));
}

#[test]
fn a_second_signal_during_the_finish_lets_the_jsonl_finish_and_says_so() {
    let (out, rollout, tmp) = finish_signal_case(3);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("SIGINT again"), "{err}");
    assert!(err.contains("kill -9"), "{err}");
    // Nothing was cut short: the JSONL holds every cycle, the summary and
    // the manifest exist, and no temporary is left.
    let (_, cycles) = EvidenceReader::open(rollout.join(CYCLES_FILE))
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(cycles.len(), 60_000);
    assert!(rollout.join(SUMMARY_FILE).exists());
    assert!(rollout.join("manifest.json").exists());
    assert!(rollout.join("events.jsonl").exists());
    assert!(temps(tmp.path()).is_empty(), "{:?}", temps(tmp.path()));
}

// ---- 4. temporary files ----

#[test]
fn every_temporary_is_hidden_and_named_with_the_pid() {
    // Stop a session inside its finish with SIGKILL: whatever temporaries
    // exist at that moment must be `.name.<pid>.tmp`.
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let mut child = spawn_slow_finish_session(&runs, tmp.path());
    let pid = child.id();
    wait_for_finish(&runs);
    kill(&child, "-KILL");
    let _ = child.wait();
    let left = temps(&runs);
    assert!(!left.is_empty());
    for t in &left {
        let name = t.file_name().unwrap().to_str().unwrap();
        let (_, p) = looptime_capture::parse_temp_name(name)
            .unwrap_or_else(|| panic!("{name} is not .<name>.<pid>.tmp"));
        assert_eq!(p, pid);
    }
    // The manifest was written before the evidence, so it survived the
    // kill and `latest` points at the killed rollout.
    let latest = std::fs::canonicalize(runs.join("latest")).unwrap();
    assert!(latest.join("manifest.json").exists());
    assert!(!latest.join(SUMMARY_FILE).exists());
}

#[test]
fn the_next_serve_removes_temporaries_of_dead_processes_and_says_so() {
    let _lock = serve_lock();
    let tmp = tempfile::tempdir().unwrap();
    let rollout = tmp.path().join("session-20260101T000000Z/rollout-000");
    std::fs::create_dir_all(&rollout).unwrap();
    // pid 4294967 is above Linux's largest pid_max (2^22), so it is dead.
    let dead = rollout.join(".control_timing.jsonl.4294967.tmp");
    std::fs::write(&dead, b"{\"type\":\"header\"").unwrap();
    // Our own pid is alive: that temporary must stay.
    let alive = rollout.join(format!(".manifest.json.{}.tmp", std::process::id()));
    std::fs::write(&alive, b"{}").unwrap();
    let o = run(&[
        "serve",
        "--duration",
        "0.05",
        "--warmup",
        "0",
        "--runs-dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!dead.exists());
    assert!(alive.exists());
    assert!(
        stdout.contains(&format!("removed {}", dead.display())) && stdout.contains("4294967"),
        "{stdout}"
    );
}

// ---- 6. flags and exit codes ----

#[test]
fn negative_flag_values_are_refused_by_name_in_both_spellings() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().to_str().unwrap();
    for (flag, key, value) in [
        ("--duration", "run.duration_s", "-1"),
        ("--warmup", "run.warmup_s", "-0.5"),
        ("--rtf", "run.rtf", "-0.5"),
        ("--episodes", "run.episodes", "-2"),
    ] {
        for args in [
            vec!["serve", flag, value, "--runs-dir", runs],
            vec!["serve", &format!("{flag}={value}"), "--runs-dir", runs],
        ] {
            let args: Vec<&str> = args.iter().map(|s| &**s).collect();
            let o = run(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert!(err.contains(key), "{args:?}: {err}");
            assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        }
    }
}

#[test]
fn an_out_of_range_count_is_refused_with_the_value_typed() {
    // Past u32: the message shows 99999999999, not a capped 4294967295.
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&[
        "serve",
        "--episodes",
        "99999999999",
        "--runs-dir",
        tmp.path().to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("run.episodes") && err.contains("99999999999") && !err.contains("4294967295"),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let o = run(&["serve", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["serve", "--duration", "soon"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["serve", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("--control-timing"));
}

// ---- 7. messages ----

#[test]
fn a_write_failure_names_the_path_and_states_the_os_error_once() {
    // The runs directory is a path below a regular file: creating it fails
    // with "Not a directory", which must appear exactly once.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let runs = file.join("runs");
    let o = run(&["serve", "--runs-dir", runs.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&runs.display().to_string()), "{err}");
    assert_eq!(err.matches("Not a directory").count(), 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `robot-peer` refuses a bad value with its range, and gives up with a
/// clear error when no client writes within `--wait`; a `[robot]` config
/// that cannot run is refused before anything runs.
#[test]
fn the_robot_peer_and_the_robot_section_refuse_what_cannot_run() {
    for (args, want) in [
        (vec!["--rate", "0"], "--rate must be 1 to 10,000 Hz, not 0"),
        (
            vec!["--stall-every-ms", "10", "--stall-ms", "20"],
            "--stall-ms must be 0 to --stall-every-ms, not 20",
        ),
        (
            vec!["--wait", "0.05"],
            "no client sent its 8-byte hello within 0.05 s",
        ),
    ] {
        let o = run(&[&["robot-peer"][..], &args].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    let tmp = tempfile::tempdir().unwrap();
    for (text, want) in [
        (
            "[run]\nrtf = 2.0\n[robot]\ntransport = \"udp\"\n",
            "config key `run.rtf` = 2 is out of range: expected 1 with robot.transport = \"udp\"",
        ),
        (
            "[lifecycle]\npause_at_s = 1.0\npause_s = 0.5\n[robot]\ntransport = \"udp\"\n",
            "`lifecycle.pause_at_s` = 1 is out of range",
        ),
        (
            "[robot]\nstall_every_ms = 10.0\nstall_ms = 11.0\n",
            "`robot.stall_ms` = 11 is out of range: expected 0 to robot.stall_every_ms",
        ),
        ("[robot]\ntransport = \"tcp\"\n", "unknown variant `tcp`"),
    ] {
        let cfg = write_config(tmp.path(), text);
        let o = run(&["serve", "--config", cfg.to_str().unwrap()]);
        assert_ne!(o.status.code(), Some(0), "{text}");
        assert!(stderr(&o).contains(want), "{text}: {}", stderr(&o));
    }
}

#[test]
fn a_closed_pipe_ends_a_printing_command_quietly_and_never_a_recording() {
    use std::os::unix::process::ExitStatusExt;
    // `looptime default-config | head -0`: the reader is gone before the
    // write. Before, println! panicked (exit 101, "failed printing to
    // stdout"); now the command ends by SIGPIPE, as `cat` does, silently.
    let mut child = looptime()
        .arg("default-config")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.signal(), Some(libc_sigpipe()), "{o:?}");
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    // `serve … | head -1`: the reader goes away before the run ends. The
    // recording must not die with it: both stdout and stderr closed, the
    // rollout is written complete and serve exits 0 (before, its final
    // flush turned the closed pipe into "error: Broken pipe", exit 1).
    let _guard = serve_lock();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let cfg = write_config(
        dir.path(),
        "[run]\nrtf = 0.0\nduration_s = 0.2\nwarmup_s = 0.0\n",
    );
    let mut child = looptime()
        .args(["serve", "--control-timing", "--config"])
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let summary = read_summary(runs.join("latest").join(SUMMARY_FILE)).unwrap();
    assert_eq!(summary.status, CaptureStatus::Complete);
}

/// SIGPIPE's number on Linux.
fn libc_sigpipe() -> i32 {
    13
}
