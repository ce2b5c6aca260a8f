//! Every file the analyzer writes goes through capture's one atomic write
//! ([`looptime_capture::write_atomic`]): a hidden `.<name>.<pid>.tmp`
//! beside the target, flushed and fsynced, renamed into place, and the
//! directory fsynced. On any failure the temporary is removed and an
//! earlier file of that name is left as it was. Errors stay the
//! analyzer's: a failed write is [`AnalyzeError::Write`] naming the target
//! (exit 3), and an error of the content itself comes back unchanged.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use crate::error::{AnalyzeError, Result};

/// Write `path` from `fill`; returns the bytes written.
///
/// # Errors
/// [`AnalyzeError::Write`] naming `path`, or `fill`'s own error.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<u64> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut content_error = None;
    let written = looptime_capture::write_atomic(dir, &name, |w| {
        fill(w).map_err(|e| {
            let io = match &e {
                AnalyzeError::Write { source, .. } => {
                    std::io::Error::new(source.kind(), source.to_string())
                }
                other => std::io::Error::other(other.to_string()),
            };
            content_error = Some(e);
            io
        })
    });
    match written {
        Ok((_, bytes)) => Ok(bytes),
        Err(e) => Err(match (content_error, e) {
            (Some(AnalyzeError::Write { source, .. }), _)
            | (None, looptime_capture::CaptureError::Write { source, .. }) => AnalyzeError::Write {
                path: path.to_path_buf(),
                source,
            },
            (Some(content), _) => content,
            (None, other) => other.into(),
        }),
    }
}

/// Write `bytes` to `path` atomically.
///
/// # Errors
/// [`AnalyzeError::Write`] naming `path`.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<u64> {
    use std::io::Write;
    write_atomic(path, |w| {
        w.write_all(bytes).map_err(|source| AnalyzeError::Write {
            path: path.to_path_buf(),
            source,
        })
    })
}
