//! The fast path of the cycle-line parser: one pass over the line's bytes
//! into a reused [`CycleView`], borrowing every string, allocating nothing
//! once the view's vectors have grown.
//!
//! It accepts a strict subset of what serde accepts for a
//! [`looptime_capture::CycleRecord`]: one JSON object with the record's own
//! keys, each at most once, values of the declared types, strings without
//! escapes, integers that fit their field. Anything else (an unknown key, an
//! escape, a float where an integer belongs, a key twice, a cut-off line)
//! makes it step aside ([`Bail`]) and the line goes to serde, which either
//! accepts it or names what is wrong, field and column. So the fast path
//! decides no error message and accepts no line serde would refuse; where it
//! accepts, it reads what serde reads: `tests` below compare the two line
//! by line on every field (fixture lines and a mutation proptest), and the
//! loader's whole-file differential test (`evidence/differential.rs`, and
//! the `differential` fuzz target) loads whole files both ways, through
//! `parse_piece` and `convert`, and holds the evidence equal.
//!
//! Numbers follow serde_json's rules exactly: an unsigned field takes a
//! non-negative integer literal that fits it; a caller value is an unsigned
//! integer, a negative integer down to −2⁶³, or a float parsed correctly
//! rounded (Rust's `str::parse::<f64>`, as serde_json's `float_roundtrip`).
//! The literals where serde_json makes a float of an integer (`-0`,
//! integers beyond 64 bits) go to serde.

use looptime_capture::PaceKind;
use serde_json::Number;

use super::view::{CycleView, SampleView, SpanView};

/// The fast path stepped aside; serde takes the line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Bail;

type R<T> = Result<T, Bail>;

/// A cursor over one line.
struct Cur<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cur<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.s.as_bytes()
    }

    /// The next byte that is not JSON whitespace (not consumed).
    #[inline]
    fn peek(&mut self) -> R<u8> {
        let b = self.bytes();
        while let Some(&c) = b.get(self.i) {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                return Ok(c);
            }
            self.i += 1;
        }
        Err(Bail)
    }

    #[inline]
    fn eat(&mut self, c: u8) -> R<()> {
        if self.peek()? == c {
            self.i += 1;
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// A string without escapes or control characters.
    #[inline]
    fn string(&mut self) -> R<&'a str> {
        self.eat(b'"')?;
        let b = self.bytes();
        let from = self.i;
        let mut j = from;
        loop {
            let c = *b.get(j).ok_or(Bail)?;
            if c == b'"' {
                break;
            }
            if c == b'\\' || c < 0x20 {
                return Err(Bail);
            }
            j += 1;
        }
        self.i = j + 1;
        // `"` is ASCII, so both ends are char boundaries of the line.
        Ok(&self.s[from..j])
    }

    fn word(&mut self, w: &[u8]) -> R<()> {
        self.peek()?;
        if self.bytes()[self.i..].starts_with(w) {
            self.i += w.len();
            Ok(())
        } else {
            Err(Bail)
        }
    }

    fn boolean(&mut self) -> R<bool> {
        match self.peek()? {
            b't' => self.word(b"true").map(|()| true),
            b'f' => self.word(b"false").map(|()| false),
            _ => Err(Bail),
        }
    }

    /// Consumes a `null` if one comes next.
    fn null(&mut self) -> R<bool> {
        if self.peek()? == b'n' {
            self.word(b"null")?;
            return Ok(true);
        }
        Ok(false)
    }

    /// A non-negative integer literal that fits a u64, and is not followed
    /// by a fraction or an exponent.
    #[inline]
    fn u64(&mut self) -> R<u64> {
        self.peek()?;
        let b = self.bytes();
        let (end, any) = Self::digits(b, self.i);
        let digits = &b[self.i..end];
        if !any || (digits[0] == b'0' && digits.len() > 1) {
            return Err(Bail); // not a number, or a leading zero
        }
        if matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
            return Err(Bail);
        }
        // 19 digits never overflow a u64; a 20th may.
        let fold = |v: u64, c: &u8| v * 10 + (c - b'0') as u64;
        let v = match digits.len() {
            ..=19 => digits.iter().fold(0, fold),
            20 => digits[19..]
                .iter()
                .try_fold(digits[..19].iter().fold(0, fold), |v, c| {
                    v.checked_mul(10)?.checked_add((c - b'0') as u64)
                })
                .ok_or(Bail)?,
            _ => return Err(Bail),
        };
        self.i = end;
        Ok(v)
    }

    fn u32(&mut self) -> R<u32> {
        u32::try_from(self.u64()?).map_err(|_| Bail)
    }

    fn opt_u64(&mut self) -> R<Option<u64>> {
        if self.null()? {
            return Ok(None);
        }
        self.u64().map(Some)
    }

    /// Skip a run of ASCII digits from `i`; returns where it ends and
    /// whether there was at least one.
    fn digits(b: &[u8], mut i: usize) -> (usize, bool) {
        let from = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i, i > from)
    }

    /// A caller value: any JSON number, as serde_json reads it (see the
    /// module's note), or a step aside.
    fn number(&mut self) -> R<Number> {
        self.peek()?;
        let b = self.bytes();
        let from = self.i;
        let neg = b[from] == b'-';
        let int_from = from + neg as usize;
        let (int_end, any) = Self::digits(b, int_from);
        if !any || (b[int_from] == b'0' && int_end > int_from + 1) {
            return Err(Bail);
        }
        let mut i = int_end;
        let mut float = false;
        if b.get(i) == Some(&b'.') {
            let (end, any) = Self::digits(b, i + 1);
            if !any {
                return Err(Bail);
            }
            (i, float) = (end, true);
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            let sign = matches!(b.get(i + 1), Some(b'+' | b'-')) as usize;
            let (end, any) = Self::digits(b, i + 1 + sign);
            if !any {
                return Err(Bail);
            }
            (i, float) = (end, true);
        }
        self.i = i;
        if float {
            let f: f64 = self.s[from..i].parse().map_err(|_| Bail)?;
            return Number::from_f64(f).ok_or(Bail);
        }
        let mag: u64 = self.s[int_from..int_end].parse().map_err(|_| Bail)?;
        match (neg, mag) {
            (false, m) => Ok(Number::from(m)),
            // serde_json reads `-0` as a float, below −2⁶³ too.
            (true, 0) => Err(Bail),
            (true, m) if m > 1 << 63 => Err(Bail),
            (true, m) => Ok(Number::from((m as i64).wrapping_neg())),
        }
    }

    /// A comma-separated sequence between `open` and `close`: `item`
    /// reads each element.
    #[inline]
    fn seq(&mut self, open: u8, close: u8, mut item: impl FnMut(&mut Self) -> R<()>) -> R<()> {
        self.eat(open)?;
        if self.peek()? == close {
            self.i += 1;
            return Ok(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Bail),
            }
        }
    }

    /// An object: `member` reads each value, given its key.
    #[inline]
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> R<()>) -> R<()> {
        self.seq(b'{', b'}', |c| {
            let key = c.string()?;
            c.eat(b':')?;
            member(c, key)
        })
    }

    /// An array: `item` reads each element.
    fn array(&mut self, item: impl FnMut(&mut Self) -> R<()>) -> R<()> {
        self.seq(b'[', b']', item)
    }
}

/// Read a field: mark its bit, then run `$read`.
macro_rules! field {
    ($seen:expr, $bit:expr, $read:expr) => {{
        once($seen, 1 << $bit)?;
        $read;
    }};
}

/// Mark field `bit` read; a key twice steps aside (serde refuses it).
#[inline]
fn once(seen: &mut u32, bit: u32) -> R<()> {
    if *seen & bit != 0 {
        return Err(Bail);
    }
    *seen |= bit;
    Ok(())
}

/// Sort a map's entries by key, as a `BTreeMap` iterates; a key twice
/// steps aside (serde's map would keep the last).
fn sorted<T>(entries: &mut [(&str, T)]) -> R<()> {
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if entries.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(Bail);
    }
    Ok(())
}

/// Read `line` (trimmed, one JSON object) into `v`.
pub(super) fn cycle<'a>(line: &'a str, v: &mut CycleView<'a>) -> R<()> {
    v.clear();
    let mut c = Cur { s: line, i: 0 };
    let mut seen = 0u32;
    c.object(|c, key| cycle_member(c, key, v, &mut seen))?;
    if c.i != line.len() {
        return Err(Bail); // trailing characters
    }
    // type, cycle, phase and start_ns have no default.
    if seen & 0b1111 != 0b1111 {
        return Err(Bail);
    }
    Ok(())
}

fn cycle_member<'a>(c: &mut Cur<'a>, key: &'a str, v: &mut CycleView<'a>, seen: &mut u32) -> R<()> {
    match key.as_bytes() {
        b"type" => {
            once(seen, 1 << 0)?;
            if c.string()? != "cycle" {
                return Err(Bail);
            }
        }
        b"cycle" => field!(seen, 1, v.cycle = c.u64()?),
        b"phase" => field!(seen, 2, v.phase = c.string()?),
        b"start_ns" => field!(seen, 3, v.start_ns = c.u64()?),
        b"end_ns" => field!(seen, 4, v.end_ns = c.opt_u64()?),
        b"cpu_ns" => field!(seen, 5, v.cpu_ns = c.opt_u64()?),
        b"target_ns" => field!(seen, 6, v.target_ns = c.opt_u64()?),
        b"sleep_start_ns" => field!(seen, 7, v.sleep_start_ns = c.opt_u64()?),
        b"wake_ns" => field!(seen, 8, v.wake_ns = c.opt_u64()?),
        b"spin_margin_ns" => field!(seen, 9, v.spin_margin_ns = c.opt_u64()?),
        b"spin_ns" => field!(seen, 10, v.spin_ns = c.opt_u64()?),
        b"overdue" => field!(seen, 11, v.overdue = c.boolean()?),
        b"skipped" => field!(seen, 12, v.skipped = c.u32()?),
        b"pace" => {
            once(seen, 1 << 13)?;
            v.pace = match c.string()? {
                "deadline" => PaceKind::Deadline,
                "input" => PaceKind::Input,
                _ => return Err(Bail),
            };
        }
        b"arrival_ns" => field!(seen, 14, v.arrival_ns = c.opt_u64()?),
        b"input_seq" => field!(seen, 15, v.input_seq = c.opt_u64()?),
        b"read_ns" => field!(seen, 21, v.read_ns = c.opt_u64()?),
        b"arrival_bound_ns" => field!(seen, 22, v.arrival_bound_ns = c.opt_u64()?),
        b"spans_dropped" => field!(seen, 16, v.spans_dropped = c.u32()?),
        b"samples_dropped" => field!(seen, 17, v.samples_dropped = c.u32()?),
        b"values" => {
            once(seen, 1 << 18)?;
            c.object(|c, k| {
                let n = c.number()?;
                v.values.push((k, n));
                Ok(())
            })?;
            sorted(&mut v.values)?;
        }
        b"spans" => {
            once(seen, 1 << 19)?;
            c.array(|c| span(c, v))?;
        }
        b"samples" => {
            once(seen, 1 << 20)?;
            c.array(|c| sample(c, v))?;
        }
        _ => return Err(Bail), // serde skips unknown keys; so does the slow path
    }
    Ok(())
}

fn span<'a>(c: &mut Cur<'a>, v: &mut CycleView<'a>) -> R<()> {
    let from = v.attrs.len();
    let mut s = SpanView {
        stage: "",
        parent: None,
        depth: 0,
        start_ns: 0,
        wall_ns: 0,
        cpu_ns: None,
        attrs: (0, 0),
    };
    let mut seen = 0u32;
    c.object(|c, key| {
        match key.as_bytes() {
            b"stage" => field!(&mut seen, 0, s.stage = c.string()?),
            b"depth" => field!(&mut seen, 1, s.depth = c.u32()?),
            b"start_ns" => field!(&mut seen, 2, s.start_ns = c.u64()?),
            b"wall_ns" => field!(&mut seen, 3, s.wall_ns = c.u64()?),
            b"parent" => {
                once(&mut seen, 1 << 4)?;
                s.parent = if c.null()? { None } else { Some(c.u32()?) };
            }
            b"cpu_ns" => field!(&mut seen, 5, s.cpu_ns = c.opt_u64()?),
            b"closed_by_cycle_end" => field!(&mut seen, 6, c.boolean()?),
            b"attrs" => {
                once(&mut seen, 1 << 7)?;
                c.object(|c, k| {
                    let value = c.string()?;
                    v.attrs.push((k, value));
                    Ok(())
                })?;
            }
            _ => return Err(Bail),
        }
        Ok(())
    })?;
    if seen & 0b1111 != 0b1111 {
        return Err(Bail); // stage, depth, start_ns, wall_ns have no default
    }
    sorted(&mut v.attrs[from..])?;
    s.attrs = (from as u32, v.attrs.len() as u32);
    v.spans.push(s);
    Ok(())
}

fn sample<'a>(c: &mut Cur<'a>, v: &mut CycleView<'a>) -> R<()> {
    let mut x = SampleView {
        source: "",
        seq: 0,
        stamp_ns: 0,
        at_ns: 0,
        produced: false,
    };
    let mut seen = 0u32;
    c.object(|c, key| {
        match key.as_bytes() {
            b"source" => field!(&mut seen, 0, x.source = c.string()?),
            b"seq" => field!(&mut seen, 1, x.seq = c.u64()?),
            b"stamp_ns" => field!(&mut seen, 2, x.stamp_ns = c.u64()?),
            b"at_ns" => field!(&mut seen, 3, x.at_ns = c.u64()?),
            b"produced" => field!(&mut seen, 4, x.produced = c.boolean()?),
            _ => return Err(Bail),
        }
        Ok(())
    })?;
    if seen & 0b1111 != 0b1111 {
        return Err(Bail);
    }
    v.samples.push(x);
    Ok(())
}

#[cfg(test)]
mod tests;
