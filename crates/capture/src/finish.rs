//! The recorder's finish: calibrate the clock, turn its retained slots
//! into records, mark its ring, and hand the records to the writer. Above
//! the recorder, the ring and the writer; none of them imports it.

use std::path::Path;

use crate::error::{CaptureError, Result};
use crate::format::{thread_files, CaptureStatus, ThreadFiles, CONTROL_THREAD};
use crate::recorder::Recorder;
use crate::ring::RingState;
use crate::slot::{calibrate, TscMap};
use crate::writer::{write_evidence, Counts, FinishReport};

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
            values_dropped: self
                .retained()
                .map(|raw| raw.nonfinite_values(&header))
                .sum(),
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
