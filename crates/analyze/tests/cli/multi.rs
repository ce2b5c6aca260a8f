//! The rules `compare`, `export --format parquet` and `fleet` share
//! (docs/metrics.md, "Several episodes"): one episode is one canonical
//! directory, and a rollout without evidence is listed and gives the
//! partial-input exit code 4, never a silent exit 0.

use super::*;

/// A session of two good rollouts (copies of the v1 serve fixture) and a
/// third that died before its finish (a manifest, no JSONL).
fn session_with_a_dead_rollout() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("session");
    copy_episode(&fixture("v1/serve-episode"), &s.join("rollout-000"));
    copy_episode(&fixture("v1/serve-episode"), &s.join("rollout-001"));
    std::fs::create_dir_all(s.join("rollout-002")).unwrap();
    std::fs::write(s.join("rollout-002/manifest.json"), "{}").unwrap();
    tmp
}

#[test]
fn compare_over_a_session_with_a_dead_rollout_is_partial_and_lists_it() {
    let tmp = session_with_a_dead_rollout();
    let s = tmp.path().join("session");
    let b = fixture("v1/synthetic-basic");
    let r = analyze(&[
        "compare",
        s.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    let dead = s.join("rollout-002");
    assert_eq!(
        c["left_out"],
        serde_json::json!([format!("A: {}", dead.display())])
    );
    assert_eq!(c["a_episodes"].as_array().unwrap().len(), 2);
    assert!(r.stderr.contains("looptime recover"), "{}", r.stderr);
    assert!(
        r.stderr.contains("partial input: 3 of 4 episodes used"),
        "{}",
        r.stderr
    );
    // The text says it too; without the dead rollout the same comparison
    // exits 0 and has no `left_out` field.
    let r = analyze(&["compare", s.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(r.code, 4);
    assert!(
        r.stdout.contains("left out (no control_timing.jsonl"),
        "{}",
        r.stdout
    );
    std::fs::remove_dir_all(&dead).unwrap();
    let r = analyze(&[
        "compare",
        s.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(c.get("left_out").is_none());
}

#[test]
fn a_side_given_twice_counts_each_episode_once() {
    // The session, one of its rollouts again, and a link to the other: two
    // episodes on side A, not four.
    let tmp = session_with_a_dead_rollout();
    let s = tmp.path().join("session");
    std::fs::remove_dir_all(s.join("rollout-002")).unwrap();
    let link = tmp.path().join("latest");
    std::os::unix::fs::symlink(s.join("rollout-001"), &link).unwrap();
    let b = fixture("v1/synthetic-basic");
    let (s0, l, bs) = (s.join("rollout-000"), link.clone(), b.clone());
    let r = analyze(&[
        "compare",
        s.to_str().unwrap(),
        b.to_str().unwrap(),
        "--a",
        s0.to_str().unwrap(),
        "--a",
        l.to_str().unwrap(),
        "--b",
        bs.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        c["a_episodes"].as_array().unwrap().len(),
        2,
        "{}",
        c["a_episodes"]
    );
    assert_eq!(c["b_episodes"].as_array().unwrap().len(), 1);
}

#[test]
fn the_dataset_export_counts_each_episode_once_and_a_dead_rollout_is_partial() {
    let tmp = session_with_a_dead_rollout();
    let s = tmp.path().join("session");
    let out = tmp.path().join("dataset");
    let r0 = s.join("rollout-000");
    let r = analyze(&[
        "export",
        s.to_str().unwrap(),
        r0.to_str().unwrap(),
        "--format",
        "parquet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains(", 2 episodes;"), "{}", r.stderr);
    // stderr is a pipe here, as in a CI log: no carriage-return progress.
    assert!(!r.stderr.contains('\r'), "{:?}", r.stderr);
    assert!(
        r.stderr.contains("rollout-002 has no control_timing.jsonl"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("partial input: 2 of 3 episodes used"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_failed_re_export_removes_the_episodes_earlier_partitions() {
    let tmp = session_with_a_dead_rollout();
    let s = tmp.path().join("session");
    let (r0, r1) = (s.join("rollout-000"), s.join("rollout-001"));
    // Distinct keys for the two copies: their manifests name other rollouts.
    for (dir, rollout) in [(&r0, "rollout-000"), (&r1, "rollout-001")] {
        let p = dir.join("manifest.json");
        let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        m["rollout"] = rollout.into();
        std::fs::write(&p, m.to_string()).unwrap();
    }
    let out = tmp.path().join("dataset");
    let export = |dirs: &[&Path]| {
        let mut args = vec!["export"];
        args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
        args.extend(["--format", "parquet", "--out", out.to_str().unwrap()]);
        analyze(&args)
    };
    let r = export(&[&r0, &r1]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let parts = |rollout: &str| -> Vec<bool> {
        ["cycles", "spans", "values", "episodes"]
            .iter()
            .map(|t| {
                out.join(t)
                    .join("robot=vm/session=session-20261202T143058Z")
                    .join(format!("rollout={rollout}"))
                    .join("part-0.parquet")
                    .exists()
            })
            .collect()
    };
    assert_eq!(parts("rollout-000"), [true; 4]);
    assert_eq!(parts("rollout-001"), [true; 4]);
    // rollout-000 goes bad (a corrupt line) and is exported again with
    // rollout-001: its old rows must not stay as if it had succeeded.
    let jsonl = r0.join("control_timing.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines[3] = "{not json".into();
    std::fs::write(&jsonl, joined(lines)).unwrap();
    let r = export(&[&r0, &r1]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("removed"), "{}", r.stderr);
    assert!(r.stderr.contains("rollout=rollout-000"), "{}", r.stderr);
    assert_eq!(parts("rollout-000"), [false; 4]);
    assert_eq!(parts("rollout-001"), [true; 4], "the other episode stays");
}

#[test]
fn a_re_export_replaces_the_episodes_files_and_adds_no_rows() {
    let tmp = session_with_a_dead_rollout();
    let r0 = tmp.path().join("session/rollout-000");
    let out = tmp.path().join("dataset");
    let export = || {
        analyze(&[
            "export",
            r0.to_str().unwrap(),
            "--format",
            "parquet",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let files = || -> Vec<(PathBuf, Vec<u8>)> {
        let mut v = Vec::new();
        let mut stack = vec![out.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    v.push((p.clone(), std::fs::read(&p).unwrap()));
                }
            }
        }
        v.sort();
        v
    };
    assert_eq!(export().code, 0);
    let first = files();
    assert_eq!(first.len(), 6, "one part file per table: {first:?}");
    let r = export();
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The same six files, byte for byte: replaced, not added beside.
    assert_eq!(files(), first);
}

#[test]
fn help_and_version_exit_0_and_a_usage_error_exits_2() {
    for args in [&["--help"][..], &["--version"], &["fleet", "--help"]] {
        let r = analyze(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(!r.stdout.is_empty(), "{args:?}");
    }
    let r = analyze(&["--no-such-flag"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn completions_and_man_pages_of_the_analyzer() {
    for (shell, marker) in [
        ("bash", "_analyze_control_timing()"),
        ("zsh", "#compdef analyze_control_timing"),
        ("fish", "complete -c analyze_control_timing"),
    ] {
        let r = analyze(&["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {}", r.stderr);
        assert!(r.stdout.contains(marker), "{shell}");
        assert!(
            r.stdout.contains("fleet") && r.stdout.contains("compare"),
            "{shell}"
        );
    }
    // `analyze_control_timing fl<TAB>` completes to fleet.
    let bin = env!("CARGO_BIN_EXE_analyze_control_timing");
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source <(\"{bin}\" completions bash); COMP_WORDS=(analyze_control_timing fl); \
             COMP_CWORD=1; _analyze_control_timing analyze_control_timing fl analyze_control_timing; \
             echo \"${{COMPREPLY[*]}}\""
        ))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "fleet");
    let dir = tempfile::tempdir().unwrap();
    let r = analyze(&["man", dir.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for page in [
        "analyze_control_timing",
        "analyze_control_timing-compare",
        "analyze_control_timing-export",
        "analyze_control_timing-fleet",
    ] {
        let text = std::fs::read_to_string(dir.path().join(format!("{page}.1"))).unwrap();
        assert!(text.contains(&format!(".TH {page} 1")), "{page}");
    }
}

#[test]
fn a_dataset_export_that_writes_nothing_exits_2_even_with_a_dead_rollout() {
    // A session of a corrupt rollout and a dead one: no episode usable, so
    // the bad input's code (2), not partial input (4).
    let tmp = session_with_a_dead_rollout();
    let s = tmp.path().join("session");
    std::fs::remove_dir_all(s.join("rollout-001")).unwrap();
    let jsonl = s.join("rollout-000/control_timing.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines[3] = "{not json".into();
    std::fs::write(&jsonl, joined(lines)).unwrap();
    let out = tmp.path().join("dataset");
    let r = analyze(&[
        "export",
        s.to_str().unwrap(),
        "--format",
        "parquet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("control_timing.jsonl:4"), "{}", r.stderr);
    assert!(
        r.stderr.contains("rollout-002 has no control_timing.jsonl"),
        "{}",
        r.stderr
    );
}
