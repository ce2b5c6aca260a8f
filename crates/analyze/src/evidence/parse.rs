//! Parsing the JSONL's cycle lines, a block at a time and on all cores:
//! each line into the capture schema types, then into the compact cycle
//! row, value cells and span columns, with every check a single line can
//! fail (docs/metrics.md, Input rules).

use looptime_capture::{CycleRecord, Header, ValueKind};

use super::scan;
use super::view::CycleView;
use super::{
    mix, Cell, CycleRow, GroupDecode, SampleRow, ABSURD_DURATION_NS, MAX_ATTRS, ROOT_PATH_KEY,
};

/// Identity hasher for keys that are already well mixed.
#[derive(Default, Clone, Copy)]
pub(super) struct KeyHasher(u64);
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
pub(super) type KeySet = std::collections::HashSet<u64, std::hash::BuildHasherDefault<KeyHasher>>;

pub(super) struct Tables<'a> {
    pub(super) header: &'a Header,
    pub(super) command_stage: Option<u32>,
    /// Targets may be subtracted from start and wake times.
    pub(super) comparable: bool,
    /// Try the fast path first (false: every line through serde, the
    /// differential reference).
    pub(super) fast: bool,
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
    check_offset_of(
        what,
        d,
        "target_ns cannot be on the clock the header names for it",
    )
}

/// As [`check_offset`], with `why` said after the figure.
fn check_offset_of(what: &str, d: i64, why: &str) -> std::result::Result<(), String> {
    if d.unsigned_abs() > ABSURD_DURATION_NS as u64 {
        return Err(format!(
            "{what} is {d} ns, absurd (more than an hour): {why}"
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
            // `-0` is an integer, 0; JSON's number parser reads it as the
            // float −0.0 (and cannot tell it from `-0.0`).
            None if v.as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative()) => Ok(Cell::Int(0)),
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
pub(super) struct Piece {
    pub(super) cycles: Vec<CycleRow>,
    pub(super) values: Vec<Cell>,
    pub(super) blank_lines: u64,
    /// Lines that ended in CR before their LF (CRLF endings).
    pub(super) cr_lines: u64,
    /// Newlines in the piece's text (its lines, but for an unterminated
    /// last one).
    pub(super) newlines: u64,
    /// Added to every line number of the piece when it is appended: the
    /// loader parses pieces from line 0 and numbers them after the join.
    pub(super) line_base: u64,
    pub(super) key: Vec<u64>,
    pub(super) stage: Vec<u32>,
    pub(super) wall: Vec<i64>,
    pub(super) cpu: Vec<i64>,
    pub(super) start: Vec<i64>,
    pub(super) groups: Vec<GroupDecode>,
    pub(super) seen: KeySet,
    pub(super) last_keys: Vec<u64>,
    pub(super) last_stages: Vec<u32>,
    pub(super) path_keys: Vec<u64>,
    /// (row in this piece's cycles, start).
    pub(super) commands: Vec<(u32, i64)>,
    /// Samples, `row` in this piece's cycles.
    pub(super) samples: Vec<SampleRow>,
    /// (line, message) of bad lines, in order.
    pub(super) bad: Vec<(u64, String)>,
}

impl Piece {
    fn truncate_spans(&mut self, n: usize, groups: usize, commands: usize) {
        self.key.truncate(n);
        self.stage.truncate(n);
        self.wall.truncate(n);
        self.cpu.truncate(n);
        self.start.truncate(n);
        for g in self.groups.drain(groups..) {
            self.seen.remove(&g.key);
        }
        // The line's keys may name groups just dropped: not a shortcut now.
        self.last_keys.clear();
        self.commands.truncate(commands);
    }
}

/// Convert one parsed record into the piece, checking what a single line
/// can violate. On error nothing of the line stays in the piece.
fn convert(
    t: &Tables,
    rec: &CycleView,
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

/// The cycle's caller values, by header position.
fn value_cells(
    t: &Tables,
    rec: &CycleView,
) -> std::result::Result<[Cell; looptime_capture::MAX_VALUES], String> {
    let mut values = [Cell::Unset; looptime_capture::MAX_VALUES];
    for (name, v) in &rec.values {
        let i = t
            .value(name)
            .ok_or_else(|| format!("value `{name}` is not declared in the header"))?;
        values[i] = cell(&t.header.values[i].kind, name, v)?;
    }
    Ok(values)
}

/// Append span `i` of `rec` (cycle row `row`, phase `phase`) to the span
/// columns, recording its group the first time its key appears.
// long-fn: the parser's hot loop, once per span of every line, in one body
fn convert_span(
    t: &Tables,
    rec: &CycleView,
    i: usize,
    phase: u32,
    row: u32,
    p: &mut Piece,
) -> std::result::Result<(), String> {
    let s = &rec.spans[i];
    // The stage at this position in the previous cycle is checked first.
    let cached = p.last_stages.get(i).copied().filter(|&c| {
        t.header
            .stages
            .get(c as usize)
            .is_some_and(|st| st.name == s.stage)
    });
    let stage = match cached {
        Some(c) => c,
        None => t.stage(s.stage).ok_or_else(|| {
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
    for (k, v) in rec.span_attrs(s).iter().take(MAX_ATTRS) {
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
            names.push(rec.spans[k].stage);
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
            attrs: rec
                .span_attrs(s)
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            chain,
        });
    }
    if i < p.last_keys.len() {
        p.last_keys[i] = key;
    } else {
        p.last_keys.push(key);
    }
    let start = ns("start_ns", s.start_ns)?;
    if t.command_stage == Some(stage) {
        p.commands.push((row, start));
    }
    p.key.push(key);
    p.stage.push(stage);
    p.wall.push(wall);
    p.cpu.push(cpu.unwrap_or(-1));
    p.start.push(start);
    Ok(())
}

fn convert_inner(
    t: &Tables,
    rec: &CycleView,
    line: u64,
    p: &mut Piece,
) -> std::result::Result<(), String> {
    let phase = t
        .phase(rec.phase)
        .ok_or_else(|| format!("phase `{}` is not declared in the header", rec.phase))?;
    let times = check_times(t, rec)?;
    let most_spans = t.header.capacity.max_spans_per_cycle as usize;
    if rec.spans.len() > most_spans {
        return Err(format!(
            "the cycle holds {} spans but the header's capacity.max_spans_per_cycle is {most_spans}: the recorder stores at most that many and counts the rest in spans_dropped, so the line was not written by it as declared",
            rec.spans.len()
        ));
    }
    let values = value_cells(t, rec)?;
    let row = p.cycles.len() as u32;
    let samples = sample_rows(t, rec, row)?;
    let span_start = p.key.len() as u32;
    p.path_keys.clear();
    for i in 0..rec.spans.len() {
        convert_span(t, rec, i, phase, row, p)?;
    }
    p.values.extend_from_slice(&values[..t.header.values.len()]);
    p.samples.extend(samples);
    p.cycles.push(CycleRow {
        line,
        cycle: rec.cycle,
        phase,
        start_ns: times.start,
        end_ns: times.end,
        cpu_ns: times.cpu,
        spin_margin_ns: times.margin,
        spin_ns: times.spin,
        target_ns: times.target,
        sleep_start_ns: times.sleep,
        wake_ns: times.wake,
        overdue: rec.overdue,
        skipped: rec.skipped,
        input_paced: rec.pace == looptime_capture::PaceKind::Input,
        arrival_ns: times.arrival,
        input_seq: rec.input_seq,
        read_ns: times.read,
        arrival_bound_ns: times.bound,
        spans_dropped: rec.spans_dropped,
        samples_dropped: rec.samples_dropped,
        n_spans: rec.spans.len() as u32,
        span_row: 0,
        span_start,
    });
    Ok(())
}

/// The cycle's data-age samples, checked against the header: each names a
/// declared source, there are no more than the declared slots, and each
/// time fits an i64.
fn sample_rows(
    t: &Tables,
    rec: &CycleView,
    row: u32,
) -> std::result::Result<Vec<SampleRow>, String> {
    let h = &t.header;
    let slots = h.capacity.max_samples_per_cycle as usize;
    if rec.samples.len() > slots {
        return Err(format!(
            "the cycle holds {} samples but the header's capacity.max_samples_per_cycle is {slots}: the recorder stores at most that many and counts the rest in samples_dropped",
            rec.samples.len()
        ));
    }
    rec.samples
        .iter()
        .map(|x| {
            let source = h
                .sources
                .iter()
                .position(|s| s.name == x.source)
                .ok_or_else(|| {
                    format!(
                        "sample of source `{}` is not declared in the header's sources",
                        x.source
                    )
                })?;
            Ok(SampleRow {
                row,
                source: source as u16,
                seq: x.seq,
                stamp_ns: ns("samples.stamp_ns", x.stamp_ns)?,
                at_ns: ns("samples.at_ns", x.at_ns)?,
                produced: x.produced,
            })
        })
        .collect()
}

/// A serde error restated with the field path and the column (capture's
/// one definition, shared with the header's messages).
fn describe(line: &[u8], e: &serde_json::Error) -> String {
    looptime_capture::json_error::describe::<CycleRecord>(line, e)
}

pub(super) fn parse_piece(t: &Tables, text: &[u8], first_line: u64) -> Piece {
    let mut p = Piece::default();
    // Validate UTF-8 once for the piece (SIMD), then parse lines from `&str`
    // so that no parser re-validates a string. Invalid UTF-8 goes to serde's
    // byte parser, which names the bad line.
    let as_str = std::str::from_utf8(text).ok();
    let mut view = CycleView::default();
    let mut from = 0usize;
    let mut i = 0u64;
    while from < text.len() {
        let to = memchr::memchr(b'\n', &text[from..]).map_or(text.len(), |q| from + q);
        p.newlines += (to < text.len()) as u64;
        let line = first_line + i;
        i += 1;
        let raw = json_trim(&text[from..to]);
        p.cr_lines += (raw.len() < to - from && text[from..to].ends_with(b"\r")) as u64;
        let raw_str =
            as_str.map(|st| &st[from..to][json_trim_start(&text[from..to])..][..raw.len()]);
        from = to + 1;
        if raw.is_empty() {
            p.blank_lines += 1;
            continue;
        }
        // The fast path first; a line it steps aside from, or that fails a
        // check, goes through serde, which names what is wrong.
        let fast = t.fast
            && raw_str.is_some_and(|raw| {
                scan::cycle(raw, &mut view).is_ok() && convert(t, &view, line, &mut p).is_ok()
            });
        if !fast {
            if let Err(msg) = parse_slow(t, raw, raw_str, line, &mut p) {
                p.bad.push((line, msg));
            }
        }
    }
    p
}

/// JSON's whitespace (RFC 8259): space, tab, LF and CR, and nothing else
/// (a form feed or a vertical tab is not whitespace there, so a line that
/// holds one is refused by the parser, not trimmed).
fn json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// How many bytes of JSON whitespace `line` starts with.
fn json_trim_start(line: &[u8]) -> usize {
    line.iter().take_while(|&&b| json_space(b)).count()
}

/// `line` without the JSON whitespace at either end.
fn json_trim(line: &[u8]) -> &[u8] {
    let start = json_trim_start(line);
    let end = line.len()
        - line[start..]
            .iter()
            .rev()
            .take_while(|&&b| json_space(b))
            .count();
    &line[start..end]
}

/// One line through serde into the conversion: the path that names every
/// error (field and column for a parse error, the check for the rest).
fn parse_slow(
    t: &Tables,
    raw: &[u8],
    raw_str: Option<&str>,
    line: u64,
    p: &mut Piece,
) -> std::result::Result<(), String> {
    let rec = match raw_str {
        Some(st) => serde_json::from_str::<CycleRecord>(st),
        None => serde_json::from_slice::<CycleRecord>(raw),
    }
    .map_err(|e| describe(raw, &e))?;
    convert(t, &CycleView::of_record(&rec), line, p)
}

/// Split `block` (whole lines) into about `n` pieces at line boundaries.
pub(super) fn split_lines(block: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n + 1);
    let target = block.len() / n.max(1) + 1;
    let mut start = 0;
    while start < block.len() {
        let mut end = (start + target).min(block.len());
        if end < block.len() && block[end - 1] != b'\n' {
            end = memchr::memchr(b'\n', &block[end..]).map_or(block.len(), |p| end + p + 1);
        }
        out.push(&block[start..end]);
        start = end;
    }
    out
}

mod times;
use times::check_times;

#[cfg(test)]
mod tests;
