//! The loader both ways: the control thread's JSONL (and, after the first
//! NUL byte, its summary) loaded with the fast cycle-line parser in front
//! of serde and through serde alone, strict and lenient. What must hold:
//! the same evidence, or the same refusal (`loads_alike_both_ways`, the
//! check the analyzer's whole-file differential test makes on fixtures
//! and generated files).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use looptime_analyze::evidence::loads_alike_both_ways;

fuzz_target!(|data: &[u8]| {
    let (jsonl, summary) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    if let Err(e) = loads_alike_both_ways(Path::new("/fuzz/episode"), jsonl, summary) {
        panic!("the fast path and serde disagree: {e}");
    }
});
