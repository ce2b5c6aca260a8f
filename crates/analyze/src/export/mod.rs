//! Exports of evidence for other tools (docs/export.md, docs/dataset.md):
//! Trace Event Format JSON for Perfetto, chrome://tracing and Tracy's
//! importer ([`chrome`]), HdrHistogram interval logs ([`hdr`]), and the
//! Hive-partitioned Parquet dataset for DuckDB and Spark ([`parquet`]).
//!
//! The export layer uses the [`evidence`](crate::evidence) tables and the
//! [`metrics`](crate::metrics) columns; nothing above it.

pub mod chrome;
pub mod hdr;
pub mod parquet;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::evidence::Evidence;
use crate::metrics::{cycle_columns, schedule_comparable};

/// The highest value an exported histogram tracks: one hour in ns.
pub const HDR_HIGHEST_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits of an exported histogram.
pub const HDR_DIGITS: u32 = 3;

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
fn histograms(ev: &Evidence, prefix: &str, out: &mut BTreeMap<String, Tagged>) {
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
    let cc = cycle_columns(ev, schedule_comparable(&ev.header));
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

/// The HdrHistogram interval log (format version 1.3) of `ev`: one line per
/// tag, each a compressed V2 histogram of values in ns (1 ns to 1 h, 3
/// significant digits), in time order (by first sample, then tag). Tags: `<phase>/<metric>` for
/// `period`, `work`, `sleep_overshoot` and `deadline_lag`;
/// `<phase>/stage_wall/<path>[k=v;…]` and `…/stage_cpu/…` per stage group;
/// `<thread>/…` for background threads. `StartTimestamp` and
/// `Interval_Length` are seconds since the control thread's first cycle
/// start, `Interval_Max` is in ms. Negative values (a deadline lag of a
/// cycle that started early) are counted as 0, and a comment line says
/// how many.
pub fn hdr_log(ev: &Evidence) -> String {
    let mut tags = BTreeMap::new();
    histograms(ev, "", &mut tags);
    for t in &ev.threads {
        histograms(t, &format!("{}/", t.header.thread_name()), &mut tags);
    }
    let t0 = ev.cycles.first().map_or(0, |c| c.start_ns);
    let mut o = String::new();
    let _ = writeln!(o, "#[Histogram log format version 1.3]");
    let _ = writeln!(
        o,
        "#[looptime export of {}: values in ns, Interval_Max in ms, times in s since the first cycle]",
        ev.dir.display()
    );
    let _ = writeln!(
        o,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    );
    // Interval logs are in time order: by first sample, then tag.
    let mut ordered: Vec<(&String, &Tagged)> = tags.iter().collect();
    ordered.sort_by_key(|(tag, t)| (t.first_ns, tag.as_str()));
    for (tag, t) in ordered {
        let mut h = hdr::Histogram::new(HDR_HIGHEST_NS, HDR_DIGITS);
        let mut negative = 0u64;
        for &v in &t.values {
            if v < 0 {
                negative += 1;
            }
            h.record(v.max(0) as u64);
        }
        if negative > 0 {
            let _ = writeln!(o, "#[{tag}: {negative} negative values counted as 0]");
        }
        let s = |ns: i64| (ns - t0) as f64 / 1e9;
        let _ = writeln!(
            o,
            "Tag={tag},{:.3},{:.3},{:.3},{}",
            s(t.first_ns).max(0.0),
            (s(t.last_ns) - s(t.first_ns)).max(0.0),
            h.max() as f64 / 1e6,
            h.to_base64()
        );
    }
    o
}
