//! Proves the hot-path claim: once built, the recorder performs no heap
//! allocation, reallocation or free, across ring wraparound, span overflow,
//! depth overflow, attributes, caller values, the wait marks and the data
//! age samples (used, produced, beyond the cycle's slots, outside a cycle).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use looptime_capture::{CpuTimeMode, RecorderBuilder, Release, RingStorage, ValueKind};

struct Counting;

// Per-thread counters, so the test harness's other threads do not count.
// Const-initialised thread locals without destructors never allocate.
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static REALLOCS: Cell<u64> = const { Cell::new(0) };
    static FREES: Cell<u64> = const { Cell::new(0) };
}

fn bump(counter: &'static std::thread::LocalKey<Cell<u64>>) {
    if COUNTING.with(Cell::get) {
        counter.with(|c| c.set(c.get() + 1));
    }
}

fn counting(on: bool) {
    COUNTING.with(|c| c.set(on));
}

fn count(counter: &'static std::thread::LocalKey<Cell<u64>>) -> u64 {
    counter.with(Cell::get)
}

// SAFETY: every method forwards to the system allocator unchanged; the
// counters are atomics and do not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump(&ALLOCS);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        bump(&FREES);
        // SAFETY: ptr came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump(&REALLOCS);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Minor page faults of the calling thread so far.
fn minor_faults() -> i64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the pointer it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, u.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: zero-initialised and written by getrusage.
    unsafe { u.assume_init() }.ru_minflt
}

#[test]
fn the_counter_counts_when_on_and_only_then() {
    // The positive control of every test below: an allocation, a growth and
    // a free on this thread are each counted while counting is on, and
    // nothing is counted while it is off.
    counting(true);
    let (a0, r0, f0) = (count(&ALLOCS), count(&REALLOCS), count(&FREES));
    let mut v: Vec<u64> = std::hint::black_box(Vec::with_capacity(1));
    v.push(1);
    v.push(2); // grows: a realloc
    drop(std::hint::black_box(v));
    counting(false);
    assert_eq!(count(&ALLOCS) - a0, 1);
    assert!(count(&REALLOCS) - r0 >= 1);
    assert_eq!(count(&FREES) - f0, 1);
    let before = (count(&ALLOCS), count(&FREES));
    drop(std::hint::black_box(vec![1u8; 64]));
    assert_eq!((count(&ALLOCS), count(&FREES)), before);
}

#[test]
fn recording_on_the_heap_never_allocates_in_any_cpu_time_mode() {
    for mode in CpuTimeMode::ALL {
        record_without_allocating(RingStorage::Heap, mode, false);
    }
}

#[test]
fn the_live_status_never_allocates_and_counts_every_cycle() {
    // The same hot path with the live status on (and a period, budget and
    // tolerance for it to judge by): no allocation. Its counts: cycle i is
    // overdue when i % 97 == 0 (i = 0, 97, ..., 119 983: 1 237 + 1 = 1 238
    // of 120 000) and skips one release when i % 1000 == 0 (120).
    record_without_allocating(RingStorage::Heap, CpuTimeMode::default(), true);
}

#[test]
fn recording_into_a_shared_memory_ring_never_allocates_or_faults() {
    let dir = tempfile::tempdir().unwrap();
    // The default CPU-time mode, `cycle`: two CPU-clock reads a cycle.
    let faults = record_without_allocating(
        RingStorage::SharedMemory(dir.path().to_path_buf()),
        CpuTimeMode::default(),
        false,
    );
    // The ring file was sized, mapped with MAP_POPULATE and written once at
    // build: the loop touches no page the kernel has not already mapped.
    assert_eq!(faults, 0, "page faults in the loop");
}

/// Runs the hot-path workload; returns the loop's minor page faults.
fn record_without_allocating(storage: RingStorage, mode: CpuTimeMode, live: bool) -> i64 {
    const CYCLES: u64 = 120_000;
    const CAPACITY: usize = 1_000;
    let shm = storage != RingStorage::Heap;
    let mut b = RecorderBuilder::new();
    b.max_cycles(CAPACITY)
        .max_spans_per_cycle(4)
        .max_samples_per_cycle(2)
        .cpu_time_mode(mode)
        .ring(storage)
        .live_status(live)
        .nominal_period_ns(10_000_000)
        .compute_budget_ns(5_000_000)
        .deadline_tolerance_ns(1_000_000);
    let warmup = b.phase("warmup").unwrap();
    let running = b.phase("running").unwrap();
    let outer = b.stage("outer").unwrap();
    let inner = b.stage_with_cpu_time("inner", false).unwrap();
    let mode = b.attr_key("mode").unwrap();
    let inline = b.attr_value(mode, "inline").unwrap();
    let seq = b.value("robot_seq", ValueKind::Int, "count").unwrap();
    let rate = b.value("success_rate", ValueKind::Float, "ratio").unwrap();
    let camera = b
        .source("camera", looptime_capture::SourceSpec::default())
        .unwrap();
    let mut rec = b.build().unwrap();
    assert_eq!(rec.ring_path().is_some(), shm, "{:?}", rec.ring_note());

    let faults0 = minor_faults();
    counting(true);
    for i in 0..CYCLES {
        rec.begin_wait();
        rec.end_wait();
        let phase = if i < 100 { warmup } else { running };
        rec.begin_cycle(
            phase,
            Release::at(i * 10_000_000)
                .with_overdue(i % 97 == 0)
                .with_skipped((i % 1000 == 0) as u32)
                .with_spin(Some(200_000), Some(i % 1000)),
        );
        rec.set_int(seq, i as i64);
        rec.set_float(rate, 0.99);
        // Three samples into 2 slots: the third is dropped.
        rec.sample(camera, i, i * 1_000);
        rec.produced(camera, i + 1, i * 1_000 + 500);
        rec.sample(camera, i, i * 1_000);
        {
            let mut o = rec.span(outer);
            o.set(inline);
            {
                let _i1 = o.span(inner);
            }
            {
                let mut i2 = o.span(inner);
                // Nesting past MAX_SPAN_DEPTH and past the 4 slots overflows.
                let _deep = i2.span(inner);
            }
        }
        // Two more top-level spans: the 5th and 6th of the cycle, dropped.
        {
            let _s = rec.span(outer);
        }
        {
            let _s = rec.span(outer);
        }
        rec.end_cycle();
        // A span or a sample outside any cycle is counted, not stored.
        if i % 10_000 == 0 {
            {
                let _s = rec.span(outer);
            }
            rec.sample(camera, i, 0);
        }
    }
    counting(false);
    let faults = minor_faults() - faults0;

    assert_eq!(count(&ALLOCS), 0, "allocations on the hot path");
    assert_eq!(count(&REALLOCS), 0, "reallocations on the hot path");
    assert_eq!(count(&FREES), 0, "frees on the hot path");
    // The loop really exercised wraparound and overflow.
    assert_eq!(rec.total_cycles(), CYCLES);
    assert_eq!(rec.retained_cycles(), CAPACITY as u64);
    assert_eq!(rec.dropped_cycles(), CYCLES - CAPACITY as u64);
    // Each cycle opens 6 spans into 4 slots: 2 dropped per cycle.
    assert_eq!(rec.spans_dropped(), 2 * CYCLES);
    assert_eq!(rec.spans_outside_cycle(), CYCLES / 10_000);
    assert_eq!(rec.samples_dropped(), CYCLES);
    assert_eq!(rec.samples_outside_cycle(), CYCLES / 10_000);
    match rec.live_status() {
        Some(st) => {
            assert!(live);
            let s = st.snapshot().unwrap();
            assert_eq!((s.cycles, s.index), (CYCLES, Some(CYCLES - 1)));
            assert_eq!(
                (s.overruns, s.skipped),
                (CYCLES.div_ceil(97), CYCLES / 1000)
            );
            assert_eq!(s.periods, CYCLES - 1);
            assert!(s.budget_overruns.is_some() && s.completion_misses.is_some());
        }
        None => assert!(!live),
    }
    faults
}

#[test]
fn disabled_recorder_never_allocates() {
    let mut rec = looptime_capture::Recorder::disabled();
    let stage = {
        let mut b = RecorderBuilder::new();
        b.stage("s").unwrap()
    };
    counting(true);
    let before = count(&ALLOCS);
    for _ in 0..10_000 {
        rec.begin_cycle(rec.default_phase(), Release::NONE);
        let _s = rec.span(stage);
    }
    let after = count(&ALLOCS);
    counting(false);
    assert_eq!(after, before);
    assert_eq!(rec.total_cycles(), 0);
}

/// Per thread: (allocations, reallocations, frees) while it recorded.
fn counted(f: impl FnOnce()) -> (u64, u64, u64) {
    let before = (count(&ALLOCS), count(&REALLOCS), count(&FREES));
    counting(true);
    f();
    counting(false);
    (
        count(&ALLOCS) - before.0,
        count(&REALLOCS) - before.1,
        count(&FREES) - before.2,
    )
}

#[test]
fn several_threads_recording_at_once_never_allocate() {
    use looptime_capture::Registry;
    const CYCLES: u64 = 50_000;
    let dir = tempfile::tempdir().unwrap();
    let shm = || RingStorage::SharedMemory(dir.path().to_path_buf());
    let mut control = RecorderBuilder::new();
    control.max_cycles(1_000).max_spans_per_cycle(2).ring(shm());
    let act = control.stage("act").unwrap();
    let mut reg = Registry::new(control);
    let mut stages = Vec::new();
    for (name, implicit) in [
        ("camera_reader", false),
        ("viewer_transport", false),
        ("policy_worker", true),
    ] {
        let mut b = RecorderBuilder::new();
        b.max_cycles(500)
            .max_spans_per_cycle(2)
            .ring(shm())
            .implicit_cycles(implicit);
        stages.push((b.stage("work").unwrap(), implicit));
        reg.thread(name, b).unwrap();
    }
    let mut set = reg.build().unwrap();
    let start = std::sync::Arc::new(std::sync::Barrier::new(4));
    let workers: Vec<_> = set
        .threads
        .drain(..)
        .zip(stages)
        .map(|(mut rec, (stage, implicit))| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let counts = counted(|| {
                    let p = rec.default_phase();
                    for _ in 0..CYCLES {
                        if !implicit {
                            rec.begin_cycle(p, Release::NONE);
                        }
                        {
                            // Three spans into two slots: one dropped (or,
                            // implicit, three cycles of one span each).
                            let _a = rec.span(stage);
                        }
                        let _b = rec.span(stage);
                        drop(_b);
                        let _c = rec.span(stage);
                        drop(_c);
                        if !implicit {
                            rec.end_cycle();
                        }
                    }
                });
                (rec, counts)
            })
        })
        .collect();
    start.wait();
    let p = set.control.default_phase();
    let control_counts = counted(|| {
        for i in 0..CYCLES {
            set.control.begin_cycle(p, Release::at(i));
            let _s = set.control.span(act);
            drop(_s);
            set.control.end_cycle();
        }
    });
    assert_eq!(control_counts, (0, 0, 0), "control thread");
    for w in workers {
        let (rec, counts) = w.join().unwrap();
        assert_eq!(counts, (0, 0, 0), "{}", rec.thread_name());
        let per = if rec.thread_name() == "policy_worker" {
            3
        } else {
            1
        };
        assert_eq!(rec.total_cycles(), CYCLES * per, "{}", rec.thread_name());
        assert_eq!(rec.spans_dropped(), if per == 1 { CYCLES } else { 0 });
    }
}
