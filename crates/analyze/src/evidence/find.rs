//! The episode finder that every multi-episode command uses (`compare`,
//! `export --format parquet`, `fleet`), so that they agree on three rules
//! (docs/metrics.md, "Several episodes"):
//!
//! * **identity**: an episode is its canonical directory path. One reached
//!   twice (through a symbolic link, a session and one of its rollouts, or a
//!   root given twice) counts once; hard-linked copies in two directories
//!   are two episodes.
//! * **rollouts without evidence**: a rollout directory without
//!   `control_timing.jsonl` is never dropped silently. It is listed in
//!   [`Found::without_evidence`], and the command says so, lists it in its
//!   output and exits with the partial-input code.
//! * **what a path stands for**: in [`Search::Sessions`] a path is an
//!   episode, or a session standing for its `rollout-*` directories; in
//!   [`Search::Tree`] every directory below a root is searched.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use looptime_capture::format::{CYCLES_FILE, SUMMARY_FILE};

use crate::error::{AnalyzeError, Result};

/// How far a path given on the command line is searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// A path is an episode (it holds the JSONL, or is not a session), or a
    /// session directory standing for its `rollout-*` subdirectories.
    Sessions,
    /// Every directory below each root, recursively. Symbolic links inside
    /// a root (a session's `latest`) and hidden directories are not
    /// followed; the search does not descend into an episode.
    Tree,
}

/// What the finder found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Episode directories with evidence (or, in [`Search::Sessions`], paths
    /// that are not sessions, which the loader explains), each once, as
    /// given or as found under a root. In the order given for
    /// [`Search::Sessions`], in canonical path order for [`Search::Tree`].
    pub episodes: Vec<PathBuf>,
    /// Rollout directories without `control_timing.jsonl`: runs that died
    /// before their finish (`looptime recover` may rebuild them) or never
    /// ran. Each once, sorted.
    pub without_evidence: Vec<PathBuf>,
}

/// The canonical path of `p`, or `p` itself when it cannot be resolved.
pub fn identity(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Find the episodes that `paths` stand for.
///
/// # Errors
/// In [`Search::Tree`]: [`AnalyzeError::MissingDirectory`] or
/// [`AnalyzeError::NotADirectory`] for a root that is not a directory. In
/// [`Search::Sessions`]: [`AnalyzeError::EmptySession`] for a session none
/// of whose rollouts holds a JSONL.
pub fn find_episodes(paths: &[PathBuf], search: Search) -> Result<Found> {
    let mut found = Found::default();
    match search {
        Search::Sessions => {
            for path in paths {
                sessions(path, &mut found)?;
            }
        }
        Search::Tree => {
            for root in paths {
                tree(root, &mut found)?;
            }
            found.episodes.sort_by_cached_key(|p| identity(p));
        }
    }
    let mut seen = HashSet::new();
    found.episodes.retain(|p| seen.insert(identity(p)));
    let mut seen = HashSet::new();
    found.without_evidence.retain(|p| seen.insert(identity(p)));
    found.without_evidence.sort();
    Ok(found)
}

fn has_cycles(dir: &Path) -> bool {
    dir.join(CYCLES_FILE).is_file()
}

fn sessions(path: &Path, found: &mut Found) -> Result<()> {
    if has_cycles(path) {
        found.episodes.push(path.to_path_buf());
        return Ok(());
    }
    let mut rollouts: Vec<PathBuf> = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("rollout-"))
                && e.path().is_dir()
        })
        .map(|e| e.path())
        .collect();
    if rollouts.is_empty() {
        // Not a session: the loader says what is wrong with it.
        found.episodes.push(path.to_path_buf());
        return Ok(());
    }
    rollouts.sort();
    let (usable, missing): (Vec<_>, Vec<_>) = rollouts.into_iter().partition(|r| has_cycles(r));
    if usable.is_empty() {
        return Err(AnalyzeError::EmptySession {
            path: path.to_path_buf(),
            rollouts: missing.len(),
        });
    }
    found.episodes.extend(usable);
    found.without_evidence.extend(missing);
    Ok(())
}

/// A directory that an episode left without its JSONL: a manifest or a
/// summary, a leftover JSONL temporary, or a `rollout-*` name.
fn looks_like_episode(dir: &Path) -> bool {
    if dir.join(SUMMARY_FILE).is_file() || dir.join("manifest.json").is_file() {
        return true;
    }
    let rollout = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("rollout-"));
    let temp = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            e.file_name()
                .to_str()
                .and_then(looptime_capture::parse_temp_name)
                .is_some_and(|(target, _)| target == CYCLES_FILE)
        });
    rollout || temp
}

fn tree(root: &Path, found: &mut Found) -> Result<()> {
    if !root.exists() {
        return Err(AnalyzeError::MissingDirectory {
            path: root.to_path_buf(),
        });
    }
    if !root.is_dir() {
        return Err(AnalyzeError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if has_cycles(&dir) {
            found.episodes.push(dir);
            continue;
        }
        let mut subdirs = Vec::new();
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let hidden = e.file_name().to_string_lossy().starts_with('.');
            if !hidden && e.file_type().is_ok_and(|t| t.is_dir()) {
                subdirs.push(e.path());
            }
        }
        // A directory with subdirectories is a session or a runs folder,
        // even when it holds a manifest of its own (session.json and the
        // like); one without is a leaf, an episode that lost its evidence
        // when it looks like one.
        if subdirs.is_empty() && looks_like_episode(&dir) {
            found.without_evidence.push(dir);
        }
        stack.extend(subdirs);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }

    #[test]
    fn one_episode_is_one_canonical_path_and_hard_links_are_two() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        touch(&root.join("s1/rollout-000").join(CYCLES_FILE));
        touch(&root.join("s1/rollout-001/manifest.json"));
        // A hard-linked copy of the JSONL in another directory.
        std::fs::create_dir_all(root.join("s2/rollout-000")).unwrap();
        std::fs::hard_link(
            root.join("s1/rollout-000").join(CYCLES_FILE),
            root.join("s2/rollout-000").join(CYCLES_FILE),
        )
        .unwrap();
        std::os::unix::fs::symlink(root.join("s1/rollout-000"), root.join("latest")).unwrap();

        let tree = find_episodes(&[root.to_path_buf(), root.join("s1")], Search::Tree).unwrap();
        assert_eq!(
            tree.episodes,
            vec![root.join("s1/rollout-000"), root.join("s2/rollout-000")]
        );
        assert_eq!(tree.without_evidence, vec![root.join("s1/rollout-001")]);

        // A session, one of its rollouts again, and the link to it: the
        // rollout counts once; the missing rollout is listed.
        let s = find_episodes(
            &[
                root.join("s1"),
                root.join("s1/rollout-000"),
                root.join("latest"),
            ],
            Search::Sessions,
        )
        .unwrap();
        assert_eq!(s.episodes, vec![root.join("s1/rollout-000")]);
        assert_eq!(s.without_evidence, vec![root.join("s1/rollout-001")]);

        // A session with no usable rollout is an error that names it.
        touch(&root.join("s3/rollout-000/manifest.json"));
        let e = find_episodes(&[root.join("s3")], Search::Sessions).unwrap_err();
        assert!(matches!(e, AnalyzeError::EmptySession { rollouts: 1, .. }));
        // A missing root is an error in a tree search.
        assert!(matches!(
            find_episodes(&[root.join("nope")], Search::Tree).unwrap_err(),
            AnalyzeError::MissingDirectory { .. }
        ));
    }
}
