//! Answer latency over time, beside the period plot, for an episode with
//! input-paced cycles: each such cycle's command span start − its input's
//! arrival against the time of its cycle, the answer budget dashed
//! (docs/input-paced.md).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::over_time::{draw, OverTime};
use super::{render, DrawPng, Plot, PlotError};
use crate::analysis::Analysis;

/// The plot `answer_latency` (absent without answered input-paced cycles).
pub(super) fn answer_plot(a: &Analysis, png_dir: Option<&Path>) -> Result<Option<Plot>, PlotError> {
    let ev = &a.evidence;
    let Some(t0) = ev.cycles.first().map(|c| c.start_ns) else {
        return Ok(None);
    };
    let points: Vec<(f64, f64)> = crate::metrics::input_paced::answer_latencies(ev)
        .into_iter()
        .map(|(row, l)| {
            let t = (ev.cycles[row].start_ns - t0) as f64 / 1e9;
            (t, l as f64 / 1e6)
        })
        .collect();
    if points.is_empty() {
        return Ok(None);
    }
    // The judged (or first) input-paced phase's budget.
    let budget = a.report.input_paced.as_ref().and_then(|r| {
        let judged = a.report.late_cycles.as_ref().map(|l| l.phase.as_str());
        r.phases
            .iter()
            .find(|p| Some(p.phase.as_str()) == judged)
            .or(r.phases.first())
            .and_then(|p| p.budget_ns)
    });
    let s = OverTime {
        caption: "answer latency over time".into(),
        y_desc: "command start − arrival (ms)",
        label: "answer latency",
        points,
        limit: budget.map(|b| {
            let ms = b as f64 / 1e6;
            (ms, format!("late beyond {ms:.3} ms"))
        }),
    };
    render(
        "answer_latency",
        "Answer latency",
        Box::new(|r| draw(r, &s)),
        png_dir.map(|p| {
            (
                p,
                Box::new(|r: &DrawingArea<BitMapBackend, Shift>| draw(r, &s)) as DrawPng,
            )
        }),
    )
    .map(Some)
}
