//! Which ring `looptime watch` opens: `--ring`, else the newest running
//! ring of `--pid`, else the caller's newest running ring, preferring one
//! that records into the caller's runs directory; and, when several loops
//! run, which were left aside and how to pick another. Other users' rings
//! are named from `stat` alone, never opened (docs/durability.md).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use looptime_capture::ring::{self, RingReader};

use super::WatchOptions;

/// The ring chosen, and what to tell the user about the others.
#[derive(Debug)]
pub struct Picked {
    /// The ring file to open.
    pub path: PathBuf,
    /// Lines for stderr: the other running loops, when there are any.
    pub notes: Vec<String>,
}

/// A running control-thread ring of the caller's.
struct Candidate {
    created: u64,
    pid: u32,
    path: PathBuf,
    episode: Option<PathBuf>,
    in_runs_dir: bool,
}

fn under(dir: Option<&Path>, episode: Option<&Path>) -> bool {
    let (Some(d), Some(e)) = (dir, episode) else {
        return false;
    };
    let d = std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
    let e = std::fs::canonicalize(e).unwrap_or_else(|_| e.to_path_buf());
    e.starts_with(d)
}

/// The ring to watch (see the module docs).
///
/// # Errors
/// No running ring of the caller's (or of `--pid`), with the other users'
/// rings named.
pub fn pick_ring(args: &WatchOptions) -> Result<Picked> {
    if let Some(r) = &args.ring {
        return Ok(Picked {
            path: r.clone(),
            notes: Vec::new(),
        });
    }
    let mut live: Vec<Candidate> = ring::list_rings(&args.ring_dir)
        .into_iter()
        .filter_map(|p| {
            let r = RingReader::open(&p).ok()?;
            // A loop's background threads have rings of their own; watch
            // shows the control thread's (name another with --ring).
            let control = r.thread_name().as_deref() == Some(looptime_capture::CONTROL_THREAD);
            let ok = control && r.writer_alive() && args.pid.is_none_or(|pid| r.pid() == pid);
            let episode = r.meta().ok().and_then(|m| m.episode_dir);
            ok.then(|| Candidate {
                created: r.created_unix_ns(),
                pid: r.pid(),
                in_runs_dir: under(args.runs_dir.as_deref(), episode.as_deref()),
                episode,
                path: p,
            })
        })
        .collect();
    // Preferred last: recording into the runs directory, then the newest.
    live.sort_by_key(|c| (c.in_runs_dir, c.created));
    let Some(chosen) = live.pop() else {
        match args.pid {
            Some(pid) => bail!(
                "process {pid} has no ring in {} (is it recording, with run.timing_ring = \"shm\"?)",
                args.ring_dir.display()
            ),
            None => {
                let others: String = ring::owner::list(&args.ring_dir)
                    .others
                    .iter()
                    .map(|o| format!("\n  {}", o.describe_other()))
                    .collect();
                bail!("no running looptime ring of yours in {}: start a loop with `looptime serve --control-timing`, or name one with --ring{others}", args.ring_dir.display())
            }
        }
    };
    let notes = notes(args, &chosen, &live);
    Ok(Picked {
        path: chosen.path,
        notes,
    })
}

/// What to tell the user when other loops record: which one was chosen,
/// why, and each other's `--pid`; and how many other users' rings were left
/// alone.
fn notes(args: &WatchOptions, chosen: &Candidate, live: &[Candidate]) -> Vec<String> {
    let mut notes = Vec::new();
    let others_of_users = ring::owner::list(&args.ring_dir).others.len();
    if !live.is_empty() {
        let episode = |c: &Candidate| {
            c.episode
                .as_ref()
                .map_or("no episode directory".to_string(), |e| {
                    e.display().to_string()
                })
        };
        notes.push(format!(
            "{} loops of yours are recording; watching pid {} ({}){}; the others:",
            live.len() + 1,
            chosen.pid,
            episode(chosen),
            if chosen.in_runs_dir {
                ", the newest recording into your runs directory"
            } else {
                ", the newest"
            }
        ));
        for c in live.iter().rev() {
            notes.push(format!(
                "  pid {} ({}): looptime watch --pid {}",
                c.pid,
                episode(c),
                c.pid
            ));
        }
    }
    if others_of_users > 0 {
        notes.push(format!(
            "{others_of_users} ring file(s) of other users in {} were left alone (never opened)",
            args.ring_dir.display()
        ));
    }
    notes
}
