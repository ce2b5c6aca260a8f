//! The input-paced part of the report (computed by `metrics::input_paced`).

use serde::{Deserialize, Serialize};

use super::Dist;

/// The figures of the phases with input-paced cycles (cycles released by
/// an input's arrival, not by a deadline of the loop's own).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputPacedReport {
    /// Per phase with at least one input-paced cycle, in phase order.
    pub phases: Vec<InputPhase>,
}

/// One phase's input-paced figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputPhase {
    /// The phase.
    pub phase: String,
    /// Input-paced cycles of the phase.
    pub cycles: u64,
    /// Deadline-paced cycles of the same phase (more than 0: the phase
    /// mixes kinds, and the report says so in a caveat).
    pub deadline_cycles: u64,
    /// The period P the gaps, bursts and the default budget are measured
    /// against (ns): the effective nominal period, or without one the
    /// median arrival period.
    pub period_ns: Option<u64>,
    /// Where `period_ns` came from: `nominal` or `arrivals`.
    pub period_from: String,
    /// Arrival-to-arrival intervals of successive input-paced cycles in a
    /// segment (ns).
    pub arrival_period: Option<Dist>,
    /// Σ(arrivals − 1) / Σ(last − first arrival) over the segments, Hz.
    pub arrival_hz: Option<f64>,
    /// `(arrival_hz − 1e9/P) / (1e9/P)`, in %, rounded to 10⁻⁴.
    pub arrival_rate_error_pct: Option<f64>,
    /// An answer later than this (ns) after its arrival is late.
    pub budget_ns: Option<u64>,
    /// Where `budget_ns` came from: `period` or `flag`.
    pub budget_from: String,
    /// Start of the cycle's first command span − arrival (ns), per
    /// input-paced cycle with a command span.
    pub answer_latency: Option<Dist>,
    /// Input-paced cycles with no command span (no answer to time).
    pub unanswered: u64,
    /// How long the inputs waited in the socket before the loop read them
    /// (`read_ns − arrival_ns`, the arrival being the kernel's receive
    /// stamp); absent when no cycle carries a read time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_wait: Option<SocketWait>,
    /// Answers with a latency over the budget.
    pub late_answers: u64,
    /// `late_answers / answers`, rounded to 10⁻⁴ (absent without answers).
    pub late_share: Option<f64>,
    /// The counter's figures; absent when no cycle carried a counter.
    pub lost: Option<LostInputs>,
    /// Arrival intervals longer than 1.5 P.
    pub gaps: u64,
    /// Of `gaps`: those whose cycle before the gap answered late (the
    /// loop held the next arrival back: not the link's evidence).
    pub gaps_after_late_answer: u64,
    /// Runs of arrivals closer than P/4 after a gap.
    pub bursts: Bursts,
    /// The robot's own command success rate, when recorded as a value.
    pub success_rate: Option<SuccessRate>,
    /// `on rate`, `the link`, `the loop`, or `the loop and the link`.
    pub verdict: String,
    /// The verdict's reason, in figures.
    pub reason: String,
}

/// Inputs the source's own counter says never released a cycle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LostInputs {
    /// Successive counted cycles compared.
    pub compared: u64,
    /// `Σ (seq − previous seq − 1)` where the counter advanced by more than 1.
    pub total: u64,
    /// Of `total`: after an on-time answer and outside a burst (the source
    /// or the link lost them before they arrived).
    pub before_arrival: u64,
    /// Of `total`: right after a late answer (the loop was busy: ours).
    pub after_late_answer: u64,
    /// Of `total`: inside a burst after an on-time answer (the link held
    /// them and the loop was released by a newer one: discarded).
    pub discarded_in_bursts: u64,
    /// The counter repeated the previous cycle's value.
    pub repeated: u64,
    /// The counter went backwards (a restart of the source).
    pub resets: u64,
}

/// Bursts: arrivals closer than P/4 after a gap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bursts {
    /// Bursts seen.
    pub count: u64,
    /// Of `count`: bursts whose gap followed a late answer (the loop's own
    /// stall let the inputs queue).
    pub after_late_answer: u64,
    /// Arrivals (released cycles) in bursts.
    pub arrivals: u64,
    /// States the bursts carried: the counter's advance over each burst
    /// (its arrivals when there is no counter).
    pub states: u64,
    /// The most states one burst carried.
    pub states_max: u64,
    /// `states − arrivals`: states a burst carried that released no cycle.
    pub discarded: u64,
}

/// The robot's command success rate, as a recorded value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuccessRate {
    /// The value read.
    pub value: String,
    /// Input-paced cycles that set it, the phase's first left out.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Smallest.
    pub min: f64,
    /// Nearest-rank 1st percentile.
    pub p1: f64,
    /// Nearest-rank 10th percentile.
    pub p10: f64,
    /// Median.
    pub p50: f64,
    /// Cycles below 1.0 (some command of the robot's window missed).
    pub below_one: u64,
}

/// The socket wait of an input-paced phase: how long each input waited
/// between the kernel's receive stamp and the loop's read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SocketWait {
    /// Input-paced cycles with a read time beside their arrival.
    pub stamped: u64,
    /// `read_ns − arrival_ns` over them (ns), the clock steps left out.
    pub wait: Option<Dist>,
    /// The largest conversion bound among them (ns): each arrival is
    /// known within ± half of its own.
    pub bound_max_ns: Option<i64>,
    /// Cycles whose read came before their arrival by more than their
    /// bound: the system clock stepped while the input was in the socket.
    /// Left out of `wait`.
    pub clock_steps: u64,
}
