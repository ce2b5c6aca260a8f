//! Evidence from the ring of a process that died: its complete cycles
//! handed to the writer as records.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;
use crate::error::{CaptureError, Result};
use crate::format::{CaptureStatus, Recovery};
use crate::writer::{write_evidence, Counts, FinishReport};

/// What [`recover`] did with one ring.
#[derive(Debug)]
pub enum Recovered {
    /// The evidence files were written from the ring, which was removed.
    Written {
        /// The ring file (now removed).
        ring: PathBuf,
        /// The episode directory written into.
        dir: PathBuf,
        /// The files and the summary.
        report: Box<FinishReport>,
    },
    /// The writer had finished: its files were already written, so the
    /// ring was only removed.
    AlreadyFinished {
        /// The ring file (now removed).
        ring: PathBuf,
        /// The episode directory named in the ring, if any.
        dir: Option<PathBuf>,
    },
}

/// Turn the ring at `path`, left by a process that died, into the normal
/// evidence files in the episode directory its header names (created if
/// missing), with status `recovered`, then remove it.
///
/// # Errors
/// [`CaptureError::RingInUse`] when the writer still runs (watch it
/// instead), [`CaptureError::BadRing`] for a damaged ring or one that names
/// no episode directory, and the write errors of
/// [`Recorder::finish`](crate::Recorder::finish). The ring is kept on any
/// error.
pub fn recover(path: &Path) -> Result<Recovered> {
    let reader = RingReader::open(path)?;
    if reader.writer_alive() {
        return Err(CaptureError::RingInUse {
            path: path.to_path_buf(),
            pid: reader.pid(),
        });
    }
    let state = reader.state();
    let meta = reader.meta()?;
    if state == RingState::Finished {
        drop(reader);
        fs::remove_file(path).map_err(ring_err(path, "remove"))?;
        return Ok(Recovered::AlreadyFinished {
            ring: path.to_path_buf(),
            dir: meta.episode_dir,
        });
    }
    let Some(dir) = meta.episode_dir.clone() else {
        return Err(bad_ring(
            path,
            format!(
                "it names no episode directory (its recorder was built without one, as a Python Recorder without episode_dir is): there is nowhere to write its evidence, so recover keeps it; its writer is dead, so nothing else will remove it: look at it with `looptime watch --ring {}` if you need its cycles, then drop it with `rm {}` (build the recorder with an episode directory so that a kill is recoverable)",
                path.display(),
                path.display()
            ),
        ));
    };
    // Rings record absolute directories; one from an older build may hold a
    // relative one, read against the current directory as it always was.
    let dir = std::path::absolute(&dir).map_err(|source| CaptureError::Write {
        path: dir.clone(),
        source,
    })?;
    // Walked to and opened by handles; the evidence is written through the
    // final one, and the report names the directory as the ring does.
    let handle = owner::open_episode_dir(&dir)?;
    let via = handle.path();
    let mut report = write_recovered(&reader, path, &via)?;
    for p in [&mut report.cycles_path, &mut report.summary_path] {
        if let Ok(rest) = p.strip_prefix(&via) {
            *p = dir.join(rest);
        }
    }
    drop(handle);
    drop(reader);
    fs::remove_file(path).map_err(ring_err(path, "remove"))?;
    Ok(Recovered::Written {
        ring: path.to_path_buf(),
        dir,
        report: Box::new(report),
    })
}

/// The ring at `path`'s complete cycles written into `dir` (which must
/// exist) with status `recovered`, whatever directory the ring names and
/// whoever wrote it, and the ring left in place: what a test or a fuzz
/// target that hands it untrusted bytes needs. [`recover`] is the
/// command's way, with its checks.
///
/// # Errors
/// [`CaptureError::BadRing`] for a damaged ring, and the write errors of
/// [`Recorder::finish`](crate::Recorder::finish).
pub fn recover_into(path: &Path, dir: &Path) -> Result<FinishReport> {
    let reader = RingReader::open(path)?;
    write_recovered(&reader, path, dir)
}

/// Read `reader`'s complete cycles and write them into `dir` as recovered
/// evidence.
fn write_recovered(reader: &RingReader, path: &Path, dir: &Path) -> Result<FinishReport> {
    let read = reader.read(None)?;
    let last = read.cycles.last();
    let recovery = Recovery {
        ring_file: path.display().to_string(),
        writer_pid: reader.pid(),
        ring_state: reader.state().as_str().to_string(),
        cycles_recovered: read.cycles.len() as u64,
        in_progress_records: read.in_progress,
        torn_records: read.torn + read.damaged,
        last_complete_cycle: last.map(|c| c.cycle),
        last_complete_end_ns: last.and_then(|c| c.end_ns),
    };
    let counts = Counts {
        total_cycles: read.total_cycles,
        spans_dropped: read.spans_dropped,
        spans_outside_cycle: read.spans_outside_cycle,
        values_dropped: read.values_dropped,
    };
    write_evidence(
        dir,
        &read.header,
        read.cycles.into_iter(),
        CaptureStatus::Recovered,
        counts,
        Some(recovery),
        Vec::new(),
    )
}
