//! Stages: wall and CPU distributions per phase, tree path and attribute
//! set, in tree order (docs/metrics.md, Stages).

use std::collections::HashMap;

use super::report::{PhaseReport, StageReport};
use super::span_dists::SpanDist;
use super::table::r4;
use crate::evidence::{Evidence, GroupDecode};

/// Every stage group's report. `nominal` gives the shares of the period;
/// `phases` the report order of phases.
pub(crate) fn stage_reports(
    ev: &Evidence,
    by_key: &[(u64, SpanDist)],
    phases: &[PhaseReport],
    nominal: Option<u64>,
    phase_name: &dyn Fn(u64) -> String,
) -> Vec<StageReport> {
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
    let mut rows = Vec::new();
    for (key, d) in by_key {
        let Some(g) = info.get(key) else {
            continue;
        };
        let Some(wall) = d.wall.clone() else {
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
            count: d.count,
            mean_share_of_period: period.map(|p| r4(wall.mean_ns / p)),
            p99_share_of_period: period.map(|p| r4(wall.p99_ns as f64 / p)),
            wall,
            cpu: d.cpu.clone(),
        };
        rows.push((order, report));
    }
    // Phases in report order, then tree order within a phase.
    let phase_pos = |name: &str| phases.iter().position(|p| p.phase == name);
    rows.sort_by(|a, b| {
        (phase_pos(&a.1.phase), &a.0, &a.1.attrs).cmp(&(phase_pos(&b.1.phase), &b.0, &b.1.attrs))
    });
    rows.into_iter().map(|(_, s)| s).collect()
}
