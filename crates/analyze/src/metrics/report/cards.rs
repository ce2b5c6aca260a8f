//! The first glance's types (computed in `metrics::summary`): a card per
//! phase, its checks and states, the thresholds they are judged by, and
//! the diagnosis the judged card carries.

use serde::{Deserialize, Serialize};

/// A card's or a check's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardState {
    /// Every check within its pass threshold.
    Pass,
    /// A check beyond its pass threshold, within its warn threshold.
    Warn,
    /// A check beyond its warn threshold.
    Fail,
    /// No host-time period to judge against (uncapped, or no nominal
    /// period), or too few cycles.
    NotJudged,
}

impl CardState {
    /// The word the text and the HTML print.
    pub fn word(self) -> &'static str {
        match self {
            CardState::Pass => "PASS",
            CardState::Warn => "WARN",
            CardState::Fail => "FAIL",
            CardState::NotJudged => "NOT JUDGED",
        }
    }
}

/// The thresholds the states are judged by; `--pass-*` and `--warn-*`
/// change them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Loop Hz within this many % of the effective rate passes…
    pub rate_pass_pct: f64,
    /// …within this many % warns; beyond, fails.
    pub rate_warn_pct: f64,
    /// p99 period within this many % of the effective period passes…
    pub p99_pass_pct: f64,
    /// …within this many % warns; beyond, fails.
    pub p99_warn_pct: f64,
    /// At most this many overruns pass…
    pub overruns_pass: u64,
    /// …overruns in at most this % of the phase's cycles warn; more fail.
    pub overruns_warn_pct: f64,
    /// Stale uses of a data-age source (age over its `max_age_ns`) in at
    /// most this % of its uses pass…
    #[serde(default = "default_stale_pass")]
    pub stale_pass_pct: f64,
    /// …in at most this % warn; more fail.
    #[serde(default = "default_stale_warn")]
    pub stale_warn_pct: f64,
    /// Late answers of an input-paced phase (latency over the answer
    /// budget) in at most this % of its answers pass…
    #[serde(default = "default_late_answers_pass")]
    pub late_answers_pass_pct: f64,
    /// …in at most this % warn; more fail.
    #[serde(default = "default_late_answers_warn")]
    pub late_answers_warn_pct: f64,
    /// Budget overruns and completion misses (when the evidence declares a
    /// compute budget or a deadline tolerance) in at most this % of the
    /// judged cycles pass… (not in the JSON: only evidence that declares
    /// them is judged by them, and every other report stays as it was).
    #[serde(default = "default_budget_pass", skip_serializing)]
    pub budget_pass_pct: f64,
    /// …in at most this % warn; more fail.
    #[serde(default = "default_budget_warn", skip_serializing)]
    pub budget_warn_pct: f64,
}

fn default_budget_pass() -> f64 {
    Thresholds::default().budget_pass_pct
}

fn default_budget_warn() -> f64 {
    Thresholds::default().budget_warn_pct
}

fn default_late_answers_pass() -> f64 {
    Thresholds::default().late_answers_pass_pct
}

fn default_late_answers_warn() -> f64 {
    Thresholds::default().late_answers_warn_pct
}

fn default_stale_pass() -> f64 {
    Thresholds::default().stale_pass_pct
}

fn default_stale_warn() -> f64 {
    Thresholds::default().stale_warn_pct
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            rate_pass_pct: 0.5,
            rate_warn_pct: 2.0,
            p99_pass_pct: 10.0,
            p99_warn_pct: 25.0,
            overruns_pass: 0,
            overruns_warn_pct: 0.1,
            stale_pass_pct: 0.1,
            stale_warn_pct: 1.0,
            late_answers_pass_pct: 0.1,
            late_answers_warn_pct: 1.0,
            budget_pass_pct: 0.1,
            budget_warn_pct: 1.0,
        }
    }
}

/// One judged figure of a card.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CardCheck {
    /// `rate`, `p99_period`, `overruns`, `stale_uses` or `late_answers`.
    pub check: String,
    /// Its state.
    pub state: CardState,
    /// The figure judged: the loop rate's and the p99 period's distance
    /// from the effective rate and period, in % (signed), the overrun
    /// count, the largest stale share of the phase's data-age sources, in
    /// %, or the share of late answers of an input-paced phase, in %.
    pub value: f64,
}

impl CardCheck {
    /// The check in words, as every view shows it: what is judged, the
    /// figure and its state (`rate −3.23 % from the effective rate: FAIL`).
    pub fn words(&self) -> String {
        let what = match self.check.as_str() {
            "rate" => format!("rate {:+.2} % from the effective rate", self.value),
            "p99_period" => format!("p99 period {:+.1} % from the effective period", self.value),
            "overruns" => {
                let n = self.value as u64;
                format!("{n} overrun{}", if n == 1 { "" } else { "s" })
            }
            "stale_uses" => format!("{:.2} % stale data-age uses", self.value),
            "late_answers" => format!("{:.2} % late answers", self.value),
            "budget_overruns" => format!("{:.2} % over the compute budget", self.value),
            "completion_misses" => format!("{:.2} % completion misses", self.value),
            other => format!("{other} {}", self.value),
        };
        format!("{what}: {}", self.state.word())
    }
}

/// The diagnosis as the judged phase's card carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CardDiagnosis {
    /// `on rate`, `the work itself` or `scheduling`.
    pub verdict: String,
    /// The stage that dominated the over-budget cycles, when the work did.
    pub stage: Option<String>,
    /// Late cycles, of `judged`.
    pub late: u64,
    /// Cycles judged.
    pub judged: u64,
}

/// One phase's card.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseCard {
    /// The phase.
    pub phase: String,
    /// The worst of its checks' states; `not_judged` without a pace.
    pub state: CardState,
    /// Loop Hz.
    pub loop_hz: Option<f64>,
    /// The effective rate, `1e9 / effective period`, where the effective
    /// period is the nominal period / rtf (so the rate is the nominal rate
    /// × rtf); absent when not paced.
    pub effective_hz: Option<f64>,
    /// p99 period.
    pub period_p99_ns: Option<i64>,
    /// Longest period.
    pub period_max_ns: Option<i64>,
    /// Overruns.
    pub overruns: u64,
    /// Release points skipped.
    pub skipped: u64,
    /// The judged figures.
    pub checks: Vec<CardCheck>,
    /// The diagnosis, on the judged phase's card only.
    pub diagnosis: Option<CardDiagnosis>,
    /// The card in one line of words (the colour is never the only signal).
    pub words: String,
}
