//! What a comparison gives: its constants, the per-metric and per-rate
//! tests with their verdicts, the family's multiplicity record and the
//! [`Comparison`] itself, as `--json` writes them (docs/compare.md). The
//! bottom rung of `compare`: the computation above fills these.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::test_types::{GateFamily, Moved, TestCase, TestInference, TestUnit, Verdict};
use super::HzComparison;

/// Comparison format identifier.
pub const COMPARISON_FORMAT: &str = "looptime-comparison/2";
/// Config keys that cannot explain a timing difference: where files go,
/// the session's name (`--label`; the side is named by it instead), and
/// the clock offsets `looptime.ros` measures when a recording starts (a
/// reading, different every run, not a setting).
pub const IGNORED_CONFIG_KEYS: &[&str] = &[
    "run.runs_dir",
    "run.timing_ring_dir",
    "run.label",
    "program.ros_clock_offset_ns",
    "program.ros_stamp_offset_ns",
];
/// Values per side one resample draws (each rollout's share of it beyond
/// it: an m-out-of-n bootstrap).
pub const MAX_BOOTSTRAP_SAMPLES: usize = 20_000;
/// Samples each side needs before its p99 counts towards a verdict (so at
/// least 10 values lie above the p99).
pub const MIN_SAMPLES_FOR_P99_VERDICT: usize = 1_000;
/// Samples above the p99.9 that each side needs before its p99.9 is shown
/// without a warning.
pub const MIN_TAIL_SAMPLES: u64 = 10;
/// The headline metrics an A/A pair must not move.
pub const HEADLINE_METRICS: &[&str] = &["period", "work", "command_interval"];
/// The family-wise error rate the verdicts are held to (Holm, over every
/// median and p99 test of a comparison).
pub const FAMILY_ALPHA: f64 = 0.05;

/// Bootstrap settings.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct BootstrapConfig {
    /// Resamples per metric.
    pub resamples: u32,
    /// RNG seed (the metric's name is mixed in, so each metric has its own stream).
    pub seed: u64,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        Self {
            resamples: 400,
            seed: 0x5EED_1007,
        }
    }
}

/// One difference between the two manifests.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Difference {
    /// `config`, `source`, `host`, `realtime` or `schedule`.
    pub kind: String,
    /// Dotted key (`stages.camera_read.mode`).
    pub key: String,
    /// Value in A (null when absent).
    pub a: Value,
    /// Value in B.
    pub b: Value,
}

/// Median, p99, mean and count of one side.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Side {
    /// Samples.
    pub count: u64,
    /// Nearest-rank median (ns).
    pub median_ns: i64,
    /// Nearest-rank p99 (ns).
    pub p99_ns: i64,
    /// Nearest-rank p99.9 (ns).
    pub p999_ns: i64,
    /// Samples above the p99.9's rank (`count − ⌈0.999 · count⌉`): what the
    /// p99.9 rests on.
    pub beyond_p999: u64,
    /// Mean (ns), 0.1 ns.
    pub mean_ns: f64,
}

/// One rollout's own median and p99 of a metric, shown beside the pooled
/// figures.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RolloutFigures {
    /// Index into the side's `episodes` list.
    pub rollout: usize,
    /// Samples.
    pub count: u64,
    /// Nearest-rank median (ns).
    pub median_ns: i64,
    /// Nearest-rank p99 (ns).
    pub p99_ns: i64,
}

/// One metric, A against B.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MetricComparison {
    /// Phase name.
    pub phase: String,
    /// `period`, `work`, `sleep_overshoot`, `deadline_lag`,
    /// `command_interval`, `stage_wall`, `stage_cpu`.
    pub metric: String,
    /// Stage path for stage metrics.
    pub stage: Option<String>,
    /// What the verdict is judged on (`value` or `|value − nominal|`).
    pub judged_on: String,
    /// A's figures (of the judged quantity), its rollouts pooled.
    pub a: Side,
    /// B's figures, pooled.
    pub b: Side,
    /// Each of A's rollouts that has samples of the metric, its own
    /// median and p99.
    pub a_rollouts: Vec<RolloutFigures>,
    /// Each of B's rollouts, likewise.
    pub b_rollouts: Vec<RolloutFigures>,
    /// Loop Hz (period) or command Hz (command interval) of A: its
    /// report's, or the mean of its rollouts' reports.
    pub a_hz: Option<f64>,
    /// Rate implied by B's mean, Hz.
    pub b_hz: Option<f64>,
    /// `b_hz − a_hz` (loop Hz for period, command Hz for command interval).
    pub diff_hz: Option<f64>,
    /// `diff_hz / a_hz`.
    pub rel_diff_hz: Option<f64>,
    /// B median − A median (ns).
    pub diff_median_ns: i64,
    /// diff / |A median| (null when A median is 0).
    pub rel_diff_median: Option<f64>,
    /// 95 % two-level bootstrap interval of the median difference (ns).
    pub ci_median_ns: [i64; 2],
    /// B p99 − A p99 (ns).
    pub diff_p99_ns: i64,
    /// diff / |A p99|.
    pub rel_diff_p99: Option<f64>,
    /// 95 % bootstrap interval of the p99 difference (ns).
    pub ci_p99_ns: [i64; 2],
    /// B p99.9 − A p99.9 (ns): shown, never judged.
    pub diff_p999_ns: i64,
    /// "the tail rests on N cycles" (or, with none, that the p99.9 is a
    /// side's maximum) when either side has fewer than
    /// [`MIN_TAIL_SAMPLES`] samples above its p99.9.
    pub tail_warning: Option<String>,
    /// Expected block lengths of the stationary bootstrap (A, B), in
    /// samples (1 = the iid bootstrap), rounded to 0.01; with several
    /// rollouts, their mean weighted by the rollouts' sample counts.
    pub block_length: [f64; 2],
    /// Two-sided p-value of the median difference, before adjustment: the
    /// bootstrap test the interval inverts, from the same resamples
    /// (docs/compare.md, One inference per test).
    pub p_median: f64,
    /// `p_median` after Holm's adjustment over the comparison's family.
    pub p_median_holm: f64,
    /// p-value of the p99 difference, when the p99 is tested (both sides
    /// have at least [`MIN_SAMPLES_FOR_P99_VERDICT`] samples).
    pub p_p99: Option<f64>,
    /// `p_p99` after Holm's adjustment.
    pub p_p99_holm: Option<f64>,
    /// How the median test was made and what it could have seen.
    pub test_median: TestInference,
    /// The same for the p99 test, when the p99 is tested.
    pub test_p99: Option<TestInference>,
    /// The median test's own verdict (better, worse or no clear change),
    /// what a CI gate on `PHASE/METRIC:median` reads.
    pub verdict_median: Verdict,
    /// The p99 test's own verdict, when the p99 is tested.
    pub verdict_p99: Option<Verdict>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why the median test's verdict is what it is, in words: what it
    /// passed, or the first condition it failed (`the interval holds
    /// zero`, `not significant after adjustment over N tests`, `below the
    /// noise floor`).
    pub why_median: String,
    /// Why the p99 test's verdict is what it is, when the p99 is tested.
    pub why_p99: Option<String>,
}

/// A per-cycle event rate of one phase, A against B: deadline misses
/// (overdue cycles) or late starts (a start more than the late-start
/// threshold after its target), per 1,000 cycles.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RateComparison {
    /// Phase name.
    pub phase: String,
    /// `deadline_miss` or `late_start`.
    pub metric: String,
    /// For `late_start`: the threshold (ns), 10 % of the effective period.
    pub threshold_ns: Option<i64>,
    /// Cycles of the phase on each side (A, B), rollouts pooled.
    pub cycles: [u64; 2],
    /// A's rate per 1,000 cycles: its events over its cycles, rollouts
    /// pooled.
    pub a_per_1000: f64,
    /// B's rate per 1,000 cycles.
    pub b_per_1000: f64,
    /// `b − a`.
    pub diff_per_1000: f64,
    /// 95 % block-bootstrap interval of the difference.
    pub ci_per_1000: [f64; 2],
    /// Expected block lengths (A, B) of the indicator series.
    pub block_length: [f64; 2],
    /// Two-sided p-value of the difference.
    pub p: f64,
    /// After Holm's adjustment.
    pub p_holm: f64,
    /// How the test was made and what it could have seen.
    pub test: TestInference,
    /// better / worse / no clear change.
    pub verdict: Verdict,
    /// Why, in words (as [`MetricComparison::why_median`]).
    pub why: String,
}

/// How the verdicts control for testing many metrics at once.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Multiplicity {
    /// `holm`: the family-wise error rate (docs/compare.md says why).
    pub method: String,
    /// Metrics compared.
    pub metrics: u64,
    /// Tests in the family: a median test per metric, plus a p99 test per
    /// metric with enough samples.
    pub tests: u64,
    /// The family-wise error rate.
    pub alpha: f64,
}

impl MetricComparison {
    /// An overlap test that is zero on both sides (a control stage that
    /// never ran while the thread worked): the text and the HTML fold it
    /// into one line; the JSON and the Holm family keep it.
    pub fn is_zero_overlap(&self) -> bool {
        self.metric.starts_with("overlap:")
            && self.verdict == Verdict::NoClearChange
            && [
                self.a.median_ns,
                self.a.p99_ns,
                self.a.p999_ns,
                self.b.median_ns,
                self.b.p99_ns,
                self.b.p999_ns,
            ]
            .iter()
            .all(|&x| x == 0)
    }

    /// `metric [stage] [(judged on)]`, as shown in tables.
    pub fn display_name(&self) -> String {
        let mut name = self.metric.clone();
        if let Some(s) = &self.stage {
            name = format!("{name} {s}");
        }
        if self.judged_on != "value" {
            name = format!("{name} ({})", self.judged_on);
        }
        name
    }
}

impl RateComparison {
    /// The rate's name in the reports' vocabulary (docs/metrics.md,
    /// Vocabulary): `overruns` for the `deadline_miss` series, `late
    /// starts` for `late_start`, `stale SOURCE uses` for `stale:SOURCE`
    /// (per 1,000 uses of the source, not cycles); the JSON keeps the field
    /// names.
    pub fn display_name(&self) -> String {
        if let Some(source) = self.metric.strip_prefix("stale:") {
            return match self.threshold_ns {
                Some(t) => format!(
                    "stale {source} uses, per 1,000 uses (age > {:.3} ms)",
                    t as f64 / 1e6
                ),
                None => format!("stale {source} uses, per 1,000 uses"),
            };
        }
        let word = match self.metric.as_str() {
            "deadline_miss" => "overruns",
            "late_start" => "late starts",
            "late_answers" => {
                return match self.threshold_ns {
                    Some(t) => format!(
                        "late answers, per 1,000 answers (latency > {:.3} ms)",
                        t as f64 / 1e6
                    ),
                    None => "late answers, per 1,000 answers".into(),
                }
            }
            "lost_before_arrival" => {
                return "inputs lost before arrival, per 1,000 arrivals".into()
            }
            "lost_after_late_answer" => {
                return "inputs lost after a late answer, per 1,000 arrivals".into()
            }
            "lost_discarded" => return "inputs discarded in bursts, per 1,000 arrivals".into(),
            "bursts" => return "bursts, per 1,000 arrivals".into(),
            "success_shortfall" => {
                return "the robot's success shortfall (1 − rate), per 1,000".into()
            }
            "success_below_one" => {
                return "cycles with the robot's success rate below 1, per 1,000".into()
            }
            "budget_overrun" => {
                return match self.threshold_ns {
                    Some(t) => format!("over the compute budget ({:.3} ms)", t as f64 / 1e6),
                    None => "over the compute budget".into(),
                }
            }
            "completion_miss" => {
                return match self.threshold_ns {
                    Some(t) => format!("completion misses (tolerance {:.3} ms)", t as f64 / 1e6),
                    None => "completion misses".into(),
                }
            }
            other => other,
        };
        match self.threshold_ns {
            Some(t) => format!("{word} (lag > {:.3} ms)", t as f64 / 1e6),
            None => word.to_string(),
        }
    }
}

impl RateComparison {
    /// The gate name's suffix: `share` for the late answers (a share of
    /// the answers), `rate` for every other.
    pub fn gate_kind(&self) -> &'static str {
        if self.metric == "late_answers" {
            "share"
        } else {
            "rate"
        }
    }
}

/// `n` with a comma between thousands (1,000).
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A signed difference or interval end in ns, in ms: three decimals
/// (`+0.483`), or six when a value that is not zero would round to zero
/// at three (`+0.000400`), so that an interval's ends always show which
/// side of zero they lie on.
pub fn signed_ms(ns: i64) -> String {
    if ns != 0 && ns.abs() < 500 {
        format!("{:+.6}", ns as f64 / 1e6)
    } else {
        format!("{:+.3}", ns as f64 / 1e6)
    }
}

/// A detectable shift in ns as the tests show it: `0.532 ms`.
fn detect_ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// A metric's tests: its median test, and its p99 test when tested.
fn metric_tests(m: &MetricComparison) -> Vec<TestCase> {
    let ms = signed_ms;
    let interval = |ci: [i64; 2]| format!("[{}, {}] ms", ms(ci[0]), ms(ci[1]));
    let mut out = Vec::new();
    let base = match &m.stage {
        Some(s) => format!("{}/{}/{s}", m.phase, m.metric),
        None => format!("{}/{}", m.phase, m.metric),
    };
    out.push(TestCase {
        name: format!("{base}:median"),
        phase: m.phase.clone(),
        label: format!("{} median", m.display_name()),
        verdict: m.verdict_median,
        metric_verdict: m.verdict,
        p_holm: m.p_median_holm,
        shift: format!(
            "Δ p50 {} ms {}",
            ms(m.diff_median_ns),
            interval(m.ci_median_ns)
        ),
        why: m.why_median.clone(),
        detectable: detect_ms(m.test_median.detectable),
        rollouts: m.test_median.rollouts,
        p: m.p_median,
        interval: m.ci_median_ns.map(|x| x as f64),
        inference: m.test_median.clone(),
        unit: TestUnit::Ns,
    });
    if let (Some(v), Some(p), Some(raw), Some(inference)) =
        (m.verdict_p99, m.p_p99_holm, m.p_p99, m.test_p99.as_ref())
    {
        out.push(TestCase {
            name: format!("{base}:p99"),
            phase: m.phase.clone(),
            label: format!("{} p99", m.display_name()),
            verdict: v,
            metric_verdict: m.verdict,
            p_holm: p,
            shift: format!("Δ p99 {} ms {}", ms(m.diff_p99_ns), interval(m.ci_p99_ns)),
            why: m.why_p99.clone().unwrap_or_default(),
            detectable: detect_ms(inference.detectable),
            rollouts: inference.rollouts,
            p: raw,
            interval: m.ci_p99_ns.map(|x| x as f64),
            inference: inference.clone(),
            unit: TestUnit::Ns,
        });
    }
    out
}

/// A rate's test.
fn rate_test(r: &RateComparison) -> TestCase {
    TestCase {
        name: format!("{}/{}:{}", r.phase, r.metric, r.gate_kind()),
        phase: r.phase.clone(),
        label: r.display_name(),
        verdict: r.verdict,
        metric_verdict: r.verdict,
        p_holm: r.p_holm,
        shift: format!(
            "{:+.3} per 1,000 cycles [{:+.3}, {:+.3}]",
            r.diff_per_1000, r.ci_per_1000[0], r.ci_per_1000[1]
        ),
        why: r.why.clone(),
        detectable: format!("{:.3} per 1,000 cycles", r.test.detectable),
        rollouts: r.test.rollouts,
        p: r.p,
        interval: r.ci_per_1000,
        inference: r.test.clone(),
        unit: TestUnit::Per1000,
    }
}

/// A loop or command Hz test.
fn hz_test(h: &HzComparison) -> TestCase {
    TestCase {
        name: format!("{}/{}", h.phase, h.metric),
        phase: h.phase.clone(),
        label: h.display_name().to_string(),
        verdict: h.verdict,
        metric_verdict: h.verdict,
        p_holm: h.p_holm,
        shift: format!(
            "Δ {:+.4} Hz [{:+.4}, {:+.4}]",
            h.diff_hz, h.ci_hz[0], h.ci_hz[1]
        ),
        why: h.why.clone(),
        detectable: TestUnit::Hz.size(h.test.detectable),
        rollouts: h.test.rollouts,
        p: h.p,
        interval: h.ci_hz,
        inference: h.test.clone(),
        unit: TestUnit::Hz,
    }
}

impl Comparison {
    /// Every test of the comparison, in the report's order: each metric's
    /// median test, then its p99 test when tested; each rate's test; each
    /// loop or command Hz test.
    pub fn tests(&self) -> Vec<TestCase> {
        let mut out: Vec<TestCase> = self.metrics.iter().flat_map(metric_tests).collect();
        out.extend(self.rates.iter().map(rate_test));
        out.extend(self.hz.iter().map(hz_test));
        out
    }

    /// The tests that moved (a verdict other than "no clear change"), most
    /// significant first (smallest adjusted p, then phase and name): what a
    /// comparison leads with. A view of [`Comparison::tests`], computed
    /// from nothing else, so every surface counts the same tests.
    pub fn moved(&self) -> Vec<Moved> {
        let mut out: Vec<Moved> = self
            .tests()
            .into_iter()
            .filter(|t| t.verdict != Verdict::NoClearChange)
            .collect();
        out.sort_by(|a, b| {
            a.p_holm
                .total_cmp(&b.p_holm)
                .then_with(|| (&a.phase, &a.label).cmp(&(&b.phase, &b.label)))
        });
        out
    }
}

impl Verdict {
    /// The word shown in tables.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoClearChange => "no clear change",
            Verdict::Mixed => "mixed",
        }
    }
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// [`COMPARISON_FORMAT`].
    pub format: String,
    /// Side A: its episode directory, or with several rollouts
    /// `N rollouts in <their common directory>` (`N episodes` when they
    /// share none).
    pub a: String,
    /// Side B, likewise.
    pub b: String,
    /// A's episode directories, in the order `a_rollouts` indexes.
    pub a_episodes: Vec<String>,
    /// B's episode directories.
    pub b_episodes: Vec<String>,
    /// Config keys that differ (the settings under test).
    pub settings_differing: Vec<String>,
    /// Every manifest difference.
    pub differences: Vec<Difference>,
    /// Warnings about the comparison itself (shown first).
    pub warnings: Vec<String>,
    /// Caveats of either side (`A: …`, `B: …`).
    pub caveats: Vec<String>,
    /// Metrics, by phase, then metric, then stage.
    pub metrics: Vec<MetricComparison>,
    /// Deadline-miss and late-start rates, by phase.
    pub rates: Vec<RateComparison>,
    /// Loop Hz and command Hz, by phase (docs/compare.md, The loop's
    /// rate). Absent from comparisons written before them.
    #[serde(default)]
    pub hz: Vec<HzComparison>,
    /// The multiplicity control of the verdicts.
    pub multiplicity: Multiplicity,
    /// The bootstrap used.
    pub bootstrap: BootstrapConfig,
    /// The gate's family, when a gate was asked for (`--fail-on` or
    /// `--gate`): each gated test judged among the gated tests alone.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gate: Option<GateFamily>,
    /// Rollout directories of either side that hold no evidence and were
    /// left out (`A: <dir>`, `B: <dir>`); the command then exits with the
    /// partial-input code. Absent when none was.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub left_out: Vec<String>,
}
