//! The files `fleet` writes: the table as Parquet and CSV, the episodes
//! that failed, and the summary as printed.

use std::path::Path;

use super::{Failure, Fleet, FleetRow};
use crate::error::{AnalyzeError, Result};

/// The files `fleet` writes into its output directory.
pub const TABLE_PARQUET: &str = "fleet.parquet";
/// The table as CSV.
pub const TABLE_CSV: &str = "fleet.csv";
/// The episodes that failed, as CSV (`path,kind,message`).
pub const ERRORS_CSV: &str = "errors.csv";
/// The text summary, as printed.
pub const SUMMARY_TXT: &str = "fleet_summary.txt";

/// The column names of the table, in order (docs/fleet.md).
pub const COLUMNS: &[&str] = &[
    "robot",
    "session",
    "rollout",
    "episode_dir",
    "created_utc",
    "config_hash",
    "source_hash",
    "state",
    "n_caveats",
    "caveats",
    "phase",
    "cycles",
    "segments",
    "nominal_period_ns",
    "loop_hz",
    "period_p50_ns",
    "period_p99_ns",
    "period_p999_ns",
    "overruns",
    "overruns_per_1000",
    "work_p99_ns",
    "top_stage",
    "top_stage_p99_ns",
    "label",
    "config_name",
    "max_age_p99_ms",
    "max_stale_share",
    "budget_overruns",
    "budget_overruns_per_1000",
    "completion_misses",
    "completion_misses_per_1000",
    "arrival_hz",
    "answer_latency_p50_ns",
    "answer_latency_p99_ns",
    "late_answers",
    "late_share",
    "lost_before_arrival",
    "lost_after_late_answer",
    "lost_discarded",
    "bursts",
    "success_rate_mean",
    "success_rate_min",
];

/// The table as a DataFrame (integers as UInt64/Int64, caveats as a list
/// of strings).
///
/// # Errors
/// Only on an internal polars failure.
pub fn table(rows: &[FleetRow]) -> Result<polars::prelude::DataFrame> {
    use super::sources::col;
    use polars::prelude::{Column, DataFrame, NamedFrom, Series};
    let caveats: Vec<Series> = rows
        .iter()
        .map(|r| Series::new("".into(), r.caveats.clone()))
        .collect();
    let columns = vec![
        col(rows, COLUMNS[0], |r| r.robot.clone()),
        col(rows, COLUMNS[1], |r| r.session.clone()),
        col(rows, COLUMNS[2], |r| r.rollout.clone()),
        col(rows, COLUMNS[3], |r| r.episode_dir.clone()),
        col(rows, COLUMNS[4], |r| r.created_utc.clone()),
        col(rows, COLUMNS[5], |r| r.config_hash.clone()),
        col(rows, COLUMNS[6], |r| r.source_hash.clone()),
        col(rows, COLUMNS[7], |r| r.state.clone()),
        col(rows, COLUMNS[8], |r| r.n_caveats),
        Column::new(COLUMNS[9].into(), caveats),
        col(rows, COLUMNS[10], |r| r.phase.clone()),
        col(rows, COLUMNS[11], |r| r.cycles),
        col(rows, COLUMNS[12], |r| r.segments),
        col(rows, COLUMNS[13], |r| r.nominal_period_ns),
        col(rows, COLUMNS[14], |r| r.loop_hz),
        col(rows, COLUMNS[15], |r| r.period_p50_ns),
        col(rows, COLUMNS[16], |r| r.period_p99_ns),
        col(rows, COLUMNS[17], |r| r.period_p999_ns),
        col(rows, COLUMNS[18], |r| r.overruns),
        col(rows, COLUMNS[19], |r| r.overruns_per_1000),
        col(rows, COLUMNS[20], |r| r.work_p99_ns),
        col(rows, COLUMNS[21], |r| r.top_stage.clone()),
        col(rows, COLUMNS[22], |r| r.top_stage_p99_ns),
        col(rows, COLUMNS[23], |r| r.label.clone()),
        col(rows, COLUMNS[24], |r| r.config_name.clone()),
        col(rows, COLUMNS[25], |r| r.max_age_p99_ms),
        col(rows, COLUMNS[26], |r| r.max_stale_share),
        col(rows, COLUMNS[27], |r| r.budget_overruns),
        col(rows, COLUMNS[28], |r| r.budget_overruns_per_1000),
        col(rows, COLUMNS[29], |r| r.completion_misses),
        col(rows, COLUMNS[30], |r| r.completion_misses_per_1000),
        col(rows, COLUMNS[31], |r| r.input.arrival_hz),
        col(rows, COLUMNS[32], |r| r.input.answer_latency_p50_ns),
        col(rows, COLUMNS[33], |r| r.input.answer_latency_p99_ns),
        col(rows, COLUMNS[34], |r| r.input.late_answers),
        col(rows, COLUMNS[35], |r| r.input.late_share),
        col(rows, COLUMNS[36], |r| r.input.lost_before_arrival),
        col(rows, COLUMNS[37], |r| r.input.lost_after_late_answer),
        col(rows, COLUMNS[38], |r| r.input.lost_discarded),
        col(rows, COLUMNS[39], |r| r.input.bursts),
        col(rows, COLUMNS[40], |r| r.input.success_rate_mean),
        col(rows, COLUMNS[41], |r| r.input.success_rate_min),
    ];
    Ok(DataFrame::new(rows.len(), columns)?)
}

use super::sources::csv_field;

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(String::new, ToString::to_string)
}

/// The table as CSV: a header line of [`COLUMNS`], then one line per row.
/// Missing values are empty fields; caveats are joined with ` | `; floats
/// are printed in their shortest exact form.
pub fn csv(rows: &[FleetRow]) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for r in rows {
        let fields = [
            r.robot.clone(),
            r.session.clone(),
            r.rollout.clone(),
            r.episode_dir.clone(),
            opt(&r.created_utc),
            opt(&r.config_hash),
            opt(&r.source_hash),
            r.state.clone(),
            r.n_caveats.to_string(),
            r.caveats.join(" | "),
            r.phase.clone(),
            r.cycles.to_string(),
            r.segments.to_string(),
            opt(&r.nominal_period_ns),
            opt(&r.loop_hz),
            opt(&r.period_p50_ns),
            opt(&r.period_p99_ns),
            opt(&r.period_p999_ns),
            r.overruns.to_string(),
            opt(&r.overruns_per_1000),
            opt(&r.work_p99_ns),
            opt(&r.top_stage),
            opt(&r.top_stage_p99_ns),
            opt(&r.label),
            opt(&r.config_name),
            opt(&r.max_age_p99_ms),
            opt(&r.max_stale_share),
            opt(&r.budget_overruns),
            opt(&r.budget_overruns_per_1000),
            opt(&r.completion_misses),
            opt(&r.completion_misses_per_1000),
            opt(&r.input.arrival_hz),
            opt(&r.input.answer_latency_p50_ns),
            opt(&r.input.answer_latency_p99_ns),
            opt(&r.input.late_answers),
            opt(&r.input.late_share),
            opt(&r.input.lost_before_arrival),
            opt(&r.input.lost_after_late_answer),
            opt(&r.input.lost_discarded),
            opt(&r.input.bursts),
            opt(&r.input.success_rate_mean),
            opt(&r.input.success_rate_min),
        ];
        let line: Vec<_> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// The failures as CSV (`path,kind,message`).
pub fn errors_csv(failures: &[Failure]) -> String {
    let mut out = String::from("path,kind,message\n");
    for f in failures {
        out.push_str(&format!(
            "{},{},{}\n",
            csv_field(&f.dir.display().to_string()),
            csv_field(&f.kind),
            csv_field(&f.message)
        ));
    }
    out
}

/// Write the table (Parquet and CSV), the failures and `summary` into
/// `dir`, each through a temporary and a rename.
///
/// # Errors
/// [`AnalyzeError::Write`] (or a polars error) when a file cannot be written.
pub fn write(dir: &Path, fleet: &Fleet, summary: &str) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| AnalyzeError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    crate::export::parquet::write_parquet(&dir.join(TABLE_PARQUET), table(&fleet.rows)?)?;
    crate::export::parquet::write_parquet(
        &dir.join(super::sources::SOURCES_PARQUET),
        super::sources::source_table(&fleet.sources)?,
    )?;
    for (name, text) in [
        (TABLE_CSV, csv(&fleet.rows)),
        (
            super::sources::SOURCES_CSV,
            super::sources::source_csv(&fleet.sources),
        ),
        (ERRORS_CSV, errors_csv(&fleet.failures)),
        (SUMMARY_TXT, summary.to_string()),
    ] {
        crate::atomic::write_bytes(&dir.join(name), text.as_bytes())?;
    }
    Ok(())
}
