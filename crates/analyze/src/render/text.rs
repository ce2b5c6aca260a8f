//! The human-readable report. Fixed formatting and stable ordering, so two
//! reports can be diffed.

use std::fmt::Write;

use crate::metrics::{Dist, EpisodeState, Number, Report, StageReport};
use looptime_capture::CpuTimeMode;

/// `text` with every control character except the newline replaced by its
/// `\u{..}` escape, so that names from the evidence (stages, phases,
/// values, attributes, paths in errors) cannot send escape sequences to the
/// user's terminal. Applied to everything the text report, the comparison
/// and error messages print; JSON output is escaped by serde instead.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n';
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

mod age;
mod input;

fn ms(ns: f64) -> String {
    super::fixed(ns / 1e6, 3)
}
fn us(ns: f64) -> String {
    super::fixed(ns / 1e3, 1)
}

/// A stage row's figures as printed by the text and HTML reports: count,
/// wall mean / p50 / p99 / max and CPU mean / p99 in ms, and the mean share
/// of the period in percent.
pub(crate) fn stage_cells(s: &StageReport) -> [String; 8] {
    let cpu = |f: fn(&Dist) -> f64| s.cpu.as_ref().map_or("-".into(), |c| ms(f(c)));
    [
        s.count.to_string(),
        ms(s.wall.mean_ns),
        ms(s.wall.p50_ns as f64),
        ms(s.wall.p99_ns as f64),
        ms(s.wall.max_ns as f64),
        cpu(|c| c.mean_ns),
        cpu(|c| c.p99_ns as f64),
        s.mean_share_of_period
            .map_or("-".into(), |x| format!("{:.1}", x * 100.0)),
    ]
}

/// A caller value as printed: `int` figures exactly, floats that are whole
/// as integers, any other float to three decimals (the JSON report keeps
/// full precision).
pub(crate) fn value_number(x: Number) -> String {
    match x {
        Number::Int(i) => i.to_string(),
        Number::Float(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Number::Float(x) => format!("{x:.3}"),
    }
}

fn dist_row(out: &mut String, label: &str, d: &Option<Dist>, unit: fn(f64) -> String) {
    match d {
        None => {
            let _ = writeln!(out, "  {label:<22} -");
        }
        Some(d) => {
            let _ = writeln!(
                out,
                "  {label:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  (n={})",
                unit(d.mean_ns),
                unit(d.p50_ns as f64),
                unit(d.p90_ns as f64),
                unit(d.p99_ns as f64),
                unit(d.p999_ns as f64),
                unit(d.max_ns as f64),
                d.count
            );
        }
    }
}

/// Render `r` as text.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    state(&mut o, r);
    capture(&mut o, r);
    phases(&mut o, r);
    distributions(&mut o, r);
    spin(&mut o, r);
    stages(&mut o, r);
    values(&mut o, r);
    age::data_age(&mut o, r);
    input::input_paced(&mut o, r);
    input::budget(&mut o, r);
    threads(&mut o, r);
    verdicts(&mut o, r);
    o
}

/// A thread's callbacks by name: calls, the period between calls (p50,
/// p99, max, ms) and, with a declared period, the periods skipped.
fn callback_table(o: &mut String, cbs: &[crate::metrics::CallbackReport]) {
    if cbs.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "    callbacks by name (period between calls, ms; skipped: against the declared period)"
    );
    for c in cbs {
        let p = c.period.as_ref().map_or("-".into(), |d| {
            format!(
                "p50 {} p99 {} max {}",
                ms(d.p50_ns as f64),
                ms(d.p99_ns as f64),
                ms(d.max_ns as f64)
            )
        });
        let declared = match (c.period_ns, c.skipped) {
            (Some(n), Some(k)) => format!(", period {} ms, {k} skipped", ms(n as f64)),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "    {:<10} {:<14} {:<40} {:>7} calls  {p}{declared}",
            terminal_safe(&c.phase),
            terminal_safe(c.kind.as_deref().unwrap_or("-")),
            terminal_safe(&c.name),
            c.calls
        );
    }
}

/// Background threads (schema 2): each one's rate and stages, then the
/// overlap of the control stages with their work.
fn threads(o: &mut String, r: &Report) {
    if r.threads.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nbackground threads (each from its own file)");
    for t in &r.threads {
        let rates: Vec<String> = t
            .phases
            .iter()
            .map(|p| {
                let hz = p.loop_hz.map_or("-".into(), |h| format!("{h:.2} Hz"));
                if t.implicit_cycles {
                    format!("{} spans", p.cycles)
                } else {
                    format!("{} {} cycles at {hz}", p.phase, p.cycles)
                }
            })
            .collect();
        let _ = writeln!(
            o,
            "  {} (tid {}, {}, {}): {}",
            terminal_safe(&t.thread),
            t.tid.map_or("?".into(), |x| x.to_string()),
            t.file,
            t.state.name(),
            rates.join("; ")
        );
        stage_table(o, &t.stages);
        callback_table(o, &t.callbacks);
        if !t.values.is_empty() {
            let _ = writeln!(o, "    values");
            value_table(o, &t.values, "    ");
        }
    }
    if !r.overlap.is_empty() {
        let _ = writeln!(
            o,
            "\noverlap: share of each control stage's wall time while a background thread had a span open"
        );
        let _ = writeln!(
            o,
            "  {:<10} {:<32} {:<20} {:>7} {:>9}",
            "phase", "control stage", "thread", "spans", "overlap %"
        );
        for x in &r.overlap {
            let _ = writeln!(
                o,
                "  {:<10} {:<32} {:<20} {:>7} {:>9}",
                terminal_safe(&x.phase),
                terminal_safe(&x.path),
                terminal_safe(&x.thread),
                x.spans,
                x.share.map_or("-".into(), |s| format!("{:.1}", s * 100.0))
            );
        }
    }
}

/// The episode, its state and the caveats.
fn state(o: &mut String, r: &Report) {
    let _ = writeln!(o, "looptime control timing: {}", r.episode);
    let _ = writeln!(o, "run: {}", terminal_safe(&r.run.line()));
    let state = match r.state {
        EpisodeState::Complete => "complete",
        EpisodeState::Aborted => "aborted (orderly abort: evidence written on stop)",
        EpisodeState::Recovered => {
            "recovered (the process died; evidence rebuilt from its ring by `looptime recover`)"
        }
        EpisodeState::Incomplete => "incomplete (no summary: abrupt end)",
    };
    let _ = writeln!(o, "state: {state}");
    // The first glance: one line per phase (docs/metrics.md, Summary).
    if !r.summary.is_empty() {
        let _ = writeln!(o);
        for c in &r.summary {
            let _ = writeln!(o, "{}", c.words);
        }
    }
    if !r.caveats.is_empty() {
        let _ = writeln!(o, "\ncaveats (read these before the numbers):");
        for c in &r.caveats {
            let _ = writeln!(o, "  ! {c}");
        }
    }
}

/// What was captured and lost, the nominal period, the recorder overhead.
fn capture(o: &mut String, r: &Report) {
    let c = &r.capture;
    let _ = writeln!(o, "\ncapture");
    let _ = writeln!(
        o,
        "  {} cycles retained of capacity {}; earlier cycles dropped: {}; spans dropped: {}",
        c.retained_cycles,
        c.capacity_cycles,
        c.dropped_cycles.map_or("unknown".into(), |d| d.to_string()),
        c.spans_dropped_total.unwrap_or(c.spans_dropped_retained)
    );
    if let (Some(f), Some(l), Some(s)) = (c.first_cycle, c.last_cycle, c.span_s) {
        let _ = writeln!(o, "  cycles {f}..{l} over {s:.3} s");
    }
    if let Some(p) = c.nominal_period_ns {
        let _ = writeln!(
            o,
            "  nominal period {} ms ({:.2} Hz)",
            ms(p as f64),
            1e9 / p as f64
        );
    }
    let _ = writeln!(o, "  thread CPU time: {}", cpu_mode_words(c.thread_cpu));
    let oh = &c.overhead;
    let _ = writeln!(
        o,
        "  recorder overhead: span {:.0} ns wall-only, {:.0} ns with CPU time; cycle {:.0} ns; clock read {:.0} ns",
        oh.span_wall_ns, oh.span_cpu_ns, oh.cycle_ns, oh.clock_read_ns
    );
    if c.thread_cpu == CpuTimeMode::Cycle && oh.cycle_cpu_ns > 0.0 {
        let _ = writeln!(
            o,
            "  a cycle with its CPU time: {:.0} ns (CPU clock read {:.0} ns)",
            oh.cycle_cpu_ns, oh.thread_cpu_read_ns
        );
    }
}

/// What the CPU-time mode means for the report's CPU figures.
pub(crate) fn cpu_mode_words(m: CpuTimeMode) -> &'static str {
    match m {
        CpuTimeMode::Spans => "per span (the stages' cpu columns; cycles carry no CPU time)",
        CpuTimeMode::Cycle => "per cycle (work CPU and off-CPU per phase; spans are wall-only)",
        CpuTimeMode::Off => "off (no CPU figures)",
    }
}

/// Rates per phase.
fn phases(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "\nphases (segments are continuous runs of one phase; rates never cross a transition)"
    );
    let _ = writeln!(
        o,
        "  {:<10} {:>4} {:>7} {:>10} {:>9} {:>8} {:>10} {:>9}",
        "phase", "segs", "cycles", "loop Hz", "overruns", "skipped", "command Hz", "commands"
    );
    for p in &r.phases {
        let _ = writeln!(
            o,
            "  {:<10} {:>4} {:>7} {:>10} {:>9} {:>8} {:>10} {:>9}",
            p.phase,
            p.segments,
            p.cycles,
            p.loop_hz.map_or("-".into(), |h| format!("{h:.3}")),
            p.overruns,
            p.skipped,
            p.command_hz.map_or("-".into(), |h| format!("{h:.3}")),
            p.commands
        );
    }
    let _ = writeln!(
        o,
        "  (command Hz counts submissions from span starts; it says nothing of delivery or motion)"
    );
}

/// Period, work, overshoot and lag per phase.
fn distributions(o: &mut String, r: &Report) {
    let head = |o: &mut String, title: &str, unit: &str| {
        let _ = writeln!(
            o,
            "\n{title} ({unit})\n  {:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "", "mean", "p50", "p90", "p99", "p99.9", "max"
        );
    };
    type Pick = fn(&crate::metrics::PhaseReport) -> &Option<Dist>;
    let rows = |o: &mut String, title: &str, unit: &str, pick: Pick, fmt: fn(f64) -> String| {
        head(o, title, unit);
        for p in &r.phases {
            dist_row(o, &p.phase, pick(p), fmt);
        }
    };
    rows(
        o,
        "period, start to start within segments",
        "ms",
        |p| &p.period,
        ms,
    );
    rows(
        o,
        "work, start to end (excludes the wait)",
        "ms",
        |p| &p.work,
        ms,
    );
    if r.phases.iter().any(|p| p.work_cpu.is_some()) {
        rows(
            o,
            "work CPU, the thread's CPU time over the work",
            "ms",
            |p| &p.work_cpu,
            ms,
        );
        rows(
            o,
            "off-CPU, work − work CPU (time the thread did not run)",
            "ms",
            |p| &p.off_cpu,
            ms,
        );
        off_cpu_shares(o, r);
    }
    match &r.schedule_metrics_absent {
        Some(reason) => {
            let _ = writeln!(
                o,
                "\nsleep overshoot and deadline lag: not computed\n  {reason}"
            );
        }
        None => {
            rows(
                o,
                "sleep overshoot, wake − target",
                "µs",
                |p| &p.sleep_overshoot,
                us,
            );
            rows(
                o,
                "deadline lag, start − target",
                "µs",
                |p| &p.deadline_lag,
                us,
            );
        }
    }
}

/// Each phase's off-CPU share of the work's wall time, on one line.
fn off_cpu_shares(o: &mut String, r: &Report) {
    let shares: Vec<String> = r
        .phases
        .iter()
        .filter_map(|p| {
            p.off_cpu_share
                .map(|s| format!("{} {:.2} %", p.phase, s * 100.0))
        })
        .collect();
    let _ = writeln!(
        o,
        "  off-CPU share of the work's wall time: {}",
        shares.join(", ")
    );
}

/// The scheduler's spin before each phase's cycles: margin range and
/// changes, spin per wait, share of a core.
fn spin(o: &mut String, r: &Report) {
    if r.phases.iter().all(|p| p.spin.is_none()) {
        return;
    }
    let _ = writeln!(
        o,
        "\nspin before the cycles (sleep to the margin, spin to the release point)"
    );
    for p in &r.phases {
        if let Some(s) = &p.spin {
            let _ = writeln!(o, "  {:<10} {}", p.phase, spin_words(s));
        }
    }
}

/// One phase's spin in words.
pub(crate) fn spin_words(s: &crate::metrics::SpinReport) -> String {
    let margin = if s.margin_min_ns == s.margin_max_ns {
        format!("margin {} µs", us(s.margin_min_ns as f64))
    } else {
        format!(
            "margin {}–{} µs ({} changes)",
            us(s.margin_min_ns as f64),
            us(s.margin_max_ns as f64),
            s.margin_changes
        )
    };
    let per_wait = s.spin.as_ref().map_or(String::new(), |d| {
        format!(
            "; spin per wait p50 {} µs, p99 {} µs",
            us(d.p50_ns as f64),
            us(d.p99_ns as f64)
        )
    });
    let share = s.spin_share.map_or(String::new(), |x| {
        format!("; spinning {:.2} % of one core", x * 100.0)
    });
    format!("{margin}{per_wait}{share}")
}

/// The stage tree per phase.
fn stages(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "\nstages (nested: a parent's time includes its children's; never add them)"
    );
    stage_table(o, &r.stages);
}

/// Rows of stages, a heading line per phase.
fn stage_table(o: &mut String, stages: &[StageReport]) {
    // The CPU columns only when some stage has CPU time (`spans` mode): in
    // the default `cycle` mode they would be `-` throughout.
    let with_cpu = stages.iter().any(|s| s.cpu.is_some());
    let mut last_phase = "";
    for s in stages {
        if s.phase != last_phase {
            let cpu_head = if with_cpu {
                format!(" {:>9} {:>9}", "cpu ms", "cpu p99")
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "  [{}]{:<24} {:>7} {:>9} {:>9} {:>9} {:>9}{cpu_head} {:>7}",
                s.phase, "", "n", "wall ms", "p50", "p99", "max", "%period"
            );
            last_phase = &s.phase;
        }
        let name = s.label("  ");
        let [n, mean, p50, p99, max, cpu, cpu99, share] = stage_cells(s);
        let cpu_cells = if with_cpu {
            format!(" {cpu:>9} {cpu99:>9}")
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "    {name:<30} {n:>7} {mean:>9} {p50:>9} {p99:>9} {max:>9}{cpu_cells} {share:>7}"
        );
    }
}

/// A value's unit as the reports print it: the file's own word, but
/// `us` as `µs` (the reports' word for microseconds everywhere else).
pub(crate) fn unit_word(unit: &str) -> &str {
    match unit {
        "us" => "µs",
        u => u,
    }
}

/// Caller values.
fn values(o: &mut String, r: &Report) {
    if !r.values.is_empty() {
        let _ = writeln!(o, "\nrobot-side and caller values");
        value_table(o, &r.values, "");
    }
}

/// One line per value (count, min, mean, max, lost states), indented.
fn value_table(o: &mut String, values: &[crate::metrics::ValueReport], indent: &str) {
    let labels: Vec<String> = values
        .iter()
        .map(|v| format!("{} ({})", terminal_safe(&v.name), unit_word(&v.unit)))
        .collect();
    let width = labels.iter().map(String::len).max().unwrap_or(0);
    for (v, label) in values.iter().zip(&labels) {
        let f = |x: Option<Number>| x.map_or("-".into(), value_number);
        let line = format!(
            "{indent}  {label:<width$}  n={:<7} min {:<12} mean {:<12} max {:<12}{}",
            v.count,
            f(v.min),
            // A counter (one with a lost-states figure) has no
            // meaningful mean.
            if v.lost.is_some() {
                "-".to_string()
            } else {
                f(v.mean.map(Number::Float))
            },
            f(v.max),
            v.lost
                .map_or(String::new(), |l| format!(" lost states {l}"))
        );
        let _ = writeln!(o, "{}", line.trim_end());
    }
}

/// The diagnosis and the cross-check.
fn verdicts(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\ndiagnosis");
    for d in &r.diagnosis {
        let _ = writeln!(o, "  {d}");
    }
    let x = &r.crosscheck;
    match &x.not_checked {
        Some(why) => {
            let _ = writeln!(o, "\ncross-check: not done ({why})");
        }
        None => {
            let _ = writeln!(
                o,
                "\ncross-check: {} summary figures compared with the recomputation, {} mismatch(es)",
                x.checked,
                x.mismatches.len()
            );
            for m in &x.mismatches {
                let _ = writeln!(
                    o,
                    "  ! {}: summary {} vs recomputed {} (tolerance {})",
                    m.figure, m.summary, m.recomputed, m.tolerance
                );
            }
        }
    }
}
