//! Bad input never panics: random damage to a recorded episode either loads
//! (and then analyzes, renders, plots and compares without panicking) or is
//! refused with an error that names the file.
//!
//! The damage is done to a file of `fixtures/v1/serve-episode` (the JSONL,
//! the summary or the manifest), one edit per case:
//! a byte overwritten, the file cut short, a line deleted, duplicated or
//! swapped with another, or a number replaced by an extreme one.

use std::path::{Path, PathBuf};

use looptime_analyze::compare::{compare, BootstrapConfig};
use looptime_analyze::render::text;
use looptime_analyze::{analyze, load_episode, LoadOptions};
use proptest::prelude::*;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v1/serve-episode")
}

#[derive(Debug, Clone)]
enum Damage {
    /// Overwrite the byte at `pos` (a fraction of the length) with `byte`.
    Byte {
        pos: f64,
        byte: u8,
    },
    /// Keep only the first `pos` (a fraction) of the bytes.
    Cut {
        pos: f64,
    },
    DeleteLine {
        line: usize,
    },
    DuplicateLine {
        line: usize,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    /// Replace the `nth` number on `line` with `with`.
    Number {
        line: usize,
        nth: usize,
        with: &'static str,
    },
}

const NUMBERS: &[&str] = &[
    "-1",
    "0",
    "1e308",
    "-1e308",
    "18446744073709551616",
    "9223372036854775807",
    "0.5",
    "null",
    "\"7\"",
];

const BYTES: &[u8] = b"\"{}[],:-09e. \nx\xff";

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (0.0..1.0f64, prop::sample::select(BYTES))
            .prop_map(|(pos, byte)| Damage::Byte { pos, byte }),
        (0.0..1.0f64).prop_map(|pos| Damage::Cut { pos }),
        (0..80usize).prop_map(|line| Damage::DeleteLine { line }),
        (0..80usize).prop_map(|line| Damage::DuplicateLine { line }),
        (0..80usize, 0..80usize).prop_map(|(a, b)| Damage::SwapLines { a, b }),
        (0..80usize, 0..40usize, prop::sample::select(NUMBERS))
            .prop_map(|(line, nth, with)| Damage::Number { line, nth, with }),
    ]
}

/// Apply `d` to `bytes`; line indices wrap around the line count.
fn apply(d: &Damage, bytes: &[u8]) -> Vec<u8> {
    let at = |f: f64| ((bytes.len() as f64 * f) as usize).min(bytes.len().saturating_sub(1));
    let mut lines: Vec<Vec<u8>> = bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    let n = lines.len();
    match *d {
        Damage::Byte { pos, byte } => {
            let mut out = bytes.to_vec();
            out[at(pos)] = byte;
            return out;
        }
        Damage::Cut { pos } => return bytes[..at(pos)].to_vec(),
        Damage::DeleteLine { line } => {
            lines.remove(line % n);
        }
        Damage::DuplicateLine { line } => {
            let l = lines[line % n].clone();
            lines.insert(line % n, l);
        }
        Damage::SwapLines { a, b } => lines.swap(a % n, b % n),
        Damage::Number { line, nth, with } => {
            let l = &mut lines[line % n];
            let s = String::from_utf8_lossy(l).into_owned();
            // Byte ranges of the numbers (after ':' or ',' or '[') in the line.
            let b = s.as_bytes();
            let mut spans = Vec::new();
            let mut i = 0;
            while i < b.len() {
                if matches!(b[i], b':' | b',' | b'[')
                    && b.get(i + 1)
                        .is_some_and(|c| c.is_ascii_digit() || *c == b'-')
                {
                    let start = i + 1;
                    let mut end = start + 1;
                    while end < b.len()
                        && matches!(b[end], b'0'..=b'9' | b'.' | b'e' | b'E' | b'-' | b'+')
                    {
                        end += 1;
                    }
                    spans.push((start, end));
                    i = end;
                } else {
                    i += 1;
                }
            }
            if let Some(&(s0, e0)) = spans.get(nth % spans.len().max(1)) {
                *l = [&b[..s0], with.as_bytes(), &b[e0..]].concat();
            }
        }
    }
    lines.concat()
}

/// Load, analyze, render, plot and compare `dir`; panics propagate to proptest.
fn exercise(dir: &Path, lenient: bool) -> Result<(), String> {
    let opts = LoadOptions {
        lenient,
        ..LoadOptions::default()
    };
    let ev = load_episode(dir, opts).map_err(|e| e.to_string())?;
    let a = analyze(ev).map_err(|e| e.to_string())?;
    let _ = text::render(&a.report);
    let _ = serde_json::to_string(&a.report).expect("a report always serializes");
    looptime_analyze::render::plots::episode_plots(&a, None).map_err(|e| e.to_string())?;
    let cfg = BootstrapConfig {
        resamples: 20,
        ..BootstrapConfig::default()
    };
    let c = compare(&[&a], &[&a], cfg);
    let _ = looptime_analyze::render::compare_text::render(&c);
    Ok(())
}

fn episode_with(file: &str, bytes: &[u8]) -> tempfile::TempDir {
    episode_from(&fixture(), file, bytes)
}

/// A copy of the episode `src` with `file` replaced by `bytes`.
fn episode_from(src: &Path, file: &str, bytes: &[u8]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(tmp.path().join(file), bytes).unwrap();
    tmp
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn damaged_evidence_never_panics_and_errors_name_the_file(d in damage()) {
        let original = std::fs::read(fixture().join("control_timing.jsonl")).unwrap();
        let tmp = episode_with("control_timing.jsonl", &apply(&d, &original));
        for lenient in [false, true] {
            if let Err(msg) = exercise(tmp.path(), lenient) {
                prop_assert!(
                    msg.contains("control_timing.jsonl"),
                    "lenient={lenient}: error does not name the file: {msg}"
                );
            }
        }
    }

    #[test]
    fn a_damaged_summary_is_reported_not_fatal(d in damage()) {
        // The summary is only cross-checked: damage to it must never stop
        // the analysis of an intact JSONL.
        let original = std::fs::read(fixture().join("control_timing_summary.json")).unwrap();
        let tmp = episode_with("control_timing_summary.json", &apply(&d, &original));
        prop_assert_eq!(exercise(tmp.path(), false), Ok(()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_manifest_is_refused_by_name_or_compared(d in damage()) {
        let original = std::fs::read(fixture().join("manifest.json")).unwrap();
        let tmp = episode_with("manifest.json", &apply(&d, &original));
        match load_episode(tmp.path(), LoadOptions::default()) {
            Err(e) => prop_assert!(e.to_string().contains("manifest.json"), "{e}"),
            Ok(damaged) => {
                // Valid JSON of any shape: the manifest diff against the
                // intact episode must cope with it.
                let intact = load_episode(&fixture(), LoadOptions::default()).unwrap();
                let (rd, ri) = (analyze(damaged).unwrap(), analyze(intact).unwrap());
                let cfg = BootstrapConfig { resamples: 20, ..BootstrapConfig::default() };
                let c = compare(&[&ri], &[&rd], cfg);
                let _ = looptime_analyze::render::compare_text::render(&c);
            }
        }
    }
}

#[test]
fn the_damage_is_real() {
    // Guards the generator: each kind of damage changes the file.
    let original = std::fs::read(fixture().join("control_timing.jsonl")).unwrap();
    for d in [
        Damage::Byte {
            pos: 0.5,
            byte: b'x',
        },
        Damage::Cut { pos: 0.5 },
        Damage::DeleteLine { line: 3 },
        Damage::DuplicateLine { line: 3 },
        Damage::SwapLines { a: 3, b: 4 },
        Damage::Number {
            line: 3,
            nth: 0,
            with: "-1",
        },
    ] {
        assert_ne!(apply(&d, &original), original, "{d:?}");
    }
}

/// The schema-2 serve fixture: a control JSONL and one per background
/// thread (camera reader, policy worker, viewer transport), declared in the
/// control header.
fn fixture_v2() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/serve-episode")
}

const V2_FILES: &[&str] = &[
    "control_timing.jsonl",
    "control_timing.policy_worker.jsonl",
    "control_timing.camera_reader.jsonl",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn damaged_schema_2_evidence_with_thread_files_never_panics(
        d in damage(),
        which in 0..V2_FILES.len(),
    ) {
        // The same damage, to the control file or to a background thread's:
        // the episode loads (and then analyzes, with its threads and their
        // overlap, renders, plots and compares) or is refused with an error
        // that names the damaged file.
        let file = V2_FILES[which];
        let original = std::fs::read(fixture_v2().join(file)).unwrap();
        let tmp = episode_from(&fixture_v2(), file, &apply(&d, &original));
        for lenient in [false, true] {
            if let Err(msg) = exercise(tmp.path(), lenient) {
                prop_assert!(
                    msg.contains(file),
                    "lenient={lenient}: error does not name {file}: {msg}"
                );
            }
        }
    }
}
