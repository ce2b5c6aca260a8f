//! The comparison's plots: each metric's distribution on both sides as
//! CDFs, A against B, drawn with the episode plots' render.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::*;
use crate::compare::Comparison;

fn draw_cdf_pair<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    a: &[f64],
    b: &[f64],
    clip: Option<f64>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let (sa, sb) = (sorted(a), sorted(b));
    // To the largest p99.9 of the episodes' reports; without one, to the
    // largest sample.
    let last = |s: &[f64]| s.last().copied().unwrap_or(0.0);
    let hi = clip.unwrap_or_else(|| last(&sa).max(last(&sb)));
    let lo = sa
        .first()
        .copied()
        .unwrap_or(0.0)
        .min(sb.first().copied().unwrap_or(0.0));
    let xs = bounds(&[lo, hi]);
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{title}: CDF, A against B (to p99.9)"),
            ("sans-serif", 15),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(xs.0..xs.1, 0.0..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(unit)
        .y_desc("fraction ≤ x")
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(BLACK.mix(0.0))
        .draw()
        .map_err(err)?;
    for (label, s, color) in [("A", &sa, A_COLOR), ("B", &sb, B_COLOR)] {
        chart
            .draw_series(LineSeries::new(cdf_points(s), color.stroke_width(2)))
            .map_err(err)?
            .label(format!("{label} (n = {})", s.len()))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// The running-phase (or largest-phase) distributions of a side, its
/// episodes pooled; each stops at the largest of its episodes' p99.9.
pub(super) fn side_dists(side: &crate::compare::SideInput) -> Vec<Samples> {
    let mut out: Vec<Samples> = Vec::new();
    for a in side {
        for (i, d) in episode_data(a).dists.into_iter().enumerate() {
            match out.get_mut(i) {
                Some(o) => {
                    o.v.extend(d.v);
                    o.clip = max_clip(o.clip, d.clip);
                }
                None => out.push(d),
            }
        }
    }
    out
}

fn max_clip(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// The comparison plots: A and B CDFs of period, work and overshoot, each
/// side's episodes pooled.
///
/// # Errors
/// As [`episode_plots`].
pub fn compare_plots(
    a: &crate::compare::SideInput,
    b: &crate::compare::SideInput,
    _c: &Comparison,
    png_dir: Option<&Path>,
) -> Result<Vec<Plot>, PlotError> {
    font_ready()?;
    let (da, db) = (side_dists(a), side_dists(b));
    let mut out = Vec::new();
    for (i, sa) in da.iter().enumerate() {
        let Some(sb) = db.get(i) else {
            continue;
        };
        let (title, unit, va, vb) = (&sa.title, &sa.unit, &sa.v, &sb.v);
        let clip = max_clip(sa.clip, sb.clip);
        if va.is_empty() || vb.is_empty() {
            continue;
        }
        let name = [
            "compare_period_cdf",
            "compare_work_cdf",
            "compare_overshoot_cdf",
        ][i.min(2)];
        out.push(render(
            name,
            title,
            Box::new(|r| draw_cdf_pair(r, title, unit, va, vb, clip)),
            png_dir.map(|p| {
                (
                    p,
                    Box::new(|r: &DrawingArea<BitMapBackend, Shift>| {
                        draw_cdf_pair(r, title, unit, va, vb, clip)
                    }) as DrawPng,
                )
            }),
        )?);
    }
    // Data age: per source both sides used on the host clock, its ages at
    // use, each side's episodes and phases pooled.
    let (aa, ab) = (side_ages(a), side_ages(b));
    for (source, va) in &aa {
        let Some(vb) = ab.get(source) else { continue };
        let safe: String = source
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let title = format!("Data age: {source}");
        let clip = max_clip(p999(va), p999(vb));
        let (title, unit) = (&title, "age at use (ms)");
        out.push(render(
            &format!("compare_age_{safe}"),
            title,
            Box::new(|r| draw_cdf_pair(r, title, unit, va, vb, clip)),
            png_dir.map(|p| {
                (
                    p,
                    Box::new(|r: &DrawingArea<BitMapBackend, Shift>| {
                        draw_cdf_pair(r, title, unit, va, vb, clip)
                    }) as DrawPng,
                )
            }),
        )?);
    }
    Ok(out)
}

/// Ages at use (ms) per source on the host clock, over a side's episodes.
fn side_ages(side: &crate::compare::SideInput) -> std::collections::BTreeMap<String, Vec<f64>> {
    let mut out: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for a in side {
        let ev = &a.evidence;
        for x in &ev.samples {
            let Some(s) = ev.header.sources.get(x.source as usize) else {
                continue;
            };
            if let Some(age) = crate::metrics::data_age::use_age(ev, x) {
                out.entry(s.name.clone())
                    .or_default()
                    .push(age as f64 / 1e6);
            }
        }
    }
    out
}

/// The nearest-rank p99.9 of `v` (none when empty), where a CDF stops.
fn p999(v: &[f64]) -> Option<f64> {
    looptime_capture::quantile::nearest_rank(&sorted(v), 0.999)
}
