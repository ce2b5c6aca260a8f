//! The budget-and-tolerance part of the report (computed by
//! `metrics::budget`; present only when the evidence declares one).

use serde::{Deserialize, Serialize};

use super::Dist;

/// The figures judged against what the runtime declared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetReport {
    /// The declared compute budget (ns), when declared.
    pub compute_budget_ns: Option<u64>,
    /// The declared deadline tolerance (ns), when declared.
    pub deadline_tolerance_ns: Option<u64>,
    /// Per phase, in phase order.
    pub phases: Vec<BudgetPhase>,
}

/// One phase's budget overruns and completion misses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetPhase {
    /// The phase.
    pub phase: String,
    /// Its cycles.
    pub cycles: u64,
    /// Work (`end_ns − start_ns`) over the compute budget; absent without
    /// a declared budget.
    pub budget_overruns: Option<Misses>,
    /// A finish (`end_ns`) later than the next release point (the
    /// cycle's `target_ns` plus the effective period) plus the tolerance;
    /// absent without a declared tolerance, and for input-paced, uncapped
    /// or incomparable cycles (no release point on the host clock).
    pub completion_misses: Option<Misses>,
}

/// Cycles over a limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Misses {
    /// Cycles judged (those with the times the limit needs).
    pub judged: u64,
    /// Cycles over the limit.
    pub count: u64,
    /// `count / judged`, rounded to 10⁻⁴ (absent with none judged).
    pub share: Option<f64>,
    /// How far over the limit the misses went (ns): its max and p99 among
    /// the distribution's figures; absent without a miss.
    pub excess: Option<Dist>,
}
