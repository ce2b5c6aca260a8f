//! The live counts of a declared budget and tolerance, and the warning's
//! first verdict, on hand-made cycles.

use super::*;

const MS: u64 = 1_000_000;

fn stat(work_ms: f64, lag_ms: f64, completion_ms: Option<f64>, overdue: bool) -> CycleStat {
    let ns = |ms: f64| (ms * 1e6) as i64;
    CycleStat {
        cycle: 0,
        period_ns: 10 * MS,
        work_ns: ns(work_ms) as u64,
        lag_ns: ns(lag_ms),
        overdue,
        completion_lag_ns: completion_ms.map(ns),
    }
}

fn cfg(budget: Option<u64>, tolerance: Option<u64>) -> MaintenanceConfig {
    MaintenanceConfig {
        interval_s: 1.0,
        late_warn_ns: tolerance.unwrap_or(MS) as i64,
        period_ns: 10 * MS,
        compute_budget_ns: budget,
        deadline_tolerance_ns: tolerance,
    }
}

/// 10 ms period, 2 ms budget, 1 ms tolerance. Of four cycles:
/// - work 3 ms, on time, ends 7 ms before the next release: a budget
///   overrun only;
/// - work 1 ms, 1.5 ms late: a wake miss (1.5 > 1), work within budget and
///   not overdue, so scheduling's;
/// - work 12 ms, on time, ends 2 ms after the next release: an overrun
///   and a completion miss (2 > 1), work's;
/// - work 1 ms, 0.5 ms late, ends 8.5 ms early: nothing.
///
/// The line: 2 budget overruns, 1 wake miss, 1 completion miss; the
/// warning: 2 misses, 1 of them work's: the tie goes to work.
#[test]
fn the_stats_line_and_the_warning_count_what_was_declared() {
    let c = cfg(Some(2 * MS), Some(MS));
    let budget = c.compute_budget_ns.unwrap();
    let cycles = [
        stat(3.0, 0.0, Some(-7.0), false),
        stat(1.0, 1.5, Some(-7.5), false),
        stat(12.0, 0.0, Some(2.0), false),
        stat(1.0, 0.5, Some(-8.5), false),
    ];
    let (mut win, mut late) = (Window::default(), LateWindow::default());
    for s in &cycles {
        win.add(s, &c, budget);
        late.add(s, c.late_warn_ns, c.deadline_tolerance_ns, budget);
    }
    let line = win.line(&c);
    assert!(
        line.ends_with("2 budget overruns, 1 wake misses, 1 completion misses, 0 overruns"),
        "{line}"
    );
    let w = late.warning(&c);
    assert!(
        w.contains("1 wake miss(es) (start later than release + 1.000 ms; max lag 1.500 ms)"),
        "{w}"
    );
    assert!(
        w.contains(
            "1 completion miss(es) (end later than the next release + 1.000 ms; max 1.000 ms over)"
        ),
        "{w}"
    );
    assert!(w.ends_with("first verdict: work (1 of 2 came with work over the compute budget or after an overrun)"), "{w}");

    // Without the long cycle, the one miss left is the late wake:
    // scheduling's.
    let mut late = LateWindow::default();
    for s in [&cycles[0], &cycles[1], &cycles[3]] {
        late.add(s, c.late_warn_ns, c.deadline_tolerance_ns, budget);
    }
    assert!(
        late.warning(&c)
            .contains("first verdict: scheduling (1 of 1"),
        "{}",
        late.warning(&c)
    );
}

/// Nothing declared: the line is as it always was, and the warning keeps
/// its words (late starts over `late_warn_us`); a late start after an
/// overrun is work's.
#[test]
fn undeclared_the_line_is_unchanged_and_an_overdue_start_is_works() {
    let c = cfg(None, None);
    let mut win = Window::default();
    let mut late = LateWindow::default();
    let s = stat(1.0, 4.0, Some(-5.0), true);
    win.add(&s, &c, 10 * MS);
    late.add(&s, c.late_warn_ns, None, 10 * MS);
    let line = win.line(&c);
    assert!(line.ends_with("work max 1.000 ms, 1 overruns"), "{line}");
    let w = late.warning(&c);
    assert!(w.starts_with("[warn] 1 cycle(s) started more than 1000 µs after their release point (max 4.000 ms); first verdict: work (1 of 1 came with work over the period"), "{w}");
}

/// An input-paced loop (period 0: released by its inputs) declares a
/// tolerance in vain: it has no release point, so its line counts budget
/// overruns only.
#[test]
fn an_input_paced_line_counts_budget_overruns_only() {
    let mut c = cfg(Some(2 * MS), Some(MS));
    c.period_ns = 0;
    let mut win = Window::default();
    win.add(&stat(3.0, 0.0, None, false), &c, 2 * MS);
    let line = win.line(&c);
    assert!(
        line.ends_with("work max 3.000 ms, 1 budget overruns, 0 overruns"),
        "{line}"
    );
}
