//! A distribution's figure: a histogram up to the report's p99.9 (the
//! tail beyond counted in the caption) beside its CDF.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{bounds, cdf_points, err, sorted, A_COLOR, W};

/// 50 equal bins from the smallest sample to `clip` (or the largest), and
/// how many samples lie beyond.
struct Histogram {
    lo: f64,
    hi: f64,
    width: f64,
    counts: Vec<u64>,
    beyond: u64,
}

fn histogram(sorted: &[f64], clip: Option<f64>) -> Histogram {
    let lo = sorted.first().copied().unwrap_or(0.0);
    let top = sorted.last().copied().unwrap_or(lo);
    let hi = clip.unwrap_or(top).max(lo + 1e-6);
    let bins = 50usize;
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0u64; bins];
    let mut beyond = 0u64;
    for &x in sorted {
        if x > hi {
            beyond += 1;
            continue;
        }
        let b = (((x - lo) / width) as usize).min(bins - 1);
        counts[b] += 1;
    }
    Histogram {
        lo,
        hi,
        width,
        counts,
        beyond,
    }
}

pub(super) fn draw_distribution<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    v: &[f64],
    clip: Option<f64>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let s = sorted(v);
    let (left, right) = root.split_horizontally(W / 2);
    // Histogram up to the report's p99.9 (the tail beyond is counted in the
    // caption); without one, up to the largest sample.
    let Histogram {
        lo,
        hi,
        width,
        counts,
        beyond,
    } = histogram(&s, clip);
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let mut chart = ChartBuilder::on(&left)
        .caption(
            format!("{title}: histogram ({beyond} beyond p99.9 not shown)"),
            ("sans-serif", 13),
        )
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(50)
        .build_cartesian_2d(lo..hi, 0.0..top * 1.05)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(unit)
        .y_desc("cycles")
        .x_labels(6)
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(BLACK.mix(0.0))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(counts.iter().enumerate().map(|(i, &c)| {
            let x0 = lo + i as f64 * width;
            Rectangle::new(
                [(x0, 0.0), (x0 + width, c as f64)],
                A_COLOR.mix(0.7).filled(),
            )
        }))
        .map_err(err)?;
    let xs = bounds(&s);
    let mut cdf = ChartBuilder::on(&right)
        .caption(
            format!("{title}: CDF (n = {})", s.len()),
            ("sans-serif", 13),
        )
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(50)
        .build_cartesian_2d(xs.0..xs.1, 0.0..1.0)
        .map_err(err)?;
    cdf.configure_mesh()
        .x_desc(unit)
        .y_desc("fraction of cycles ≤ x")
        .x_labels(6)
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(BLACK.mix(0.0))
        .draw()
        .map_err(err)?;
    cdf.draw_series(LineSeries::new(cdf_points(&s), &A_COLOR))
        .map_err(err)?;
    root.present().map_err(err)
}
