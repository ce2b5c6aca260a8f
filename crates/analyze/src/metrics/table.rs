//! Aggregation helpers shared by the metric families: the distribution
//! (count, mean, min, max, nearest-rank p50/p90/p99/p99.9: the value at
//! 1-based rank ⌈p·N⌉ of the sorted values, polars' `Equiprobable`; a test
//! holds them equal), loop Hz from a mean period, and the report's rounding.
//!
//! A distribution is read from its values gathered once, every percentile
//! (its rank `looptime_capture::quantile::nearest_rank_index`, the one
//! definition) by successive selection: the p50 rank is selected over all of them, the
//! p90 rank over what lies above it, and so on (no sort, no group-by).

use looptime_capture::quantile::nearest_rank_index;

use super::report::Dist;

pub(crate) fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
pub(crate) fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Loop (or command) Hz of a mean period: `1e9 / mean`, rounded to 10⁻⁴;
/// none without a positive mean.
pub(crate) fn hz(mean_period: Option<f64>) -> Option<f64> {
    mean_period.filter(|m| *m > 0.0).map(|m| r4(1e9 / m))
}

/// The nearest-rank percentiles the report gives, in increasing order.
const QS: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// The distribution of `v` (reordered in place), `None` when empty.
pub(crate) fn dist_of(v: &mut [i64]) -> Option<Dist> {
    dist_and_mean(v).map(|(d, _)| d)
}

/// The distribution of `v` (reordered in place) and its mean unrounded
/// (`Σ v / N`, the sum exact), `None` when empty.
pub(crate) fn dist_and_mean(v: &mut [i64]) -> Option<(Dist, f64)> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (mut min, mut max, mut sum) = (i64::MAX, i64::MIN, 0i128);
    for &x in v.iter() {
        min = min.min(x);
        max = max.max(x);
        sum += x as i128;
    }
    // Ranks never decrease along QS: after selecting rank r, v[r + 1..]
    // holds the values at or above it, where the next rank is selected.
    let mut q = [0i64; 4];
    let mut fixed = 0usize; // v[..fixed] is in its sorted place
    for (k, p) in QS.iter().enumerate() {
        let r = nearest_rank_index(n, *p);
        if r >= fixed {
            v[fixed..].select_nth_unstable(r - fixed);
            fixed = r + 1;
        }
        q[k] = v[r];
    }
    let mean = sum as f64 / n as f64;
    let d = Dist {
        count: n as u64,
        mean_ns: r1(mean),
        min_ns: min,
        p50_ns: q[0],
        p90_ns: q[1],
        p99_ns: q[2],
        p999_ns: q[3],
        max_ns: max,
    };
    Some((d, mean))
}

/// The distribution of a column's present values in `rows`, and their
/// unrounded mean; `scratch` is reused for the gather.
pub(crate) fn dist_in(
    rows: &[std::ops::Range<usize>],
    value: &dyn Fn(usize) -> Option<i64>,
    scratch: &mut Vec<i64>,
) -> Option<(Dist, f64)> {
    scratch.clear();
    for r in rows {
        scratch.extend(r.clone().filter_map(value));
    }
    dist_and_mean(scratch)
}

/// The distribution of a column's present values.
pub(crate) fn dist_of_column(col: &[Option<i64>]) -> Option<Dist> {
    let mut v: Vec<i64> = col.iter().flatten().copied().collect();
    dist_of(&mut v)
}

#[cfg(test)]
mod tests {
    use polars::prelude::*;

    use super::*;

    /// The reference: polars' count, mean, min, max and `Equiprobable`
    /// quantiles of column `x` (what the report used before the selection).
    fn polars_dist(v: &[i64]) -> Option<Dist> {
        let df = df!("x" => v).unwrap();
        let mut aggs = vec![
            col("x").count().alias("count"),
            col("x").mean().alias("mean"),
            col("x").min().alias("min"),
            col("x").max().alias("max"),
        ];
        for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
            aggs.push(
                col("x")
                    .quantile(lit(q), QuantileMethod::Equiprobable)
                    .alias(name),
            );
        }
        let t = df.lazy().select(aggs).collect().unwrap();
        let f = |name: &str| {
            let s = t.column(name).unwrap().as_materialized_series();
            s.cast(&DataType::Float64).unwrap().f64().unwrap().get(0)
        };
        if f("count")? == 0.0 {
            return None;
        }
        let i = |name: &str| f(name).unwrap() as i64;
        Some(Dist {
            count: f("count")? as u64,
            mean_ns: r1(f("mean")?),
            min_ns: i("min"),
            p50_ns: i("p50"),
            p90_ns: i("p90"),
            p99_ns: i("p99"),
            p999_ns: i("p999"),
            max_ns: i("max"),
        })
    }

    #[test]
    fn percentiles_are_nearest_rank_like_polars_equiprobable() {
        // 1..=1000 shuffled: rank ⌈p·N⌉ is 500, 900, 990, 999 (1-based),
        // the values themselves; mean 500.5; then polars on the same values.
        let mut v: Vec<i64> = (1..=1000).map(|i| (i * 617) % 1000 + 1).collect();
        let d = dist_of(&mut v.clone()).unwrap();
        assert_eq!(
            (d.p50_ns, d.p90_ns, d.p99_ns, d.p999_ns),
            (500, 900, 990, 999)
        );
        assert_eq!(
            (d.count, d.min_ns, d.max_ns, d.mean_ns),
            (1000, 1, 1000, 500.5)
        );
        // Against polars itself, on sizes where the ranks meet (1, 2, 3) and
        // on repeated values.
        for n in [1usize, 2, 3, 7, 10, 999, 1001, 4096] {
            v = (0..n as i64).map(|i| (i * 7919) % 97 - 20).collect();
            assert_eq!(dist_of(&mut v.clone()), polars_dist(&v), "n = {n}");
        }
        assert_eq!(dist_of(&mut []), None);
    }

    #[test]
    fn a_gather_over_ranges_skips_absent_values_and_keeps_the_raw_mean() {
        // Rows 0..3 and 5..7 of [1, -, 4, 9, 9, -, 2]: present 1, 4, 2
        // (rows 3 and 4 are outside the ranges); mean 7/3 unrounded, 2.3
        // in the report.
        let col = [Some(1), None, Some(4), Some(9), Some(9), None, Some(2)];
        let mut scratch = vec![99; 3];
        let (d, mean) = dist_in(&[0..3, 5..7], &|i| col[i], &mut scratch).unwrap();
        assert_eq!((d.count, d.min_ns, d.p50_ns, d.max_ns), (3, 1, 2, 4));
        assert_eq!((d.mean_ns, mean), (2.3, 7.0 / 3.0));
        assert_eq!(dist_in(&[1..2, 5..6], &|i| col[i], &mut scratch), None);
        assert_eq!(dist_of_column(&col), polars_dist(&[1, 4, 9, 9, 2]));
    }
}
