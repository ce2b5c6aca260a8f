//! Throughput harness for `bench/analyze_throughput.sh`.
//!
//! * `throughput gen DIR CYCLES`: write a synthetic episode (10 spans a cycle).
//! * `throughput floor DIR`: the floor, reading control_timing.jsonl line by
//!   line into the schema types with serde_json alone (one thread).
//! * `throughput analyze DIR`: the whole analysis (load + polars metrics).
//!
//! `floor` and `analyze` print one JSON line: seconds, bytes, cycles, and
//! the process's peak RSS (VmHWM) in bytes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use looptime_capture::format::{CycleTag, SpanRecord};
use looptime_capture::{CycleRecord, EvidenceReader, RecorderBuilder, Release, ValueKind};

fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn gen(dir: &Path, cycles: u64) {
    std::fs::create_dir_all(dir).unwrap();
    // A real header from a tiny recorder with the same names.
    let mut b = RecorderBuilder::new();
    b.max_cycles(cycles as usize)
        .nominal_period_ns(10_000_000)
        .measure_overhead(false);
    let stages = [
        "camera_read",
        "viewer_control",
        "policy",
        "adapter_decode",
        "executor",
        "robot_send_command",
        "recording",
        "log",
        "safety",
        "publish",
    ];
    for s in stages {
        b.stage(s).unwrap();
    }
    let mode = b.attr_key("mode").unwrap();
    b.attr_value(mode, "inline").unwrap();
    b.phase("warmup").unwrap();
    b.phase("running").unwrap();
    b.value("robot_state_seq", ValueKind::Int, "count").unwrap();
    b.value("command_success_rate", ValueKind::Float, "ratio")
        .unwrap();
    let mut small = b.clone();
    small.max_cycles(1);
    let rec = small.build().unwrap();
    let tmp = tempdir(dir);
    let mut r = rec;
    r.begin_cycle(r.default_phase(), Release::NONE);
    r.end_cycle();
    let rep = r
        .finish(&tmp, looptime_capture::CaptureStatus::Complete)
        .unwrap();
    let header_line = std::fs::read_to_string(&rep.cycles_path)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let _ = std::fs::remove_dir_all(&tmp);

    let f = std::fs::File::create(dir.join("control_timing.jsonl")).unwrap();
    let mut w = BufWriter::with_capacity(1 << 20, f);
    writeln!(w, "{header_line}").unwrap();
    let mut x = 0x1234_5678u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let t0 = 1_000_000_000_000u64;
    for i in 0..cycles {
        let target = t0 + i * 10_000_000;
        let start = target + 200 + rnd() % 2_000;
        let mut t = start + 1_000;
        let spans: Vec<SpanRecord> = stages
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let wall = 50_000 + rnd() % 300_000;
                let span = SpanRecord {
                    stage: s.to_string(),
                    parent: (k == 5).then_some(4),
                    depth: (k == 5) as u32,
                    start_ns: t,
                    wall_ns: wall,
                    cpu_ns: Some(wall - wall / 10),
                    closed_by_cycle_end: false,
                    attrs: if k == 0 {
                        BTreeMap::from([("mode".to_string(), "inline".to_string())])
                    } else {
                        BTreeMap::new()
                    },
                };
                t += wall + 500;
                span
            })
            .collect();
        let rec = CycleRecord {
            kind: CycleTag::Cycle,
            cycle: i,
            phase: if i < cycles / 10 { "warmup" } else { "running" }.into(),
            start_ns: start,
            end_ns: Some(t),
            cpu_ns: None,
            spin_margin_ns: None,
            spin_ns: None,
            target_ns: Some(target),
            sleep_start_ns: Some(target - 6_000_000),
            wake_ns: Some(start - 100),
            overdue: false,
            skipped: 0,
            pace: Default::default(),
            arrival_ns: None,
            read_ns: None,
            arrival_bound_ns: None,
            input_seq: None,
            spans_dropped: 0,
            samples: Vec::new(),
            samples_dropped: 0,
            values: BTreeMap::from([
                (
                    "command_success_rate".to_string(),
                    serde_json::Number::from_f64(0.999).unwrap(),
                ),
                (
                    "robot_state_seq".to_string(),
                    serde_json::Number::from(i + 1),
                ),
            ]),
            spans,
        };
        serde_json::to_writer(&mut w, &rec).unwrap();
        w.write_all(b"\n").unwrap();
    }
    w.flush().unwrap();
}

fn tempdir(base: &Path) -> std::path::PathBuf {
    let p = base.join(format!(".gen-{}", std::process::id()));
    std::fs::create_dir_all(&p).unwrap();
    p
}

fn floor(dir: &Path) -> (u64, u64) {
    let path = dir.join("control_timing.jsonl");
    let bytes = std::fs::metadata(&path).unwrap().len();
    let _header = EvidenceReader::open(&path).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let mut n = 0u64;
    let mut spans = 0u64;
    for (i, line) in BufReader::with_capacity(1 << 16, f).lines().enumerate() {
        let line = line.unwrap();
        if i == 0 {
            continue;
        }
        let c: CycleRecord = serde_json::from_str(&line).unwrap();
        n += 1;
        spans += c.spans.len() as u64;
    }
    std::hint::black_box(spans);
    (bytes, n)
}

fn analyze(dir: &Path) -> (u64, u64) {
    let t0 = Instant::now();
    let ev = looptime_analyze::load_episode(dir, looptime_analyze::LoadOptions::default()).unwrap();
    let t1 = Instant::now();
    let bytes = ev.bytes;
    let a = looptime_analyze::analyze(ev).unwrap();
    eprintln!(
        "load {:.3} s (peak RSS {} MB), metrics {:.3} s",
        (t1 - t0).as_secs_f64(),
        peak_rss() >> 20,
        t1.elapsed().as_secs_f64()
    );
    std::hint::black_box(&a);
    (bytes, a.report.capture.retained_cycles)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: throughput gen DIR CYCLES | floor DIR | analyze DIR";
    let (mode, dir) = match (args.get(1), args.get(2)) {
        (Some(m), Some(d)) => (m.as_str(), Path::new(d)),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    if mode == "gen" {
        let n = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20_000);
        gen(dir, n);
        return;
    }
    let t0 = Instant::now();
    let (bytes, cycles) = match mode {
        "floor" => floor(dir),
        "analyze" => analyze(dir),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{{\"mode\":\"{mode}\",\"seconds\":{secs:.4},\"bytes\":{bytes},\"cycles\":{cycles},\"peak_rss\":{}}}",
        peak_rss()
    );
}
