//! Data age over time: one plot per source on the host clock, the age at
//! use of each sample the control loop used against the time of its cycle,
//! with the source's staleness limit dashed (docs/metrics.md, Data age).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    bounds, dashes, err, render, thin, DrawPng, Plot, PlotError, A_COLOR, MAX_TIMELINE_POINTS,
};
use crate::analysis::Analysis;

/// One source's points: (s since the first retained cycle, age in ms).
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    limit_ms: Option<f64>,
}

fn series(a: &Analysis) -> Vec<Series> {
    let ev = &a.evidence;
    let Some(t0) = ev.cycles.first().map(|c| c.start_ns) else {
        return Vec::new();
    };
    ev.header
        .sources
        .iter()
        .enumerate()
        .filter(|(_, s)| s.clock == "host_monotonic")
        .map(|(i, s)| Series {
            name: s.name.clone(),
            points: ev
                .samples
                .iter()
                .filter(|x| x.source as usize == i)
                .filter_map(|x| {
                    let age = crate::metrics::data_age::use_age(ev, x)?;
                    let t = (ev.cycles[x.row as usize].start_ns - t0) as f64 / 1e9;
                    Some((t, age as f64 / 1e6))
                })
                .collect(),
            limit_ms: s.max_age_ns.map(|m| m as f64 / 1e6),
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, s: &Series) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let xs = bounds(&s.points.iter().map(|p| p.0).collect::<Vec<_>>());
    let ys = bounds(
        &s.points
            .iter()
            .map(|p| p.1)
            .chain(s.limit_ms)
            .chain(std::iter::once(0.0))
            .collect::<Vec<_>>(),
    );
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{}: age at use over time", s.name),
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(xs.0.max(0.0)..xs.1, ys.0.max(0.0)..ys.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since the first retained cycle (s)")
        .y_desc("age at use (ms)")
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(BLACK.mix(0.0))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            thin(&s.points, MAX_TIMELINE_POINTS),
            &A_COLOR,
        ))
        .map_err(err)?
        .label("age at use")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], A_COLOR));
    if let Some(limit) = s.limit_ms {
        chart
            .draw_series(dashes((xs.0.max(0.0), xs.1), limit, RED))
            .map_err(err)?
            .label(format!("stale beyond {limit:.3} ms"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], RED));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// One plot per source on the host clock that the loop used (`age_<name>`).
pub(super) fn age_plots(a: &Analysis, png_dir: Option<&Path>) -> Result<Vec<Plot>, PlotError> {
    let all = series(a);
    let mut out = Vec::new();
    for s in &all {
        // The name becomes a file name: letters, digits, `_` and `-` only.
        let safe: String = s
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let name = format!("age_{safe}");
        let title = format!("Data age: {}", s.name);
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
