//! A robot's MCAP recording from anywhere, handed to `--into`: merged with
//! a real analysed episode (the v2 serve fixture, given a wall-clock
//! anchor) into an MCAP written in memory. What must hold: no panic; a
//! refused recording is named in the message; a merged output reads back
//! as MCAP, message by message, holding every copied message of the
//! recording and every looptime message the merge reported, in time order.
#![no_main]

use std::io::Cursor;
use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use looptime_analyze::export::mcap::Compression;
use looptime_analyze::export::mcap_into::write_into;
use looptime_analyze::{analyze, load_episode, Analysis, LoadOptions};

fn episode() -> &'static Analysis {
    static A: OnceLock<Analysis> = OnceLock::new();
    A.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/serve-episode");
        let mut ev = load_episode(&dir, LoadOptions::default()).expect("the fixture loads");
        ev.header.wall_clock = Some(looptime_capture::WallClock {
            start: looptime_capture::WallClockAnchor {
                realtime_ns: 1_000_000_000,
                monotonic_ns: ev.cycles[0].start_ns as u64,
                uncertainty_ns: 0,
            },
            end: None,
        });
        analyze(ev).expect("the fixture analyses")
    })
}

fuzz_target!(|data: &[u8]| {
    let a = episode();
    let rec_path = Path::new("recording.mcap");
    let mut out = Cursor::new(Vec::new());
    let merged = write_into(
        a,
        Cursor::new(data),
        rec_path,
        true,
        Compression::None,
        &mut out,
        Path::new("merged.mcap"),
    );
    let summary = match merged {
        Ok(s) => s,
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("recording.mcap"), "a refusal names the recording: {msg}");
            return;
        }
    };
    let bytes = out.into_inner();
    let mut n = 0u64;
    let mut last = 0u64;
    for m in mcap::MessageStream::new(&bytes).expect("the merged output is MCAP") {
        let m = m.expect("every merged message reads back");
        assert!(m.log_time >= last, "the merged messages are in time order");
        last = m.log_time;
        n += 1;
    }
    let added: u64 = summary.added.messages.values().sum();
    assert_eq!(n, summary.copied_messages + added, "every message is there");
});
