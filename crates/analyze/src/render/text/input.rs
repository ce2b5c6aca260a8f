//! The text report's input-paced section: per phase released by its
//! inputs, the arrivals, the answers, what the counter says was lost, the
//! gaps and bursts, the robot's success rate, and the verdict.

use std::fmt::Write as _;

use super::{dist_row, ms, terminal_safe};
use crate::metrics::{InputPhase, Report};

/// The section (absent without input-paced cycles).
pub(super) fn input_paced(o: &mut String, r: &Report) {
    let Some(ip) = &r.input_paced else {
        return;
    };
    let _ = writeln!(
        o,
        "\ninput-paced: cycles released by an input's arrival (ms; no sleep overshoot or deadline lag: there is no deadline of the loop's own)"
    );
    for p in &ip.phases {
        phase(o, p);
    }
}

fn phase(o: &mut String, p: &InputPhase) {
    let mixed = if p.deadline_cycles > 0 {
        format!(" (and {} deadline-paced: mixed)", p.deadline_cycles)
    } else {
        String::new()
    };
    let period = p.period_ns.map_or("no period".into(), |n| {
        format!("P = {} ms ({})", ms(n as f64), p.period_from)
    });
    let rate = match (p.arrival_hz, p.arrival_rate_error_pct) {
        (Some(hz), Some(e)) => format!("arrivals at {hz:.2} Hz ({e:+.2} % against 1/P)"),
        (Some(hz), None) => format!("arrivals at {hz:.2} Hz"),
        _ => "no arrival rate".into(),
    };
    let _ = writeln!(
        o,
        "  phase {}: {} input-paced cycles{mixed}, {period}, {rate}",
        terminal_safe(&p.phase),
        p.cycles
    );
    let _ = writeln!(
        o,
        "  {:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "", "mean", "p50", "p90", "p99", "p99.9", "max"
    );
    dist_row(o, "arrival period", &p.arrival_period, ms);
    dist_row(o, "answer latency", &p.answer_latency, ms);
    if let Some(s) = &p.socket_wait {
        dist_row(o, "socket wait", &s.wait, ms);
    }
    let budget = p.budget_ns.map_or("no budget".into(), |b| {
        format!("over {} ms ({})", ms(b as f64), p.budget_from)
    });
    let share = p
        .late_share
        .map_or(String::new(), |s| format!(" ({:.2} %)", s * 100.0));
    let _ = writeln!(
        o,
        "    late answers: {}{share} {budget}; {} cycles with no command span",
        p.late_answers, p.unanswered
    );
    if let Some(l) = &p.lost {
        let _ = writeln!(
            o,
            "    lost inputs (the counter): {} = {} before arrival + {} after a late answer + {} discarded in bursts (the split is inferred from the answer before and the arrivals around: the robot's own drops can land in any of the three); {} repeated, {} resets, over {} steps",
            l.total, l.before_arrival, l.after_late_answer, l.discarded_in_bursts, l.repeated, l.resets, l.compared
        );
    } else {
        let _ = writeln!(
            o,
            "    lost inputs: no counter recorded (Release::input without a sequence number)"
        );
    }
    if let Some(s) = &p.socket_wait {
        let _ = writeln!(
            o,
            "    socket wait: {} of {} cycles carry the kernel's receive stamp (arrival) beside the loop's read; the wait is read − arrival, each arrival within ± {:.3} µs of the conversion; {} clock step(s) (a read before its arrival) left out",
            s.stamped,
            p.cycles,
            s.bound_max_ns.unwrap_or(0) as f64 / 2e3,
            s.clock_steps
        );
    }
    let b = &p.bursts;
    let _ = writeln!(
        o,
        "    gaps: {} (intervals over 1.5 P; {} after a late answer); bursts: {} ({} after a late answer), {} arrivals carrying {} states (at most {} in one), {} discarded",
        p.gaps, p.gaps_after_late_answer, b.count, b.after_late_answer, b.arrivals, b.states, b.states_max, b.discarded
    );
    if let Some(s) = &p.success_rate {
        let _ = writeln!(
            o,
            "    robot's success rate ({}): mean {:.4}, p50 {:.4}, p10 {:.4}, p1 {:.4}, min {:.4}; {} of {} cycles below 1",
            terminal_safe(&s.value),
            s.mean, s.p50, s.p10, s.p1, s.min, s.below_one, s.count
        );
    }
    let _ = writeln!(o, "    diagnosis: {}: {}", p.verdict, p.reason);
}

/// The budget-and-tolerance section (absent unless the evidence declares a
/// compute budget or a deadline tolerance): per phase, the budget overruns
/// and completion misses, each with its share and its excess's p99 and max.
pub(super) fn budget(o: &mut String, r: &Report) {
    let Some(b) = &r.budget else {
        return;
    };
    let declared = |ns: Option<u64>| {
        ns.map_or("not declared".to_string(), |n| {
            format!("{} ms", ms(n as f64))
        })
    };
    let _ = writeln!(
        o,
        "\nbudget and tolerance (declared): compute budget {}, deadline tolerance {}",
        declared(b.compute_budget_ns),
        declared(b.deadline_tolerance_ns)
    );
    for p in &b.phases {
        for (what, m) in [
            ("over the compute budget", &p.budget_overruns),
            (
                "completion misses (finish after the next release + tolerance)",
                &p.completion_misses,
            ),
        ] {
            let Some(m) = m else { continue };
            let excess = m.excess.as_ref().map_or(String::new(), |d| {
                format!(
                    "; excess p99 {} ms, max {} ms",
                    ms(d.p99_ns as f64),
                    ms(d.max_ns as f64)
                )
            });
            let _ = writeln!(
                o,
                "  {:<9} {} of {} cycles {what} ({:.2} %){excess}",
                terminal_safe(&p.phase),
                m.count,
                m.judged,
                m.share.unwrap_or(0.0) * 100.0
            );
        }
    }
}
