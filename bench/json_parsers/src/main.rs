//! One core's typed parse of every cycle line of an episode into
//! `CycleRecord`: serde_json (the analyzer's floor), sonic-rs and
//! simd-json, interleaved, medians of ROUNDS; then whether each reads every
//! line exactly as serde_json does (integers above 2^53, float bits) and
//! what each says about damaged lines.

use std::time::Instant;

use looptime_capture::CycleRecord;

type Parse = fn(&mut [u8]) -> Result<CycleRecord, String>;

fn serde(line: &mut [u8]) -> Result<CycleRecord, String> {
    serde_json::from_slice(line).map_err(|e| e.to_string())
}
fn sonic(line: &mut [u8]) -> Result<CycleRecord, String> {
    sonic_rs::from_slice(line).map_err(|e| e.to_string())
}
fn simd(line: &mut [u8]) -> Result<CycleRecord, String> {
    simd_json::serde::from_slice(line).map_err(|e| e.to_string())
}

const PARSERS: [(&str, Parse); 3] = [
    ("serde_json", serde),
    ("sonic-rs", sonic),
    ("simd-json", simd),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).expect("usage: EPISODE_DIR [ROUNDS]");
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(3);
    let text = std::fs::read(format!("{dir}/control_timing.jsonl")).expect("read the JSONL");
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .skip(1)
        .filter(|l| !l.is_empty())
        .collect();
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    let mut scratch = Vec::new();
    let mut times = vec![Vec::new(); PARSERS.len()];
    for _ in 0..rounds {
        for (k, (_, parse)) in PARSERS.iter().enumerate() {
            let t = Instant::now();
            let mut spans = 0usize;
            for l in &lines {
                // simd-json parses in place: every parser gets the same copy.
                scratch.clear();
                scratch.extend_from_slice(l);
                spans += parse(&mut scratch).expect("a good line").spans.len();
            }
            std::hint::black_box(spans);
            times[k].push(t.elapsed().as_secs_f64());
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let floor = median(&mut times[0].clone());
    println!(
        "{} lines, {:.1} MB, medians of {rounds} interleaved rounds, one thread",
        lines.len(),
        bytes as f64 / 1e6
    );
    println!("| parser | s | MB/s | speed / serde_json |");
    println!("|---|---|---|---|");
    for (k, (name, _)) in PARSERS.iter().enumerate() {
        let s = median(&mut times[k]);
        println!(
            "| {name} | {s:.3} | {:.0} | {:.2}x |",
            bytes as f64 / 1e6 / s,
            floor / s
        );
    }
    exactness(&lines);
}

/// Every line as serde_json reads it, and a few damaged lines' messages.
fn exactness(lines: &[&[u8]]) {
    let mut scratch = Vec::new();
    let edge = br#"{"type":"cycle","cycle":18446744073709551615,"phase":"p","start_ns":9007199254740993,"values":{"a":0.30000000000000004,"b":9007199254740993,"c":-9223372036854775808,"d":2.2250738585072014e-308}}"#;
    let mut all: Vec<&[u8]> = lines.to_vec();
    all.push(edge);
    for (name, parse) in &PARSERS[1..] {
        let mut differ = 0usize;
        for l in &all {
            scratch.clear();
            scratch.extend_from_slice(l);
            let theirs = parse(&mut scratch);
            scratch.clear();
            scratch.extend_from_slice(l);
            let ours = serde(&mut scratch);
            let same = match (&theirs, &ours) {
                (Ok(a), Ok(b)) => a == b && bits(a) == bits(b),
                _ => false,
            };
            differ += !same as usize;
        }
        println!(
            "{name}: {differ} of {} lines read differently from serde_json",
            all.len()
        );
    }
    let damaged: [&[u8]; 3] = [
        br#"{"type":"cycle","cycle":"seven","phase":"p","start_ns":1}"#,
        br#"{"type":"cycle","cycle":1,"phase":"p","start_ns":1,"spans":[{"stage":"s","depth":0,"start_ns":1,"wall_ns":-4}]}"#,
        br#"{"type":"cycle","cycle":1,"phase":"p","start_"#,
    ];
    for d in damaged {
        for (name, parse) in &PARSERS {
            scratch.clear();
            scratch.extend_from_slice(d);
            println!(
                "  {name}: {}",
                parse(&mut scratch).err().unwrap_or_default()
            );
        }
    }
}

fn bits(r: &CycleRecord) -> Vec<Option<u64>> {
    r.values
        .values()
        .map(|n| n.as_f64().map(f64::to_bits))
        .collect()
}
