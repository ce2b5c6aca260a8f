//! The text summary of `fleet`: totals, the worst episodes of each phase,
//! the outliers, and the episodes that failed (rules in docs/fleet.md).

use std::fmt::Write as _;

use crate::fleet::outliers::Summary;
use crate::fleet::{FleetRow, OutlierMetric, OUTLIER_MIN_ROWS, OUTLIER_Z};

fn ms(ns: Option<i64>) -> String {
    ns.map_or_else(|| "-".into(), |v| super::fixed(v as f64 / 1e6, 3))
}

fn who(r: &FleetRow) -> String {
    format!("{}/{}/{}", r.robot, r.session, r.rollout)
}

/// One worst list as a table.
fn table(s: &mut String, rows: &[&FleetRow]) {
    let _ = writeln!(
        s,
        "  {:<44} {:>9} {:>9} {:>9} {:>8} {:>9}  top stage by p99",
        "robot/session/rollout", "p99/nom", "p99 ms", "p99.9 ms", "ovr/1k", "work p99"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "  {:<44} {:>9} {:>9} {:>9} {:>8} {:>9}  {}",
            who(r),
            r.period_p99_rel().map_or("-".into(), |x| format!("{x:.3}")),
            ms(r.period_p99_ns),
            ms(r.period_p999_ns),
            r.overruns_per_1000
                .map_or("-".into(), |x| format!("{x:.1}")),
            ms(r.work_p99_ns),
            match (&r.top_stage, r.top_stage_p99_ns) {
                (Some(t), p) => format!("{t} ({} ms)", ms(p)),
                _ => "-".into(),
            }
        );
    }
}

/// The summary as text. `elapsed_s` and `jobs` describe the run.
pub fn render(fleet: &Summary<'_>, elapsed_s: f64, jobs: usize) -> String {
    let mut s = String::new();
    let mb = fleet.bytes as f64 / 1e6;
    let _ = writeln!(
        s,
        "fleet: {} episodes found, {} analyzed, {} failed; {} cycles, {:.1} MB of JSONL in {:.1} s ({:.0} MB/s on {} workers)",
        fleet.found,
        fleet.analyzed,
        fleet.failed,
        fleet.cycles,
        mb,
        elapsed_s,
        if elapsed_s > 0.0 { mb / elapsed_s } else { 0.0 },
        jobs
    );
    for list in &fleet.worst {
        worst(&mut s, list);
    }
    let outliers = &fleet.outliers;
    let _ = writeln!(
        s,
        "\noutliers (modified z-score > {OUTLIER_Z} within a phase of at least {OUTLIER_MIN_ROWS} rows, high side; metrics: {}): {}",
        OutlierMetric::ALL.map(OutlierMetric::name).join(", "),
        if outliers.is_empty() {
            "none".to_string()
        } else {
            outliers.len().to_string()
        }
    );
    for named in outliers {
        let (o, r) = (&named.outlier, named.row);
        let _ = writeln!(
            s,
            "  {} `{}`: {} = {:.3} (phase median {:.3}, z = {:.1})",
            who(r),
            r.phase,
            o.metric.name(),
            o.value,
            o.median,
            o.z
        );
    }
    if !fleet.failures.is_empty() {
        let _ = writeln!(
            s,
            "\nfailed ({}), left out of the table:",
            fleet.failures.len()
        );
        for f in fleet.failures {
            let _ = writeln!(s, "  {} [{}]: {}", f.dir.display(), f.kind, f.message);
        }
    }
    s
}

/// One phase's worst lists: by period p99, by overruns, by stale data-age
/// uses and by late answers when there are any.
fn worst(s: &mut String, list: &crate::fleet::outliers::WorstList<'_>) {
    let (phase, rows) = (list.phase, list.rows_in_phase);
    let _ = writeln!(
        s,
        "\nworst {} of {rows} in phase `{phase}` by period p99 / nominal period (then overruns per 1000):",
        list.by_period_p99.len()
    );
    if list.by_period_p99.is_empty() {
        let _ = writeln!(s, "  none ranked (no period p99 or no nominal period)");
    } else {
        table(s, &list.by_period_p99);
    }
    let _ = writeln!(
        s,
        "worst {} of {rows} in phase `{phase}` by overruns per 1000 cycles:",
        list.by_overruns.len()
    );
    if list.by_overruns.is_empty() {
        let _ = writeln!(s, "  none overran");
    } else {
        table(s, &list.by_overruns);
    }
    if !list.by_stale_share.is_empty() {
        let _ = writeln!(
            s,
            "worst {} of {rows} in phase `{phase}` by stale data-age uses (the worst source's share; fleet_sources.csv has every source):",
            list.by_stale_share.len()
        );
        for r in &list.by_stale_share {
            let _ = writeln!(
                s,
                "  {}/{}/{}  stale {:.2} %, age p99 {} ms",
                super::text::terminal_safe(&r.robot),
                super::text::terminal_safe(&r.session),
                super::text::terminal_safe(&r.rollout),
                r.max_stale_share.unwrap_or(0.0) * 100.0,
                r.max_age_p99_ms.map_or("-".into(), |m| format!("{m:.3}"))
            );
        }
    }
    if !list.by_late_share.is_empty() {
        let _ = writeln!(
            s,
            "worst {} of {rows} in phase `{phase}` by late answers (input-paced):",
            list.by_late_share.len()
        );
        for r in &list.by_late_share {
            let i = &r.input;
            let _ = writeln!(
                s,
                "  {}/{}/{}  late {:.2} % ({} answers), answer latency p99 {} ms, lost {} before arrival + {} after a late answer + {} discarded, success min {}",
                super::text::terminal_safe(&r.robot),
                super::text::terminal_safe(&r.session),
                super::text::terminal_safe(&r.rollout),
                i.late_share.unwrap_or(0.0) * 100.0,
                i.late_answers.unwrap_or(0),
                i.answer_latency_p99_ns.map_or("-".into(), |n| format!("{:.3}", n as f64 / 1e6)),
                i.lost_before_arrival.unwrap_or(0),
                i.lost_after_late_answer.unwrap_or(0),
                i.lost_discarded.unwrap_or(0),
                i.success_rate_min.map_or("-".into(), |m| format!("{m:.4}"))
            );
        }
    }
}
