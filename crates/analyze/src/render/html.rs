//! Self-contained HTML reports: one file, inline CSS and inline SVG, no
//! scripts, no network, no external assets. Every string that comes from an
//! evidence file (episode path, phase, stage, attribute and value names,
//! manifest keys and values, caveats) goes through [`escape`].

use std::fmt::Write;

use crate::compare::{Comparison, Verdict};
use crate::metrics::Number;
use crate::metrics::{Dist, Report};
use crate::render::plots::Plot;
use crate::render::text::{stage_cells, value_number};

/// Escape text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}\
.path{color:#666;font-family:monospace}table{border-collapse:collapse;font-size:13px;margin:8px 0}\
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}\
.caveat{background:#fff4e0;border-left:4px solid #f0a000;padding:6px 10px;margin:4px 0}\
.warn{background:#ffe8e8;border-left:4px solid #d00;padding:6px 10px;margin:4px 0}\
.better{color:#087f23;font-weight:bold}.worse{color:#c00;font-weight:bold}.mixed{color:#a60}\
figure{margin:16px 0}figcaption{font-weight:bold;margin-bottom:4px}svg{max-width:100%;height:auto}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

fn svg_inline(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

fn figures(o: &mut String, plots: &[Plot]) {
    for p in plots {
        let _ = writeln!(
            o,
            "<figure id=\"{}\"><figcaption>{}</figcaption>{}</figure>",
            escape(&p.name),
            escape(&p.title),
            svg_inline(&p.svg)
        );
    }
}

fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn dist_cells(d: &Option<Dist>, unit: fn(f64) -> String) -> String {
    match d {
        None => "<td>-</td>".repeat(6),
        Some(d) => [
            d.mean_ns,
            d.p50_ns as f64,
            d.p90_ns as f64,
            d.p99_ns as f64,
            d.p999_ns as f64,
            d.max_ns as f64,
        ]
        .iter()
        .map(|&v| format!("<td>{}</td>", unit(v)))
        .collect(),
    }
}

/// The HTML page of one episode.
pub fn report_page(r: &Report, plots: &[Plot]) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<h1>looptime control timing</h1>\n<p class=\"path\">{}</p>\n",
        escape(&r.episode)
    );
    let _ = writeln!(
        o,
        "<p>state: <b>{}</b></p>",
        escape(&format!("{:?}", r.state).to_lowercase())
    );
    if !r.caveats.is_empty() {
        o.push_str("<h2>Caveats</h2>\n");
        for c in &r.caveats {
            let _ = writeln!(o, "<div class=\"caveat\">{}</div>", escape(c));
        }
    }
    o.push_str("<h2>Diagnosis</h2>\n<ul>\n");
    for d in &r.diagnosis {
        let _ = writeln!(o, "<li>{}</li>", escape(d));
    }
    o.push_str("</ul>\n<h2>Phases</h2>\n<table><tr><th class=\"l\">phase</th><th>segments</th><th>cycles</th><th>loop Hz</th><th>overruns</th><th>skipped</th><th>command Hz</th></tr>\n");
    for p in &r.phases {
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.phase),
            p.segments,
            p.cycles,
            p.loop_hz.map_or("-".into(), |h| format!("{h:.3}")),
            p.overruns,
            p.skipped,
            p.command_hz.map_or("-".into(), |h| format!("{h:.3}"))
        );
    }
    o.push_str("</table>\n<p>Command Hz counts submissions from span starts; it says nothing of delivery or motion.</p>\n");
    o.push_str("<h2>Distributions</h2>\n<table><tr><th class=\"l\">metric</th><th class=\"l\">phase</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>\n");
    for p in &r.phases {
        let us = |ns: f64| format!("{:.1}", ns / 1e3);
        for (name, d, unit) in [
            ("period (ms)", &p.period, ms as fn(f64) -> String),
            ("work (ms)", &p.work, ms),
            ("sleep overshoot (µs)", &p.sleep_overshoot, us),
            ("deadline lag (µs)", &p.deadline_lag, us),
        ] {
            let _ = writeln!(
                o,
                "<tr><td class=\"l\">{name}</td><td class=\"l\">{}</td>{}</tr>",
                escape(&p.phase),
                dist_cells(d, unit)
            );
        }
    }
    o.push_str("</table>\n");
    if let Some(reason) = &r.schedule_metrics_absent {
        let _ = writeln!(o, "<div class=\"caveat\">{}</div>", escape(reason));
    }
    o.push_str("<h2>Stages</h2>\n<p>Nested rows are included in their parent: never add them.</p>\n<table><tr><th class=\"l\">phase</th><th class=\"l\">stage</th><th>n</th><th>wall mean</th><th>p50</th><th>p99</th><th>max</th><th>cpu mean</th><th>cpu p99</th><th>% period</th></tr>\n");
    for s in &r.stages {
        let name = s.label("\u{2003}");
        let _ = write!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>",
            escape(&s.phase),
            escape(&name)
        );
        for cell in stage_cells(s) {
            let _ = write!(o, "<td>{cell}</td>");
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    if !r.values.is_empty() {
        o.push_str("<h2>Robot-side and caller values</h2>\n<table><tr><th class=\"l\">value</th><th class=\"l\">unit</th><th>n</th><th>min</th><th>mean</th><th>max</th><th>lost states</th></tr>\n");
        for v in &r.values {
            let f = |x: Option<Number>| x.map_or("-".into(), value_number);
            let _ = writeln!(
                o,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&v.name),
                escape(&v.unit),
                v.count,
                f(v.min),
                f(v.mean.map(Number::Float)),
                f(v.max),
                v.lost.map_or("-".into(), |l| l.to_string())
            );
        }
        o.push_str("</table>\n");
    }
    o.push_str("<h2>Plots</h2>\n");
    figures(&mut o, plots);
    let c = &r.capture;
    let _ = write!(
        o,
        "<h2>Capture</h2>\n<p>{} cycles retained of capacity {}; earlier cycles dropped: {}; spans dropped: {}; cross-check: {} figures, {} mismatch(es).</p>\n",
        c.retained_cycles,
        c.capacity_cycles,
        c.dropped_cycles.map_or("unknown".into(), |d| d.to_string()),
        c.spans_dropped_total.unwrap_or(c.spans_dropped_retained),
        r.crosscheck.checked,
        r.crosscheck.mismatches.len()
    );
    page(&format!("looptime: {}", r.episode), &o)
}

/// The HTML page of a comparison.
pub fn compare_page(c: &Comparison, plots: &[Plot]) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<h1>looptime comparison</h1>\n<p class=\"path\">A: {}<br>B: {}</p>\n",
        escape(&c.a),
        escape(&c.b)
    );
    for w in &c.warnings {
        let _ = writeln!(o, "<div class=\"warn\">{}</div>", escape(w));
    }
    o.push_str("<h2>What differs</h2>\n<table><tr><th class=\"l\">kind</th><th class=\"l\">key</th><th class=\"l\">A</th><th class=\"l\">B</th></tr>\n");
    for d in &c.differences {
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            escape(&d.kind),
            escape(&d.key),
            escape(&d.a.to_string()),
            escape(&d.b.to_string())
        );
    }
    o.push_str("</table>\n");
    if !c.caveats.is_empty() {
        o.push_str("<h2>Caveats</h2>\n");
        for x in &c.caveats {
            let _ = writeln!(o, "<div class=\"caveat\">{}</div>", escape(x));
        }
    }
    let _ = write!(
        o,
        "<h2>Metrics (ms, Δ = B − A, 95 % bootstrap CI, {} resamples)</h2>\n<table><tr><th class=\"l\">phase</th><th class=\"l\">metric</th><th>A p50</th><th>B p50</th><th>Δ p50</th><th>CI Δ p50</th><th>Δ p99</th><th>CI Δ p99</th><th class=\"l\">verdict</th></tr>\n",
        c.bootstrap.resamples
    );
    for m in &c.metrics {
        let name = m.display_name();
        let word = m.verdict.word();
        let class = if m.verdict == Verdict::NoClearChange {
            ""
        } else {
            word
        };
        let f = |ns: i64| ms(ns as f64);
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>[{}, {}]</td><td>{}</td><td>[{}, {}]</td><td class=\"l {class}\">{word}</td></tr>",
            escape(&m.phase),
            escape(&name),
            f(m.a.median_ns),
            f(m.b.median_ns),
            f(m.diff_median_ns),
            f(m.ci_median_ns[0]),
            f(m.ci_median_ns[1]),
            f(m.diff_p99_ns),
            f(m.ci_p99_ns[0]),
            f(m.ci_p99_ns[1])
        );
    }
    o.push_str("</table>\n<h2>Plots</h2>\n");
    figures(&mut o, plots);
    page(&format!("looptime comparison: {} vs {}", c.a, c.b), &o)
}
