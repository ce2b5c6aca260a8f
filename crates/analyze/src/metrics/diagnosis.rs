//! The diagnosis: the pace the run was judged against, per-cycle attribution
//! of late cycles to the predecessor's work or the wake, and the verdict
//! lines (docs/metrics.md, Diagnosis).

use std::collections::HashMap;

use super::columns::{nominal_period, schedule_comparable, CycleColumns};
use super::report::{Lateness, Pace, PhaseReport, StageBlame};
use super::table::r4;
use crate::error::Result;
use crate::evidence::{Evidence, GroupDecode};
use looptime_capture::ClockDomain;

/// A late start's threshold, as a share of the effective period: a cycle
/// whose deadline lag exceeds it counts as late (besides overdue cycles).
pub const LATE_START_SHARE: f64 = 0.10;

/// The pace of `ev`: the nominal period from the header; rtf from the
/// manifest's `config.run.rtf`, else the header's `metadata.rtf`, else 1;
/// the effective period from the manifest's `schedule.effective_period_ns`,
/// else nominal / rtf. Targets on the simulation clock, or rtf 0, mean an
/// uncapped run.
pub fn pace(ev: &Evidence) -> Pace {
    let h = &ev.header;
    let Some(nominal) = nominal_period(h) else {
        return Pace::Unknown;
    };
    let m = ev.manifest.as_ref();
    let rtf = m
        .and_then(|m| m.pointer("/config/run/rtf"))
        .and_then(|v| v.as_f64())
        .or_else(|| h.metadata.get("rtf").and_then(|r| r.parse::<f64>().ok()))
        .filter(|r| r.is_finite() && *r >= 0.0)
        .unwrap_or(1.0);
    if rtf == 0.0 || h.clocks.target_ns == ClockDomain::Simulation {
        return Pace::Uncapped;
    }
    let derived = ((nominal as f64) / rtf).round().max(1.0) as u64;
    // The manifest's effective period, unless it contradicts the header's
    // nominal period at this rtf (then the evidence's own is used, and a
    // caveat says so: `effective_contradiction`).
    let effective = manifest_effective(ev)
        .filter(|&e| !contradicts(e, derived))
        .unwrap_or(derived);
    Pace::Paced {
        nominal_ns: nominal,
        effective_ns: effective,
        rtf,
    }
}

/// The manifest's `schedule.effective_period_ns`, when it holds one.
fn manifest_effective(ev: &Evidence) -> Option<u64> {
    ev.manifest
        .as_ref()
        .and_then(|m| m.pointer("/schedule/effective_period_ns"))
        .and_then(|v| v.as_u64())
        .filter(|&e| e > 0)
}

/// Whether a manifest's effective period is more than 1 % from the
/// header's nominal period divided by the rtf.
fn contradicts(manifest_ns: u64, derived_ns: u64) -> bool {
    (manifest_ns as f64 - derived_ns as f64).abs() > 0.01 * derived_ns as f64
}

/// The manifest's effective period and the header's nominal / rtf, when
/// they contradict each other (more than 1 % apart): the pace uses the
/// header's, and the report's caveat names both.
pub fn effective_contradiction(ev: &Evidence) -> Option<(u64, u64, f64)> {
    let Pace::Paced {
        effective_ns, rtf, ..
    } = pace(ev)
    else {
        return None;
    };
    let m = manifest_effective(ev)?;
    (m != effective_ns).then_some((m, effective_ns, rtf))
}

/// The phase the diagnosis judges: `running` when it has cycles, else the
/// phase with the most cycles, the earliest to appear winning a tie.
pub fn judged_phase(ev: &Evidence) -> Option<u32> {
    let mut counts: Vec<(u32, u64)> = Vec::new();
    for c in &ev.cycles {
        match counts.iter_mut().find(|(p, _)| *p == c.phase) {
            Some(e) => e.1 += 1,
            None => counts.push((c.phase, 1)),
        }
    }
    let running = counts.iter().find(|(p, _)| {
        ev.header
            .phases
            .get(*p as usize)
            .is_some_and(|n| n == "running")
    });
    let best = counts
        .iter()
        .fold(None, |best: Option<(u32, u64)>, &(p, n)| match best {
            Some((_, bn)) if bn >= n => best,
            _ => Some((p, n)),
        });
    running.copied().or(best).map(|(p, _)| p)
}

/// Attribute every late cycle of `phase` to its predecessor's work or to
/// the wake (docs/metrics.md, Diagnosis). `None` without a paced schedule.
pub fn attribute_lateness(
    ev: &Evidence,
    cc: &CycleColumns,
    phase: u32,
    pace: Pace,
) -> Result<Option<Lateness>> {
    let Pace::Paced { effective_ns, .. } = pace else {
        return Ok(None);
    };
    // The declared compute budget and deadline tolerance replace the
    // period and 10 % of it, when the evidence declares them.
    let declared_budget = ev.header.compute_budget_ns.filter(|&b| b > 0);
    let declared_tolerance = ev.header.deadline_tolerance_ns;
    let budget = declared_budget.unwrap_or(effective_ns) as i64;
    let comparable = schedule_comparable(&ev.header);
    let threshold = comparable.then(|| match declared_tolerance {
        Some(t) => t as i64,
        None => (LATE_START_SHARE * effective_ns as f64).round() as i64,
    });
    let wall = ev
        .spans
        .column("wall_ns")?
        .as_materialized_series()
        .i64()?
        .clone();
    let keys = ev
        .spans
        .column("key")?
        .as_materialized_series()
        .u64()?
        .clone();
    let groups: HashMap<u64, &GroupDecode> = ev.groups.iter().map(|g| (g.key, g)).collect();
    let mut l = Lateness {
        phase: ev.phase_name(phase),
        budget_ns: budget as u64,
        late_start_threshold_ns: threshold.map(|t| t as u64),
        budget_declared: declared_budget.is_some(),
        tolerance_declared: declared_tolerance.is_some() && comparable,
        judged: 0,
        late: 0,
        work_over_budget: 0,
        late_wake: 0,
        unattributed: 0,
        stages: Vec::new(),
    };
    let mut blame: Vec<(String, u64)> = Vec::new();
    for i in 1..ev.cycles.len() {
        // A predecessor in the same segment is what `period` requires.
        if cc.phase[i] != phase || cc.period[i].is_none() {
            continue;
        }
        l.judged += 1;
        let c = &ev.cycles[i];
        let lag_late = match (threshold, cc.lag[i]) {
            (Some(t), Some(lag)) => lag > t,
            _ => false,
        };
        if !(c.overdue || lag_late) {
            continue;
        }
        l.late += 1;
        match cc.work[i - 1] {
            None => l.unattributed += 1,
            Some(w) if w > budget => {
                l.work_over_budget += 1;
                let name = longest_top_span(&ev.cycles[i - 1], &keys, &wall, &groups);
                match blame.iter_mut().find(|(n, _)| n == name) {
                    Some(b) => b.1 += 1,
                    None => blame.push((name.to_string(), 1)),
                }
            }
            Some(_) => l.late_wake += 1,
        }
    }
    l.stages = blamed_stages(blame, l.work_over_budget);
    Ok(Some(l))
}

/// The stages blamed for over-budget cycles, most cycles first (a tie
/// keeps the order of first appearance), with their share of `over`.
fn blamed_stages(mut blame: Vec<(String, u64)>, over: u64) -> Vec<StageBlame> {
    blame.sort_by_key(|b| std::cmp::Reverse(b.1));
    blame
        .into_iter()
        .map(|(path, cycles)| StageBlame {
            share: r4(cycles as f64 / over.max(1) as f64),
            path,
            cycles,
        })
        .collect()
}

/// The tree path of the longest top-level span of cycle `p` (its first,
/// on a tie), or "(no top-level span)".
fn longest_top_span<'a>(
    p: &crate::evidence::CycleRow,
    keys: &polars::prelude::UInt64Chunked,
    wall: &polars::prelude::Int64Chunked,
    groups: &HashMap<u64, &'a GroupDecode>,
) -> &'a str {
    let mut top: Option<(i64, &str)> = None;
    for row in p.span_row..p.span_row + p.n_spans as u64 {
        let (Some(k), Some(wl)) = (keys.get(row as usize), wall.get(row as usize)) else {
            continue;
        };
        let Some(g) = groups.get(&k).filter(|g| g.depth == 0) else {
            continue;
        };
        if top.is_none_or(|(best, _)| wl > best) {
            top = Some((wl, g.path.as_str()));
        }
    }
    top.map_or("(no top-level span)", |(_, n)| n)
}

fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// The diagnosis of an uncapped run: its rate on the host, not judged.
fn uncapped(phases: &[PhaseReport]) -> String {
    let p = phases
        .iter()
        .find(|p| p.phase == "running")
        .or(phases.first());
    match p {
        Some(p) => format!(
            "{}: uncapped run (rtf 0, scheduled on the simulation clock): it ran as fast as its work allowed, {} Hz on the host; there is no host-time period to judge it against",
            p.phase,
            p.loop_hz.map_or("?".to_string(), |h| format!("{h:.2}"))
        ),
        None => "no cycles to judge".into(),
    }
}

/// The diagnosis line of a phase with late cycles: the work or scheduling,
/// with the counts and the advice.
fn late_line(phase: &str, late: &Lateness, against: &str, threshold: &str) -> String {
    let dominant = late.stages.first().map_or(String::new(), |s| {
        format!(
            ", dominated by {} ({} of {})",
            s.path, s.cycles, late.work_over_budget
        )
    });
    let (verdict, advice) = if late.work_over_budget >= late.late_wake {
        (
            "the work itself",
            "shorten or move off the loop the stage that dominates",
        )
    } else {
        (
            "scheduling",
            "look at the wait and wake path (timer slack, priority, host load), not the work",
        )
    };
    format!(
        "{phase}: {verdict} — {} of {} cycles were overdue{threshold}. {} ({:.1} %) followed a cycle whose work exceeded {against}{dominant}; {} ({:.1} %) followed work within it, so the time was lost in the wait and wake path{}; {advice}",
        late.late,
        late.judged,
        late.work_over_budget,
        pct(late.work_over_budget, late.late),
        late.late_wake,
        pct(late.late_wake, late.late),
        if late.unattributed > 0 {
            format!("; {} could not be attributed (open predecessor)", late.unattributed)
        } else {
            String::new()
        },
    )
}

/// The diagnosis lines: is it scheduling or the work? Built from the
/// per-cycle attribution; the rules are in docs/metrics.md.
pub fn diagnose(phases: &[PhaseReport], pace: Pace, late: Option<&Lateness>) -> Vec<String> {
    let (nominal, effective, rtf) = match pace {
        Pace::Unknown => {
            return vec!["no nominal period in the header: cannot judge the rate".into()]
        }
        Pace::Uncapped => return vec![uncapped(phases)],
        Pace::Paced {
            nominal_ns,
            effective_ns,
            rtf,
        } => (nominal_ns, effective_ns, rtf),
    };
    let Some(late) = late else {
        return vec!["no cycles to judge".into()];
    };
    let Some(p) = phases.iter().find(|p| p.phase == late.phase) else {
        return vec!["no cycles to judge".into()];
    };
    let (Some(per), Some(work)) = (&p.period, &p.work) else {
        return vec![format!("{}: too few cycles to judge the rate", p.phase)];
    };
    let period = effective as f64;
    let against = if effective == nominal {
        format!("the {:.3} ms period", period / 1e6)
    } else {
        format!(
            "the effective {:.3} ms period (nominal {:.3} ms / rtf {rtf})",
            period / 1e6,
            nominal as f64 / 1e6
        )
    };
    let threshold = late.late_start_threshold_ns.map_or(String::new(), |t| {
        format!(
            " or started more than {:.3} ms late{}",
            t as f64 / 1e6,
            if late.tolerance_declared {
                " (the declared deadline tolerance)"
            } else {
                ""
            }
        )
    });
    // The work is judged against the declared compute budget, when there
    // is one, and the words say which it was.
    let work_against = if late.budget_declared {
        format!(
            "the declared {:.3} ms compute budget",
            late.budget_ns as f64 / 1e6
        )
    } else {
        against.clone()
    };
    let mut out = Vec::new();
    if late.late == 0 {
        out.push(format!(
            "{}: on rate — {} Hz against {against}; no cycle was overdue{threshold}; period p99 {:+.1} % of the period, work {:.0} % of it at p99",
            p.phase,
            p.loop_hz.map_or("?".to_string(), |h| format!("{h:.2}")),
            (per.p99_ns as f64 / period - 1.0) * 100.0,
            work.p99_ns as f64 / period * 100.0
        ));
    } else {
        out.push(late_line(&p.phase, late, &work_against, &threshold));
    }
    if p.overruns > 0 {
        out.push(format!(
            "{}: {} of {} cycles found their release point already passed",
            p.phase, p.overruns, p.cycles
        ));
    }
    out
}
