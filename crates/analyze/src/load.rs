//! Reading an episode directory: the JSONL (required), the summary and the
//! manifest (optional), with every check that turns bad input into an error
//! naming the file and line instead of a panic.
//!
//! The JSONL is read in blocks; the lines of each block are parsed into the
//! capture schema types on all cores, then appended in file order, which is
//! where ordering rules (monotonic starts, unique cycle indices) are checked.

use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use looptime_capture::format::{read_summary, CYCLES_FILE, SUMMARY_FILE};
use looptime_capture::{CaptureError, CycleRecord, EvidenceReader, Header, Summary};
use rayon::prelude::*;

use crate::error::{AnalyzeError, Result};

/// Durations above this are rejected as absurd (one hour, in ns).
pub const ABSURD_DURATION_NS: i64 = 3_600_000_000_000;
/// Block size of the reader.
const BLOCK_BYTES: usize = 8 << 20;
/// Inputs larger than this show a progress bar when stderr is a terminal.
const PROGRESS_MIN_BYTES: u64 = 64 << 20;
/// Attributes kept per span.
pub const MAX_ATTRS: usize = looptime_capture::MAX_ATTRS_PER_SPAN;

/// How to treat bad lines.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions {
    /// Skip corrupt or inconsistent lines (counted) instead of failing.
    pub lenient: bool,
    /// Show a progress bar for large inputs when stderr is a terminal.
    pub progress: bool,
}

/// One cycle, compact.
#[derive(Clone, Copy, Debug)]
pub struct CycleRow {
    /// 1-based line in the JSONL.
    pub line: u64,
    /// Cycle index.
    pub cycle: u64,
    /// Index into `Header::phases`.
    pub phase: u32,
    /// Start of work.
    pub start_ns: i64,
    /// End of work.
    pub end_ns: Option<i64>,
    /// Release point.
    pub target_ns: Option<i64>,
    /// Wait start.
    pub sleep_start_ns: Option<i64>,
    /// Wait end.
    pub wake_ns: Option<i64>,
    /// Release point had passed.
    pub overdue: bool,
    /// Skipped release points.
    pub skipped: u32,
    /// Spans dropped in this cycle.
    pub spans_dropped: u32,
    /// Caller values by `Header::values` index.
    pub values: [Option<f64>; looptime_capture::MAX_VALUES],
    /// First span in `Evidence::spans`.
    pub span_start: u32,
    /// Number of spans.
    pub span_len: u32,
}

/// One span, compact.
#[derive(Clone, Copy, Debug)]
pub struct SpanRow {
    /// Index into `Header::stages`.
    pub stage: u32,
    /// Nesting depth.
    pub depth: u32,
    /// Parent index within the cycle.
    pub parent: Option<u32>,
    /// Open time.
    pub start_ns: i64,
    /// Wall duration.
    pub wall_ns: i64,
    /// CPU duration.
    pub cpu_ns: Option<i64>,
    /// (attribute key index, value index) pairs; `u16::MAX` key = empty.
    pub attrs: [(u16, u16); MAX_ATTRS],
    /// Identity of the span's tree path (its ancestors' stages and its own).
    pub path_key: u64,
    /// Identity of (tree path, attribute set): the stage report's group.
    pub group_key: u64,
}

/// A 64-bit mix (SplitMix64 finaliser) used to build path and group keys.
#[inline]
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The path key of a top-level span's (non-existent) parent.
pub const ROOT_PATH_KEY: u64 = 0x6C6F_6F70_7469_6D65;

/// Everything read from an episode directory.
#[derive(Debug)]
pub struct Evidence {
    /// The episode directory.
    pub dir: PathBuf,
    /// JSONL header.
    pub header: Header,
    /// The summary, when present and readable.
    pub summary: Option<Summary>,
    /// Why the summary could not be used, when it is present but bad.
    pub summary_problem: Option<String>,
    /// `manifest.json`, when present.
    pub manifest: Option<serde_json::Value>,
    /// Cycles in file order.
    pub cycles: Vec<CycleRow>,
    /// Spans of all cycles.
    pub spans: Vec<SpanRow>,
    /// Lines skipped in lenient mode, with the reason of the first few.
    pub skipped_lines: u64,
    /// The first skipped lines and why.
    pub skipped_examples: Vec<String>,
    /// The last line was cut off (an abrupt end).
    pub truncated_last_line: bool,
    /// Size of the JSONL.
    pub bytes: u64,
}

struct Tables<'a> {
    header: &'a Header,
}

impl Tables<'_> {
    fn phase(&self, name: &str) -> Option<u32> {
        self.header
            .phases
            .iter()
            .position(|p| p == name)
            .map(|i| i as u32)
    }
    fn stage(&self, name: &str) -> Option<u32> {
        self.header
            .stages
            .iter()
            .position(|s| s.name == name)
            .map(|i| i as u32)
    }
    fn attr(&self, key: &str, value: &str) -> Option<(u16, u16)> {
        let k = self.header.attributes.iter().position(|a| a.key == key)?;
        let v = self.header.attributes[k]
            .values
            .iter()
            .position(|x| x == value)?;
        Some((k as u16, v as u16))
    }
    fn value(&self, name: &str) -> Option<usize> {
        self.header.values.iter().position(|v| v.name == name)
    }
}

fn ns(field: &'static str, v: u64) -> std::result::Result<i64, String> {
    i64::try_from(v).map_err(|_| format!("`{field}` = {v} is beyond any clock this format uses"))
}

/// Convert one parsed record, checking what a single line can violate.
fn convert(
    t: &Tables,
    rec: &CycleRecord,
    line: u64,
    spans: &mut Vec<SpanRow>,
) -> std::result::Result<CycleRow, String> {
    let phase = t
        .phase(&rec.phase)
        .ok_or_else(|| format!("phase `{}` is not declared in the header", rec.phase))?;
    let start = ns("start_ns", rec.start_ns)?;
    let opt = |f: &'static str, v: Option<u64>| v.map(|x| ns(f, x)).transpose();
    let end = opt("end_ns", rec.end_ns)?;
    let sleep = opt("sleep_start_ns", rec.sleep_start_ns)?;
    let wake = opt("wake_ns", rec.wake_ns)?;
    if let Some(e) = end {
        let work = e - start;
        if work < 0 {
            return Err(format!(
                "end_ns ({e}) is before start_ns ({start}): a negative work duration"
            ));
        }
        if work > ABSURD_DURATION_NS {
            return Err(format!(
                "work duration {work} ns is absurd (more than an hour)"
            ));
        }
    }
    if let (Some(s), Some(w)) = (sleep, wake) {
        if w < s {
            return Err(format!(
                "wake_ns ({w}) is before sleep_start_ns ({s}): a negative wait"
            ));
        }
        if w - s > ABSURD_DURATION_NS {
            return Err(format!(
                "wait of {} ns is absurd (more than an hour)",
                w - s
            ));
        }
    }
    let mut values = [None; looptime_capture::MAX_VALUES];
    for (name, v) in &rec.values {
        let i = t
            .value(name)
            .ok_or_else(|| format!("value `{name}` is not declared in the header"))?;
        values[i] = v.as_f64();
    }
    let span_start = spans.len() as u32;
    for (i, s) in rec.spans.iter().enumerate() {
        let stage = t.stage(&s.stage).ok_or_else(|| {
            format!(
                "span {i}: stage `{}` is not declared in the header",
                s.stage
            )
        })?;
        let wall = ns("wall_ns", s.wall_ns)?;
        if wall > ABSURD_DURATION_NS {
            return Err(format!(
                "span {i} ({}): wall_ns {wall} is absurd (more than an hour)",
                s.stage
            ));
        }
        let cpu = s.cpu_ns.map(|c| ns("cpu_ns", c)).transpose()?;
        if cpu.is_some_and(|c| c > ABSURD_DURATION_NS) {
            return Err(format!(
                "span {i} ({}): cpu_ns is absurd (more than an hour)",
                s.stage
            ));
        }
        if let Some(p) = s.parent {
            if p as usize >= i {
                return Err(format!("span {i}: parent {p} does not come before it"));
            }
        }
        let mut attrs = [(u16::MAX, 0u16); MAX_ATTRS];
        let mut attr_key = 0u64;
        // `attrs` is a sorted map, so the key does not depend on set order.
        for (j, (k, v)) in s.attrs.iter().enumerate().take(MAX_ATTRS) {
            attrs[j] = t.attr(k, v).ok_or_else(|| {
                format!("span {i}: attribute `{k}={v}` is not declared in the header")
            })?;
            attr_key = mix(
                attr_key,
                ((attrs[j].0 as u64) << 16 | attrs[j].1 as u64) + 1,
            );
        }
        let parent_path = match s.parent {
            Some(p) => spans[span_start as usize + p as usize].path_key,
            None => ROOT_PATH_KEY,
        };
        let path_key = mix(parent_path, stage as u64 + 1);
        spans.push(SpanRow {
            path_key,
            group_key: mix(path_key, attr_key),
            stage,
            depth: s.depth,
            parent: s.parent,
            start_ns: ns("start_ns", s.start_ns)?,
            wall_ns: wall,
            cpu_ns: cpu,
            attrs,
        });
    }
    Ok(CycleRow {
        line,
        cycle: rec.cycle,
        phase,
        start_ns: start,
        end_ns: end,
        target_ns: opt("target_ns", rec.target_ns)?,
        sleep_start_ns: sleep,
        wake_ns: wake,
        overdue: rec.overdue,
        skipped: rec.skipped,
        spans_dropped: rec.spans_dropped,
        values,
        span_start,
        span_len: rec.spans.len() as u32,
    })
}

/// A serde error restated with the field path (re-parsed on the error path
/// only) and the column, instead of serde's "line 1" of a single line.
fn describe(line: &[u8], e: &serde_json::Error) -> String {
    let mut de = serde_json::Deserializer::from_slice(line);
    let inner = match serde_path_to_error::deserialize::<_, CycleRecord>(&mut de) {
        Err(pe) => {
            let path = pe.path().to_string();
            let msg = pe.into_inner().to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
            if path.is_empty() || path == "." {
                msg
            } else {
                format!("field `{path}`: {msg}")
            }
        }
        Ok(_) => e.to_string(),
    };
    match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("not valid JSON at column {}: {inner}", e.column())
        }
        _ => format!("{inner} (column {})", e.column()),
    }
}

struct Piece {
    cycles: Vec<CycleRow>,
    spans: Vec<SpanRow>,
    /// (line, message) of bad lines, in order.
    bad: Vec<(u64, String)>,
}

fn parse_piece(t: &Tables, text: &[u8], first_line: u64) -> Piece {
    let mut p = Piece {
        cycles: Vec::new(),
        spans: Vec::new(),
        bad: Vec::new(),
    };
    let mut from = 0usize;
    let mut i = 0u64;
    while from < text.len() {
        let to = memchr::memchr(b'\n', &text[from..]).map_or(text.len(), |p| from + p);
        let raw = &text[from..to];
        from = to + 1;
        let line = first_line + i;
        i += 1;
        let trimmed = raw.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        match serde_json::from_slice::<CycleRecord>(trimmed) {
            Err(e) => p.bad.push((line, describe(trimmed, &e))),
            Ok(rec) => {
                let mark = p.spans.len();
                match convert(t, &rec, line, &mut p.spans) {
                    Ok(row) => p.cycles.push(row),
                    Err(msg) => {
                        p.spans.truncate(mark);
                        p.bad.push((line, msg));
                    }
                }
            }
        }
    }
    p
}

/// Split `block` (whole lines) into about `n` pieces at line boundaries;
/// returns (piece, number of the piece's first line relative to the block).
fn split_lines(block: &[u8], n: usize) -> Vec<(&[u8], u64)> {
    let mut out = Vec::with_capacity(n);
    let target = block.len() / n.max(1) + 1;
    let mut start = 0;
    let mut line = 0u64;
    while start < block.len() {
        let mut end = (start + target).min(block.len());
        if end < block.len() && block[end - 1] != b'\n' {
            end = memchr::memchr(b'\n', &block[end..]).map_or(block.len(), |p| end + p + 1);
        }
        let piece = &block[start..end];
        out.push((piece, line));
        line += memchr::memchr_iter(b'\n', piece).count() as u64;
        start = end;
    }
    out
}

struct Progress {
    on: bool,
    total: u64,
    last_pct: u64,
}

impl Progress {
    fn tick(&mut self, done: u64) {
        if !self.on || self.total == 0 {
            return;
        }
        let pct = done * 100 / self.total;
        if pct != self.last_pct {
            self.last_pct = pct;
            let width = 30;
            let filled = (pct as usize * width) / 100;
            let _ = write!(
                std::io::stderr(),
                "\rreading {CYCLES_FILE} [{}{}] {pct:>3}% ({} of {} MB)",
                "#".repeat(filled),
                " ".repeat(width - filled),
                done >> 20,
                self.total >> 20
            );
        }
    }
    fn done(&self) {
        if self.on && self.total > 0 {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// Read an episode directory.
///
/// # Errors
/// [`AnalyzeError`] naming the file (and line) for every unusable input:
/// missing directory or JSONL, empty file, unknown schema version, a corrupt
/// line (unless `lenient`), non-monotonic starts, duplicate cycle indices.
pub fn load_episode(dir: &Path, opts: LoadOptions) -> Result<Evidence> {
    if !dir.exists() {
        return Err(AnalyzeError::MissingDirectory {
            path: dir.to_path_buf(),
        });
    }
    if !dir.is_dir() {
        return Err(AnalyzeError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    let path = dir.join(CYCLES_FILE);
    if !path.exists() {
        return Err(AnalyzeError::MissingCycles {
            path,
            has_summary: dir.join(SUMMARY_FILE).exists(),
        });
    }
    let reader = EvidenceReader::open(&path)?;
    let header = reader.header().clone();
    drop(reader);
    let tables = Tables { header: &header };

    let mut file = File::open(&path).map_err(|source| CaptureError::Open {
        path: path.clone(),
        source,
    })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut progress = Progress {
        on: opts.progress && bytes >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal(),
        total: bytes,
        last_pct: u64::MAX,
    };
    let threads = rayon::current_num_threads().max(1);
    let mut ev = Evidence {
        dir: dir.to_path_buf(),
        header: header.clone(),
        summary: None,
        summary_problem: None,
        manifest: None,
        cycles: Vec::new(),
        spans: Vec::new(),
        skipped_lines: 0,
        skipped_examples: Vec::new(),
        truncated_last_line: false,
        bytes,
    };

    // One reused buffer: `buf[..filled]` holds unparsed bytes. Each round
    // fills it, parses the whole lines in it on all cores, and moves the
    // incomplete tail to the front.
    let mut buf = vec![0u8; BLOCK_BYTES];
    let mut filled = 0usize;
    let mut next_line = 1u64; // line number of buf[0]
    let mut header_skipped = false;
    let mut read_total = 0u64;
    let mut prev: Option<(u64, i64)> = None;
    loop {
        let mut eof = false;
        while filled < buf.len() {
            let n = file
                .read(&mut buf[filled..])
                .map_err(|source| CaptureError::Read {
                    path: path.clone(),
                    source,
                })?;
            if n == 0 {
                eof = true;
                break;
            }
            filled += n;
            read_total += n as u64;
        }
        let mut begin = 0usize;
        if !header_skipped {
            match memchr::memchr(b'\n', &buf[..filled]) {
                Some(p) => {
                    begin = p + 1;
                    next_line = 2;
                    header_skipped = true;
                }
                None if eof => break, // header only, no newline
                None => {
                    let len = buf.len();
                    buf.resize(len * 2, 0); // a header longer than the buffer
                    continue;
                }
            }
        }
        let cut = if eof {
            filled
        } else {
            match memchr::memrchr(b'\n', &buf[begin..filled]) {
                Some(p) => begin + p + 1,
                None => {
                    // One line longer than the buffer: grow and read on.
                    let len = buf.len();
                    buf.resize(len * 2, 0);
                    buf.copy_within(begin..filled, 0);
                    filled -= begin;
                    continue;
                }
            }
        };
        let block = &buf[begin..cut];
        let ends_with_newline = block.last() == Some(&b'\n');
        if ev.cycles.is_empty() && !block.is_empty() {
            // Size the tables from the first block's line length, so they
            // are not regrown (and copied) many times on large inputs.
            let lines = memchr::memchr_iter(b'\n', block).count().max(1) as u64;
            let est = (bytes / (block.len() as u64 / lines).max(1)) as usize + 16;
            ev.cycles.reserve(est);
            ev.spans.reserve(est.saturating_mul(16).min(1 << 31));
        }
        let pieces = split_lines(block, threads * 4);
        let parsed: Vec<Piece> = pieces
            .par_iter()
            .map(|(text, rel)| parse_piece(&tables, text, next_line + rel))
            .collect();
        next_line += memchr::memchr_iter(b'\n', block).count() as u64;
        let last_line_no = if ends_with_newline {
            next_line - 1
        } else {
            next_line
        };
        for piece in parsed {
            append(
                &mut ev,
                piece,
                &path,
                opts,
                eof && !ends_with_newline,
                last_line_no,
                &mut prev,
            )?;
        }
        buf.copy_within(cut..filled, 0);
        filled -= cut;
        progress.tick(read_total);
        if eof {
            break;
        }
    }
    progress.done();

    let summary_path = dir.join(SUMMARY_FILE);
    if summary_path.exists() {
        match read_summary(&summary_path) {
            Ok(s) => ev.summary = Some(s),
            Err(e) => ev.summary_problem = Some(e.to_string()),
        }
    }
    let manifest_path = dir.join("manifest.json");
    if let Ok(text) = std::fs::read_to_string(&manifest_path) {
        match serde_json::from_str(&text) {
            Ok(v) => ev.manifest = Some(v),
            Err(e) => {
                return Err(AnalyzeError::BadManifest {
                    path: manifest_path,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(ev)
}

#[allow(clippy::too_many_arguments)]
fn append(
    ev: &mut Evidence,
    piece: Piece,
    path: &Path,
    opts: LoadOptions,
    unterminated_tail: bool,
    last_line_no: u64,
    prev: &mut Option<(u64, i64)>,
) -> Result<()> {
    let mut bad = piece.bad.into_iter().peekable();
    let reject = |ev: &mut Evidence, line: u64, msg: String| -> Result<()> {
        if unterminated_tail && line == last_line_no {
            ev.truncated_last_line = true;
            return Ok(());
        }
        if opts.lenient {
            ev.skipped_lines += 1;
            if ev.skipped_examples.len() < 5 {
                ev.skipped_examples.push(format!("line {line}: {msg}"));
            }
            Ok(())
        } else {
            Err(AnalyzeError::BadLine {
                path: path.to_path_buf(),
                line,
                message: msg,
            })
        }
    };
    for mut row in piece.cycles {
        while let Some((line, _)) = bad.peek() {
            if *line > row.line {
                break;
            }
            let (line, msg) = bad.next().unwrap_or_default();
            reject(ev, line, msg)?;
        }
        if let Some((pc, ps)) = *prev {
            if row.cycle <= pc {
                let msg = if row.cycle == pc {
                    format!("cycle index {} appears twice (duplicate)", row.cycle)
                } else {
                    format!(
                        "cycle index {} comes after {pc}: indices must increase",
                        row.cycle
                    )
                };
                reject(ev, row.line, msg)?;
                continue;
            }
            if row.start_ns < ps {
                reject(
                    ev,
                    row.line,
                    format!("start_ns {} is before the previous cycle's {ps}: cycle starts must not go back", row.start_ns),
                )?;
                continue;
            }
        }
        let base = ev.spans.len() as u32;
        let from = row.span_start as usize;
        ev.spans
            .extend_from_slice(&piece.spans[from..from + row.span_len as usize]);
        row.span_start = base;
        *prev = Some((row.cycle, row.start_ns));
        ev.cycles.push(row);
    }
    for (line, msg) in bad {
        reject(ev, line, msg)?;
    }
    Ok(())
}
