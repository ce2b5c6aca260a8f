//! Tests of `metrics::summary`: each check against its thresholds, the
//! judged card's words, exact shares.

use super::*;
use crate::metrics::report::{Dist, StageBlame};

const P: u64 = 10_000_000;

fn dist(p99: i64, max: i64) -> Dist {
    Dist {
        count: 1000,
        mean_ns: P as f64,
        min_ns: P as i64 - 1000,
        p50_ns: P as i64,
        p90_ns: P as i64,
        p99_ns: p99,
        p999_ns: max,
        max_ns: max,
    }
}

/// A phase of 1,000 cycles at `hz` with period p99 `p99`, and
/// `overruns` overruns.
fn phase(name: &str, hz: f64, p99: i64, overruns: u64) -> PhaseReport {
    PhaseReport {
        phase: name.into(),
        segments: 1,
        cycles: 1000,
        loop_hz: Some(hz),
        period: Some(dist(p99, p99 + 500_000)),
        work: Some(dist(3_000_000, 4_000_000)),
        sleep_overshoot: None,
        deadline_lag: None,
        work_cpu: None,
        off_cpu: None,
        off_cpu_share: None,
        spin: None,
        overruns,
        skipped: 0,
        commands: 0,
        command_hz: None,
    }
}

const PACED: Pace = Pace::Paced {
    nominal_ns: P,
    effective_ns: P,
    rtf: 1.0,
};

fn late(phase: &str, late: u64, over: u64, wake: u64) -> Lateness {
    Lateness {
        phase: phase.into(),
        budget_ns: P,
        late_start_threshold_ns: Some(P / 10),
        judged: 999,
        late,
        work_over_budget: over,
        late_wake: wake,
        unattributed: 0,
        stages: vec![StageBlame {
            path: "executor".into(),
            cycles: over,
            share: 1.0,
        }],
        budget_declared: false,
        tolerance_declared: false,
    }
}

fn state(c: &PhaseCard, check: &str) -> CardState {
    c.checks.iter().find(|x| x.check == check).unwrap().state
}

#[test]
fn each_check_against_its_thresholds() {
    let t = Thresholds::default();
    // 99.6 Hz against 100 Hz: −0.4 %, pass; 99.0: −1 %, warn; 97: fail.
    // p99 10.9 ms: +9 %, pass; 12 ms: +20 %, warn; 13 ms: +30 %, fail.
    // Overruns: 0 pass; 1 of 1,000 = 0.1 %, warn; 2 = 0.2 %, fail.
    let cases = [
        (99.6, 10_900_000, 0, [CardState::Pass; 3]),
        (
            99.0,
            12_000_000,
            1,
            [CardState::Warn, CardState::Warn, CardState::Warn],
        ),
        (
            97.0,
            13_000_000,
            2,
            [CardState::Fail, CardState::Fail, CardState::Fail],
        ),
    ];
    for (hz, p99, overruns, want) in cases {
        let c = &cards(
            &[phase("running", hz, p99, overruns)],
            PACED,
            None,
            None,
            None,
            None,
            &t,
        )[0];
        let got = [
            state(c, "rate"),
            state(c, "p99_period"),
            state(c, "overruns"),
        ];
        assert_eq!(got, want, "{hz} Hz, p99 {p99}, {overruns} overruns");
        assert_eq!(c.state, want[0]);
    }
    // The card is the worst of its checks: one failing check fails it.
    let c = &cards(
        &[phase("running", 100.0, 10_000_000, 5)],
        PACED,
        None,
        None,
        None,
        None,
        &t,
    )[0];
    assert_eq!(
        (state(c, "rate"), state(c, "overruns"), c.state),
        (CardState::Pass, CardState::Fail, CardState::Fail)
    );
    // The values: (99.6 − 100) / 100 × 100 = −0.4; (10.9 − 10) / 10 ×
    // 100 = +9.
    let c = &cards(
        &[phase("running", 99.6, 10_900_000, 0)],
        PACED,
        None,
        None,
        None,
        None,
        &t,
    )[0];
    assert_eq!(c.checks[0].value, -0.4);
    assert_eq!(c.checks[1].value, 9.0);
    assert_eq!(c.effective_hz, Some(100.0));
}

#[test]
fn thresholds_change_states_not_figures() {
    let loose = Thresholds {
        rate_pass_pct: 5.0,
        rate_warn_pct: 10.0,
        overruns_pass: 3,
        ..Thresholds::default()
    };
    let p = [phase("running", 97.0, 10_000_000, 2)];
    let strict = &cards(&p, PACED, None, None, None, None, &Thresholds::default())[0];
    let relaxed = &cards(&p, PACED, None, None, None, None, &loose)[0];
    assert_eq!(strict.state, CardState::Fail);
    assert_eq!(relaxed.state, CardState::Pass);
    assert_eq!(strict.loop_hz, relaxed.loop_hz);
    assert_eq!(strict.checks[0].value, relaxed.checks[0].value);
}

#[test]
fn an_unpaced_run_is_not_judged_and_the_diagnosis_is_on_one_card() {
    let p = [
        phase("warmup", 99.0, 10_000_000, 0),
        phase("running", 100.0, 10_000_000, 40),
    ];
    for pace in [Pace::Uncapped, Pace::Unknown] {
        for c in cards(&p, pace, None, None, None, None, &Thresholds::default()) {
            assert_eq!(c.state, CardState::NotJudged);
            assert!(c.checks.is_empty());
            assert!(c.words.contains("NOT JUDGED"), "{}", c.words);
        }
    }
    // The work made 40 cycles late, executor dominating.
    let l = late("running", 40, 35, 5);
    let c = cards(
        &p,
        PACED,
        Some(&l),
        None,
        None,
        None,
        &Thresholds::default(),
    );
    assert!(c[0].diagnosis.is_none());
    // The warmup card keeps its checks but is not judged: grey, never a
    // red FAIL beside "not judged".
    assert_eq!(c[0].state, CardState::NotJudged);
    assert!(!c[0].checks.is_empty());
    assert!(
        c[0].words.starts_with("warmup: NOT JUDGED")
            && c[0].words.ends_with(
                "not judged: only the running phase is judged (a report judges one phase: running, else the one with the most cycles)"
            ),
        "{}",
        c[0].words
    );
    let d = c[1].diagnosis.as_ref().unwrap();
    assert_eq!(
        (d.verdict.as_str(), d.stage.as_deref(), d.late),
        ("the work itself", Some("executor"), 40)
    );
    assert!(c[1].words.starts_with("running: FAIL"), "{}", c[1].words);
    assert!(c[1]
        .words
        .contains("the work itself (40 of 999 cycles late), executor"));
}

#[test]
fn the_judged_cards_words_and_diagnosis_say_one_thing() {
    let p = [
        phase("warmup", 99.0, 10_000_000, 0),
        phase("running", 100.0, 10_000_000, 40),
    ];
    // More late wakes than over-budget work: scheduling, no stage.
    let c = cards(
        &p,
        PACED,
        Some(&late("running", 40, 5, 35)),
        None,
        None,
        None,
        &Thresholds::default(),
    );
    let d = c[1].diagnosis.as_ref().unwrap();
    assert_eq!(
        (d.verdict.as_str(), d.stage.as_deref()),
        ("scheduling", None)
    );
    let c = cards(
        &p,
        PACED,
        Some(&late("running", 0, 0, 0)),
        None,
        None,
        None,
        &Thresholds::default(),
    );
    assert_eq!(c[1].diagnosis.as_ref().unwrap().verdict, "on rate");
    // running fails on its 40 overruns with no cycle late: the words
    // name the check, not "on rate".
    assert!(
        c[1].words
            .contains("no cycle late: the overruns check flags it"),
        "{}",
        c[1].words
    );
    // A passing card with one late cycle says it is within the
    // thresholds, not "diagnosis: scheduling".
    let ok = [phase("running", 100.0, 10_000_000, 0)];
    let c = cards(
        &ok,
        PACED,
        Some(&late("running", 1, 0, 1)),
        None,
        None,
        None,
        &Thresholds::default(),
    );
    assert_eq!(c[0].state, CardState::Pass);
    assert!(
        c[0].words
            .contains("1 of 999 cycles late (scheduling), within the thresholds")
            && !c[0].words.contains("diagnosis: scheduling"),
        "{}",
        c[0].words
    );
}

#[test]
fn the_worst_stale_share_of_a_phase_is_a_check_with_its_own_thresholds() {
    use crate::metrics::report::{SourceAge, SourcePhase};
    // A source with `stale` of 1,000 aged uses over its limit (none:
    // no limit declared).
    let src = |name: &str, stale: Option<u64>| SourceAge {
        source: name.into(),
        clock: "host_monotonic".into(),
        max_age_ns: stale.map(|_| 50_000_000),
        not_comparable: None,
        phases: vec![SourcePhase {
            phase: "running".into(),
            uses: 1000,
            age_at_use: Some(dist(1_000_000, 2_000_000)),
            age_at_command: None,
            stale,
            stale_share: stale.map(|s| r4(s as f64 / 1000.0)),
            stamped_in_future: 0,
            reused: 0,
            skipped: 0,
            seq_resets: 0,
        }],
        production: None,
    };
    // Camera 0.5 % stale, state without a limit: the check is 0.5 %,
    // over the 0.1 % pass and within the 1 % warn threshold.
    let age = DataAgeReport {
        samples_dropped: 0,
        sources: vec![src("camera", Some(5)), src("state", None)],
    };
    let p = [phase("running", 100.0, 10_000_000, 0)];
    let c = &cards(
        &p,
        PACED,
        None,
        Some(&age),
        None,
        None,
        &Thresholds::default(),
    )[0];
    let check = c.checks.iter().find(|c| c.check == "stale_uses").unwrap();
    assert_eq!((check.value, check.state), (0.5, CardState::Warn));
    assert_eq!(c.state, CardState::Warn);
    assert!(
        c.words.contains("0.50 % stale data-age uses"),
        "{}",
        c.words
    );
    let loose = Thresholds {
        stale_pass_pct: 1.0,
        stale_warn_pct: 2.0,
        ..Thresholds::default()
    };
    let c = &cards(&p, PACED, None, Some(&age), None, None, &loose)[0];
    assert_eq!(c.state, CardState::Pass);
    // Without data age, no such check.
    let c = &cards(&p, PACED, None, None, None, None, &Thresholds::default())[0];
    assert!(c.checks.iter().all(|c| c.check != "stale_uses"));
}

// long-fn: one hand-built report per check (stale uses, late answers), each value derived in its comments
#[test]
fn a_share_just_over_a_threshold_is_judged_exactly_and_printed_rounded() {
    use crate::metrics::report::{Bursts, InputPhase, SourceAge, SourcePhase};
    // 1 stale use of 999 aged uses: 0.1001 %, printed 0.1 (10⁻⁴ of a
    // %: 0.1001), over the 0.1 % pass threshold: warn, not pass.
    let mut d = dist(1_000_000, 2_000_000);
    d.count = 999;
    let age = DataAgeReport {
        samples_dropped: 0,
        sources: vec![SourceAge {
            source: "camera".into(),
            clock: "host_monotonic".into(),
            max_age_ns: Some(50_000_000),
            not_comparable: None,
            phases: vec![SourcePhase {
                phase: "running".into(),
                uses: 999,
                age_at_use: Some(d),
                age_at_command: None,
                stale: Some(1),
                stale_share: Some(r4(1.0 / 999.0)),
                stamped_in_future: 0,
                reused: 0,
                skipped: 0,
                seq_resets: 0,
            }],
            production: None,
        }],
    };
    let p = [phase("running", 100.0, 10_000_000, 0)];
    let c = &cards(
        &p,
        PACED,
        None,
        Some(&age),
        None,
        None,
        &Thresholds::default(),
    )[0];
    let check = c.checks.iter().find(|c| c.check == "stale_uses").unwrap();
    assert_eq!((check.value, check.state), (0.1001, CardState::Warn));
    // 1 late answer of 999 answered (1,000 cycles, 1 unanswered):
    // 0.1001 % late, over the 0.1 % pass threshold: warn. The input
    // report's own `late_share` rounds to 0.001 (0.1 %), which the
    // check must not judge by.
    let input = InputPacedReport {
        phases: vec![InputPhase {
            phase: "running".into(),
            cycles: 1000,
            deadline_cycles: 0,
            period_ns: Some(P),
            period_from: "nominal".into(),
            arrival_period: None,
            arrival_hz: None,
            arrival_rate_error_pct: None,
            budget_ns: Some(P),
            budget_from: "period".into(),
            answer_latency: None,
            unanswered: 1,
            socket_wait: None,
            late_answers: 1,
            late_share: Some(r4(1.0 / 999.0)),
            lost: None,
            gaps: 0,
            gaps_after_late_answer: 0,
            bursts: Bursts::default(),
            success_rate: None,
            verdict: "the loop".into(),
            reason: String::new(),
        }],
    };
    let c = &cards(
        &p,
        PACED,
        None,
        None,
        Some(&input),
        None,
        &Thresholds::default(),
    )[0];
    let check = c.checks.iter().find(|c| c.check == "late_answers").unwrap();
    assert_eq!((check.value, check.state), (0.1001, CardState::Warn));
}
