//! The Parquet dataset: Hive-partitioned tables of cycles, spans, caller
//! values and episodes, for DuckDB, Spark and any Parquet reader
//! (docs/dataset.md).
//!
//! ```text
//! DATASET/<table>/robot=<R>/session=<S>/rollout=<N>/part-0.parquet
//! ```
//!
//! The partition keys are in the path only (Hive convention), never in
//! the files. Re-exporting an episode replaces its files.

use std::path::{Path, PathBuf};

use polars::prelude::*;
use polars_io::parquet::write::{ParquetCompression, ParquetWriter};

use crate::analysis::Analysis;
use crate::error::{AnalyzeError, Result};
use crate::evidence::{Cell, Evidence};
use crate::metrics::{CycleColumns, Report};

/// The dataset's tables.
pub const TABLES: &[&str] = &["cycles", "spans", "values", "episodes", "samples", "phases"];

/// Where one episode goes: its partition keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// `robot`: the header's `robot` metadata, else the manifest's
    /// `host.hostname`, else `unknown`.
    pub robot: String,
    /// `session`: the manifest's `session`, else the episode's parent
    /// directory name.
    pub session: String,
    /// `rollout`: the manifest's `rollout`, else the directory name.
    pub rollout: String,
}

/// The key value of a missing or empty robot, session or rollout name. An
/// empty value would be written `__HIVE_DEFAULT_PARTITION__`, which every
/// engine reads as NULL (so `robot = ''` would find nothing, and `GROUP BY`
/// would merge it with real NULLs); a named placeholder reads back as
/// itself.
pub const UNKNOWN_KEY: &str = "unknown";

/// Whether Hive's path escaping escapes `c`: the ASCII control characters,
/// DEL, and `"#%'*/:=?\{[]^` (Hive's `FileUtils.escapePathName`, which
/// Spark's `ExternalCatalogUtils` copies). Everything else, non-ASCII UTF-8
/// included, stays as it is.
fn hive_escapes(c: char) -> bool {
    matches!(c, '\u{01}'..='\u{1F}' | '\u{7F}')
        || matches!(
            c,
            '"' | '#' | '%' | '\'' | '*' | '/' | ':' | '=' | '?' | '\\' | '{' | '[' | ']' | '^'
        )
}

/// A partition value as a path segment, escaped as Hive escapes it: each
/// character of [`hive_escapes`] becomes `%XX` (always one ASCII byte, so
/// Spark's per-character decoding, DuckDB's and pyarrow's byte decoding
/// agree), and everything else is written as it is. A NUL, which no path
/// can hold, is written as `%00`, and `.` and `..` (which a path cannot
/// name either) as `%2E` and `%2E%2E`.
fn escape(v: &str) -> String {
    if v.is_empty() {
        return UNKNOWN_KEY.into();
    }
    if v == "." || v == ".." {
        return "%2E".repeat(v.len());
    }
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if c == '\0' || hive_escapes(c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

impl Partition {
    /// The keys of `ev`.
    pub fn of(ev: &Evidence) -> Partition {
        let m = ev.manifest.as_ref();
        let text = |v: Option<&serde_json::Value>| {
            v.and_then(|x| x.as_str())
                .filter(|x| !x.is_empty())
                .map(str::to_string)
        };
        let name = |p: Option<&Path>| {
            p.and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| UNKNOWN_KEY.into())
        };
        Partition {
            robot: ev
                .header
                .metadata
                .get("robot")
                .filter(|r| !r.is_empty())
                .cloned()
                .or_else(|| text(m.and_then(|m| m.pointer("/host/hostname"))))
                .unwrap_or_else(|| UNKNOWN_KEY.into()),
            session: text(m.and_then(|m| m.get("session")))
                .unwrap_or_else(|| name(ev.dir.parent())),
            rollout: text(m.and_then(|m| m.get("rollout"))).unwrap_or_else(|| name(Some(&ev.dir))),
        }
    }

    /// `robot=…/session=…/rollout=…`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("robot={}", escape(&self.robot)))
            .join(format!("session={}", escape(&self.session)))
            .join(format!("rollout={}", escape(&self.rollout)))
    }
}

/// The cycles of `ev` (one thread), with its cycle columns `cc`, as rows
/// of the cycles table.
fn cycles(ev: &Evidence, cc: &CycleColumns, thread: &str) -> Result<DataFrame> {
    let n = ev.cycles.len();
    let phase = |i: u32| ev.phase_name(i);
    let c = &ev.cycles;
    Ok(DataFrame::new(
        n,
        vec![
            Column::new("thread".into(), vec![thread; n]),
            Column::new(
                "line".into(),
                c.iter().map(|c| c.line).collect::<Vec<u64>>(),
            ),
            Column::new(
                "cycle".into(),
                c.iter().map(|c| c.cycle).collect::<Vec<u64>>(),
            ),
            Column::new(
                "phase".into(),
                c.iter().map(|c| phase(c.phase)).collect::<Vec<String>>(),
            ),
            Column::new("segment".into(), cc.segment.clone()),
            Column::new(
                "start_ns".into(),
                c.iter().map(|c| c.start_ns).collect::<Vec<i64>>(),
            ),
            Column::new(
                "end_ns".into(),
                c.iter().map(|c| c.end_ns).collect::<Vec<Option<i64>>>(),
            ),
            Column::new(
                "target_ns".into(),
                c.iter().map(|c| c.target_ns).collect::<Vec<Option<i64>>>(),
            ),
            Column::new(
                "sleep_start_ns".into(),
                c.iter()
                    .map(|c| c.sleep_start_ns)
                    .collect::<Vec<Option<i64>>>(),
            ),
            Column::new(
                "wake_ns".into(),
                c.iter().map(|c| c.wake_ns).collect::<Vec<Option<i64>>>(),
            ),
            Column::new(
                "overdue".into(),
                c.iter().map(|c| c.overdue).collect::<Vec<bool>>(),
            ),
            Column::new(
                "skipped".into(),
                c.iter().map(|c| c.skipped).collect::<Vec<u32>>(),
            ),
            Column::new(
                "spans_dropped".into(),
                c.iter().map(|c| c.spans_dropped).collect::<Vec<u32>>(),
            ),
            Column::new(
                "n_spans".into(),
                c.iter().map(|c| c.n_spans).collect::<Vec<u32>>(),
            ),
            Column::new("period_ns".into(), cc.period.clone()),
            Column::new("work_ns".into(), cc.work.clone()),
            Column::new("overshoot_ns".into(), cc.overshoot.clone()),
            Column::new("lag_ns".into(), cc.lag.clone()),
            Column::new(
                "cpu_ns".into(),
                c.iter().map(|c| c.cpu_ns).collect::<Vec<Option<i64>>>(),
            ),
        ]
        .into_iter()
        .chain(release_columns(ev))
        .collect(),
    )?)
}

/// The cycles table's release columns: pace, arrival, the input's counter
/// and the answer latency (docs/dataset.md).
fn release_columns(ev: &Evidence) -> [Column; 6] {
    let c = &ev.cycles;
    let mut answers: Vec<Option<i64>> = vec![None; c.len()];
    for (row, l) in crate::metrics::input_paced::answer_latencies(ev) {
        answers[row] = Some(l);
    }
    [
        Column::new(
            "pace".into(),
            c.iter()
                .map(|c| if c.input_paced { "input" } else { "deadline" })
                .collect::<Vec<&str>>(),
        ),
        Column::new(
            "arrival_ns".into(),
            c.iter().map(|c| c.arrival_ns).collect::<Vec<Option<i64>>>(),
        ),
        Column::new(
            "input_seq".into(),
            c.iter().map(|c| c.input_seq).collect::<Vec<Option<u64>>>(),
        ),
        Column::new(
            "read_ns".into(),
            c.iter().map(|c| c.read_ns).collect::<Vec<Option<i64>>>(),
        ),
        Column::new(
            "arrival_bound_ns".into(),
            c.iter()
                .map(|c| c.arrival_bound_ns)
                .collect::<Vec<Option<i64>>>(),
        ),
        Column::new("answer_latency_ns".into(), answers),
    ]
}

/// The spans of `ev` (one thread) as rows of the spans table.
fn spans(ev: &Evidence, thread: &str) -> Result<DataFrame> {
    let groups: std::collections::HashMap<u64, &crate::evidence::GroupDecode> =
        ev.groups.iter().map(|g| (g.key, g)).collect();
    let rows = ev.span_rows()?;
    let phase = |i: u32| ev.phase_name(i);
    let (mut cycle, mut index, mut ph, mut stage, mut path, mut depth, mut attrs) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let (mut start, mut wall, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for c in &ev.cycles {
        let from = (c.span_row as usize).min(rows.len());
        let to = (from + c.n_spans as usize).min(rows.len());
        for (i, s) in rows[from..to].iter().enumerate() {
            let g = groups.get(&s.key);
            cycle.push(c.cycle);
            index.push(i as u32);
            ph.push(phase(c.phase));
            stage.push(
                ev.header
                    .stages
                    .get(s.stage as usize)
                    .map_or_else(String::new, |st| st.name.clone()),
            );
            path.push(g.map_or_else(String::new, |g| g.path.clone()));
            depth.push(g.map_or(0, |g| g.depth));
            attrs.push(g.map_or_else(String::new, |g| {
                g.attrs
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(";")
            }));
            start.push(s.start_ns);
            wall.push(s.wall_ns);
            cpu.push((s.cpu_ns >= 0).then_some(s.cpu_ns));
        }
    }
    let n = cycle.len();
    Ok(DataFrame::new(
        n,
        vec![
            Column::new("thread".into(), vec![thread; n]),
            Column::new("cycle".into(), cycle),
            Column::new("span".into(), index),
            Column::new("phase".into(), ph),
            Column::new("stage".into(), stage),
            Column::new("path".into(), path),
            Column::new("depth".into(), depth),
            Column::new("attrs".into(), attrs),
            Column::new("start_ns".into(), start),
            Column::new("wall_ns".into(), wall),
            Column::new("cpu_ns".into(), cpu),
        ],
    )?)
}

/// The data-age samples of `ev` (one thread): one row per sample used or
/// published, with the use's age (host clock, the report's rule) and
/// whether it was stale.
fn samples(ev: &Evidence, thread: &str) -> Result<DataFrame> {
    let n = ev.samples.len();
    let (mut cycle, mut phase, mut source, mut clock) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut seq, mut stamp, mut at, mut produced) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut age, mut limit, mut stale) = (Vec::new(), Vec::new(), Vec::new());
    for x in &ev.samples {
        let c = &ev.cycles[x.row as usize];
        let s = &ev.header.sources[x.source as usize];
        let a = crate::metrics::data_age::use_age(ev, x);
        cycle.push(c.cycle);
        phase.push(ev.phase_name(c.phase));
        source.push(s.name.clone());
        clock.push(s.clock.clone());
        seq.push(x.seq);
        stamp.push(x.stamp_ns);
        at.push(x.at_ns);
        produced.push(x.produced);
        age.push(a);
        limit.push(s.max_age_ns);
        stale.push(a.and_then(|a| s.max_age_ns.map(|m| a as u64 > m)));
    }
    Ok(DataFrame::new(
        n,
        vec![
            Column::new("thread".into(), vec![thread; n]),
            Column::new("cycle".into(), cycle),
            Column::new("phase".into(), phase),
            Column::new("source".into(), source),
            Column::new("clock".into(), clock),
            Column::new("seq".into(), seq),
            Column::new("stamp_ns".into(), stamp),
            Column::new("at_ns".into(), at),
            Column::new("produced".into(), produced),
            Column::new("age_ns".into(), age),
            Column::new("max_age_ns".into(), limit),
            Column::new("stale".into(), stale),
        ],
    )?)
}

/// The caller values of `ev` (one thread), long: one row per cycle and
/// value it set.
fn values(ev: &Evidence, thread: &str) -> Result<DataFrame> {
    let k = ev.header.values.len();
    let (mut cycle, mut name, mut int, mut float) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if k > 0 {
        for (row, c) in ev.cycles.iter().enumerate() {
            for (j, info) in ev.header.values.iter().enumerate() {
                let (i, f) = match ev.values.get(row * k + j) {
                    Some(Cell::Int(v)) => (Some(*v), None),
                    Some(Cell::Float(v)) => (None, Some(*v)),
                    _ => continue,
                };
                cycle.push(c.cycle);
                name.push(info.name.clone());
                int.push(i);
                float.push(f);
            }
        }
    }
    let n = cycle.len();
    Ok(DataFrame::new(
        n,
        vec![
            Column::new("thread".into(), vec![thread; n]),
            Column::new("cycle".into(), cycle),
            Column::new("name".into(), name),
            Column::new("int_value".into(), int),
            Column::new("float_value".into(), float),
        ],
    )?)
}

/// The episode's one row: manifest facts, state, caveats.
fn episode_row(ev: &Evidence, report: &Report) -> Result<DataFrame> {
    let m = ev.manifest.as_ref();
    let text = |p: &str| ev.manifest_str(p);
    let state = report.state.name().to_string();
    let caveats = Series::new("".into(), report.caveats.clone());
    Ok(DataFrame::new(
        1,
        vec![
            Column::new("episode_dir".into(), [ev.dir.display().to_string()]),
            Column::new("producer".into(), [ev.header.producer.clone()]),
            Column::new("schema_version".into(), [ev.header.schema_version]),
            Column::new("state".into(), [state]),
            Column::new("caveats".into(), [caveats]),
            Column::new("config_hash".into(), [text("/config_hash")]),
            Column::new("source_hash".into(), [text("/source_hash")]),
            Column::new("hostname".into(), [text("/host/hostname")]),
            Column::new("kernel_release".into(), [text("/host/kernel_release")]),
            Column::new(
                "preempt_rt".into(),
                [m.and_then(|m| m.pointer("/host/preempt_rt"))
                    .and_then(|v| v.as_bool())],
            ),
            Column::new("created_utc".into(), [text("/created_utc")]),
            Column::new("nominal_period_ns".into(), [ev.header.nominal_period_ns]),
            Column::new("retained_cycles".into(), [ev.cycles.len() as u64]),
            Column::new("dropped_cycles".into(), [report.capture.dropped_cycles]),
            Column::new("threads".into(), [ev.threads.len() as u32]),
        ],
    )?)
}

fn write_table(dir: &Path, df: DataFrame) -> Result<u64> {
    std::fs::create_dir_all(dir).map_err(|source| AnalyzeError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    write_parquet(&dir.join("part-0.parquet"), df)
}

/// Write `df` to `path` as one zstd-compressed Parquet file, through the
/// one atomic write ([`crate::atomic`]); returns the bytes written.
///
/// # Errors
/// [`AnalyzeError::Write`] or a polars error.
pub fn write_parquet(path: &Path, mut df: DataFrame) -> Result<u64> {
    crate::atomic::write_atomic(path, |w| {
        ParquetWriter::new(w)
            .with_compression(ParquetCompression::Zstd(None))
            .finish(&mut df)?;
        Ok(())
    })
}

/// Remove from the dataset at `root` every partition that an earlier
/// export of the episode directory `dir` wrote, found through the
/// `episodes` table's `episode_dir` (compared by canonical path, the
/// episode's identity), since a failed episode's own keys may be
/// unreadable. Returns the partitions removed (`robot=…/session=…/rollout=…`).
///
/// # Errors
/// [`AnalyzeError::Write`] when a partition cannot be removed; an episodes
/// file that cannot be read is skipped (it names no removable episode).
pub fn remove_episode(root: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
    use polars_io::SerReader;
    let want = crate::evidence::identity(dir);
    let episodes = root.join("episodes");
    let mut files = Vec::new();
    let mut stack = vec![episodes.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "part-0.parquet") {
                files.push(p);
            }
        }
    }
    let mut removed = Vec::new();
    for f in files {
        let Ok(file) = std::fs::File::open(&f) else {
            continue;
        };
        let Ok(df) = polars_io::parquet::read::ParquetReader::new(file)
            .with_columns(Some(vec!["episode_dir".into()]))
            .finish()
        else {
            continue;
        };
        let Ok(col) = df.column("episode_dir").and_then(|c| c.str().cloned()) else {
            continue;
        };
        let hit = col
            .iter()
            .flatten()
            .any(|d| crate::evidence::identity(Path::new(d)) == want);
        let Some(rel) = f
            .parent()
            .and_then(|p| p.strip_prefix(&episodes).ok())
            .map(Path::to_path_buf)
        else {
            continue;
        };
        if !hit {
            continue;
        }
        for t in TABLES {
            let part = root.join(t).join(&rel);
            if part.exists() {
                std::fs::remove_dir_all(&part).map_err(|source| AnalyzeError::Write {
                    path: part.clone(),
                    source,
                })?;
            }
        }
        removed.push(rel);
    }
    removed.sort();
    Ok(removed)
}

/// What one episode's export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Its partition.
    pub partition: Partition,
    /// Rows per table, in [`TABLES`] order.
    pub rows: [u64; 6],
    /// Bytes written.
    pub bytes: u64,
}

/// Write one episode (with its background threads) into the dataset at
/// `root`, replacing its earlier export; `phases` is its rows of the
/// `phases` table (the fleet table's rows of the episode:
/// `crate::fleet::table::table(&crate::fleet::rows(a))`, made by the
/// caller so that this module does not depend on `fleet`, which depends
/// on it).
///
/// # Errors
/// [`AnalyzeError::Write`] or a polars error when a file cannot be written.
pub fn write_episode(root: &Path, a: &Analysis, phases: DataFrame) -> Result<Written> {
    let (ev, report) = (&a.evidence, &a.report);
    let partition = Partition::of(ev);
    let part = partition.path();
    let mut tables = [
        cycles(ev, a.columns(), "control")?,
        spans(ev, "control")?,
        values(ev, "control")?,
        samples(ev, "control")?,
    ];
    for (t, cc) in a.threads() {
        let name = t.header.thread_name();
        for (i, df) in [
            cycles(t, cc, name)?,
            spans(t, name)?,
            values(t, name)?,
            samples(t, name)?,
        ]
        .into_iter()
        .enumerate()
        {
            tables[i].vstack_mut(&df)?;
        }
    }
    let [c, s, v, x] = tables;
    let rows = [
        c.height() as u64,
        s.height() as u64,
        v.height() as u64,
        1,
        x.height() as u64,
        phases.height() as u64,
    ];
    let mut bytes = 0;
    for (name, df) in [
        ("cycles", c),
        ("spans", s),
        ("values", v),
        ("episodes", episode_row(ev, report)?),
        ("samples", x),
        // The partition keys come from the path, as in every table.
        ("phases", phases.drop_many(["robot", "session", "rollout"])),
    ] {
        bytes += write_table(&root.join(name).join(&part), df)?;
    }
    Ok(Written {
        partition,
        rows,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_keys_escape_only_what_hive_escapes() {
        // Non-ASCII UTF-8 and spaces stay as they are: Spark decodes each
        // %XX as one character, so escaping UTF-8 bytes made mojibake.
        assert_eq!(escape("ü-東京 1"), "ü-東京 1");
        // Hive's set: each is one ASCII byte, %XX in upper-case hex.
        assert_eq!(escape("a/b=c:d%e"), "a%2Fb%3Dc%3Ad%25e");
        assert_eq!(escape("\"#'*?\\{[]^"), "%22%23%27%2A%3F%5C%7B%5B%5D%5E");
        assert_eq!(escape("tab\there\u{7f}"), "tab%09here%7F");
        // What no path can hold.
        assert_eq!(escape("nul\0"), "nul%00");
        assert_eq!((escape("."), escape("..")), ("%2E".into(), "%2E%2E".into()));
        // Not NULL: an empty value is the documented placeholder.
        assert_eq!(escape(""), UNKNOWN_KEY);
        // Plain names are unchanged.
        assert_eq!(
            escape("session-20261204T170458Z"),
            "session-20261204T170458Z"
        );
    }
}
