//! Rings in a shared directory belong to their owners (docs/durability.md,
//! "Whose rings").
//!
//! `/dev/shm`, the default ring directory, is shared by every user and
//! program on the host. So every way into a ring file goes through here:
//!
//! 1. A ring file that is not a regular file owned by the caller's
//!    effective uid is never opened, written or removed. [`list`] reports it
//!    from `lstat` alone (owner, size, age), as someone else's;
//!    [`open_mine`] refuses it before opening it, and checks after opening
//!    (with `O_NOFOLLOW`) that the file it opened is the one it checked.
//! 2. The episode directory a ring names is used only when the caller owns
//!    it, or, when it does not exist yet, when the caller owns its nearest
//!    existing ancestor (recover then creates it); and never through a
//!    symbolic link owned by anyone but the caller or root
//!    ([`check_episode_dir`]). [`open_episode_dir`] walks to it by
//!    directory handles (`openat` with `O_NOFOLLOW`, a trusted link
//!    followed on purpose), creating what is missing, and the evidence is
//!    then written through the final handle, so a directory on the way
//!    swapped for a link after the check cannot redirect the write.
//!
//! Ring files are created `0600` by their writer, so the reading side is
//! what these rules add.

use std::fs::{File, Metadata};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use super::{RING_PREFIX, RING_SUFFIX};
use crate::error::{CaptureError, Result};

/// The caller's effective uid: what owning a ring means.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// A ring file as `lstat` sees it: enough to list someone else's ring
/// without opening it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingFileInfo {
    /// The file.
    pub path: PathBuf,
    /// Its owner's uid.
    pub uid: u32,
    /// Its size in bytes.
    pub size: u64,
    /// Its last modification, ns since the Unix epoch.
    pub modified_unix_ns: u64,
    /// Whether it is a regular file (a link or anything else never is a
    /// ring of ours).
    pub regular: bool,
}

impl RingFileInfo {
    fn of(path: PathBuf, m: &Metadata) -> Self {
        RingFileInfo {
            path,
            uid: m.uid(),
            size: m.size(),
            modified_unix_ns: (m.mtime().max(0) as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec().max(0) as u64),
            regular: m.file_type().is_file(),
        }
    }

    /// Whether the caller may open it: a regular file owned by the caller.
    pub fn is_mine(&self) -> bool {
        self.regular && self.uid == euid()
    }

    /// One line for someone else's ring: whose it is, its size and age,
    /// and that it was left alone.
    pub fn describe_other(&self) -> String {
        let age_s = super::unix_ns().saturating_sub(self.modified_unix_ns) / 1_000_000_000;
        let what = if self.regular {
            format!("owned by uid {} (not you, uid {})", self.uid, euid())
        } else {
            format!("not a regular file (owner uid {})", self.uid)
        };
        format!(
            "{}: {what}, {:.1} MB, modified {} ago; left alone (a ring that is not yours is never opened, written or removed)",
            self.path.display(),
            self.size as f64 / 1e6,
            age(age_s)
        )
    }
}

fn age(s: u64) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86_400),
    }
}

/// The ring files in a directory, the caller's apart from everyone else's.
#[derive(Clone, Debug, Default)]
pub struct RingListing {
    /// The caller's rings, oldest first (by modification time).
    pub mine: Vec<RingFileInfo>,
    /// Everyone else's (and anything named like a ring that is not a
    /// regular file), oldest first; never to be opened.
    pub others: Vec<RingFileInfo>,
}

/// The ring files (`looptime-*.ring`) in `dir`, from `lstat` alone. A
/// missing or unreadable directory gives an empty listing.
pub fn list(dir: &Path) -> RingListing {
    let mut out = RingListing::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !(name.starts_with(RING_PREFIX) && name.ends_with(RING_SUFFIX)) {
            continue;
        }
        let path = e.path();
        // DirEntry::metadata does not follow a symbolic link: lstat.
        let Ok(m) = e.metadata() else { continue };
        let info = RingFileInfo::of(path, &m);
        if info.is_mine() {
            out.mine.push(info);
        } else {
            out.others.push(info);
        }
    }
    let key = |r: &RingFileInfo| (r.modified_unix_ns, r.path.clone());
    out.mine.sort_by_key(key);
    out.others.sort_by_key(key);
    out
}

/// Refuse `path` unless it is a regular file the caller owns, from `lstat`.
///
/// # Errors
/// [`CaptureError::Ring`] when it cannot be looked at,
/// [`CaptureError::NotYourRing`] when it is someone else's or not a
/// regular file.
pub fn check_mine(path: &Path) -> Result<RingFileInfo> {
    let m = std::fs::symlink_metadata(path).map_err(super::ring_err(path, "look at"))?;
    let info = RingFileInfo::of(path.to_path_buf(), &m);
    if info.is_mine() {
        Ok(info)
    } else {
        Err(CaptureError::NotYourRing {
            path: path.to_path_buf(),
            why: info.describe_other(),
        })
    }
}

/// Open the caller's own ring file at `path` read-only: refused from
/// `lstat` before it is opened, opened without following a link, and
/// checked again on the open file (the same file, still the caller's).
///
/// # Errors
/// As [`check_mine`], and [`CaptureError::Ring`] when it cannot be opened.
pub fn open_mine(path: &Path) -> Result<File> {
    let before = std::fs::symlink_metadata(path).map_err(super::ring_err(path, "look at"))?;
    check_mine(path)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        // Non-blocking: a FIFO swapped in after the check must not hang
        // the open (the check after it then refuses what it opened).
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(super::ring_err(path, "open"))?;
    let after = file.metadata().map_err(super::ring_err(path, "open"))?;
    if !after.file_type().is_file()
        || after.dev() != before.dev()
        || after.ino() != before.ino()
        || after.uid() != euid()
    {
        return Err(CaptureError::NotYourRing {
            path: path.to_path_buf(),
            why: format!(
                "{}: the file changed between its check and its opening; left alone",
                path.display()
            ),
        });
    }
    Ok(file)
}

/// Whether the caller may write evidence into `dir` (rule 2 above): `dir`
/// owned by the caller, or missing with the caller's nearest existing
/// ancestor; no link on the way owned by anyone but the caller or root.
/// `dir` must be absolute (a ring's meta records it so).
///
/// # Errors
/// [`CaptureError::NotYourDirectory`] naming the directory and why.
pub fn check_episode_dir(dir: &Path) -> Result<()> {
    let me = euid();
    let refuse = |why: String| {
        Err(CaptureError::NotYourDirectory {
            path: dir.to_path_buf(),
            why,
        })
    };
    if !dir.is_absolute() || dir.components().any(|c| c == Component::ParentDir) {
        return refuse("it is not an absolute path without `..`".into());
    }
    // Every existing prefix, outermost first: links must be trusted, and
    // the deepest existing one must be the caller's.
    let mut prefix = PathBuf::new();
    let mut deepest: Option<(PathBuf, u32)> = None;
    for c in dir.components() {
        prefix.push(c);
        let Ok(m) = std::fs::symlink_metadata(&prefix) else {
            break;
        };
        if m.file_type().is_symlink() && m.uid() != me && m.uid() != 0 {
            return refuse(format!(
                "{} is a symbolic link owned by uid {}, not by you (uid {me}) or root",
                prefix.display(),
                m.uid()
            ));
        }
        // Where the prefix leads (through a trusted link, if it is one).
        let Ok(target) = std::fs::metadata(&prefix) else {
            break;
        };
        deepest = Some((prefix.clone(), target.uid()));
    }
    match deepest {
        Some((p, uid)) if p == dir && uid == me => Ok(()),
        Some((p, uid)) if p == dir => refuse(format!(
            "it is owned by uid {uid}, not by you (uid {me})"
        )),
        Some((_, uid)) if uid == me => Ok(()),
        Some((p, uid)) => refuse(format!(
            "it does not exist, and {} (where it would be made) is owned by uid {uid}, not by you (uid {me})",
            p.display()
        )),
        None => refuse("none of its parents exists".into()),
    }
}

/// An episode directory opened by [`open_episode_dir`]: its handle, kept
/// open while the evidence is written through [`EpisodeDir::path`].
#[derive(Debug)]
pub struct EpisodeDir {
    fd: std::os::fd::OwnedFd,
    dir: PathBuf,
}

impl EpisodeDir {
    /// A path that resolves through the open handle (`/proc/self/fd/N`),
    /// whatever happens to the directories above it; the directory's own
    /// path where `/proc` is not mounted.
    pub fn path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        let via = PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()));
        if via.is_dir() {
            via
        } else {
            self.dir.clone()
        }
    }

    /// The directory as named.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// `openat(at, name, flags)` as an owned handle.
fn open_at(
    at: std::os::fd::RawFd,
    name: &std::ffi::CStr,
    flags: libc::c_int,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `name` is a NUL-terminated string; openat returns a new
    // descriptor that nothing else owns, or -1.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from openat, owned by no one else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `fstatat(at, name)` (`AT_SYMLINK_NOFOLLOW` when `nofollow`), or the
/// handle's own with an empty name.
fn stat_at(
    at: std::os::fd::RawFd,
    name: &std::ffi::CStr,
    nofollow: bool,
) -> std::io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid one to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let mut flags = if nofollow {
        libc::AT_SYMLINK_NOFOLLOW
    } else {
        0
    };
    if name.is_empty() {
        flags |= libc::AT_EMPTY_PATH;
    }
    // SAFETY: `name` is NUL-terminated and `st` writable for the call.
    if unsafe { libc::fstatat(at, name.as_ptr(), &mut st, flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// Open `dir` for writing evidence into it, by rule 2 above, creating what
/// is missing: from `/`, each component opened relative to the handle of
/// the one above with `O_NOFOLLOW`; a component that is a symbolic link is
/// followed only when the caller or root owns it; a missing one is made
/// (`mkdirat`, 0755) only inside a directory the caller owns; the final
/// directory must be the caller's. The checks and the write use the same
/// handles, so nothing can be swapped in between.
///
/// # Errors
/// [`CaptureError::NotYourDirectory`] naming the directory and why, or
/// [`CaptureError::Write`] when a directory cannot be made or opened.
pub fn open_episode_dir(dir: &Path) -> Result<EpisodeDir> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let me = euid();
    let refuse = |why: String| CaptureError::NotYourDirectory {
        path: dir.to_path_buf(),
        why,
    };
    let io = |source: std::io::Error| CaptureError::Write {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.is_absolute() || dir.components().any(|c| c == Component::ParentDir) {
        return Err(refuse("it is not an absolute path without `..`".into()));
    }
    let dir_flags = libc::O_RDONLY | libc::O_DIRECTORY;
    let mut cur = open_at(libc::AT_FDCWD, c"/", dir_flags).map_err(io)?;
    let mut walked = PathBuf::from("/");
    for c in dir.components().skip(1) {
        let Component::Normal(name) = c else { continue };
        let cname = std::ffi::CString::new(name.as_bytes())
            .map_err(|_| refuse("it holds a NUL byte".into()))?;
        walked.push(name);
        let next = match open_at(cur.as_raw_fd(), &cname, dir_flags | libc::O_NOFOLLOW) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let st = stat_at(cur.as_raw_fd(), c"", false).map_err(io)?;
                if st.st_uid != me {
                    return Err(refuse(format!(
                        "it does not exist, and {} (where it would be made) is owned by uid {}, not by you (uid {me})",
                        walked.parent().unwrap_or(Path::new("/")).display(),
                        st.st_uid
                    )));
                }
                // SAFETY: `cname` is NUL-terminated; mkdirat touches no memory of ours.
                let rc = unsafe { libc::mkdirat(cur.as_raw_fd(), cname.as_ptr(), 0o755) };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(io(e));
                    }
                }
                open_at(cur.as_raw_fd(), &cname, dir_flags | libc::O_NOFOLLOW).map_err(io)?
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
                let st = stat_at(cur.as_raw_fd(), &cname, true).map_err(io)?;
                if st.st_mode & libc::S_IFMT != libc::S_IFLNK {
                    return Err(refuse(format!("{} is not a directory", walked.display())));
                }
                if st.st_uid != me && st.st_uid != 0 {
                    return Err(refuse(format!(
                        "{} is a symbolic link owned by uid {}, not by you (uid {me}) or root",
                        walked.display(),
                        st.st_uid
                    )));
                }
                // A trusted link: followed, on purpose.
                open_at(cur.as_raw_fd(), &cname, dir_flags).map_err(io)?
            }
            Err(e) => return Err(io(e)),
        };
        cur = next;
    }
    let st = stat_at(cur.as_raw_fd(), c"", false).map_err(io)?;
    if st.st_uid != me {
        return Err(refuse(format!(
            "it is owned by uid {}, not by you (uid {me})",
            st.st_uid
        )));
    }
    Ok(EpisodeDir {
        fd: cur,
        dir: dir.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callers_directories_pass_and_relative_paths_do_not() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("runs/session-x/rollout-000");
        // Missing: its nearest existing ancestor (the temp dir) is ours.
        check_episode_dir(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        check_episode_dir(&dir).unwrap();
        assert!(check_episode_dir(Path::new("runs/x")).is_err());
        assert!(check_episode_dir(&tmp.path().join("a/../b")).is_err());
    }

    #[test]
    fn listing_splits_mine_from_links_named_like_rings() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("looptime-1-0.ring"), b"x").unwrap();
        std::fs::write(tmp.path().join("other.txt"), b"x").unwrap();
        std::os::unix::fs::symlink("/dev/null", tmp.path().join("looptime-2-0.ring")).unwrap();
        let l = list(tmp.path());
        assert_eq!(l.mine.len(), 1);
        assert_eq!(l.others.len(), 1, "a link is never one of ours");
        assert!(!l.others[0].regular);
        assert!(l.others[0].describe_other().contains("not a regular file"));
        assert!(check_mine(&tmp.path().join("looptime-2-0.ring")).is_err());
        assert!(open_mine(&tmp.path().join("looptime-1-0.ring")).is_ok());
    }

    #[test]
    fn a_fifo_in_a_rings_place_is_refused_without_blocking() {
        // A FIFO named like a ring: refused by its type, and the open (which
        // would block on a FIFO without a writer) never hangs: the check
        // runs in a thread that must answer within 5 s.
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("looptime-3-0.ring");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(open_mine(&p).is_err());
        });
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(5)),
            Ok(true),
            "a FIFO must be refused, and promptly"
        );
        let l = list(tmp.path());
        assert!(l.mine.is_empty() && !l.others[0].regular);
    }

    #[test]
    fn the_episode_directory_is_walked_by_handles_and_a_foreign_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        // Missing directories are made, and the final one is ours.
        let ep = base.join("runs/session-x/rollout-000");
        let h = open_episode_dir(&ep).unwrap();
        assert!(ep.is_dir());
        std::fs::write(h.path().join("probe"), b"1").unwrap();
        assert_eq!(std::fs::read(ep.join("probe")).unwrap(), b"1");

        // An ancestor swapped for a link after the open cannot redirect the
        // write: the handle still names the directory that was checked.
        std::fs::rename(base.join("runs"), base.join("runs-moved")).unwrap();
        std::fs::create_dir(base.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("runs")).unwrap();
        std::fs::write(h.path().join("after"), b"2").unwrap();
        assert!(base
            .join("runs-moved/session-x/rollout-000/after")
            .is_file());
        assert!(!base.join("elsewhere/session-x").exists());
        drop(h);

        // A link of the caller's own (or root's) on the way is followed.
        let via = base.join("runs/session-y");
        let h = open_episode_dir(&via).unwrap();
        drop(h);
        assert!(base.join("elsewhere/session-y").is_dir());

        // A link owned by another user is refused, naming it and its owner
        // (root can give a link away; another user cannot make one foreign).
        let link = base.join("foreign");
        std::os::unix::fs::symlink(base.join("elsewhere"), &link).unwrap();
        if std::os::unix::fs::lchown(&link, Some(12345), None).is_ok() {
            let e = open_episode_dir(&link.join("rollout-000"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("foreign is a symbolic link owned by uid 12345"),
                "{e}"
            );
            assert!(!base.join("elsewhere/rollout-000").exists());
        } else {
            assert_ne!(euid(), 0, "root can always lchown");
        }
        // A file in a directory's place, and relative paths, are refused.
        std::fs::write(base.join("plain"), b"").unwrap();
        let e = open_episode_dir(&base.join("plain/x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a directory"), "{e}");
        assert!(open_episode_dir(Path::new("runs/x")).is_err());
    }
}
