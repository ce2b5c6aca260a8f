//! The gate where CI shows it (docs/ci.md): a GitHub-flavoured Markdown
//! summary (a job summary or a pull-request comment) and JUnit XML (for
//! GitLab, Jenkins and GitHub test reporters). Both read a
//! [`GateResult`]; neither decides anything.

use std::fmt::Write;

use crate::compare::Comparison;
use crate::gate::GateResult;
use crate::metrics::Report;

/// Why a gate checked nothing, in words: how many cases it had and what
/// each was.
pub fn nothing_checked(g: &GateResult) -> String {
    if g.cases.is_empty() {
        return "it had no case (no summary card, or no test in the comparison)".into();
    }
    let not_judged = g.cases.iter().filter(|c| c.outcome == "not judged").count();
    let not_gated = g.cases.iter().filter(|c| c.outcome == "not gated").count();
    let mut parts = Vec::new();
    if not_judged > 0 {
        parts.push(format!(
            "{not_judged} of {} cases not judged (no nominal period, an uncapped run, or another phase judged)",
            g.cases.len()
        ));
    }
    if not_gated > 0 {
        parts.push(format!("{not_gated} of {} tests not gated", g.cases.len()));
    }
    parts.join(", ")
}

/// The gate's one-line verdict.
fn headline(g: &GateResult) -> String {
    let failed = g.failed().count();
    let level = g
        .fail_on
        .as_deref()
        .map_or(String::new(), |l| format!(" (--fail-on {l})"));
    if g.only_undecided() {
        format!(
            "**gate undecided**: {failed} of {} checked could not have seen the effect asked of them; record more rollouts a side{level}",
            g.checked()
        )
    } else if failed > 0 {
        format!(
            "**gate tripped**: {failed} of {} checked failed{level}",
            g.checked()
        )
    } else if g.checked_nothing() {
        if g.tripped() {
            format!(
                "**gate tripped**: it checked nothing, {}{level}",
                nothing_checked(g)
            )
        } else {
            format!(
                "gate passed with nothing checked (--allow-empty-gate): {}{level}",
                nothing_checked(g)
            )
        }
    } else if g.tripped() {
        format!("**gate tripped**: a warning about the pair, with --strict{level}")
    } else if g.fail_on.is_some() {
        format!("gate passed: {} checked{level}", g.checked())
    } else {
        "no gate (no --fail-on)".to_string()
    }
}

/// A Markdown table cell: no line breaks, pipes escaped.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown summary of a report's gate: the verdict, the cards, the
/// caveats.
pub fn report_markdown(r: &Report, g: &GateResult) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "### looptime: `{}`\n\n{}\n",
        cell(&r.episode),
        headline(g)
    );
    let _ = writeln!(
        o,
        "| phase | state | loop Hz | against | p99 period ms | overruns |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for c in &r.summary {
        let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&c.phase),
            c.state.word(),
            f(c.loop_hz),
            f(c.effective_hz),
            c.period_p99_ns
                .map_or("-".to_string(), |p| super::fixed(p as f64 / 1e6, 3)),
            c.overruns
        );
    }
    for c in r.summary.iter().filter(|c| c.diagnosis.is_some()) {
        let _ = writeln!(o, "\n{}", cell(&c.words));
    }
    if !r.caveats.is_empty() {
        let _ = writeln!(o, "\n**Caveats**\n");
        for x in &r.caveats {
            let _ = writeln!(o, "- {}", cell(x));
        }
    }
    o
}

/// The Markdown summary of a comparison's gate: the verdict, the
/// warnings about the pair first, what moved, the failed tests.
pub fn compare_markdown(c: &Comparison, g: &GateResult) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "### looptime: `{}` vs `{}`\n\n{}\n",
        cell(&c.a),
        cell(&c.b),
        headline(g)
    );
    settings_line(&mut o, c);
    if !c.warnings.is_empty() {
        let _ = writeln!(o, "**Warnings about the pair**\n");
        for w in &c.warnings {
            let _ = writeln!(o, "- {}", cell(w));
        }
        let _ = writeln!(o);
    }
    let moved = c.moved();
    if moved.is_empty() {
        let _ = writeln!(
            o,
            "What moved: nothing beyond noise ({} tests, Holm-adjusted).",
            c.multiplicity.tests
        );
    } else {
        let _ = writeln!(
            o,
            "**What moved**: {} (most significant first; intervals unadjusted, verdicts Holm-adjusted)\n",
            super::moved_count(c, &moved)
        );
        let _ = writeln!(o, "| phase | test | verdict | shift | p (Holm) |");
        let _ = writeln!(o, "|---|---|---|---|---|");
        for m in &moved {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {:.4} |",
                cell(&m.phase),
                cell(&m.label),
                m.verdict.word(),
                cell(&m.shift),
                m.p_holm
            );
        }
    }
    could_have_seen(&mut o, c, g);
    let failed: Vec<_> = g.failed().collect();
    if !failed.is_empty() {
        let _ = writeln!(o, "\n**Failed**\n");
        for f in failed {
            let _ = writeln!(o, "- `{}`: {}", cell(&f.name), cell(&f.detail));
        }
    }
    o
}

/// The config settings that differ between the sides, with A's and B's
/// values: what the change under test is (none: an A/A pair of configs).
fn settings_line(o: &mut String, c: &Comparison) {
    let items: Vec<String> = c
        .differences
        .iter()
        .filter(|d| d.kind == "config")
        .map(|d| {
            format!(
                "`{}` ({} → {})",
                cell(&d.key),
                cell(&d.a.to_string()),
                cell(&d.b.to_string())
            )
        })
        .collect();
    if !items.is_empty() {
        let _ = writeln!(o, "**Settings differing**: {}\n", items.join(", "));
    }
}

/// The gated tests that read "no clear change", each with the smallest
/// shift it would have called: a table up to [`LISTED_NO_CHANGE`] of them,
/// else how many and where the figures are.
fn could_have_seen(o: &mut String, c: &Comparison, g: &GateResult) {
    const LISTED_NO_CHANGE: usize = 20;
    let gated: Vec<&str> = g
        .cases
        .iter()
        .filter(|x| matches!(x.outcome, "passed" | "failed"))
        .map(|x| x.name.as_str())
        .collect();
    let family = c.gate.as_ref();
    let quiet: Vec<(crate::compare::TestCase, String)> = c
        .tests()
        .into_iter()
        .filter(|t| gated.contains(&t.name.as_str()))
        .filter_map(
            |t| match family.and_then(|f| f.tests.iter().find(|x| x.name == t.name)) {
                Some(own) => (own.verdict == crate::compare::Verdict::NoClearChange)
                    .then(|| (t.clone(), crate::gate::gate_words(&t, own))),
                None => (t.verdict == crate::compare::Verdict::NoClearChange)
                    .then(|| (t.clone(), t.could_have_seen())),
            },
        )
        .collect();
    if quiet.is_empty() {
        return;
    }
    if quiet.len() > LISTED_NO_CHANGE {
        let _ = writeln!(
            o,
            "\n{} gated tests read \"no clear change\"; the smallest shift each would have called with 80 % probability is its `detectable` in the JSON (`gate.tests`).",
            quiet.len()
        );
        return;
    }
    let _ = writeln!(
        o,
        "\n**No clear change, and what each test could have seen** (the shift it would have called with 80 % probability, at its level in the gate's family)\n"
    );
    let _ = writeln!(o, "| test | shift | would have called |");
    let _ = writeln!(o, "|---|---|---|");
    for (t, words) in quiet {
        let _ = writeln!(
            o,
            "| `{}` | {} | {} |",
            cell(&t.name),
            cell(&t.shift),
            cell(&words)
        );
    }
}

/// `s` escaped for XML text and attributes.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The gate as JUnit XML: one test suite, one test case per card or test;
/// a failed case carries its figure, interval and threshold; a case not
/// judged or not gated is JUnit's `skipped` (its only element for a case
/// that was not evaluated), its message saying which (`not judged: …`,
/// `not gated: worse: …`). With `--strict`, each warning about the pair
/// is a case too; a gate that checked nothing (and tripped) is one
/// failing case that says so.
pub fn junit(g: &GateResult, classname: &str) -> String {
    let strict_cases: Vec<(String, String)> = if g.strict && g.fail_on.is_some() {
        g.warnings
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("pair warning {}", i + 1), w.clone()))
            .collect()
    } else {
        Vec::new()
    };
    let mut strict_cases = strict_cases;
    if g.checked_nothing() && g.tripped() {
        strict_cases.push(("gate checked nothing".into(), nothing_checked(g)));
    }
    let tests = g.cases.len() + strict_cases.len();
    let failures = g.failed().count() + strict_cases.len();
    let skipped = g.cases.len() - g.checked();
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"looptime\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\">"
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\">",
        xml(&g.subject)
    );
    let level = g.fail_on.as_deref().unwrap_or("none");
    for c in &g.cases {
        let _ = write!(
            o,
            "    <testcase classname=\"{}\" name=\"{}\"",
            xml(classname),
            xml(&c.name)
        );
        match c.outcome {
            "failed" => {
                let _ = writeln!(
                    o,
                    ">\n      <failure type=\"timing\" message=\"{} (--fail-on {level})\">{}</failure>\n    </testcase>",
                    xml(&c.detail),
                    xml(&c.detail)
                );
            }
            "not judged" | "not gated" => {
                let _ = writeln!(
                    o,
                    ">\n      <skipped message=\"{}: {}\"/>\n    </testcase>",
                    c.outcome,
                    xml(&c.detail)
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    ">\n      <system-out>{}</system-out>\n    </testcase>",
                    xml(&c.detail)
                );
            }
        }
    }
    for (name, w) in &strict_cases {
        let (kind, why) = if name.starts_with("pair") {
            ("pair", "--strict")
        } else {
            ("gate", "no --allow-empty-gate")
        };
        let _ = writeln!(
            o,
            "    <testcase classname=\"{}\" name=\"{}\">\n      <failure type=\"{kind}\" message=\"{} ({why})\">{}</failure>\n    </testcase>",
            xml(classname),
            xml(name),
            xml(w),
            xml(w)
        );
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}
