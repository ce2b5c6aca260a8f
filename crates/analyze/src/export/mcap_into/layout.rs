//! Whether a record's fields fit inside it, checked before the MCAP crate
//! parses the record: the crate allocates what a length prefix announces
//! before reading, so a damaged prefix would ask for up to 4 GB.

use mcap::records::op;

/// What a record's body holds, as far as its lengths go.
#[derive(Clone, Copy)]
enum Field {
    /// Fixed-size fields, this many bytes.
    Fixed(usize),
    /// A u32 length, then that many bytes (a string, bytes, a map of
    /// fixed-size entries).
    Prefixed,
    /// A u32 length, then string-to-string pairs filling it.
    StrMap,
}

/// The layout of the record kinds the MCAP crate parses from a body
/// (the MCAP specification's field lists; trailing bytes are allowed).
fn layout(opcode: u8) -> Option<&'static [Field]> {
    use Field::{Fixed, Prefixed, StrMap};
    Some(match opcode {
        op::HEADER => &[Prefixed, Prefixed],
        op::METADATA => &[Prefixed, StrMap],
        op::SCHEMA => &[Fixed(2), Prefixed, Prefixed, Prefixed],
        op::CHANNEL => &[Fixed(4), Prefixed, Prefixed, StrMap],
        op::STATISTICS => &[Fixed(42), Prefixed],
        op::CHUNK_INDEX => &[Fixed(32), Prefixed, Fixed(8), Prefixed, Fixed(16)],
        op::ATTACHMENT_INDEX => &[Fixed(40), Prefixed, Prefixed],
        op::METADATA_INDEX => &[Fixed(16), Prefixed],
        op::SUMMARY_OFFSET => &[Fixed(17)],
        _ => return None,
    })
}

/// The range a u32 length prefix at `*at` of `body` announces, when it
/// ends by `end`; `*at` moves past it.
fn prefixed(body: &[u8], at: &mut usize, end: usize) -> Option<std::ops::Range<usize>> {
    let n = u32::from_le_bytes(body.get(*at..*at + 4)?.try_into().ok()?) as usize;
    let from = *at + 4;
    (n <= end.checked_sub(from)?).then(|| {
        *at = from + n;
        from..from + n
    })
}

/// Whether every field of a record's `body` fits inside it. The MCAP
/// crate allocates what a length prefix says before it reads, so one
/// damaged prefix in a record of a few bytes would ask for up to 4 GB
/// (found by the `mcap_into` fuzz target; `tests/recording_alloc.rs`).
pub(super) fn fields_fit(opcode: u8, body: &[u8]) -> bool {
    let Some(fields) = layout(opcode) else {
        return true;
    };
    let end = body.len();
    let mut at = 0usize;
    fields.iter().all(|f| match f {
        Field::Fixed(n) => {
            at += n;
            at <= end
        }
        Field::Prefixed => prefixed(body, &mut at, end).is_some(),
        Field::StrMap => prefixed(body, &mut at, end).is_some_and(|map| {
            let mut i = map.start;
            while i < map.end {
                let pair =
                    prefixed(body, &mut i, map.end).and_then(|_| prefixed(body, &mut i, map.end));
                if pair.is_none() {
                    return false;
                }
            }
            true
        }),
    })
}
