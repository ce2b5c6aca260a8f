//! The span table's distributions, computed once: wall and CPU time per
//! stage group (the stage report's rows) and per stage name (the summary's
//! grouping, which the cross-check compares).
//!
//! Each group's values are gathered once, in one pass over the span table,
//! and every percentile is read from them by successive selection
//! ([`super::table::dist_of`]), without a gather and a selection per
//! percentile and per grouping.

use std::collections::HashMap;

use polars::prelude::*;
use rayon::prelude::*;

use super::report::Dist;
use super::table::dist_of;
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
