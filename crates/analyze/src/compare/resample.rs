//! Resampling that respects autocorrelation: the stationary bootstrap
//! (Politis & Romano 1994) with its expected block length chosen per
//! series by the automatic rule of Politis & White (2004, with the
//! correction of Patton, Politis & White 2009). Per-cycle timings are
//! autocorrelated (a slow stretch lasts several cycles), so resampling
//! cycles one by one makes intervals too narrow; resampling blocks of
//! consecutive cycles keeps the dependence inside each block.
//!
//! Every step is deterministic given the generator's seed; docs/compare.md
//! gives the exact order of draws.

use super::student;

/// The bootstrap's generator: PCG64 Mcg (`rand_pcg::Pcg64Mcg`, 128-bit
/// state, multiplier 0x2360ed051fc65da44385df649fccf645), seeded through
/// `SeedableRng::seed_from_u64`.
#[derive(Debug)]
pub(crate) struct Rng(rand_pcg::Pcg64Mcg);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        use rand_core::SeedableRng;
        Rng(rand_pcg::Pcg64Mcg::seed_from_u64(seed))
    }

    fn next_u64(&mut self) -> u64 {
        use rand_core::RngCore;
        self.0.next_u64()
    }

    /// A uniform index below `n`: the top 53 bits of one `next_u64`, scaled
    /// by multiplication (`⌊(x >> 11) · n / 2⁵³⌋`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 11) as u128 * n as u128) >> 53) as usize
    }

    /// A uniform float in [0, 1): the top 53 bits of one `next_u64` / 2⁵³.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The flat-top lag window of Politis & Romano (1995): 1 up to half the
/// bandwidth, falling linearly to 0 at the bandwidth.
fn flat_top(t: f64) -> f64 {
    let t = t.abs();
    if t <= 0.5 {
        1.0
    } else if t <= 1.0 {
        2.0 * (1.0 - t)
    } else {
        0.0
    }
}

/// The stationary bootstrap's settings for one series ([`block`]): its
/// expected block length, and the factor by which the bootstrap variance
/// of a statistic is inflated to undo the block bootstrap's first-order
/// downward bias.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Block {
    /// Expected block length `b` ([`block`]).
    pub(crate) length: f64,
    /// `max(1, 1 + G / (g · b))`, with `G` and `g` of [`block`].
    pub(crate) inflation: f64,
}

const IID: Block = Block {
    length: 1.0,
    inflation: 1.0,
};

/// Expected block length of the stationary bootstrap for `x`, by the
/// Politis–White rule:
///
/// 1. `K = max(5, ⌈log10 n⌉)`, `m_max = ⌈√n⌉ + K`, and the band
///    `c = 2 · √(log10 n / n)`;
/// 2. `m̂` = the smallest lag `m` such that the sample autocorrelations at
///    `m + 1 … m + K` all lie inside `±c` (`m_max` when none does), and
///    the bandwidth `M = min(2 m̂, m_max)`;
/// 3. with the sample autocovariances `γ̂(k)` (divisor `n`) and the
///    flat-top window `λ`: `G = 2 Σ_{k=1..M} λ(k/M) k γ̂(k)` and
///    `g = γ̂(0) + 2 Σ_{k=1..M} λ(k/M) γ̂(k)`;
/// 4. `b = (2 G² / (2 g²))^{1/3} · n^{1/3}`, clamped to `[1, min(3√n, n/3)]`.
///
/// A series without autocorrelation gets `b = 1`: the iid bootstrap. The
/// rule is derived for the mean; for the median and p99 it is used as is
/// (their optimal block length has the same `n^{1/3}` order), and the
/// coverage test below measures the result.
///
/// 5. The variance inflation `max(1, 1 + G / (g · b))`: the stationary
///    bootstrap's estimate of a mean's variance is biased low by `G / b`
///    to first order (Lahiri 1999), against the long-run variance `g`, so
///    intervals from blocks short against the dependence run narrow;
///    the inflation undoes that bias.
pub(crate) fn block(x: &[i64]) -> Block {
    let n = x.len();
    if n < 8 {
        return IID;
    }
    let nf = n as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / nf;
    let d: Vec<f64> = x.iter().map(|&v| v as f64 - mean).collect();
    let k_n = 5usize.max(nf.log10().ceil() as usize);
    let m_max = (nf.sqrt().ceil() as usize + k_n).min(n - 1);
    let gamma = |k: usize| -> f64 {
        d[..n - k]
            .iter()
            .zip(&d[k..])
            .map(|(a, b)| a * b)
            .sum::<f64>()
            / nf
    };
    let g0 = gamma(0);
    if g0 <= 0.0 {
        return IID;
    }
    let acov: Vec<f64> = (0..=m_max).map(gamma).collect();
    let band = 2.0 * (nf.log10() / nf).sqrt();
    let inside = |k: usize| acov.get(k).is_none_or(|g| (g / g0).abs() < band);
    let m_hat = (1..=m_max)
        .find(|&m| (1..=k_n).all(|j| inside(m + j)))
        .unwrap_or(m_max);
    let big_m = (2 * m_hat).min(m_max).max(1);
    let (mut g_sum, mut spec) = (0.0, g0);
    for (k, g) in acov.iter().enumerate().take(big_m + 1).skip(1) {
        let w = flat_top(k as f64 / big_m as f64);
        g_sum += 2.0 * w * k as f64 * g;
        spec += 2.0 * w * g;
    }
    if spec <= 0.0 {
        return IID;
    }
    let b = (2.0 * g_sum * g_sum / (2.0 * spec * spec)).cbrt() * nf.cbrt();
    let cap = (3.0 * nf.sqrt()).min(nf / 3.0).max(1.0);
    let length = b.clamp(1.0, cap);
    Block {
        length,
        inflation: 1.0 / (1.0 - (g_sum / (spec * length)).clamp(0.0, 0.5)),
    }
}

/// Fill `out` with one stationary-bootstrap resample of `x`: start at a
/// uniform index; then, for each next value, with probability `1 / L`
/// jump to a new uniform index, else take the next value (wrapping at the
/// end). With `L = 1` every value is a fresh uniform draw (iid). Per value:
/// one `unit()` draw (skipped for the first), then one `below(n)` draw when
/// a block starts.
pub(crate) fn stationary(x: &[i64], block: f64, rng: &mut Rng, out: &mut [i64]) {
    let n = x.len();
    if n == 0 {
        return;
    }
    let p = 1.0 / block.max(1.0);
    let mut i = rng.below(n);
    for (t, slot) in out.iter_mut().enumerate() {
        if t > 0 {
            if p >= 1.0 || rng.unit() < p {
                i = rng.below(n);
            } else {
                i += 1;
                if i == n {
                    i = 0;
                }
            }
        }
        *slot = x[i];
    }
}

/// One side's rollouts, ready for the two-level bootstrap: each rollout's
/// series, its [`Block`] and the number of values a resample draws from it.
#[derive(Debug)]
pub(crate) struct Rollouts<'a> {
    series: Vec<&'a [i64]>,
    blocks: Vec<Block>,
    sizes: Vec<usize>,
    picks: Vec<usize>,
}

impl<'a> Rollouts<'a> {
    /// The rollouts of one side (each non-empty). A resample of rollout `r`
    /// of `n_r` values draws `n_r` values when the side's total `N` is at
    /// most `cap`, else `max(1, ⌊n_r · cap / N⌋)` (an m-out-of-n
    /// bootstrap, conservative).
    pub(crate) fn new(series: Vec<&'a [i64]>, cap: usize) -> Rollouts<'a> {
        let total: usize = series.iter().map(|s| s.len()).sum();
        let sizes = series
            .iter()
            .map(|s| {
                if total <= cap {
                    s.len()
                } else {
                    ((s.len() as u128 * cap as u128 / total as u128) as usize).max(1)
                }
            })
            .collect();
        let blocks = series.iter().map(|s| block(s)).collect();
        Rollouts {
            picks: Vec::with_capacity(series.len()),
            series,
            blocks,
            sizes,
        }
    }

    /// A mean over the side's rollouts of `f(block)`, weighted by the
    /// rollouts' sample counts; `empty` for a side without samples.
    fn weighted(&self, f: impl Fn(&Block) -> f64, empty: f64) -> f64 {
        let n: f64 = self.series.iter().map(|s| s.len() as f64).sum();
        if n == 0.0 {
            return empty;
        }
        self.series
            .iter()
            .zip(&self.blocks)
            .map(|(s, b)| s.len() as f64 * f(b))
            .sum::<f64>()
            / n
    }

    /// The side's expected block length: its rollouts', weighted by their
    /// sizes.
    pub(crate) fn mean_length(&self) -> f64 {
        self.weighted(|b| b.length, 1.0)
    }

    /// The side's degrees of freedom: its blocks, `Σ n_r / b_r`, less one
    /// (at least 1).
    pub(crate) fn degrees_of_freedom(&self) -> f64 {
        let blocks: f64 = self
            .series
            .iter()
            .zip(&self.blocks)
            .map(|(s, b)| s.len() as f64 / b.length)
            .sum();
        (blocks - 1.0).max(1.0)
    }

    /// The side's variance inflation: its rollouts' inflations weighted by
    /// their sizes.
    pub(crate) fn inflation(&self) -> f64 {
        self.weighted(|b| b.inflation, 1.0)
    }

    /// One two-level resample into `out` (cleared first). With `R > 1`
    /// rollouts: `R` rollout indices drawn with replacement (`R` `below(R)`
    /// draws, all first), then for each drawn index in order a stationary
    /// resample of that rollout ([`stationary`]), appended. With one
    /// rollout the rollout level draws nothing.
    pub(crate) fn resample(&mut self, rng: &mut Rng, out: &mut Vec<i64>) {
        let r = self.series.len();
        self.picks.clear();
        if r == 1 {
            self.picks.push(0);
        } else {
            for _ in 0..r {
                self.picks.push(rng.below(r));
            }
        }
        out.clear();
        for &j in &self.picks {
            let start = out.len();
            out.resize(start + self.sizes[j], 0);
            stationary(
                self.series[j],
                self.blocks[j].length,
                rng,
                &mut out[start..],
            );
        }
    }
}

/// Variance (divisor `n − 1`; 0 for fewer than two values).
pub(crate) fn variance(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
}

/// A test's answer for one statistic's difference (B − A), by the
/// bootstrap ([`bootstrap_diffs`]) or the run-level test
/// ([`super::run_level`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Estimate {
    /// The difference the test judges: the observed pooled difference
    /// (the bootstrap), or the mean of B's rollouts' statistics less A's
    /// (the run-level test).
    pub(crate) estimate: f64,
    /// The widened 95 % percentile interval.
    pub(crate) interval: [f64; 2],
    /// The widened standard error: the standard deviation (divisor
    /// `R − 1`) of the resampled differences times the widening.
    pub(crate) se: f64,
    /// The two-sided p-value of the bootstrap test the interval inverts
    /// ([`bootstrap_p`]), from the same widened differences.
    pub(crate) p: f64,
    /// The degrees of freedom of the widening's Student quantile (ν, by
    /// Welch–Satterthwaite from the sides' blocks).
    pub(crate) df: f64,
}

/// The two-sided p-value of "no difference", read from the widened
/// resampled differences `w` (sorted ascending) that the percentile
/// interval is read from, so that the two never disagree:
///
/// * `c` = how many of the `R` lie on the far side of zero from the
///   `observed` difference, zero included; `p = 2 (c + 1) / (R + 1)`,
///   capped at 1 (1 when nothing was observed). This is the test the
///   95 % percentile interval inverts. The tail count `k` is the
///   interval's own, for the end that faces zero: for a positive
///   difference the lower end is the `⌈0.025 R⌉`-th smallest, so it lies
///   above zero exactly when `c < k = ⌈0.025 R⌉`; for a negative one the
///   upper end is the `⌈0.975 R⌉`-th smallest, below zero exactly when
///   `c < k = R − ⌈0.975 R⌉ + 1` (11 at 400 resamples, where the lower
///   end's is 10). When `c ≥ k` the interval holds zero and
///   `p ≥ 2 (k + 1) / (R + 1) > 0.05`, since `k ≥ 0.025 R` on either side.
/// * When `c < k` (the interval excludes zero) the count only bounds `p`
///   from above (`2 / (R + 1)` at best: 0.005 at 400 resamples, which
///   Holm's thresholds over tens of tests never reach), so the tail the
///   interval faces is extrapolated: with `m` the widened differences'
///   median and `q` the interval's end that faces zero (its 2.5th
///   percentile, or for a negative difference its 97.5th), the normal
///   tail of scale `|m − q| / 1.96` fitted to that side alone gives
///   `p = 2 Φ(−|m| / scale)`, never above the count's bound. As `q` lies
///   between zero and `m`, `|m| / scale > 1.96` and `p < 0.05`: no p at or
///   above 0.05 beside an interval that excludes zero, in either
///   direction.
pub(crate) fn bootstrap_p(w: &[f64], observed: f64) -> f64 {
    let r = w.len();
    if observed == 0.0 || r == 0 {
        return 1.0;
    }
    let lower = looptime_capture::quantile::nearest_rank_index(r, 0.025);
    let upper = looptime_capture::quantile::nearest_rank_index(r, 0.975);
    let (far, tail, facing) = if observed > 0.0 {
        (
            w.iter().take_while(|&&x| x <= 0.0).count(),
            lower + 1,
            w[lower],
        )
    } else {
        (
            w.iter().rev().take_while(|&&x| x >= 0.0).count(),
            r - upper,
            w[upper],
        )
    };
    let counted = (2.0 * (far as f64 + 1.0) / (r as f64 + 1.0)).min(1.0);
    if far >= tail {
        return counted;
    }
    let median = w[looptime_capture::quantile::nearest_rank_index(r, 0.5)];
    let scale = (median - facing).abs() / Z975;
    let fitted = if scale > 0.0 {
        two_sided_p(median / scale)
    } else {
        0.0
    };
    fitted.min(counted)
}

/// The two-level stationary bootstrap of `K` statistics' differences:
/// for each of `resamples` rounds, A's resample ([`Rollouts::resample`]),
/// then B's, then `stat` of each, then the differences B − A.
///
/// Each difference's distribution is then widened around the `observed`
/// difference by `w = t · √((f_a·V_a + f_b·V_b) / (V_a + V_b))` (`t` alone
/// when both variances are 0), with `V_a`, `V_b` the variances of each
/// side's resampled statistic, `f_a`, `f_b` the sides' inflations
/// ([`Rollouts::inflation`]) and `t = t_{0.975}(ν) / z_{0.975}` the ratio of
/// Student's to the normal 97.5 % quantile, `ν` by Welch–Satterthwaite
/// from the sides' degrees of freedom ([`Rollouts::degrees_of_freedom`]):
/// `ν = (V_a' + V_b')² / (V_a'²/ν_a + V_b'²/ν_b)` with `V' = f·V`
/// (Student's quantile exact: [`student::quantile`]). The
/// interval ends are `observed + w · (q − observed)` for the 2.5th and
/// 97.5th nearest-rank percentiles `q`; the standard error is the
/// differences' standard deviation times `w / t`; the p-value is
/// [`bootstrap_p`] of the same widened differences.
pub(crate) fn bootstrap_diffs<const K: usize>(
    a: &mut Rollouts,
    b: &mut Rollouts,
    observed: [f64; K],
    stat: impl Fn(&mut [i64]) -> [f64; K],
    resamples: u32,
    rng: &mut Rng,
) -> [Estimate; K] {
    let rounds = resamples.max(1) as usize;
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    let mut sa: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    let mut sb: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for _ in 0..rounds {
        a.resample(rng, &mut ra);
        b.resample(rng, &mut rb);
        let (xa, xb) = (stat(&mut ra), stat(&mut rb));
        for k in 0..K {
            sa[k].push(xa[k]);
            sb[k].push(xb[k]);
        }
    }
    let (fa, fb) = (a.inflation(), b.inflation());
    let (na, nb) = (a.degrees_of_freedom(), b.degrees_of_freedom());
    std::array::from_fn(|k| {
        let mut d: Vec<f64> = sb[k].iter().zip(&sa[k]).map(|(y, x)| y - x).collect();
        let (va, vb) = (variance(&sa[k]), variance(&sb[k]));
        let (wa, wb) = (fa * va, fb * vb);
        let (inflate, nu) = if va + vb <= 0.0 {
            (1.0, na.min(nb))
        } else {
            (
                ((wa + wb) / (va + vb)).sqrt(),
                (wa + wb).powi(2) / (wa * wa / na + wb * wb / nb),
            )
        };
        let w = inflate * student::quantile(0.975, nu) / Z975;
        let se = variance(&d).sqrt() * inflate;
        // Widened around the observed difference (w > 0 keeps the order).
        for x in d.iter_mut() {
            *x = observed[k] + w * (*x - observed[k]);
        }
        d.sort_by(f64::total_cmp);
        let at = |q: f64| d[looptime_capture::quantile::nearest_rank_index(d.len(), q)];
        Estimate {
            estimate: observed[k],
            interval: [at(0.025), at(0.975)],
            se,
            p: bootstrap_p(&d, observed[k]),
            df: nu,
        }
    })
}

/// The standard normal's 97.5 % quantile.
pub(crate) const Z975: f64 = 1.959_963_984_540_054;

/// Nearest-rank quantile of `v` (reorders `v`; 0 when empty).
pub(crate) fn rank(v: &mut [i64], q: f64) -> i64 {
    looptime_capture::quantile::select_nearest_rank(v, q).unwrap_or(0)
}

/// The standard normal's upper tail doubled: the two-sided p-value of `z`.
/// `erfc` by the rational Chebyshev fit of Numerical Recipes' `erfcc`
/// (fractional error below 1.2 × 10⁻⁷ everywhere).
pub(crate) fn two_sided_p(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x);
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    (t * poly.exp()).min(1.0)
}

/// Holm's step-down adjustment of `p` (family-wise error rate): sort
/// ascending, multiply the `i`-th smallest (0-based) by `m − i`, make the
/// sequence non-decreasing, cap at 1; returned in the input order.
pub(crate) fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let mut out = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (i, &j) in order.iter().enumerate() {
        running = running.max(((m - i) as f64 * p[j]).min(1.0));
        out[j] = running;
    }
    out
}

#[cfg(test)]
#[path = "resample_tests.rs"]
mod tests;
