//! A whole episode from anywhere: the control thread's JSONL and (after
//! the first NUL byte of the input, when there is one) its summary, through
//! the analyzer's loader (`load_episode_bytes`, no directory), the
//! analysis, and the text and JSON reports. What must hold: no panic; a
//! refused episode names its file (a refused line, its line); accepted
//! evidence has cycle indices that increase and starts that never go back;
//! its analysis never fails; every figure of the report is finite or
//! explicitly absent (the JSON report reads back into the report type and
//! writes the same bytes, which a NaN or an infinity, written as `null`,
//! would break; the text says neither `NaN` nor `inf`).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use looptime_analyze::{analyze, load_episode_bytes, AnalyzeError, LoadOptions, Report};

fuzz_target!(|data: &[u8]| {
    let (jsonl, summary) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let dir = Path::new("/fuzz/episode");
    for lenient in [false, true] {
        let opts = LoadOptions {
            lenient,
            ..LoadOptions::default()
        };
        let ev = match load_episode_bytes(dir, jsonl, summary, opts) {
            Ok(ev) => ev,
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("control_timing.jsonl"), "a refusal names its file: {msg}");
                if let AnalyzeError::BadLine { line, .. } = e {
                    assert!(msg.contains(&format!(":{line}")), "a refused line names its line: {msg}");
                }
                continue;
            }
        };
        for w in ev.cycles.windows(2) {
            assert!(w[0].cycle < w[1].cycle, "cycle indices increase");
            assert!(w[0].start_ns <= w[1].start_ns, "starts never go back");
        }
        let a = analyze(ev).expect("the analysis of accepted evidence never fails");
        let json = looptime_analyze::render::json(&a.report);
        let back: Report = serde_json::from_str(&json)
            .unwrap_or_else(|e| panic!("the JSON report reads back ({e}): {json}"));
        assert_eq!(looptime_analyze::render::json(&back), json, "the JSON report round-trips");
        let text = looptime_analyze::render::text::render(&a.report);
        for word in ["NaN", "inf "] {
            assert!(!text.contains(word), "the text report says {word}: {text}");
        }
    }
});
