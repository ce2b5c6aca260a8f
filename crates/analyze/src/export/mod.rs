//! Exports of evidence for other tools (docs/export.md, docs/dataset.md):
//! Trace Event Format JSON for Perfetto, chrome://tracing and Tracy's
//! importer ([`chrome`]), HdrHistogram interval logs ([`hdr`]), MCAP for
//! Foxglove on the wall-clock timeline of robot recordings ([`mcap`], and
//! inside a recording: [`mcap_into`]), and
//! the Hive-partitioned Parquet dataset for DuckDB and Spark ([`parquet`]).
//!
//! The export layer reads an [`Analysis`]: the evidence tables, the cycle
//! columns computed once and the report; nothing above it.

pub mod chrome;
pub mod hdr;
pub mod mcap;
pub mod mcap_into;
pub mod parquet;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::analysis::Analysis;
use crate::error::Result;
use crate::evidence::Evidence;
use crate::metrics::CycleColumns;

pub use hdr::{HDR_DIGITS, HDR_HIGHEST_NS};

/// One tagged histogram of an HdrHistogram log, before encoding.
struct Tagged {
    /// Start and end (ns, the cycle clock) of what it covers.
    first_ns: i64,
    last_ns: i64,
    values: Vec<i64>,
}

/// A tag as the log format allows it: no comma, no whitespace.
fn tag_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The histograms of one episode (or thread) under `prefix`.
fn histograms(ev: &Evidence, cc: &CycleColumns, prefix: &str, out: &mut BTreeMap<String, Tagged>) {
    let phase = |i: u32| ev.phase_name(i);
    let mut push = |tag: String, at: i64, v: i64| {
        let t = out.entry(tag_safe(&tag)).or_insert(Tagged {
            first_ns: at,
            last_ns: at,
            values: Vec::new(),
        });
        t.first_ns = t.first_ns.min(at);
        t.last_ns = t.last_ns.max(at);
        t.values.push(v);
    };
    for (i, c) in ev.cycles.iter().enumerate() {
        let p = phase(c.phase);
        let at = c.start_ns;
        for (name, v) in [
            ("period", cc.period[i]),
            ("work", cc.work[i]),
            ("sleep_overshoot", cc.overshoot[i]),
            ("deadline_lag", cc.lag[i]),
        ] {
            if let Some(v) = v {
                push(format!("{prefix}{p}/{name}"), at, v);
            }
        }
    }
    let groups: std::collections::HashMap<u64, &crate::evidence::GroupDecode> =
        ev.groups.iter().map(|g| (g.key, g)).collect();
    let Ok(rows) = ev.span_rows() else { return };
    for s in rows {
        let Some(g) = groups.get(&s.key) else {
            continue;
        };
        let name = crate::evidence::group_name(&g.path, &g.attrs);
        let p = phase(g.phase);
        push(
            format!("{prefix}{p}/stage_wall/{name}"),
            s.start_ns,
            s.wall_ns,
        );
        if s.cpu_ns >= 0 {
            push(
                format!("{prefix}{p}/stage_cpu/{name}"),
                s.start_ns,
                s.cpu_ns,
            );
        }
    }
}

/// The HdrHistogram interval log (format version 1.3) of `a`: one line per
/// tag, each a compressed V2 histogram of values in ns (1 ns to 1 h, 3
/// significant digits), in time order (by first sample, then tag). Tags: `<phase>/<metric>` for
/// `period`, `work`, `sleep_overshoot` and `deadline_lag`;
/// `<phase>/stage_wall/<path>[k=v;…]` and `…/stage_cpu/…` per stage group;
/// `<thread>/…` for background threads. `StartTimestamp` and
/// `Interval_Length` are seconds since the control thread's first cycle
/// start, `Interval_Max` is in ms (the highest value equivalent to the
/// largest sample at 3 digits, as HdrHistogram reports a maximum).
/// Negative values (a deadline lag of a cycle that started early) are
/// counted as 0, and a comment line says how many.
///
/// # Errors
/// [`crate::error::AnalyzeError::Encode`] if a histogram cannot be encoded
/// (a bug).
pub fn hdr_log(a: &Analysis) -> Result<String> {
    let ev = &a.evidence;
    let mut tags = BTreeMap::new();
    histograms(ev, a.columns(), "", &mut tags);
    for (t, cc) in a.threads() {
        histograms(t, cc, &format!("{}/", t.header.thread_name()), &mut tags);
    }
    let t0 = ev.cycles.first().map_or(0, |c| c.start_ns);
    // Interval logs are in time order: by first sample, then tag.
    let mut ordered: Vec<(&String, &Tagged)> = tags.iter().collect();
    ordered.sort_by_key(|(tag, t)| (t.first_ns, tag.as_str()));
    let since = |ns: i64| Duration::from_nanos(ns.saturating_sub(t0).max(0) as u64);
    hdr::write_log(
        &a.report.run.line(),
        ordered.into_iter().map(|(tag, t)| hdr::Interval {
            tag,
            start: since(t.first_ns),
            length: since(t.last_ns).saturating_sub(since(t.first_ns)),
            values: &t.values,
        }),
    )
}
