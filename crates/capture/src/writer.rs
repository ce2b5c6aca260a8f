//! Writing the evidence files at finish (never on the control path): a
//! header and an iterator of cycle records in, two files out. It imports
//! neither the recorder nor the ring ([`crate::finish`] and
//! [`crate::ring::recover`] hand it records).
//!
//! Each file is written to a hidden temporary name in the episode
//! directory, flushed, `fsync`ed and renamed into place, then the directory
//! is `fsync`ed. The JSONL is renamed first and the summary last, so:
//!
//! * a finish interrupted before the first rename leaves only a `.tmp`
//!   file, which no reader takes for evidence;
//! * a finish interrupted between the renames leaves a complete JSONL and no
//!   summary, which the analyzer reports as `incomplete`.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{CaptureError, Result};
use crate::format::{
    thread_files, CaptureStatus, CycleRecord, Header, Recovery, Summary, ThreadFiles,
};
use crate::summary::SummaryBuilder;

/// What [`crate::Recorder::finish`] (or a recovery) wrote.
#[derive(Debug, Clone)]
pub struct FinishReport {
    /// Path of `control_timing.jsonl`.
    pub cycles_path: PathBuf,
    /// Path of `control_timing_summary.json`.
    pub summary_path: PathBuf,
    /// The summary as written.
    pub summary: Summary,
    /// Bytes written to the JSONL.
    pub cycles_bytes: u64,
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> CaptureError + '_ {
    move |source| CaptureError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// The temporary name `dir/name` is written under before its rename:
/// `.<name>.<pid>.tmp`, hidden, with the writer's pid so that a later run
/// can tell a leftover of a dead process (see [`parse_temp_name`]).
pub fn temp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.{}.tmp", std::process::id()))
}

/// The final file name and the writer's pid of a temporary name made by
/// [`temp_path`], or `None` for any other name.
///
/// ```
/// assert_eq!(
///     looptime_capture::parse_temp_name(".control_timing.jsonl.4242.tmp"),
///     Some(("control_timing.jsonl", 4242))
/// );
/// assert_eq!(looptime_capture::parse_temp_name("control_timing.jsonl"), None);
/// ```
pub fn parse_temp_name(file_name: &str) -> Option<(&str, u32)> {
    let inner = file_name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (name, pid) = inner.rsplit_once('.')?;
    if name.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, pid.parse().ok()?))
}

/// Writes `fill`'s output to `dir/name` atomically: into [`temp_path`],
/// flushed and `fsync`ed, then renamed into place, and `dir` `fsync`ed.
/// The one atomic write of looptime: the evidence, the runtime's episode
/// files and every file the analyzer writes go through it. Returns the final path
/// and the bytes written. On any failure the temporary file is removed, so
/// nothing complete-looking and no temporary is left (a process killed
/// mid-write leaves its temporary, named with its pid).
///
/// # Errors
/// [`CaptureError::Write`] naming the file that failed.
pub fn write_atomic(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(PathBuf, u64)> {
    let final_path = dir.join(name);
    let tmp_path = temp_path(dir, name);
    let result = (|| {
        let file = File::create(&tmp_path).map_err(write_err(&tmp_path))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        fill(&mut w).map_err(write_err(&tmp_path))?;
        let file = w
            .into_inner()
            .map_err(|e| e.into_error())
            .map_err(write_err(&tmp_path))?;
        file.sync_all().map_err(write_err(&tmp_path))?;
        let bytes = file.metadata().map_err(write_err(&tmp_path))?.len();
        fs::rename(&tmp_path, &final_path).map_err(write_err(&final_path))?;
        // The rename is durable only once the directory is synced.
        sync_dir(dir)?;
        Ok(bytes)
    })();
    match result {
        Ok(bytes) => Ok((final_path, bytes)),
        Err(e) => {
            // Best effort: a leftover temp file is never read as evidence.
            let _ = fs::remove_file(&tmp_path);
            Err(e)
        }
    }
}

/// `fsync` a directory, so that renames into it are durable.
///
/// # Errors
/// [`CaptureError::Write`] naming the directory.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(write_err(dir))
}

/// Run-wide counters the summary needs beside the cycle records.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counts {
    pub(crate) total_cycles: u64,
    pub(crate) spans_dropped: u64,
    pub(crate) spans_outside_cycle: u64,
    /// Values set but not finite, so not written ([`CaptureInfo::values_dropped`](crate::format::CaptureInfo::values_dropped)).
    pub(crate) values_dropped: u64,
}

/// Write the JSONL (header, then `records`) and the summary into `dir`,
/// atomically, JSONL first: what [`crate::Recorder::finish`] and
/// [`crate::ring::recover`] share. The cycles come as records from an
/// iterator, so this module knows neither the recorder nor the ring.
pub(crate) fn write_evidence(
    dir: &Path,
    header: &Header,
    records: impl Iterator<Item = CycleRecord>,
    status: CaptureStatus,
    counts: Counts,
    recovery: Option<Recovery>,
    threads: Vec<ThreadFiles>,
) -> Result<FinishReport> {
    let mut summary = SummaryBuilder::new(header);
    let (cycles_file, summary_file) = thread_files(header.thread_name());
    let (cycles_path, cycles_bytes) = write_atomic(dir, &cycles_file, |w| {
        serde_json::to_writer(&mut *w, header)?;
        w.write_all(b"\n")?;
        for record in records {
            serde_json::to_writer(&mut *w, &record)?;
            w.write_all(b"\n")?;
            summary.push(&record);
        }
        Ok(())
    })?;
    let mut summary = summary.finish(
        header,
        status,
        counts.total_cycles,
        counts.spans_dropped,
        counts.spans_outside_cycle,
    );
    summary.capture.values_dropped = Some(counts.values_dropped);
    summary.recovery = recovery;
    summary.threads = threads;
    let (summary_path, _) = write_atomic(dir, &summary_file, |w| {
        serde_json::to_writer_pretty(&mut *w, &summary)?;
        w.write_all(b"\n")
    })?;
    // Each write_atomic synced the directory after its rename.
    Ok(FinishReport {
        cycles_path,
        summary_path,
        summary,
        cycles_bytes,
    })
}
