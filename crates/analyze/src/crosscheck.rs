//! Cross-check of the saved summary against the recomputation.
//!
//! The summary is never the source of a reported figure; it is compared.
//! Counts, cycle indices, phases, minima and maxima must match exactly;
//! means to 1e-6 relative plus 0.5 ns (the report's 0.1 ns rounding and the
//! summary's float sum); loop Hz to 1e-6 relative plus 5e-5 Hz (half the
//! report's 1e-4 Hz rounding step); percentiles to the summary histograms'
//! precision: the histogram reports the top of the bucket holding the true
//! value, at most 2⁻¹⁰ (0.1 %) above it, plus 1 ns. docs/metrics.md lists
//! every compared figure; [`LOOP_HZ_REL`] and [`LOOP_HZ_ABS`] are the
//! loop-Hz tolerance it states.
//! The summary records negative values (clock-mapping noise) as 0, so
//! recomputed values are clamped at 0 before comparing, and a mean is not
//! compared when the summary counted negatives.

use crate::evidence::Evidence;
use crate::metrics::table::dist_of_column;
use crate::metrics::{
    CaptureReport, CrossCheck, CycleColumns, Dist, Figure, Mismatch, SegmentReport, Tables,
};
use looptime_capture::format::Distribution;
use looptime_capture::Summary;

/// Loop Hz: relative tolerance.
pub const LOOP_HZ_REL: f64 = 1e-6;
/// Loop Hz: absolute tolerance, half the report's 10⁻⁴ Hz rounding step.
pub const LOOP_HZ_ABS: f64 = 5e-5;

/// Recomputed figures grouped the way the summary groups them.
#[derive(Debug, Default)]
pub struct SummaryView {
    /// All cycles' work.
    pub work: Option<Dist>,
    /// All cycles' sleep overshoot.
    pub overshoot: Option<Dist>,
    /// All cycles' deadline lag.
    pub lag: Option<Dist>,
    /// Per stage name: span count, wall, cpu.
    pub stages: Vec<(String, u64, Dist, Option<Dist>)>,
}

/// Group the metric tables the way the summary groups them: all cycles
/// together for work, overshoot and lag; stages by name across phases.
pub fn summary_view(ev: &Evidence, cc: &CycleColumns, tables: &Tables) -> SummaryView {
    let mut view = SummaryView {
        work: dist_of_column(&cc.work),
        overshoot: dist_of_column(&cc.overshoot),
        lag: dist_of_column(&cc.lag),
        stages: Vec::new(),
    };
    for (sid, d) in &tables.stages_by_name {
        if let Some(wall) = &d.wall {
            let name = ev.header.stages.get(*sid as usize).map(|s| s.name.clone());
            view.stages.push((
                name.unwrap_or_default(),
                d.count,
                wall.clone(),
                d.cpu.clone(),
            ));
        }
    }
    view
}

struct Checker {
    checked: u64,
    mismatches: Vec<Mismatch>,
}

impl Checker {
    fn cmp(&mut self, figure: String, summary: f64, recomputed: f64, tolerance: f64) {
        self.checked += 1;
        if (summary - recomputed).abs() > tolerance {
            self.mismatches.push(Mismatch {
                figure,
                summary: Figure::Number(summary),
                recomputed: Figure::Number(recomputed),
                tolerance,
            });
        }
    }
    fn same_text(&mut self, figure: String, summary: &str, recomputed: &str) {
        self.checked += 1;
        if summary != recomputed {
            self.mismatches.push(Mismatch {
                figure,
                summary: Figure::Text(summary.to_string()),
                recomputed: Figure::Text(recomputed.to_string()),
                tolerance: 0.0,
            });
        }
    }
    fn exact(&mut self, figure: String, summary: f64, recomputed: f64) {
        self.cmp(figure, summary, recomputed, 0.0);
    }
    fn dist(&mut self, name: &str, s: Option<&Distribution>, r: Option<&Dist>) {
        match (s, r) {
            (None, None) => {}
            (Some(s), Some(r)) => {
                self.exact(format!("{name}.count"), s.count as f64, r.count as f64);
                if s.negative_count == 0 {
                    let tol = r.mean_ns.abs() * 1e-6 + 0.5;
                    self.cmp(format!("{name}.mean_ns"), s.mean_ns, r.mean_ns, tol);
                }
                let clamp = |v: i64| v.max(0) as f64;
                self.exact(format!("{name}.min_ns"), s.min_ns as f64, clamp(r.min_ns));
                self.exact(format!("{name}.max_ns"), s.max_ns as f64, clamp(r.max_ns));
                for (q, sv, rv) in [
                    ("p50", s.p50_ns, r.p50_ns),
                    ("p90", s.p90_ns, r.p90_ns),
                    ("p99", s.p99_ns, r.p99_ns),
                    ("p999", s.p999_ns, r.p999_ns),
                ] {
                    let rv = clamp(rv);
                    self.cmp(format!("{name}.{q}_ns"), sv as f64, rv, rv / 1024.0 + 1.0);
                }
            }
            (s, r) => self.exact(
                format!("{name}.count"),
                s.map_or(0, |d| d.count) as f64,
                r.map_or(0, |d| d.count) as f64,
            ),
        }
    }
}

/// Compare every figure the summary holds with its recomputation.
pub fn check(
    summary: Option<&Summary>,
    capture: &CaptureReport,
    segments: &[SegmentReport],
    view: &SummaryView,
) -> CrossCheck {
    let Some(s) = summary else {
        return CrossCheck {
            checked: 0,
            mismatches: Vec::new(),
            not_checked: Some("no usable control_timing_summary.json".into()),
        };
    };
    let mut c = Checker {
        checked: 0,
        mismatches: Vec::new(),
    };
    c.capture(s, capture);
    c.segments(s, segments);
    c.schedule_and_stages(s, view);
    CrossCheck {
        checked: c.checked,
        mismatches: c.mismatches,
        not_checked: None,
    }
}

impl Checker {
    /// Capture counts and indices.
    fn capture(&mut self, s: &Summary, capture: &CaptureReport) {
        let c = self;
        let sc = &s.capture;
        c.exact(
            "capture.retained_cycles".into(),
            sc.retained_cycles as f64,
            capture.retained_cycles as f64,
        );
        c.exact(
            "capture.spans_dropped_retained".into(),
            sc.spans_dropped_retained as f64,
            capture.spans_dropped_retained as f64,
        );
        let opt = |v: Option<u64>| v.map_or(-1.0, |x| x as f64);
        c.exact(
            "capture.first_cycle".into(),
            opt(sc.first_cycle),
            opt(capture.first_cycle),
        );
        c.exact(
            "capture.last_cycle".into(),
            opt(sc.last_cycle),
            opt(capture.last_cycle),
        );
    }

    /// Segment count, then each segment's phase, counts, loop Hz and period.
    fn segments(&mut self, s: &Summary, segments: &[SegmentReport]) {
        let c = self;
        c.exact(
            "segments.count".into(),
            s.segments.len() as f64,
            segments.len() as f64,
        );
        for (i, (ss, rs)) in s.segments.iter().zip(segments).enumerate() {
            let n = format!("segments[{i}]");
            c.same_text(format!("{n}.phase"), &ss.phase, &rs.phase);
            c.exact(format!("{n}.cycles"), ss.cycles as f64, rs.cycles as f64);
            c.exact(
                format!("{n}.first_cycle"),
                ss.first_cycle as f64,
                rs.first_cycle as f64,
            );
            c.exact(
                format!("{n}.last_cycle"),
                ss.last_cycle as f64,
                rs.last_cycle as f64,
            );
            c.exact(
                format!("{n}.overdue"),
                ss.overdue as f64,
                rs.overruns as f64,
            );
            c.exact(format!("{n}.skipped"), ss.skipped as f64, rs.skipped as f64);
            if let (Some(a), Some(b)) = (ss.loop_hz, rs.loop_hz) {
                c.cmp(
                    format!("{n}.loop_hz"),
                    a,
                    b,
                    b.abs() * LOOP_HZ_REL + LOOP_HZ_ABS,
                );
            }
            c.dist(
                &format!("{n}.period"),
                ss.period.as_ref(),
                rs.period.as_ref(),
            );
        }
    }

    /// Work, overshoot and lag over all cycles, then stages by name.
    fn schedule_and_stages(&mut self, s: &Summary, view: &SummaryView) {
        let c = self;
        c.dist("work", s.work.as_ref(), view.work.as_ref());
        c.dist(
            "sleep_overshoot",
            s.sleep_overshoot.as_ref(),
            view.overshoot.as_ref(),
        );
        c.dist("deadline_lag", s.deadline_lag.as_ref(), view.lag.as_ref());
        c.exact(
            "stages.count".into(),
            s.stages.len() as f64,
            view.stages.len() as f64,
        );
        for st in &s.stages {
            let found = view.stages.iter().find(|(name, ..)| *name == st.stage);
            let n = format!("stages[{}]", st.stage);
            c.exact(
                format!("{n}.count"),
                st.count as f64,
                found.map_or(0, |f| f.1) as f64,
            );
            c.dist(&format!("{n}.wall"), Some(&st.wall), found.map(|f| &f.2));
            c.dist(
                &format!("{n}.cpu"),
                st.cpu.as_ref(),
                found.and_then(|f| f.3.as_ref()),
            );
        }
    }
}
