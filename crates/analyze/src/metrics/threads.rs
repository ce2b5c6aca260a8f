//! Background threads (schema 2): each thread's own report, and the
//! overlap of the control loop's stages with each thread's work
//! (docs/metrics.md, Threads).

use std::collections::HashMap;

use super::report::{OverlapReport, StageReport, ThreadReport};
use crate::error::Result;
use crate::evidence::{Evidence, GroupDecode};

/// Per-thread reports of `ev`'s background threads, each computed by
/// `compute_one` from its cycle columns in `thread_cc` (same order as
/// `ev.threads`; the same metrics as the control thread's report).
///
/// # Errors
/// On an internal aggregation failure.
pub fn thread_reports(
    ev: &Evidence,
    thread_cc: &[super::CycleColumns],
    compute_one: &dyn Fn(&Evidence, &super::CycleColumns) -> Result<super::Report>,
) -> Result<Vec<ThreadReport>> {
    ev.threads
        .iter()
        .zip(thread_cc)
        .map(|(t, cc)| {
            let r = compute_one(t, cc)?;
            let name = t.header.thread_name().to_string();
            let callbacks = super::callbacks::callbacks(ev, t)?;
            Ok(ThreadReport {
                file: looptime_capture::thread_files(&name).0,
                thread: name,
                tid: t.header.thread.as_ref().and_then(|x| x.tid),
                state: r.state,
                implicit_cycles: t.header.implicit_cycles,
                capture: r.capture,
                phases: r.phases,
                stages: r.stages,
                callbacks,
                values: r.values,
            })
        })
        .collect()
}

/// The spans of `ev` as (group key, start, end), in file order.
fn spans_of(ev: &Evidence) -> Result<Vec<(u64, i64, i64)>> {
    let key = ev.spans.column("key")?.u64()?;
    let start = ev.spans.column("start_ns")?.i64()?;
    let wall = ev.spans.column("wall_ns")?.i64()?;
    Ok(key
        .into_no_null_iter()
        .zip(start.into_no_null_iter())
        .zip(wall.into_no_null_iter())
        .map(|((k, s), w)| (k, s, s.saturating_add(w.max(0))))
        .collect())
}

/// The union of a thread's span intervals, sorted and merged.
fn busy_intervals(ev: &Evidence) -> Result<Vec<(i64, i64)>> {
    let mut iv: Vec<(i64, i64)> = spans_of(ev)?.into_iter().map(|(_, s, e)| (s, e)).collect();
    iv.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(iv.len());
    for (s, e) in iv {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    Ok(merged)
}

/// Length of `[a, b)` covered by the sorted, disjoint `busy`.
fn covered(busy: &[(i64, i64)], a: i64, b: i64) -> i64 {
    let mut i = busy.partition_point(|&(_, e)| e <= a);
    let mut total = 0;
    while let Some(&(s, e)) = busy.get(i) {
        if s >= b {
            break;
        }
        total += e.min(b) - s.max(a);
        i += 1;
    }
    total
}

/// One control span inside a background thread's recorded window: its
/// group, its wall time and the part of it the thread was busy (ns).
struct SpanOverlap<'a> {
    group: &'a GroupDecode,
    wall: i64,
    overlap: i64,
}

/// Per background thread (its name), every control span inside the
/// thread's recorded window (its first span start to its last span end),
/// with its overlap: what both [`overlap`] and [`overlap_samples`] sum.
/// Spans outside the window are left out, so a thread whose ring dropped
/// early cycles is not read as idle then. Threads with no span are skipped.
fn span_overlaps(ev: &Evidence) -> Result<Vec<(String, Vec<SpanOverlap<'_>>)>> {
    if ev.threads.is_empty() {
        return Ok(Vec::new());
    }
    let control = spans_of(ev)?;
    let info: HashMap<u64, &GroupDecode> = ev.groups.iter().map(|g| (g.key, g)).collect();
    let mut out = Vec::with_capacity(ev.threads.len());
    for t in &ev.threads {
        let busy = busy_intervals(t)?;
        let (Some(first), Some(last)) = (busy.first(), busy.last()) else {
            continue;
        };
        let window = (first.0, last.1);
        let spans = control
            .iter()
            .filter(|&&(_, s, e)| s >= window.0 && e <= window.1)
            .filter_map(|&(key, s, e)| {
                Some(SpanOverlap {
                    group: info.get(&key)?,
                    wall: e - s,
                    overlap: covered(&busy, s, e),
                })
            })
            .collect();
        out.push((t.header.thread_name().to_string(), spans));
    }
    Ok(out)
}

/// For each control-loop stage group (in `stages`' order, attribute sets
/// pooled into their path) and each background thread: the share of the
/// stage's wall time during which the thread had a span running, over the
/// control spans inside the thread's recorded window (`span_overlaps`).
///
/// # Errors
/// On an internal column failure.
pub fn overlap(ev: &Evidence, stages: &[StageReport]) -> Result<Vec<OverlapReport>> {
    let stage_name = |i: u32| {
        ev.header
            .stages
            .get(i as usize)
            .map(|s| s.name.clone())
            .unwrap_or_default()
    };
    let mut rows = Vec::new();
    for (name, spans) in span_overlaps(ev)? {
        // Per group first (a cycle's spans take turns among a few groups,
        // so the last one's slot is usually the next one's), then
        // (phase, path) -> (spans, wall, overlap, stage) over the groups.
        let mut by_group: Vec<(&GroupDecode, u64, i64, i64)> = Vec::new();
        let mut at = 0usize;
        for o in &spans {
            if by_group.get(at).is_none_or(|g| g.0.key != o.group.key) {
                at = match by_group.iter().position(|g| g.0.key == o.group.key) {
                    Some(i) => i,
                    None => {
                        by_group.push((o.group, 0, 0, 0));
                        by_group.len() - 1
                    }
                };
            }
            let g = &mut by_group[at];
            g.1 += 1;
            g.2 += o.wall;
            g.3 += o.overlap;
        }
        let mut acc: HashMap<(&str, &str), (u64, i64, i64, u32)> = HashMap::new();
        for (group, n, wall, over) in by_group {
            let phase = ev
                .header
                .phases
                .get(group.phase as usize)
                .map_or("", String::as_str);
            let a = acc
                .entry((phase, group.path.as_str()))
                .or_insert((0, 0, 0, group.stage));
            a.0 += n;
            a.1 += wall;
            a.2 += over;
        }
        let mut seen = std::collections::HashSet::new();
        for st in stages {
            let k = (st.phase.as_str(), st.path.as_str());
            if !seen.insert(k) {
                continue; // the same path with other attributes
            }
            if let Some(&(n, wall, over, stage)) = acc.get(&k) {
                rows.push(OverlapReport {
                    phase: st.phase.clone(),
                    stage: stage_name(stage),
                    path: st.path.clone(),
                    thread: name.clone(),
                    spans: n,
                    wall_ns: wall,
                    overlap_ns: over,
                    share: (wall > 0).then(|| (over as f64 / wall as f64 * 1e4).round() / 1e4),
                });
            }
        }
    }
    Ok(rows)
}

/// Per control span, the time (ns) it overlapped each background thread's
/// work, keyed (control phase, stage path, thread): the samples `compare`
/// resamples for the overlap metrics, over the same spans as [`overlap`].
pub fn overlap_samples(ev: &Evidence) -> HashMap<(String, String, String), Vec<i64>> {
    let mut out: HashMap<(String, String, String), Vec<i64>> = HashMap::new();
    for (name, spans) in span_overlaps(ev).unwrap_or_default() {
        for o in spans {
            let phase = ev
                .header
                .phases
                .get(o.group.phase as usize)
                .cloned()
                .unwrap_or_default();
            out.entry((phase, o.group.path.clone(), name.clone()))
                .or_default()
                .push(o.overlap);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::covered;

    #[test]
    fn covered_counts_each_busy_nanosecond_once() {
        // Busy [10,20) and [30,40).
        let busy = [(10, 20), (30, 40)];
        assert_eq!(covered(&busy, 0, 10), 0); // touches, does not overlap
        assert_eq!(covered(&busy, 0, 15), 5); // [10,15)
        assert_eq!(covered(&busy, 12, 35), 13); // [12,20) + [30,35) = 8 + 5
        assert_eq!(covered(&busy, 0, 100), 20);
        assert_eq!(covered(&busy, 20, 30), 0);
        assert_eq!(covered(&[], 0, 100), 0);
    }
}
