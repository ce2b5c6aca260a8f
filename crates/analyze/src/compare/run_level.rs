//! The run-level test: when both sides hold two or more rollouts, a test's
//! interval and p-value come from the rollouts themselves, so that the
//! spread between whole runs (a warmer cache, another neighbour on a shared
//! runner) is in every p-value (docs/compare.md, The run-level test).
//!
//! Per side of `R` rollouts, each with its own statistic `s_r` (its median,
//! p99 or rate) and that statistic's within-rollout variance `v_r`:
//!
//! * the estimate is the mean of the rollouts' statistics, each rollout
//!   weighted equally: `θ = Σ s_r / R`;
//! * its variance is the spread between rollouts plus the rollouts' own
//!   sampling variances: `V = S² / R + Σ v_r / R²`, with `S²` the sample
//!   variance (divisor `R − 1`) of the `s_r`. The first term alone is the
//!   textbook estimate; the second keeps three rollouts that happen to
//!   agree (at 2 degrees of freedom, `S²` falls below a tenth of its mean
//!   in one case in ten) from passing off a change as certain;
//! * `v_r` is the stationary bootstrap's variance of the rollout's
//!   statistic ([`super::resample::stationary`], the rollout's own block
//!   length and inflation), drawn at `m_r` values and scaled to the
//!   rollout's `n_r` by `m_r / n_r`.
//!
//! The difference `d = θ_B − θ_A` is judged by Welch's t,
//! `t = d / √(V_A + V_B)`, with Satterthwaite's degrees of freedom
//! `ν = (V_A + V_B)² / (V_A² / (R_A − 1) + V_B² / (R_B − 1))` (between
//! `min(R_A, R_B) − 1` and `R_A + R_B − 2`), and Student's distribution
//! exact ([`super::student`]): `p = 2 P(T_ν > |t|)` and the interval
//! `d ± t_{0.975}(ν) · √(V_A + V_B)`, which excludes zero exactly when
//! `p < 0.05`. The assumption: each side's rollout statistics are roughly
//! normal around their mean.

use super::resample::{block, stationary, variance, Estimate, Rng};
use super::student;

/// One side's rollouts reduced to what the test needs, per statistic: the
/// mean of the rollouts' statistics and its variance `V`.
struct SideFigures<const K: usize> {
    mean: [f64; K],
    var: [f64; K],
    rollouts: usize,
}

/// The size a within-rollout resample draws from rollout `n` of a side of
/// `total` values: all of it up to `cap` values a side, else its share of
/// `cap` (as the two-level bootstrap's m-out-of-n rule).
fn draw_size(n: usize, total: usize, cap: usize) -> usize {
    if total <= cap {
        n
    } else {
        ((n as u128 * cap as u128 / total as u128) as usize).max(1)
    }
}

/// A side's figures: for each rollout in order, its statistic, then
/// `rounds` stationary resamples of it (their statistics' variance, times
/// the rollout's inflation, times `m_r / n_r`).
fn side<const K: usize>(
    series: &[&[i64]],
    cap: usize,
    stat: &impl Fn(&mut [i64]) -> [f64; K],
    rounds: usize,
    rng: &mut Rng,
) -> SideFigures<K> {
    let total: usize = series.iter().map(|s| s.len()).sum();
    let mut stats: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(series.len()));
    let mut within = [0.0; K];
    let mut draws: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for s in series {
        let observed = stat(&mut s.to_vec());
        let b = block(s);
        let m = draw_size(s.len(), total, cap);
        let mut buf = vec![0i64; m];
        draws.iter_mut().for_each(Vec::clear);
        for _ in 0..rounds {
            stationary(s, b.length, rng, &mut buf);
            let x = stat(&mut buf);
            for k in 0..K {
                draws[k].push(x[k]);
            }
        }
        for k in 0..K {
            stats[k].push(observed[k]);
            within[k] += b.inflation * variance(&draws[k]) * m as f64 / s.len() as f64;
        }
    }
    let r = series.len() as f64;
    SideFigures {
        mean: std::array::from_fn(|k| stats[k].iter().sum::<f64>() / r),
        var: std::array::from_fn(|k| variance(&stats[k]) / r + within[k] / (r * r)),
        rollouts: series.len(),
    }
}

/// The run-level test of `K` statistics' differences (B − A) over sides of
/// at least two rollouts each: A's rollouts in order, then B's, each with
/// `resamples` within-rollout resamples from `rng`. Each [`Estimate`]
/// carries the estimate `d`, its interval, its p-value, its standard
/// error and ν.
pub(crate) fn run_level<const K: usize>(
    a: &[&[i64]],
    b: &[&[i64]],
    cap: usize,
    stat: impl Fn(&mut [i64]) -> [f64; K],
    resamples: u32,
    rng: &mut Rng,
) -> [Estimate; K] {
    let rounds = resamples.max(2) as usize;
    let fa = side(a, cap, &stat, rounds, rng);
    let fb = side(b, cap, &stat, rounds, rng);
    std::array::from_fn(|k| welch(fb.mean[k] - fa.mean[k], &fa, &fb, k))
}

/// Welch's t for statistic `k` of the two sides' figures.
fn welch<const K: usize>(d: f64, a: &SideFigures<K>, b: &SideFigures<K>, k: usize) -> Estimate {
    let (va, vb) = (a.var[k], b.var[k]);
    let (ra, rb) = ((a.rollouts - 1) as f64, (b.rollouts - 1) as f64);
    let v = va + vb;
    if v <= 0.0 {
        // Every rollout the same and no spread within any: the difference
        // is what it is.
        return Estimate {
            estimate: d,
            interval: [d, d],
            se: 0.0,
            p: if d == 0.0 { 1.0 } else { 0.0 },
            df: ra + rb,
        };
    }
    let df = v * v / (va * va / ra + vb * vb / rb);
    let se = v.sqrt();
    let half = student::quantile(0.975, df) * se;
    Estimate {
        estimate: d,
        interval: [d - half, d + half],
        se,
        p: if d == 0.0 {
            1.0
        } else {
            student::two_sided(d / se, df)
        },
        df,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rollout of `n` values: `centre + 10·((7·i) mod n) − 10·(n − 1)/2`,
    /// a permutation of an evenly spaced set centred on `centre` (its
    /// median is `centre` for odd `n`).
    fn rollout(centre: i64, n: i64) -> Vec<i64> {
        (0..n)
            .map(|i| centre + 10 * ((7 * i) % n) - 10 * (n - 1) / 2)
            .collect()
    }

    fn refs(v: &[Vec<i64>]) -> Vec<&[i64]> {
        v.iter().map(Vec::as_slice).collect()
    }

    fn median(v: &mut [i64]) -> [f64; 1] {
        [super::super::resample::rank(v, 0.5) as f64]
    }

    #[test]
    fn a_run_to_run_offset_widens_the_test_and_a_real_shift_stays_clear() {
        // The A/A pair of the issue: A's rollout medians 39.5, 39.1,
        // 39.0 µs, B's 42.0, 48.8, 41.9 µs (odd n = 301, so each rollout's
        // median is its centre). By hand, the between-rollout part alone:
        // θ_A = 39.2, S_A² = 0.07, θ_B = 44.2333, S_B² = 15.5433;
        // V = 0.0233 + 5.1811 = 5.2044 µs², se 2.281 µs, t = 5.0333 /
        // 2.281 = 2.21 at ν ≈ 2.02: p ≈ 0.16, far from any Holm threshold.
        let a: Vec<Vec<i64>> = [39_500, 39_100, 39_000]
            .iter()
            .map(|&c| rollout(c, 301))
            .collect();
        let b: Vec<Vec<i64>> = [42_000, 48_800, 41_900]
            .iter()
            .map(|&c| rollout(c, 301))
            .collect();
        let mut rng = Rng::new(7);
        let [e] = run_level(&refs(&a), &refs(&b), 20_000, median, 400, &mut rng);
        assert!((e.estimate - 5_033.333).abs() < 0.01, "{e:?}");
        assert!(e.se >= 2_281.0 && e.se < 2_400.0, "{e:?}");
        assert!(e.df > 2.0 && e.df < 2.1, "{e:?}");
        assert!(e.p > 0.1 && e.p < 0.2, "{e:?}");
        assert!(e.interval[0] < 0.0 && e.interval[1] > 0.0, "{e:?}");
        // The pooled series (what a test blind to the rollouts sees) has
        // thousands of degrees of freedom: the same offset there reads as
        // certain. Here, three rollouts a side at one spread and a 20 µs
        // shift: t ≈ 20 / 0.3 at ν ≈ 4, p far below 10⁻⁴.
        let b: Vec<Vec<i64>> = [59_500, 59_100, 59_000]
            .iter()
            .map(|&c| rollout(c, 301))
            .collect();
        let [e] = run_level(&refs(&a), &refs(&b), 20_000, median, 400, &mut rng);
        assert_eq!(e.estimate, 20_000.0);
        assert!(e.p < 1e-4, "{e:?}");
        // Equal spreads a side give ν = R_A + R_B − 2 = 4 (the within
        // parts, drawn from other resamples, differ a little).
        assert!(e.df <= 4.0 && e.df > 3.9, "{e:?}");
    }

    #[test]
    fn the_interval_excludes_zero_exactly_when_p_is_below_five_percent() {
        // Slide B's rollouts upwards in 100 ns steps: the interval's lower
        // end crosses zero at the same step as p crosses 0.05.
        let a: Vec<Vec<i64>> = [10_000, 10_400, 9_700]
            .iter()
            .map(|&c| rollout(c, 101))
            .collect();
        let mut crossed = 0;
        for shift in 0..40 {
            let b: Vec<Vec<i64>> = [10_100, 10_300, 9_900]
                .iter()
                .map(|&c| rollout(c + 100 * shift, 101))
                .collect();
            let mut rng = Rng::new(3);
            let [e] = run_level(&refs(&a), &refs(&b), 20_000, median, 200, &mut rng);
            let excludes = e.interval[0] > 0.0 || e.interval[1] < 0.0;
            assert_eq!(excludes, e.p < 0.05, "shift {shift}: {e:?}");
            crossed += excludes as usize;
        }
        assert!(crossed > 0 && crossed < 40, "{crossed}");
    }

    #[test]
    fn identical_rollouts_without_spread_give_the_difference_as_it_is() {
        let a = [vec![5_i64; 20], vec![5; 20]];
        let b = [vec![5_i64; 20], vec![5; 20]];
        let mut rng = Rng::new(1);
        let [e] = run_level(&refs(&a), &refs(&b), 20_000, median, 50, &mut rng);
        assert_eq!((e.estimate, e.p, e.se), (0.0, 1.0, 0.0));
        let b = [vec![6_i64; 20], vec![6; 20]];
        let [e] = run_level(&refs(&a), &refs(&b), 20_000, median, 50, &mut rng);
        assert_eq!((e.estimate, e.p, e.interval), (1.0, 0.0, [1.0, 1.0]));
    }
}
