//! Evidence that survives kill -9. `looptime serve` runs uncapped on the
//! simulation clock with a fixed seed, so every run has the same cycles;
//! it is killed with SIGKILL at 22 moments spread over warmup, pause,
//! running and the finish itself (chosen by a seeded generator), and
//! `looptime recover` turns each ring into evidence. Each recovered episode
//! must be analyzable, invent no cycle, equal the uninterrupted run in
//! everything deterministic, and lose at most the cycle in progress.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use looptime_capture::format::read_summary;
use looptime_capture::ring::{self, RingReader, RingState};
use looptime_capture::{CaptureStatus, CycleRecord, EvidenceReader, CYCLES_FILE, SUMMARY_FILE};

/// warmup 0.5 s (50 cycles), running 4 s with a 1 s pause 1.5 s in: cycles
/// 0..49 warmup, 50..199 running, 200..299 paused, 300..549 running.
const CONFIG: &str = r#"
[run]
rtf = 0.0
warmup_s = 0.5
duration_s = 4.0
seed = 7
control_timing = true
[lifecycle]
pause_at_s = 1.5
pause_s = 1.0
[stats]
interval_s = 0.0
"#;

fn looptime() -> Command {
    Command::new(env!("CARGO_BIN_EXE_looptime"))
}

/// The analyzer binary, built beside this one by `cargo test --workspace`.
fn analyzer() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_looptime"));
    let a = bin.with_file_name("analyze_control_timing");
    assert!(
        a.exists(),
        "{} is missing: run the tests with `cargo test --workspace`, which builds the analyzer too",
        a.display()
    );
    a
}

struct Setup {
    _tmp: tempfile::TempDir,
    config: PathBuf,
    runs: PathBuf,
    rings: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let rings = tmp.path().join("shm");
    std::fs::create_dir(&rings).unwrap();
    let config = tmp.path().join("kill.toml");
    let text = CONFIG.replace(
        "[lifecycle]",
        &format!(
            "timing_ring_dir = {:?}\n[lifecycle]",
            rings.display().to_string()
        ),
    );
    std::fs::write(&config, text).unwrap();
    Setup {
        runs: tmp.path().join("runs"),
        config,
        rings,
        _tmp: tmp,
    }
}

fn spawn_serve(s: &Setup) -> Child {
    looptime()
        .arg("serve")
        .arg("--config")
        .arg(&s.config)
        .arg("--runs-dir")
        .arg(&s.runs)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn read_episode(dir: &Path) -> Vec<CycleRecord> {
    EvidenceReader::open(dir.join(CYCLES_FILE))
        .unwrap()
        .read_all()
        .unwrap()
        .1
}

/// Everything deterministic about a cycle: index, phase, target, the
/// robot-side values (which follow the simulation clock) and the span
/// structure (stage, parent, depth, attributes).
type Shape = (
    u64,
    String,
    Option<u64>,
    [String; 3],
    Vec<(String, Option<u32>, u32, Vec<(String, String)>)>,
);

fn shape(c: &CycleRecord) -> Shape {
    (
        c.cycle,
        c.phase.clone(),
        c.target_ns,
        ["robot_state_seq", "robot_time_ms", "command_success_rate"]
            .map(|k| c.values.get(k).map(|v| v.to_string()).unwrap_or_default()),
        c.spans
            .iter()
            .map(|s| {
                let attrs = s
                    .attrs
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                (s.stage.clone(), s.parent, s.depth, attrs)
            })
            .collect(),
    )
}

/// Where to kill: after `cycles` cycles have begun (plus `extra_us` so
/// that the signal lands anywhere inside a cycle), or during the finish.
#[derive(Clone, Copy, Debug)]
enum Moment {
    AfterCycles { cycles: u64, extra_us: u64 },
    DuringFinish,
}

/// A small seeded generator (SplitMix64), so the moments are the same on
/// every run of the test.
fn moments() -> Vec<(&'static str, Moment)> {
    let mut x: u64 = 0x5EED;
    let mut next = |lo: u64, hi: u64| {
        x = x.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        lo + (z ^ (z >> 31)) % (hi - lo)
    };
    let mut out = Vec::new();
    for (name, lo, hi, n) in [
        ("warmup", 1, 49, 5),
        ("paused", 202, 298, 5),
        ("running", 52, 198, 4),
        ("running", 302, 448, 4),
    ] {
        for _ in 0..n {
            out.push((
                name,
                Moment::AfterCycles {
                    cycles: next(lo, hi),
                    extra_us: next(0, 2500),
                },
            ));
        }
    }
    for _ in 0..4 {
        out.push(("finish", Moment::DuringFinish));
    }
    out
}

/// The control thread's ring of the serve just started (it appears once
/// the recorders are built; the background threads have rings of their own).
fn wait_for_ring(dir: &Path, child: &mut Child) -> RingReader {
    let t0 = Instant::now();
    loop {
        for p in ring::list_rings(dir) {
            if let Ok(r) = RingReader::open(&p) {
                if r.thread_name().as_deref() == Some("control") {
                    return r;
                }
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "serve exited before its ring appeared"
        );
        assert!(t0.elapsed() < Duration::from_secs(60), "no ring appeared");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn kill_at(s: &Setup, moment: Moment) -> (PathBuf, bool) {
    let mut child = spawn_serve(s);
    let r = wait_for_ring(&s.rings, &mut child);
    let t0 = Instant::now();
    let in_finish = match moment {
        Moment::AfterCycles { cycles, extra_us } => {
            while r.total_cycles() < cycles {
                assert!(t0.elapsed() < Duration::from_secs(60));
                std::hint::spin_loop();
            }
            std::thread::sleep(Duration::from_micros(extra_us));
            false
        }
        Moment::DuringFinish => {
            while r.state() == RingState::Recording {
                assert!(t0.elapsed() < Duration::from_secs(60));
                std::hint::spin_loop();
            }
            true
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    (r.path().to_path_buf(), in_finish)
}

#[test]
fn kill_9_at_22_moments_then_recover_gives_the_uninterrupted_cycles() {
    let reference = {
        let s = setup();
        let out = looptime()
            .arg("serve")
            .arg("--config")
            .arg(&s.config)
            .arg("--runs-dir")
            .arg(&s.runs)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            ring::list_rings(&s.rings).is_empty(),
            "a finished serve removes its ring"
        );
        read_episode(&std::fs::canonicalize(s.runs.join("latest")).unwrap())
    };
    assert_eq!(reference.len(), 450);
    let expected: Vec<Shape> = reference.iter().map(shape).collect();
    assert_eq!(expected[60].1, "running");
    assert_eq!(expected[250].1, "paused");

    let mut phases_hit = std::collections::BTreeSet::new();
    for (name, moment) in moments() {
        let s = setup();
        let (ring_path, in_finish) = kill_at(&s, moment);
        assert!(
            ring_path.exists(),
            "{name} {moment:?}: kill -9 must leave the ring"
        );
        let out = looptime()
            .args(["recover", "--ring-dir"])
            .arg(&s.rings)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name} {moment:?}: {text}");
        assert!(
            !ring_path.exists(),
            "{name} {moment:?}: recover removes the ring\n{text}"
        );

        let dir = std::fs::canonicalize(s.runs.join("latest")).unwrap();
        let summary = read_summary(dir.join(SUMMARY_FILE)).unwrap();
        // The background threads' rings were recovered too, each into its
        // own file of the same episode.
        let declared = looptime_capture::EvidenceReader::open(dir.join("control_timing.jsonl"))
            .unwrap()
            .header()
            .threads
            .clone();
        assert_eq!(
            declared,
            ["viewer_transport", "policy_worker"],
            "{name} {moment:?}"
        );
        for t in &declared {
            let f = dir.join(looptime_capture::thread_files(t).0);
            assert!(
                f.exists(),
                "{name} {moment:?}: {} missing\n{text}",
                f.display()
            );
        }
        let got = read_episode(&dir);
        // No cycle invented: every recovered cycle is the reference's.
        for c in &got {
            assert_eq!(
                shape(c),
                expected[c.cycle as usize],
                "{name} {moment:?}: cycle {}",
                c.cycle
            );
        }
        // Contiguous from 0 (the ring is larger than the run).
        assert!(
            got.iter().enumerate().all(|(i, c)| c.cycle == i as u64),
            "{name} {moment:?}"
        );
        match summary.status {
            CaptureStatus::Recovered => {
                let r = summary.recovery.as_ref().unwrap();
                // At most the cycle in progress at the kill is lost.
                let begun = summary.capture.total_cycles;
                assert!(
                    got.len() as u64 + 1 >= begun,
                    "{name} {moment:?}: {} of {begun}",
                    got.len()
                );
                assert_eq!(r.torn_records, 0, "{name} {moment:?}");
                assert_eq!(r.in_progress_records, begun - got.len() as u64);
                if let Moment::AfterCycles { cycles, .. } = moment {
                    assert!(begun >= cycles, "{name} {moment:?}");
                    if let Some(last) = got.last() {
                        phases_hit.insert(last.phase.clone());
                    }
                }
                if in_finish {
                    assert_eq!(got.len(), 450, "a kill in the finish loses nothing");
                    assert_eq!(r.ring_state, "finishing");
                    phases_hit.insert("finish".to_string());
                }
                eprintln!(
                    "{name:8} {moment:?}: {} of {begun} cycles recovered",
                    got.len()
                );
            }
            // The kill landed after the finish completed: the files are
            // the writer's own, and recover only removed the ring.
            CaptureStatus::Complete => {
                assert!(
                    in_finish,
                    "{name} {moment:?}: complete without reaching the finish"
                );
                assert_eq!(got.len(), 450);
            }
            CaptureStatus::Aborted => panic!("{name} {moment:?}: nothing sent a stop signal"),
        }
        // Analyzable: the analyzer reads it and exits 0, saying recovered.
        let a = Command::new(analyzer())
            .arg("--episode")
            .arg(&dir)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            a.status.success(),
            "{name} {moment:?}: {}",
            String::from_utf8_lossy(&a.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
        let state = report["capture"]["state"]
            .as_str()
            .or(report["state"].as_str())
            .unwrap_or_default()
            .to_string();
        // The state the summary says, no other: recovered, or complete
        // when the kill landed after the finish had written its files.
        let want = match summary.status {
            CaptureStatus::Recovered => "recovered",
            CaptureStatus::Complete => "complete",
            CaptureStatus::Aborted => unreachable!("checked above"),
        };
        assert_eq!(state, want, "{name} {moment:?}");
        if summary.status == CaptureStatus::Recovered {
            // The ring never wrapped (450 cycles, capacity 20000): the
            // cycle in progress at the kill is not reported as overflow.
            let r = summary.recovery.as_ref().unwrap();
            assert_eq!(report["capture"]["dropped_cycles"], 0, "{name} {moment:?}");
            assert_eq!(
                report["capture"]["lost_at_kill"],
                r.in_progress_records + r.torn_records,
                "{name} {moment:?}"
            );
            let caveats = report["caveats"].to_string();
            assert!(
                !caveats.contains("ring full"),
                "{name} {moment:?}: {caveats}"
            );
        }
        // The manifest written before the first cycle now says recovered.
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        if summary.status == CaptureStatus::Recovered {
            assert_eq!(manifest["status"], "recovered", "{name} {moment:?}");
        }
    }
    for phase in ["warmup", "paused", "running", "finish"] {
        assert!(
            phases_hit.contains(phase),
            "no kill landed in {phase}: {phases_hit:?}"
        );
    }
}

/// This process's start time in clock ticks (`/proc/self/stat` field 22),
/// read after the command name, which may hold spaces.
fn own_start_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    // `rest` starts at field 3 (state), so field 22 is the 20th.
    rest.split(' ').nth(19).unwrap().parse().unwrap()
}

/// Overwrite the ring's writer pid (bytes 16..20) and its start time
/// (bytes 48..56) in the fixed header (docs/evidence-format.md, the ring
/// file; `Fixed` in capture's ring module).
fn set_writer(ring: &Path, pid: u32, start_ticks: Option<u64>) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(ring).unwrap();
    f.seek(SeekFrom::Start(16)).unwrap();
    f.write_all(&pid.to_le_bytes()).unwrap();
    if let Some(t) = start_ticks {
        f.seek(SeekFrom::Start(48)).unwrap();
        f.write_all(&t.to_le_bytes()).unwrap();
    }
}

#[test]
fn recover_takes_one_ring_marks_the_session_and_tells_a_reused_pid_from_its_writer() {
    let s = setup();
    let (ring_path, _) = kill_at(
        &s,
        Moment::AfterCycles {
            cycles: 80,
            extra_us: 0,
        },
    );
    let written_start = {
        let b = std::fs::read(&ring_path).unwrap();
        u64::from_le_bytes(b[48..56].try_into().unwrap())
    };
    // The writer recorded its start time (so a reused pid can be told).
    assert!(written_start > 0);
    let episode = std::fs::canonicalize(s.runs.join("latest")).unwrap();
    let recover = |ring: &Path| {
        looptime()
            .args(["recover", "--ring"])
            .arg(ring)
            .output()
            .unwrap()
    };

    // A ring whose pid and start time are this test process's: its writer
    // runs. Asked for by name it is refused (exit 1, with the advice to
    // watch it), and left alone; over the whole directory it is listed as
    // running and skipped (exit 0).
    set_writer(&ring_path, std::process::id(), Some(own_start_ticks()));
    let o = recover(&ring_path);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("still running") && text.contains("looptime watch"),
        "{text}"
    );
    let o = looptime()
        .args(["recover", "--ring-dir"])
        .arg(&s.rings)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("still runs"), "{text}");
    assert!(ring_path.exists() && !episode.join(CYCLES_FILE).exists());

    // The same live pid with another start time: a reused pid, not the
    // writer. The ring is recovered. (Not the dead writer's own start
    // time: it was spawned within the same 10 ms clock tick as this test.)
    set_writer(
        &ring_path,
        std::process::id(),
        Some(own_start_ticks() + 12_345),
    );
    let o = recover(&ring_path);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("cycles recovered"), "{text}");
    assert!(!ring_path.exists(), "a recovered ring is removed");
    assert!(episode.join(CYCLES_FILE).exists());
    // The manifest and the session say recovered.
    let json = |p: PathBuf| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    assert_eq!(json(episode.join("manifest.json"))["status"], "recovered");
    let session = json(episode.parent().unwrap().join("session.json"));
    assert_eq!(session["status"], "recovered", "{session}");
    assert_eq!(session["rollouts"][0]["state"], "recovered", "{session}");

    // A file that is not a ring: exit 1, said, left in place.
    let junk = s.rings.join("looptime-1-junk.ring");
    std::fs::write(&junk, b"not a ring").unwrap();
    let o = recover(&junk);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(junk.exists());
    std::fs::remove_file(&junk).unwrap();

    // serve recovers a dead process's ring at its start.
    let (ring2, _) = kill_at(
        &s,
        Moment::AfterCycles {
            cycles: 60,
            extra_us: 0,
        },
    );
    let killed = std::fs::canonicalize(s.runs.join("latest")).unwrap();
    assert!(ring2.exists() && !killed.join(CYCLES_FILE).exists());
    // The control thread's ring and each background thread's.
    let orphans = ring::list_rings(&s.rings).len();
    assert!(orphans >= 2, "{orphans}");
    let o = looptime()
        .arg("serve")
        .arg("--config")
        .arg(&s.config)
        .args(["--runs-dir"])
        .arg(&s.runs)
        .args(["--warmup", "0", "--duration", "0.05"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains(&format!("recovered {orphans} orphaned ring(s)")),
        "{text}"
    );
    assert!(killed.join(CYCLES_FILE).exists());
    assert!(
        ring::list_rings(&s.rings).is_empty(),
        "every orphan was taken"
    );
}

/// `looptime recover ARGS` with the rings of `s`.
fn recover_with(s: &Setup, args: &[&str]) -> (i32, String) {
    let o = looptime()
        .arg("recover")
        .args(args)
        .arg("--ring-dir")
        .arg(&s.rings)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

/// A short `serve` over `runs` with the rings of `s`: its start-up
/// recovery's output.
fn short_serve(s: &Setup, runs: &Path) -> String {
    let o = looptime()
        .arg("serve")
        .arg("--config")
        .arg(&s.config)
        .arg("--runs-dir")
        .arg(runs)
        .args(["--warmup", "0", "--duration", "0.05"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

/// Rings in a shared directory belong to their owners (docs/durability.md):
/// a ring of another uid, and a ring naming a directory of another uid, are
/// each left alone with one clear line by every entry point (serve's
/// start-up recovery, `recover`, `recover --ring`, `watch`), nothing written
/// and nothing removed; given back to the caller, the same rings recover.
/// Needs root to hand files to `nobody` (CI runs as root).
#[test]
fn other_users_rings_and_directories_are_left_alone() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: handing a ring to another uid needs root");
        return;
    }
    const NOBODY: u32 = 65534;
    let s = setup();
    let at = Moment::AfterCycles {
        cycles: 60,
        extra_us: 0,
    };
    let (control, _) = kill_at(&s, at);
    let killed = std::fs::canonicalize(s.runs.join("latest")).unwrap();
    let rings = ring::owner::list(&s.rings).mine;
    assert!(
        rings.len() >= 2,
        "the control ring and a thread's: {rings:?}"
    );
    let chown_all = |uid: u32| {
        for r in &rings {
            std::os::unix::fs::chown(&r.path, Some(uid), None).unwrap();
        }
    };
    let untouched = || {
        assert!(rings.iter().all(|r| r.path.exists()), "a ring was removed");
        assert!(!killed.join(CYCLES_FILE).exists(), "evidence was written");
    };

    // 1. Rings of another uid.
    chown_all(NOBODY);
    assert!(ring::list_rings(&s.rings).is_empty());
    let (code, text) = recover_with(&s, &[]);
    assert_eq!(code, 0, "{text}");
    for r in &rings {
        let line = format!(
            "[recover] {}: owned by uid {NOBODY} (not you, uid 0)",
            r.path.display()
        );
        assert_eq!(text.matches(&line).count(), 1, "{text}");
    }
    assert!(text.contains("left alone"), "{text}");
    untouched();
    let (code, text) = recover_with(&s, &["--ring", control.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&format!("owned by uid {NOBODY}")), "{text}");
    untouched();
    let o = looptime()
        .args(["watch", "--once", "--ring-dir"])
        .arg(&s.rings)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("no running looptime ring of yours")
            && err.contains(&format!("owned by uid {NOBODY}")),
        "{err}"
    );
    let text = short_serve(&s, &s.runs);
    for r in &rings {
        assert_eq!(
            text.matches(&r.path.display().to_string()).count(),
            1,
            "listed once: {text}"
        );
    }
    assert!(!text.contains("recovered "), "{text}");
    untouched();

    // 2. The caller's rings naming a directory of another uid.
    chown_all(0);
    std::os::unix::fs::chown(&killed, Some(NOBODY), None).unwrap();
    let (code, text) = recover_with(&s, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "its episode directory {} is not yours to write into: it is owned by uid {NOBODY}",
            killed.display()
        )),
        "{text}"
    );
    untouched();

    // Given back, the same rings recover.
    std::os::unix::fs::chown(&killed, Some(0), None).unwrap();
    let (code, text) = recover_with(&s, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(killed.join(CYCLES_FILE).exists(), "{text}");
    assert!(ring::owner::list(&s.rings).mine.is_empty(), "{text}");
}

/// `serve`'s start-up recovery takes only the rings of its own runs
/// directory: a ring naming an episode elsewhere is listed and left in
/// place, and `looptime recover` (run on purpose) recovers it.
#[test]
fn serve_recovers_only_its_own_runs_directory() {
    let s = setup();
    let (_, _) = kill_at(
        &s,
        Moment::AfterCycles {
            cycles: 60,
            extra_us: 0,
        },
    );
    let killed = std::fs::canonicalize(s.runs.join("latest")).unwrap();
    let orphans = ring::list_rings(&s.rings);
    assert!(orphans.len() >= 2);
    let elsewhere = s.rings.parent().unwrap().join("other-runs");
    let text = short_serve(&s, &elsewhere);
    for r in &orphans {
        assert!(
            text.contains(&format!(
                "[recover] {}: its episode directory {} is outside this runs directory",
                r.display(),
                killed.display()
            )),
            "{text}"
        );
        assert!(r.exists());
    }
    assert!(!killed.join(CYCLES_FILE).exists());
    let (code, text) = recover_with(&s, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(killed.join(CYCLES_FILE).exists(), "{text}");
    assert!(ring::list_rings(&s.rings).is_empty());
    // Each line names its ring's thread: the control thread's and each
    // background thread's (serve records at least one).
    assert!(text.contains("(thread control, pid "), "{text}");
    assert!(
        text.lines()
            .filter(|l| l.contains("(thread ") && !l.contains("(thread control,"))
            .count()
            >= 1,
        "{text}"
    );
}

/// A rollout whose writer still runs is "still recording (pid N)", with
/// `looptime watch --pid N`, in `report` and in `fleet` (kind `recording`,
/// left out as any rollout without evidence); once the writer is killed,
/// the same directory is a dead rollout for `looptime recover`. The
/// `running` manifest's pid and start time tell the two apart.
#[test]
fn a_rollout_still_recording_is_called_so_until_its_writer_dies() {
    let s = setup();
    let cfg = s.rings.parent().unwrap().join("live.toml");
    std::fs::write(
        &cfg,
        format!(
            "[run]\nduration_s = 60.0\nwarmup_s = 0.0\ncontrol_timing = true\ntiming_ring_dir = {:?}\n[stats]\ninterval_s = 0.0\n",
            s.rings.display().to_string()
        ),
    )
    .unwrap();
    let mut child = looptime()
        .args(["serve", "--config"])
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&s.runs)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let latest = s.runs.join("latest");
    while !latest.join("manifest.json").exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no manifest");
        std::thread::sleep(Duration::from_millis(20));
    }
    let rollout = std::fs::canonicalize(&latest).unwrap();
    let report = || {
        Command::new(analyzer())
            .arg("--episode")
            .arg(&rollout)
            .output()
            .unwrap()
    };
    let o = report();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("is still recording (pid {})", child.id()))
            && err.contains(&format!("looptime watch --pid {}", child.id())),
        "{err}"
    );
    assert!(!err.contains("died"), "{err}");
    let out = s.rings.parent().unwrap().join("fleet-out");
    let f = Command::new(analyzer())
        .arg("fleet")
        .arg(&s.runs)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        f.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&f.stderr)
    );
    let errors = std::fs::read_to_string(out.join("errors.csv")).unwrap();
    assert!(errors.contains(",recording,"), "{errors}");
    child.kill().unwrap();
    child.wait().unwrap();
    let o = report();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("still recording"), "{err}");
    assert!(err.contains("looptime recover"), "{err}");
}

#[test]
fn after_a_kill_the_analyzer_names_the_recover_command_for_this_ring() {
    // A ring in a directory other than /dev/shm: the analyzer's advice
    // names the ring file (the manifest records it), and that very command
    // brings the evidence back.
    let s = setup();
    let (ring_path, _) = kill_at(
        &s,
        Moment::AfterCycles {
            cycles: 50,
            extra_us: 0,
        },
    );
    let episode = std::fs::canonicalize(s.runs.join("latest")).unwrap();
    let out = Command::new(analyzer())
        .arg("--episode")
        .arg(&episode)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("looptime recover --ring {}", ring_path.display());
    assert!(err.contains(&want), "wanted {want:?} in\n{err}");
    let out = looptime()
        .args(["recover", "--ring"])
        .arg(&ring_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(episode.join("control_timing.jsonl").exists());
}
