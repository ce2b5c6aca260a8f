//! The verdicts: Holm's adjustment over the comparison's family of tests,
//! then each test's verdict from its adjusted p-value and the noise floor
//! (docs/compare.md, The verdict).

use super::resample::holm;
use super::student;
use super::*;

/// Holm's level for each p-value of a family: `α / (m − i)` for the
/// `i`-th smallest (0-based; ties in input order, as [`holm`] sorts), the
/// threshold the step-down procedure holds that p-value to.
pub(crate) fn holm_levels(p: &[f64], alpha: f64) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let mut out = vec![alpha; m];
    for (i, &j) in order.iter().enumerate() {
        out[j] = alpha / (m - i) as f64;
    }
    out
}

/// The power the minimum detectable shift is stated at.
pub const DETECTION_POWER: f64 = 0.8;

/// Sets a test's level and its minimum detectable shift: the |shift| a
/// two-sided t test at `level` with the test's standard error and ν calls
/// with [`DETECTION_POWER`], `(t_{1 − level/2}(ν) + t_{0.8}(ν)) · se`, never
/// below `floor` (a shift below the floor is never called).
pub(crate) fn detectable(t: &mut TestInference, level: f64, floor: f64, round: fn(f64) -> f64) {
    t.level = level;
    t.floor = round(floor);
    let nu = t.df.max(f64::MIN_POSITIVE);
    let k = student::quantile(1.0 - level / 2.0, nu) + student::quantile(DETECTION_POWER, nu);
    t.detectable = round((k * t.se).max(floor));
}

/// One test's verdict, by the rule of docs/compare.md (One inference per
/// test): a direction (−1, 0 or +1) needs the Holm-adjusted p below
/// [`FAMILY_ALPHA`], the reported interval excluding zero, and the shift at
/// least the noise floor; the words say which held, or the first that did
/// not. `tests` is the size of the Holm family, `unit` formats a shift.
fn shift(
    p_adjusted: f64,
    diff: f64,
    interval: [f64; 2],
    floor: f64,
    tests: usize,
    unit: &dyn Fn(f64) -> String,
) -> (i32, String) {
    judge_shift(FAMILY_ALPHA, p_adjusted, diff, interval, floor, tests, unit)
}

/// [`shift`] at a family-wise error rate `alpha` other than
/// [`FAMILY_ALPHA`] (a gate's `--alpha`).
pub(crate) fn judge_shift(
    alpha: f64,
    p_adjusted: f64,
    diff: f64,
    interval: [f64; 2],
    floor: f64,
    tests: usize,
    unit: &dyn Fn(f64) -> String,
) -> (i32, String) {
    if interval[0] <= 0.0 && interval[1] >= 0.0 {
        (0, "the interval holds zero".into())
    } else if p_adjusted >= alpha {
        (
            0,
            format!(
                "the interval excludes zero, but not significant after adjustment over {tests} tests (Holm-adjusted p {p_adjusted:.4})"
            ),
        )
    } else if diff.abs() < floor {
        (
            0,
            format!(
                "significant, but below the noise floor ({} against a floor of {})",
                unit(diff),
                unit(floor)
            ),
        )
    } else {
        (
            diff.signum() as i32,
            format!(
                "Holm-adjusted p {p_adjusted:.4} below {alpha}, the interval excludes zero, and the shift is above the noise floor of {}",
                unit(floor)
            ),
        )
    }
}

/// The verdict of a test's direction alone (no p99 beside it).
pub(crate) fn verdict_of(direction: i32) -> Verdict {
    verdict(direction, 0)
}

fn verdict(m: i32, p: i32) -> Verdict {
    match (m, p) {
        (0, 0) => Verdict::NoClearChange,
        (1, -1) | (-1, 1) => Verdict::Mixed,
        (x, y) if x + y > 0 => Verdict::Worse,
        _ => Verdict::Better,
    }
}

/// The noise floors of a metric's median and p99 shifts, in ns: 5 % of A's
/// median and 25 % of A's p99, but at least 0.2 % and 0.5 % of the nominal
/// period (20 µs and 50 µs at 100 Hz, 4 µs and 10 µs at 500 Hz), or 20 µs
/// and 50 µs when the evidence declares no period. The floor follows the
/// loop's period, so a 1 kHz loop's 15 µs stage change is judged as a
/// 100 Hz loop's 150 µs one is.
pub(super) fn noise_floors(a_median_ns: i64, a_p99_ns: i64, nominal_ns: Option<u64>) -> (f64, f64) {
    let (min_m, min_p) = match nominal_ns {
        Some(n) => (0.002 * n as f64, 0.005 * n as f64),
        None => (20_000.0, 50_000.0),
    };
    (
        (0.05 * a_median_ns.unsigned_abs() as f64).max(min_m),
        (0.25 * a_p99_ns.unsigned_abs() as f64).max(min_p),
    )
}

/// A rate's verdict at its Holm-adjusted `p` and `level` in a family of
/// `tests`. Noise floor: one event per 1,000 cycles, or a quarter of A's
/// rate.
fn judge_rate(r: &mut RateComparison, p: f64, level: f64, tests: usize) {
    r.p_holm = p;
    let floor = (0.25 * r.a_per_1000).max(1.0);
    let unit = TestUnit::Per1000;
    detectable(&mut r.test, level, floor, unit.round());
    let (dir, why) = shift(
        r.p_holm,
        r.test.estimate,
        r.ci_per_1000,
        floor,
        tests,
        &|x| unit.signed(x),
    );
    r.verdict = verdict(dir, 0);
    r.why = why;
}

/// A loop or command Hz test's verdict, as [`judge_rate`]'s; its floor is
/// max(1 % of A's Hz, 0.1 Hz), and a slower rate is worse.
fn judge_hz(h: &mut HzComparison, p: f64, level: f64, tests: usize) {
    h.p_holm = p;
    let floor = h.floor();
    let unit = TestUnit::Hz;
    detectable(&mut h.test, level, floor, unit.round());
    let (dir, why) = shift(h.p_holm, h.test.estimate, h.ci_hz, floor, tests, &|x| {
        unit.signed(x)
    });
    // A slower rate is worse: the direction of the shift, reversed.
    h.verdict = verdict(-dir, 0);
    h.why = why;
}

/// Holm's adjustment over every test of the comparison (each metric's
/// median and p99 tests, each rate's test, each loop and command Hz
/// test), then each verdict from its adjusted p-values and noise floors
/// (side A's nominal period sets their least value).
pub(super) fn judge(
    metrics: &mut [MetricComparison],
    rates: &mut [RateComparison],
    hz: &mut [HzComparison],
    nominal_ns: Option<u64>,
) -> Multiplicity {
    let mut family: Vec<f64> = Vec::new();
    for m in metrics.iter() {
        family.push(m.p_median);
        family.extend(m.p_p99);
    }
    family.extend(rates.iter().map(|r| r.p));
    family.extend(hz.iter().map(|h| h.p));
    let adjusted = holm(&family);
    let mut levels = holm_levels(&family, FAMILY_ALPHA).into_iter();
    let tests = family.len();
    let ms = |ns: f64| format!("{:+.3} ms", ns / 1e6);
    let span = |ci: [i64; 2]| ci.map(|x| x as f64);
    let mut next = adjusted.into_iter();
    for m in metrics.iter_mut() {
        m.p_median_holm = next.next().unwrap_or(1.0);
        m.p_p99_holm = m.p_p99.map(|_| next.next().unwrap_or(1.0));
        let (floor_m, floor_p) = noise_floors(m.a.median_ns, m.a.p99_ns, nominal_ns);
        let tenth = |x: f64| (x * 10.0).round() / 10.0;
        detectable(
            &mut m.test_median,
            levels.next().unwrap_or(FAMILY_ALPHA),
            floor_m,
            tenth,
        );
        if let Some(t) = m.test_p99.as_mut() {
            detectable(t, levels.next().unwrap_or(FAMILY_ALPHA), floor_p, tenth);
        }
        let (sm, why_m) = shift(
            m.p_median_holm,
            m.test_median.estimate,
            span(m.ci_median_ns),
            floor_m,
            tests,
            &ms,
        );
        let p99_estimate = m.test_p99.as_ref().map_or(0.0, |t| t.estimate);
        let p99 = m
            .p_p99_holm
            .map(|p| shift(p, p99_estimate, span(m.ci_p99_ns), floor_p, tests, &ms));
        m.verdict_median = verdict(sm, 0);
        m.verdict_p99 = p99.as_ref().map(|(s, _)| verdict(*s, 0));
        m.verdict = verdict(sm, p99.as_ref().map_or(0, |(s, _)| *s));
        m.why_median = why_m;
        m.why_p99 = p99.map(|(_, why)| why);
    }
    for r in rates.iter_mut() {
        let (p, level) = (
            next.next().unwrap_or(1.0),
            levels.next().unwrap_or(FAMILY_ALPHA),
        );
        judge_rate(r, p, level, tests);
    }
    for h in hz.iter_mut() {
        let (p, level) = (
            next.next().unwrap_or(1.0),
            levels.next().unwrap_or(FAMILY_ALPHA),
        );
        judge_hz(h, p, level, tests);
    }
    Multiplicity {
        method: "holm".into(),
        metrics: (metrics.len() + rates.len() + hz.len()) as u64,
        tests: family.len() as u64,
        alpha: FAMILY_ALPHA,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_levels_follow_the_rank_and_the_detectable_shift_the_t_quantiles() {
        // Ranks by p: 0.04 is 3rd of 3 (α/1), 0.01 1st (α/3), 0.02 2nd (α/2).
        let l = holm_levels(&[0.04, 0.01, 0.02], 0.05);
        assert_eq!(l, vec![0.05, 0.05 / 3.0, 0.025]);
        // The case: 5 gated tests at ν = 4, the first rank's level
        // 0.01: t_{0.995}(4) + t_{0.8}(4) = 4.6041 + 0.9410 = 5.5451
        // standard errors (SciPy's t.ppf), against 2.7764 + 0.9410 = 3.717
        // unadjusted at 5 %.
        let mut t = TestInference {
            method: "rollouts".into(),
            rollouts: [3, 3],
            estimate: 0.0,
            se: 1_000.0,
            df: 4.0,
            level: 0.05,
            detectable: 0.0,
            floor: 0.0,
        };
        detectable(&mut t, 0.01, 0.0, |x| x.round());
        assert_eq!(t.detectable, 5_545.0);
        detectable(&mut t, 0.05, 0.0, |x| x.round());
        assert_eq!(t.detectable, 3_717.0);
        // Never below the noise floor.
        detectable(&mut t, 0.05, 20_000.0, |x| x.round());
        assert_eq!(t.detectable, 20_000.0);
    }

    #[test]
    fn a_verdict_needs_p_the_interval_and_the_floor_and_says_which_failed() {
        let ms = |ns: f64| format!("{:+.3} ms", ns / 1e6);
        // Significant and above the floor, but the interval holds zero:
        // no verdict, and the reason is the interval.
        let (d, why) = shift(0.001, 500_000.0, [-1_000.0, 900_000.0], 20_000.0, 96, &ms);
        assert_eq!((d, why.as_str()), (0, "the interval holds zero"));
        // The interval excludes zero, Holm-adjusted p 0.2: not significant
        // after adjustment over the family.
        let (d, why) = shift(0.2, 500_000.0, [1_000.0, 900_000.0], 20_000.0, 96, &ms);
        assert_eq!(d, 0);
        assert!(
            why.contains("not significant after adjustment over 96 tests"),
            "{why}"
        );
        // All but the floor: 10 µs against a 20 µs floor.
        let (d, why) = shift(0.001, 10_000.0, [5_000.0, 15_000.0], 20_000.0, 96, &ms);
        assert_eq!(d, 0);
        assert!(why.contains("below the noise floor"), "{why}");
        // All three: the direction of the shift.
        let (d, _) = shift(0.001, -500_000.0, [-900_000.0, -1_000.0], 20_000.0, 96, &ms);
        assert_eq!(d, -1);
    }
}
