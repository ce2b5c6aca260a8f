//! The piece parser on lines the loader's end-to-end tests cannot isolate:
//! two lines of one piece, where the first fails part-way.

use looptime_capture::EvidenceReader;

use super::{parse_piece, Tables};

#[test]
fn a_line_failed_mid_span_leaves_the_next_lines_groups_named() {
    // Line 2's last span names an undeclared stage: the line is refused
    // after its first spans were converted, and their new groups dropped.
    // Line 3 has the same structure and is good: every key of its spans
    // must have a group (a key of the refused line was once remembered as
    // known, so its group was never recorded and its stage vanished from
    // the report under --lenient).
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v2/serve-episode/control_timing.jsonl");
    let header = EvidenceReader::open(&path).unwrap().header().clone();
    let text = std::fs::read_to_string(&path).unwrap();
    let good = text.lines().nth(1).unwrap();
    let at = good.rfind("\"stage\":\"").unwrap() + 9;
    let end = at + good[at..].find('"').unwrap();
    let mut bad = good.to_string();
    bad.replace_range(at..end, "undeclared_stage");
    let t = Tables {
        header: &header,
        command_stage: None,
        comparable: header.clocks.schedule_comparable(),
        fast: true,
    };
    let piece = parse_piece(&t, format!("{bad}\n{good}\n").as_bytes(), 2);
    assert_eq!(piece.bad.len(), 1, "{:?}", piece.bad);
    assert_eq!(piece.bad[0].0, 2);
    assert!(
        piece.bad[0].1.contains("undeclared_stage"),
        "{}",
        piece.bad[0].1
    );
    assert_eq!(piece.cycles.len(), 1);
    assert!(!piece.key.is_empty());
    for key in &piece.key {
        assert!(
            piece.groups.iter().any(|g| g.key == *key),
            "span key {key:x} has no group"
        );
    }
}
