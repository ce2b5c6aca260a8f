//! Capture facts and caveats: how the episode ended, what was kept and
//! lost, and everything that limits what the numbers mean (docs/metrics.md,
//! State and caveats; Capture).

use looptime_capture::{CaptureStatus, ClockDomain, Header};

use super::columns::nominal_period;
use super::report::{CaptureReport, EpisodeState};
use super::table::r4;
use crate::evidence::Evidence;

/// Complete or aborted from the summary's status; incomplete without a
/// usable summary.
pub fn episode_state(ev: &Evidence) -> EpisodeState {
    match &ev.summary {
        Some(s) => match s.status {
            CaptureStatus::Complete => EpisodeState::Complete,
            CaptureStatus::Aborted => EpisodeState::Aborted,
            CaptureStatus::Recovered => EpisodeState::Recovered,
        },
        None => EpisodeState::Incomplete,
    }
}

/// Why sleep overshoot and deadline lag are not computed, when they are not.
pub fn schedule_absent_reason(h: &Header) -> Option<String> {
    let clocks = &h.clocks;
    (!clocks.schedule_comparable()).then(|| {
        format!(
            "sleep overshoot and deadline lag are not computed: target_ns is on the {} clock and wake_ns/start_ns on the {} clock, which cannot be subtracted{}",
            clocks.target_ns.as_str(),
            clocks.wake_ns.as_str(),
            if clocks.target_ns == ClockDomain::Simulation { " (an uncapped run schedules on simulation time)" } else { "" }
        )
    })
}

/// The caveat of a recovered episode: the process died, what the ring
/// held, what was lost with it, and the clock slope used.
fn recovered_caveat(ev: &Evidence) -> String {
    let r = ev.summary.as_ref().and_then(|s| s.recovery.as_ref());
    let detail = match r {
        Some(r) => format!(
            "{} complete cycles recovered from {} (writer pid {}, {}); {} in progress and {} torn records lost",
            r.cycles_recovered, r.ring_file, r.writer_pid, r.ring_state, r.in_progress_records, r.torn_records
        ),
        None => "the summary carries no recovery record".to_string(),
    };
    let slope = if ev.header.tsc.slope_source == "anchors" {
        "times use the TSC's slope between the start anchor and the last running anchor the recorder took (every 100 ms)"
    } else {
        "there is no running clock anchor, so times use quanta's TSC slope"
    };
    format!("recovered: the process died (kill -9, crash or OOM kill) and the evidence was rebuilt from its shared-memory ring by `looptime recover`: {detail}; {slope}; the evidence ends at the last complete cycle")
}

/// Which run `ev` is: its directory with a final link resolved, and what
/// its manifest says (session, rollout, config, host, start).
pub fn run_identity(ev: &Evidence) -> super::report::RunIdentity {
    let dir = match std::fs::read_link(&ev.dir) {
        Ok(target) if target.is_absolute() => target,
        Ok(target) => ev.dir.parent().map_or(target.clone(), |p| p.join(&target)),
        Err(_) => ev.dir.clone(),
    };
    let text = |p: &str| ev.manifest_str(p);
    super::report::RunIdentity {
        dir: dir.display().to_string(),
        label: text("/config/run/label"),
        session: text("/session"),
        rollout: text("/rollout"),
        config_source: text("/config_source"),
        config_hash: text("/config_hash"),
        host: text("/host/hostname"),
        created_utc: text("/created_utc"),
    }
}

/// What was captured and what was lost.
pub fn capture_report(ev: &Evidence) -> CaptureReport {
    let h = &ev.header;
    let summary = ev.summary.as_ref();
    let (first, last) = (ev.cycles.first(), ev.cycles.last());
    // A recovered summary's dropped count includes the cycles that were in
    // progress or torn at the kill (the ring's writer had begun them); they
    // were never dropped by overflow, so they are reported apart. Episodes
    // recovered before this rule read right too: nothing in the files
    // changes, only how the two counts are told apart.
    let lost_at_kill = summary
        .and_then(|s| s.recovery.as_ref())
        .map(|r| r.in_progress_records + r.torn_records);
    CaptureReport {
        capacity_cycles: h.capacity.max_cycles,
        retained_cycles: ev.cycles.len() as u64,
        dropped_cycles: summary.map(|s| {
            s.capture
                .dropped_cycles
                .saturating_sub(lost_at_kill.unwrap_or(0))
        }),
        lost_at_kill,
        spans_dropped_retained: ev.cycles.iter().map(|c| c.spans_dropped as u64).sum(),
        spans_dropped_total: summary.map(|s| s.capture.spans_dropped),
        values_dropped: summary.and_then(|s| s.capture.values_dropped),
        first_cycle: first.map(|c| c.cycle),
        last_cycle: last.map(|c| c.cycle),
        span_s: first
            .zip(last)
            .map(|(f, l)| r4((l.start_ns - f.start_ns) as f64 / 1e9)),
        lines_skipped: ev.skipped_lines,
        truncated_last_line: ev.truncated_last_line,
        nominal_period_ns: nominal_period(h),
        overhead: h.overhead.clone(),
        thread_cpu: h.cpu_mode(),
    }
}

/// The caveats, in the documented order.
pub fn caveats(
    ev: &Evidence,
    state: EpisodeState,
    capture: &CaptureReport,
    absent_reason: Option<&str>,
) -> Vec<String> {
    let mut out = Vec::new();
    match state {
        EpisodeState::Aborted => out.push("aborted: the run was stopped early (orderly abort); the evidence is complete up to the stop".to_string()),
        EpisodeState::Recovered => out.push(recovered_caveat(ev)),
        EpisodeState::Incomplete => out.push(match &ev.summary_problem {
            Some(p) => format!("incomplete: the summary is unusable ({p}); figures come from the JSONL only"),
            None => "incomplete: no control_timing_summary.json, so the run ended abruptly or its finish was interrupted; dropped counts are unknown".to_string(),
        }),
        EpisodeState::Complete => {}
    }
    if ev.truncated_last_line {
        out.push("truncated: the last line of control_timing.jsonl was cut off (an abrupt end) and was ignored".to_string());
    }
    let n = ev.cycles.len();
    if let Some(k) = capture.lost_at_kill.filter(|k| *k > 0) {
        out.push(format!("lost at the kill: {k} cycle(s) in progress (or torn) when the process died, not retained; this is not ring overflow"));
    }
    if let Some(d) = capture.dropped_cycles.filter(|d| *d > 0) {
        out.push(format!("ring full: {d} earlier cycles were dropped; only the latest {n} were kept (raise run.timing_max_cycles to keep more)"));
    }
    let spans_dropped = capture
        .spans_dropped_total
        .unwrap_or(capture.spans_dropped_retained);
    if spans_dropped > 0 {
        out.push(format!("{spans_dropped} spans did not fit their cycle and were dropped; stage counts are low (raise run.timing_max_spans_per_cycle)"));
    }
    if let Some(v) = capture.values_dropped.filter(|v| *v > 0) {
        out.push(format!("{v} value(s) were set to a number that is not finite (NaN or ±inf) and were not written; the value tables leave them out (check the code that sets them)"));
    }
    if ev.skipped_lines > 0 {
        out.push(format!(
            "--lenient skipped {} bad line(s): {}",
            ev.skipped_lines,
            ev.skipped_examples.join("; ")
        ));
    }
    if let Some(r) = absent_reason {
        out.push(format!("clocks not comparable: {r}"));
    }
    if n == 0 {
        out.push("no cycles: the file has a header only".to_string());
    }
    for name in &ev.missing_threads {
        out.push(format!(
            "thread {name}: the header declares it, but {} is missing (its finish did not run; `looptime recover` writes it from the thread's ring), so it is left out of the threads and the overlap",
            looptime_capture::thread_files(name).0
        ));
    }
    for t in &ev.threads {
        // The thread's own capture report, so that its text says what its
        // JSON says: a recovered thread's cycle in progress at the kill is
        // lost at the kill, not dropped by its ring.
        let tc = capture_report(t);
        let name = t.header.thread_name();
        if let Some(k) = tc.lost_at_kill.filter(|k| *k > 0) {
            out.push(format!(
                "thread {name}: lost at the kill: {k} cycle(s) in progress (or torn) when the process died, not retained; this is not ring overflow"
            ));
        }
        if let Some(d) = tc.dropped_cycles.filter(|d| *d > 0) {
            out.push(format!(
                "thread {name}: its ring dropped {d} earlier cycles; its overlap counts only the control spans inside the window it kept"
            ));
        }
    }
    out.extend(command_stage_caveat(ev));
    out.extend(file_caveats(ev));
    out
}

/// A command stage named by `--command-stage` or the header that is no
/// stage of the evidence: no command can be counted (commands 0, command
/// Hz `-`), so say which name was looked for, where it came from, and the
/// stages there are. The default name, absent, is no one's choice and says
/// nothing (an input-paced phase says it in its own caveat).
fn command_stage_caveat(ev: &Evidence) -> Option<String> {
    let (name, from) = &ev.command_stage;
    if *from == "default" || ev.header.stages.iter().any(|s| &s.name == name) {
        return None;
    }
    let from = if *from == "flag" {
        "--command-stage"
    } else {
        "the header's command_stage"
    };
    let stages: Vec<&str> = ev.header.stages.iter().map(|s| s.name.as_str()).collect();
    Some(format!(
        "the command stage `{name}` ({from}) is no stage of this evidence, so no command is counted (commands 0, command Hz -); its stages are {}: name the one that sends the command with --command-stage NAME",
        if stages.is_empty() { "none".to_string() } else { stages.join(", ") }
    ))
}

/// What the manifest does or does not say: missing (and what is known of
/// why), or counts that disagree with the evidence.
fn manifest_caveats(ev: &Evidence) -> Vec<String> {
    use looptime_capture::CaptureStatus;
    let orderly = ev
        .summary
        .as_ref()
        .filter(|s| matches!(s.status, CaptureStatus::Complete | CaptureStatus::Aborted));
    let Some(m) = &ev.manifest else {
        return vec![match orderly {
            Some(s) => format!(
                "no manifest.json: the run's configuration, host and source are unknown, so a comparison cannot say what differed; the summary says the recorder finished in order ({}), so the program wrote the evidence without an episode (looptime.open_episode, looptime_episode_create or serve write one)",
                if s.status == CaptureStatus::Complete { "complete" } else { "aborted" }
            ),
            None => "no manifest.json: the run's configuration, host and source are unknown, so a comparison cannot say what differed (no summary says the finish was orderly either: the process may have died after writing the evidence, or the file was removed)".to_string(),
        }];
    };
    let mut out = Vec::new();
    if ev.period_from_manifest {
        out.push(format!(
            "the evidence's header declares no nominal period; the manifest's schedule.nominal_period_ns ({} ms) was used to judge it: give the recorder the period (nominal_period_ns) so that the evidence holds it itself",
            ev.header.nominal_period_ns.unwrap_or(0) as f64 / 1e6
        ));
    }
    if let Some((m_ns, used, rtf)) = super::diagnosis::effective_contradiction(ev) {
        out.push(format!(
            "the manifest's schedule.effective_period_ns ({:.3} ms) contradicts the header's nominal period at rtf {rtf} ({:.3} ms): the header's was used to judge the run, since it is the evidence's own; check the manifest (written for another run, or edited?)",
            m_ns as f64 / 1e6,
            used as f64 / 1e6
        ));
    }
    out.extend(count_caveat(ev, m));
    out
}

/// The manifest's cycle count (`counts.cycles`) against the evidence's:
/// a value that is not a count is named; a count the evidence falls short
/// of, where the evidence says why itself (a truncated last line, lines
/// `--lenient` skipped, cycle indices missing), is the evidence's loss,
/// not the manifest's error; any other difference is the manifest's (a
/// count not taken from the rollout's start).
fn count_caveat(ev: &Evidence, m: &serde_json::Value) -> Option<String> {
    use looptime_capture::CaptureStatus;
    let raw = m.pointer("/counts/cycles")?;
    let recorded = ev
        .summary
        .as_ref()
        .map(|s| s.capture.total_cycles)
        .unwrap_or(ev.cycles.len() as u64);
    let Some(c) = raw.as_u64() else {
        return Some(format!(
            "the manifest's counts.cycles is {raw}, not a count of cycles (a whole number from 0 to 2^64 − 1): it was ignored, and the evidence's {recorded} cycles stand"
        ));
    };
    let complete = ev
        .summary
        .as_ref()
        .is_some_and(|s| s.status == CaptureStatus::Complete);
    if c == 0 && complete && recorded > 0 {
        return Some(format!(
            "the manifest counts 0 cycles for a complete run that recorded {recorded}: not this rollout's count; it was ignored"
        ));
    }
    if c == 0 || c == recorded {
        return None;
    }
    let rows = ev.cycles.len() as u64;
    let missing = ev.cycles.first().zip(ev.cycles.last()).map_or(0, |(a, b)| {
        (b.cycle + 1).saturating_sub(a.cycle).saturating_sub(rows)
    });
    let mut why = Vec::new();
    if ev.truncated_last_line {
        why.push("its last line is truncated".to_string());
    }
    if ev.skipped_lines > 0 {
        why.push(format!("--lenient skipped {} line(s)", ev.skipped_lines));
    }
    if missing > 0 {
        why.push(format!(
            "{missing} cycle index(es) are missing between its first and last"
        ));
    }
    if c > rows && !why.is_empty() {
        return Some(format!(
            "the manifest counts {c} cycles and the evidence holds {rows}: the evidence is short ({}; see the caveats above), so the manifest's count is the run's and the figures cover the {rows} cycles the evidence holds",
            why.join(", ")
        ));
    }
    Some(format!(
        "the manifest counts {c} cycles but the evidence recorded {recorded}: the manifest's counts are not this rollout's own (a scheduler reused across rollouts whose counts were not taken from the rollout's start?), so trust the evidence's"
    ))
}

/// Caveats about the files themselves rather than the run.
fn file_caveats(ev: &Evidence) -> Vec<String> {
    let mut out = Vec::new();
    if ev.header.nominal_period_ns == Some(0) {
        out.push("nominal_period_ns is 0 in the header, which is no period: treated as absent, so no share of the period and no rate judgement".to_string());
    }
    out.extend(manifest_caveats(ev));
    for t in &ev.leftover_temps {
        out.push(format!(
            "an interrupted finish left {} ({} bytes, process {}): {} was not completely written by that process",
            t.name, t.bytes, t.pid, t.target
        ));
    }
    out.extend(forms(ev, "the JSONL", ""));
    for t in &ev.threads {
        let file = looptime_capture::thread_files(t.header.thread_name()).0;
        out.extend(forms(t, &file, &format!(" of {file}")));
        if t.skipped_lines > 0 {
            out.push(format!(
                "--lenient skipped {} bad line(s) of {file}: {}",
                t.skipped_lines,
                t.skipped_examples.join("; ")
            ));
        }
    }
    out
}

/// What one file's form holds that the recorder never writes (a byte-order
/// mark, CRLF endings on the header or on any cycle line, blank lines),
/// named by `file` (`the JSONL` for the control thread's, as before, or a
/// thread's file name) with `of` after counts.
fn forms(ev: &Evidence, file: &str, of: &str) -> Vec<String> {
    let mut out = Vec::new();
    let notes = ev.header_notes;
    if notes.bom {
        out.push(format!("{file} starts with a UTF-8 byte-order mark, which the recorder never writes (the file was re-saved by another tool); it was ignored"));
    }
    if notes.crlf || ev.cr_lines > 0 {
        out.push(format!("{file} has CRLF line endings, which the recorder never writes (the file was converted by another tool); they were read as LF"));
    }
    if ev.blank_lines > 0 {
        out.push(format!(
            "{} blank line(s) between records{of}, which the recorder never writes, were skipped",
            ev.blank_lines
        ));
    }
    for (field, value) in [
        ("compute_budget_ns", notes.budget_above_limit),
        ("deadline_tolerance_ns", notes.tolerance_above_limit),
    ] {
        if let Some(ns) = value {
            out.push(format!(
                "{file}'s header declares {field} = {ns} ns, above the 10 s a recorder declares (an undeclared sentinel written through?): it was read as undeclared, and nothing is judged against it"
            ));
        }
    }
    out
}
