//! A program's session and its rollouts: [`HostSession`] writes the
//! session directory and `session.json`, [`HostEpisode`] one rollout's
//! directory and manifest, from creation to finish.
//!
//! The rollouts of a session share its record (`session.json` lists every
//! one), so an episode holds the session's state behind a mutex: only the
//! set-up and finish of a rollout take it, never the loop.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{hashed_config, program_config, schedule_clock, EpisodeEnd, ProgramFacts};
use crate::episode::{
    create_session_dir, file_name, manifest_files, remove_stale_temps, sha256, update_latest,
    update_latest_session, utc_rfc3339, Counts, Manifest, ManifestStatus, ProgramRecord,
    RecorderFacts, RolloutEntry, RolloutState, ScheduleFacts, SessionRecord, WriterProcess,
    MANIFEST_SCHEMA_VERSION, SOURCE_HASH,
};
use crate::error::{io_err, ServeError};
use crate::rt::{host_facts, HostFacts};

/// What every rollout of a session shares.
#[derive(Debug)]
struct Shared {
    runs: PathBuf,
    session: PathBuf,
    facts: ProgramFacts,
    hashes: BTreeMap<String, String>,
    host: HostFacts,
    /// Rollouts planned; 0 for an open-ended session.
    planned: u32,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    record: SessionRecord,
    /// The rollout whose loop runs now, if any.
    running: Option<usize>,
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held left a record that is still
        // consistent enough to write: take it rather than poison the rest.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A program's session: `<runs>/session-<UTC>` with its `session.json`,
/// to which the program adds rollouts one after another
/// ([`rollout`](Self::rollout)), as `serve --episodes N` does.
#[derive(Debug, Clone)]
pub struct HostSession {
    shared: Arc<Shared>,
}

impl HostSession {
    /// Create `<runs>/session-<UTC>`, write its `session.json` (status
    /// `running`, `planned` rollouts not run yet; 0 for an open-ended
    /// session whose rollouts are listed as they start) and point
    /// `<runs>/latest-session` at it. Temporaries that dead processes left
    /// under `runs` are removed first (each removal is in the returned
    /// notes).
    ///
    /// # Errors
    /// [`ServeError::Io`] or [`ServeError::Capture`] when a directory or
    /// file cannot be written.
    pub fn create(
        runs: &Path,
        facts: ProgramFacts,
        planned: u32,
    ) -> Result<(HostSession, Vec<String>), ServeError> {
        std::fs::create_dir_all(runs).map_err(io_err(runs))?;
        let mut notes = Vec::new();
        remove_stale_temps(runs, &mut notes);
        let notes = String::from_utf8_lossy(&notes)
            .lines()
            .map(str::to_string)
            .collect();
        let session = create_session_dir(runs)?;
        update_latest_session(runs, &session)?;
        let mut record = SessionRecord::new(&session, planned);
        record.producer.clone_from(&facts.producer);
        record.write(&session)?;
        let hashes = facts
            .sources
            .iter()
            .map(|p| {
                let hash =
                    std::fs::read(p).map_or_else(|e| format!("unreadable: {e}"), |b| sha256(&b));
                (p.display().to_string(), hash)
            })
            .collect();
        let shared = Shared {
            runs: runs.to_path_buf(),
            session,
            facts,
            hashes,
            host: host_facts(),
            planned,
            state: Mutex::new(State {
                record,
                running: None,
                closed: false,
            }),
        };
        Ok((
            HostSession {
                shared: Arc::new(shared),
            },
            notes,
        ))
    }

    /// The session directory.
    pub fn dir(&self) -> &Path {
        &self.shared.session
    }

    /// Rollouts started so far.
    pub fn rollouts(&self) -> usize {
        let st = self.shared.lock();
        st.record
            .rollouts
            .iter()
            .filter(|r| r.state != RolloutState::NotRun)
            .count()
    }

    /// Start the next rollout: create `rollout-NNN`, write its `running`
    /// manifest (with `extra` settings over the session's, under
    /// `config.program`: a seed, say) and point `latest` at it.
    ///
    /// # Errors
    /// [`ServeError::Session`] when the session is closed, every planned
    /// rollout has started, or the previous rollout is not finished;
    /// [`ServeError::Io`] or [`ServeError::Capture`] when a file cannot be
    /// written.
    pub fn rollout(
        &self,
        extra: BTreeMap<String, serde_json::Value>,
    ) -> Result<HostEpisode, ServeError> {
        let sh = &self.shared;
        let mut st = sh.lock();
        let refuse = |why: String| {
            Err(ServeError::Session {
                session: sh.session.clone(),
                why,
            })
        };
        if st.closed {
            return refuse("the session is closed; open a new one".into());
        }
        if let Some(i) = st.running {
            return refuse(format!(
                "{} is still running; finish it before starting the next",
                st.record.rollouts[i].rollout
            ));
        }
        let index = st
            .record
            .rollouts
            .iter()
            .position(|r| r.state == RolloutState::NotRun);
        let index = match index {
            Some(i) => i,
            None if sh.planned == 0 => {
                let i = st.record.rollouts.len();
                st.record.rollouts.push(RolloutEntry {
                    rollout: format!("rollout-{i:03}"),
                    state: RolloutState::NotRun,
                });
                i
            }
            None => {
                return refuse(format!(
                    "all {} planned rollouts have started; plan more when opening the session",
                    sh.planned
                ))
            }
        };
        let name = st.record.rollouts[index].rollout.clone();
        let dir = sh.session.join(&name);
        std::fs::create_dir(&dir).map_err(io_err(&dir))?;
        st.record.rollouts[index].state = RolloutState::Running;
        st.record.write(&sh.session)?;
        st.running = Some(index);
        drop(st);
        let ep = HostEpisode {
            config: program_config(&sh.facts, &extra),
            shared: Arc::clone(sh),
            index,
            name,
            dir,
            finished: false,
        };
        ep.write_manifest(ManifestStatus::Running, &EpisodeEnd::default())?;
        // `latest` points at evidence: a program without --control-timing
        // writes none, so `--episode runs/latest` keeps naming the last
        // one that did.
        if sh.facts.control_timing {
            update_latest(&sh.runs, &ep.dir)?;
        }
        Ok(ep)
    }

    /// Close the session: no rollout may start after. `session.json` says
    /// `complete` when every started rollout completed and every planned
    /// one ran; else `aborted`, with why in `stop` (`why`, when the program
    /// gives a reason, such as an exception; else which rollouts did not
    /// run or ended early). A rollout still running is left to its own
    /// finish. Closing twice changes nothing.
    ///
    /// # Errors
    /// [`ServeError::Capture`] when `session.json` cannot be written.
    pub fn close(&self, why: Option<&str>) -> Result<(), ServeError> {
        let sh = &self.shared;
        let mut st = sh.lock();
        if st.closed {
            return Ok(());
        }
        st.closed = true;
        let rec = &st.record;
        let count = |s: RolloutState| rec.rollouts.iter().filter(|r| r.state == s).count();
        let (aborted, not_run) = (count(RolloutState::Aborted), count(RolloutState::NotRun));
        let started = rec.rollouts.len() - not_run;
        let stop = match why {
            Some(w) => Some(w.to_string()),
            None if started == 0 => Some("the program recorded no rollout".to_string()),
            None if aborted > 0 => Some(format!("{aborted} of {started} rollout(s) ended early")),
            None if not_run > 0 => Some(format!(
                "the program closed the session after {started} of {} planned rollouts",
                rec.rollouts.len()
            )),
            None => None,
        };
        if st.running.is_none() || stop.is_some() {
            st.record.status = if stop.is_some() {
                "aborted"
            } else {
                "complete"
            };
        }
        st.record.stop = stop;
        st.record.write(&sh.session)
    }
}

/// One rollout directory of a program's session, from creation to finish.
#[derive(Debug)]
pub struct HostEpisode {
    shared: Arc<Shared>,
    index: usize,
    name: String,
    dir: PathBuf,
    config: serde_json::Value,
    finished: bool,
}

impl HostEpisode {
    /// A session of one rollout, started: create
    /// `<runs>/session-<UTC>/rollout-000`, write `session.json` and a
    /// `running` manifest, and point `<runs>/latest` at the rollout and
    /// `<runs>/latest-session` at the session. Its [`finish`](Self::finish)
    /// completes the session too.
    ///
    /// # Errors
    /// As [`HostSession::create`] and [`HostSession::rollout`].
    pub fn create(
        runs: &Path,
        facts: ProgramFacts,
    ) -> Result<(HostEpisode, Vec<String>), ServeError> {
        let (session, notes) = HostSession::create(runs, facts, 1)?;
        let ep = session.rollout(BTreeMap::new())?;
        Ok((ep, notes))
    }

    /// The rollout directory: where the recorder's `finish` writes.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session directory.
    pub fn session(&self) -> &Path {
        &self.shared.session
    }

    /// Whether [`finish`](Self::finish) has run.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Rewrite the manifest with how the loop ended, mark the rollout
    /// complete or aborted in `session.json`, and point `latest` at the
    /// rollout again. An aborted rollout aborts the session; the last
    /// planned rollout completing completes it. Call it after the
    /// recorder's finish, so the manifest lists the evidence files.
    ///
    /// # Errors
    /// [`ServeError::Capture`] when a file cannot be written.
    pub fn finish(&mut self, end: &EpisodeEnd) -> Result<(), ServeError> {
        let status = if end.complete {
            ManifestStatus::Complete
        } else {
            ManifestStatus::Aborted
        };
        self.write_manifest(status, end)?;
        let sh = &self.shared;
        let mut st = sh.lock();
        st.running = None;
        st.record.rollouts[self.index].state = if end.complete {
            RolloutState::Complete
        } else {
            RolloutState::Aborted
        };
        if !end.complete {
            st.record.status = "aborted";
            st.record.stop = Some(format!(
                "{}: the program stopped the loop early (a signal or an error)",
                self.name
            ));
        } else if st.record.status == "running" {
            // The last planned rollout, or the one left running at close.
            let all_planned_done = sh.planned > 0
                && st
                    .record
                    .rollouts
                    .iter()
                    .all(|r| r.state == RolloutState::Complete);
            if all_planned_done || st.closed {
                st.record.status = "complete";
            }
        }
        st.record.write(&sh.session)?;
        drop(st);
        if sh.facts.control_timing {
            update_latest(&sh.runs, &self.dir)?;
        }
        self.finished = true;
        Ok(())
    }

    fn write_manifest(&self, status: ManifestStatus, end: &EpisodeEnd) -> Result<(), ServeError> {
        let sh = &self.shared;
        let f = &sh.facts;
        let (effective_period_ns, clock) = schedule_clock(f);
        Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            producer: &f.producer,
            created_utc: utc_rfc3339(),
            session: file_name(&sh.session),
            rollout: &self.name,
            status,
            writer: WriterProcess::while_running(status),
            config_source: &format!("program {}", f.program),
            config: &self.config,
            config_hash: sha256(hashed_config(&self.config).to_string().as_bytes()),
            source_hash: SOURCE_HASH,
            program: Some(ProgramRecord {
                path: &f.program,
                source_hashes: &sh.hashes,
            }),
            host: &sh.host,
            realtime: end.realtime.as_ref(),
            cpu_dma_latency_held: None,
            recorder: f.control_timing.then(|| RecorderFacts {
                footprint_bytes: end.footprint_bytes.unwrap_or(0),
                budget_bytes: 0,
                ring_file: end.ring_file.as_ref().map(|p| p.display().to_string()),
                ring_note: end.ring_note.clone(),
            }),
            schedule: ScheduleFacts {
                nominal_period_ns: f.nominal_period_ns,
                effective_period_ns,
                spin_margin_ns: f.spin_margin_ns,
                spin_margin_auto: f.spin_margin_auto,
                overrun_policy: f.overrun_policy,
                clock,
            },
            counts: Counts {
                cycles: end.cycles,
                planned_cycles: end.planned_cycles,
                overruns: end.overruns,
                skipped: end.skipped,
                stats_dropped: 0,
                events_dropped: 0,
            },
            files: manifest_files(&[], end.evidence),
        }
        .write(&self.dir)
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
pub(super) mod tests;
