//! Stages: wall and CPU distributions per phase, tree path and attribute
//! set, in tree order (docs/metrics.md, Stages).

use std::collections::HashMap;

use polars::prelude::*;

use super::report::{PhaseReport, StageReport};
use super::table::{cpu_measured, dist_aggs, dist_aggs_of, r4, Table};
use crate::error::Result;
use crate::evidence::{Evidence, GroupDecode};

/// Every stage group's report. `nominal` gives the shares of the period;
/// `phases` the report order of phases.
pub fn stage_reports(
    ev: &Evidence,
    phases: &[PhaseReport],
    nominal: Option<u64>,
    phase_name: &dyn Fn(u64) -> String,
) -> Result<Vec<StageReport>> {
    let mut aggs = vec![col("wall_ns").count().alias("count")];
    aggs.extend(dist_aggs("wall_ns"));
    aggs.extend(dist_aggs_of("cpu_ns", cpu_measured()));
    let by = Table {
        df: ev
            .spans
            .clone()
            .lazy()
            .group_by([col("key")])
            .agg(aggs)
            .collect()?,
    };
    // Names of each group were recorded by the loader the first time its
    // key appeared. Rows are ordered by where each path first appeared, so
    // the stage tree reads top-down.
    let info: HashMap<u64, &GroupDecode> = ev.groups.iter().map(|g| (g.key, g)).collect();
    let mut path_order: HashMap<u64, usize> = HashMap::new();
    for g in &ev.groups {
        if let Some(&own) = g.chain.last() {
            let n = path_order.len();
            path_order.entry(own).or_insert(n);
        }
    }
    let period = nominal.map(|p| p as f64);
    let keys = by.df.column("key")?.as_materialized_series().u64()?.clone();
    let mut rows = Vec::new();
    for i in 0..by.height() {
        let Some(g) = keys.get(i).and_then(|k| info.get(&k)) else {
            continue;
        };
        let Some(wall) = by.dist("wall_ns", i)? else {
            continue;
        };
        let order: Vec<usize> = g
            .chain
            .iter()
            .map(|k| path_order.get(k).copied().unwrap_or(usize::MAX))
            .collect();
        let report = StageReport {
            phase: phase_name(g.phase as u64),
            stage: ev
                .header
                .stages
                .get(g.stage as usize)
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            path: g.path.clone(),
            depth: g.depth,
            attrs: g.attrs.clone(),
            count: by.u("count", i)?,
            mean_share_of_period: period.map(|p| r4(wall.mean_ns / p)),
            p99_share_of_period: period.map(|p| r4(wall.p99_ns as f64 / p)),
            wall,
            cpu: by.dist("cpu_ns", i)?,
        };
        rows.push((order, report));
    }
    // Phases in report order, then tree order within a phase.
    let phase_pos = |name: &str| phases.iter().position(|p| p.phase == name);
    rows.sort_by(|a, b| {
        (phase_pos(&a.1.phase), &a.0, &a.1.attrs).cmp(&(phase_pos(&b.1.phase), &b.0, &b.1.attrs))
    });
    Ok(rows.into_iter().map(|(_, s)| s).collect())
}
