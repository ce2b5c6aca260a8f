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

use crate::compare::{self, Comparison, GateFamily, GateTest, TestCase, TestInference, Verdict};
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
    /// A gated comparison test that could not have seen the effect the
    /// user cares about ([`GateTest::undecided`]).
    pub undecided: bool,
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
    /// Warnings about the comparison itself that `--strict` trips on
    /// (none for a report): every pair warning but the
    /// [`EXPECTED_IN_CI`] ones.
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

    /// Whether the gate tripped on undecided tests alone (no test worse or
    /// mixed, no warning or empty gate): more rollouts would decide it.
    pub fn only_undecided(&self) -> bool {
        self.tripped()
            && self.failed().all(|c| c.undecided)
            && self.failed().next().is_some()
            && (!self.strict || self.warnings.is_empty())
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
            undecided: false,
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

/// What a compare gate is asked: which tests, at which family-wise error
/// rate, and the effect each must be able to see.
#[derive(Debug, Clone, PartialEq)]
pub struct GateAsk<'a> {
    /// `--gate`: the tests (empty: every test).
    pub tests: &'a [String],
    /// `--alpha`: the gate's family-wise error rate.
    pub alpha: f64,
    /// `--min-effect TEST=VALUE`, in the test's unit as the user gives it
    /// (ms for a metric's test, per 1,000 for a rate's, Hz for loop_hz).
    pub min_effect: &'a [(String, f64)],
}

/// The largest number of rollouts a side [`GateTest::rollouts_to_decide`]
/// looks for.
const MOST_ROLLOUTS: u64 = 1_000;

/// The gate's own family ([`GateFamily`]): the tests `--gate` names (every
/// test without it), Holm-adjusted among themselves at `--alpha`, each
/// with its verdict, its detectable shift at its gate level, and whether
/// it is undecided against the effect the user cares about.
///
/// # Errors
/// A name in `tests` or `min_effect` that is no test of this comparison,
/// with what is wrong and the names it has (a usage error).
pub fn gate_family(c: &Comparison, ask: &GateAsk) -> Result<GateFamily, String> {
    let all = c.tests();
    for g in ask.tests {
        check_name(c, &all, g, "--gate")?;
    }
    for (g, _) in ask.min_effect {
        check_name(c, &all, g, "--min-effect")?;
    }
    let gated: Vec<&TestCase> = all
        .iter()
        .filter(|t| ask.tests.is_empty() || ask.tests.contains(&t.name))
        .collect();
    let ps: Vec<f64> = gated.iter().map(|t| t.p).collect();
    let adjusted = compare::holm(&ps);
    let levels = compare::holm_levels(&ps, ask.alpha);
    let tests = gated
        .iter()
        .enumerate()
        .map(|(i, t)| gate_test(t, adjusted[i], levels[i], gated.len(), ask))
        .collect();
    Ok(GateFamily {
        alpha: ask.alpha,
        named: !ask.tests.is_empty(),
        tests,
    })
}

/// One gated test within the gate's family.
fn gate_test(t: &TestCase, p_holm: f64, level: f64, family: usize, ask: &GateAsk) -> GateTest {
    let (scale, round) = (t.unit.user_scale(), t.unit.round());
    let unit = |x: f64| t.unit.signed(x);
    let floor = t.inference.floor;
    let (direction, why) = compare::judge_shift(
        ask.alpha,
        p_holm,
        t.inference.estimate,
        t.interval,
        floor,
        family,
        &unit,
    );
    let mut at_level = t.inference.clone();
    compare::detectable(&mut at_level, level, floor, round);
    let min_effect = ask
        .min_effect
        .iter()
        .find(|(n, _)| *n == t.name)
        .map(|(_, v)| v * scale);
    // A slower rate is worse: a Hz test's direction is reversed.
    let verdict = compare::verdict_of(direction * t.unit.worse_sign() as i32);
    let undecided =
        verdict == Verdict::NoClearChange && min_effect.is_some_and(|m| at_level.detectable > m);
    GateTest {
        name: t.name.clone(),
        p_holm,
        verdict,
        why,
        level,
        detectable: at_level.detectable,
        min_effect: min_effect.map(round),
        undecided,
        rollouts_to_decide: min_effect
            .filter(|_| undecided)
            .and_then(|m| rollouts_to_decide(&at_level, level, m)),
    }
}

/// About how many rollouts a side would bring a test's detectable shift
/// down to `min_effect` at the spread it measured: the smallest `R'` above
/// today's smaller side `R` with `(t_{1 − level/2}(ν') + t_{0.8}(ν')) ·
/// se · √(R / R') ≤ min_effect`, `ν' = 2R' − 2` (the run-level test's
/// degrees of freedom at equal spreads). `None` when `min_effect` is below
/// the noise floor (never called) or no `R'` up to [`MOST_ROLLOUTS`] does.
/// Approximate: the spread rests on a few degrees of freedom.
fn rollouts_to_decide(t: &TestInference, level: f64, min_effect: f64) -> Option<u64> {
    if min_effect < t.floor || t.se <= 0.0 {
        return None;
    }
    let r = t.rollouts[0].min(t.rollouts[1]).max(1) as f64;
    (r as u64 + 1..=MOST_ROLLOUTS).find(|&n| {
        let nu = 2.0 * n as f64 - 2.0;
        let k = crate::compare::student::quantile(1.0 - level / 2.0, nu)
            + crate::compare::student::quantile(0.8, nu);
        k * t.se * (r / n as f64).sqrt() <= min_effect
    })
}

/// `name` is a test of this comparison, or the usage error saying why not:
/// a p99 test whose metric exists but has fewer than
/// [`MIN_SAMPLES_FOR_P99_VERDICT`](crate::compare::MIN_SAMPLES_FOR_P99_VERDICT)
/// samples on a side is named as such, with the counts.
fn check_name(c: &Comparison, all: &[TestCase], name: &str, flag: &str) -> Result<(), String> {
    if all.iter().any(|t| t.name == name) {
        return Ok(());
    }
    if let Some(base) = name.strip_suffix(":p99") {
        let metric = c.metrics.iter().find(|m| {
            let full = match &m.stage {
                Some(s) => format!("{}/{}/{s}", m.phase, m.metric),
                None => format!("{}/{}", m.phase, m.metric),
            };
            full == base
        });
        if let Some(m) = metric {
            return Err(format!(
                "{flag} {name}: the test exists, but was not made: a p99 test needs at least {} samples a side (so that 10 lie above the p99), and this comparison has {} in A and {} in B; record longer or more rollouts (configs/ci.toml gives 1,200 a side at 3 rollouts), or gate {base}:median",
                compare::thousands(crate::compare::MIN_SAMPLES_FOR_P99_VERDICT as u64),
                m.a.count,
                m.b.count
            ));
        }
    }
    // The cycle's CPU time is tested only where both sides measured it.
    if name.contains("/work_cpu:") {
        let why: Vec<&str> = c
            .caveats
            .iter()
            .filter(|x| x.contains("work_cpu"))
            .map(String::as_str)
            .collect();
        return Err(format!(
            "{flag} {name}: the test exists only when both sides record CPU time per cycle (thread_cpu_mode `cycle`, the recorder's default), and this comparison's do not ({}); gate the work's wall time ({}) instead, or record in `cycle` mode",
            if why.is_empty() { "a side has no work_cpu samples".to_string() } else { why.join("; ") },
            name.replace("/work_cpu:", "/work:")
        ));
    }
    // `running/loop_hz:rate`: the Hz tests carry no suffix.
    if let Some((base, _)) = name.rsplit_once(':') {
        if all.iter().any(|t| t.name == base) {
            return Err(format!(
                "{flag} {name} names no test of this comparison; the test is {base} (a loop or command rate in Hz has no `:median`, `:p99` or `:rate` suffix)"
            ));
        }
    }
    let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
    Err(format!(
        "{flag} {name} names no test of this comparison; its tests are: {}",
        names.join(", ")
    ))
}

/// What a gated test that reads "no clear change" could have seen, in the
/// gate's words: its detectable shift at its gate level, and for an
/// undecided one the effect it missed and the rollouts that would decide.
pub fn gate_words(t: &TestCase, g: &GateTest) -> String {
    let unit = |x: f64| t.unit.size(x);
    let seen = TestCase {
        detectable: unit(g.detectable),
        ..t.clone()
    }
    .could_have_seen();
    if !g.undecided {
        return seen;
    }
    let min_effect = g.min_effect.unwrap_or(0.0);
    let decide = match g.rollouts_to_decide {
        Some(n) => format!("about {n} rollouts a side would decide it at the measured spread"),
        None if min_effect < t.inference.floor => {
            "no number of rollouts would: the effect is below the test's noise floor".into()
        }
        None => format!("more than {MOST_ROLLOUTS} rollouts a side would be needed"),
    };
    format!(
        "undecided: {seen}, more than the {} it must see (--min-effect); {decide}",
        unit(min_effect)
    )
}

/// The pair warnings every CI pair is expected to show, which `--strict`
/// does not trip on (docs/ci.md, `--strict`): an A/A pair, where no config
/// setting differs, and a change's own source (its source hash differs).
pub const EXPECTED_IN_CI: &[&str] = &[
    "no config setting differs",
    "the two runs were built from different source",
];

/// The comparison's gate: one case per test, the gated ones judged by the
/// gate's family ([`Comparison::gate`], which [`gate_family`] fills; the
/// comparison's own verdicts when it is absent).
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
    for g in gate {
        check_name(c, &all, g, "--gate")?;
    }
    let mixed = fail_on == Some("mixed");
    let on_undecided = fail_on == Some("undecided");
    let cases = all
        .into_iter()
        .map(|t| {
            let listed = gate.is_empty() || gate.contains(&t.name);
            let own = c
                .gate
                .as_ref()
                .and_then(|f| f.tests.iter().find(|g| g.name == t.name));
            let (verdict, p_holm, why) = match own {
                Some(g) => (g.verdict, g.p_holm, g.why.clone()),
                None => (t.verdict, t.p_holm, t.why.clone()),
            };
            let undecided = own.is_some_and(|g| g.undecided);
            let trips = verdict == Verdict::Worse
                || (mixed && t.metric_verdict == Verdict::Mixed)
                || (on_undecided && undecided);
            // The reason names the adjusted p itself unless it is about the
            // interval or the floor: say it once.
            let head = if why.contains("Holm-adjusted p") {
                format!("{}: {} ({why})", verdict.word(), t.shift)
            } else {
                format!(
                    "{}: {}, Holm-adjusted p {:.4} ({why})",
                    verdict.word(),
                    t.shift,
                    p_holm
                )
            };
            GateCase {
                outcome: if !listed {
                    "not gated"
                } else if fail_on.is_some() && trips {
                    "failed"
                } else {
                    "passed"
                },
                detail: match (verdict, own) {
                    (Verdict::NoClearChange, Some(g)) => format!("{head}; {}", gate_words(&t, g)),
                    (Verdict::NoClearChange, None) => format!("{head}; {}", t.could_have_seen()),
                    _ => head,
                },
                undecided,
                name: t.name,
            }
        })
        .collect();
    Ok(GateResult {
        subject: format!("compare {} vs {}", c.a, c.b),
        fail_on: fail_on.map(str::to_string),
        cases,
        warnings: c
            .warnings
            .iter()
            .filter(|w| !EXPECTED_IN_CI.iter().any(|e| w.starts_with(e)))
            .cloned()
            .collect(),
        strict,
        allow_empty,
    })
}
