//! Self-contained HTML reports: one file, inline CSS and inline SVG, no
//! scripts, no network, no external assets. The pages are maud templates,
//! so every string that comes from an evidence file (episode path, phase,
//! stage, attribute and value names, manifest keys and values, caveats) is
//! escaped by default; the only unescaped content is the plots' SVG, which
//! the plot backend wrote (and which escapes its own text).

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::compare::{Comparison, Verdict};
use crate::metrics::{CardState, Dist, Lateness, Number, Report, StageReport};
use crate::render::plots::Plot;
use crate::render::text::{stage_cells, value_number};

mod test_tables;
use test_tables::{hz_table, rates_table};

const STYLE: &str = "body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}\
.path{color:#666;font-family:monospace}table{border-collapse:collapse;font-size:13px;margin:8px 0}\
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}\
.caveat{background:#fff4e0;border-left:4px solid #f0a000;padding:6px 10px;margin:4px 0}\
.warn{background:#ffe8e8;border-left:4px solid #d00;padding:6px 10px;margin:4px 0}\
.better{color:#087f23;font-weight:bold}.worse{color:#c00;font-weight:bold}.mixed{color:#a60}\
figure{margin:16px 0}figcaption{font-weight:bold;margin-bottom:4px}figcaption span{font-weight:normal;color:#555}\
svg{max-width:100%;height:auto}\
.band{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}\
.card{border:1px solid #ccc;border-left:8px solid #999;padding:8px 12px;min-width:260px;flex:1;background:#f7f7f7}\
.card h3{margin:0 0 6px 0;font-size:16px}.card p{margin:2px 0;font-size:13px}\
.card.pass{border-left-color:#2e7d32;background:#f1f8f1}.card.warn{border-left-color:#d89000;background:#fff8e6}\
.card.fail{border-left-color:#c62828;background:#fdecea}\
.card ul.checks{margin:2px 0;padding-left:18px;font-size:13px}\
details{margin:10px 0}summary{cursor:pointer;font-weight:bold;font-size:15px}";

fn page(title: &str, body: Markup) -> String {
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    };
    let mut s = doc.into_string();
    s.push('\n');
    s
}

/// The plot's SVG document from its `<svg` element on (no XML prologue).
fn svg_inline(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

/// What to look for in a plot, by its name: the caption's second line.
/// The stage breakdown's follows the judged phase's diagnosis (`verdict`)
/// and the late cycles it counts (`late`), the same figures the diagnosis
/// prints, so the caption never contradicts the diagnosis under it.
fn look_for(name: &str, verdict: Option<&str>, late: Option<&Lateness>) -> String {
    match (name, verdict) {
        ("stage_breakdown", Some("scheduling")) => {
            let (woke, over) = late.map_or((0, 0), |l| (l.late_wake, l.work_over_budget));
            let budget = late.map_or(String::new(), |l| format!(" ({} ms)", ms(l.budget_ns as f64)));
            if over == 0 {
                format!("Mean and p99 wall time of each top-level stage. The diagnosis is scheduling: every late cycle ({woke}) followed work within its budget{budget} and woke late, so shortening a stage will not fix them; look at the sleep overshoot and the host (docs/realtime.md).")
            } else {
                format!("Mean and p99 wall time of each top-level stage. The diagnosis is scheduling: {woke} late cycles followed work within its budget{budget} and woke late, and {over} followed work longer than the budget; the wake path is the larger cause, so look at the sleep overshoot and the host first (docs/realtime.md), then at the longest stage for the {over}.")
            }
        }
        ("stage_breakdown", Some("on rate")) => "Mean and p99 wall time of each top-level stage: where each cycle's time goes; no cycle is late, so none needs shortening for the rate.".into(),
        ("stage_breakdown", Some("the work itself")) => "Mean and p99 wall time of each top-level stage. The diagnosis is the work itself: the stage it names, usually the longest bar, is the first thing to shorten.".into(),
        _ => look_for_any(name).into(),
    }
}

/// The caption's second line when no diagnosis bears on the plot.
fn look_for_any(name: &str) -> &'static str {
    match name {
        "period_timeline" => "Each cycle's period against time, the paced period dashed: look for bursts above it and for phase changes.",
        "stage_breakdown" => "Mean and p99 wall time of each top-level stage: where each cycle's time goes.",
        "period_distribution" => "How the periods spread: a tail to the right is late cycles.",
        "work_distribution" => "How long the work takes: compare its tail with the period.",
        "overshoot_distribution" => "How late the sleep returned: a tail beyond the spin margin makes late starts.",
        "answer_latency" => "How long after each input's arrival the command left, the answer budget dashed: points above the line are late answers; a step after a gap is the loop catching up.",
        n if n.starts_with("age_") => "How old each sample of the source was when a cycle used it, the staleness limit dashed: look for steps (a producer that stalled) and for points above the line.",
        _ => "",
    }
}

fn figures(plots: &[Plot], verdict: Option<&str>, late: Option<&Lateness>) -> Markup {
    html! {
        @for p in plots {
            figure id=(p.name) {
                figcaption { (p.title) br; span { (look_for(&p.name, verdict, late)) } }
                (PreEscaped(svg_inline(&p.svg)))
            }
        }
    }
}

fn ms(ns: f64) -> String {
    super::fixed(ns / 1e6, 3)
}

fn us(ns: f64) -> String {
    super::fixed(ns / 1e3, 1)
}

fn dist_cells(d: &Option<Dist>, unit: fn(f64) -> String) -> Markup {
    html! {
        @match d {
            None => { @for _ in 0..6 { td { "-" } } }
            Some(d) => {
                @for v in [d.mean_ns, d.p50_ns as f64, d.p90_ns as f64, d.p99_ns as f64, d.p999_ns as f64, d.max_ns as f64] {
                    td { (unit(v)) }
                }
            }
        }
    }
}

fn hz(h: Option<f64>) -> String {
    h.map_or("-".into(), |h| format!("{h:.3}"))
}

fn phases_table(r: &Report) -> Markup {
    html! {
        h2 { "Phases" }
        table {
            tr { th.l { "phase" } th { "segments" } th { "cycles" } th { "loop Hz" } th { "overruns" } th { "skipped" } th { "command Hz" } }
            @for p in &r.phases {
                tr {
                    td.l { (p.phase) } td { (p.segments) } td { (p.cycles) } td { (hz(p.loop_hz)) }
                    td { (p.overruns) } td { (p.skipped) } td { (hz(p.command_hz)) }
                }
            }
        }
        p { "Command Hz counts submissions from span starts; it says nothing of delivery or motion." }
    }
}

fn distributions_table(r: &Report) -> Markup {
    html! {
        h2 { "Distributions" }
        table {
            tr { th.l { "metric" } th.l { "phase" } th { "mean" } th { "p50" } th { "p90" } th { "p99" } th { "p99.9" } th { "max" } }
            @for p in &r.phases {
                @for (name, d, unit) in [
                    ("period (ms)", &p.period, ms as fn(f64) -> String),
                    ("work (ms)", &p.work, ms),
                    ("sleep overshoot (µs)", &p.sleep_overshoot, us),
                    ("deadline lag (µs)", &p.deadline_lag, us),
                ] {
                    tr { td.l { (name) } td.l { (p.phase) } (dist_cells(d, unit)) }
                }
                @for (name, d) in [("work CPU (ms)", &p.work_cpu), ("off-CPU (ms)", &p.off_cpu)] {
                    @if d.is_some() {
                        tr { td.l { (name) } td.l { (p.phase) } (dist_cells(d, ms)) }
                    }
                }
            }
        }
        @if let Some(reason) = &r.schedule_metrics_absent {
            div.caveat { (reason) }
        }
        p {
            "Thread CPU time: " (super::text::cpu_mode_words(r.capture.thread_cpu)) "."
            @for p in r.phases.iter().filter(|p| p.off_cpu_share.is_some()) {
                " Off-CPU share of " (p.phase) "'s work: "
                (format!("{:.2} %", p.off_cpu_share.unwrap_or(0.0) * 100.0)) "."
            }
        }
        @for p in &r.phases {
            @if let Some(s) = &p.spin {
                p { "Spin before " (p.phase) "'s cycles: " (super::text::spin_words(s)) "." }
            }
        }
    }
}

fn stages_table(r: &Report) -> Markup {
    html! {
        h2 { "Stages" }
        p { "Nested rows are included in their parent: never add them." }
        (stage_rows(&r.stages))
    }
}

fn stage_rows(stages: &[StageReport]) -> Markup {
    html! {
        table {
            tr { th.l { "phase" } th.l { "stage" } th { "n" } th { "wall mean" } th { "p50" } th { "p99" } th { "max" } th { "cpu mean" } th { "cpu p99" } th { "% period" } }
            @for s in stages {
                tr {
                    td.l { (s.phase) } td.l { (s.label("\u{2003}")) }
                    @for cell in stage_cells(s) { td { (cell) } }
                }
            }
        }
    }
}

/// Background threads (schema 2): one stage table each, then the overlap.
fn threads_section(r: &Report) -> Markup {
    html! {
        @if !r.threads.is_empty() {
            h2 { "Background threads" }
            @for t in &r.threads {
                h3 { (t.thread) }
                p {
                    (format!(
                        "tid {}, {}, state {}, {} cycles retained{}",
                        t.tid.map_or("?".into(), |x| x.to_string()),
                        t.file,
                        format!("{:?}", t.state).to_lowercase(),
                        t.capture.retained_cycles,
                        if t.implicit_cycles { " (one per top-level span)" } else { "" }
                    ))
                }
                (stage_rows(&t.stages))
            }
            @if !r.overlap.is_empty() {
                h3 { "Overlap with the control stages" }
                p { "Share of each control stage's wall time during which the thread had a span open." }
                table {
                    tr { th.l { "phase" } th.l { "control stage" } th.l { "thread" } th { "spans" } th { "overlap %" } }
                    @for x in &r.overlap {
                        tr {
                            td.l { (x.phase) } td.l { (x.path) } td.l { (x.thread) } td { (x.spans) }
                            td { (x.share.map_or("-".into(), |s| format!("{:.1}", s * 100.0))) }
                        }
                    }
                }
            }
        }
    }
}

fn values_table(r: &Report) -> Markup {
    let f = |x: Option<Number>| x.map_or("-".into(), value_number);
    html! {
        @if !r.values.is_empty() {
            h2 { "Robot-side and caller values" }
            table {
                tr { th.l { "value" } th.l { "unit" } th { "n" } th { "min" } th { "mean" } th { "max" } th { "lost states" } }
                @for v in &r.values {
                    tr {
                        td.l { (v.name) } td.l { (crate::render::text::unit_word(&v.unit)) } td { (v.count) } td { (f(v.min)) }
                        td { (if v.lost.is_some() { "-".to_string() } else { f(v.mean.map(Number::Float)) }) } td { (f(v.max)) }
                        td { (v.lost.map_or("-".into(), |l| l.to_string())) }
                    }
                }
            }
        }
    }
}

/// The HTML page of one episode.
pub fn report_page(r: &Report, plots: &[Plot]) -> String {
    let c = &r.capture;
    let first: Vec<Plot> = plots
        .iter()
        .filter(|p| p.name == "period_timeline" || p.name == "stage_breakdown")
        .cloned()
        .collect();
    let rest: Vec<Plot> = plots
        .iter()
        .filter(|p| p.name != "period_timeline" && p.name != "stage_breakdown")
        .cloned()
        .collect();
    // The judged phase's diagnosis (one card carries it).
    let verdict = r
        .summary
        .iter()
        .find_map(|c| c.diagnosis.as_ref())
        .map(|d| d.verdict.as_str());
    let body = html! {
        h1 { "looptime control timing" }
        p.path { (r.episode) }
        p.path { "run: " (r.run.line()) }
        p { "state: " b { (r.state.name()) } }
        (summary_band(r))
        @if !r.caveats.is_empty() {
            @for x in &r.caveats { div.caveat { (x) } }
        }
        (figures(&first, verdict, r.late_cycles.as_ref()))
        h2 { "Diagnosis" }
        ul { @for d in &r.diagnosis { li { (d) } } }
        details { summary { "Phases and distributions" } (phases_table(r)) (distributions_table(r)) }
        details { summary { (format!("Stages ({} rows)", r.stages.len())) } (stages_table(r)) }
        @if !r.values.is_empty() {
            details { summary { "Values" } (values_table(r)) }
        }
        @if let Some(b) = &r.budget {
            details open { summary { "Budget and tolerance (declared)" } (budget_table(b)) }
        }
        @if !r.threads.is_empty() {
            details { summary { (format!("Threads ({}) and overlap ({} rows)", r.threads.len(), r.overlap.len())) } (threads_section(r)) }
        }
        @if !rest.is_empty() {
            details { summary { "More plots" } (figures(&rest, verdict, r.late_cycles.as_ref())) }
        }
        h2 { "Capture" }
        p {
            (format!(
                "{} cycles retained of capacity {}; earlier cycles dropped: {}; spans dropped: {}; cross-check: {} figures, {} mismatch(es).",
                c.retained_cycles,
                c.capacity_cycles,
                c.dropped_cycles.map_or("unknown".into(), |d| d.to_string()),
                c.spans_dropped_total.unwrap_or(c.spans_dropped_retained),
                r.crosscheck.checked,
                r.crosscheck.mismatches.len()
            ))
        }
    };
    page(
        &format!("looptime: {} ({})", r.run.short(), r.episode),
        body,
    )
}

/// The first screen: one card per phase, its state in a word and a colour
/// (from the report's summary, computed in the analysis).
fn summary_band(r: &Report) -> Markup {
    let t = &r.thresholds;
    html! {
        div.band {
            @for c in &r.summary {
                @let class = match c.state {
                    CardState::Pass => "card pass",
                    CardState::Warn => "card warn",
                    CardState::Fail => "card fail",
                    CardState::NotJudged => "card not_judged",
                };
                div class=(class) {
                    h3 { (c.phase) ": " (c.state.word()) }
                    p { b { (c.loop_hz.map_or("no rate".to_string(), |h| format!("{h:.2} Hz"))) }
                        (c.effective_hz.map_or(String::new(), |e| format!(" against {e:.2} Hz"))) }
                    @if let (Some(p99), Some(max)) = (c.period_p99_ns, c.period_max_ns) {
                        p { "p99 period " (ms(p99 as f64)) " ms, max " (ms(max as f64)) " ms" }
                    }
                    p { (c.overruns) (if c.overruns == 1 { " overrun, " } else { " overruns, " }) (c.skipped) " skipped" }
                    @if !c.checks.is_empty() {
                        ul.checks {
                            @for k in &c.checks {
                                li class=(format!("check {}", k.check)) { (k.words()) }
                            }
                        }
                    }
                    p { "diagnosis: " (c.diagnosis.as_ref().map_or("not judged".to_string(), |d| match &d.stage {
                        Some(s) => format!("{}, {s}", d.verdict),
                        None => d.verdict.clone(),
                    })) }
                }
            }
        }
        p { (format!(
            "Pass: rate within {} % of the effective rate, p99 period within {} % of the effective period, at most {} overruns, at most {} % stale data-age uses, at most {} % late answers; warn within {} %, {} %, overruns in at most {} % of the cycles, {} % stale, {} % late; beyond, fail (docs/metrics.md, Summary).",
            t.rate_pass_pct, t.p99_pass_pct, t.overruns_pass, t.stale_pass_pct, t.late_answers_pass_pct,
            t.rate_warn_pct, t.p99_warn_pct, t.overruns_warn_pct, t.stale_warn_pct, t.late_answers_warn_pct
        )) }
    }
}

/// The declared budget's and tolerance's misses per phase.
fn budget_table(b: &crate::metrics::BudgetReport) -> Markup {
    let declared = |ns: Option<u64>| {
        ns.map_or("not declared".to_string(), |n| {
            format!("{} ms", ms(n as f64))
        })
    };
    html! {
        p { "compute budget " (declared(b.compute_budget_ns)) ", deadline tolerance " (declared(b.deadline_tolerance_ns)) }
        table {
            tr { th.l { "phase" } th.l { "what" } th { "cycles" } th { "misses" } th { "share %" } th { "excess p99 ms" } th { "excess max ms" } }
            @for p in &b.phases {
                @for (what, m) in [("over the compute budget", &p.budget_overruns), ("completion misses", &p.completion_misses)] {
                    @if let Some(m) = m {
                        tr {
                            td.l { (p.phase) } td.l { (what) } td { (m.judged) } td { (m.count) }
                            td { (format!("{:.2}", m.share.unwrap_or(0.0) * 100.0)) }
                            td { (m.excess.as_ref().map_or("-".into(), |d| ms(d.p99_ns as f64))) }
                            td { (m.excess.as_ref().map_or("-".into(), |d| ms(d.max_ns as f64))) }
                        }
                    }
                }
            }
        }
    }
}

fn metrics_table(c: &Comparison) -> Markup {
    let f = |ns: i64| ms(ns as f64);
    html! {
        @let run_level = c.metrics.iter().any(|m| m.test_median.method == "rollouts");
        h2 { (format!("Metrics (ms, Δ = B − A, 95 % {} CI, {} resamples)", if run_level { "run-level" } else { "stationary block-bootstrap" }, c.bootstrap.resamples)) }
        p { (format!("{} tests over {} metrics, Holm-adjusted (family-wise error {} %): a verdict needs its adjusted p below {}, its interval excluding zero and a shift above the noise floor. \"Detectable\" is the smallest |Δ p50| the test would have called with 80 % probability.", c.multiplicity.tests, c.multiplicity.metrics, c.multiplicity.alpha * 100.0, c.multiplicity.alpha)) }
        @let sessions = c.a_episodes.len() > 1 || c.b_episodes.len() > 1;
        @if sessions && run_level {
            p { (format!("A: {} rollouts, B: {} rollouts; the figures pool each side's rollouts; the intervals and p-values are the run-level test's (Welch's t over each rollout's own median or p99, centred on the mean of the rollouts' figures). Per rollout: median / p99.", c.a_episodes.len(), c.b_episodes.len())) }
        } @else if sessions {
            p { (format!("A: {} rollouts, B: {} rollouts; the figures pool each side's rollouts, the intervals resample rollouts, then blocks within each (two-level bootstrap). Per rollout: median / p99.", c.a_episodes.len(), c.b_episodes.len())) }
        }
        table {
            tr {
                th.l { "phase" } th.l { "metric" } th { "A p50" } th { "B p50" } th { "Δ p50" } th { "CI Δ p50" } th { "detectable Δ p50" } th { "Δ p99" } th { "CI Δ p99" } th.l { "verdict" }
                @if sessions { th.l { "A per rollout" } th.l { "B per rollout" } }
            }
            @for m in c.metrics.iter().filter(|m| !m.is_zero_overlap()) {
                @let word = m.verdict.word();
                @let class = if m.verdict == Verdict::NoClearChange { "l".to_string() } else { format!("l {word}") };
                tr {
                    td.l { (m.phase) } td.l { (m.display_name()) }
                    td { (f(m.a.median_ns)) } td { (f(m.b.median_ns)) } td { (f(m.diff_median_ns)) }
                    td { "[" (f(m.ci_median_ns[0])) ", " (f(m.ci_median_ns[1])) "]" }
                    td { (ms(m.test_median.detectable)) }
                    td { (f(m.diff_p99_ns)) }
                    @if m.p_p99.is_some() {
                        td { "[" (f(m.ci_p99_ns[0])) ", " (f(m.ci_p99_ns[1])) "]" }
                    } @else {
                        td { "not tested (n < " (crate::compare::MIN_SAMPLES_FOR_P99_VERDICT) ")" }
                    }
                    td class=(class) title=(format!("median: {}{}", m.why_median, m.why_p99.as_deref().map_or(String::new(), |w| format!("; p99: {w}")))) { (word) }
                    @if sessions {
                        td.l { (crate::render::compare_text::per_rollout(&m.a_rollouts)) }
                        td.l { (crate::render::compare_text::per_rollout(&m.b_rollouts)) }
                    }
                }
            }
        }
        @let folded = c.metrics.iter().filter(|m| m.is_zero_overlap()).count();
        @if folded > 0 {
            p { (format!("{folded} overlap row(s) zero on both sides folded: no control stage overlapped that thread's work (the JSON has them).")) }
        }
    }
}

/// The HTML page of a comparison.
pub fn compare_page(c: &Comparison, plots: &[Plot]) -> String {
    let body = html! {
        h1 { "looptime comparison" }
        p.path { "A: " (c.a) br; "B: " (c.b) }
        h2 { "What moved" }
        @let moved = c.moved();
        @if moved.is_empty() {
            p { "Nothing beyond noise: " (c.multiplicity.tests) " tests, every verdict \"no clear change\"." }
        } @else {
            p { (super::moved_count(c, &moved)) }
            table {
                tr { th.l { "phase" } th.l { "test" } th.l { "verdict" } th.l { "shift" } th { "Holm-adjusted p" } }
                @for m in &moved {
                    tr {
                        td.l { (m.phase) } td.l { (m.label) }
                        td class=(format!("l {}", m.verdict.word())) { (m.verdict.word()) }
                        td.l { (m.shift) } td { (format!("{:.4}", m.p_holm)) }
                    }
                }
            }
        }
        @for w in &c.warnings { div.warn { (w) } }
        h2 { "What differs" }
        table {
            tr { th.l { "kind" } th.l { "key" } th.l { "A" } th.l { "B" } }
            @for d in &c.differences {
                tr { td.l { (d.kind) } td.l { (d.key) } td.l { (d.a.to_string()) } td.l { (d.b.to_string()) } }
            }
        }
        @if !c.caveats.is_empty() {
            h2 { "Caveats" }
            @for x in &c.caveats { div.caveat { (x) } }
        }
        (metrics_table(c))
        (rates_table(c))
        (hz_table(c))
        (forest(c))
        h2 { "Plots" }
        (figures(plots, None, None))
    };
    page(&format!("looptime comparison: {} vs {}", c.a, c.b), body)
}

/// The forest plot: one row per metric, its median difference and 95 %
/// interval relative to A's median (percent), the noise band (the median
/// noise floor, ± max(5 %, 20 µs / A's median)) shaded, zero marked. The
/// axis is clipped to ±100 %; a row beyond it ends in an arrow.
fn forest(c: &Comparison) -> Markup {
    const W: f64 = 760.0;
    const LABEL: f64 = 330.0;
    const ROW: f64 = 16.0;
    const LIMIT: f64 = 100.0;
    let rows: Vec<(&crate::compare::MetricComparison, f64)> = c
        .metrics
        .iter()
        .filter(|m| m.a.median_ns != 0)
        .map(|m| (m, m.a.median_ns.unsigned_abs() as f64))
        .collect();
    let h = ROW * (rows.len() as f64 + 2.0);
    let x =
        |pct: f64| LABEL + (pct.clamp(-LIMIT, LIMIT) + LIMIT) / (2.0 * LIMIT) * (W - LABEL - 10.0);
    let pct = |ns: i64, base: f64| ns as f64 / base * 100.0;
    html! {
        @if !rows.is_empty() {
            h2 { "Forest plot" }
            p { "Median difference B − A and its 95 % interval, in percent of A's median; the shaded band is the noise floor, the line is zero. Clipped to ±100 %." }
            svg.forest xmlns="http://www.w3.org/2000/svg" width=(W) height=(h) viewBox=(format!("0 0 {W} {h}")) role="img" {
                line x1=(x(0.0)) x2=(x(0.0)) y1="0" y2=(h) stroke="#444" stroke-width="1" {}
                @for (i, (m, base)) in rows.iter().enumerate() {
                    @let y = ROW * (i as f64 + 1.0);
                    @let floor = (0.05 * base).max(20_000.0) / base * 100.0;
                    @let lo = pct(m.ci_median_ns[0], *base);
                    @let hi = pct(m.ci_median_ns[1], *base);
                    @let mid = pct(m.diff_median_ns, *base);
                    @let color = match m.verdict { crate::compare::Verdict::Worse => "#b00020", crate::compare::Verdict::Better => "#1b7f3b", _ => "#333" };
                    g.row {
                        text x="4" y=(y + 4.0) font-size="11" font-family="DejaVu Sans, sans-serif" { (format!("{} {}", m.phase, m.display_name())) }
                        rect x=(x(-floor)) y=(y - 6.0) width=(x(floor) - x(-floor)) height="12" fill="#e8e8e8" {}
                        line x1=(x(lo)) x2=(x(hi)) y1=(y) y2=(y) stroke=(color) stroke-width="2" {}
                        circle cx=(x(mid)) cy=(y) r="3" fill=(color) {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn late(late_wake: u64, work_over_budget: u64) -> Lateness {
        Lateness {
            phase: "running".into(),
            budget_ns: 10_000_000,
            late_start_threshold_ns: Some(1_000_000),
            judged: 300,
            late: late_wake + work_over_budget,
            work_over_budget,
            late_wake,
            unattributed: 0,
            stages: Vec::new(),
            budget_declared: false,
            tolerance_declared: false,
        }
    }

    #[test]
    fn the_stage_caption_says_what_the_late_cycles_say() {
        // A scheduling diagnosis with 19 late cycles after work longer than
        // the period: the caption counts them and never says the work fits.
        let c = look_for("stage_breakdown", Some("scheduling"), Some(&late(40, 19)));
        assert!(
            c.contains("40 late cycles followed work within its budget (10.000 ms)")
                && c.contains("19 followed work longer than the budget")
                && !c.contains("the work fits"),
            "{c}"
        );
        // Every late cycle woke late: then, and only then, all of them.
        let c = look_for("stage_breakdown", Some("scheduling"), Some(&late(7, 0)));
        assert!(
            c.contains("every late cycle (7) followed work within its budget"),
            "{c}"
        );
    }
}
