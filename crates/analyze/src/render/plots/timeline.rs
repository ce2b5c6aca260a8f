//! The period timeline: each cycle's period against time, the phases
//! shaded, the paced period dashed, overruns marked, and its legend
//! in a strip of its own.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::*;

pub(super) fn draw_timeline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    d: &EpisodeData,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    // The legend gets a strip of its own at the right, outside the
    // plotting area, so that it never hides a period.
    let (w, _) = root.dim_in_pixel();
    let (plot, legend) = root.split_horizontally(w.saturating_sub(LEGEND_W));
    let xs = bounds(&d.period.iter().map(|p| p.0).collect::<Vec<_>>());
    // The y-axis takes in the paced period, so its line is always drawn.
    let ys = bounds(
        &d.period
            .iter()
            .map(|p| p.1)
            .chain(d.pace_ms)
            .collect::<Vec<_>>(),
    );
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            "period over time (phases shaded, overruns marked)",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(xs.0.max(0.0)..xs.1, ys.0..ys.1)
        .map_err(err)?;
    // A light grid: the major lines only, faint, so the data stays in front.
    chart
        .configure_mesh()
        .x_desc("time since the first retained cycle (s)")
        .y_desc("period, start to start (ms)")
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(BLACK.mix(0.0))
        .draw()
        .map_err(err)?;
    for (name, a, b) in &d.segments {
        let i = d.phases.iter().position(|p| p == name).unwrap_or(0) % PHASE_COLORS.len();
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(*a, ys.0), (*b, ys.1)],
                PHASE_COLORS[i].mix(0.25).filled(),
            )))
            .map_err(err)?;
    }
    chart
        .draw_series(LineSeries::new(
            thin(&d.period, MAX_TIMELINE_POINTS),
            &A_COLOR,
        ))
        .map_err(err)?;
    if let Some(pace) = d.pace_ms {
        // The paced (effective) period, dashed.
        chart
            .draw_series(dashes((xs.0.max(0.0), xs.1), pace, BLACK))
            .map_err(err)?;
    }
    if !d.overruns.is_empty() {
        chart
            .draw_series(d.overruns.iter().map(|&p| Circle::new(p, 3, RED.filled())))
            .map_err(err)?;
    }
    timeline_legend(&legend, d).map_err(err)?;
    root.present().map_err(err)
}

/// The timeline's legend, one entry a line in its own strip: each phase's
/// shade, the paced period's dashed line and the overrun marker, which
/// sits on the long period the cycle before it caused.
fn timeline_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    d: &EpisodeData,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB::ErrorType: 'static,
{
    let style = ("sans-serif", 12).into_font().color(&BLACK);
    let mut y = 48;
    let line = |y: i32| (y, y + 18);
    for (i, name) in d.phases.iter().enumerate() {
        // Only the phases the timeline shades.
        if !d.segments.iter().any(|(n, _, _)| n == name) {
            continue;
        }
        let c = PHASE_COLORS[i % PHASE_COLORS.len()];
        area.draw(&Rectangle::new(
            [(4, y + 2), (18, y + 12)],
            c.mix(0.5).filled(),
        ))?;
        area.draw(&Text::new(name.clone(), (24, y), style.clone()))?;
        y = line(y).1;
    }
    if let Some(pace) = d.pace_ms {
        area.draw(&PathElement::new(vec![(4, y + 7), (18, y + 7)], BLACK))?;
        area.draw(&Text::new(
            format!("paced period {pace:.3} ms"),
            (24, y),
            style.clone(),
        ))?;
        y = line(y).1;
    }
    if !d.overruns.is_empty() {
        area.draw(&Circle::new((11, y + 7), 3, RED.filled()))?;
        area.draw(&Text::new("overrun", (24, y), style.clone()))?;
        area.draw(&Text::new(
            "(its release had passed when it",
            (24, y + 14),
            style.clone(),
        ))?;
        area.draw(&Text::new(
            "began; its own period may be usual)",
            (24, y + 28),
            style,
        ))?;
    }
    Ok(())
}
