//! The adaptive spin margin on the mock clock, with scripted OS sleep
//! latencies (`MockClock::set_oversleep`): it follows a step up within
//! `RANK` sleeps and a step down within the window, ignores a few stray
//! wake-ups and latencies no margin could absorb, never leaves its bounds,
//! allocates nothing after start, and the evidence records the margin of
//! every cycle.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use looptime_capture::{CaptureStatus, EvidenceReader, RecorderBuilder, RingStorage};
use looptime_runtime::clock::MockClock;
use looptime_runtime::margin::{AutoMargin, AUTO_MARGIN_FLOOR_NS, RANK, WINDOW};
use looptime_runtime::scheduler::{Scheduler, SchedulerConfig};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the counter is a
// const thread local that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: ptr came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// An adaptive scheduler at `period` on `clock`, started at 10 ms.
fn auto(period: u64, clock: &MockClock) -> Scheduler<MockClock> {
    let mut cfg = SchedulerConfig::new(period);
    cfg.auto_margin = true;
    let mut s = Scheduler::new(clock.clone(), cfg).unwrap();
    s.start_at(10 * MS, 0);
    s
}

/// `n` waits of a loop that works 1 ms a cycle; the ticks' margins.
fn run(s: &mut Scheduler<MockClock>, clock: &MockClock, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let t = s.wait();
            clock.advance(MS);
            t.spin_margin_ns
        })
        .collect()
}

/// The margin a RANKth-largest latency of `l` gives: l × 5/4 + 20 µs.
fn margin_for(l: u64) -> u64 {
    l + l / 4 + 20 * US
}

#[test]
fn it_follows_a_step_up_within_rank_sleeps_and_a_step_down_within_the_window() {
    let clock = MockClock::new(0);
    let mut s = auto(10 * MS, &clock);
    // The first wait uses the configured 200 µs; then 30 µs latencies give
    // 30 × 5/4 + 20 = 57.5 µs.
    clock.set_oversleep(30 * US);
    let m = run(&mut s, &clock, 200);
    assert_eq!(m[0], 200 * US);
    assert!(
        m[1..].iter().all(|&x| x == margin_for(30 * US)),
        "{:?}",
        &m[..4]
    );
    assert_eq!(s.spin_margin_ns(), 57_500);

    // A step up to 400 µs: up to RANK − 1 (3) sleeps are stray values (the
    // 4th largest is still 30 µs); after the 4th the margin is 400 × 5/4 +
    // 20 = 520 µs.
    assert_eq!(RANK, 4);
    clock.set_oversleep(400 * US);
    let m = run(&mut s, &clock, 5);
    assert_eq!(m, [57_500, 57_500, 57_500, 57_500, 520 * US]);
    // At 520 µs the 400 µs latency ends inside the margin: on time again.
    let t = s.wait();
    clock.advance(MS);
    assert_eq!(t.wake_ns, t.target_ns);

    // A step down to 30 µs: the window holds 5 of 400 µs when the step
    // comes; the margin stays until only RANK − 1 of them are left, after
    // WINDOW − RANK + 1 = 256 − 4 + 1 = 253 more sleeps.
    assert_eq!(WINDOW - RANK + 1, 253, "the comment above names the window");
    clock.set_oversleep(30 * US);
    let m = run(&mut s, &clock, WINDOW);
    let down = m.iter().position(|&x| x == margin_for(30 * US)).unwrap();
    assert!(m[..down].iter().all(|&x| x == 520 * US));
    assert_eq!(down, WINDOW - RANK + 1);
    assert!(m[down..].iter().all(|&x| x == margin_for(30 * US)));
}

#[test]
fn stray_wake_ups_and_latencies_beyond_the_ceiling_do_not_set_the_margin() {
    let clock = MockClock::new(0);
    let mut s = auto(10 * MS, &clock);
    clock.set_oversleep(30 * US);
    run(&mut s, &clock, 10);
    // RANK − 1 stray wake-ups of 1.5 ms, spread out.
    for _ in 0..RANK - 1 {
        clock.set_oversleep(1_500 * US);
        run(&mut s, &clock, 1);
        clock.set_oversleep(30 * US);
        run(&mut s, &clock, 5);
    }
    let m = run(&mut s, &clock, 20);
    assert!(m.iter().all(|&x| x == margin_for(30 * US)), "{m:?}");
    // Any number of 5 ms latencies: beyond the 2 ms ceiling, no margin
    // could absorb them, so they do not drive the margin there.
    clock.set_oversleep(5 * MS);
    let m = run(&mut s, &clock, 20);
    assert!(m.iter().all(|&x| x == margin_for(30 * US)), "{m:?}");
}

#[test]
fn it_never_leaves_its_bounds() {
    // Floor: latencies of 0 give 20 µs, raised to the 50 µs floor.
    let clock = MockClock::new(0);
    let mut s = auto(10 * MS, &clock);
    clock.set_oversleep(0);
    assert_eq!(
        *run(&mut s, &clock, 5).last().unwrap(),
        AUTO_MARGIN_FLOOR_NS
    );
    // Ceiling: 1.9 ms latencies at 100 Hz give 1.9 × 5/4 + 0.02 = 2.395
    // ms, stopped at 2 ms (half the period would be 5 ms); at 1 kHz, 450 µs
    // give 582.5 µs, stopped at half the period, 500 µs.
    clock.set_oversleep(1_900 * US);
    run(&mut s, &clock, 5);
    assert_eq!(s.spin_margin_ns(), 2 * MS);
    let clock = MockClock::new(0);
    let mut fast = auto(MS, &clock);
    clock.set_oversleep(450 * US);
    run(&mut fast, &clock, 5);
    assert_eq!(fast.spin_margin_ns(), 500 * US);
    // A period so short that half of it is below the floor: the floor is
    // the ceiling (25 µs at 20 kHz).
    assert_eq!(AutoMargin::new(25 * US).floor_ns(), 25 * US);

    // Scripted noise (a fixed LCG): every tick's margin stays within
    // [50 µs, 2 ms], and no spin lasts longer than the margin it used.
    let clock = MockClock::new(0);
    let mut s = auto(10 * MS, &clock);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..5_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // Mostly tens of µs, sometimes a few ms.
        let l = if x >> 60 == 0 {
            (x >> 20) % (4 * MS)
        } else {
            (x >> 20) % (80 * US)
        };
        clock.set_oversleep(l);
        let t = s.wait();
        clock.advance(MS);
        assert!((AUTO_MARGIN_FLOOR_NS..=2 * MS).contains(&t.spin_margin_ns));
        assert!(t.spin_ns <= t.spin_margin_ns);
    }
    let (lo, hi) = s.spin_margin_range_ns();
    assert!(lo >= AUTO_MARGIN_FLOOR_NS && hi <= 2 * MS && lo < hi);
}

#[test]
fn a_fixed_margin_stays_fixed() {
    let clock = MockClock::new(0);
    let mut s = Scheduler::new(clock.clone(), SchedulerConfig::new(10 * MS)).unwrap();
    s.start_at(10 * MS, 0);
    clock.set_oversleep(400 * US);
    assert!(run(&mut s, &clock, 50).iter().all(|&m| m == 200 * US));
    assert_eq!(s.spin_margin_range_ns(), (200 * US, 200 * US));
}

#[test]
fn waiting_allocates_nothing_after_start() {
    let clock = MockClock::new(0);
    let mut s = auto(MS, &clock);
    s.wait();
    COUNTING.with(|c| c.set(true));
    let before = ALLOCS.with(Cell::get);
    for i in 0..10_000u64 {
        clock.set_oversleep((i * 7_919) % (300 * US));
        s.wait();
        clock.advance(200 * US);
    }
    let after = ALLOCS.with(Cell::get);
    COUNTING.with(|c| c.set(false));
    assert_eq!(after, before, "allocations while waiting");
    // The control: the counter counts.
    COUNTING.with(|c| c.set(true));
    drop(std::hint::black_box(vec![0u8; 16]));
    COUNTING.with(|c| c.set(false));
    assert!(ALLOCS.with(Cell::get) > after);
}

#[test]
fn the_evidence_records_the_margin_of_every_cycle() {
    let clock = MockClock::new(0);
    let mut s = auto(10 * MS, &clock);
    let mut b = RecorderBuilder::new();
    b.ring(RingStorage::Heap).measure_overhead(false);
    let p = b.phase("running").unwrap();
    let mut rec = b.build().unwrap();
    let mut margins = Vec::new();
    let mut spins = Vec::new();
    for i in 0..600u64 {
        // A step up at 100 and a step down at 150 (followed within the
        // window, before 600).
        clock.set_oversleep(if (100..150).contains(&i) {
            600 * US
        } else {
            40 * US
        });
        let t = s.wait();
        rec.begin_cycle(p, t.release());
        clock.advance(MS);
        rec.end_cycle();
        margins.push(t.spin_margin_ns);
        spins.push(t.spin_ns);
    }
    let dir = tempfile::tempdir().unwrap();
    let r = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let (_, cycles) = EvidenceReader::open(&r.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    let written: Vec<u64> = cycles.iter().map(|c| c.spin_margin_ns.unwrap()).collect();
    assert_eq!(written, margins);
    let spun: Vec<u64> = cycles.iter().map(|c| c.spin_ns.unwrap()).collect();
    assert_eq!(spun, spins);
    // The script moved it: up to 600 × 5/4 + 20 = 770 µs and back.
    let changes = margins.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(changes >= 3, "{changes}");
    assert_eq!(margins.iter().max(), Some(&(770 * US)));
}
