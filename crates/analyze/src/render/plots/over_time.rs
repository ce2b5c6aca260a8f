//! One figure against time with a dashed limit: the drawing the data-age
//! plots (age at use, the staleness limit) and the answer-latency plot
//! (latency after arrival, the answer budget) share.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{bounds, dashes, err, thin, A_COLOR, MAX_TIMELINE_POINTS};

/// The y range's top over the highest point or limit: the top quarter of
/// the plot is the legend's (two entries of about 20 px in a plot of about
/// 330 px).
const LEGEND_HEADROOM: f64 = 1.35;

/// The points (s since the first retained cycle, value in ms), their
/// captions and an optional dashed limit with its label.
pub(super) struct OverTime {
    pub caption: String,
    pub y_desc: &'static str,
    pub label: &'static str,
    pub points: Vec<(f64, f64)>,
    pub limit: Option<(f64, String)>,
}

pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    s: &OverTime,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let xs = bounds(&s.points.iter().map(|p| p.0).collect::<Vec<_>>());
    let ys = bounds(
        &s.points
            .iter()
            .map(|p| p.1)
            .chain(s.limit.as_ref().map(|l| l.0))
            .chain(std::iter::once(0.0))
            .collect::<Vec<_>>(),
    );
    let mut chart = ChartBuilder::on(root)
        .caption(&s.caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        // Headroom above the highest point for the legend, which sits at
        // the top of the plot: it never covers a point.
        .build_cartesian_2d(xs.0.max(0.0)..xs.1, ys.0.max(0.0)..ys.1 * LEGEND_HEADROOM)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since the first retained cycle (s)")
        .y_desc(s.y_desc)
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
        .label(s.label)
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], A_COLOR));
    if let Some((limit, label)) = &s.limit {
        chart
            .draw_series(dashes((xs.0.max(0.0), xs.1), *limit, RED))
            .map_err(err)?
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], RED));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// A name that can be a file name: letters, digits and `-` kept, the rest `_`.
pub(super) fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
