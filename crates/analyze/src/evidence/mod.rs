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
use looptime_capture::{
    CaptureError, CycleRecord, EvidenceReader, Header, HeaderNotes, Summary, ValueKind,
};
use polars::prelude::{Column, DataFrame};
use rayon::prelude::*;
use std::collections::BTreeMap;

use crate::error::{AnalyzeError, Result};

/// Durations above this are rejected as absurd (one hour, in ns).
pub const ABSURD_DURATION_NS: i64 = 3_600_000_000_000;
/// Block size of the reader.
const BLOCK_BYTES: usize = 16 << 20;
/// Inputs larger than this show a progress bar when stderr is a terminal.
const PROGRESS_MIN_BYTES: u64 = 64 << 20;
/// Attributes kept per span.
pub const MAX_ATTRS: usize = looptime_capture::MAX_ATTRS_PER_SPAN;

/// How to treat bad lines.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Skip corrupt or inconsistent lines (counted) instead of failing.
    pub lenient: bool,
    /// Show a progress bar for large inputs when stderr is a terminal.
    pub progress: bool,
    /// The stage whose span starts are command submissions.
    pub command_stage: String,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            lenient: false,
            progress: false,
            command_stage: "robot_send_command".into(),
        }
    }
}

/// One caller value of one cycle. Integers stay exact 64-bit integers from
/// the file to the report; only their mean is a float.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    /// The cycle did not set the value.
    Unset,
    /// An `int` value.
    Int(i64),
    /// A `float` value.
    Float(f64),
}

/// A temporary file of an interrupted finish found in the episode directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftoverTemp {
    /// Its file name (`.control_timing.jsonl.<pid>.tmp`).
    pub name: String,
    /// The file it was to become.
    pub target: String,
    /// The pid of the process that was writing it.
    pub pid: u32,
    /// Its size.
    pub bytes: u64,
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
    /// Spans stored in this cycle.
    pub n_spans: u32,
    /// Row of this cycle's first span in [`Evidence::spans`]; its spans are
    /// rows `span_row .. span_row + n_spans`.
    pub span_row: u64,
    /// First of this cycle's rows in its piece's span columns (internal).
    span_start: u32,
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

/// What one stage-report group is: recorded once, the first time its key is
/// seen. The key folds in the phase, the tree path and the attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDecode {
    /// The key in the span table's `key` column.
    pub key: u64,
    /// Index into `Header::phases`.
    pub phase: u32,
    /// Index into `Header::stages`.
    pub stage: u32,
    /// Nesting depth.
    pub depth: u32,
    /// Stage names from the top-level ancestor down, `/`-joined.
    pub path: String,
    /// Attributes, by key.
    pub attrs: BTreeMap<String, String>,
    /// Path keys from the top-level ancestor down to this span.
    pub chain: Vec<u64>,
}

/// Identity hasher for keys that are already well mixed.
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);
impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}
type KeySet = std::collections::HashSet<u64, std::hash::BuildHasherDefault<KeyHasher>>;

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
    /// Caller values, `cycles.len() × header.values.len()`, row-major.
    pub values: Vec<Cell>,
    /// The span table: `key` (u64, see [`GroupDecode`]), `stage` (u32),
    /// `wall_ns` (i64), `cpu_ns` (i64, −1 when not measured); one chunk per
    /// parsed piece, never copied.
    pub spans: DataFrame,
    /// Stage-report groups in order of first appearance.
    pub groups: Vec<GroupDecode>,
    /// Command-stage spans: (row in `cycles`, span start).
    pub commands: Vec<(u32, i64)>,
    /// Lines skipped in lenient mode.
    pub skipped_lines: u64,
    /// The first skipped lines and why.
    pub skipped_examples: Vec<String>,
    /// The last line was cut off (an abrupt end).
    pub truncated_last_line: bool,
    /// Blank lines between records, skipped.
    pub blank_lines: u64,
    /// What the header reader accepted (a byte-order mark, CRLF endings).
    pub header_notes: HeaderNotes,
    /// Temporary files an interrupted finish left in the directory.
    pub leftover_temps: Vec<LeftoverTemp>,
    /// Size of the JSONL.
    pub bytes: u64,
}

struct Tables<'a> {
    header: &'a Header,
    command_stage: Option<u32>,
    /// Targets may be subtracted from start and wake times.
    comparable: bool,
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

/// A signed offset between two timestamps of one clock (lag, overshoot):
/// more than an hour either way means the target is not on that clock.
fn check_offset(what: &str, d: i64) -> std::result::Result<(), String> {
    if d.unsigned_abs() > ABSURD_DURATION_NS as u64 {
        return Err(format!(
            "{what} is {d} ns, absurd (more than an hour): target_ns cannot be on the clock the header names for it"
        ));
    }
    Ok(())
}

/// A caller value as its declared kind. `int` values must be integers in
/// the signed 64-bit range the recorder writes (−2⁶³ … 2⁶³−1); a larger
/// one (only another producer could write it) is refused, never rounded.
fn cell(kind: &ValueKind, name: &str, v: &serde_json::Number) -> std::result::Result<Cell, String> {
    match kind {
        ValueKind::Int => match v.as_i64() {
            Some(i) => Ok(Cell::Int(i)),
            None if v.is_u64() => Err(format!(
                "value `{name}` = {v} is beyond the int range (−2^63 to 2^63−1) that the format's int values have"
            )),
            None => Err(format!(
                "value `{name}` is declared int but holds {v}"
            )),
        },
        ValueKind::Float => Ok(v.as_f64().map_or(Cell::Unset, Cell::Float)),
    }
}

fn ns(field: &'static str, v: u64) -> std::result::Result<i64, String> {
    i64::try_from(v).map_err(|_| format!("`{field}` = {v} is beyond any clock this format uses"))
}

#[derive(Default)]
struct Piece {
    cycles: Vec<CycleRow>,
    values: Vec<Cell>,
    blank_lines: u64,
    key: Vec<u64>,
    stage: Vec<u32>,
    wall: Vec<i64>,
    cpu: Vec<i64>,
    groups: Vec<GroupDecode>,
    seen: KeySet,
    last_keys: Vec<u64>,
    last_stages: Vec<u32>,
    path_keys: Vec<u64>,
    /// (row in this piece's cycles, start).
    commands: Vec<(u32, i64)>,
    /// (line, message) of bad lines, in order.
    bad: Vec<(u64, String)>,
}

impl Piece {
    fn truncate_spans(&mut self, n: usize, groups: usize, commands: usize) {
        self.key.truncate(n);
        self.stage.truncate(n);
        self.wall.truncate(n);
        self.cpu.truncate(n);
        for g in self.groups.drain(groups..) {
            self.seen.remove(&g.key);
        }
        self.commands.truncate(commands);
    }
}

/// Convert one parsed record into the piece, checking what a single line
/// can violate. On error nothing of the line stays in the piece.
fn convert(
    t: &Tables,
    rec: &CycleRecord,
    line: u64,
    p: &mut Piece,
) -> std::result::Result<(), String> {
    let marks = (p.key.len(), p.groups.len(), p.commands.len());
    let r = convert_inner(t, rec, line, p);
    if r.is_err() {
        p.truncate_spans(marks.0, marks.1, marks.2);
    }
    r
}

fn convert_inner(
    t: &Tables,
    rec: &CycleRecord,
    line: u64,
    p: &mut Piece,
) -> std::result::Result<(), String> {
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
    if let Some(t_ns) = rec.target_ns.filter(|_| t.comparable) {
        let t_ns = ns("target_ns", t_ns)?;
        check_offset("deadline lag (start_ns − target_ns)", start - t_ns)?;
        if let Some(w) = wake.filter(|_| !rec.overdue) {
            check_offset("sleep overshoot (wake_ns − target_ns)", w - t_ns)?;
        }
    }
    let most_spans = t.header.capacity.max_spans_per_cycle as usize;
    if rec.spans.len() > most_spans {
        return Err(format!(
            "the cycle holds {} spans but the header's capacity.max_spans_per_cycle is {most_spans}: the recorder stores at most that many and counts the rest in spans_dropped, so the line was not written by it as declared",
            rec.spans.len()
        ));
    }
    let nv = t.header.values.len();
    let mut values = [Cell::Unset; looptime_capture::MAX_VALUES];
    for (name, v) in &rec.values {
        let i = t
            .value(name)
            .ok_or_else(|| format!("value `{name}` is not declared in the header"))?;
        values[i] = cell(&t.header.values[i].kind, name, v)?;
    }
    let span_start = p.key.len() as u32;
    let row = p.cycles.len() as u32;
    p.path_keys.clear();
    for (i, s) in rec.spans.iter().enumerate() {
        // The stage at this position in the previous cycle is checked first.
        let cached = p.last_stages.get(i).copied().filter(|&c| {
            t.header
                .stages
                .get(c as usize)
                .is_some_and(|st| st.name == s.stage)
        });
        let stage = match cached {
            Some(c) => c,
            None => t.stage(&s.stage).ok_or_else(|| {
                format!(
                    "span {i}: stage `{}` is not declared in the header",
                    s.stage
                )
            })?,
        };
        if i < p.last_stages.len() {
            p.last_stages[i] = stage;
        } else {
            p.last_stages.push(stage);
        }
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
        let parent_path = match s.parent {
            Some(pi) if (pi as usize) < i => p.path_keys[pi as usize],
            Some(pi) => return Err(format!("span {i}: parent {pi} does not come before it")),
            None => ROOT_PATH_KEY,
        };
        let path_key = mix(parent_path, stage as u64 + 1);
        p.path_keys.push(path_key);
        let mut attr_key = 0u64;
        // `attrs` is a sorted map, so the key does not depend on set order.
        for (k, v) in s.attrs.iter().take(MAX_ATTRS) {
            let (ak, av) = t.attr(k, v).ok_or_else(|| {
                format!("span {i}: attribute `{k}={v}` is not declared in the header")
            })?;
            attr_key = mix(attr_key, ((ak as u64) << 16 | av as u64) + 1);
        }
        let key = mix(mix(path_key, attr_key), phase as u64 + 1);
        // Most cycles repeat the previous one's structure: skip the set then.
        let known = p.last_keys.get(i) == Some(&key) || p.seen.contains(&key);
        if !known {
            p.seen.insert(key);
            let mut chain = Vec::new();
            let mut names = Vec::new();
            let mut j = Some(i);
            while let Some(k) = j {
                chain.push(p.path_keys[k]);
                names.push(rec.spans[k].stage.as_str());
                j = rec.spans[k].parent.map(|x| x as usize);
            }
            chain.reverse();
            names.reverse();
            p.groups.push(GroupDecode {
                key,
                phase,
                stage,
                depth: s.depth,
                path: names.join("/"),
                attrs: s.attrs.clone(),
                chain,
            });
        }
        if i < p.last_keys.len() {
            p.last_keys[i] = key;
        } else {
            p.last_keys.push(key);
        }
        if t.command_stage == Some(stage) {
            p.commands.push((row, ns("start_ns", s.start_ns)?));
        } else {
            ns("start_ns", s.start_ns)?;
        }
        p.key.push(key);
        p.stage.push(stage);
        p.wall.push(wall);
        p.cpu.push(cpu.unwrap_or(-1));
    }
    p.values.extend_from_slice(&values[..nv]);
    p.cycles.push(CycleRow {
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
        n_spans: rec.spans.len() as u32,
        span_row: 0,
        span_start,
    });
    Ok(())
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

fn parse_piece(t: &Tables, text: &[u8], first_line: u64) -> Piece {
    let mut p = Piece::default();
    // Validate UTF-8 once for the piece (SIMD), then parse lines from `&str`
    // so serde does not re-validate every string. Invalid UTF-8 falls back
    // to byte parsing, which names the bad line.
    let as_str = std::str::from_utf8(text).ok();
    let mut from = 0usize;
    let mut i = 0u64;
    while from < text.len() {
        let to = memchr::memchr(b'\n', &text[from..]).map_or(text.len(), |q| from + q);
        let line = first_line + i;
        i += 1;
        let parsed = match as_str {
            Some(st) => {
                let raw = st[from..to].trim_ascii();
                (!raw.is_empty()).then(|| {
                    serde_json::from_str::<CycleRecord>(raw)
                        .map_err(|e| describe(raw.as_bytes(), &e))
                })
            }
            None => {
                let raw = text[from..to].trim_ascii();
                (!raw.is_empty()).then(|| {
                    serde_json::from_slice::<CycleRecord>(raw).map_err(|e| describe(raw, &e))
                })
            }
        };
        from = to + 1;
        match parsed {
            None => p.blank_lines += 1,
            Some(Err(msg)) => p.bad.push((line, msg)),
            Some(Ok(rec)) => {
                if let Err(msg) = convert(t, &rec, line, &mut p) {
                    p.bad.push((line, msg));
                }
            }
        }
    }
    p
}

/// Split `block` (whole lines) into about `n` pieces at line boundaries;
/// returns (piece, number of the piece's first line relative to the block).
fn split_lines(block: &[u8], n: usize) -> (Vec<(&[u8], u64)>, u64) {
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
    (out, line)
}

/// A one-line progress bar, redrawn with `\r` each time the whole percentage
/// changes. `out` is `None` when no bar is wanted.
struct Progress<W: Write> {
    out: Option<W>,
    total: u64,
    last_pct: u64,
}

impl<W: Write> Progress<W> {
    fn new(out: Option<W>, total: u64) -> Self {
        Progress {
            out: out.filter(|_| total > 0),
            total,
            last_pct: u64::MAX,
        }
    }

    fn tick(&mut self, done: u64) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let pct = done.min(self.total) * 100 / self.total;
        if pct != self.last_pct {
            self.last_pct = pct;
            let width = 30;
            let filled = (pct as usize * width) / 100;
            let _ = write!(
                out,
                "\rreading {CYCLES_FILE} [{}{}] {pct:>3}% ({} of {} MB)",
                "#".repeat(filled),
                " ".repeat(width - filled),
                done.min(self.total) >> 20,
                self.total >> 20
            );
            let _ = out.flush();
        }
    }

    fn done(&mut self) {
        if let Some(out) = self.out.as_mut() {
            let _ = writeln!(out);
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
    let leftover_temps = leftover_temps(dir);
    if !path.exists() {
        return Err(AnalyzeError::MissingCycles {
            why: why_no_cycles(dir, &leftover_temps),
            path,
        });
    }
    let reader = EvidenceReader::open(&path)?;
    let header = reader.header().clone();
    let header_notes = reader.notes();
    drop(reader);
    let tables = Tables {
        header: &header,
        command_stage: header
            .stages
            .iter()
            .position(|s| s.name == opts.command_stage)
            .map(|i| i as u32),
        comparable: header.clocks.schedule_comparable(),
    };

    let mut file = File::open(&path).map_err(|source| CaptureError::Open {
        path: path.clone(),
        source,
    })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let show = opts.progress && bytes >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal();
    let mut progress = Progress::new(show.then(std::io::stderr), bytes);
    let threads = rayon::current_num_threads().max(1);
    let mut ev = Evidence {
        dir: dir.to_path_buf(),
        header: header.clone(),
        summary: None,
        summary_problem: None,
        manifest: None,
        cycles: Vec::new(),
        values: Vec::new(),
        spans: empty_spans()?,
        groups: Vec::new(),
        commands: Vec::new(),
        skipped_lines: 0,
        skipped_examples: Vec::new(),
        truncated_last_line: false,
        blank_lines: 0,
        header_notes,
        leftover_temps,
        bytes,
    };
    let mut seen_groups = KeySet::default();

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
        }
        let (pieces, block_lines) = split_lines(block, threads * 2);
        let parsed: Vec<Piece> = pieces
            .par_iter()
            .map(|(text, rel)| parse_piece(&tables, text, next_line + rel))
            .collect();
        next_line += block_lines;
        let last_line_no = if ends_with_newline {
            next_line - 1
        } else {
            next_line
        };
        for piece in parsed {
            append(
                &mut ev,
                &mut seen_groups,
                piece,
                &path,
                &opts,
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
    // One chunk per column: the aggregations then never gather across chunks.
    ev.spans.rechunk_mut_par();

    let summary_path = dir.join(SUMMARY_FILE);
    if summary_path.exists() {
        match read_summary(&summary_path) {
            Ok(s) => ev.summary = Some(s),
            Err(e) => ev.summary_problem = Some(looptime_capture::error_chain(&e)),
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

/// The temporaries (`.<name>.<pid>.tmp`) in `dir`, sorted by name.
fn leftover_temps(dir: &Path) -> Vec<LeftoverTemp> {
    let mut out: Vec<LeftoverTemp> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let (target, pid) = looptime_capture::parse_temp_name(&name)?;
            Some(LeftoverTemp {
                target: target.to_string(),
                pid,
                bytes: e.metadata().map_or(0, |m| m.len()),
                name,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Why an episode directory has no JSONL, as far as what is there tells.
fn why_no_cycles(dir: &Path, temps: &[LeftoverTemp]) -> String {
    if dir.join(SUMMARY_FILE).exists() {
        return "a summary exists without it, so the episode is damaged (the JSONL was moved or deleted)".into();
    }
    if let Some(t) = temps.iter().find(|t| t.target == CYCLES_FILE) {
        return format!(
            "the finish was interrupted while writing it: {} ({} bytes) is left by process {}, which most likely died (kill -9, crash, OOM kill) mid-write; the cycles cannot be recovered from a partial temporary",
            t.name, t.bytes, t.pid
        );
    }
    let manifest = std::fs::read_to_string(dir.join("manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let timing = manifest
        .as_ref()
        .and_then(|m| m.pointer("/config/run/control_timing"))
        .and_then(|v| v.as_bool());
    match timing {
        Some(false) => "the manifest says the run was recorded without --control-timing (run.control_timing = false), so no timing evidence was written".into(),
        _ => "the directory holds no evidence: the process most likely died (kill -9, crash, OOM kill) before its finish, since the recorder keeps cycles in memory until the finish writes them".into(),
    }
}

fn empty_spans() -> Result<DataFrame> {
    Ok(DataFrame::new_infer_height(vec![
        Column::new("key".into(), Vec::<u64>::new()),
        Column::new("stage".into(), Vec::<u32>::new()),
        Column::new("wall_ns".into(), Vec::<i64>::new()),
        Column::new("cpu_ns".into(), Vec::<i64>::new()),
    ])?)
}

#[allow(clippy::too_many_arguments)]
fn append(
    ev: &mut Evidence,
    seen_groups: &mut KeySet,
    mut piece: Piece,
    path: &Path,
    opts: &LoadOptions,
    unterminated_tail: bool,
    last_line_no: u64,
    prev: &mut Option<(u64, i64)>,
) -> Result<()> {
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
    let mut bad = std::mem::take(&mut piece.bad).into_iter().peekable();
    let nv = ev.header.values.len();
    ev.blank_lines += piece.blank_lines;
    let mut span_row = ev.spans.height() as u64;
    let mut kept: Vec<bool> = Vec::with_capacity(piece.cycles.len());
    let mut new_rows: Vec<u32> = Vec::with_capacity(piece.cycles.len());
    for (k, row) in piece.cycles.iter().enumerate() {
        while let Some((line, _)) = bad.peek() {
            if *line > row.line {
                break;
            }
            let (line, msg) = bad.next().unwrap_or_default();
            reject(ev, line, msg)?;
        }
        let problem = match *prev {
            Some((pc, _)) if row.cycle == pc => Some(format!(
                "cycle index {} appears twice (duplicate)",
                row.cycle
            )),
            Some((pc, _)) if row.cycle < pc => Some(format!(
                "cycle index {} comes after {pc}: indices must increase",
                row.cycle
            )),
            Some((_, ps)) if row.start_ns < ps => Some(format!(
                "start_ns {} is before the previous cycle's {ps}: cycle starts must not go back",
                row.start_ns
            )),
            _ => None,
        };
        if let Some(msg) = problem {
            reject(ev, row.line, msg)?;
            kept.push(false);
            new_rows.push(u32::MAX);
            continue;
        }
        *prev = Some((row.cycle, row.start_ns));
        new_rows.push(ev.cycles.len() as u32);
        ev.cycles.push(CycleRow { span_row, ..*row });
        span_row += row.n_spans as u64;
        ev.values
            .extend_from_slice(&piece.values[k * nv..(k + 1) * nv]);
        kept.push(true);
    }
    for (line, msg) in bad {
        reject(ev, line, msg)?;
    }
    for (row, start) in &piece.commands {
        let r = new_rows[*row as usize];
        if r != u32::MAX {
            ev.commands.push((r, *start));
        }
    }
    for g in piece.groups {
        if seen_groups.insert(g.key) {
            ev.groups.push(g);
        }
    }
    // The span columns: the whole piece as one chunk, or (after a lenient
    // rejection, rare) only the spans of the kept cycles.
    let (key, stage, wall, cpu) = if kept.iter().all(|&k| k) {
        (piece.key, piece.stage, piece.wall, piece.cpu)
    } else {
        let (mut a, mut b, mut c, mut d) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (row, keep) in piece.cycles.iter().zip(&kept) {
            if *keep {
                let r = row.span_start as usize..(row.span_start + row.n_spans) as usize;
                a.extend_from_slice(&piece.key[r.clone()]);
                b.extend_from_slice(&piece.stage[r.clone()]);
                c.extend_from_slice(&piece.wall[r.clone()]);
                d.extend_from_slice(&piece.cpu[r]);
            }
        }
        (a, b, c, d)
    };
    if !key.is_empty() {
        let df = DataFrame::new_infer_height(vec![
            Column::new("key".into(), key),
            Column::new("stage".into(), stage),
            Column::new("wall_ns".into(), wall),
            Column::new("cpu_ns".into(), cpu),
        ])?;
        ev.spans.vstack_mut_owned(df)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Progress;

    fn frames(out: &[u8]) -> Vec<String> {
        String::from_utf8(out.to_vec())
            .unwrap()
            .split('\r')
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn progress_redraws_once_per_percent_and_ends_the_line() {
        // 200 MiB in all; ticks at 0, 1 MiB, 1.5 MiB, 100 MiB and 200 MiB.
        // 1 MiB and 1.5 MiB are both 0% (integer percent of 200 MiB), so they
        // draw nothing new; 100 MiB is 50% (15 of 30 cells), 200 MiB is 100%.
        let total = 200u64 << 20;
        let mut p = Progress::new(Some(Vec::new()), total);
        for done in [0, 1 << 20, 3 << 19, 100 << 20, total] {
            p.tick(done);
        }
        p.done();
        let out = p.out.take().unwrap();
        let f = frames(&out);
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(f[0].contains(&format!("[{}]   0% (0 of 200 MB)", " ".repeat(30))));
        assert!(f[1].contains(&format!(
            "[{}{}]  50% (100 of 200 MB)",
            "#".repeat(15),
            " ".repeat(15)
        )));
        assert!(f[2].ends_with(&format!("[{}] 100% (200 of 200 MB)\n", "#".repeat(30))));
    }

    #[test]
    fn progress_off_or_empty_input_writes_nothing() {
        let mut off: Progress<Vec<u8>> = Progress::new(None, 1 << 30);
        off.tick(1 << 29);
        off.done();
        assert!(off.out.is_none());
        // A zero-byte file: no division by zero and no bar.
        let mut empty = Progress::new(Some(Vec::new()), 0);
        empty.tick(0);
        empty.done();
        assert!(empty.out.is_none());
    }
}
