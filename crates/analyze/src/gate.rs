//! The timing gate for CI (docs/ci.md): whether a report or a comparison
//! trips `--fail-on`, test case by test case, read from the verdicts as
//! computed (never recomputed, and Holm never re-run over a subset).
//!
//! * A report's cases are its summary cards: a judged card trips at the
//!   state named (`warn`: warn or fail; `fail`: fail); a card that is not
//!   judged is `not judged` and never trips.
//! * A comparison's cases are its tests, each metric's median test and
//!   (when tested) its p99 test, `PHASE/METRIC[/STAGE]:median|p99`, and each
//!   rate, `PHASE/RATE:rate`; `--gate` keeps the ones listed. A case trips
//!   on `worse` (or on `worse` or `mixed`, with `--fail-on mixed`, where a
//!   metric's own verdict is mixed); a test `--gate` does not list is
//!   `not gated`. A warning about the pair itself (a different host, too
//!   few rollouts) never trips it, unless `--strict`.
//! * A gate that checked nothing (every case not judged or not gated, or
//!   no case at all) says so and trips, unless `--allow-empty-gate`: a
//!   green build must mean that something was checked.

use crate::compare::{Comparison, Verdict};
use crate::metrics::{CardState, Report};

/// One test case of a gate.
#[derive(Debug, Clone, PartialEq)]
pub struct GateCase {
    /// Its name (`running card`, `running/work:p99`).
    pub name: String,
    /// `passed`, `failed`, `not judged` (a report's card) or `not gated`
    /// (a comparison's test that `--gate` does not list).
    pub outcome: &'static str,
    /// The figure, interval and threshold in words.
    pub detail: String,
}

/// What a gate found.
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    /// What it gated: `report EPISODE` or `compare A vs B`.
    pub subject: String,
    /// The `--fail-on` level, when one was given.
    pub fail_on: Option<String>,
    /// Its cases, in the report's order.
    pub cases: Vec<GateCase>,
    /// Warnings about the comparison itself (none for a report).
    pub warnings: Vec<String>,
    /// Whether `--strict` makes those warnings trip it.
    pub strict: bool,
    /// Whether `--allow-empty-gate` lets a gate that checked nothing pass.
    pub allow_empty: bool,
}

impl GateResult {
    /// The failed cases.
    pub fn failed(&self) -> impl Iterator<Item = &GateCase> {
        self.cases.iter().filter(|c| c.outcome == "failed")
    }

    /// The cases checked: passed or failed (not `not judged`, not `not
    /// gated`).
    pub fn checked(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| matches!(c.outcome, "passed" | "failed"))
            .count()
    }

    /// Whether the gate (given `--fail-on`) checked nothing.
    pub fn checked_nothing(&self) -> bool {
        self.fail_on.is_some() && self.checked() == 0
    }

    /// Whether the gate trips: a failed case, (strict) a warning, or
    /// nothing checked (unless allowed); never without `--fail-on`.
    pub fn tripped(&self) -> bool {
        self.fail_on.is_some()
            && (self.failed().next().is_some()
                || (self.strict && !self.warnings.is_empty())
                || (self.checked_nothing() && !self.allow_empty))
    }
}

/// The report's gate: one case per card.
pub fn report_gate(r: &Report, fail_on: Option<&str>, allow_empty: bool) -> GateResult {
    let level = match fail_on {
        Some("warn") => Some(CardState::Warn),
        Some(_) => Some(CardState::Fail),
        None => None,
    };
    let cases = r
        .summary
        .iter()
        .map(|c| GateCase {
            name: format!("{} card", c.phase),
            outcome: if c.state == CardState::NotJudged {
                "not judged"
            } else if level.is_some_and(|l| c.state >= l) {
                "failed"
            } else {
                "passed"
            },
            detail: c.words.clone(),
        })
        .collect();
    GateResult {
        subject: format!("report {}", r.episode),
        fail_on: fail_on.map(str::to_string),
        cases,
        warnings: Vec::new(),
        strict: false,
        allow_empty,
    }
}

/// The comparison's gate: one case per test (those `gate` lists, or all).
///
/// # Errors
/// A name in `gate` that is no test of this comparison, with the names it
/// has (a usage error).
pub fn compare_gate(
    c: &Comparison,
    fail_on: Option<&str>,
    gate: &[String],
    strict: bool,
    allow_empty: bool,
) -> Result<GateResult, String> {
    let all = c.tests();
    if let Some(unknown) = gate.iter().find(|g| !all.iter().any(|t| &t.name == *g)) {
        let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        return Err(format!(
            "--gate {unknown} names no test of this comparison; its tests are: {}",
            names.join(", ")
        ));
    }
    let mixed = fail_on == Some("mixed");
    let cases = all
        .into_iter()
        .map(|t| {
            let listed = gate.is_empty() || gate.contains(&t.name);
            let trips =
                t.verdict == Verdict::Worse || (mixed && t.metric_verdict == Verdict::Mixed);
            GateCase {
                outcome: if !listed {
                    "not gated"
                } else if fail_on.is_some() && trips {
                    "failed"
                } else {
                    "passed"
                },
                detail: if t.verdict == Verdict::NoClearChange {
                    format!(
                        "{}: {}, Holm-adjusted p {:.4} ({}); {}",
                        t.verdict.word(),
                        t.shift,
                        t.p_holm,
                        t.why,
                        t.could_have_seen()
                    )
                } else {
                    format!(
                        "{}: {}, Holm-adjusted p {:.4} ({})",
                        t.verdict.word(),
                        t.shift,
                        t.p_holm,
                        t.why
                    )
                },
                name: t.name,
            }
        })
        .collect();
    Ok(GateResult {
        subject: format!("compare {} vs {}", c.a, c.b),
        fail_on: fail_on.map(str::to_string),
        cases,
        warnings: c.warnings.clone(),
        strict,
        allow_empty,
    })
}
