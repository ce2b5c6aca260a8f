//! The loader's whole-file differential test: every fixture, and files
//! generated from the v2 serve fixture with what the fast path must read
//! as serde does or step aside from (permuted keys, duplicate keys inside
//! span and sample objects, negative and i64-range values, whitespace
//! before `}` and `]`, non-ASCII and `\u` escapes, input-paced and
//! sample-carrying lines), loaded both ways and held equal.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::loads_alike_both_ways;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

#[test]
fn every_fixture_loads_alike_both_ways() {
    for dir in [
        "v1/serve-episode",
        "v1/synthetic-basic",
        "v2/serve-episode",
        "v2/synthetic-threads",
    ] {
        let jsonl = std::fs::read(fixture(dir).join("control_timing.jsonl")).unwrap();
        let summary = std::fs::read(fixture(dir).join("control_timing_summary.json")).ok();
        loads_alike_both_ways(&fixture(dir), &jsonl, summary.as_deref())
            .unwrap_or_else(|e| panic!("{dir}: {e}"));
    }
}

/// The v2 serve fixture's header with a source `cam` on the host clock
/// (50 ms staleness limit), and its first `n` cycle lines as values.
fn base(n: usize) -> (Value, Vec<Map<String, Value>>) {
    let text = std::fs::read_to_string(fixture("v2/serve-episode/control_timing.jsonl")).unwrap();
    let mut lines = text.lines();
    let mut header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    header["sources"] =
        json!([{"name": "cam", "clock": "host_monotonic", "max_age_ns": 50_000_000}]);
    header["capacity"]["max_samples_per_cycle"] = json!(4);
    // A non-ASCII attribute value the edits use.
    header["attributes"][0]["values"]
        .as_array_mut()
        .unwrap()
        .push(json!("caméra"));
    let cycles = lines
        .take(n)
        .map(|l| match serde_json::from_str(l).unwrap() {
            Value::Object(m) => m,
            _ => unreachable!("a cycle line is an object"),
        })
        .collect();
    (header, cycles)
}

/// One JSON object written with `extra` members first (raw text: a
/// duplicate key, or the spans written by hand), then its members in
/// `order` (a permutation of its keys by index), and `pad` before its
/// closing brace.
fn object(
    m: &Map<String, Value>,
    order: &[usize],
    extra: &[(String, String)],
    pad: &str,
) -> String {
    let keys: Vec<&String> = m.keys().collect();
    let mut parts: Vec<String> = extra.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    parts.extend(
        order
            .iter()
            .map(|&i| format!("\"{}\":{}", keys[i], m[keys[i]])),
    );
    format!("{{{}{pad}}}", parts.join(","))
}

/// What one generated line carries beside its fixture cycle.
#[derive(Clone, Debug)]
struct Edit {
    /// A permutation seed for the cycle's keys and its spans' keys.
    perm: u64,
    /// Input-paced: `pace`, `arrival_ns`, `input_seq`, no deadline fields.
    input: bool,
    /// A sample of `cam` used (and one published) by the cycle.
    sample: bool,
    /// A key twice in the first span (0: none, 1: `wall_ns`, 2: `attrs`).
    dup_span: u8,
    /// A key twice in the sample (with `sample`).
    dup_sample: bool,
    /// An edge value for `robot_state_seq` (an int value).
    value: i8,
    /// Spaces before the closing `}` and `]`.
    pad: bool,
    /// `\u` escapes in a stage name, non-ASCII in an attribute value.
    escape: bool,
}

fn edit() -> impl Strategy<Value = Edit> {
    (
        any::<u64>(),
        any::<bool>(),
        any::<bool>(),
        0u8..3,
        any::<bool>(),
        0i8..6,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(perm, input, sample, dup_span, dup_sample, value, pad, escape)| Edit {
                perm,
                input,
                sample,
                dup_span,
                dup_sample,
                value,
                pad,
                escape,
            },
        )
}

fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// The line of cycle `c` (its index `i` in the file) under `e`.
fn line(mut c: Map<String, Value>, i: usize, e: &Edit) -> String {
    let start = c["start_ns"].as_i64().unwrap();
    if e.input {
        for k in ["target_ns", "sleep_start_ns", "wake_ns"] {
            c.remove(k);
        }
        c.insert("pace".into(), json!("input"));
        c.insert("arrival_ns".into(), json!(start - 20_000));
        c.insert("input_seq".into(), json!(i as u64 + 1));
    }
    c["values"]["robot_state_seq"] = match e.value {
        0 => json!(-5),
        1 => json!(i64::MAX),
        2 => json!(i64::MIN),
        3 => json!(u64::MAX),
        _ => c["values"]["robot_state_seq"].clone(),
    };
    let pad = if e.pad { "  " } else { "" };
    let mut spans: Vec<String> = Vec::new();
    for (k, s) in c["spans"].as_array().unwrap().iter().enumerate() {
        let m = s.as_object().unwrap();
        let mut m = m.clone();
        if e.escape && k == 0 {
            m.insert("attrs".into(), json!({"mode": "caméra"}));
        }
        let mut text = object(&m, &permutation(m.len(), e.perm ^ k as u64), &[], pad);
        if e.escape && k == 1 {
            // The stage name with its first letter as a \u escape.
            let name = m["stage"].as_str().unwrap();
            let esc = format!("\\u{:04x}{}", name.as_bytes()[0], &name[1..]);
            text = text.replace(
                &format!("\"stage\":\"{name}\""),
                &format!("\"stage\":\"{esc}\""),
            );
        }
        if k == 0 && e.dup_span > 0 {
            let (key, value) = match e.dup_span {
                1 => ("wall_ns", "1"),
                _ => ("attrs", "{}"),
            };
            text = format!("{{\"{key}\":{value},{}", &text[1..]);
        }
        spans.push(text);
    }
    let mut samples = Vec::new();
    if e.sample {
        let mut used = Map::new();
        used.insert("source".into(), json!("cam"));
        used.insert("seq".into(), json!(i as u64 / 2));
        used.insert("stamp_ns".into(), json!(start - 3_000_000));
        used.insert("at_ns".into(), json!(start + 1_000));
        let extra = if e.dup_sample {
            vec![("seq".to_string(), "7".to_string())]
        } else {
            vec![]
        };
        samples.push(object(&used, &permutation(4, e.perm), &extra, pad));
        samples.push(format!(
            "{{\"source\":\"cam\",\"seq\":{},\"stamp_ns\":{},\"at_ns\":{},\"produced\":true{pad}}}",
            i + 1,
            start,
            start + 2_000
        ));
    }
    c.remove("spans");
    let mut extra = vec![("spans".to_string(), format!("[{}{pad}]", spans.join(",")))];
    if !samples.is_empty() {
        extra.push(("samples".into(), format!("[{}{pad}]", samples.join(","))));
    }
    let order = permutation(c.len(), e.perm.rotate_left(17));
    object(&c, &order, &extra, pad)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Files of 40 generated lines load alike both ways, strict and lenient.
    #[test]
    fn generated_files_load_alike_both_ways(edits in proptest::collection::vec(edit(), 40)) {
        let (header, cycles) = base(40);
        let mut text = format!("{header}\n");
        for (i, (c, e)) in cycles.into_iter().zip(&edits).enumerate() {
            text.push_str(&line(c, i, e));
            text.push('\n');
        }
        let dir = Path::new("/generated/episode");
        if let Err(e) = loads_alike_both_ways(dir, text.as_bytes(), None) {
            prop_assert!(false, "{e}\nfile:\n{text}");
        }
    }
}

#[test]
fn a_generated_file_with_every_edit_is_read_by_both_ways_and_not_refused() {
    // The edits that keep a line valid (no duplicate key, values in i64
    // range, no u64::MAX in an int value): both ways must accept all 40
    // lines, so the differential compares evidence, not two refusals.
    let (header, cycles) = base(40);
    let mut text = format!("{header}\n");
    for (i, c) in cycles.into_iter().enumerate() {
        let e = Edit {
            perm: i as u64 * 7919,
            input: i >= 20,
            sample: i % 2 == 0,
            dup_span: 0,
            dup_sample: false,
            value: (i % 3) as i8,
            pad: i % 4 == 1,
            escape: i % 5 == 2,
        };
        text.push_str(&line(c, i, &e));
        text.push('\n');
    }
    let dir = Path::new("/generated/episode");
    loads_alike_both_ways(dir, text.as_bytes(), None).unwrap();
    let opts = crate::LoadOptions::default();
    let ev = crate::load_episode_bytes(dir, text.as_bytes(), None, opts).unwrap();
    assert_eq!(ev.cycles.len(), 40);
    assert_eq!(ev.cycles.iter().filter(|c| c.input_paced).count(), 20);
    // 20 cycles with a used and a published sample each.
    assert_eq!(ev.samples.len(), 40);
}

#[test]
fn the_edge_values_read_as_the_evidence_format_says_both_ways() {
    // From the v2 serve fixture's first cycle: `-0` in an int value is 0;
    // `null` on a field with a default is the default; a key twice in
    // `values` or a span's `attrs` keeps the last; `1e400` is refused (not
    // a finite number); a key twice in the record itself is refused.
    let text = std::fs::read_to_string(fixture("v2/serve-episode/control_timing.jsonl")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let cycle = lines.next().unwrap();
    let load = |line: &str| {
        let file = format!("{header}\n{line}\n");
        let dir = Path::new("/edge/episode");
        loads_alike_both_ways(dir, file.as_bytes(), None).unwrap();
        crate::load_episode_bytes(dir, file.as_bytes(), None, crate::LoadOptions::default())
    };
    let col = |ev: &crate::Evidence, name: &str| {
        let i = ev
            .header
            .values
            .iter()
            .position(|v| v.name == name)
            .unwrap();
        ev.values[i]
    };
    let ev = load(&cycle.replace("\"robot_state_seq\":1", "\"robot_state_seq\":-0")).unwrap();
    assert_eq!(col(&ev, "robot_state_seq"), crate::evidence::Cell::Int(0));
    let nulls = cycle
        .replace("\"overdue\":false", "\"overdue\":null")
        .replace("\"skipped\":0", "\"skipped\":null")
        .replace("\"attrs\":{\"mode\":\"background\"}", "\"attrs\":null");
    let ev = load(&nulls).unwrap();
    assert!(!ev.cycles[0].overdue && ev.cycles[0].skipped == 0);
    let ev = load(&cycle.replace(
        "\"robot_state_seq\":1",
        "\"robot_state_seq\":5,\"robot_state_seq\":7",
    ))
    .unwrap();
    assert_eq!(col(&ev, "robot_state_seq"), crate::evidence::Cell::Int(7));
    let ev = load(&cycle.replace(
        "\"attrs\":{\"mode\":\"background\"}",
        "\"attrs\":{\"mode\":\"inline\",\"mode\":\"background\"}",
    ))
    .unwrap();
    assert_eq!(ev.groups[0].attrs["mode"], "background");
    let e = load(&cycle.replace(
        "\"command_success_rate\":1.0",
        "\"command_success_rate\":1e400",
    ))
    .unwrap_err();
    assert!(e.to_string().contains("number out of range"), "{e}");
    let e = load(&cycle.replace("\"overdue\":false", "\"overdue\":false,\"overdue\":false"))
        .unwrap_err();
    assert!(e.to_string().contains("duplicate field `overdue`"), "{e}");
}
