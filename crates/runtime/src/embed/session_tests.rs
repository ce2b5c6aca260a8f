//! Tests of `embed::session`: sessions, rollouts and their manifests.

use super::*;

pub(in crate::embed) fn facts(dir: &Path) -> ProgramFacts {
    let src = dir.join("prog.py");
    std::fs::write(&src, b"print('hi')\n").unwrap();
    ProgramFacts {
        producer: "looptime-test 0".into(),
        program: src.display().to_string(),
        sources: vec![src, dir.join("missing.py")],
        control_timing: true,
        timing_max_cycles: 500,
        nominal_period_ns: 10_000_000,
        spin_margin_ns: 200_000,
        spin_margin_auto: false,
        overrun_policy: "rebase",
        rtf: 1.0,
        label: None,
        settings: BTreeMap::from([("duration_s".to_string(), serde_json::json!(2.5))]),
    }
}

fn read(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn done(cycles: u64) -> EpisodeEnd {
    EpisodeEnd {
        complete: true,
        cycles,
        evidence: true,
        ..EpisodeEnd::default()
    }
}

#[test]
fn layout_running_then_aborted() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let (mut ep, _) = HostEpisode::create(&runs, facts(tmp.path())).unwrap();
    assert_eq!(ep.dir().file_name().unwrap(), "rollout-000");
    assert_eq!(
        std::fs::canonicalize(runs.join("latest")).unwrap(),
        std::fs::canonicalize(ep.dir()).unwrap()
    );
    assert_eq!(
        std::fs::canonicalize(runs.join("latest-session")).unwrap(),
        std::fs::canonicalize(ep.session()).unwrap()
    );
    let m = read(&ep.dir().join("manifest.json"));
    assert_eq!(m["status"], "running");
    assert_eq!(m["config"]["run"]["control_timing"], true);
    assert_eq!(m["config"]["run"]["timing_max_cycles"], 500);
    assert_eq!(m["config"]["program"]["duration_s"], 2.5);
    assert_eq!(m["schedule"]["clock"], "host_monotonic");
    // sha256 of "print('hi')\n", as `sha256sum` prints it.
    let hashes = &m["program"]["source_hashes"];
    let prog = tmp.path().join("prog.py").display().to_string();
    assert_eq!(hashes[&prog], sha256(b"print('hi')\n"));
    let missing = tmp.path().join("missing.py").display().to_string();
    assert!(hashes[&missing]
        .as_str()
        .unwrap()
        .starts_with("unreadable: "));
    let s = read(&ep.session().join("session.json"));
    assert_eq!(s["rollouts"][0]["state"], "running");
    assert_eq!(s["producer"], "looptime-test 0");

    ep.finish(&EpisodeEnd {
        complete: false,
        cycles: 7,
        evidence: true,
        ..EpisodeEnd::default()
    })
    .unwrap();
    let m = read(&ep.dir().join("manifest.json"));
    assert_eq!(m["status"], "aborted");
    assert_eq!(m["counts"]["cycles"], 7);
    assert_eq!(m["files"].as_array().unwrap().len(), 3);
    let s = read(&ep.session().join("session.json"));
    assert_eq!(s["rollouts"][0]["state"], "aborted");
    assert_eq!(s["status"], "aborted");
    assert!(ep.is_finished());
}

#[test]
fn one_rollout_completes_its_session() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ep, _) = HostEpisode::create(&tmp.path().join("r"), facts(tmp.path())).unwrap();
    ep.finish(&done(3)).unwrap();
    let s = read(&ep.session().join("session.json"));
    assert_eq!(s["status"], "complete");
    assert!(s["stop"].is_null());
}

#[test]
fn a_planned_session_takes_its_rollouts_in_order_then_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let (session, _) = HostSession::create(&runs, facts(tmp.path()), 2).unwrap();
    let s = read(&session.dir().join("session.json"));
    assert_eq!(s["planned_rollouts"], 2);
    assert_eq!(s["rollouts"][1]["state"], "not_run");

    let mut a = session
        .rollout(BTreeMap::from([("seed".into(), serde_json::json!(1))]))
        .unwrap();
    // One rollout at a time: the second waits for the first's finish.
    let err = session.rollout(BTreeMap::new()).unwrap_err().to_string();
    assert!(err.contains("rollout-000 is still running"), "{err}");
    a.finish(&done(5)).unwrap();
    assert_eq!(
        read(&session.dir().join("session.json"))["status"],
        "running"
    );

    let mut b = session
        .rollout(BTreeMap::from([("seed".into(), serde_json::json!(2))]))
        .unwrap();
    assert_eq!(b.dir().file_name().unwrap(), "rollout-001");
    assert_eq!(
        std::fs::canonicalize(runs.join("latest")).unwrap(),
        std::fs::canonicalize(b.dir()).unwrap()
    );
    let m = read(&b.dir().join("manifest.json"));
    assert_eq!(m["rollout"], "rollout-001");
    // The rollout's seed is the run's (run.seed, as serve writes it).
    assert_eq!(m["config"]["run"]["seed"], 2);
    assert!(m["config"]["program"].get("seed").is_none());
    b.finish(&done(5)).unwrap();
    let s = read(&session.dir().join("session.json"));
    assert_eq!(s["status"], "complete");
    assert_eq!(s["rollouts"][1]["state"], "complete");

    let err = session.rollout(BTreeMap::new()).unwrap_err().to_string();
    assert!(err.contains("all 2 planned rollouts have started"), "{err}");
    session.close(None).unwrap();
    assert_eq!(
        read(&session.dir().join("session.json"))["status"],
        "complete"
    );
    assert_eq!(session.rollouts(), 2);
}

#[test]
fn an_open_ended_session_lists_rollouts_as_they_start_and_completes_on_close() {
    let tmp = tempfile::tempdir().unwrap();
    let (session, _) = HostSession::create(&tmp.path().join("runs"), facts(tmp.path()), 0).unwrap();
    for _ in 0..3 {
        session
            .rollout(BTreeMap::new())
            .unwrap()
            .finish(&done(4))
            .unwrap();
    }
    let s = read(&session.dir().join("session.json"));
    assert_eq!(s["status"], "running", "open-ended: running until closed");
    assert_eq!(s["rollouts"].as_array().unwrap().len(), 3);
    session.close(None).unwrap();
    let s = read(&session.dir().join("session.json"));
    assert_eq!(s["status"], "complete");
    let err = session.rollout(BTreeMap::new()).unwrap_err().to_string();
    assert!(err.contains("closed"), "{err}");
}

#[test]
fn closing_short_of_the_plan_or_with_a_reason_aborts_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let (session, _) = HostSession::create(&tmp.path().join("runs"), facts(tmp.path()), 3).unwrap();
    session
        .rollout(BTreeMap::new())
        .unwrap()
        .finish(&done(2))
        .unwrap();
    session.close(None).unwrap();
    let s = read(&session.dir().join("session.json"));
    assert_eq!(s["status"], "aborted");
    assert_eq!(
        s["stop"],
        "the program closed the session after 1 of 3 planned rollouts"
    );
    assert_eq!(s["rollouts"][2]["state"], "not_run");

    let (other, _) = HostSession::create(&tmp.path().join("runs2"), facts(tmp.path()), 0).unwrap();
    other.close(Some("ValueError: bad gain")).unwrap();
    let s = read(&other.dir().join("session.json"));
    assert_eq!(
        (s["status"].as_str(), s["stop"].as_str()),
        (Some("aborted"), Some("ValueError: bad gain"))
    );
}

#[test]
fn unwritable_runs_directory_is_an_error_naming_it() {
    let err = HostEpisode::create(
        Path::new("/proc/self/looptime-runs"),
        facts(tempfile::tempdir().unwrap().path()),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("/proc/self/looptime-runs"),
        "{err}"
    );
}
