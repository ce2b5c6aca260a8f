//! The shared reader and builder on hostile input: what the hardening issue
//! found, each now accepted with a note or refused with file and line.

use std::path::Path;

use looptime_capture::{CaptureError, EvidenceReader, RecorderBuilder, MAX_HEADER_BYTES};

/// The committed serve episode's header line (a real one).
fn real_header() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v1/serve-episode/control_timing.jsonl");
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string()
}

fn open_bytes(bytes: &[u8]) -> Result<EvidenceReader, CaptureError> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("control_timing.jsonl");
    std::fs::write(&p, bytes).unwrap();
    EvidenceReader::open(&p)
}

/// The address-space limit the out-of-memory tests run under (2 GiB): far
/// below what they ask for on any host, far above what the test binary
/// needs, so the allocator refuses the same way whatever the machine's
/// memory and `vm.overcommit_memory`.
const CHILD_AS_LIMIT: libc::rlim_t = 2 << 30;

#[test]
fn an_absurd_ring_is_an_out_of_memory_error_not_an_abort() {
    // In a child process of this test binary with RLIMIT_AS, so the result
    // does not depend on the host: an abort would kill the child with a
    // signal, an overcommitted allocation could not succeed under the limit.
    if std::env::var_os("LOOPTIME_OOM_CHILD").is_some() {
        absurd_ring_in_the_child();
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "an_absurd_ring_is_an_out_of_memory_error_not_an_abort",
        "--test-threads=1",
        "--nocapture",
    ])
    .env("LOOPTIME_OOM_CHILD", "1");
    // SAFETY: setrlimit is async-signal-safe and touches no shared state;
    // it runs in the child between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: CHILD_AS_LIMIT,
                rlim_max: CHILD_AS_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {:?}: {text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "the child ran no test: {text}");
}

fn absurd_ring_in_the_child() {
    // 50M cycles x 1024 span slots is terabytes: the allocator refuses it,
    // and build() must say so instead of aborting the process.
    let mut b = RecorderBuilder::new();
    b.max_cycles(50_000_000)
        .max_spans_per_cycle(1024)
        .measure_overhead(false);
    assert!(b.footprint_bytes() > 1 << 40);
    match b.build() {
        Err(CaptureError::OutOfMemory { what, bytes }) => {
            assert_eq!(what, "span slots");
            assert!(bytes > 1 << 40);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

#[test]
fn footprint_grows_with_each_capacity() {
    let f = looptime_capture::footprint_bytes;
    assert!(f(2, 16, 8, 6) == 2 * f(1, 16, 8, 6));
    assert!(f(1, 17, 8, 6) > f(1, 16, 8, 6));
    // A sample slot is 32 bytes (seq, stamp, time of use, source).
    assert!(f(1, 16, 9, 6) == f(1, 16, 8, 6) + 32);
    assert!(f(1, 16, 8, 7) == f(1, 16, 8, 6) + 8);
    assert_eq!(
        f(u64::MAX, 1024, 256, 16),
        u64::MAX,
        "saturates, never wraps"
    );
}

#[test]
fn a_bom_and_crlf_are_accepted_and_noted() {
    let text = format!("\u{feff}{}\r\n", real_header());
    let r = open_bytes(text.as_bytes()).unwrap();
    assert!(r.notes().bom);
    assert!(r.notes().crlf);
    let plain = open_bytes(format!("{}\n", real_header()).as_bytes()).unwrap();
    assert_eq!(plain.notes(), Default::default());
}

#[test]
fn a_file_without_its_header_says_so_on_line_1() {
    let e = open_bytes(b"{\"type\":\"cycle\",\"cycle\":0,\"phase\":\"running\",\"start_ns\":1}\n")
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(msg.contains("control_timing.jsonl:1:"), "{msg}");
    assert!(
        msg.contains("header line") && msg.contains("missing"),
        "{msg}"
    );
    assert!(
        !msg.contains("schema_version missing is not supported"),
        "{msg}"
    );
}

#[test]
fn invalid_utf8_in_the_header_names_line_1() {
    let mut bytes = real_header().into_bytes();
    bytes.splice(10..10, [0xff, 0xfe]);
    bytes.push(b'\n');
    let msg = open_bytes(&bytes).err().unwrap().to_string();
    assert!(msg.contains("control_timing.jsonl:1:"), "{msg}");
    assert!(msg.contains("UTF-8") && msg.contains("byte 11"), "{msg}");
}

#[test]
fn an_unknown_schema_version_names_line_1() {
    let h = real_header().replace("\"schema_version\":1", "\"schema_version\":7");
    let msg = open_bytes(format!("{h}\n").as_bytes())
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("control_timing.jsonl:1: schema_version 7"),
        "{msg}"
    );
}

#[test]
fn a_huge_header_is_refused_without_reading_it_all() {
    // A metadata map just over the byte bound, then a valid cycle.
    let pad = "x".repeat(MAX_HEADER_BYTES);
    let h = real_header().replacen(
        "\"metadata\":{",
        &format!("\"metadata\":{{\"pad\":\"{pad}\","),
        1,
    );
    let msg = open_bytes(format!("{h}\n").as_bytes())
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains(":1:") && msg.contains("longer than"), "{msg}");
}

#[test]
fn a_header_with_too_many_metadata_entries_is_refused_by_count() {
    // Small entries, under the byte bound, but more than a header may hold.
    let entries: Vec<String> = (0..5000).map(|i| format!("\"k{i}\":\"v\"")).collect();
    let h = real_header().replacen(
        "\"metadata\":{",
        &format!("\"metadata\":{{{},", entries.join(",")),
        1,
    );
    let msg = open_bytes(format!("{h}\n").as_bytes())
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("5") && msg.contains("metadata"), "{msg}");
    assert!(msg.contains("at most 4096"), "{msg}");
    // The builder refuses the same count, so the recorder never writes it.
    let mut b = RecorderBuilder::new();
    for i in 0..5000 {
        b.metadata(format!("k{i}"), "v");
    }
    assert!(matches!(
        b.measure_overhead(false).build(),
        Err(CaptureError::InvalidOption { .. })
    ));
}
