//! The whole-file differential check of the loader: the same bytes loaded
//! twice, once with the fast cycle-line parser (`scan`) in front of serde
//! and once through serde alone, must give the same evidence (every cycle
//! row, value cell, span, group, command, sample and skipped line) or the
//! same refusal. `scan`'s own tests compare the two parsers line by line;
//! this holds the loader's whole path (`parse_piece`, `convert`, the
//! pieces' append) to it, on fixtures and on generated files (its tests),
//! and is the `differential` fuzz target's check (fuzz/analyzer).

use std::path::Path;

use super::{load_episode_bytes, Evidence, LoadOptions};

/// Everything the loader gives from the cycle lines, in one comparable
/// string (the rows' `Debug` forms, in order).
fn fingerprint(ev: &Evidence) -> std::result::Result<String, String> {
    let spans = ev.span_rows().map_err(|e| e.to_string())?;
    Ok(format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{} {:?} {} {}",
        ev.cycles,
        ev.values,
        spans,
        ev.groups,
        ev.commands,
        ev.samples,
        ev.skipped_lines,
        ev.skipped_examples,
        ev.blank_lines,
        ev.truncated_last_line
    ))
}

/// Load `jsonl` (and `summary`) both ways, strict and lenient, and say
/// where the two differ.
///
/// # Errors
/// The first difference, in words: one way refused what the other
/// accepted, the two refusals differ, or the evidence differs (the first
/// differing line of the fingerprints).
#[doc(hidden)]
pub fn loads_alike_both_ways(
    dir: &Path,
    jsonl: &[u8],
    summary: Option<&[u8]>,
) -> std::result::Result<(), String> {
    for lenient in [false, true] {
        let load = |serde_only| {
            let opts = LoadOptions {
                lenient,
                serde_only,
                ..LoadOptions::default()
            };
            load_episode_bytes(dir, jsonl, summary, opts)
        };
        match (load(false), load(true)) {
            (Ok(fast), Ok(slow)) => {
                let (f, s) = (fingerprint(&fast)?, fingerprint(&slow)?);
                if f != s {
                    let at = f.lines().zip(s.lines()).position(|(a, b)| a != b);
                    return Err(format!(
                        "lenient {lenient}: the evidence differs (fingerprint line {at:?}):\n fast:  {}\n serde: {}",
                        at.map_or("", |i| f.lines().nth(i).unwrap_or("")).chars().take(400).collect::<String>(),
                        at.map_or("", |i| s.lines().nth(i).unwrap_or("")).chars().take(400).collect::<String>()
                    ));
                }
            }
            (Err(a), Err(b)) if a.to_string() == b.to_string() => {}
            (a, b) => {
                let say = |r: &crate::Result<Evidence>| match r {
                    Ok(ev) => format!("accepted {} cycles", ev.cycles.len()),
                    Err(e) => format!("refused: {e}"),
                };
                return Err(format!(
                    "lenient {lenient}: fast path {}, serde alone {}",
                    say(&a),
                    say(&b)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
