//! The nearest-rank percentile that every looptime figure uses
//! (docs/metrics.md): the value at 1-based rank ⌈q·n⌉ of the n values
//! sorted ascending. One definition for the analyzer, `probe`, `watch`, the
//! plots and the comparison's bootstrap.

/// The 0-based index, among `n ≥ 1` sorted values, of the nearest-rank
/// `q`-quantile: ⌈q·n⌉ − 1, clamped to the values (so `q = 0` is the
/// minimum and `q = 1` the maximum). `n = 0` gives 0.
///
/// ```
/// use looptime_capture::quantile::nearest_rank_index;
/// assert_eq!(nearest_rank_index(1200, 0.5), 599);  // rank 600
/// assert_eq!(nearest_rank_index(1200, 0.99), 1187); // rank 1188
/// ```
#[inline]
pub fn nearest_rank_index(n: usize, q: f64) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n.max(1)) - 1
}

/// How many of `n` sorted values lie above the nearest-rank `q`-quantile's
/// position: `n − ⌈q·n⌉` (with the rank clamped as in
/// [`nearest_rank_index`]), 0 when `n = 0`. The comparison uses it for the
/// samples its p99.9 rests on.
///
/// ```
/// use looptime_capture::quantile::beyond_nearest_rank;
/// assert_eq!(beyond_nearest_rank(1200, 0.999), 1); // rank 1199 of 1200
/// ```
#[inline]
pub fn beyond_nearest_rank(n: usize, q: f64) -> usize {
    if n == 0 {
        0
    } else {
        n - (nearest_rank_index(n, q) + 1)
    }
}

/// The nearest-rank `q`-quantile of `sorted` (ascending); `None` when empty.
#[inline]
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    (!sorted.is_empty()).then(|| sorted[nearest_rank_index(sorted.len(), q)])
}

/// The nearest-rank `q`-quantile of `v`, found by selection (reorders `v`;
/// no full sort); `None` when empty.
///
/// Inline, so that the selection is compiled with the caller's
/// optimisation: the comparison's bootstrap calls it millions of times in
/// the analyzer's optimised test build, and an unoptimised copy compiled
/// into capture's debug build made that test take 229 s instead of 27 s.
#[inline]
pub fn select_nearest_rank(v: &mut [i64], q: f64) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    let k = nearest_rank_index(v.len(), q);
    Some(*v.select_nth_unstable(k).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_the_ceiling_of_q_times_n() {
        // Hand-computed: ⌈0.5·10⌉ = 5 → index 4; ⌈0.99·10⌉ = ⌈9.9⌉ = 10 →
        // index 9; ⌈0.999·1200⌉ = ⌈1198.8⌉ = 1199 → index 1198; ⌈0.5·1⌉ = 1
        // → index 0; q = 0 clamps to rank 1; q = 1 is rank n.
        assert_eq!(nearest_rank_index(10, 0.5), 4);
        assert_eq!(nearest_rank_index(10, 0.99), 9);
        assert_eq!(nearest_rank_index(1200, 0.999), 1198);
        assert_eq!(nearest_rank_index(1, 0.5), 0);
        assert_eq!(nearest_rank_index(10, 0.0), 0);
        assert_eq!(nearest_rank_index(10, 1.0), 9);
        assert_eq!(nearest_rank_index(0, 0.5), 0);
        // 1..=100: the p50 is 50 (rank 50), the p99 is 99, the p25 of four
        // values [10, 20, 30, 40] is 10 (rank ⌈1⌉ = 1).
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 0.5), Some(50));
        assert_eq!(nearest_rank(&v, 0.99), Some(99));
        assert_eq!(nearest_rank(&[10, 20, 30, 40], 0.25), Some(10));
        assert_eq!(nearest_rank::<i64>(&[], 0.5), None);
        let mut shuffled = vec![7, 3, 9, 1, 5];
        assert_eq!(select_nearest_rank(&mut shuffled, 0.5), Some(5));
        assert_eq!(select_nearest_rank(&mut [], 0.5), None);
        // Beyond the rank: 1200 − 1199 = 1; 5000 − ⌈4995⌉ = 5; ten values
        // have their p99.9 at rank 10, nothing beyond; none have none.
        assert_eq!(beyond_nearest_rank(1200, 0.999), 1);
        assert_eq!(beyond_nearest_rank(5000, 0.999), 5);
        assert_eq!(beyond_nearest_rank(10, 0.999), 0);
        assert_eq!(beyond_nearest_rank(0, 0.999), 0);
        assert_eq!(beyond_nearest_rank(10, 0.5), 5);
    }
}
