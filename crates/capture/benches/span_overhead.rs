//! Cost of one span, side by side with its floor and with other tools.
//!
//! Every case times chunks of `CHUNK` operations; bookkeeping between
//! chunks (starting a new cycle, a puffin frame) is not timed, so each
//! figure is the per-operation cost in steady state.
//!
//! * `a_floor_two_tsc_reads`: two raw TSC reads stored into a preallocated array.
//! * `b_looptime_span_wall`: a looptime span, wall time only.
//! * `c_looptime_span_cpu`: a looptime span with thread CPU time.
//! * `d_two_thread_cpu_reads`: two `CLOCK_THREAD_CPUTIME_ID` reads.
//! * `e_puffin_scope`: `puffin::profile_scope!` with scopes on.
//! * `f_tracing_span`: a `tracing` span created, entered and exited under a
//!   registry subscriber.
//! * `g_looptime_span_wall_shm`: (b) with the ring in a shared-memory file
//!   in /dev/shm instead of the heap (b and c use the heap ring).
//! * `h_looptime_span_wall_shm_watched`: (g) while another thread reads the
//!   ring's newest 500 cycles back to back, as `looptime watch` does (at
//!   most 20 times a second; here without pause: the worst case).
//! * `interleaved` (printed after the criterion cases): (g) against (b) in
//!   alternating chunks, which cancels the machine's drift.
//! * `samples` (printed after them): a data-age sample
//!   (`Recorder::sample`) against a wall-only span (b), both on the heap
//!   ring, in alternating chunks of 256 (a cycle's sample slots).
//! * `status` (printed last): a cycle (begin and end, with a target) on a
//!   recorder with the live status on against one with it off
//!   ([`RecorderBuilder::live_status`]), in alternating chunks of 1,024
//!   cycles. `LOOPTIME_BENCH_ONLY=status` runs this one alone.
//!
//! Run: `cargo bench -p looptime-capture --bench span_overhead`; the ratios are
//! written by `bench/span_ratios.py` into docs/performance.md form.
//! `LOOPTIME_BENCH_SCALE=0.05` scales every case's measuring time and the
//! interleaved rounds down (the docs runner's small size: it checks that
//! the bench runs, not its figures).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use looptime_capture::ring::RingReader;
use looptime_capture::{clock, Recorder, RecorderBuilder, Release, RingStorage, StageId};

const CHUNK: u64 = 1024;

/// `LOOPTIME_BENCH_SCALE` (default 1): the share of the full measuring
/// time and rounds to run.
fn scale() -> f64 {
    std::env::var("LOOPTIME_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0 && *s <= 1.0)
        .unwrap_or(1.0)
}

/// `full` rounds scaled by [`scale`], odd (a median of its own) and at
/// least 11.
fn rounds(full: usize) -> usize {
    ((full as f64 * scale()) as usize).max(11) | 1
}

fn chunked<S>(
    iters: u64,
    state: &mut S,
    mut setup: impl FnMut(&mut S),
    mut op: impl FnMut(&mut S),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        setup(state);
        let t0 = Instant::now();
        for _ in 0..n {
            op(state);
        }
        total += t0.elapsed();
        left -= n;
    }
    total
}

fn spans(c: &mut Criterion) {
    let mut g = c.benchmark_group("span");
    g.measurement_time(Duration::from_secs_f64(3.0 * scale()));
    g.warm_up_time(Duration::from_secs_f64(scale()));

    g.bench_function("a_floor_two_tsc_reads", |b| {
        let q = quanta::Clock::new();
        let mut st = (vec![(0u64, 0u64); CHUNK as usize], 0usize);
        b.iter_custom(|iters| {
            chunked(
                iters,
                &mut st,
                |st| st.1 = 0,
                |st| {
                    let s = q.raw();
                    let e = q.raw();
                    st.0[st.1] = (s, e);
                    st.1 += 1;
                },
            )
        });
        black_box(&st.0);
    });

    let shm = || RingStorage::SharedMemory(looptime_capture::ring::DEFAULT_RING_DIR.into());
    for (name, cpu, storage, watched) in [
        ("b_looptime_span_wall", false, RingStorage::Heap, false),
        ("c_looptime_span_cpu", true, RingStorage::Heap, false),
        ("g_looptime_span_wall_shm", false, shm(), false),
        ("h_looptime_span_wall_shm_watched", false, shm(), true),
    ] {
        // Built once per case: criterion calls the closure several times.
        let (mut rec, stage) = recorder(cpu, storage.clone());
        let watcher = watched.then(|| Watcher::start(&rec));
        let phase = rec.default_phase();
        let mut ran = false;
        g.bench_function(name, |b| {
            ran = true;
            b.iter_custom(|iters| {
                chunked(
                    iters,
                    &mut rec,
                    |r| {
                        r.end_cycle();
                        r.begin_cycle(phase, Release::NONE);
                    },
                    |r| {
                        let _s = r.span(stage);
                    },
                )
            });
        });
        if let Some(w) = watcher {
            let reads = w.stop();
            // A case left out by a name filter never ran, so nothing to check.
            assert!(!ran || reads > 0, "the watcher must have read the ring");
        }
        assert_eq!(
            rec.spans_dropped(),
            0,
            "the bench must not hit the drop path"
        );
    }

    g.bench_function("d_two_thread_cpu_reads", |b| {
        b.iter_custom(|iters| {
            chunked(
                iters,
                &mut (),
                |_| {},
                |_| {
                    black_box(clock::thread_cpu_ns());
                    black_box(clock::thread_cpu_ns());
                },
            )
        });
    });

    g.bench_function("e_puffin_scope", |b| {
        puffin::set_scopes_on(true);
        b.iter_custom(|iters| {
            chunked(
                iters,
                &mut (),
                |_| puffin::GlobalProfiler::lock().new_frame(),
                |_| {
                    puffin::profile_scope!("stage");
                },
            )
        });
        puffin::set_scopes_on(false);
    });

    g.bench_function("f_tracing_span", |b| {
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            b.iter_custom(|iters| {
                chunked(
                    iters,
                    &mut (),
                    |_| {},
                    |_| {
                        let span = tracing::info_span!("stage");
                        let _e = span.enter();
                    },
                )
            });
        });
    });
    g.finish();
}

fn recorder(cpu: bool, storage: RingStorage) -> (Recorder, StageId) {
    let mut builder = RecorderBuilder::new();
    builder
        .max_cycles(64)
        .max_spans_per_cycle(CHUNK as usize)
        .measure_overhead(false)
        .ring(storage.clone());
    let stage = builder.stage_with_cpu_time("stage", cpu).unwrap();
    let rec = builder.build().unwrap();
    assert_eq!(
        rec.ring_path().is_some(),
        storage != RingStorage::Heap,
        "{:?}",
        rec.ring_note()
    );
    (rec, stage)
}

/// A thread reading the recorder's ring back to back, read-only.
struct Watcher {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Watcher {
    fn start(rec: &Recorder) -> Watcher {
        let reader = RingReader::open(rec.ring_path().unwrap()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut reads = 0;
            while !flag.load(Ordering::Relaxed) {
                black_box(reader.read(Some(500)).unwrap());
                reads += 1;
            }
            reads
        });
        Watcher { stop, thread }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// (g) against (b) with the machine's drift cancelled: chunks of spans on
/// the heap ring and on the shared-memory ring alternate (which goes first
/// alternates too), each chunk timed on its own; the medians of the
/// per-span costs and their ratio are printed and saved to
/// `target/criterion/span/interleaved.json` for `bench/span_ratios.py`.
fn interleaved() {
    let n_rounds = rounds(4001);
    let storages = [
        RingStorage::Heap,
        RingStorage::SharedMemory(looptime_capture::ring::DEFAULT_RING_DIR.into()),
    ];
    let mut recs: Vec<(Recorder, StageId)> = storages
        .iter()
        .map(|s| recorder(false, s.clone()))
        .collect();
    let mut per_span = [Vec::with_capacity(n_rounds), Vec::with_capacity(n_rounds)];
    for round in 0..n_rounds {
        for k in [round % 2, 1 - round % 2] {
            let (rec, stage) = &mut recs[k];
            let phase = rec.default_phase();
            rec.end_cycle();
            rec.begin_cycle(phase, Release::NONE);
            let t0 = Instant::now();
            for _ in 0..CHUNK {
                let _s = rec.span(*stage);
            }
            per_span[k].push(t0.elapsed().as_nanos() as f64 / CHUNK as f64);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let heap = median(&mut per_span[0]);
    let shm = median(&mut per_span[1]);
    println!(
        "span/interleaved: heap ring {heap:.2} ns, shared-memory ring {shm:.2} ns, ratio {:.3} ({n_rounds} alternating chunks of {CHUNK} spans each)",
        shm / heap
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion/span");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("interleaved.json"),
        format!("{{\"heap_ns\": {heap}, \"shm_ns\": {shm}, \"rounds\": {n_rounds}}}\n"),
    );
}

/// One thread's span while another thread records at full speed into its
/// own recorder of the same registry, against the same span while that
/// other thread spins without recording: both keep a core busy, so the
/// difference is what the other thread's stores cost this one (false
/// sharing would show here). Alternating rounds, medians of the per-span
/// cost; written to `target/criterion/span/threads.json`.
fn threads() {
    let n_rounds = rounds(4001);
    let mut control = RecorderBuilder::new();
    control
        .max_cycles(64)
        .max_spans_per_cycle(CHUNK as usize)
        .measure_overhead(false)
        .ring(RingStorage::Heap);
    let stage = control.stage_with_cpu_time("stage", false).unwrap();
    let mut other = RecorderBuilder::new();
    other
        .max_cycles(64)
        .max_spans_per_cycle(CHUNK as usize)
        .measure_overhead(false)
        .ring(RingStorage::Heap);
    let other_stage = other.stage_with_cpu_time("stage", false).unwrap();
    let mut reg = looptime_capture::Registry::new(control);
    reg.thread("background", other).unwrap();
    let mut set = reg.build().unwrap();
    let mut bg = set.threads.remove(0);
    let rec = &mut set.control;
    // 0: stop, 1: spin idle, 2: record.
    let mode = Arc::new(std::sync::atomic::AtomicU8::new(1));
    let m = mode.clone();
    // Spans the other thread has recorded so far.
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let d = done.clone();
    let spans = std::thread::spawn(move || {
        let p = bg.default_phase();
        let mut n = 0u64;
        loop {
            match m.load(Ordering::Relaxed) {
                0 => break n,
                2 => {
                    bg.begin_cycle(p, Release::NONE);
                    for _ in 0..CHUNK {
                        let _s = bg.span(other_stage);
                    }
                    bg.end_cycle();
                    n += CHUNK;
                    d.store(n, Ordering::Relaxed);
                }
                _ => std::hint::spin_loop(),
            }
        }
    });
    let mut per_span = [Vec::with_capacity(n_rounds), Vec::with_capacity(n_rounds)];
    let phase = rec.default_phase();
    for round in 0..n_rounds {
        for k in [round % 2, 1 - round % 2] {
            mode.store(1 + k as u8, Ordering::Relaxed);
            rec.end_cycle();
            rec.begin_cycle(phase, Release::NONE);
            let t0 = Instant::now();
            for _ in 0..CHUNK {
                let _s = rec.span(stage);
            }
            per_span[k].push(t0.elapsed().as_nanos() as f64 / CHUNK as f64);
        }
    }
    // On a loaded host the other thread may not have run during the
    // rounds (a small run's are a few ms): let it record once before it
    // stops, so that the check below is about the recorder, not the
    // scheduler (10 s at most).
    mode.store(2, Ordering::Relaxed);
    let waited = Instant::now();
    while done.load(Ordering::Relaxed) == 0 && waited.elapsed().as_secs() < 10 {
        std::thread::yield_now();
    }
    mode.store(0, Ordering::Relaxed);
    let recorded = spans.join().unwrap();
    assert!(recorded > 0, "the other thread must have recorded");
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let idle = median(&mut per_span[0]);
    let busy = median(&mut per_span[1]);
    println!(
        "threads: span {idle:.2} ns with the other thread idle, {busy:.2} ns while it records ({recorded} spans): ratio {:.3}",
        busy / idle
    );
    // The workspace's target directory, whatever the working directory
    // cargo runs the bench from (it is the crate's own).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion/span");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("threads.json"),
        format!("{{\"idle_ns\": {idle}, \"busy_ns\": {busy}, \"other_spans\": {recorded}, \"rounds\": {n_rounds}}}\n"),
    );
}

/// A data-age sample against a wall-only span: alternating chunks of
/// `N` of each (a cycle holds at most 256 samples, so each chunk is one
/// cycle of either), medians of the per-operation cost and their ratio,
/// printed and written to `target/criterion/span/samples.json`.
fn samples() {
    let n_rounds = rounds(4001);
    const N: usize = 256;
    let mut b = RecorderBuilder::new();
    b.max_cycles(64)
        .max_spans_per_cycle(N)
        .max_samples_per_cycle(N)
        .measure_overhead(false)
        .ring(RingStorage::Heap);
    let stage = b.stage_with_cpu_time("stage", false).unwrap();
    let source = b
        .source("camera", looptime_capture::SourceSpec::default())
        .unwrap();
    let mut rec = b.build().unwrap();
    let phase = rec.default_phase();
    let mut per_op = [Vec::with_capacity(n_rounds), Vec::with_capacity(n_rounds)];
    for round in 0..n_rounds {
        for k in [round % 2, 1 - round % 2] {
            rec.end_cycle();
            rec.begin_cycle(phase, Release::NONE);
            let t0 = Instant::now();
            if k == 0 {
                for _ in 0..N {
                    let _s = rec.span(stage);
                }
            } else {
                for i in 0..N as u64 {
                    rec.sample(source, black_box(i), black_box(i));
                }
            }
            per_op[k].push(t0.elapsed().as_nanos() as f64 / N as f64);
        }
    }
    assert_eq!(rec.spans_dropped() + rec.samples_dropped(), 0);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let span = median(&mut per_op[0]);
    let sample = median(&mut per_op[1]);
    println!(
        "span/samples: wall-only span {span:.2} ns, sample {sample:.2} ns, ratio {:.3} ({n_rounds} alternating chunks of {N} each)",
        sample / span
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion/span");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("samples.json"),
        format!("{{\"span_ns\": {span}, \"sample_ns\": {sample}, \"rounds\": {n_rounds}}}\n"),
    );
}

fn status() {
    let n_rounds = rounds(2001);
    let build = |on: bool| {
        let mut b = RecorderBuilder::new();
        b.max_cycles(4096)
            .measure_overhead(false)
            .ring(RingStorage::Heap)
            .live_status(on)
            .nominal_period_ns(1_000_000)
            .compute_budget_ns(500_000)
            .deadline_tolerance_ns(100_000);
        b.build().unwrap()
    };
    let mut recs = [build(false), build(true)];
    let phase = recs[0].default_phase();
    let mut per_cycle = [Vec::with_capacity(n_rounds), Vec::with_capacity(n_rounds)];
    let t0 = clock::monotonic_ns();
    for round in 0..n_rounds {
        for k in [round % 2, 1 - round % 2] {
            let rec = &mut recs[k];
            let start = Instant::now();
            for i in 0..CHUNK {
                rec.begin_cycle(phase, Release::at(t0 + i * 1_000_000));
                rec.end_cycle();
            }
            per_cycle[k].push(start.elapsed().as_nanos() as f64 / CHUNK as f64);
        }
    }
    let snap = recs[1].live_status().unwrap().snapshot().unwrap();
    assert_eq!(snap.cycles, n_rounds as u64 * CHUNK);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let off = median(&mut per_cycle[0]);
    let on = median(&mut per_cycle[1]);
    println!(
        "cycle/status: live status off {off:.2} ns, on {on:.2} ns a cycle, ratio {:.3} ({n_rounds} alternating chunks of {CHUNK} cycles each)",
        on / off
    );
}

criterion_group!(benches, spans);

fn main() {
    if std::env::var("LOOPTIME_BENCH_ONLY").as_deref() == Ok("status") {
        status();
        return;
    }
    benches();
    interleaved();
    threads();
    samples();
    status();
    Criterion::default().configure_from_args().final_summary();
}
