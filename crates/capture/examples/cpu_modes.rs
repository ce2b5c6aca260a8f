//! The recorder's cost per cycle and per span in each CPU-time mode, from
//! Rust, against a clock-read baseline, in one run (docs/performance.md,
//! CPU-time modes).
//!
//! A cycle is the loop's: begin, 10 spans (5 top-level, each with one
//! nested span), end. The baseline does what a minimal hand-made logger
//! does for the same cycle: two raw TSC reads per span and per cycle (22),
//! each stored into a preallocated array. Each round times one chunk of
//! `--cycles` cycles of every case, the case order rotating by round;
//! the figures are medians over rounds of the per-cycle cost, so drift of
//! the machine cancels out. Also timed: one `CLOCK_THREAD_CPUTIME_ID` read.
//!
//!     cargo run --release -p looptime-capture --example cpu_modes -- [--rounds N] [--cycles N]

use looptime_capture::{clock, CpuTimeMode, RecorderBuilder, Release, RingStorage};
use std::hint::black_box;
use std::time::Instant;

const SPANS: usize = 10;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds = arg("--rounds", 301);
    let cycles = arg("--cycles", 200);
    let mut recs: Vec<_> = CpuTimeMode::ALL
        .iter()
        .map(|&mode| {
            let mut b = RecorderBuilder::new();
            b.max_cycles(cycles)
                .max_spans_per_cycle(SPANS)
                .ring(RingStorage::Heap)
                .measure_overhead(false)
                .cpu_time_mode(mode);
            let outer = b.stage("outer").unwrap();
            let inner = b.stage("inner").unwrap();
            let p = b.phase("running").unwrap();
            (mode, b.build().unwrap(), outer, inner, p)
        })
        .collect();
    let raw = quanta::Clock::new();
    let mut buf = vec![0u64; 2 * (SPANS + 1)];
    // Case 0: the baseline; 1..=3: the modes; 4: CPU-clock reads.
    let n_cases = 2 + recs.len();
    let mut per: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); n_cases];
    for round in 0..rounds {
        for k in 0..n_cases {
            let case = (k + round) % n_cases;
            let t0 = Instant::now();
            match case {
                0 => {
                    for _ in 0..cycles {
                        for slot in buf.iter_mut() {
                            *slot = raw.raw();
                        }
                        black_box(&buf);
                    }
                }
                c if c <= recs.len() => {
                    let (_, rec, outer, inner, p) = &mut recs[c - 1];
                    for _ in 0..cycles {
                        rec.begin_cycle(*p, Release::NONE);
                        for _ in 0..SPANS / 2 {
                            let mut o = rec.span(*outer);
                            let _i = o.span(*inner);
                        }
                        rec.end_cycle();
                    }
                }
                _ => {
                    for _ in 0..cycles {
                        black_box(clock::thread_cpu_ns());
                    }
                }
            }
            per[case].push(t0.elapsed().as_nanos() as f64 / cycles as f64);
        }
    }
    for (_, rec, ..) in &recs {
        assert_eq!(
            rec.spans_dropped(),
            0,
            "the bench must not hit the drop path"
        );
    }
    let med: Vec<f64> = per.iter_mut().map(|v| median(v)).collect();
    let base = med[0];
    println!(
        "| case (Rust) | ns per cycle of 10 spans | ratio to the baseline | % of a 1 kHz period |"
    );
    println!("|---|---|---|---|");
    println!(
        "| baseline: 22 raw TSC reads stored | {base:.1} | 1 | {:.3} |",
        base / 1e4
    );
    for (i, (mode, ..)) in recs.iter().enumerate() {
        let m = med[i + 1];
        println!(
            "| recorder, `{mode}` mode | {m:.1} | {:.2} | {:.3} |",
            m / base,
            m / 1e4
        );
    }
    println!(
        "| one CPU-clock read (`CLOCK_THREAD_CPUTIME_ID`) | {:.1} | | |",
        med[n_cases - 1]
    );
    println!("(medians over {rounds} rotating rounds of {cycles} cycles)");
}
