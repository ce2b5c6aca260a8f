//! The compute budget and the deadline tolerance a runtime declared (the
//! header's `compute_budget_ns` and `deadline_tolerance_ns`; absent unless
//! declared, and then this family is absent too): per phase, the budget
//! overruns (work longer than the budget: statistics only, the release
//! timeline is the scheduler's) and the completion misses (a finish later
//! than the next release point plus the tolerance), each with its count,
//! share and the excess's max and p99 (docs/metrics.md, Budget and
//! tolerance). Input-paced and uncapped phases have no release point: they
//! report budget overruns only.

use super::columns::CycleColumns;
use super::report::{BudgetPhase, BudgetReport, Misses, Pace};
use super::table::{dist_of, r4};
use crate::evidence::Evidence;

/// The family (absent when the evidence declares neither figure).
/// `effective_ns` is the pace's effective period when the run was paced.
pub fn budget(ev: &Evidence, cc: &CycleColumns, pace: Pace) -> Option<BudgetReport> {
    let h = &ev.header;
    let (budget, tolerance) = (h.compute_budget_ns, h.deadline_tolerance_ns);
    if budget.is_none() && tolerance.is_none() {
        return None;
    }
    let effective = match pace {
        Pace::Paced { effective_ns, .. } => Some(effective_ns as i64),
        _ => None,
    };
    let comparable = super::columns::schedule_comparable(h);
    let phases = (0..h.phases.len() as u32)
        .filter_map(|ph| {
            let rows: Vec<usize> = (0..ev.cycles.len())
                .filter(|&r| cc.phase[r] == ph)
                .collect();
            if rows.is_empty() {
                return None;
            }
            let over = budget.map(|b| {
                misses(
                    rows.iter()
                        .filter_map(|&r| cc.work[r])
                        .map(|w| w - b as i64),
                )
            });
            // The next release point is one effective period after the
            // cycle's own, on the schedule's clock; an input-paced cycle
            // has none.
            let completion = match (tolerance, effective, comparable) {
                (Some(t), Some(p), true) => Some(misses(rows.iter().filter_map(|&r| {
                    let c = &ev.cycles[r];
                    if c.input_paced {
                        return None;
                    }
                    Some(c.end_ns? - (c.target_ns? + p + t as i64))
                }))),
                _ => None,
            };
            Some(BudgetPhase {
                phase: ev.phase_name(ph),
                cycles: rows.len() as u64,
                budget_overruns: over,
                completion_misses: completion,
            })
        })
        .collect();
    Some(BudgetReport {
        compute_budget_ns: budget,
        deadline_tolerance_ns: tolerance,
        phases,
    })
}

/// Of the `excess` of each judged cycle over its limit (positive: a miss),
/// the misses: how many, their share of the judged cycles (rounded to
/// 10⁻⁴), and the distribution of the positive excesses.
fn misses(excess: impl Iterator<Item = i64>) -> Misses {
    let (mut judged, mut over) = (0u64, Vec::new());
    for e in excess {
        judged += 1;
        if e > 0 {
            over.push(e);
        }
    }
    let count = over.len() as u64;
    Misses {
        judged,
        count,
        share: (judged > 0).then(|| r4(count as f64 / judged as f64)),
        excess: dist_of(&mut over),
    }
}
