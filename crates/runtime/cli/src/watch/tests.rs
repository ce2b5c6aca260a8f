//! Unit tests of `watch`.

use super::period_chart;

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
