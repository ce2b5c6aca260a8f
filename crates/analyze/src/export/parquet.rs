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

use crate::error::{AnalyzeError, Result};
use crate::evidence::{Cell, Evidence};
use crate::metrics::{cycle_columns, schedule_comparable, Report};

/// The dataset's tables.
pub const TABLES: &[&str] = &["cycles", "spans", "values", "episodes"];

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

/// A partition value as a path segment: bytes outside `[A-Za-z0-9._-]`
/// become `%XX` (Hive's escaping), an empty value `__HIVE_DEFAULT_PARTITION__`.
fn escape(v: &str) -> String {
    if v.is_empty() {
        return "__HIVE_DEFAULT_PARTITION__".into();
    }
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Partition {
    /// The keys of `ev`.
    pub fn of(ev: &Evidence) -> Partition {
        let m = ev.manifest.as_ref();
        let text = |v: Option<&serde_json::Value>| v.and_then(|x| x.as_str()).map(str::to_string);
        let name = |p: Option<&Path>| {
            p.and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        Partition {
            robot: ev
                .header
                .metadata
                .get("robot")
                .cloned()
                .or_else(|| text(m.and_then(|m| m.pointer("/host/hostname"))))
                .unwrap_or_else(|| "unknown".into()),
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

/// The cycles of `ev` (one thread) as rows of the cycles table.
fn cycles(ev: &Evidence, thread: &str) -> Result<DataFrame> {
    let cc = cycle_columns(ev, schedule_comparable(&ev.header));
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
            Column::new("period_ns".into(), cc.period),
            Column::new("work_ns".into(), cc.work),
            Column::new("overshoot_ns".into(), cc.overshoot),
            Column::new("lag_ns".into(), cc.lag),
        ],
    )?)
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
    let text = |p: &str| -> Option<String> {
        m.and_then(|m| m.pointer(p))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let state = serde_json::to_value(report.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
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

/// Write `df` to `path` as one zstd-compressed Parquet file, through a
/// temporary beside it and a rename; returns the bytes written.
///
/// # Errors
/// [`AnalyzeError::Write`] or a polars error.
pub fn write_parquet(path: &Path, mut df: DataFrame) -> Result<u64> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let werr = |source| AnalyzeError::Write {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::create(&tmp).map_err(werr)?;
    let bytes = ParquetWriter::new(f)
        .with_compression(ParquetCompression::Zstd(None))
        .finish(&mut df)
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
    std::fs::rename(&tmp, path).map_err(werr)?;
    Ok(bytes)
}

/// What one episode's export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Its partition.
    pub partition: Partition,
    /// Rows per table, in [`TABLES`] order.
    pub rows: [u64; 4],
    /// Bytes written.
    pub bytes: u64,
}

/// Write one episode (with its background threads) into the dataset at
/// `root`, replacing its earlier export.
///
/// # Errors
/// [`AnalyzeError::Write`] or a polars error when a file cannot be written.
pub fn write_episode(root: &Path, ev: &Evidence, report: &Report) -> Result<Written> {
    let partition = Partition::of(ev);
    let part = partition.path();
    let mut tables = [
        cycles(ev, "control")?,
        spans(ev, "control")?,
        values(ev, "control")?,
    ];
    for t in &ev.threads {
        let name = t.header.thread_name();
        for (i, df) in [cycles(t, name)?, spans(t, name)?, values(t, name)?]
            .into_iter()
            .enumerate()
        {
            tables[i].vstack_mut(&df)?;
        }
    }
    let [c, s, v] = tables;
    let rows = [c.height() as u64, s.height() as u64, v.height() as u64, 1];
    let mut bytes = 0;
    for (name, df) in [
        ("cycles", c),
        ("spans", s),
        ("values", v),
        ("episodes", episode_row(ev, report)?),
    ] {
        bytes += write_table(&root.join(name).join(&part), df)?;
    }
    Ok(Written {
        partition,
        rows,
        bytes,
    })
}
