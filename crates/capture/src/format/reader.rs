//! Reading the evidence back: the limits a reader enforces on outside
//! bytes, the header's checks (kind and version first, then the full
//! header with field paths in its errors), the cycle lines, and the
//! summary. Part of the schema ([`crate::format`]).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::*;
use crate::error::{CaptureError, Result};

/// Largest header line a reader accepts. A header written by the recorder is
/// a few kilobytes; the bound keeps a damaged or hostile file from making the
/// reader hold gigabytes for one line.
pub const MAX_HEADER_BYTES: usize = 4 << 20;

/// What the reader noticed about the header line and accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeaderNotes {
    /// The file began with a UTF-8 byte-order mark, which was skipped.
    pub bom: bool,
    /// The header line ended in CRLF (the file's line endings were converted).
    pub crlf: bool,
    /// The header's `compute_budget_ns` held this value, above the 10 s a
    /// recorder declares: it was read as undeclared.
    pub budget_above_limit: Option<u64>,
    /// The header's `deadline_tolerance_ns`, likewise.
    pub tolerance_above_limit: Option<u64>,
}

/// Reads a `control_timing.jsonl` file line by line into the schema types.
///
/// This is the strict, shared reader: the analyzer builds its lenient mode on
/// [`EvidenceReader::next_line`].
#[derive(Debug)]
pub struct EvidenceReader {
    path: PathBuf,
    lines: std::io::Lines<BufReader<File>>,
    line_no: u64,
    header: Header,
    notes: HeaderNotes,
}

fn bad_header(path: &Path, message: impl Into<String>) -> CaptureError {
    CaptureError::BadHeader {
        path: path.to_path_buf(),
        line: 1,
        message: message.into(),
    }
}

/// The name tables of `h` within what ids and the format can carry.
fn check_header_bounds(path: &Path, h: &Header) -> Result<()> {
    let names = u16::MAX as usize - 1;
    let most_values = h.attributes.iter().map(|a| a.values.len()).max();
    let checks = [
        ("stages", h.stages.len(), names),
        ("phases", h.phases.len(), names),
        ("attributes", h.attributes.len(), names),
        ("values of one attribute", most_values.unwrap_or(0), names),
        ("value_defs", h.values.len(), MAX_VALUES),
        ("metadata", h.metadata.len(), MAX_METADATA_ENTRIES),
    ];
    for (what, n, most) in checks {
        if n > most {
            return Err(bad_header(
                path,
                format!("the header declares {n} {what}; at most {most} are allowed, so the file is damaged or was not written by looptime"),
            ));
        }
    }
    Ok(())
}

/// The first line of `reader`, at most [`MAX_HEADER_BYTES`] long.
fn read_first_line(path: &Path, reader: &mut impl BufRead) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut raw = Vec::new();
    reader
        .take(MAX_HEADER_BYTES as u64 + 1)
        .read_until(b'\n', &mut raw)
        .map_err(|source| CaptureError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if raw.len() > MAX_HEADER_BYTES && raw.last() != Some(&b'\n') {
        return Err(bad_header(
            path,
            format!("the header line is longer than {MAX_HEADER_BYTES} bytes; a looptime header is a few kilobytes, so the file is damaged or not evidence"),
        ));
    }
    Ok(raw)
}

/// The header line as text, without a byte-order mark or line ending
/// (each noted).
fn header_text<'a>(path: &Path, raw: &'a [u8]) -> Result<(&'a str, HeaderNotes)> {
    let mut notes = HeaderNotes::default();
    let mut line: &[u8] = raw;
    if let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF") {
        notes.bom = true;
        line = rest;
    }
    if let Some(rest) = line.strip_suffix(b"\n") {
        line = rest;
        if let Some(rest) = line.strip_suffix(b"\r") {
            notes.crlf = true;
            line = rest;
        }
    }
    let first = std::str::from_utf8(line).map_err(|e| {
        bad_header(
            path,
            format!(
                "the header is not valid UTF-8 (byte {} of the line); evidence is UTF-8 JSON, so the file is damaged",
                e.valid_up_to() + 1
            ),
        )
    })?;
    if first.trim().is_empty() {
        return Err(CaptureError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok((first, notes))
}

/// Check the kind and version before the full header, so that a file
/// without its header, or a future schema, gets a message that says so,
/// not a confusing missing-field error.
fn probe_header(path: &Path, first: &str) -> Result<()> {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(rename = "type")]
        kind: Option<String>,
        schema_version: Option<u32>,
    }
    let probe: Probe = serde_json::from_str(first).map_err(|e| {
        bad_header(
            path,
            format!(
                "the header: {}; is this a control_timing.jsonl? Its first line is the header the recorder wrote: restore the file as it was written, or record the run again",
                crate::json_error::describe::<Probe>(first.as_bytes(), &e)
            ),
        )
    })?;
    if probe.kind.as_deref() == Some("cycle") {
        return Err(bad_header(
            path,
            "line 1 is a cycle record, not the header: the header line (type \"header\", with schema_version and the stage and phase tables) is missing, and the cycles cannot be read without it; was the file cut at the front or assembled by hand?",
        ));
    }
    match probe.schema_version {
        Some(v) if SUPPORTED_SCHEMA_VERSIONS.contains(&v) => Ok(()),
        None if probe.kind.as_deref() != Some("header") => Err(bad_header(
            path,
            "line 1 is not a looptime header (no \"type\": \"header\" and no schema_version); is this a control_timing.jsonl?",
        )),
        found => Err(CaptureError::UnsupportedSchema {
            path: path.to_path_buf(),
            found,
            supported: SUPPORTED_SCHEMA_VERSIONS,
        }),
    }
}

/// The header line at the start of `reader` (the evidence file `path`
/// names), with every check [`EvidenceReader::open`] makes; `reader` is
/// left at the first cycle line.
///
/// # Errors
/// As [`EvidenceReader::open`], but for opening the file.
pub fn read_header(path: &Path, reader: &mut impl BufRead) -> Result<(Header, HeaderNotes)> {
    let raw = read_first_line(path, reader)?;
    let (first, notes) = match header_text(path, &raw) {
        // A blank first line with more after it is not an empty file: say
        // what is there.
        Err(CaptureError::Empty { .. }) if reader.fill_buf().is_ok_and(|b| !b.is_empty()) => {
            return Err(bad_header(
                path,
                "line 1 is blank, and the file goes on after it: the header must be the file's first line (the recorder writes no blank line); remove the blank line(s) before the header",
            ));
        }
        other => other?,
    };
    probe_header(path, first)?;
    let header: Header = serde_json::from_str(first).map_err(|e| {
        bad_header(
            path,
            format!(
                "the header: {}; the header is written once by the recorder and the cycles cannot be read without it: restore the file as the recorder wrote it (docs/evidence-format.md lists the header's fields), or record the run again",
                crate::json_error::describe::<Header>(first.as_bytes(), &e)
            ),
        )
    })?;
    check_header_bounds(path, &header)?;
    let mut header = header;
    let mut notes = notes;
    // A budget or tolerance above what a recorder declares (a sentinel
    // written through, a hand-edited file) is undeclared: no figure is
    // judged against 2^63 ns, and no arithmetic on it can wrap.
    let limit = crate::MAX_DECLARED_NS;
    if let Some(ns) = header.compute_budget_ns.filter(|&ns| ns > limit) {
        notes.budget_above_limit = Some(ns);
        header.compute_budget_ns = None;
    }
    if let Some(ns) = header.deadline_tolerance_ns.filter(|&ns| ns > limit) {
        notes.tolerance_above_limit = Some(ns);
        header.deadline_tolerance_ns = None;
    }
    Ok((header, notes))
}

impl EvidenceReader {
    /// Opens `path` and parses its header line. A UTF-8 byte-order mark and
    /// a CRLF line ending are accepted and reported in [`notes`](Self::notes).
    ///
    /// # Errors
    /// [`CaptureError::Open`] when the file cannot be opened,
    /// [`CaptureError::Empty`] when it has no header line,
    /// [`CaptureError::BadHeader`] when the first line is over
    /// [`MAX_HEADER_BYTES`], not UTF-8, a cycle instead of the header, or
    /// declares more names than the format allows,
    /// [`CaptureError::Parse`] when the header is not valid, and
    /// [`CaptureError::UnsupportedSchema`] for an unknown `schema_version`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|source| CaptureError::Open {
            path: path.clone(),
            source,
        })?;
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let (header, notes) = read_header(&path, &mut reader)?;
        Ok(Self {
            path,
            lines: reader.lines(),
            line_no: 1,
            header,
            notes,
        })
    }

    /// What the reader accepted about the header line (a byte-order mark,
    /// CRLF endings).
    pub fn notes(&self) -> HeaderNotes {
        self.notes
    }

    /// The parsed header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next raw line with its 1-based line number, or `None` at the end.
    /// Blank lines are skipped.
    ///
    /// # Errors
    /// [`CaptureError::Read`] on an I/O error (including invalid UTF-8).
    pub fn next_line(&mut self) -> Option<Result<(u64, String)>> {
        loop {
            let line = self.lines.next()?;
            self.line_no += 1;
            match line {
                Err(source) => {
                    return Some(Err(CaptureError::Read {
                        path: self.path.clone(),
                        source,
                    }))
                }
                Ok(l) if l.trim().is_empty() => continue,
                Ok(l) => return Some(Ok((self.line_no, l))),
            }
        }
    }

    /// Parses one cycle line.
    ///
    /// # Errors
    /// [`CaptureError::Parse`] naming the file and line.
    pub fn parse_cycle(&self, line_no: u64, line: &str) -> Result<CycleRecord> {
        serde_json::from_str(line).map_err(|source| CaptureError::Parse {
            path: self.path.clone(),
            line: line_no,
            source,
        })
    }

    /// Reads every remaining cycle, failing on the first bad line.
    ///
    /// # Errors
    /// The first read or parse error, with file and line.
    pub fn read_all(mut self) -> Result<(Header, Vec<CycleRecord>)> {
        let mut cycles = Vec::new();
        while let Some(next) = self.next_line() {
            let (no, line) = next?;
            cycles.push(self.parse_cycle(no, &line)?);
        }
        Ok((self.header, cycles))
    }
}

/// Reads and parses `control_timing_summary.json`.
///
/// # Errors
/// [`CaptureError::Open`] when the file is missing, [`CaptureError::Parse`]
/// when it is not a valid summary, [`CaptureError::UnsupportedSchema`] for an
/// unknown version.
pub fn read_summary(path: impl AsRef<Path>) -> Result<Summary> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| CaptureError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    parse_summary(path, &text)
}

/// Parses the text of `control_timing_summary.json` (the file `path` names).
///
/// # Errors
/// As [`read_summary`], but for opening the file.
pub fn parse_summary(path: &Path, text: &str) -> Result<Summary> {
    let path = path.to_path_buf();
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|source| CaptureError::Parse {
            path: path.clone(),
            line: 1,
            source,
        })?;
    let found = value
        .get("schema_version")
        .and_then(|v| v.as_u64())
        .map(|v| v as u32);
    if !found.is_some_and(|v| SUPPORTED_SCHEMA_VERSIONS.contains(&v)) {
        return Err(CaptureError::UnsupportedSchema {
            path,
            found,
            supported: SUPPORTED_SCHEMA_VERSIONS,
        });
    }
    serde_json::from_value(value).map_err(|source| CaptureError::Parse {
        path,
        line: 1,
        source,
    })
}
