//! `control_timing_summary.json` from anywhere: the summary reader. What
//! must hold: no panic; a refusal names its file; a summary it accepts
//! writes back to JSON that reads as the same summary.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use looptime_capture::format::read_summary;

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
}

fuzz_target!(|data: &[u8]| {
    let path = dir().path().join("control_timing_summary.json");
    std::fs::write(&path, data).expect("write the input");
    match read_summary(&path) {
        Ok(s) => {
            let again = dir().path().join("again.json");
            std::fs::write(
                &again,
                serde_json::to_vec(&s).expect("a summary serializes"),
            )
            .unwrap();
            let back = read_summary(&again).expect("its own JSON reads back");
            assert_eq!(
                serde_json::to_value(&back).unwrap(),
                serde_json::to_value(&s).unwrap(),
                "the summary survives its round trip"
            );
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("control_timing_summary.json"),
                "a refusal names its file: {msg}"
            );
        }
    }
});
