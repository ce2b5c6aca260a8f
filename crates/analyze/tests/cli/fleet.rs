//! `fleet`: discovery under roots, one row per episode and phase equal to
//! `report`'s figures, bad episodes listed without stopping the batch.

use super::*;

/// Parse the simple CSV `fleet` writes (quoted fields may hold commas and
/// doubled quotes; no field here holds a line break).
fn csv_rows(text: &str) -> Vec<BTreeMap<String, String>> {
    fn fields(line: &str) -> Vec<String> {
        let (mut out, mut cur, mut quoted, mut chars) =
            (Vec::new(), String::new(), false, line.chars().peekable());
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    cur.push('"');
                    chars.next();
                }
                ('"', _) => quoted = !quoted,
                (',', false) => out.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            }
        }
        out.push(cur);
        out
    }
    let mut lines = text.lines();
    let header = fields(lines.next().unwrap());
    lines
        .map(|l| {
            let f = fields(l);
            assert_eq!(f.len(), header.len(), "{l}");
            header.iter().cloned().zip(f).collect()
        })
        .collect()
}

use std::collections::BTreeMap;

/// A fleet root with three good episodes (two sessions of a robot, one
/// without a manifest), a `latest` link to one of them that must not count
/// twice, a rollout that died before its finish (manifest only), one with a
/// corrupt line, one whose last line is cut off mid-line (read, with a
/// caveat), one whose JSONL starts with garbage and one whose JSONL is
/// empty.
fn fleet_root() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    copy_episode(
        &fixture("v1/serve-episode"),
        &root.join("runs/s1/rollout-000"),
    );
    copy_episode(
        &fixture("v2/serve-episode"),
        &root.join("runs/s2/rollout-000"),
    );
    copy_episode(
        &fixture("v1/synthetic-basic"),
        &root.join("other/synthetic"),
    );
    std::os::unix::fs::symlink(root.join("runs/s1/rollout-000"), root.join("runs/latest")).unwrap();
    let dead = root.join("runs/s3/rollout-000");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("manifest.json"), "{\"state\": \"running\"}").unwrap();
    let bad = damaged("v1/serve-episode", |mut l| {
        l[5] = "{not json".into();
        joined(l)
    });
    copy_episode(bad.path(), &root.join("runs/s4/rollout-000"));
    // The last line cut in half, with no newline: a kill mid-write.
    let cut = damaged("v1/synthetic-basic", |l| {
        let mut text = joined(l);
        text.truncate(text.len() - 40);
        text
    });
    copy_episode(cut.path(), &root.join("cut/rollout-000"));
    let garbage = damaged("v1/synthetic-basic", |mut l| {
        l[0] = "GARBAGE \u{1}\u{2} not a header".into();
        joined(l)
    });
    copy_episode(garbage.path(), &root.join("garbage/rollout-000"));
    let empty = damaged("v1/synthetic-basic", |_| String::new());
    copy_episode(empty.path(), &root.join("empty/rollout-000"));
    tmp
}

fn fleet(root: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "fleet",
        root.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    analyze(&args)
}

#[test]
fn fleet_rows_equal_the_reports_and_bad_episodes_are_listed() {
    let tmp = fleet_root();
    let out = tmp.path().join("out");
    // The root given twice, once through a link to it: still one of each.
    std::os::unix::fs::symlink(tmp.path().join("runs"), tmp.path().join("runs-link")).unwrap();
    let link = tmp.path().join("runs-link");
    let r = fleet(tmp.path(), &out, &[link.to_str().unwrap(), "--jobs", "2"]);
    // Some episodes failed, the others are in the table: partial input.
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stdout.contains("8 episodes found, 4 analyzed, 4 failed"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("partial input: 4 of 8 episodes used"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("looptime recover"), "{}", r.stderr);
    let rows = csv_rows(&std::fs::read_to_string(out.join("fleet.csv")).unwrap());
    let mut checked = 0;
    for (dir, robot, session) in [
        // Partition keys: the manifest's session where there is one, else
        // the parent directory's name; robot from the manifest's host
        // (`vm` in both serve fixtures), else `unknown`.
        (
            "runs/s1/rollout-000",
            Some("vm"),
            "session-20261202T143058Z",
        ),
        (
            "runs/s2/rollout-000",
            Some("vm"),
            "session-20261203T133658Z",
        ),
        ("other/synthetic", Some("unknown"), "other"),
        // Read with a caveat (its last line was cut off): a row like any.
        ("cut/rollout-000", Some("unknown"), "cut"),
    ] {
        let ep = tmp.path().join(dir);
        let rep = analyze_json(&ep, &[]);
        let mine: Vec<_> = rows
            .iter()
            .filter(|r| r["episode_dir"] == ep.to_str().unwrap())
            .collect();
        let phases = rep["phases"].as_array().unwrap();
        assert_eq!(mine.len(), phases.len(), "{dir}: one row per phase");
        for p in phases {
            let row = mine
                .iter()
                .find(|r| r["phase"] == p["phase"].as_str().unwrap())
                .unwrap();
            let text = |v: &Value| match v {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            let dist = |d: &Value, k: &str| {
                if d.is_null() || d["count"] == 0 {
                    String::new()
                } else {
                    text(&d[k])
                }
            };
            // The top stage: the top-level stage group of this phase with the
            // largest wall p99, found here from the report's stage list.
            let top = rep["stages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["phase"] == p["phase"] && s["depth"] == 0)
                .max_by_key(|s| s["wall"]["p99_ns"].as_i64().unwrap())
                .unwrap();
            let cycles = p["cycles"].as_u64().unwrap();
            let overruns = p["overruns"].as_u64().unwrap();
            for (col, want) in [
                ("cycles", text(&p["cycles"])),
                ("segments", text(&p["segments"])),
                ("loop_hz", text(&p["loop_hz"])),
                ("period_p50_ns", dist(&p["period"], "p50_ns")),
                ("period_p99_ns", dist(&p["period"], "p99_ns")),
                ("period_p999_ns", dist(&p["period"], "p999_ns")),
                ("overruns", text(&p["overruns"])),
                (
                    "overruns_per_1000",
                    (1000.0 * overruns as f64 / cycles as f64).to_string(),
                ),
                ("work_p99_ns", dist(&p["work"], "p99_ns")),
                ("top_stage_p99_ns", text(&top["wall"]["p99_ns"])),
                ("state", text(&rep["state"])),
                ("session", session.to_string()),
            ] {
                // Floats are compared as numbers (the CSV prints Rust's
                // shortest form, the JSON serde_json's), everything else
                // as text.
                match (row[col].parse::<f64>(), want.parse::<f64>()) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{dir} {} {col}", p["phase"]),
                    _ => assert_eq!(row[col], want, "{dir} {} {col}", p["phase"]),
                }
                checked += 1;
            }
            assert!(
                row["top_stage"].starts_with(top["path"].as_str().unwrap()),
                "{dir}: {}",
                row["top_stage"]
            );
            if let Some(robot) = robot {
                assert_eq!(row["robot"], robot);
            }
        }
    }
    assert!(checked >= 60, "{checked}");

    // The cut-off episode's rows carry its caveat.
    let cut = tmp.path().join("cut/rollout-000");
    let cut_rows: Vec<_> = rows
        .iter()
        .filter(|r| r["episode_dir"] == cut.to_str().unwrap())
        .collect();
    let cut_report = analyze_json(&cut, &[]);
    let caveats: Vec<&str> = cut_report["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(!caveats.is_empty(), "the cut-off fixture has a caveat");
    assert!(cut_rows.iter().all(|r| r["caveats"] == caveats.join(" | ")));
    assert!(cut_rows
        .iter()
        .all(|r| r["n_caveats"] == caveats.len().to_string()));

    // The four bad episodes: listed with their kind and error, in the
    // summary and errors.csv; the `latest` link and the second root did
    // not count twice.
    let errors = csv_rows(&std::fs::read_to_string(out.join("errors.csv")).unwrap());
    let kinds: Vec<(String, String)> = errors
        .iter()
        .map(|e| {
            let rel = Path::new(&e["path"]).strip_prefix(tmp.path()).unwrap();
            (rel.display().to_string(), e["kind"].clone())
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("empty/rollout-000", "empty_file"),
            ("garbage/rollout-000", "bad_header"),
            ("runs/s3/rollout-000", "no_evidence"),
            ("runs/s4/rollout-000", "bad_line"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert!(errors[2]["message"].contains("looptime recover"));
    assert!(
        errors[3]["message"].contains(":6:"),
        "{}",
        errors[3]["message"]
    );
    assert!(r.stdout.contains("failed (4)"), "{}", r.stdout);
    let summary = std::fs::read_to_string(out.join("fleet_summary.txt")).unwrap();
    assert_eq!(summary, r.stdout);
    let parquet = std::fs::read(out.join("fleet.parquet")).unwrap();
    assert!(parquet.starts_with(b"PAR1") && parquet.ends_with(b"PAR1"));

    // One worker or two: the same table; --json says the same as the text.
    let one_out = tmp.path().join("one");
    let r = fleet(tmp.path(), &one_out, &["--jobs", "1", "--json"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let again = std::fs::read_to_string(one_out.join("fleet.csv")).unwrap();
    assert_eq!(
        again,
        std::fs::read_to_string(out.join("fleet.csv")).unwrap(),
        "one worker or two: the same table"
    );
    let json: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(json["format"], "looptime-fleet/1");
    assert_eq!(
        (json["found"].as_u64(), json["analyzed"].as_u64()),
        (Some(8), Some(4))
    );
    assert_eq!(json["failures"].as_array().unwrap().len(), 4);
    assert_eq!(json["failures"][1]["kind"], "bad_header");
}

#[test]
fn fleet_without_episodes_or_with_a_missing_root_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let r = fleet(tmp.path(), &out, &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no episode directory"), "{}", r.stderr);
    let r = fleet(&tmp.path().join("nope"), &out, &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("nope"), "{}", r.stderr);
    let r = fleet(tmp.path(), &out, &["--jobs", "0"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--jobs"), "{}", r.stderr);
    // A root with only a dead episode: nothing analyzed, exit 2, and the
    // failure is still written down.
    let dead = tmp.path().join("s/rollout-000");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("manifest.json"), "{}").unwrap();
    let r = fleet(tmp.path(), &out, &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("none of the 1 episodes could be analyzed"),
        "{}",
        r.stderr
    );
    let failures = std::fs::read_to_string(out.join("errors.csv")).unwrap();
    assert_eq!(failures.lines().count(), 2);
    assert!(failures.starts_with("path,kind,message\n"), "{failures}");
}

#[test]
fn fleet_json_over_the_fixtures_is_unchanged() {
    // Every fixture of every schema version, from fixtures/: the summary
    // (worst lists with their full rows, no outliers with fewer than 8 rows
    // a phase, no failures) byte for byte. Paths are canonical, so the
    // checkout's own path is replaced by `<fixtures>` before comparing.
    // Regenerate as fixtures/golden/README.md says.
    let tmp = tempfile::tempdir().unwrap();
    let r = analyze_in(
        &fixture(""),
        &[
            "fleet",
            "v1",
            "v2",
            "--out",
            tmp.path().to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let here = std::fs::canonicalize(fixture("")).unwrap();
    let got = r.stdout.replace(here.to_str().unwrap(), "<fixtures>");
    let want = std::fs::read_to_string(fixture("golden/fleet.json")).unwrap();
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "fleet --json differs from fixtures/golden/fleet.json at line {}:\n  got:  {}\n  want: {}",
            line + 1,
            got.lines().nth(line).unwrap_or("<end>"),
            want.lines().nth(line).unwrap_or("<end>")
        );
    }
    let json: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(json["found"], 4, "two v1 and two v2 fixtures");
}

/// A worker that dies outside the per-episode guard (here, in the progress
/// callback after its first episode) used to take the episodes it held
/// out of both the table and errors.csv. With one worker, every episode
/// after the first is never claimed: each must come back as a failure of
/// kind `internal`, so that found = analyzed + failed still holds.
#[test]
fn a_worker_that_dies_outside_the_episode_guard_loses_no_episode() {
    let tmp = fleet_root();
    let dirs = looptime_analyze::fleet::discover(&[tmp.path().to_path_buf()]).unwrap();
    assert!(dirs.len() > 3, "{dirs:?}");
    let fleet = looptime_analyze::fleet::analyze_all(
        &dirs,
        1,
        &looptime_analyze::LoadOptions::default(),
        &|_, _| panic!("the progress callback broke"),
    );
    assert!(fleet.is_whole());
    assert_eq!(fleet.found, dirs.len());
    assert_eq!(fleet.analyzed + fleet.failures.len(), dirs.len());
    // The first episode's outcome was set before the callback panicked; the
    // rest were never reached and are internal failures naming the panic.
    let internal: Vec<_> = fleet
        .failures
        .iter()
        .filter(|f| f.kind == "internal")
        .collect();
    assert_eq!(internal.len(), dirs.len() - 1, "{:?}", fleet.failures);
    assert!(
        internal[0].message.contains("the progress callback broke"),
        "{}",
        internal[0].message
    );
    assert_eq!(internal[0].dir, dirs[1]);
}

/// `config_name`: the config file's name (or the manifest's source as it
/// is), so rows of one configuration read alike across runs directories;
/// after it, the two data-age columns.
#[test]
fn the_fleet_table_names_each_rows_configuration() {
    let tmp = fleet_root();
    // One session labelled (`serve --label euler` records config.run.label).
    let m = tmp.path().join("runs/s2/rollout-000/manifest.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    v["config"]["run"]["label"] = serde_json::json!("euler");
    std::fs::write(&m, v.to_string()).unwrap();
    let out = tmp.path().join("out");
    fleet(tmp.path(), &out, &[]);
    let rows = csv_rows(&std::fs::read_to_string(out.join("fleet.csv")).unwrap());
    let names: std::collections::BTreeSet<String> = rows
        .iter()
        .filter(|r| r["robot"] != "unknown" || !r["config_name"].is_empty())
        .map(|r| r["config_name"].clone())
        .collect();
    // The serve fixtures were recorded with the embedded default; the
    // labelled one is named by its label, which has a column of its own.
    assert!(names.contains("embedded default"), "{names:?}");
    let labelled: Vec<_> = rows.iter().filter(|r| r["label"] == "euler").collect();
    assert!(!labelled.is_empty(), "{rows:?}");
    let s2 = |r: &&std::collections::BTreeMap<String, String>| {
        r["episode_dir"].ends_with("runs/s2/rollout-000")
    };
    assert!(labelled
        .iter()
        .all(|r| r["config_name"] == "euler" && s2(r)));
    assert!(rows
        .iter()
        .filter(|r| !s2(r))
        .all(|r| r["label"].is_empty()));
    let header = std::fs::read_to_string(out.join("fleet.csv")).unwrap();
    assert!(header
        .lines()
        .next()
        .unwrap()
        .contains(",label,config_name,max_age_p99_ms,max_stale_share,"));
}
