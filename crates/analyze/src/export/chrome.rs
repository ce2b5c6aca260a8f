//! Trace Event Format (Chrome tracing, Perfetto, Tracy's importer): one
//! JSON object `{"traceEvents": [...], "displayTimeUnit": "ms"}`
//! (docs/export.md).
//!
//! * `pid` 1 is the episode; `tid` 1 is the cycles track, `tid` 2 the
//!   control thread's spans, `tid` 3 … each background thread's spans,
//!   named by `process_name` / `thread_name` metadata events (`ph: "M"`).
//! * Each cycle is a complete event (`ph: "X"`) `cycle` from its start to
//!   the end of its work, and `sleep` from its wait start to its wake, on
//!   the cycles track.
//! * Each span is a complete event named by its stage, `ts` its start and
//!   `dur` its wall time, `tdur` its thread-CPU time when measured; `args`
//!   holds its cycle, tree path, depth and attributes.
//! * Counters (`ph: "C"`) `period_ms`, `sleep_overshoot_us` and
//!   `deadline_lag_us` at each cycle's start, when defined.
//! * Each segment of a phase is an async span (`ph: "b"` / `"e"`, category
//!   `phase`, one id per segment) from its first cycle's start to its last
//!   cycle's end.
//! * Data age: each use of a sample whose publication a thread recorded is
//!   a flow arrow (`ph: "s"` at the publication on the publishing thread's
//!   track, `ph: "f"` at the use on the control thread's, category
//!   `sample`, named by the source, `args.seq` the sample).
//!
//! Times are µs since the earliest time the export holds (the first
//! cycle's wait, start or first span, over every thread), written with
//! three decimals: exact nanoseconds, so nesting survives.

use std::io::Write;

use serde_json::{json, Value};

use crate::analysis::Analysis;
use crate::error::{AnalyzeError, Result};
use crate::evidence::{Evidence, GroupDecode};

/// The cycles track.
const CYCLES_TID: u64 = 1;
/// The control thread's spans.
const CONTROL_TID: u64 = 2;

/// Nanoseconds since `t0` as a JSON number of µs with three decimals.
fn us(ns: i64, t0: i64) -> Value {
    let d = ns.saturating_sub(t0);
    let text = format!(
        "{}{}.{:03}",
        if d < 0 { "-" } else { "" },
        d.unsigned_abs() / 1000,
        d.unsigned_abs() % 1000
    );
    // The text is a valid JSON number by construction.
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Nanoseconds as µs with three decimals (a duration).
fn dur(ns: i64) -> Value {
    us(ns.max(0), 0)
}

/// The earliest time an episode's first cycle records: its start, the
/// wait before it, its first span.
fn earliest(ev: &Evidence) -> Option<i64> {
    let c = ev.cycles.first()?;
    let first_span = ev
        .span_rows()
        .ok()
        .and_then(|r| r.first().map(|s| s.start_ns));
    [Some(c.start_ns), c.sleep_start_ns, first_span]
        .into_iter()
        .flatten()
        .min()
}

fn spans_of(
    ev: &Evidence,
    tid: u64,
    t0: i64,
    emit: &mut dyn FnMut(Value) -> Result<()>,
) -> Result<u64> {
    let groups: std::collections::HashMap<u64, &GroupDecode> =
        ev.groups.iter().map(|g| (g.key, g)).collect();
    let rows = ev.span_rows()?;
    let mut n = 0;
    for c in &ev.cycles {
        let from = c.span_row as usize;
        let to = (from + c.n_spans as usize).min(rows.len());
        for s in &rows[from.min(to)..to] {
            let g = groups.get(&s.key);
            let name = ev
                .header
                .stages
                .get(s.stage as usize)
                .map_or("?", |st| st.name.as_str());
            let mut args = serde_json::Map::new();
            args.insert("cycle".into(), json!(c.cycle));
            if let Some(g) = g {
                args.insert("path".into(), json!(g.path));
                args.insert("depth".into(), json!(g.depth));
                for (k, v) in &g.attrs {
                    args.insert(k.clone(), json!(v));
                }
            }
            let mut e = json!({
                "ph": "X", "name": name, "cat": "stage", "pid": 1, "tid": tid,
                "ts": us(s.start_ns, t0), "dur": dur(s.wall_ns), "args": args,
            });
            if s.cpu_ns >= 0 {
                e["tdur"] = dur(s.cpu_ns);
            }
            emit(e)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Data age: a flow arrow from each published sample to every control
/// thread's use of it (a use before its publication has none). Returns the
/// arrows drawn.
fn flows(ev: &Evidence, t0: i64, emit: &mut dyn FnMut(Value) -> Result<()>) -> Result<u64> {
    let mut published: std::collections::HashMap<(&str, u64), (u64, i64)> = Default::default();
    let tracks = std::iter::once((CONTROL_TID, ev)).chain(
        ev.threads
            .iter()
            .enumerate()
            .map(|(i, t)| (CONTROL_TID + 1 + i as u64, t)),
    );
    for (tid, t) in tracks {
        for x in t.samples.iter().filter(|x| x.produced) {
            if let Some(s) = t.header.sources.get(x.source as usize) {
                published
                    .entry((s.name.as_str(), x.seq))
                    .or_insert((tid, x.at_ns));
            }
        }
    }
    let mut id = 0u64;
    for x in ev.samples.iter().filter(|x| !x.produced) {
        let Some(s) = ev.header.sources.get(x.source as usize) else {
            continue;
        };
        let Some(&(tid, at)) = published.get(&(s.name.as_str(), x.seq)) else {
            continue;
        };
        if at > x.at_ns {
            continue;
        }
        id += 1;
        emit(
            json!({"ph": "s", "cat": "sample", "name": s.name, "id": id, "pid": 1, "tid": tid,
            "ts": us(at, t0), "args": {"seq": x.seq}}),
        )?;
        emit(
            json!({"ph": "f", "bp": "e", "cat": "sample", "name": s.name, "id": id, "pid": 1,
            "tid": CONTROL_TID, "ts": us(x.at_ns, t0), "args": {"seq": x.seq}}),
        )?;
    }
    Ok(id)
}

/// The trace's process and thread names.
fn names(ev: &Evidence, episode: &str, emit: &mut dyn FnMut(Value) -> Result<()>) -> Result<()> {
    emit(
        json!({"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
        "args": {"name": format!("looptime {episode}")}}),
    )?;
    emit(
        json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": CYCLES_TID,
        "args": {"name": "cycles"}}),
    )?;
    emit(
        json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": CONTROL_TID,
        "args": {"name": ev.header.thread_name()}}),
    )?;
    for (i, t) in ev.threads.iter().enumerate() {
        emit(
            json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": CONTROL_TID + 1 + i as u64,
            "args": {"name": t.header.thread_name()}}),
        )?;
    }
    Ok(())
}

/// Cycle `i`'s counters (period, sleep overshoot, deadline lag) at `ts`.
fn counters(
    cc: &crate::metrics::CycleColumns,
    i: usize,
    ts: Value,
    emit: &mut dyn FnMut(Value) -> Result<()>,
) -> Result<()> {
    if let Some(p) = cc.period[i] {
        emit(
            json!({"ph": "C", "name": "period_ms", "pid": 1, "ts": ts, "args": {"value": p as f64 / 1e6}}),
        )?;
    }
    if let Some(o) = cc.overshoot[i] {
        emit(
            json!({"ph": "C", "name": "sleep_overshoot_us", "pid": 1, "ts": ts, "args": {"value": o as f64 / 1e3}}),
        )?;
    }
    if let Some(l) = cc.lag[i] {
        emit(
            json!({"ph": "C", "name": "deadline_lag_us", "pid": 1, "ts": ts, "args": {"value": l as f64 / 1e3}}),
        )?;
    }
    Ok(())
}

/// Write the trace of `a`'s episode (and its background threads) to `out`.
/// Returns the number of events written.
///
/// # Errors
/// [`AnalyzeError::Write`] naming `path` when writing fails.
pub fn write(a: &Analysis, out: &mut dyn Write, path: &std::path::Path) -> Result<u64> {
    let ev = &a.evidence;
    let werr = |source| AnalyzeError::Write {
        path: path.to_path_buf(),
        source,
    };
    let t0 = std::iter::once(ev)
        .chain(&ev.threads)
        .filter_map(earliest)
        .min()
        .unwrap_or(0);
    out.write_all(b"{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n")
        .map_err(werr)?;
    let mut count = 0u64;
    let mut emit = |e: Value| -> Result<()> {
        if count > 0 {
            out.write_all(b",\n").map_err(werr)?;
        }
        serde_json::to_writer(&mut *out, &e).map_err(|e| werr(e.into()))?;
        count += 1;
        Ok(())
    };
    let episode = a.report.run.short();
    names(ev, &episode, &mut emit)?;
    let cc = a.columns();
    let phase = |i: u32| ev.phase_name(i);
    let mut segment_start: Option<(u32, i64)> = None;
    for (i, c) in ev.cycles.iter().enumerate() {
        let seg = cc.segment[i];
        if segment_start.is_none_or(|(s, _)| s != seg) {
            if let Some((s, _)) = segment_start {
                let prev = &ev.cycles[i - 1];
                emit(
                    json!({"ph": "e", "cat": "phase", "name": phase(prev.phase), "id": s,
                    "pid": 1, "tid": CYCLES_TID, "ts": us(prev.end_ns.unwrap_or(prev.start_ns), t0)}),
                )?;
            }
            emit(
                json!({"ph": "b", "cat": "phase", "name": phase(c.phase), "id": seg,
                "pid": 1, "tid": CYCLES_TID, "ts": us(c.start_ns, t0)}),
            )?;
            segment_start = Some((seg, c.start_ns));
        }
        let end = c.end_ns.unwrap_or(c.start_ns).max(c.start_ns);
        emit(
            json!({"ph": "X", "cat": "cycle", "name": "cycle", "pid": 1, "tid": CYCLES_TID,
            "ts": us(c.start_ns, t0), "dur": dur(end - c.start_ns),
            "args": {"cycle": c.cycle, "phase": phase(c.phase), "overdue": c.overdue,
                     "skipped": c.skipped, "spans_dropped": c.spans_dropped}}),
        )?;
        if let (Some(s), Some(w)) = (c.sleep_start_ns, c.wake_ns) {
            // The wait before this cycle: it ends at or before the start.
            if w >= s && w <= c.start_ns {
                emit(
                    json!({"ph": "X", "cat": "cycle", "name": "sleep", "pid": 1, "tid": CYCLES_TID,
                    "ts": us(s, t0), "dur": dur(w - s), "args": {"cycle": c.cycle}}),
                )?;
            }
        }
        counters(cc, i, us(c.start_ns, t0), &mut emit)?;
    }
    if let (Some((s, _)), Some(last)) = (segment_start, ev.cycles.last()) {
        emit(
            json!({"ph": "e", "cat": "phase", "name": phase(last.phase), "id": s,
            "pid": 1, "tid": CYCLES_TID, "ts": us(last.end_ns.unwrap_or(last.start_ns), t0)}),
        )?;
    }
    spans_of(ev, CONTROL_TID, t0, &mut emit)?;
    for (i, t) in ev.threads.iter().enumerate() {
        spans_of(t, CONTROL_TID + 1 + i as u64, t0, &mut emit)?;
    }
    flows(ev, t0, &mut emit)?;
    out.write_all(b"\n]}\n").map_err(werr)?;
    Ok(count)
}
