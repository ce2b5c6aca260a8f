//! Plots (plotters), as SVG strings and PNG files: the period over time with
//! phase segments shaded and overruns marked, the distribution (histogram
//! and CDF) of period, work and overshoot, the stage breakdown, and for a
//! comparison the A and B CDFs overlaid. Axes carry their units.
//!
//! Text needs a font: the first of [`FONT_CANDIDATES`] that exists (or the
//! file named by `LOOPTIME_FONT`) is registered once per process.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analysis::Analysis;
pub use crate::error::PlotError;
use crate::metrics::Report;

/// Fonts tried in order (Debian's `fonts-dejavu-core` provides the first).
pub const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];
/// Points drawn per time series at most (min and max of each bucket are kept,
/// so spikes survive the thinning).
pub const MAX_TIMELINE_POINTS: usize = 4_000;

const W: u32 = 900;
const H: u32 = 340;
const PHASE_COLORS: [RGBColor; 4] = [
    RGBColor(255, 190, 90),
    RGBColor(120, 180, 255),
    RGBColor(200, 200, 200),
    RGBColor(170, 230, 170),
];
/// Width of the timeline's legend strip, at its right.
const LEGEND_W: u32 = 200;
const A_COLOR: RGBColor = RGBColor(31, 119, 180);
const B_COLOR: RGBColor = RGBColor(230, 110, 20);

fn font_ready() -> Result<(), PlotError> {
    static FONT: OnceLock<bool> = OnceLock::new();
    let ok = *FONT.get_or_init(|| {
        let from_env = std::env::var_os("LOOPTIME_FONT").map(PathBuf::from);
        let candidates = from_env
            .into_iter()
            .chain(FONT_CANDIDATES.iter().map(PathBuf::from));
        for p in candidates {
            if let Ok(bytes) = std::fs::read(&p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::NoFont)
    }
}

/// One rendered plot.
#[derive(Debug, Clone)]
pub struct Plot {
    /// File stem (`period_timeline`).
    pub name: String,
    /// Title shown above it in HTML.
    pub title: String,
    /// The SVG document.
    pub svg: String,
}

type Draw<'a> = Box<dyn Fn(&DrawingArea<SVGBackend, Shift>) -> Result<(), String> + 'a>;
type DrawPng<'a> = Box<dyn Fn(&DrawingArea<BitMapBackend, Shift>) -> Result<(), String> + 'a>;

/// plotters' error as a sentence: its `Display` chain (the backend's own
/// message, an OS error among them), never the `Debug` form of its nested
/// wrappers.
fn err<E: std::error::Error>(e: E) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = s.source();
    }
    out
}

/// Keep at most `max` points: per bucket of x, the min and max y.
fn thin(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max {
        return points.to_vec();
    }
    let per = points.len().div_ceil(max / 2);
    let mut out = Vec::with_capacity(max + 2);
    for chunk in points.chunks(per) {
        let lo = chunk
            .iter()
            .copied()
            .fold((0.0, f64::INFINITY), |a, p| if p.1 < a.1 { p } else { a });
        let hi =
            chunk.iter().copied().fold(
                (0.0, f64::NEG_INFINITY),
                |a, p| if p.1 > a.1 { p } else { a },
            );
        if lo.0 <= hi.0 {
            out.push(lo);
            out.push(hi);
        } else {
            out.push(hi);
            out.push(lo);
        }
    }
    out
}

/// Data behind the episode plots.
struct EpisodeData {
    /// (time s, period ms) per cycle with a period.
    period: Vec<(f64, f64)>,
    /// (phase name, t0, t1) per segment.
    segments: Vec<(String, f64, f64)>,
    /// (time s, period ms) of overdue cycles.
    overruns: Vec<(f64, f64)>,
    /// Running-phase (or all) samples in ms: period, work, overshoot, each
    /// with its title, unit and the report's p99.9 (in the same unit), where
    /// the histogram stops.
    dists: Vec<Samples>,
    phases: Vec<String>,
    /// The effective period the run was paced at (ms), marked on the
    /// timeline; none for an uncapped or unknown pace.
    pace_ms: Option<f64>,
}

fn episode_data(a: &Analysis) -> EpisodeData {
    let (ev, report, cc) = (&a.evidence, &a.report, a.columns());
    let t0 = ev.cycles.first().map_or(0, |c| c.start_ns);
    let ts = |ns: i64| (ns - t0) as f64 / 1e9;
    let mut d = EpisodeData {
        period: Vec::new(),
        segments: Vec::new(),
        overruns: Vec::new(),
        dists: Vec::new(),
        phases: ev.header.phases.clone(),
        pace_ms: match report.pace {
            crate::metrics::Pace::Paced { effective_ns, .. } => Some(effective_ns as f64 / 1e6),
            _ => None,
        },
    };
    let judged = report
        .phases
        .iter()
        .find(|p| p.phase == "running")
        .or_else(|| report.phases.iter().max_by_key(|p| p.cycles))
        .and_then(|p| ev.header.phases.iter().position(|x| *x == p.phase))
        .map(|i| i as u32);
    let (mut per, mut work, mut over) = (Vec::new(), Vec::new(), Vec::new());
    for (i, c) in ev.cycles.iter().enumerate() {
        let t = ts(c.start_ns);
        if i == 0 || cc.segment[i] != cc.segment[i - 1] {
            d.segments.push((
                ev.header
                    .phases
                    .get(c.phase as usize)
                    .cloned()
                    .unwrap_or_default(),
                t,
                t,
            ));
        }
        if let Some(s) = d.segments.last_mut() {
            s.2 = t;
        }
        if let Some(p) = cc.period[i] {
            d.period.push((t, p as f64 / 1e6));
            if c.overdue {
                d.overruns.push((t, p as f64 / 1e6));
            }
        }
        if Some(c.phase) == judged {
            if let Some(p) = cc.period[i] {
                per.push(p as f64 / 1e6);
            }
            if let Some(w) = cc.work[i] {
                work.push(w as f64 / 1e6);
            }
            if let Some(o) = cc.overshoot[i] {
                over.push(o as f64 / 1e3);
            }
        }
    }
    let phase = judged
        .and_then(|i| ev.header.phases.get(i as usize).cloned())
        .unwrap_or_default();
    d.dists = judged_dists(report, &phase, per, work, over);
    d
}

/// The judged phase's period, work and (when any) overshoot samples, each
/// clipped at the p99.9 the report computed for the phase (the plots
/// compute none).
fn judged_dists(
    report: &crate::metrics::Report,
    phase: &str,
    per: Vec<f64>,
    work: Vec<f64>,
    over: Vec<f64>,
) -> Vec<Samples> {
    let pr = report.phases.iter().find(|p| p.phase == phase);
    let p999 = |dist: Option<&crate::metrics::Dist>, scale: f64| {
        dist.filter(|d| d.count > 0)
            .map(|d| d.p999_ns as f64 / scale)
    };
    let mut out = vec![
        Samples {
            title: format!("period ({phase})"),
            unit: "period (ms)".into(),
            v: per,
            clip: p999(pr.and_then(|p| p.period.as_ref()), 1e6),
        },
        Samples {
            title: format!("work ({phase})"),
            unit: "work (ms)".into(),
            v: work,
            clip: p999(pr.and_then(|p| p.work.as_ref()), 1e6),
        },
    ];
    if !over.is_empty() {
        out.push(Samples {
            title: format!("sleep overshoot ({phase})"),
            unit: "overshoot (µs)".into(),
            v: over,
            clip: p999(pr.and_then(|p| p.sleep_overshoot.as_ref()), 1e3),
        });
    }
    out
}

/// One distribution to draw: its samples, and where the drawing stops (a
/// report's p99.9; the tail beyond is counted in the caption).
struct Samples {
    title: String,
    unit: String,
    v: Vec<f64>,
    clip: Option<f64>,
}

/// A horizontal dashed line at `y` across `x0..x1`: 60 dashes, each a
/// 120th of the span, with gaps between.
fn dashes(
    (x0, x1): (f64, f64),
    y: f64,
    color: RGBColor,
) -> impl Iterator<Item = PathElement<(f64, f64)>> {
    let dash = ((x1 - x0) / 120.0).max(f64::MIN_POSITIVE);
    (0..60).map(move |k| {
        let a = x0 + 2.0 * k as f64 * dash;
        PathElement::new(vec![(a, y), ((a + dash).min(x1), y)], color.stroke_width(1))
    })
}

fn bounds(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-9 {
        (lo - 0.5, hi + 0.5)
    } else {
        let pad = (hi - lo) * 0.05;
        (lo - pad, hi + pad)
    }
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

fn cdf_points(s: &[f64]) -> Vec<(f64, f64)> {
    let n = s.len().max(1) as f64;
    let pts: Vec<(f64, f64)> = s
        .iter()
        .enumerate()
        .map(|(i, &x)| (x, (i + 1) as f64 / n))
        .collect();
    thin(&pts, MAX_TIMELINE_POINTS)
}

fn draw_stages<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    report: &Report,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let phase = report
        .phases
        .iter()
        .find(|p| p.phase == "running")
        .or_else(|| report.phases.iter().max_by_key(|p| p.cycles))
        .map(|p| p.phase.clone())
        .unwrap_or_default();
    let rows: Vec<_> = report.stages.iter().filter(|s| s.phase == phase).collect();
    let n = rows.len().max(1);
    let xmax = rows
        .iter()
        .map(|s| s.wall.p99_ns as f64 / 1e6)
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.1;
    let labels: Vec<String> = rows.iter().map(|s| s.label("  ")).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("stage breakdown ({phase}): bar = mean wall, mark = p99; nested rows are included in their parent"),
            ("sans-serif", 14),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(230)
        // `a..b` segmented has a segment for b too: stop at n − 1, so there
        // is no empty row above the first stage.
        .build_cartesian_2d(0.0..xmax, (0..n as i32 - 1).into_segmented())
        .map_err(err)?;
    // Row k (top to bottom) sits in segment n − 1 − k.
    let label_of = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) if (*i as usize) < n => {
            labels.get(n - 1 - *i as usize).cloned().unwrap_or_default()
        }
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .x_desc("wall time per cycle (ms)")
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(BLACK.mix(0.0))
        .y_labels(n)
        .y_label_formatter(&label_of)
        .disable_y_mesh()
        .draw()
        .map_err(err)?;
    for (k, s) in rows.iter().enumerate() {
        let i = (n - 1 - k) as i32;
        let mean = s.wall.mean_ns / 1e6;
        let p99 = s.wall.p99_ns as f64 / 1e6;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (mean, SegmentValue::Exact(i + 1)),
                ],
                A_COLOR.mix(if s.depth == 0 { 0.8 } else { 0.45 }).filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (p99, SegmentValue::Exact(i)),
                    (p99, SegmentValue::Exact(i + 1)),
                ],
                RED.stroke_width(2),
            )))
            .map_err(err)?;
    }
    root.present().map_err(err)
}

fn render(
    name: &str,
    title: &str,
    svg_draw: Draw,
    png: Option<(&Path, DrawPng)>,
) -> Result<Plot, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        svg_draw(&root).map_err(|message| PlotError::Draw {
            plot: name.into(),
            message,
        })?;
    }
    if let Some((dir, draw)) = png {
        let path = dir.join(format!("{name}.png"));
        // Drawn and encoded in memory, then written with one call: a write
        // problem (a full disk) is then the OS's own error about this
        // path, not plotters' chain of backend and image wrappers.
        let mut rgb = vec![0u8; (W * H * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (W, H)).into_drawing_area();
            draw(&root).map_err(|message| PlotError::Draw {
                plot: name.into(),
                message,
            })?;
        }
        let mut png = Vec::new();
        image::ImageEncoder::write_image(
            image::codecs::png::PngEncoder::new(&mut png),
            &rgb,
            W,
            H,
            image::ColorType::Rgb8,
        )
        .map_err(|e| PlotError::Draw {
            plot: name.into(),
            message: format!("encoding the PNG: {e}"),
        })?;
        std::fs::write(&path, &png).map_err(|error| PlotError::Write {
            path: path.clone(),
            error,
        })?;
        let svg_path = dir.join(format!("{name}.svg"));
        std::fs::write(&svg_path, &svg).map_err(|error| PlotError::Write {
            path: svg_path,
            error,
        })?;
    }
    Ok(Plot {
        name: name.into(),
        title: title.into(),
        svg,
    })
}

/// The plots of one episode. With `png_dir`, each is also written there as
/// `NAME.png` and `NAME.svg`.
///
/// # Errors
/// [`PlotError`] when no font is available or a file cannot be written.
pub fn episode_plots(a: &Analysis, png_dir: Option<&Path>) -> Result<Vec<Plot>, PlotError> {
    font_ready()?;
    let report = &a.report;
    let d = episode_data(a);
    let mut out = Vec::new();
    out.push(render(
        "period_timeline",
        "Period over time",
        Box::new(|r| draw_timeline(r, &d)),
        png_dir.map(|p| {
            (
                p,
                Box::new(|r: &DrawingArea<BitMapBackend, Shift>| draw_timeline(r, &d)) as DrawPng,
            )
        }),
    )?);
    out.extend(answer::answer_plot(a, png_dir)?);
    for (i, sm) in d.dists.iter().enumerate() {
        let (title, unit, v, clip) = (&sm.title, &sm.unit, &sm.v, sm.clip);
        if v.is_empty() {
            continue;
        }
        let name = [
            "period_distribution",
            "work_distribution",
            "overshoot_distribution",
        ][i.min(2)];
        out.push(render(
            name,
            title,
            Box::new(|r| draw_distribution(r, title, unit, v, clip)),
            png_dir.map(|p| {
                (
                    p,
                    Box::new(|r: &DrawingArea<BitMapBackend, Shift>| {
                        draw_distribution(r, title, unit, v, clip)
                    }) as DrawPng,
                )
            }),
        )?);
    }
    out.extend(age::age_plots(a, png_dir)?);
    if !report.stages.is_empty() {
        out.push(render(
            "stage_breakdown",
            "Stage breakdown",
            Box::new(|r| draw_stages(r, report)),
            png_dir.map(|p| {
                (
                    p,
                    Box::new(|r: &DrawingArea<BitMapBackend, Shift>| draw_stages(r, report))
                        as DrawPng,
                )
            }),
        )?);
    }
    Ok(out)
}

mod age;
mod answer;
mod compare;
mod distribution;
mod over_time;
use distribution::draw_distribution;
mod timeline;
use timeline::draw_timeline;

pub use compare::compare_plots;

#[cfg(test)]
mod tests;
