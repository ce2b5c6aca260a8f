//! The verdicts: Holm's adjustment over the comparison's family of tests,
//! then each test's verdict from its adjusted p-value and the noise floor
//! (docs/compare.md, The verdict).

use super::resample::holm;
use super::*;

/// The direction of a shift that counts: Holm-adjusted p below
/// [`FAMILY_ALPHA`], and the shift at least the metric's noise floor.
/// Returns −1, 0 or +1.
fn shift(p_adjusted: f64, diff: i64, floor: f64) -> i32 {
    if p_adjusted >= FAMILY_ALPHA || (diff.unsigned_abs() as f64) < floor {
        0
    } else {
        diff.signum() as i32
    }
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

/// Holm's adjustment over every test of the comparison (each metric's
/// median and p99 tests and each rate's test), then each verdict from its
/// adjusted p-values and noise floors (side A's nominal period sets their
/// least value).
pub(super) fn judge(
    metrics: &mut [MetricComparison],
    rates: &mut [RateComparison],
    nominal_ns: Option<u64>,
) -> Multiplicity {
    let mut family: Vec<f64> = Vec::new();
    for m in metrics.iter() {
        family.push(m.p_median);
        family.extend(m.p_p99);
    }
    family.extend(rates.iter().map(|r| r.p));
    let adjusted = holm(&family);
    let mut next = adjusted.into_iter();
    for m in metrics.iter_mut() {
        m.p_median_holm = next.next().unwrap_or(1.0);
        m.p_p99_holm = m.p_p99.map(|_| next.next().unwrap_or(1.0));
        let (floor_m, floor_p) = noise_floors(m.a.median_ns, m.a.p99_ns, nominal_ns);
        let sm = shift(m.p_median_holm, m.diff_median_ns, floor_m);
        let sp = m.p_p99_holm.map(|p| shift(p, m.diff_p99_ns, floor_p));
        m.verdict_median = verdict(sm, 0);
        m.verdict_p99 = sp.map(|s| verdict(s, 0));
        m.verdict = verdict(sm, sp.unwrap_or(0));
    }
    for r in rates.iter_mut() {
        r.p_holm = next.next().unwrap_or(1.0);
        // Noise floor: one event per 1,000 cycles, or a quarter of A's rate.
        let floor = (0.25 * r.a_per_1000).max(1.0);
        let dir = if r.p_holm < FAMILY_ALPHA && r.diff_per_1000.abs() >= floor {
            r.diff_per_1000.signum() as i32
        } else {
            0
        };
        r.verdict = verdict(dir, 0);
    }
    Multiplicity {
        method: "holm".into(),
        metrics: (metrics.len() + rates.len()) as u64,
        tests: family.len() as u64,
        alpha: FAMILY_ALPHA,
    }
}
