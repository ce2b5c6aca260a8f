//! Data age across a fleet: the long table `fleet_sources` (one row per
//! episode, phase and data-age source), so that `fleet.parquet`'s schema
//! never depends on which sources exist, and the worst source of each
//! phase row of the main table (docs/fleet.md).

use serde::Serialize;

use crate::analysis::Analysis;
use crate::export::parquet::Partition;

/// The long table's Parquet file.
pub const SOURCES_PARQUET: &str = "fleet_sources.parquet";
/// The long table as CSV.
pub const SOURCES_CSV: &str = "fleet_sources.csv";

/// The long table's column names, in order.
pub const SOURCE_COLUMNS: &[&str] = &[
    "robot",
    "session",
    "rollout",
    "episode_dir",
    "phase",
    "source",
    "clock",
    "uses",
    "age_p50_ns",
    "age_p99_ns",
    "stale",
    "stale_share",
];

/// One episode's figures for one source in one phase: the report's
/// `data_age.sources[].phases[]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceRow {
    /// Partition keys, as in the dataset.
    pub robot: String,
    /// The session.
    pub session: String,
    /// The rollout.
    pub rollout: String,
    /// The episode directory's canonical path.
    pub episode_dir: String,
    /// The phase of the uses.
    pub phase: String,
    /// The source.
    pub source: String,
    /// The clock of its stamps.
    pub clock: String,
    /// Its uses in the phase.
    pub uses: u64,
    /// Nearest-rank p50 of the age at use (absent without ages).
    pub age_p50_ns: Option<i64>,
    /// Nearest-rank p99 of the age at use.
    pub age_p99_ns: Option<i64>,
    /// Stale uses (absent without a limit or ages).
    pub stale: Option<u64>,
    /// Their share of the uses with an age.
    pub stale_share: Option<f64>,
}

/// The long-table rows of one analyzed episode.
pub fn source_rows(a: &Analysis) -> Vec<SourceRow> {
    let ev = &a.evidence;
    let part = Partition::of(ev);
    let Some(d) = &a.report.data_age else {
        return Vec::new();
    };
    d.sources
        .iter()
        .flat_map(|s| {
            let part = &part;
            s.phases.iter().map(move |p| SourceRow {
                robot: part.robot.clone(),
                session: part.session.clone(),
                rollout: part.rollout.clone(),
                episode_dir: ev.dir.display().to_string(),
                phase: p.phase.clone(),
                source: s.source.clone(),
                clock: s.clock.clone(),
                uses: p.uses,
                age_p50_ns: p.age_at_use.as_ref().map(|x| x.p50_ns),
                age_p99_ns: p.age_at_use.as_ref().map(|x| x.p99_ns),
                stale: p.stale,
                stale_share: p.stale_share,
            })
        })
        .collect()
}

/// The worst source of `phase` among `rows` (one episode's): the largest
/// age p99 (ms) and the largest stale share, each over the sources that
/// have one.
pub fn worst_of(rows: &[SourceRow], phase: &str) -> (Option<f64>, Option<f64>) {
    let of = rows.iter().filter(|r| r.phase == phase);
    let age = of
        .clone()
        .filter_map(|r| r.age_p99_ns)
        .max()
        .map(|ns| ns as f64 / 1e6);
    let stale = of.filter_map(|r| r.stale_share).reduce(f64::max);
    (age, stale)
}

/// The long table as a DataFrame.
///
/// # Errors
/// Only on an internal polars failure.
pub fn source_table(rows: &[SourceRow]) -> crate::error::Result<polars::prelude::DataFrame> {
    use polars::prelude::DataFrame;
    let c = SOURCE_COLUMNS;
    Ok(DataFrame::new(
        rows.len(),
        vec![
            col(rows, c[0], |r| r.robot.clone()),
            col(rows, c[1], |r| r.session.clone()),
            col(rows, c[2], |r| r.rollout.clone()),
            col(rows, c[3], |r| r.episode_dir.clone()),
            col(rows, c[4], |r| r.phase.clone()),
            col(rows, c[5], |r| r.source.clone()),
            col(rows, c[6], |r| r.clock.clone()),
            col(rows, c[7], |r| r.uses),
            col(rows, c[8], |r| r.age_p50_ns),
            col(rows, c[9], |r| r.age_p99_ns),
            col(rows, c[10], |r| r.stale),
            col(rows, c[11], |r| r.stale_share),
        ],
    )?)
}

/// One column of `rows`, the value `f` gives each: the fleet tables' one
/// way of building a column.
pub(crate) fn col<R, T, F>(rows: &[R], name: &str, f: F) -> polars::prelude::Column
where
    F: Fn(&R) -> T,
    polars::prelude::Series: polars::prelude::NamedFrom<Vec<T>, [T]>,
{
    polars::prelude::Column::new(name.into(), rows.iter().map(f).collect::<Vec<T>>())
}

/// The long table as CSV (missing values as empty fields).
pub fn source_csv(rows: &[SourceRow]) -> String {
    let opt = |v: Option<String>| v.unwrap_or_default();
    let mut out = SOURCE_COLUMNS.join(",");
    out.push('\n');
    for r in rows {
        let fields = [
            r.robot.clone(),
            r.session.clone(),
            r.rollout.clone(),
            r.episode_dir.clone(),
            r.phase.clone(),
            r.source.clone(),
            r.clock.clone(),
            r.uses.to_string(),
            opt(r.age_p50_ns.map(|x| x.to_string())),
            opt(r.age_p99_ns.map(|x| x.to_string())),
            opt(r.stale.map(|x| x.to_string())),
            opt(r.stale_share.map(|x| x.to_string())),
        ];
        let line: Vec<_> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a
/// line break, with quotes doubled.
pub(crate) fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}
