//! A verdict, a test's inference record and a CI gate's own family, as `--json`
//! writes them (docs/compare.md, The run-level test; docs/ci.md, The
//! gate's family is the gate). The rung below `types`: what a
//! comparison's tests and its gate carry, apart from the metrics.

use serde::{Deserialize, Serialize};

/// better / worse / no clear change / mixed.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// B is lower (closer to nominal) beyond noise.
    Better,
    /// B is higher beyond noise.
    Worse,
    /// No shift beyond noise.
    NoClearChange,
    /// The median and the p99 moved in opposite directions.
    Mixed,
}

/// The unit of a test's shift, and which way is worse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestUnit {
    /// A metric's median or p99, in ns: higher is worse.
    Ns,
    /// A rate per 1,000 cycles (or answers, uses, arrivals): higher is
    /// worse.
    Per1000,
    /// A loop or command rate in Hz: lower is worse.
    Hz,
}

impl TestUnit {
    /// The direction a verdict takes from a shift's sign: `+1` (worse)
    /// for a positive shift in ns or per 1,000, for a negative one in Hz.
    pub fn worse_sign(self) -> f64 {
        match self {
            TestUnit::Hz => -1.0,
            _ => 1.0,
        }
    }

    /// A shift in this unit as every surface prints it (ns are shown in
    /// ms): `+0.483 ms`, `+4.000 per 1,000 cycles`, `-13.8000 Hz`.
    pub fn signed(self, x: f64) -> String {
        match self {
            TestUnit::Ns => format!("{:+.3} ms", x / 1e6),
            TestUnit::Per1000 => format!("{x:+.3} per 1,000 cycles"),
            TestUnit::Hz => format!("{x:+.4} Hz"),
        }
    }

    /// A size (a detectable shift, a floor) in this unit: `0.532 ms`.
    pub fn size(self, x: f64) -> String {
        match self {
            TestUnit::Ns => format!("{:.3} ms", x / 1e6),
            TestUnit::Per1000 => format!("{x:.3} per 1,000 cycles"),
            TestUnit::Hz => format!("{x:.4} Hz"),
        }
    }

    /// How many of its figures one unit of `--min-effect` is (ms → ns).
    pub fn user_scale(self) -> f64 {
        match self {
            TestUnit::Ns => 1e6,
            _ => 1.0,
        }
    }

    /// Rounds a figure as the JSON keeps it: 0.1 ns, 10⁻⁴ otherwise.
    pub fn round(self) -> fn(f64) -> f64 {
        match self {
            TestUnit::Ns => |x| (x * 10.0).round() / 10.0,
            _ => |x| (x * 1e4).round() / 1e4,
        }
    }
}

/// How one test was made, and the smallest change it would have called
/// (docs/compare.md, The run-level test and The smallest change each test
/// would have called).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TestInference {
    /// `rollouts`: the run-level test (Welch's t over the rollouts' own
    /// statistics), when both sides hold two or more rollouts with
    /// samples; `bootstrap`: the two-level stationary bootstrap, when a
    /// side holds one.
    pub method: String,
    /// Rollouts with samples on each side (A, B).
    pub rollouts: [u64; 2],
    /// The difference the test judges (B − A; ns, or per 1,000 for a
    /// rate), to 0.1 ns (10⁻⁴): with `rollouts`, the mean of B's
    /// rollouts' statistics less A's (each rollout weighted equally); with
    /// `bootstrap`, the pooled difference.
    pub estimate: f64,
    /// Its standard error, likewise rounded.
    pub se: f64,
    /// The degrees of freedom of its t, to 0.01.
    pub df: f64,
    /// The level the verdict holds the unadjusted p to: Holm's
    /// `α / (m − i)` at the test's rank `i` (0-based, ascending p) in its
    /// family of `m`.
    pub level: f64,
    /// The minimum detectable shift: the |shift| the verdict would call
    /// with 80 % probability, `(t_{1 − level/2}(ν) + t_{0.8}(ν)) · se`, but
    /// never below the test's noise floor (rounded as `estimate`).
    pub detectable: f64,
    /// The test's noise floor, in its unit (docs/compare.md, The verdict).
    pub floor: f64,
}

/// The gate's own family: the tests `--gate` names (or every test), held
/// by Holm to `--alpha` among themselves (docs/ci.md, The gate's family).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GateFamily {
    /// The family-wise error rate of the gate (`--alpha`, default 0.05).
    pub alpha: f64,
    /// Whether the tests were named by `--gate` (else every test of the
    /// comparison is the gate's family).
    pub named: bool,
    /// The gated tests, in the report's order.
    pub tests: Vec<GateTest>,
}

/// One gated test, judged within the gate's family.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GateTest {
    /// Its gate name.
    pub name: String,
    /// Its p after Holm's adjustment over the gated tests alone.
    pub p_holm: f64,
    /// Its verdict within the gate's family (better, worse or no clear
    /// change), by the rule of the comparison's verdicts at `--alpha`.
    pub verdict: Verdict,
    /// Why, in words.
    pub why: String,
    /// Holm's level for it within the gate's family.
    pub level: f64,
    /// Its minimum detectable shift at that level (its unit).
    pub detectable: f64,
    /// The effect the user cares about (`--min-effect`), in the test's
    /// unit; null for a test without one.
    pub min_effect: Option<f64>,
    /// No clear change, and a detectable shift larger than `min_effect`:
    /// the comparison could not have seen the effect the user cares about
    /// (never for a test without `min_effect`).
    pub undecided: bool,
    /// For an undecided test: about how many rollouts a side would bring
    /// its detectable shift down to `min_effect` at the measured spread
    /// (null when none would: `min_effect` below the noise floor, or more
    /// than 1,000).
    pub rollouts_to_decide: Option<u64>,
}

/// One test of a comparison: a metric's median test, its p99 test (when
/// tested), or a rate's test. The one list every surface counts from: the
/// text's and HTML's "what moved", the Markdown summary and the gate
/// ([`Comparison::tests`](super::Comparison::tests)).
#[derive(Clone, Debug, PartialEq)]
pub struct TestCase {
    /// Its gate name: `PHASE/METRIC[/STAGE]:median|p99`, `PHASE/RATE:rate`
    /// or `PHASE/loop_hz` and `PHASE/command_hz`.
    pub name: String,
    /// The phase.
    pub phase: String,
    /// The test as tables show it: the metric's display name and
    /// `median` or `p99`, or the rate's name.
    pub label: String,
    /// The test's own verdict (better, worse or no clear change).
    pub verdict: Verdict,
    /// Its metric's verdict (`mixed` when the median and p99 tests moved
    /// in opposite directions; the rate's own verdict for a rate).
    pub metric_verdict: Verdict,
    /// Its Holm-adjusted p-value.
    pub p_holm: f64,
    /// The shift and its interval in words: `Δ p50 +0.483 ms [+0.2, +0.7]`.
    pub shift: String,
    /// Why the verdict is what it is.
    pub why: String,
    /// The smallest |shift| the test would have called with 80 %
    /// probability, in the shift's unit (`+0.532 ms`, `4.000 per 1,000
    /// cycles`): [`TestInference::detectable`].
    pub detectable: String,
    /// Rollouts with samples on each side (A, B).
    pub rollouts: [u64; 2],
    /// Its p-value before any adjustment.
    pub p: f64,
    /// Its 95 % interval, in its unit (ns, per 1,000 for a rate, Hz).
    pub interval: [f64; 2],
    /// How it was made (its estimate, se, ν, noise floor).
    pub inference: TestInference,
    /// Its unit (ns, per 1,000 or Hz), and so which way is worse.
    pub unit: TestUnit,
}

impl TestCase {
    /// What a "no clear change" could have seen, in the words every
    /// surface uses: `a shift of 0.532 ms would have been called with 80 %
    /// probability (3 rollouts a side)`.
    pub fn could_have_seen(&self) -> String {
        let [a, b] = self.rollouts;
        let sides = match (a, b) {
            (1, 1) => "1 rollout a side".to_string(),
            (a, b) if a == b => format!("{a} rollouts a side"),
            (a, b) => format!("{a} and {b} rollouts"),
        };
        format!(
            "a shift of {} would have been called with 80 % probability ({sides})",
            self.detectable
        )
    }
}

/// A test whose verdict is not "no clear change": what a comparison leads
/// with ([`Comparison::moved`](super::Comparison::moved)).
pub type Moved = TestCase;
