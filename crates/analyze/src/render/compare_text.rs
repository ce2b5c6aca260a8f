//! The comparison as text, in the order docs/compare.md gives.

use std::fmt::Write;

use crate::compare::*;

/// One side's per-rollout figures: `median/p99` in ms for each rollout,
/// space separated.
pub fn per_rollout(r: &[RolloutFigures]) -> String {
    r.iter()
        .map(|x| {
            format!(
                "{:.3}/{:.3}",
                x.median_ns as f64 / 1e6,
                x.p99_ns as f64 / 1e6
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Render a comparison as text: which runs, what differs, the metric
/// tests, the rates.
pub fn render(c: &Comparison) -> String {
    let mut o = String::new();
    let sessions = sides(&mut o, c);
    metric_table(&mut o, c, sessions);
    rate_table(&mut o, c);
    hz_table(&mut o, c);
    o
}

/// The headline: the tests that moved, most significant first, or that
/// none did.
fn moved(o: &mut String, c: &Comparison) {
    let moved = c.moved();
    let tests = c.multiplicity.tests;
    if moved.is_empty() {
        let _ = writeln!(
            o,
            "\nwhat moved: nothing beyond noise ({tests} tests, every verdict \"no clear change\")"
        );
        return;
    }
    let _ = writeln!(
        o,
        "\nwhat moved: {} (most significant first; Holm-adjusted p)",
        super::moved_count(c, &moved)
    );
    for m in &moved {
        let word = if m.verdict == Verdict::Worse {
            "WORSE"
        } else {
            m.verdict.word()
        };
        let _ = writeln!(
            o,
            "  {:<9} {:<46} {:<15} {}  p {:.4}",
            m.phase, m.label, word, m.shift, m.p_holm
        );
    }
}

/// The sides, left-out rollouts, warnings, differences and caveats;
/// whether either side is a session of several rollouts.
fn sides(o: &mut String, c: &Comparison) -> bool {
    let _ = writeln!(o, "looptime comparison\n  A: {}\n  B: {}", c.a, c.b);
    let sessions = c.a_episodes.len() > 1 || c.b_episodes.len() > 1;
    if sessions {
        for (side, eps) in [("A", &c.a_episodes), ("B", &c.b_episodes)] {
            for (i, e) in eps.iter().enumerate() {
                let _ = writeln!(o, "    {side}[{i}] {e}");
            }
        }
    }
    // What moved comes first, right under which runs these are.
    moved(o, c);
    if !c.left_out.is_empty() {
        let _ = writeln!(
            o,
            "\nleft out (no control_timing.jsonl; `looptime recover` may rebuild them)"
        );
        for d in &c.left_out {
            let _ = writeln!(o, "  {d}");
        }
    }
    if !c.warnings.is_empty() {
        let _ = writeln!(o, "\nwarnings");
        for w in &c.warnings {
            let _ = writeln!(o, "  ! {w}");
        }
    }
    let _ = writeln!(o, "\nwhat differs");
    if c.differences.is_empty() {
        let _ = writeln!(o, "  nothing recorded differs");
    }
    for d in &c.differences {
        let _ = writeln!(o, "  [{}] {}: {} -> {}", d.kind, d.key, d.a, d.b);
    }
    if !c.caveats.is_empty() {
        let _ = writeln!(o, "\ncaveats");
        for x in &c.caveats {
            let _ = writeln!(o, "  ! {x}");
        }
    }
    sessions
}

/// How the intervals were made, for the tables' headers: the run-level
/// test's, the bootstrap's, or both (a metric some rollouts lack).
fn interval_words(c: &Comparison, sessions: bool) -> String {
    let methods: Vec<&str> = c
        .metrics
        .iter()
        .map(|m| m.test_median.method.as_str())
        .chain(c.rates.iter().map(|r| r.test.method.as_str()))
        .chain(c.hz.iter().map(|h| h.test.method.as_str()))
        .collect();
    let run_level = methods.contains(&"rollouts");
    let boot = methods.contains(&"bootstrap");
    let bootstrap = format!(
        "{}stationary block-bootstrap CI, {} resamples, seed {}",
        if sessions {
            "two-level (rollouts, then blocks) "
        } else {
            ""
        },
        c.bootstrap.resamples,
        c.bootstrap.seed
    );
    let rollouts = format!(
        "run-level CI (Welch's t over each rollout's own statistic; {} within-rollout resamples, seed {})",
        c.bootstrap.resamples, c.bootstrap.seed
    );
    match (run_level, boot) {
        (true, true) => format!("{rollouts}; a test with one rollout on a side: {bootstrap}"),
        (true, false) => rollouts,
        _ => bootstrap,
    }
}

/// The metric tests, with per-rollout figures for sessions.
fn metric_table(o: &mut String, c: &Comparison, sessions: bool) {
    let _ = writeln!(
        o,
        "\nmetrics (ms; Δ = B − A; 95 % {})",
        interval_words(c, sessions)
    );
    let mu = &c.multiplicity;
    let _ = writeln!(
        o,
        "  {} tests over {} metrics, {} (family-wise error {} %): a verdict needs its adjusted p below {}, its interval excluding zero and a shift above the noise floor; the intervals shown are each test's own, unadjusted; `detect` is the smallest |Δ p50| the test would have called with 80 % probability",
        mu.tests,
        mu.metrics,
        if mu.method == "holm" { "Holm-adjusted" } else { mu.method.as_str() },
        mu.alpha * 100.0,
        mu.alpha
    );
    let _ = writeln!(
        o,
        "  {:<9} {:<40} {:>9} {:>9} {:>9} {:>21} {:>9} {:>9} {:>21}  verdict",
        "phase", "metric", "A p50", "B p50", "Δ p50", "CI Δ p50", "detect", "Δ p99", "CI Δ p99"
    );
    // Overlap rows that are zero on both sides say nothing: folded into
    // one line. They stay in the JSON and the Holm family.
    let folded = c.metrics.iter().filter(|m| m.is_zero_overlap()).count();
    for m in c.metrics.iter().filter(|m| !m.is_zero_overlap()) {
        metric_row(o, m, sessions);
    }
    if folded > 0 {
        let _ = writeln!(
            o,
            "  ({folded} overlap row(s) zero on both sides folded: no control stage overlapped that thread's work; --json has them)"
        );
    }
}

/// One metric's lines of the comparison table: the row, then (for
/// sessions) its per-rollout figures, its tail warning and its rate.
fn metric_row(o: &mut String, m: &crate::compare::MetricComparison, sessions: bool) {
    let ms = |ns: i64| super::fixed(ns as f64 / 1e6, 3);
    // An interval's end that is not zero shows its side of zero.
    let end = |ns: i64| {
        if ns != 0 && ns.abs() < 500 {
            crate::compare::signed_ms(ns)
        } else {
            ms(ns)
        }
    };
    let name = m.display_name();
    let _ = writeln!(
        o,
        "  {:<9} {:<40} {:>9} {:>9} {:>9} {:>21} {:>9} {:>9} {:>21}  {}",
        m.phase,
        name,
        ms(m.a.median_ns),
        ms(m.b.median_ns),
        ms(m.diff_median_ns),
        format!("[{}, {}]", end(m.ci_median_ns[0]), end(m.ci_median_ns[1])),
        super::fixed(m.test_median.detectable / 1e6, 3),
        ms(m.diff_p99_ns),
        if m.p_p99.is_some() {
            format!("[{}, {}]", end(m.ci_p99_ns[0]), end(m.ci_p99_ns[1]))
        } else {
            format!(
                "not tested (n < {})",
                crate::compare::thousands(crate::compare::MIN_SAMPLES_FOR_P99_VERDICT as u64)
            )
        },
        if m.verdict == Verdict::Worse {
            "WORSE"
        } else {
            m.verdict.word()
        }
    );
    reasons(o, m);
    rollout_lines(o, m, sessions);
    if let Some(w) = &m.tail_warning {
        let _ = writeln!(
            o,
            "  {:<9} {:<40} p99.9 {} -> {} ({w})",
            "",
            "",
            ms(m.a.p999_ns),
            ms(m.b.p999_ns)
        );
    }
    if let (Some(ha), Some(hb), Some(d)) = (m.a_hz, m.b_hz, m.diff_hz) {
        let _ = writeln!(
            o,
            "  {:<9} {:<40} {ha:>9.3} {hb:>9.3} {d:>+9.3} Hz ({:+.3} %)",
            "",
            if m.metric == "period" {
                "  loop Hz"
            } else {
                "  command Hz"
            },
            m.rel_diff_hz.unwrap_or(0.0) * 100.0
        );
    }
}

/// Under a metric's row of a comparison of sessions: each rollout's
/// figures, and, for the run-level test, the Δ it tested.
fn rollout_lines(o: &mut String, m: &crate::compare::MetricComparison, sessions: bool) {
    if sessions {
        let _ = writeln!(
            o,
            "  {:<9} {:<40} per rollout, p50/p99: A {}  B {}",
            "",
            "",
            per_rollout(&m.a_rollouts),
            per_rollout(&m.b_rollouts)
        );
    }
    if m.test_median.method == "rollouts" {
        let _ = writeln!(
            o,
            "  {:<9} {:<40} tested Δ p50 (mean of the rollouts' medians) {} ms, se {} ms, ν {:.2}",
            "",
            "",
            super::fixed(m.test_median.estimate / 1e6, 3),
            super::fixed(m.test_median.se / 1e6, 3),
            m.test_median.df
        );
    }
}

/// Under a row whose interval excludes zero beside "no clear change", the
/// reason (not significant after Holm, or below the noise floor): no
/// interval stands beside a verdict without it.
fn reasons(o: &mut String, m: &crate::compare::MetricComparison) {
    let unexplained = |v: Verdict, why: &str| {
        (v == Verdict::NoClearChange && why != "the interval holds zero").then(|| why.to_string())
    };
    let reasons: Vec<String> = [
        unexplained(m.verdict_median, &m.why_median).map(|w| format!("median: {w}")),
        m.verdict_p99
            .zip(m.why_p99.as_deref())
            .and_then(|(v, w)| unexplained(v, w))
            .map(|w| format!("p99: {w}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !reasons.is_empty() {
        let _ = writeln!(
            o,
            "  {:<9} {:<40} no clear change: {}",
            "",
            "",
            reasons.join("; ")
        );
    }
}

/// The rate tests (overruns and late cycles per 1,000).
fn rate_table(o: &mut String, c: &Comparison) {
    if !c.rates.is_empty() {
        let _ = writeln!(
            o,
            "\nrates (per 1,000 cycles; Δ = B − A; 95 % {}; `detect` as above)",
            interval_words(c, c.a_episodes.len() > 1 || c.b_episodes.len() > 1)
        );
        for r in &c.rates {
            let what = r.display_name();
            let _ = writeln!(
                o,
                "  {:<9} {:<40} {:>9.3} {:>9.3} {:>+9.3} {:>21} {:>9.3}  {}",
                r.phase,
                what,
                r.a_per_1000,
                r.b_per_1000,
                r.diff_per_1000,
                format!("[{:.3}, {:.3}]", r.ci_per_1000[0], r.ci_per_1000[1]),
                r.test.detectable,
                if r.verdict == Verdict::Worse {
                    "WORSE"
                } else {
                    r.verdict.word()
                }
            );
            if r.verdict == Verdict::NoClearChange && r.why != "the interval holds zero" {
                let _ = writeln!(o, "  {:<9} {:<40} no clear change: {}", "", "", r.why);
            }
        }
    }
}

/// The loop's and the commands' rate tests (Hz; lower is worse).
fn hz_table(o: &mut String, c: &Comparison) {
    if c.hz.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nloop and command rates (Hz, each rollout's 1e9 / mean interval; Δ = B − A, lower is worse; 95 % {}; `detect` as above)",
        interval_words(c, c.a_episodes.len() > 1 || c.b_episodes.len() > 1)
    );
    for h in &c.hz {
        let _ = writeln!(
            o,
            "  {:<9} {:<40} {:>9.3} {:>9.3} {:>+9.3} {:>21} {:>9.3}  {}",
            h.phase,
            h.display_name(),
            h.a_hz,
            h.b_hz,
            h.diff_hz,
            format!("[{:+.3}, {:+.3}]", h.ci_hz[0], h.ci_hz[1]),
            h.test.detectable,
            if h.verdict == Verdict::Worse {
                "WORSE"
            } else {
                h.verdict.word()
            }
        );
        if h.verdict == Verdict::NoClearChange && h.why != "the interval holds zero" {
            let _ = writeln!(o, "  {:<9} {:<40} no clear change: {}", "", "", h.why);
        }
    }
}
