//! Appending parsed pieces to the evidence in file order: where the rules
//! across lines are checked (cycle indices increase, starts never go back),
//! bad lines are refused or (`--lenient`) counted, and the span table's
//! columns grow in place, one contiguous vector each.

use std::path::Path;

use polars::prelude::*;

use super::parse::{KeySet, Piece};
use super::{CycleRow, Evidence, LoadOptions, SampleRow};
use crate::error::{AnalyzeError, Result};

/// The span table's columns as they grow.
#[derive(Default)]
pub(super) struct SpanColumns {
    key: Vec<u64>,
    stage: Vec<u32>,
    wall: Vec<i64>,
    cpu: Vec<i64>,
    start: Vec<i64>,
}

impl SpanColumns {
    fn len(&self) -> usize {
        self.key.len()
    }

    fn reserve(&mut self, n: usize) {
        self.key.reserve(n);
        self.stage.reserve(n);
        self.wall.reserve(n);
        self.cpu.reserve(n);
        self.start.reserve(n);
    }

    /// Spans `r` of the piece.
    fn extend(&mut self, piece: &Piece, r: std::ops::Range<usize>) {
        self.key.extend_from_slice(&piece.key[r.clone()]);
        self.stage.extend_from_slice(&piece.stage[r.clone()]);
        self.wall.extend_from_slice(&piece.wall[r.clone()]);
        self.cpu.extend_from_slice(&piece.cpu[r.clone()]);
        self.start.extend_from_slice(&piece.start[r]);
    }

    /// The span table, one chunk per column (the vectors move, no copy:
    /// `Column::new` would copy them).
    pub(super) fn into_frame(self) -> Result<DataFrame> {
        let column = |s: Series| Column::from(s);
        Ok(DataFrame::new_infer_height(vec![
            column(UInt64Chunked::from_vec("key".into(), self.key).into_series()),
            column(UInt32Chunked::from_vec("stage".into(), self.stage).into_series()),
            column(Int64Chunked::from_vec("wall_ns".into(), self.wall).into_series()),
            column(Int64Chunked::from_vec("cpu_ns".into(), self.cpu).into_series()),
            column(Int64Chunked::from_vec("start_ns".into(), self.start).into_series()),
        ])?)
    }
}

/// What the appends carry from one piece to the next.
#[derive(Default)]
pub(super) struct Appender {
    /// Group keys already named in `ev.groups`.
    seen_groups: KeySet,
    /// The last kept cycle: (index, start).
    prev: Option<(u64, i64)>,
    pub(super) spans: SpanColumns,
    /// The loader's estimate of the cycles in the file (0: none), which
    /// sizes the span columns at the first append.
    pub(super) est_cycles: usize,
}

impl Appender {
    /// Append one block's parsed pieces in line order: (pieces, whether the
    /// block ends in an unterminated last line, that line's number).
    pub(super) fn block(
        &mut self,
        ev: &mut Evidence,
        (pieces, unterminated, last): (Vec<Piece>, bool, u64),
        path: &Path,
        opts: &LoadOptions,
    ) -> Result<()> {
        let tail = Tail { unterminated, last };
        for piece in pieces {
            self.piece(ev, piece, path, opts, tail)?;
        }
        Ok(())
    }

    fn piece(
        &mut self,
        ev: &mut Evidence,
        mut piece: Piece,
        path: &Path,
        opts: &LoadOptions,
        tail: Tail,
    ) -> Result<()> {
        for row in &mut piece.cycles {
            row.line += piece.line_base;
        }
        for (line, _) in &mut piece.bad {
            *line += piece.line_base;
        }
        let mut bad = std::mem::take(&mut piece.bad).into_iter().peekable();
        let nv = ev.header.values.len();
        ev.blank_lines += piece.blank_lines;
        ev.cr_lines += piece.cr_lines;
        if self.spans.len() == 0 && self.est_cycles > 0 && !piece.cycles.is_empty() {
            // Size the columns once from the first piece's spans a cycle
            // (a large reservation touches no page until it is written).
            let per_cycle = piece.key.len() as f64 / piece.cycles.len() as f64;
            self.spans
                .reserve((self.est_cycles as f64 * per_cycle * 1.05) as usize);
        }
        let mut new_rows: Vec<u32> = Vec::with_capacity(piece.cycles.len());
        // The piece's spans from `run` on belong to kept cycles and are not
        // copied yet: they are copied a run of kept cycles at a time.
        let mut run = 0usize;
        for (k, row) in piece.cycles.iter().enumerate() {
            while let Some((line, _)) = bad.peek() {
                if *line > row.line {
                    break;
                }
                let (line, msg) = bad.next().unwrap_or_default();
                reject(ev, tail, line, msg, path, opts)?;
            }
            let first = row.span_start as usize;
            if let Some(msg) = out_of_order(self.prev, row) {
                self.spans.extend(&piece, run..first);
                run = first + row.n_spans as usize;
                reject(ev, tail, row.line, msg, path, opts)?;
                new_rows.push(u32::MAX);
                continue;
            }
            self.prev = Some((row.cycle, row.start_ns));
            new_rows.push(ev.cycles.len() as u32);
            ev.cycles.push(CycleRow {
                span_row: (self.spans.len() + first - run) as u64,
                ..*row
            });
            ev.values
                .extend_from_slice(&piece.values[k * nv..(k + 1) * nv]);
        }
        self.spans.extend(&piece, run..piece.key.len());
        for (line, msg) in bad {
            reject(ev, tail, line, msg, path, opts)?;
        }
        remap_rows(ev, &piece, &new_rows);
        for g in std::mem::take(&mut piece.groups) {
            if self.seen_groups.insert(g.key) {
                ev.groups.push(g);
            }
        }
        Ok(())
    }
}

/// Whether a block ends in an unterminated last line, and that line.
#[derive(Clone, Copy)]
struct Tail {
    unterminated: bool,
    last: u64,
}

/// A bad line: the cut-off last line of a file is noted, not refused;
/// else it is counted (`--lenient`) or the load fails naming it.
fn reject(
    ev: &mut Evidence,
    tail: Tail,
    line: u64,
    msg: String,
    path: &Path,
    opts: &LoadOptions,
) -> Result<()> {
    if tail.unterminated && line == tail.last {
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
}

/// Why `row` cannot follow the previous kept cycle `prev` (index, start):
/// a duplicate index, an index going back, or a start going back.
fn out_of_order(prev: Option<(u64, i64)>, row: &CycleRow) -> Option<String> {
    match prev {
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
    }
}

/// The piece's command spans and samples, with their rows renumbered into
/// `ev.cycles` (`new_rows`; `u32::MAX` for a rejected cycle, whose rows go).
fn remap_rows(ev: &mut Evidence, piece: &Piece, new_rows: &[u32]) {
    for (row, start) in &piece.commands {
        let r = new_rows[*row as usize];
        if r != u32::MAX {
            ev.commands.push((r, *start));
        }
    }
    for x in &piece.samples {
        let r = new_rows[x.row as usize];
        if r != u32::MAX {
            ev.samples.push(SampleRow { row: r, ..*x });
        }
    }
}
