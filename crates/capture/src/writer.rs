//! Writing the evidence files at finish (never on the control path).
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
    CONTROL_THREAD,
};
use crate::recorder::{calibrate, Recorder, TscMap};
use crate::ring::RingState;
use crate::summary::SummaryBuilder;

/// What [`Recorder::finish`] wrote.
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
/// flushed and `fsync`ed, then renamed into place. Returns the final path
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
}

/// Write the JSONL (header, then `records`) and the summary into `dir`,
/// atomically, JSONL first: what [`Recorder::finish`] and
/// [`crate::ring::recover`] share.
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
    summary.recovery = recovery;
    summary.threads = threads;
    let (summary_path, _) = write_atomic(dir, &summary_file, |w| {
        serde_json::to_writer_pretty(&mut *w, &summary)?;
        w.write_all(b"\n")
    })?;
    sync_dir(dir)?;
    Ok(FinishReport {
        cycles_path,
        summary_path,
        summary,
        cycles_bytes,
    })
}

impl Recorder {
    /// Write `control_timing.jsonl` and `control_timing_summary.json` into
    /// the existing directory `dir`. Call it after the loop, with
    /// [`CaptureStatus::Aborted`] for an orderly abort. A cycle still open
    /// is written with no `end_ns`. The recorder is left as it was, so
    /// finishing twice writes the same cycles again. A ring file is marked
    /// finished (so `recover` leaves the files alone) and is removed when
    /// the recorder is dropped.
    ///
    /// # Errors
    /// [`CaptureError::MissingDirectory`] when `dir` does not exist, and
    /// [`CaptureError::Write`] when a file cannot be written, synced or
    /// renamed; in both cases no complete-looking file is left behind.
    pub fn finish(&self, dir: &Path, status: CaptureStatus) -> Result<FinishReport> {
        self.finish_with(dir, status, Vec::new())
    }

    /// Finish an episode recorded by several threads: first each background
    /// thread's files (`control_timing.<thread>.jsonl` and its summary),
    /// then this, the control thread's, whose summary, written last, lists
    /// them. Call it once every thread has stopped recording, with their
    /// recorders (from the same [`crate::Registry`]).
    ///
    /// # Errors
    /// As [`finish`](Self::finish), for the first file that fails; and
    /// [`CaptureError::Registration`] when a recorder in `threads` is the
    /// control thread's or is not declared in this recorder's header.
    pub fn finish_threads(
        &self,
        dir: &Path,
        status: CaptureStatus,
        threads: &[&Recorder],
    ) -> Result<FinishReport> {
        let mut files = Vec::with_capacity(threads.len());
        for t in threads {
            let name = t.thread_name();
            if name == CONTROL_THREAD || !self.spec_threads().iter().any(|n| n == name) {
                return Err(CaptureError::Registration {
                    table: "thread",
                    name: name.to_string(),
                    reason: "it is not a background thread of this recorder's registry",
                });
            }
            let report = t.finish(dir, status)?;
            let (cycles_file, summary_file) = thread_files(name);
            files.push(ThreadFiles {
                name: name.to_string(),
                cycles_file,
                summary_file,
                retained_cycles: report.summary.capture.retained_cycles,
            });
        }
        self.finish_with(dir, status, files)
    }

    fn finish_with(
        &self,
        dir: &Path,
        status: CaptureStatus,
        threads: Vec<ThreadFiles>,
    ) -> Result<FinishReport> {
        if !dir.is_dir() {
            return Err(CaptureError::MissingDirectory {
                path: dir.to_path_buf(),
            });
        }
        let tsc = calibrate(self.clock(), self.start_anchor());
        let map = TscMap::new(tsc.start, tsc.ns_per_tick);
        let header = self.header(tsc);
        let counts = Counts {
            total_cycles: self.total_cycles(),
            spans_dropped: self.spans_dropped(),
            spans_outside_cycle: self.spans_outside_cycle(),
        };
        self.set_ring_state(RingState::Finishing);
        let records = self.retained().map(|raw| raw.to_record(&header, &map));
        let result = write_evidence(dir, &header, records, status, counts, None, threads);
        self.set_ring_state(if result.is_ok() {
            RingState::Finished
        } else {
            RingState::Recording
        });
        result
    }
}
