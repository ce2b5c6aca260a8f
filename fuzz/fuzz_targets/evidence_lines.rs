//! Evidence JSONL from anywhere (any version, cut off by a kill, or
//! crafted): the header and every cycle line through the capture schema
//! types and the reader's checks. What must hold: no panic; a refused
//! input names its file (and, for a cycle, its line); a cycle the reader
//! accepts serializes back to JSON that reads as the same record.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use looptime_capture::EvidenceReader;

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
}

fuzz_target!(|data: &[u8]| {
    let path = dir().path().join("control_timing.jsonl");
    std::fs::write(&path, data).expect("write the input");
    let mut reader = match EvidenceReader::open(&path) {
        Ok(r) => r,
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("control_timing.jsonl"),
                "a refusal names its file: {msg}"
            );
            return;
        }
    };
    while let Some(line) = reader.next_line() {
        let Ok((no, text)) = line else { break };
        match reader.parse_cycle(no, &text) {
            Ok(rec) => {
                let json = serde_json::to_string(&rec).expect("a record serializes");
                let back = reader
                    .parse_cycle(no, &json)
                    .expect("its own JSON reads back");
                assert_eq!(back, rec, "the record survives its round trip");
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&format!(":{no}")),
                    "a refused line names its line: {msg}"
                );
            }
        }
    }
});
