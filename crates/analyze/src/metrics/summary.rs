//! The first glance: one card per phase that says whether the loop held its
//! rate, in a state (pass, warn, fail, or not judged) and in words, from
//! documented thresholds a user may change (docs/metrics.md, Summary).
//! Computed here, from the phase reports, the pace and the diagnosis, so
//! the JSON, the text report and the HTML band all say the same. The card
//! types are the report's (`metrics::report`), as every other figure's.

use super::report::{
    BudgetPhase, BudgetReport, CardCheck, CardDiagnosis, CardState, DataAgeReport,
    InputPacedReport, InputPhase, Lateness, Pace, PhaseCard, PhaseReport, Thresholds,
};
use super::table::r4;

fn state_of(distance: f64, pass: f64, warn: f64) -> CardState {
    if distance <= pass {
        CardState::Pass
    } else if distance <= warn {
        CardState::Warn
    } else {
        CardState::Fail
    }
}

fn ms(ns: i64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// `v` % with a sign and `decimals` decimals; a value that rounds to 0 is
/// `+0.0`, never `-0.0`.
fn signed_pct(v: f64, decimals: i32) -> String {
    let scale = 10f64.powi(decimals);
    let r = (v * scale).round() / scale + 0.0;
    format!("{r:+.*} %", decimals as usize)
}

/// `n` and `one`, plural unless `n` is 1.
fn count(n: u64, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

/// The cards of `phases`, judged against `pace` by `t`; the judged phase's
/// card carries the diagnosis of `late`. With data age, each phase whose
/// uses of a source with a staleness limit have ages gets a `stale_uses`
/// check. A phase mostly released by inputs gets a `late_answers` check,
/// and its diagnosis is the input-paced verdict.
pub fn cards(
    phases: &[PhaseReport],
    pace: Pace,
    late: Option<&Lateness>,
    age: Option<&DataAgeReport>,
    input: Option<&InputPacedReport>,
    budget: Option<&BudgetReport>,
    t: &Thresholds,
) -> Vec<PhaseCard> {
    phases
        .iter()
        .map(|p| {
            let inp = input
                .and_then(|i| i.phases.iter().find(|x| x.phase == p.phase))
                .filter(|x| x.cycles >= x.deadline_cycles);
            let b = budget.and_then(|b| b.phases.iter().find(|x| x.phase == p.phase));
            card(p, pace, late, stale_pct(age, &p.phase), (inp, b), t)
        })
        .collect()
}

/// The largest stale share (in %) among the sources with a staleness limit
/// and ages in `phase`, exact (`stale / ages × 100`): a check judges the
/// exact share and prints it rounded to 10⁻⁴.
fn stale_pct(age: Option<&DataAgeReport>, phase: &str) -> Option<f64> {
    age?.sources
        .iter()
        .flat_map(|s| &s.phases)
        .filter(|p| p.phase == phase)
        .filter_map(|p| {
            let ages = p.age_at_use.as_ref()?.count;
            Some(p.stale? as f64 / ages.max(1) as f64 * 100.0)
        })
        .reduce(f64::max)
}

fn card(
    p: &PhaseReport,
    pace: Pace,
    late: Option<&Lateness>,
    stale: Option<f64>,
    (input, budget): (Option<&InputPhase>, Option<&BudgetPhase>),
    t: &Thresholds,
) -> PhaseCard {
    let effective = match pace {
        Pace::Paced { effective_ns, .. } => Some(effective_ns),
        _ => None,
    };
    let checks = effective.map_or_else(Vec::new, |eff| checks(p, eff, stale, (input, budget), t));
    // One phase is judged (the diagnosis's: the one with the most
    // cycles); every other phase's card keeps its figures and checks but
    // is not judged, so no warmup card turns red beside "not judged".
    let other_judged = late.is_some_and(|l| l.phase != p.phase);
    let state = if checks.is_empty() || other_judged {
        CardState::NotJudged
    } else {
        checks
            .iter()
            .map(|c| c.state)
            .max()
            .unwrap_or(CardState::NotJudged)
    };
    let diagnosis = late
        .filter(|l| l.phase == p.phase)
        .map(|l| card_diagnosis(l, input));
    let effective_hz = effective.map(|e| r4(1e9 / e as f64));
    let words = words(
        p,
        state,
        effective_hz,
        &checks,
        diagnosis.as_ref(),
        late,
        input,
    );
    PhaseCard {
        phase: p.phase.clone(),
        state,
        loop_hz: p.loop_hz,
        effective_hz,
        period_p99_ns: p.period.as_ref().map(|d| d.p99_ns),
        period_max_ns: p.period.as_ref().map(|d| d.max_ns),
        overruns: p.overruns,
        skipped: p.skipped,
        checks,
        diagnosis,
        words,
    }
}

/// The checks of a phase judged against the effective period `eff`.
fn checks(
    p: &PhaseReport,
    eff: u64,
    stale: Option<f64>,
    (input, budget): (Option<&InputPhase>, Option<&BudgetPhase>),
    t: &Thresholds,
) -> Vec<CardCheck> {
    let mut checks = Vec::new();
    let mut push = |check: &str, state: CardState, value: f64| {
        checks.push(CardCheck {
            check: check.into(),
            state,
            value,
        })
    };
    // Each check judges its exact figure and prints it rounded to 10⁻⁴, so
    // a share just over a threshold never passes by rounding onto it.
    if let Some(hz) = p.loop_hz {
        let eff_hz = 1e9 / eff as f64;
        let d = (hz - eff_hz) / eff_hz * 100.0;
        push(
            "rate",
            state_of(d.abs(), t.rate_pass_pct, t.rate_warn_pct),
            r4(d),
        );
    }
    if let Some(p99) = p.period.as_ref().map(|d| d.p99_ns) {
        let d = (p99 as f64 - eff as f64) / eff as f64 * 100.0;
        push(
            "p99_period",
            state_of(d.abs(), t.p99_pass_pct, t.p99_warn_pct),
            r4(d),
        );
        let share = p.overruns as f64 / p.cycles.max(1) as f64 * 100.0;
        let state = if p.overruns <= t.overruns_pass {
            CardState::Pass
        } else if share <= t.overruns_warn_pct {
            CardState::Warn
        } else {
            CardState::Fail
        };
        push("overruns", state, p.overruns as f64);
    }
    // Staleness is judged beside the rate, never alone: an unpaced phase
    // stays not judged.
    if let Some(pct) = stale {
        push(
            "stale_uses",
            state_of(pct, t.stale_pass_pct, t.stale_warn_pct),
            r4(pct),
        );
    }
    // An input-paced phase is judged on its answers (beside the rate, as
    // staleness): sleep overshoot and deadline lag do not exist there.
    if let Some(i) = input.filter(|i| i.cycles > i.unanswered) {
        let pct = i.late_answers as f64 / (i.cycles - i.unanswered) as f64 * 100.0;
        let state = state_of(pct, t.late_answers_pass_pct, t.late_answers_warn_pct);
        push("late_answers", state, r4(pct));
    }
    // What the runtime declared (a compute budget, a deadline tolerance):
    // judged only on evidence that declares it.
    let declared = budget.map(|b| {
        [
            ("budget_overruns", &b.budget_overruns),
            ("completion_misses", &b.completion_misses),
        ]
    });
    for (check, m) in declared.into_iter().flatten() {
        if let Some(m) = m.as_ref().filter(|m| m.judged > 0) {
            let pct = m.count as f64 / m.judged as f64 * 100.0;
            push(
                check,
                state_of(pct, t.budget_pass_pct, t.budget_warn_pct),
                r4(pct),
            );
        }
    }
    checks
}

/// The judged phase's diagnosis: the input-paced verdict for a phase
/// released by its inputs, else the lateness attribution's.
fn card_diagnosis(l: &Lateness, input: Option<&InputPhase>) -> CardDiagnosis {
    if let Some(i) = input {
        return CardDiagnosis {
            verdict: i.verdict.clone(),
            stage: None,
            late: i.late_answers,
            judged: i.cycles - i.unanswered,
        };
    }
    let (verdict, stage) = if l.late == 0 {
        ("on rate", None)
    } else if l.work_over_budget >= l.late_wake {
        ("the work itself", l.stages.first().map(|s| s.path.clone()))
    } else {
        ("scheduling", None)
    };
    CardDiagnosis {
        verdict: verdict.into(),
        stage,
        late: l.late,
        judged: l.judged,
    }
}

fn words(
    p: &PhaseReport,
    state: CardState,
    effective_hz: Option<f64>,
    checks: &[CardCheck],
    diagnosis: Option<&CardDiagnosis>,
    late: Option<&Lateness>,
    input: Option<&InputPhase>,
) -> String {
    let hz = p
        .loop_hz
        .map_or("no rate".to_string(), |h| format!("{h:.2} Hz"));
    let check = |name: &str| checks.iter().find(|c| c.check == name);
    let rate = match (effective_hz, check("rate")) {
        (Some(e), Some(c)) => format!("{hz} against {e:.2} Hz ({})", signed_pct(c.value, 2)),
        _ => format!("{hz}, no host-time rate to judge against"),
    };
    let p99 = match (p.period.as_ref(), check("p99_period")) {
        (Some(d), Some(c)) => format!(
            ", p99 period {} ({}), max {}",
            ms(d.p99_ns),
            signed_pct(c.value, 1),
            ms(d.max_ns)
        ),
        (Some(d), None) => format!(", p99 period {}, max {}", ms(d.p99_ns), ms(d.max_ns)),
        (None, _) => String::new(),
    };
    // The card's state and the diagnosis say one thing: a passing card
    // with a few late cycles says they are within the thresholds, a
    // flagged card with none late says which check flags it.
    let flagged: Vec<&str> = checks
        .iter()
        .filter(|c| c.state > CardState::Pass)
        .map(|c| c.check.as_str())
        .collect();
    let diag = match (diagnosis, late) {
        (Some(d), _) if input.is_some() => format!(
            "; input-paced, diagnosis: {} ({} of {} answers late)",
            d.verdict, d.late, d.judged
        ),
        (Some(d), _) => {
            let stage = d.stage.as_ref().map_or(String::new(), |s| format!(", {s}"));
            match (state, d.late) {
                (CardState::Pass, 0) => "; diagnosis: on rate".to_string(),
                (CardState::Pass, n) => format!(
                    "; {n} of {} cycles late ({}{stage}), within the thresholds",
                    d.judged, d.verdict
                ),
                (_, 0) => format!(
                    "; no cycle late: the {} check flags it",
                    flagged.join(" and ")
                ),
                (_, n) => format!(
                    "; diagnosis: {} ({n} of {} cycles late){stage}",
                    d.verdict, d.judged
                ),
            }
        }
        (None, Some(l)) => format!(
            "; not judged: only the {} phase is judged (a report judges one phase: running, else the one with the most cycles)",
            l.phase
        ),
        (None, None) => "; not judged: no pace to judge against".to_string(),
    };
    let stale = share_figures(checks);
    format!(
        "{}: {}{} — {rate}{p99}, {}, {} skipped{stale}{diag}",
        p.phase,
        state.word(),
        deciding(state, checks),
        count(p.overruns, "overrun"),
        p.skipped
    )
}

/// The shares a card's checks judge beyond the rate and the period, as its
/// words give them: stale data-age uses, late answers, the declared budget's
/// overruns and completion misses.
fn share_figures(checks: &[CardCheck]) -> String {
    [
        ("stale_uses", "stale data-age uses"),
        ("late_answers", "late answers"),
        ("budget_overruns", "of cycles over the compute budget"),
        ("completion_misses", "completion misses"),
    ]
    .iter()
    .filter_map(|(name, words)| {
        let c = checks.iter().find(|c| c.check == *name)?;
        Some(format!(", {:.2} % {words}", c.value))
    })
    .collect()
}

/// The checks that set a flagged card's state, named beside it (`FAIL
/// (over the compute budget 100.00 %)`), so that every surface that
/// prints the card's words (the text, the gate's message, the Markdown,
/// the JUnit failure) says what failed; empty for a passing or not
/// judged card.
fn deciding(state: CardState, checks: &[CardCheck]) -> String {
    if !matches!(state, CardState::Warn | CardState::Fail) {
        return String::new();
    }
    let named: Vec<String> = checks
        .iter()
        .filter(|c| c.state == state)
        .map(|c| match c.check.as_str() {
            "rate" => format!("rate {}", signed_pct(c.value, 2)),
            "p99_period" => format!("p99 period {}", signed_pct(c.value, 1)),
            "overruns" => count(c.value as u64, "overrun"),
            "stale_uses" => format!("stale uses {:.2} %", c.value),
            "late_answers" => format!("late answers {:.2} %", c.value),
            "budget_overruns" => format!("over the compute budget {:.2} %", c.value),
            "completion_misses" => format!("completion misses {:.2} %", c.value),
            other => format!("{other} {}", c.value),
        })
        .collect();
    format!(" ({})", named.join(", "))
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
