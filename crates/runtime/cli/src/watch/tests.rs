//! Unit tests of `watch`.

use super::{chart_title, period_chart, title, Snapshot};

#[test]
fn the_chart_spans_the_windows_range_and_marks_the_nominal_period() {
    // 100, 110, 120 µs on 2 rows (16 eighths), nominal 100: the axis is
    // 100..120, so the bars are 1, 1 + 10/20 × 15 = 8.5 → 9, and 16
    // eighths: the smallest still shows, the largest fills the column.
    assert_eq!(
        period_chart(&[100, 110, 120], Some(100), 3, 2),
        [" ▁█", "▁██"]
    );
    // Nominal 130, above every period: the axis reaches it, its row is
    // the top one, marked where no bar covers it; bars 1, 1 + 10/30 × 15
    // = 6 and 1 + 20/30 × 15 = 11 eighths.
    assert_eq!(
        period_chart(&[100, 110, 120], Some(130), 3, 2),
        ["┄┄▃", "▁▆█"]
    );
    // The newest `width` periods only; equal periods are a flat row.
    assert_eq!(period_chart(&[1, 5, 7, 7, 7], None, 3, 1), ["▁▁▁"]);
    assert!(period_chart(&[], Some(10), 0, 3).is_empty());
}

#[test]
fn the_title_says_now_only_while_recording_and_the_chart_speaks_ms() {
    let mut s = Snapshot {
        ring: "/dev/shm/r".into(),
        pid: 7,
        writer_alive: true,
        state: "recording",
        total_cycles: 10,
        window_cycles: 9,
        current_phase: Some("running".into()),
        phases: Vec::new(),
        stages: Vec::new(),
        recent_periods_us: vec![9_800, 10_200],
        nominal_period_us: Some(10_000),
        compute_budget_ns: None,
        deadline_tolerance_ns: None,
        threads: Vec::new(),
    };
    assert!(title(&s).ends_with(", now in running"), "{}", title(&s));
    assert_eq!(
        chart_title(&s),
        "period, newest 2 (ms; axis 9.800 to 10.200, nominal 10.000 marked ┄)"
    );
    // The loop has finished: its last phase, not "now".
    s.state = "finished";
    assert!(title(&s).ends_with(", last in running"), "{}", title(&s));
}
