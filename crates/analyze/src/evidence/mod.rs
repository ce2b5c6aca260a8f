//! Reading an episode directory: the JSONL (required), the summary and the
//! manifest (optional), with every check that turns bad input into an error
//! naming the file and line instead of a panic.
//!
//! The JSONL is read in blocks; the lines of each block are parsed into the
//! capture schema types on all cores, then appended in file order, which is
//! where ordering rules (monotonic starts, unique cycle indices) are checked.

use std::fs::File;
use std::io::{IsTerminal, Read};
use std::path::Path;

use looptime_capture::format::{read_summary, thread_files, CYCLES_FILE, SUMMARY_FILE};
use looptime_capture::{CaptureError, EvidenceReader};
use rayon::prelude::*;

use crate::error::{AnalyzeError, Result};

mod append;
mod differential;
mod dir;
pub mod find;
mod parse;
mod progress;
mod scan;
mod view;

use append::{Appender, SpanColumns};
pub use differential::loads_alike_both_ways;
use dir::{leftover_temps, why_no_cycles};
pub use find::{find_episodes, identity, Found, Search};
use parse::{parse_piece, split_lines, Piece, Tables};
use progress::Progress;

mod types;
pub use types::*;

/// The command stage of files that declare none (recorded before the
/// header said it), and of recorders that did not declare one.
pub const DEFAULT_COMMAND_STAGE: &str = "robot_send_command";

/// The command stage the analysis uses for `header`: the flag's, else the
/// header's, else [`DEFAULT_COMMAND_STAGE`].
pub fn command_stage_of<'a>(
    header: &'a looptime_capture::Header,
    opts: &'a LoadOptions,
) -> &'a str {
    opts.command_stage
        .as_deref()
        .or(header.command_stage.as_deref())
        .unwrap_or(DEFAULT_COMMAND_STAGE)
}

/// Durations above this are rejected as absurd (one hour, in ns).
pub const ABSURD_DURATION_NS: i64 = 3_600_000_000_000;
/// Block size of the reader.
const BLOCK_BYTES: usize = 16 << 20;

#[cfg(test)]
thread_local! {
    /// A smaller block for tests (0: `BLOCK_BYTES`), so that small fixtures
    /// cross many blocks, and lines longer than a block.
    pub(crate) static TEST_BLOCK_BYTES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The read block: `BLOCK_BYTES`, or a test's smaller one.
fn block_bytes() -> usize {
    #[cfg(test)]
    {
        let b = TEST_BLOCK_BYTES.with(|b| b.get());
        if b > 0 {
            return b;
        }
    }
    BLOCK_BYTES
}
/// Inputs larger than this show a progress bar when stderr is a terminal.
const PROGRESS_MIN_BYTES: u64 = 64 << 20;
/// Attributes kept per span.
pub const MAX_ATTRS: usize = looptime_capture::MAX_ATTRS_PER_SPAN;

/// How to treat bad lines.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Skip corrupt or inconsistent lines (counted) instead of failing.
    pub lenient: bool,
    /// Show a progress bar for large inputs when stderr is a terminal.
    pub progress: bool,
    /// The stage whose span starts are command submissions.
    /// `None`: the stage the header declares (`command_stage`), else
    /// [`DEFAULT_COMMAND_STAGE`]; `Some`: this one (the flag overrides).
    pub command_stage: Option<String>,
    /// An input-paced cycle's answer is late when its latency exceeds this
    /// (default: the effective period).
    pub answer_budget_ns: Option<u64>,
    /// Parse every cycle line through serde, never the fast path: the
    /// reference the whole-file differential test and fuzz target compare
    /// the fast path with (both must give the same evidence). Not for
    /// users: it only makes loading slower.
    #[doc(hidden)]
    pub serde_only: bool,
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
        if let Some(e) = dir::not_an_episode(dir) {
            return Err(e);
        }
        if let Some(pid) = dir::live_writer(dir) {
            return Err(AnalyzeError::StillRecording {
                path: dir.to_path_buf(),
                pid,
            });
        }
        return Err(AnalyzeError::MissingCycles {
            why: why_no_cycles(dir, &leftover_temps),
            path,
        });
    }
    let mut ev = load_jsonl(dir, &path, &opts)?;
    ev.leftover_temps = leftover_temps;
    read_sidecars(&mut ev, dir)?;
    for name in ev.header.threads.clone() {
        let (cycles_file, summary_file) = thread_files(&name);
        let tpath = dir.join(&cycles_file);
        if !tpath.exists() {
            ev.missing_threads.push(name);
            continue;
        }
        let mut t = load_jsonl(dir, &tpath, &opts)?;
        let spath = dir.join(&summary_file);
        if spath.exists() {
            match read_summary(&spath) {
                Ok(s) => t.summary = Some(s),
                Err(e) => t.summary_problem = Some(looptime_capture::error_chain(&e)),
            }
        }
        if t.header.thread_name() != name {
            return Err(AnalyzeError::BadLine {
                path: tpath,
                line: 1,
                message: format!(
                    "the header names thread `{}`, but the control header declares this file for `{name}`",
                    t.header.thread_name()
                ),
            });
        }
        ev.threads.push(t);
    }
    Ok(ev)
}

/// Read one JSONL (the control thread's or a background thread's) of the
/// episode directory `dir`, without its summary or manifest.
fn load_jsonl(dir: &Path, path: &Path, opts: &LoadOptions) -> Result<Evidence> {
    let reader = EvidenceReader::open(path)?;
    let header = reader.header().clone();
    let header_notes = reader.notes();
    drop(reader);
    let file = File::open(path).map_err(|source| CaptureError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    load_cycles(dir, path, (header, header_notes), file, bytes, opts)
}

/// An episode from bytes instead of a directory: the control thread's
/// JSONL and, when given, its summary, read as if they were the files of
/// the directory `dir` (which every message names, and which need not
/// exist). Background threads' files are not given: each one the header
/// declares is listed missing. The same checks, errors and figures as
/// [`load_episode`] on a directory holding those files; for the fuzz
/// targets and for programs that hold evidence in memory.
///
/// # Errors
/// As [`load_episode`], for the JSONL; a summary that does not read is a
/// caveat (`summary_problem`), as in a directory.
pub fn load_episode_bytes(
    dir: &Path,
    jsonl: &[u8],
    summary: Option<&[u8]>,
    opts: LoadOptions,
) -> Result<Evidence> {
    let path = dir.join(CYCLES_FILE);
    let header = looptime_capture::format::read_header(&path, &mut &jsonl[..])?;
    let mut ev = load_cycles(dir, &path, header, jsonl, jsonl.len() as u64, &opts)?;
    if let Some(bytes) = summary {
        let spath = dir.join(SUMMARY_FILE);
        let text = String::from_utf8_lossy(bytes);
        match looptime_capture::format::parse_summary(&spath, &text) {
            Ok(s) => ev.summary = Some(s),
            Err(e) => ev.summary_problem = Some(looptime_capture::error_chain(&e)),
        }
    }
    ev.missing_threads = ev.header.threads.clone();
    Ok(ev)
}

/// The cycles of one JSONL (`source`, `bytes` long, read from its start;
/// its header already parsed), as the file `path` of `dir`.
fn load_cycles(
    dir: &Path,
    path: &Path,
    (header, header_notes): (looptime_capture::Header, looptime_capture::HeaderNotes),
    source: impl Read + Send,
    bytes: u64,
    opts: &LoadOptions,
) -> Result<Evidence> {
    let tables = Tables {
        header: &header,
        command_stage: header
            .stages
            .iter()
            .position(|s| s.name == command_stage_of(&header, opts))
            .map(|i| i as u32),
        comparable: header.clocks.schedule_comparable(),
        fast: !opts.serde_only,
    };
    let mut ev = Evidence {
        dir: dir.to_path_buf(),
        header: header.clone(),
        summary: None,
        summary_problem: None,
        manifest: None,
        cycles: Vec::new(),
        values: Vec::new(),
        spans: SpanColumns::default().into_frame()?,
        groups: Vec::new(),
        commands: Vec::new(),
        samples: Vec::new(),
        skipped_lines: 0,
        skipped_examples: Vec::new(),
        truncated_last_line: false,
        blank_lines: 0,
        cr_lines: 0,
        header_notes,
        leftover_temps: Vec::new(),
        bytes,
        threads: Vec::new(),
        missing_threads: Vec::new(),
        columns_computed: std::sync::atomic::AtomicUsize::new(0),
        answer_budget_ns: opts.answer_budget_ns,
        period_from_manifest: false,
        command_stage: (
            command_stage_of(&header, opts).to_string(),
            if opts.command_stage.is_some() {
                "flag"
            } else if header.command_stage.is_some() {
                "header"
            } else {
                "default"
            },
        ),
    };
    read_cycles(&mut ev, source, &tables, opts, path)?;
    Ok(ev)
}

/// Read every cycle line of `file` into `ev`, in blocks parsed on all
/// cores and appended in file order.
// long-fn: the loader's pipeline (read a block, parse the previous one on all cores, append the one before), one loop whose stages share their buffers
fn read_cycles(
    ev: &mut Evidence,
    mut file: impl Read + Send,
    tables: &Tables,
    opts: &LoadOptions,
    path: &Path,
) -> Result<()> {
    let bytes = ev.bytes;
    let show = opts.progress && bytes >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal();
    let mut progress = Progress::new(show.then(std::io::stderr), bytes);
    let threads = rayon::current_num_threads().max(1);
    let mut app = Appender::default();

    // Two buffers: `buf[..filled]` holds unparsed bytes. Each round parses
    // the whole lines in `buf` on all cores while, beside it, the previous
    // round's parsed pieces are appended (in line order) and the next bytes
    // are read into `spare`, after the incomplete tail moved there. Then
    // the buffers swap. Reading and appending are serial work; done beside
    // the parse, they no longer add to it.
    let mut buf = vec![0u8; block_bytes()];
    let mut spare = vec![0u8; block_bytes()];
    let mut filled = 0usize;
    let mut next_line = 1u64; // line number of buf[0]
    let mut header_skipped = false;
    let mut read_total = 0u64;
    // Read ahead of this round (bytes, end of file), and parsed pieces not
    // yet appended (pieces, whether they end in an unterminated last line,
    // that line's number).
    let mut prefetched: Option<(usize, bool)> = None;
    let mut pending: Option<(Vec<Piece>, bool, u64)> = None;
    // LOOPTIME_PROFILE: the reads not overlapped, the rounds (parse with
    // the append and read beside it), and the last append.
    let prof = crate::profile::enabled();
    let (mut t_read, mut t_rounds, mut t_append) = Default::default();
    // Within the rounds: the parse's time summed over the threads, and the
    // append and the read beside it.
    let parse_ns = std::sync::atomic::AtomicU64::new(0);
    let (mut t_append_beside, mut t_read_beside) = Default::default();
    let clock = |on: bool| on.then(std::time::Instant::now);
    let since =
        |t: Option<std::time::Instant>| t.map_or(std::time::Duration::ZERO, |t| t.elapsed());
    loop {
        let (n, eof) = match prefetched.take() {
            Some(r) => r,
            None => {
                let t = clock(prof);
                let r = fill(&mut file, &mut buf, filled, path)?;
                t_read += since(t);
                r
            }
        };
        filled += n;
        read_total += n as u64;
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
        if ev.cycles.is_empty() && pending.is_none() && !block.is_empty() {
            // Size the tables from the first block's line length, so they
            // are not regrown (and copied) many times on large inputs.
            let lines = memchr::memchr_iter(b'\n', block).count().max(1) as u64;
            let est = (bytes / (block.len() as u64 / lines).max(1)) as usize + 16;
            ev.cycles.reserve(est);
            app.est_cycles = est;
        }
        // Each piece numbers its lines from 0 and counts them as it parses
        // (no serial count before the parse); the bases follow the join.
        let pieces = split_lines(block, threads * 2);
        let tail = filled - cut;
        if spare.len() < buf.len() {
            spare.resize(buf.len(), 0);
        }
        spare[..tail].copy_from_slice(&buf[cut..filled]);
        let earlier = pending.take();
        let t = clock(prof);
        let (parsed, beside) = rayon::join(
            || {
                pieces
                    .par_iter()
                    .map(|text| {
                        let t = clock(prof);
                        let piece = parse_piece(tables, text, 0);
                        let ns = since(t).as_nanos() as u64;
                        parse_ns.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
                        piece
                    })
                    .collect::<Vec<Piece>>()
            },
            || -> Result<Option<(usize, bool)>> {
                let t = clock(prof);
                if let Some(block) = earlier {
                    app.block(ev, block, path, opts)?;
                }
                t_append_beside += since(t);
                let t = clock(prof);
                let r = (!eof)
                    .then(|| fill(&mut file, &mut spare, tail, path))
                    .transpose();
                t_read_beside += since(t);
                r
            },
        );
        t_rounds += since(t);
        prefetched = beside?;
        let mut parsed = parsed;
        for piece in &mut parsed {
            piece.line_base = next_line;
            next_line += piece.newlines;
        }
        let last_line_no = next_line - ends_with_newline as u64;
        pending = Some((parsed, eof && !ends_with_newline, last_line_no));
        std::mem::swap(&mut buf, &mut spare);
        filled = tail;
        progress.tick(read_total);
        if eof {
            break;
        }
    }
    let t = clock(prof);
    if let Some(block) = pending.take() {
        app.block(ev, block, path, opts)?;
    }
    t_append += since(t);
    progress.done();
    // One chunk per column, built in place by the appends: the aggregations
    // never gather across chunks, and no copy joins them.
    let t = clock(prof);
    ev.spans = app.spans.into_frame()?;
    if prof {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        crate::profile::report(&format!("load {name}: first read"), t_read);
        crate::profile::report(
            &format!("load {name}: parse ({threads} threads), append and read beside"),
            t_rounds,
        );
        let each = |what: &str, d| crate::profile::report(&format!("load {name}:   {what}"), d);
        let parse_sum = std::time::Duration::from_nanos(parse_ns.into_inner());
        each("parse, summed over the threads", parse_sum);
        each("append beside", t_append_beside);
        each("read beside", t_read_beside);
        crate::profile::report(&format!("load {name}: last append"), t_append);
        crate::profile::report(&format!("load {name}: span table"), since(t));
    }

    Ok(())
}

/// Read from `file` until `buf[filled..]` is full or the file ends;
/// returns the bytes read and whether the end was reached.
fn fill(file: &mut impl Read, buf: &mut [u8], filled: usize, path: &Path) -> Result<(usize, bool)> {
    let mut at = filled;
    while at < buf.len() {
        let n = file
            .read(&mut buf[at..])
            .map_err(|source| CaptureError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            return Ok((at - filled, true));
        }
        at += n;
    }
    Ok((at - filled, false))
}

/// The summary and manifest, when present: a bad summary is a caveat
/// (`summary_problem`), a manifest that is not JSON an error.
/// A recorder built without its period (a program's helper that did not
/// pass it) leaves the header without one, while the episode's manifest
/// states the scheduler's: use that, and say so.
fn period_from_manifest(ev: &mut Evidence, manifest: &serde_json::Value) {
    if ev.header.nominal_period_ns.is_some() {
        return;
    }
    if let Some(p) = manifest
        .pointer("/schedule/nominal_period_ns")
        .and_then(serde_json::Value::as_u64)
        .filter(|&p| p > 0)
    {
        ev.header.nominal_period_ns = Some(p);
        ev.period_from_manifest = true;
    }
}

fn read_sidecars(ev: &mut Evidence, dir: &Path) -> Result<()> {
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
            Ok(v) => {
                period_from_manifest(ev, &v);
                ev.manifest = Some(v);
            }
            Err(e) => {
                return Err(AnalyzeError::BadManifest {
                    path: manifest_path,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(())
}
