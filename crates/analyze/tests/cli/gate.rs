//! The timing gate for CI (docs/ci.md): every exit path of both gates and
//! their precedence, on synthetic pairs with exact answers (a known shift
//! trips the gate; an identical pair does not), the Markdown against a
//! golden file, the JUnit XML's cases.

use super::*;
use synthetic::{write, Synth};

/// 1,200 running cycles a side: above the 1,000 a p99 test needs.
fn base() -> Synth {
    Synth {
        cycles: 1_200,
        ..Synth::default()
    }
}

/// A 2 % tail of +2 ms in adapter_decode (every 50th cycle): its p99 test
/// is worse, its median test is not (tests/cli/verdicts.rs derives it).
fn with_tail() -> Synth {
    Synth {
        decode_tail_every: 50,
        decode_tail_ns: 2_000_000,
        ..base()
    }
}

struct Pair {
    tmp: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
}

fn pair(a: &Synth, b: &Synth) -> Pair {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        write(&tmp.path().join("a"), a),
        write(&tmp.path().join("b"), b),
    );
    Pair { tmp, a, b }
}

fn compare(p: &Pair, extra: &[&str]) -> Run {
    let mut args = vec!["compare", p.a.to_str().unwrap(), p.b.to_str().unwrap()];
    args.extend_from_slice(extra);
    analyze(&args)
}

const TAIL: &str = "running/stage_wall/adapter_decode:p99";

#[test]
fn a_known_shift_trips_the_compare_gate_and_an_identical_pair_does_not() {
    let p = pair(&base(), &with_tail());
    let md = p.tmp.path().join("summary.md");
    let xml = p.tmp.path().join("junit.xml");
    let r = compare(
        &p,
        &[
            "--fail-on",
            "worse",
            "--markdown",
            md.to_str().unwrap(),
            "--junit",
            xml.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stderr.contains("gate tripped") && r.stderr.contains(TAIL),
        "{}",
        r.stderr
    );
    // The report and both summaries are written before the exit.
    assert!(r.stdout.contains("what moved: "), "{}", r.stdout);
    let md_text = std::fs::read_to_string(&md).unwrap();
    // One count: the tests the text calls worse are the tests the gate
    // failed, out of the same family (text, Markdown and JUnit).
    let worse = |t: &str| -> (String, String) {
        let at = t
            .find("what moved: ")
            .or_else(|| t.find("**What moved**: "))
            .unwrap();
        let words: Vec<&str> = t[at..].split_whitespace().collect();
        let of = words.iter().position(|w| *w == "of").unwrap();
        (
            words[of + 1].to_string(),
            words[of + 3].trim_start_matches('(').to_string(),
        )
    };
    let (family, n_worse) = worse(&r.stdout);
    assert_eq!(worse(&md_text), (family.clone(), n_worse.clone()));
    assert!(
        md_text.contains(&format!(
            "**gate tripped**: {n_worse} of {family} checked failed"
        )),
        "{md_text}"
    );
    let junit_text = std::fs::read_to_string(&xml).unwrap();
    assert!(
        junit_text.contains(&format!("tests=\"{family}\" failures=\"{n_worse}\"")),
        "{junit_text}"
    );
    assert!(
        md_text.contains("**gate tripped**") && md_text.contains(TAIL),
        "{md_text}"
    );
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert!(
        junit.contains(&format!("name=\"{TAIL}\">\n      <failure")),
        "{junit}"
    );
    // The same pair gated on a test that did not move: passes.
    let r = compare(
        &p,
        &[
            "--fail-on",
            "worse",
            "--gate",
            "running/stage_wall/adapter_decode:median",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Gated on the tail's test alone: trips.
    let r = compare(&p, &["--fail-on", "worse", "--gate", TAIL]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    // B against A: the tail got better, which never trips `worse`.
    let back = Pair {
        a: p.b.clone(),
        b: p.a.clone(),
        tmp: tempfile::tempdir().unwrap(),
    };
    assert_eq!(compare(&back, &["--fail-on", "worse"]).code, 0);
    // Without --fail-on there is no gate: exit 0.
    assert_eq!(compare(&p, &[]).code, 0);
    // An identical pair (the same stream): nothing moves, exit 0.
    let same = pair(&base(), &base());
    let r = compare(&same, &["--fail-on", "worse"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn the_gate_reads_warnings_only_with_strict_and_refuses_unknown_names() {
    // One rollout a side: a warning about the pair. It never trips the
    // gate by itself, unless --strict.
    let same = pair(&base(), &base());
    assert_eq!(compare(&same, &["--fail-on", "worse"]).code, 0);
    let r = compare(&same, &["--fail-on", "worse", "--strict"]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stderr.contains("a warning about the pair, with --strict"),
        "{}",
        r.stderr
    );
    // A gate name that is no test: a usage error naming the tests.
    let r = compare(&same, &["--fail-on", "worse", "--gate", "running/nope:p99"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("names no test of this comparison; its tests are:"),
        "{}",
        r.stderr
    );
    // Levels belong to their command.
    let r = compare(&same, &["--fail-on", "fail"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("compare's gate takes `worse`, `mixed` or `undecided`"),
        "{}",
        r.stderr
    );
    let ep = fixture("v1/serve-episode");
    let r = analyze(&["--episode", ep.to_str().unwrap(), "--fail-on", "worse"]);
    assert_eq!(r.code, 2);
    let r = analyze(&[
        "--episode",
        ep.to_str().unwrap(),
        "--fail-on",
        "fail",
        "--strict",
    ]);
    assert_eq!(r.code, 2);
}

#[test]
fn the_report_gate_trips_on_judged_cards_only() {
    let ep = fixture("v1/serve-episode");
    let ep = ep.to_str().unwrap();
    // The fixture's running card passes: neither level trips.
    assert_eq!(analyze(&["--episode", ep, "--fail-on", "fail"]).code, 0);
    assert_eq!(analyze(&["--episode", ep, "--fail-on", "warn"]).code, 0);
    // Tightened until the running card fails (a 0.0 % rate tolerance and
    // no overrun allowed do not move it; a p99 within 0 % does: its p99 is
    // 10.003 ms against 10 ms).
    let tight = ["--pass-p99-within", "0", "--warn-p99-within", "0"];
    let mut args = vec!["--episode", ep, "--fail-on", "fail"];
    args.extend(tight);
    let r = analyze(&args);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(r.stderr.contains("running card"), "{}", r.stderr);
    // The warmup card is not judged: it never trips, whatever its figures.
    assert!(!r.stderr.contains("warmup card"), "{}", r.stderr);
}

#[test]
fn a_write_failure_wins_over_a_tripped_gate_which_wins_over_partial_input() {
    let p = pair(&base(), &with_tail());
    // --markdown into a path whose parent is a file: exit 3, not 5.
    let blocker = p.tmp.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let md = blocker.join("summary.md");
    let r = compare(
        &p,
        &["--fail-on", "worse", "--markdown", md.to_str().unwrap()],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    // A side with a dead rollout (left out: partial, 4) and a tripped
    // gate: 5, the message naming both.
    let session = p.tmp.path().join("session");
    write(&session.join("rollout-000"), &with_tail());
    let dead = session.join("rollout-001");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("manifest.json"), "{\"status\": \"complete\"}").unwrap();
    let r = analyze(&[
        "compare",
        p.a.to_str().unwrap(),
        session.to_str().unwrap(),
        "--fail-on",
        "worse",
    ]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stderr.contains("episode(s) were left out"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_report_gate_that_checked_nothing_says_so_and_trips_unless_allowed() {
    // The serve fixture without a nominal period (and without its
    // manifest, which could supply one): no card is judged, so a gate
    // given --fail-on would check nothing. It says so and exits 5; with
    // --allow-empty-gate it passes, and says it checked nothing.
    let tmp = damaged("v1/serve-episode", |mut lines| {
        let mut h: Value = serde_json::from_str(&lines[0]).unwrap();
        h["nominal_period_ns"] = Value::Null;
        lines[0] = h.to_string();
        joined(lines)
    });
    let _ = std::fs::remove_file(tmp.path().join("manifest.json"));
    let dir = tmp.path().to_str().unwrap();
    let (md, xml) = (tmp.path().join("s.md"), tmp.path().join("j.xml"));
    let files = [
        "--markdown",
        md.to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
    ];
    let mut args = vec!["--episode", dir, "--fail-on", "fail"];
    args.extend(files);
    let r = analyze(&args);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stderr.contains("it checked nothing")
            && r.stderr.contains("--allow-empty-gate")
            && r.stderr.contains("cases not judged"),
        "{}",
        r.stderr
    );
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(
        text.contains("**gate tripped**: it checked nothing"),
        "{text}"
    );
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert!(
        junit.contains("name=\"gate checked nothing\">\n      <failure type=\"gate\""),
        "{junit}"
    );
    assert!(junit.contains("<skipped message=\"not judged: "), "{junit}");
    args.push("--allow-empty-gate");
    let r = analyze(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(
        text.contains("gate passed with nothing checked (--allow-empty-gate)"),
        "{text}"
    );
    // Without --fail-on there is no gate, empty or not: exit 0.
    assert_eq!(analyze(&["--episode", dir]).code, 0);
}

#[test]
fn a_compare_test_left_out_of_the_gate_is_called_not_gated() {
    // The tail pair gated on the median test alone: the tail's p99 test is
    // worse but not gated; its JUnit case says "not gated: worse", and the
    // gate passes with the one test it checked.
    let p = pair(&base(), &with_tail());
    let xml = p.tmp.path().join("junit.xml");
    let md = p.tmp.path().join("s.md");
    let r = compare(
        &p,
        &[
            "--fail-on",
            "worse",
            "--gate",
            "running/stage_wall/adapter_decode:median",
            "--junit",
            xml.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let junit = std::fs::read_to_string(&xml).unwrap();
    let case = junit
        .split("<testcase")
        .find(|c| c.contains(&format!("name=\"{TAIL}\"")))
        .unwrap();
    assert!(
        case.contains("<skipped message=\"not gated: worse: "),
        "{case}"
    );
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(
        text.contains("gate passed: 1 checked (--fail-on worse)"),
        "{text}"
    );
}

/// docs/ci.md's recommended gate: the judged phase's period median and
/// p99, work median, deadline misses and late starts.
const RECOMMENDED: &str = "running/period:median,running/period:p99,running/work:median,running/work_cpu:median,running/deadline_miss:rate,running/late_start:rate,running/loop_hz";

#[test]
fn the_recommended_gate_trips_on_a_declared_and_an_undeclared_rate_drop() {
    // Recorded sessions, 3 rollouts a side, 400 cycles each. A runs at
    // 100 Hz. B's loop is released every 11,627,907 ns (86 Hz): declared
    // (the nominal period and run.rate_hz follow it) or undeclared (the
    // nominal period stays 10 ms, run.rtf 0.86). Each rollout's loop Hz is
    // 1e9 / mean period over its 399 periods: the release period's Hz
    // within 0.01 Hz (the start jitter, u(0..50 µs), moves the mean period
    // by at most 50 µs / 399 = 0.13 µs), so B − A is −14.0 Hz, far beyond
    // the noise floor of max(1 % of 100 Hz, 0.1 Hz) = 1 Hz.
    let tmp = tempfile::tempdir().unwrap();
    let side = |name: &str, flag: &str, period_ns: u64, declare: bool, seeds: [u64; 3]| {
        seeds
            .iter()
            .flat_map(|&seed| {
                let s = Synth {
                    seed,
                    period_ns,
                    declare_period: declare,
                    cycle_cpu: true,
                    ..Synth::default()
                };
                let dir = write(&tmp.path().join(format!("{name}{seed}")), &s);
                [flag.to_string(), dir.to_str().unwrap().to_string()]
            })
            .collect::<Vec<String>>()
    };
    let a = side("a", "--a", 10_000_000, true, [1, 2, 3]);
    for (name, declare) in [("declared", true), ("undeclared", false)] {
        let b = side(name, "--b", 11_627_907, declare, [4, 5, 6]);
        let json = tmp.path().join(format!("{name}.json"));
        let mut args: Vec<&str> = vec!["compare"];
        args.extend(a.iter().chain(&b).map(String::as_str));
        args.extend(["--fail-on", "worse", "--gate", RECOMMENDED, "--json"]);
        args.extend(["--output", json.to_str().unwrap()]);
        let r = analyze(&args);
        assert_eq!(r.code, 5, "{name}: {}\n{}", r.stderr, r.stdout);
        assert!(r.stderr.contains("running/loop_hz"), "{name}: {}", r.stderr);
        let c: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let hz = c["hz"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["phase"] == "running" && h["metric"] == "loop_hz")
            .unwrap();
        let diff = hz["diff_hz"].as_f64().unwrap();
        assert!((diff + 14.0).abs() < 0.02, "{name}: {diff}");
        assert_eq!(hz["verdict"], "worse", "{name}");
        assert_eq!(hz["test"]["method"], "rollouts", "{name}");
        assert_eq!(hz["test"]["floor"], 1.0, "{name}");
        let period = c["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["phase"] == "running" && m["metric"] == "period")
            .unwrap();
        if declare {
            // The period test judges |period − nominal| against each
            // side's own nominal period: a loop that keeps its new, slower
            // period is no change there. Only the rate test sees it.
            assert_eq!(period["verdict_median"], "no_clear_change", "{name}");
        } else {
            // Undeclared, the period runs 1.63 ms past its nominal 10 ms.
            assert_eq!(period["verdict_median"], "worse", "{name}");
        }
        // The name the user tried first points at the test.
        let mut args: Vec<&str> = vec!["compare"];
        args.extend(a.iter().chain(&b).map(String::as_str));
        args.extend(["--fail-on", "worse", "--gate", "running/loop_hz:rate"]);
        let r = analyze(&args);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            r.stderr.contains("the test is running/loop_hz"),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn the_documented_gate_catches_a_slower_stage_and_passes_a_copy_of_itself() {
    // Recorded sessions (synthetic evidence with exact answers, never live
    // A/A runs): 3 rollouts a side; B's adapter_decode costs 1 ms more in
    // every cycle, so its work median grows by 1 ms (above the 20 µs
    // floor at 100 Hz) and the gate must trip on running/work:median.
    let tmp = tempfile::tempdir().unwrap();
    let side = |name: &str, extra: u64, seeds: [u64; 3]| -> Vec<String> {
        seeds
            .iter()
            .flat_map(|&seed| {
                let dir = write(
                    &tmp.path().join(format!("{name}{seed}")),
                    &Synth {
                        seed,
                        decode_extra_ns: extra,
                        cycle_cpu: true,
                        ..base()
                    },
                );
                [
                    format!("--{}", &name[..1]),
                    dir.to_str().unwrap().to_string(),
                ]
            })
            .collect()
    };
    let a = side("a", 0, [1, 2, 3]);
    let b = side("b", 1_000_000, [4, 5, 6]);
    let run = |a: &[String], b: &[String]| {
        let mut args: Vec<&str> = vec!["compare"];
        args.extend(a.iter().map(String::as_str));
        args.extend(b.iter().map(String::as_str));
        args.extend(["--fail-on", "worse", "--gate", RECOMMENDED]);
        analyze(&args)
    };
    let r = run(&a, &b);
    assert_eq!(r.code, 5, "{}\n{}", r.stderr, r.stdout);
    assert!(r.stderr.contains("running/work:median"), "{}", r.stderr);
    // A session compared with a copy of itself: nothing moves, exit 0.
    let copy: Vec<String> = a
        .chunks(2)
        .enumerate()
        .flat_map(|(i, pair)| {
            let to = tmp.path().join(format!("copy{i}"));
            copy_episode(Path::new(&pair[1]), &to);
            ["--b".to_string(), to.to_str().unwrap().to_string()]
        })
        .collect();
    let r = run(&a, &copy);
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    assert!(
        r.stdout.contains("what moved: nothing beyond noise"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    // `compare … --json | head -c 10`: the reader goes away while the
    // comparison (78 kB of JSON, more than a pipe holds) is written. The
    // command ends as `cat` does, by SIGPIPE, with nothing on stderr:
    // before, it said "cannot write <stdout>: Broken pipe" and exited 3,
    // and with stderr on the same pipe (`2>&1 | head -5`) its eprintln!
    // panicked (exit 101).
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let (a, b) = (fixture("v1/serve-episode"), fixture("v2/serve-episode"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_analyze_control_timing"))
        .args([
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {stderr}",
        out.status
    );
}

#[test]
fn strict_passes_a_change_to_the_code_alone_and_trips_on_another_host() {
    // 3 rollouts a side of one config, so the pair's only warnings are
    // the ones B's manifest brings. B built from other source: "no config
    // setting differs" and "the source hash differs", what every CI pair
    // of a code change shows; --strict does not trip on them. B on another
    // host: "different hosts", which it trips on (exit 5).
    let tmp = tempfile::tempdir().unwrap();
    let side = |flag: &str, seeds: [u64; 3], s: &Synth| -> Vec<String> {
        seeds
            .iter()
            .flat_map(|&seed| {
                let dir = write(
                    &tmp.path().join(format!("{flag}{seed}{:?}", s.hostname)),
                    &Synth { seed, ..s.clone() },
                );
                [flag.to_string(), dir.to_str().unwrap().to_string()]
            })
            .collect()
    };
    let cpu = Synth {
        cycle_cpu: true,
        ..Synth::default()
    };
    let a = side("--a", [1, 2, 3], &cpu);
    let run = |b: &[String]| {
        let mut args: Vec<&str> = vec!["compare"];
        args.extend(a.iter().chain(b).map(String::as_str));
        args.extend(["--fail-on", "worse", "--gate", RECOMMENDED, "--strict"]);
        analyze(&args)
    };
    let code_only = side(
        "--b",
        [4, 5, 6],
        &Synth {
            source_hash: Some("0123abcd"),
            ..cpu.clone()
        },
    );
    let r = run(&code_only);
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    // The warnings are still shown; they just do not trip the gate.
    assert!(
        r.stdout.contains("no config setting differs"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("different source"), "{}", r.stdout);
    let other_host = side(
        "--b",
        [4, 5, 6],
        &Synth {
            source_hash: Some("0123abcd"),
            hostname: Some("another-runner"),
            ..cpu.clone()
        },
    );
    let r = run(&other_host);
    assert_eq!(r.code, 5, "{}\n{}", r.stderr, r.stdout);
    assert!(r.stderr.contains("different hosts"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("no config setting differs"),
        "{}",
        r.stderr
    );
}

#[test]
fn work_cpu_is_a_test_where_both_sides_record_cpu_per_cycle_and_says_why_not_elsewhere() {
    // Per-cycle CPU time on both sides (the recorder's default mode): the
    // work_cpu test exists, B's +1 ms of adapter_decode moves it by +1 ms
    // (cpu_ns is the work's wall time less 10 µs), and it trips the gate.
    let cpu = Synth {
        cycle_cpu: true,
        ..base()
    };
    let slow = Synth {
        decode_extra_ns: 1_000_000,
        ..cpu.clone()
    };
    let p = pair(&cpu, &slow);
    let r = compare(
        &p,
        &["--fail-on", "worse", "--gate", "running/work_cpu:median"],
    );
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stderr.contains("running/work_cpu:median (worse"),
        "{}",
        r.stderr
    );
    // The v1 header's `spans` mode on both sides: no per-cycle CPU time,
    // so no work_cpu test; the caveat says so, and gating it is a usage
    // error that says why and what to gate instead.
    let p = pair(&base(), &with_tail());
    let r = compare(&p, &[]);
    assert!(
        r.stdout
            .contains("work_cpu (the cycle's CPU time) is not tested"),
        "{}",
        r.stdout
    );
    let r = compare(
        &p,
        &["--fail-on", "worse", "--gate", "running/work_cpu:median"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("record CPU time per cycle") && r.stderr.contains("running/work:median"),
        "{}",
        r.stderr
    );
}
