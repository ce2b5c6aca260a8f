//! `looptime watch` against a running `serve`: one JSON snapshot, and the
//! live terminal view driven through tmux (send-keys, capture-pane).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use looptime_capture::ring::{self, RingReader};

fn looptime() -> Command {
    Command::new(env!("CARGO_BIN_EXE_looptime"))
}

/// A real-time 100 Hz serve recording into a ring in `rings`, long enough
/// to be watched; killed when dropped.
struct Serving {
    child: Child,
    ring: PathBuf,
    runs: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serving(rings: &Path) -> Serving {
    serving_with(rings, "")
}

/// As [`serving`], with `extra` appended to the config.
fn serving_with(rings: &Path, extra: &str) -> Serving {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("watch.toml");
    std::fs::write(
        &config,
        format!(
            "[run]\nduration_s = 30.0\nwarmup_s = 1.0\ncontrol_timing = true\ntiming_ring_dir = {:?}\n[stats]\ninterval_s = 0.0\n{extra}",
            rings.display().to_string()
        ),
    )
    .unwrap();
    let mut child = looptime()
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .arg("--runs-dir")
        .arg(tmp.path().join("runs"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    // This serve's control-thread ring: the background threads have their
    // own, and another serve may record into the same directory.
    let pid = child.id();
    let ring = loop {
        let control = ring::list_rings(rings).into_iter().find(|p| {
            RingReader::open(p).is_ok_and(|r| {
                r.pid() == pid
                    && r.total_cycles() > 150
                    && r.thread_name().as_deref() == Some("control")
            })
        });
        if let Some(p) = control {
            break p;
        }
        assert!(child.try_wait().unwrap().is_none(), "serve exited early");
        assert!(t0.elapsed() < Duration::from_secs(60), "no ring filled");
        std::thread::sleep(Duration::from_millis(20));
    };
    Serving {
        child,
        ring,
        runs: tmp.path().join("runs"),
        _tmp: tmp,
    }
}

/// Issue 48, point 6: with two loops recording, `watch` prefers the one
/// recording into the caller's runs directory (else the newest) and lists
/// the other with the command that watches it.
#[test]
fn with_two_loops_watch_prefers_the_callers_runs_directory_and_lists_the_other() {
    let rings = tempfile::tempdir().unwrap();
    let first = serving(rings.path());
    let second = serving(rings.path());
    let watch = |runs: &Path| {
        let out = looptime()
            .args(["watch", "--once", "--json", "--window", "50", "--ring-dir"])
            .arg(rings.path())
            .arg("--runs-dir")
            .arg(runs)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["pid"].as_u64().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The first (older) loop records into first.runs: preferred there.
    let (pid, err) = watch(&first.runs);
    assert_eq!(pid, first.child.id() as u64, "{err}");
    assert!(err.contains("2 loops of yours are recording"), "{err}");
    assert!(err.contains("your runs directory"), "{err}");
    assert!(
        err.contains(&format!("looptime watch --pid {}", second.child.id())),
        "{err}"
    );
    // A runs directory neither records into: the newest, the second.
    let (pid, err) = watch(&rings.path().join("elsewhere"));
    assert_eq!(pid, second.child.id() as u64, "{err}");
    assert!(
        err.contains(&format!("looptime watch --pid {}", first.child.id())),
        "{err}"
    );
}

#[test]
fn watch_once_json_reports_the_running_loop() {
    let rings = tempfile::tempdir().unwrap();
    let s = serving(rings.path());
    let out = looptime()
        .args(["watch", "--once", "--json", "--window", "100", "--ring-dir"])
        .arg(rings.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ring"], s.ring.display().to_string());
    assert_eq!(v["pid"], s.child.id());
    assert_eq!(v["writer_alive"], true);
    assert_eq!(v["state"], "recording");
    assert!(v["total_cycles"].as_u64().unwrap() > 150);
    // The window holds the newest 100 complete cycles (one more may be in
    // progress and is not counted).
    let w = v["window_cycles"].as_u64().unwrap();
    assert!((99..=100).contains(&w), "{w}");
    let phases = v["phases"].as_array().unwrap();
    let cycles: u64 = phases.iter().map(|p| p["cycles"].as_u64().unwrap()).sum();
    assert_eq!(cycles, w);
    // Loop Hz is 1e9 / the mean of the window's periods, so it is at least
    // 1e9 / the largest period, whatever the machine's load. No rate claim
    // here: that is bench/loop_vs_cyclictest.sh's.
    let running = phases.iter().find(|p| p["phase"] == "running").unwrap();
    let hz = running["loop_hz"].as_f64().unwrap();
    let max = running["period"]["max_ns"].as_f64().unwrap();
    assert!(hz > 0.0 && hz >= 1e9 / max - 1e-6, "{hz} against max {max}");
    let p = &running["period"];
    assert!(
        p["p50_ns"].as_i64() <= p["p99_ns"].as_i64()
            && p["p99_ns"].as_i64() <= p["max_ns"].as_i64()
    );
    let stages: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages[0], "camera_read");
    assert_eq!(stages.len(), 7);
    assert!(v["stages"][0]["spans"].as_u64().unwrap() >= w);
    assert!(!v["recent_periods_us"].as_array().unwrap().is_empty());
    // The watcher changed nothing: the ring is still the writer's, running.
    assert!(RingReader::open(&s.ring).unwrap().writer_alive());
}

/// A declared budget and tolerance reach the view: with a 1 µs budget
/// every cycle of the window worked longer, so each phase's budget
/// overruns equal its cycles; with a 10 s tolerance no cycle ends that
/// late, so its completion misses are 0 (counted, not absent).
#[test]
fn watch_counts_a_declared_budget_and_tolerance() {
    let rings = tempfile::tempdir().unwrap();
    let _s = serving_with(
        rings.path(),
        "[scheduler]\ncompute_budget_us = 1\ndeadline_tolerance_us = 10000000\n",
    );
    let run = |json: bool| {
        let mut c = looptime();
        c.args(["watch", "--once", "--window", "100", "--ring-dir"])
            .arg(rings.path());
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let v: serde_json::Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(v["compute_budget_ns"], 1000);
    assert_eq!(v["deadline_tolerance_ns"], 10_000_000_000u64);
    for p in v["phases"].as_array().unwrap() {
        assert_eq!(p["budget_overruns"], p["cycles"], "{p}");
        assert_eq!(p["completion_misses"], 0, "{p}");
    }
    let text = run(false);
    assert!(text.contains("budget 0.001 ms: "), "{text}");
    assert!(text.contains("tolerance 10000.000 ms: "), "{text}");
}

/// An input-paced loop's kernel arrivals and read times reach the live
/// view through the ring (layout 4): each phase of the window gives the
/// socket wait of every one of its cycles, never negative beyond a
/// conversion's bound (a few µs at most).
#[test]
fn watch_shows_the_socket_wait_of_an_input_paced_loop() {
    let rings = tempfile::tempdir().unwrap();
    let _s = serving_with(rings.path(), "[robot]\ntransport = \"udp\"\n");
    let out = looptime()
        .args(["watch", "--once", "--json", "--window", "100", "--ring-dir"])
        .arg(rings.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in v["phases"].as_array().unwrap() {
        let w = &p["socket_wait"];
        assert_eq!(w["count"], p["cycles"], "{p}");
        assert!(w["p50_ns"].as_i64().unwrap() > -10_000, "{p}");
    }
}

#[test]
fn watch_without_a_running_ring_says_how_to_get_one() {
    let rings = tempfile::tempdir().unwrap();
    let out = looptime()
        .args(["watch", "--once", "--ring-dir"])
        .arg(rings.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no running looptime ring of yours in")
            && err.contains("looptime serve --control-timing"),
        "{err}"
    );
}

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux")
        .args(args)
        .output()
        .expect("tmux is needed for this test (.ci/run installs it)")
}

/// `looptime watch --ring RING --interval-ms 200 EXTRA` in a detached tmux
/// session `name`, 160 columns by `rows`; returns what captures its screen.
fn watch_in_tmux(name: &str, ring: &Path, extra: &str, rows: u16) -> impl Fn() -> String {
    let cmd = format!(
        "{} watch --ring {} --interval-ms 200 {extra}",
        env!("CARGO_BIN_EXE_looptime"),
        ring.display()
    );
    let rows = rows.to_string();
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        "160",
        "-y",
        &rows,
        &cmd,
    ]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let name = name.to_string();
    move || String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", &name]).stdout).to_string()
}

#[test]
fn the_live_view_in_a_terminal_refreshes_and_quits_on_q() {
    let rings = tempfile::tempdir().unwrap();
    let s = serving(rings.path());
    let name = format!("looptime-watch-{}", std::process::id());
    let capture = watch_in_tmux(&name, &s.ring, "", 48);
    let begun = |screen: &str| -> Option<u64> {
        let i = screen.find(" cycles begun")?;
        screen[..i].rsplit(' ').next()?.parse().ok()
    };
    // Wait for the first frame.
    let t0 = Instant::now();
    let first = loop {
        let screen = capture();
        if begun(&screen).is_some() {
            break screen;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no frame:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    for want in [
        "looptime watch",
        "phases",
        "running",
        "Hz",
        "period p50",
        "stages",
        "camera_read",
        "robot_send_command",
        "period, newest",
        "q quits",
    ] {
        assert!(
            first.contains(want),
            "{want:?} missing from the screen:\n{first}"
        );
    }
    // The view refreshes: the count moves on. (How often is the view's
    // constant, not a figure a loaded machine must meet in a test; this
    // waits up to 20 s.)
    let t0 = Instant::now();
    let second = loop {
        let screen = capture();
        if begun(&screen) > begun(&first) {
            break screen;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the view did not refresh:\n{first}\n---\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(second.contains("looptime watch"));
    let _ = tmux(&["send-keys", "-t", &name, "q"]);
    let t0 = Instant::now();
    while tmux(&["has-session", "-t", &name]).status.success() {
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = tmux(&["kill-session", "-t", &name]);
            panic!("q did not quit the view");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The period chart's rows on a captured screen: the lines after its title,
/// inside the box, up to its bottom border.
fn chart_rows(screen: &str) -> Vec<Vec<char>> {
    let lines: Vec<&str> = screen.lines().collect();
    let Some(top) = lines.iter().position(|l| l.contains("period, newest")) else {
        return Vec::new();
    };
    lines[top + 1..]
        .iter()
        .take_while(|l| !l.trim_start().starts_with('└'))
        .map(|l| {
            let inner = l.trim_start().trim_start_matches('│');
            inner.trim_end().trim_end_matches('│').chars().collect()
        })
        .collect()
}

/// Each column's bar height in eighths of a row.
fn bar_heights(rows: &[Vec<char>]) -> Vec<usize> {
    let eighths = |c: char| match c {
        '▁' => 1,
        '▂' => 2,
        '▃' => 3,
        '▄' => 4,
        '▅' => 5,
        '▆' => 6,
        '▇' => 7,
        '█' => 8,
        _ => 0,
    };
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    (0..width)
        .map(|j| {
            rows.iter()
                .map(|r| r.get(j).map_or(0, |&c| eighths(c)))
                .sum()
        })
        .collect()
}

#[test]
fn the_live_view_shows_the_threads_and_the_periods_jitter_around_nominal() {
    // Synthetic jitter, not live timing: a 12 ms spike in a fifth of the
    // cycles' decode overruns the 10 ms period, so the window holds periods
    // near 10 ms and near 13 ms or more whatever the machine does.
    let rings = tempfile::tempdir().unwrap();
    let s = serving_with(
        rings.path(),
        "[stages.adapter_decode.cost]\nspike_probability = 0.2\nspike_us = 12000.0\n",
    );
    let name = format!("looptime-watch-jitter-{}", std::process::id());
    let capture = watch_in_tmux(&name, &s.ring, "--window 300", 60);
    let t0 = Instant::now();
    let screen = loop {
        let screen = capture();
        let heights = bar_heights(&chart_rows(&screen));
        let distinct: std::collections::BTreeSet<usize> =
            heights.iter().copied().filter(|&h| h > 0).collect();
        if screen.contains("thread ") && distinct.len() >= 2 {
            break screen;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = tmux(&["kill-session", "-t", &name]);
            panic!("no threads panel or a flat chart:\n{screen}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = tmux(&["kill-session", "-t", &name]);
    // A panel per background thread, with its stages' wall p50 and p99.
    assert!(screen.contains("thread policy_worker"), "{screen}");
    assert!(screen.contains("policy_infer"), "{screen}");
    // The axis runs from the window's smallest period, not from 0, and the
    // nominal period is named (its row is marked where no bar covers it).
    assert!(screen.contains("nominal 10.000 marked"), "{screen}");
}
