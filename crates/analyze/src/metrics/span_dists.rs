//! The span table's distributions, computed once: wall and CPU time per
//! stage group (the stage report's rows) and per stage name (the summary's
//! grouping, which the cross-check compares).
//!
//! Each group's values are gathered once, in one pass over the span table,
//! and every percentile is read from them by successive selection: the p50
//! rank is selected over the whole group, the p90 rank over what lies above
//! it, and so on. The figures are the distribution [`super::table`] gives
//! (count, mean, min, max, nearest-rank p50/p90/p99/p99.9: the value at
//! 1-based rank ⌈p·N⌉, polars' `Equiprobable`), without a gather and a
//! selection per percentile and per grouping.

use std::collections::HashMap;

use polars::prelude::*;
use rayon::prelude::*;

use super::report::Dist;
use super::table::r1;
use crate::error::Result;

/// One group's spans: their count, wall time and measured CPU time.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SpanDist {
    /// Spans in the group.
    pub(crate) count: u64,
    /// Wall time (present when `count` > 0).
    pub(crate) wall: Option<Dist>,
    /// CPU time of the spans that measured it.
    pub(crate) cpu: Option<Dist>,
}

/// The span table's distributions by group key and by stage.
#[derive(Debug, Default)]
pub(crate) struct SpanDists {
    /// Per stage group: (group key, its spans).
    pub(crate) by_key: Vec<(u64, SpanDist)>,
    /// Per stage, in stage order: (stage index, its spans in every group).
    pub(crate) by_stage: Vec<(u32, SpanDist)>,
}

/// The nearest-rank percentiles the report gives, in increasing order.
const QS: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// The distribution of `v` (reordered in place), `None` when empty.
pub(crate) fn dist_of(v: &mut [i64]) -> Option<Dist> {
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
        let r = (((n as f64 * p).ceil() - 1.0).max(0.0) as usize).min(n - 1);
        if r >= fixed {
            v[fixed..].select_nth_unstable(r - fixed);
            fixed = r + 1;
        }
        q[k] = v[r];
    }
    Some(Dist {
        count: n as u64,
        mean_ns: r1(sum as f64 / n as f64),
        min_ns: min,
        p50_ns: q[0],
        p90_ns: q[1],
        p99_ns: q[2],
        p999_ns: q[3],
        max_ns: max,
    })
}

/// A column of the span table as one slice (copied only when it is not
/// one chunk without nulls; the loader makes it one).
fn slice<'a, T: PolarsNumericType>(
    ca: &'a ChunkedArray<T>,
    owned: &'a mut Vec<T::Native>,
) -> &'a [T::Native] {
    match ca.cont_slice() {
        Ok(s) => s,
        Err(_) => {
            *owned = ca.iter().map(|v| v.unwrap_or_default()).collect();
            owned
        }
    }
}

/// One group's values while they are gathered.
#[derive(Default)]
struct Gathered {
    stage: u32,
    wall: Vec<i64>,
    cpu: Vec<i64>,
}

impl Gathered {
    fn dist(&mut self) -> SpanDist {
        SpanDist {
            count: self.wall.len() as u64,
            wall: dist_of(&mut self.wall),
            cpu: dist_of(&mut self.cpu),
        }
    }
}

/// Every distribution of the span table (`key`, `stage`, `wall_ns`,
/// `cpu_ns`; a CPU time below 0 is "not measured").
///
/// # Errors
/// Only when the table lacks a column.
pub(crate) fn span_dists(spans: &DataFrame) -> Result<SpanDists> {
    let col = |name: &str| spans.column(name).map(|c| c.as_materialized_series());
    let (key_s, stage_s, wall_s, cpu_s) =
        (col("key")?, col("stage")?, col("wall_ns")?, col("cpu_ns")?);
    let (mut k_own, mut s_own, mut w_own, mut c_own) = Default::default();
    let key = slice(key_s.u64()?, &mut k_own);
    let stage = slice(stage_s.u32()?, &mut s_own);
    let wall = slice(wall_s.i64()?, &mut w_own);
    let cpu = slice(cpu_s.i64()?, &mut c_own);
    let mut groups: Vec<(u64, Gathered)> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    // Keys are well mixed: a direct-mapped cache by their low bits answers
    // almost every span without hashing (a cycle has few distinct keys).
    let mut cache = [(u64::MAX, usize::MAX); 256];
    for i in 0..key.len() {
        let k = key[i];
        let slot = &mut cache[(k & 255) as usize];
        let g = if slot.0 == k && slot.1 != usize::MAX {
            slot.1
        } else {
            let g = *index.entry(k).or_insert_with(|| {
                let stage = stage[i];
                groups.push((
                    k,
                    Gathered {
                        stage,
                        ..Default::default()
                    },
                ));
                groups.len() - 1
            });
            *slot = (k, g);
            g
        };
        let grp = &mut groups[g].1;
        grp.wall.push(wall[i]);
        if cpu[i] >= 0 {
            grp.cpu.push(cpu[i]);
        }
    }
    let by_key: Vec<(u64, SpanDist)> = groups.par_iter_mut().map(|(k, g)| (*k, g.dist())).collect();
    // Per stage: a stage in one group has that group's figures; else its
    // groups' values (reordered, the same values) are pooled.
    let mut stages: Vec<u32> = groups.iter().map(|(_, g)| g.stage).collect();
    stages.sort_unstable();
    stages.dedup();
    let by_stage = stages
        .into_par_iter()
        .map(|s| {
            let mine: Vec<usize> = (0..groups.len())
                .filter(|&g| groups[g].1.stage == s)
                .collect();
            if let [one] = mine[..] {
                return (s, by_key[one].1.clone());
            }
            let mut pooled = Gathered::default();
            for &g in &mine {
                pooled.wall.extend_from_slice(&groups[g].1.wall);
                pooled.cpu.extend_from_slice(&groups[g].1.cpu);
            }
            (s, pooled.dist())
        })
        .collect();
    Ok(SpanDists { by_key, by_stage })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let df = df!("x" => &v).unwrap();
            let t = super::super::table::Table {
                df: df
                    .lazy()
                    .select(super::super::table::dist_aggs("x"))
                    .collect()
                    .unwrap(),
            };
            assert_eq!(dist_of(&mut v), t.dist("x", 0).unwrap(), "n = {n}");
        }
        assert_eq!(dist_of(&mut []), None);
    }
}
