//! The fast path against serde: where the fast path accepts a line, serde
//! accepts it too and reads the same fields; where serde refuses, the fast
//! path steps aside. Lines from every fixture, hand-made edges, and
//! mutations of them.

use looptime_capture::CycleRecord;
use proptest::prelude::*;

use super::super::view::CycleView;
use super::{cycle, Bail};

/// The fast path's view, or `Bail`.
fn fast(line: &str) -> Result<CycleView<'_>, Bail> {
    let mut v = CycleView::default();
    cycle(line, &mut v).map(|()| v)
}

/// Assert the fast path agrees with serde on `line`; returns whether the
/// fast path accepted it.
fn agrees(line: &str) -> bool {
    let serde = serde_json::from_str::<CycleRecord>(line);
    match fast(line) {
        Ok(v) => {
            let rec = serde.unwrap_or_else(|e| {
                panic!("the fast path accepted a line serde refuses ({e}): {line}")
            });
            assert_eq!(v, CycleView::of_record(&rec), "{line}");
            // Floats bit for bit (`==` takes -0.0 for 0.0).
            for ((_, a), (_, b)) in v.values.iter().zip(&CycleView::of_record(&rec).values) {
                assert_eq!(
                    a.as_f64().map(f64::to_bits),
                    b.as_f64().map(f64::to_bits),
                    "{line}"
                );
            }
            true
        }
        Err(Bail) => false,
    }
}

fn fixture_lines() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut out = Vec::new();
    for version in ["v1", "v2"] {
        for ep in std::fs::read_dir(root.join(version)).unwrap() {
            for f in std::fs::read_dir(ep.unwrap().path()).unwrap() {
                let p = f.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                if name.starts_with("control_timing") && name.ends_with(".jsonl") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    out.extend(text.lines().skip(1).map(str::to_string));
                }
            }
        }
    }
    out
}

/// A cycle with every field the format has: samples, an input-paced
/// release, values of both kinds and signs, attributes out of order.
const FULL: &str = r#"{"type":"cycle","cycle":7,"phase":"running","start_ns":1000,"end_ns":2000,"cpu_ns":900,"target_ns":990,"sleep_start_ns":500,"wake_ns":995,"spin_margin_ns":50,"spin_ns":20,"overdue":true,"skipped":2,"pace":"input","arrival_ns":980,"input_seq":18446744073709551615,"spans_dropped":1,"samples_dropped":3,"values":{"z":-9223372036854775808,"a":0.1,"m":1e-5,"n":-0.0,"u":18446744073709551615},"spans":[{"stage":"s","parent":null,"depth":0,"start_ns":1001,"wall_ns":10,"cpu_ns":null,"closed_by_cycle_end":true,"attrs":{"b":"2","a":"1"}},{"stage":"t","parent":0,"depth":1,"start_ns":1002,"wall_ns":5}],"samples":[{"source":"cam","seq":4,"stamp_ns":900,"at_ns":1003,"produced":true},{"source":"cam","seq":5,"stamp_ns":901,"at_ns":1004}]}"#;

#[test]
fn every_fixture_line_takes_the_fast_path_and_reads_as_serde() {
    let lines = fixture_lines();
    assert!(lines.len() > 200, "{} fixture lines", lines.len());
    for line in &lines {
        assert!(agrees(line), "the fast path stepped aside from {line}");
    }
}

#[test]
fn a_line_with_every_field_reads_as_serde() {
    assert!(agrees(FULL));
    let v = fast(FULL).unwrap();
    // Sorted as the maps iterate: the attrs (b, a) -> (a, b), the values.
    assert_eq!(v.span_attrs(&v.spans[0]), &[("a", "1"), ("b", "2")]);
    let names: Vec<&str> = v.values.iter().map(|(k, _)| *k).collect();
    assert_eq!(names, ["a", "m", "n", "u", "z"]);
    assert_eq!(v.values[4].1.as_i64(), Some(i64::MIN));
    assert_eq!(
        v.values[2].1.as_f64().map(f64::to_bits),
        Some((-0.0f64).to_bits())
    );
    // Whitespace JSON allows, anywhere between tokens.
    let spaced = FULL
        .replace(',', " ,\t")
        .replace(':', "\r: ")
        .replace('{', "{ \n");
    assert!(agrees(&spaced));
}

#[test]
fn what_serde_reads_differently_or_refuses_steps_aside() {
    let base = r#"{"type":"cycle","cycle":1,"phase":"p","start_ns":5,"values":{"v":1}}"#;
    assert!(agrees(base));
    for (from, to) in [
        // serde_json makes a float of these integers: serde reads them.
        (r#""v":1"#, r#""v":-0"#),
        (r#""v":1"#, r#""v":18446744073709551616"#),
        (r#""v":1"#, r#""v":-9223372036854775809"#),
        // Refused by serde: out of range, leading zero, bad literals.
        (r#""v":1"#, r#""v":1e400"#),
        (r#""v":1"#, r#""v":01"#),
        (r#""v":1"#, r#""v":1."#),
        (r#""v":1"#, r#""v":.5"#),
        (r#""v":1"#, r#""v":1e"#),
        (r#""v":1"#, r#""v":null"#),
        (r#""v":1"#, r#""v":1,"v":2"#),
        (r#""start_ns":5"#, r#""start_ns":5.0"#),
        (r#""start_ns":5"#, r#""start_ns":-5"#),
        (r#""start_ns":5"#, r#""start_ns":18446744073709551616"#),
        (r#""start_ns":5"#, r#""start_ns":null"#),
        (r#""cycle":1"#, r#""cycle":1,"cycle":2"#),
        (r#""phase":"p""#, r#""phase":"p\u0041""#),
        (r#""phase":"p""#, "\"phase\":\"p\tq\""),
        (r#""type":"cycle""#, r#""type":"header""#),
        (r#""type":"cycle""#, r#""type":"cycle","extra":[1,{"a":2}]"#),
        (r#""start_ns":5"#, r#""start_ns":5,"skipped":4294967296"#),
        (r#""start_ns":5"#, r#""start_ns":5,"pace":"later""#),
        (r#""start_ns":5"#, r#""start_ns":5,"overdue":null"#),
        (
            r#""start_ns":5"#,
            r#""start_ns":5,"spans":[{"stage":"s","depth":0,"start_ns":1}]"#,
        ),
        (
            r#""start_ns":5"#,
            r#""start_ns":5,"spans":[{"stage":"s","depth":0,"start_ns":1,"wall_ns":1,"attrs":{"k":"a","k":"b"}}]"#,
        ),
        (
            r#""start_ns":5"#,
            r#""start_ns":5,"samples":[{"source":"s","seq":1,"stamp_ns":1}]"#,
        ),
        (r#""phase":"p","#, ""),
    ] {
        let line = base.replace(from, to);
        assert_ne!(line, base, "{from} is in the base line");
        assert!(!agrees(&line), "the fast path accepted {line}");
    }
    // Cut off anywhere, or followed by anything: serde refuses, so must it.
    for cut in 1..base.len() {
        assert!(!agrees(&base[..cut]), "{}", &base[..cut]);
    }
    assert!(!agrees(&format!("{base}x")));
    assert!(!agrees(&format!("{base}{base}")));
    assert!(!agrees("[\"cycle\",1,\"p\",5]"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Any byte changed, removed or inserted in a real line: where the fast
    /// path still accepts, serde accepts and reads the same.
    #[test]
    fn mutated_lines_agree_with_serde(
        which in 0usize..4,
        at in any::<prop::sample::Index>(),
        byte in prop::sample::select(b"0123456789-+.eE\"\\:,{}[] naultrsfx".to_vec()),
        op in 0u8..3,
    ) {
        let lines = [FULL, r#"{"type":"cycle","cycle":1,"phase":"p","start_ns":5,"values":{"v":12,"w":-3.5e2}}"#,
            r#"{"type":"cycle","cycle":2,"phase":"p","start_ns":5,"spans":[{"stage":"s","parent":null,"depth":0,"start_ns":1,"wall_ns":2,"attrs":{"k":"v"}}]}"#,
            r#"{"type":"cycle","cycle":3,"phase":"p","start_ns":9,"end_ns":null,"pace":"deadline","input_seq":null}"#];
        let mut b = lines[which].as_bytes().to_vec();
        let i = at.index(b.len());
        match op {
            0 => b[i] = byte,
            1 => { b.remove(i); }
            _ => b.insert(i, byte),
        }
        if let Ok(line) = String::from_utf8(b) {
            agrees(&line);
        }
    }

    /// Any integer in an unsigned field, and any string (escapes and
    /// control characters included, which step aside) in a name, read as
    /// serde reads them: the word-at-a-time digit and string scans.
    #[test]
    fn integers_and_strings_read_as_serde(v in any::<u64>(), small in 0u64..100_000, name in "[ -~\t\u{80}-\u{10FFFF}]{0,40}") {
        let phase = serde_json::to_string(&name).unwrap();
        let line = format!(r#"{{"type":"cycle","cycle":{small},"phase":{phase},"start_ns":{v}}}"#);
        let plain = !name.chars().any(|c| c == '"' || c == '\\' || (c as u32) < 0x20);
        prop_assert_eq!(agrees(&line), plain, "{}", line);
        if plain {
            let view = fast(&line).unwrap();
            prop_assert_eq!((view.start_ns, view.cycle, view.phase), (v, small, name.as_str()));
        }
    }

    /// A float value, written in any of the forms JSON allows, reads to the
    /// same bits as serde_json's correctly rounded parse.
    #[test]
    fn float_values_read_bit_for_bit(bits in any::<u64>(), form in 0u8..3, digits in "[1-9][0-9]{0,25}", exp in -330i32..330) {
        let f = f64::from_bits(bits);
        let text = match form {
            0 if f.is_finite() => format!("{f:?}"),
            1 if f.is_finite() => format!("{f:e}"),
            _ => format!("{digits}.{digits}e{exp}"),
        };
        let line = format!(r#"{{"type":"cycle","cycle":1,"phase":"p","start_ns":5,"values":{{"v":{text}}}}}"#);
        let serde_ok = serde_json::from_str::<CycleRecord>(&line).is_ok();
        let accepted = agrees(&line);
        // A finite literal is read by both (serde refuses only overflow).
        prop_assert_eq!(accepted, serde_ok, "{}", line);
    }
}
