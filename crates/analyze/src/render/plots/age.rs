//! Data age over time: one plot per source on the host clock, the age at
//! use of each sample the control loop used against the time of its cycle,
//! with the source's staleness limit dashed (docs/metrics.md, Data age).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::over_time::{draw, file_safe, OverTime};
use super::{render, DrawPng, Plot, PlotError};
use crate::analysis::Analysis;

/// One series per source on the host clock that the loop used: (its name,
/// its ages at use against time).
fn series(a: &Analysis) -> Vec<(String, OverTime)> {
    let ev = &a.evidence;
    let Some(t0) = ev.cycles.first().map(|c| c.start_ns) else {
        return Vec::new();
    };
    ev.header
        .sources
        .iter()
        .enumerate()
        .filter(|(_, s)| s.clock == "host_monotonic")
        .map(|(i, s)| {
            let points = ev
                .samples
                .iter()
                .filter(|x| x.source as usize == i)
                .filter_map(|x| {
                    let age = crate::metrics::data_age::use_age(ev, x)?;
                    let t = (ev.cycles[x.row as usize].start_ns - t0) as f64 / 1e9;
                    Some((t, age as f64 / 1e6))
                })
                .collect();
            let limit = s.max_age_ns.map(|m| {
                let ms = m as f64 / 1e6;
                (ms, format!("stale beyond {ms:.3} ms"))
            });
            let o = OverTime {
                caption: format!("{}: age at use over time", s.name),
                y_desc: "age at use (ms)",
                label: "age at use",
                points,
                limit,
            };
            (s.name.clone(), o)
        })
        .filter(|(_, s)| !s.points.is_empty())
        .collect()
}

/// One plot per source on the host clock that the loop used (`age_<name>`).
pub(super) fn age_plots(a: &Analysis, png_dir: Option<&Path>) -> Result<Vec<Plot>, PlotError> {
    let all = series(a);
    let mut out = Vec::new();
    for (source, s) in &all {
        let name = format!("age_{}", file_safe(source));
        let title = format!("Data age: {source}");
        out.push(render(
            &name,
            &title,
            Box::new(|r| draw(r, s)),
            png_dir.map(|p| {
                (
                    p,
                    Box::new(|r: &DrawingArea<BitMapBackend, Shift>| draw(r, s)) as DrawPng,
                )
            }),
        )?);
    }
    Ok(out)
}
