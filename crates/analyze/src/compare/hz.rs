//! The loop's rate and the command rate as tests (docs/compare.md, The
//! loop's rate): each rollout's Hz, `1e9 / mean(interval)` over its
//! phase's start-to-start periods (loop Hz) or its command intervals
//! (command Hz), the figures its report prints, A against B. The
//! `period` metric judges |period − nominal| against each side's own
//! nominal period, so a loop that keeps a new, slower nominal period is no
//! change there; these tests see the rate itself.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::test_types::{TestInference, Verdict};
use super::{infer, inference, series, BootstrapConfig, SideInput};
use crate::analysis::Analysis;
use crate::metrics::command_columns;

/// A phase's loop Hz or command Hz, A against B.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HzComparison {
    /// Phase name.
    pub phase: String,
    /// `loop_hz` or `command_hz`.
    pub metric: String,
    /// Each of A's rollouts' Hz (its report's figure), in rollout order,
    /// rollouts without intervals left out.
    pub a_rollouts_hz: Vec<f64>,
    /// Each of B's rollouts' Hz.
    pub b_rollouts_hz: Vec<f64>,
    /// A's Hz: the mean of its rollouts' (one rollout: its Hz), 10⁻⁴ Hz.
    pub a_hz: f64,
    /// B's Hz, likewise.
    pub b_hz: f64,
    /// `b_hz − a_hz`.
    pub diff_hz: f64,
    /// `diff_hz / a_hz` (null when A's Hz is 0).
    pub rel_diff: Option<f64>,
    /// 95 % interval of the difference (Hz).
    pub ci_hz: [f64; 2],
    /// Two-sided p-value of the difference, before adjustment.
    pub p: f64,
    /// After Holm's adjustment over the comparison's family.
    pub p_holm: f64,
    /// How the test was made and what it could have seen (its estimate,
    /// se, detectable shift and floor in Hz).
    pub test: TestInference,
    /// A lower rate is worse, a higher one better.
    pub verdict: Verdict,
    /// Why, in words.
    pub why: String,
}

impl HzComparison {
    /// The name tables show: `loop Hz` or `command Hz`.
    pub fn display_name(&self) -> &'static str {
        if self.metric == "loop_hz" {
            "loop Hz"
        } else {
            "command Hz"
        }
    }

    /// The noise floor of the test (Hz): 1 % of A's rate, at least 0.1 Hz.
    pub fn floor(&self) -> f64 {
        (0.01 * self.a_hz.abs()).max(0.1)
    }
}

/// One episode's intervals by (phase, `loop_hz` | `command_hz`): the
/// start-to-start periods and the command intervals as recorded (never
/// against the nominal period).
fn intervals(a: &Analysis) -> BTreeMap<(String, &'static str), Vec<i64>> {
    let (ev, cc) = (&a.evidence, a.columns());
    let phase_name = |i: u32| {
        ev.header
            .phases
            .get(i as usize)
            .cloned()
            .unwrap_or_default()
    };
    let mut out: BTreeMap<(String, &'static str), Vec<i64>> = BTreeMap::new();
    for i in 0..ev.cycles.len() {
        if let Some(x) = cc.period[i] {
            out.entry((phase_name(cc.phase[i]), "loop_hz"))
                .or_default()
                .push(x);
        }
    }
    let cmd = command_columns(ev, &cc.segment);
    for i in 0..cmd.segment.len() {
        if let Some(x) = cmd.interval[i] {
            out.entry((phase_name(cmd.phase[i]), "command_hz"))
                .or_default()
                .push(x);
        }
    }
    out
}

/// `1e9 / mean(v)`, the Hz a series of intervals implies.
fn hz_of(v: &[i64]) -> f64 {
    let sum: i64 = v.iter().sum();
    if v.is_empty() || sum <= 0 {
        0.0
    } else {
        1e9 * v.len() as f64 / sum as f64
    }
}

type SideIntervals = BTreeMap<(String, &'static str), Vec<(usize, Vec<i64>)>>;

fn side_intervals(side: &SideInput) -> SideIntervals {
    let mut out: SideIntervals = BTreeMap::new();
    for (i, a) in side.iter().enumerate() {
        for (key, v) in intervals(a) {
            out.entry(key).or_default().push((i, v));
        }
    }
    out
}

/// The rate tests of a pair: one per (phase, loop or command Hz) both
/// sides have, before Holm (the p-values raw, the verdicts unset).
pub(super) fn hz_tests(a: &SideInput, b: &SideInput, cfg: BootstrapConfig) -> Vec<HzComparison> {
    let (sa, sb) = (side_intervals(a), side_intervals(b));
    sa.iter()
        .filter_map(|(key, va)| compare_hz(key, va, sb.get(key)?, cfg))
        .collect()
}

fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// One rate: the run-level test over each rollout's Hz (two or more
/// rollouts a side), else the two-level bootstrap of the pooled Hz. `None`
/// with fewer than two intervals on a side.
fn compare_hz(
    key: &(String, &'static str),
    va: &[(usize, Vec<i64>)],
    vb: &[(usize, Vec<i64>)],
    cfg: BootstrapConfig,
) -> Option<HzComparison> {
    let (a, b) = (series(va), series(vb));
    let count = |s: &[&[i64]]| s.iter().map(|v| v.len()).sum::<usize>();
    if count(&a) < 2 || count(&b) < 2 {
        return None;
    }
    let per_rollout = |s: &[&[i64]]| -> Vec<f64> { s.iter().map(|v| r4(hz_of(v))).collect() };
    let (ha, hb) = (per_rollout(&a), per_rollout(&b));
    let side_hz = |s: &[&[i64]], h: &[f64]| {
        if s.len() == 1 {
            h[0]
        } else {
            h.iter().sum::<f64>() / h.len() as f64
        }
    };
    let (a_hz, b_hz) = (r4(side_hz(&a, &ha)), r4(side_hz(&b, &hb)));
    let observed = hz_of(&b.concat()) - hz_of(&a.concat());
    let name = format!("{}/{}/", key.0, key.1);
    let ([e], how, _) = infer(&a, &b, [observed], |v| [hz_of(v)], cfg, &name);
    let rollouts = [a.len() as u64, b.len() as u64];
    let diff = r4(b_hz - a_hz);
    Some(HzComparison {
        phase: key.0.clone(),
        metric: key.1.to_string(),
        a_rollouts_hz: ha,
        b_rollouts_hz: hb,
        a_hz,
        b_hz,
        diff_hz: diff,
        rel_diff: (a_hz != 0.0).then(|| ((diff / a_hz) * 1e6).round() / 1e6),
        ci_hz: e.interval.map(r4),
        p: e.p,
        p_holm: 1.0,
        test: inference(&e, how, rollouts, r4),
        verdict: Verdict::NoClearChange,
        why: String::new(),
    })
}
