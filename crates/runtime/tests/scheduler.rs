//! Deterministic scheduler tests on a mock clock: no real sleeping.

use looptime_runtime::clock::{LoopClock, MockClock};
use looptime_runtime::scheduler::{OverrunPolicy, Scheduler, SchedulerConfig, SchedulerError};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

fn sched(period: u64, policy: OverrunPolicy, clock: &MockClock) -> Scheduler<MockClock> {
    let mut cfg = SchedulerConfig::new(period);
    cfg.policy = policy;
    Scheduler::new(clock.clone(), cfg).unwrap()
}

#[test]
fn no_drift_over_a_million_cycles() {
    // Every wait oversleeps by 37 µs and every cycle works 3.3 ms; with
    // absolute deadlines the millionth release point is still exactly
    // start + 1e6 periods (a "now + period" scheduler would drift by
    // 1e6 × 37 µs = 37 s).
    let clock = MockClock::new(5 * MS);
    clock.set_oversleep(37 * US);
    let mut s = sched(10 * MS, OverrunPolicy::Rebase, &clock);
    s.start_at(10 * MS, 5 * MS);
    let mut last = None;
    for _ in 0..1_000_000u64 {
        let t = s.wait();
        assert!(!t.overdue);
        clock.advance(3_300 * US);
        last = Some(t);
    }
    let t = last.unwrap();
    assert_eq!(t.cycle, 999_999);
    assert_eq!(t.target_ns, 10 * MS + 999_999 * 10 * MS);
    // Oversleep 37 µs is below the 200 µs margin: the spin absorbs it.
    assert_eq!(t.wake_ns, t.target_ns);
    assert_eq!(s.overruns(), 0);
}

#[test]
fn six_ms_of_work_at_100_hz_sleeps_four_and_twelve_ms_rebases() {
    let clock = MockClock::new(0);
    let mut s = sched(10 * MS, OverrunPolicy::Rebase, &clock);
    s.start_at(10 * MS, 0);
    let t0 = s.wait(); // released at 10 ms, on time
    assert_eq!(
        (t0.target_ns, t0.wake_ns, t0.overdue),
        (10 * MS, 10 * MS, false)
    );
    let sleeps = clock.sleeps();

    clock.advance(6 * MS); // 6 ms of work, until 16 ms
    let t1 = s.wait();
    // 4 ms left: sleep until 20 ms − 200 µs margin, spin the rest.
    assert_eq!(t1.wait_start_ns, 16 * MS);
    assert_eq!(t1.sleep_return_ns, 20 * MS - 200 * US);
    assert_eq!(t1.spin_ns, 200 * US);
    assert_eq!((t1.target_ns, t1.wake_ns), (20 * MS, 20 * MS));
    assert_eq!(
        t1.wake_ns - t1.wait_start_ns,
        4 * MS,
        "4 ms of sleep and spin"
    );
    assert!(!t1.overdue);
    assert_eq!(clock.sleeps(), sleeps + 1);

    clock.advance(12 * MS); // 12 ms of work, until 32 ms: past the 30 ms release
    let t2 = s.wait();
    assert!(t2.overdue);
    assert_eq!(t2.target_ns, 30 * MS);
    assert_eq!(t2.wake_ns, 32 * MS, "no sleep: starts at once");
    assert_eq!(t2.spin_ns, 0);
    assert_eq!(clock.sleeps(), sleeps + 1, "no sleep on an overrun");
    assert_eq!(t2.dt_measured_ns, 12 * MS);
    // Rebased onto the overdue start: the next release is 32 + 10 ms, not 40.
    assert_eq!(s.next_deadline_ns(), 42 * MS);
    clock.advance(MS);
    let t3 = s.wait();
    assert_eq!((t3.target_ns, t3.overdue), (42 * MS, false));
    assert_eq!(s.overruns(), 1);
    assert_eq!(s.skipped(), 0);
}

#[test]
fn a_release_point_reached_exactly_counts_as_overrun() {
    // remaining ≤ 0 is the overrun case: no sleep, no spin.
    let clock = MockClock::new(0);
    let mut s = sched(10 * MS, OverrunPolicy::Rebase, &clock);
    s.start_at(10 * MS, 0);
    clock.advance(10 * MS);
    let t = s.wait();
    assert!(t.overdue);
    assert_eq!((t.wake_ns, t.spin_ns, clock.sleeps()), (10 * MS, 0, 0));
}

#[test]
fn keep_phase_resumes_the_original_timeline() {
    // Period 1 ms. Cycle N is released at 2 ms but only gets to run at
    // 2.2 ms (the previous cycle overran): it runs at once, and cycle N+1 is
    // scheduled at 3 ms, with its dt the real 0.8 ms elapsed.
    let clock = MockClock::new(0);
    let mut s = sched(MS, OverrunPolicy::KeepPhase, &clock);
    s.start_at(MS, 0);
    let a = s.wait(); // cycle at 1 ms
    assert_eq!(a.wake_ns, MS);
    clock.advance(1_200 * US); // works until 2.2 ms
    let n = s.wait();
    assert!(n.overdue);
    assert_eq!((n.target_ns, n.wake_ns, n.skipped), (2 * MS, 2_200 * US, 0));
    let n1 = s.wait();
    assert_eq!(n1.target_ns, 3 * MS);
    assert_eq!(n1.wake_ns, 3 * MS);
    assert_eq!(n1.dt_measured_ns, 800 * US);
}

#[test]
fn keep_phase_counts_a_skip_only_for_a_whole_extra_release_point() {
    let clock = MockClock::new(0);
    let mut s = sched(MS, OverrunPolicy::KeepPhase, &clock);
    s.start_at(MS, 0);
    s.wait(); // at 1 ms
    clock.advance(1_900 * US); // until 2.9 ms: 2 ms passed, 3 ms not yet
    let late = s.wait();
    assert_eq!(
        (late.overdue, late.skipped, late.target_ns),
        (true, 0, 2 * MS)
    );
    let next = s.wait();
    assert_eq!(next.target_ns, 3 * MS);
    clock.advance(2_500 * US); // until 5.5 ms: 4 ms and 5 ms both passed
    let late = s.wait();
    assert_eq!(
        (late.overdue, late.skipped, late.target_ns),
        (true, 1, 5 * MS)
    );
    assert_eq!(s.next_deadline_ns(), 6 * MS);
    assert_eq!((s.overruns(), s.skipped()), (2, 1));
}

#[test]
fn rebase_versus_keep_phase_on_the_same_script() {
    // Scripted work per cycle at 10 ms: on time, 25 ms spike, on time.
    let script = [2 * MS, 25 * MS, 2 * MS, 2 * MS];
    let run = |policy| {
        let clock = MockClock::new(0);
        let mut s = sched(10 * MS, policy, &clock);
        s.start_at(10 * MS, 0);
        let mut starts = Vec::new();
        for w in script {
            let t = s.wait();
            starts.push((t.target_ns / MS, t.wake_ns / MS, t.overdue, t.skipped));
            clock.advance(w);
        }
        starts
    };
    // Rebase: the 25 ms cycle (released at 20) ends at 45 ms; the cycle
    // released at 30 starts at once and the timeline becomes 55, 65, ...
    assert_eq!(
        run(OverrunPolicy::Rebase),
        vec![
            (10, 10, false, 0),
            (20, 20, false, 0),
            (30, 45, true, 0),
            (55, 55, false, 0)
        ]
    );
    // Keep-phase: at 45 ms the release points 30 and 40 have passed; 30 is
    // skipped, the cycle runs for 40, and the timeline continues at 50.
    assert_eq!(
        run(OverrunPolicy::KeepPhase),
        vec![
            (10, 10, false, 0),
            (20, 20, false, 0),
            (40, 45, true, 1),
            (50, 50, false, 0)
        ]
    );
}

#[test]
fn spin_never_exceeds_the_margin() {
    let clock = MockClock::new(0);
    let mut cfg = SchedulerConfig::new(10 * MS);
    cfg.spin_margin_ns = 300 * US;
    let mut s = Scheduler::new(clock.clone(), cfg).unwrap();
    s.start_at(10 * MS, 0);
    // Remaining time before each wait: far, exactly the margin, inside it,
    // and sleeps that return late (oversleep larger than the margin).
    let works = [0, 9_700 * US, 9_900 * US, 5 * MS, 9_999 * US, 100 * US];
    for (i, w) in works.iter().enumerate() {
        if i == 4 {
            clock.set_oversleep(500 * US);
        }
        let t = s.wait();
        assert!(
            t.spin_ns <= cfg.spin_margin_ns,
            "cycle {i}: spun {} ns",
            t.spin_ns
        );
        clock.advance(*w);
    }
}

#[test]
fn within_the_margin_it_spins_without_sleeping() {
    let clock = MockClock::new(0);
    let mut s = sched(10 * MS, OverrunPolicy::Rebase, &clock);
    s.start_at(10 * MS, 0);
    clock.advance(9_900 * US); // 100 µs left, margin is 200 µs
    let t = s.wait();
    assert_eq!(clock.sleeps(), 0);
    assert_eq!((t.spin_ns, t.wake_ns), (100 * US, 10 * MS));
}

#[test]
fn dt_is_measured_and_bounded() {
    let clock = MockClock::new(0);
    let mut cfg = SchedulerConfig::new(10 * MS);
    cfg.max_dt_ns = 30 * MS;
    let mut s = Scheduler::new(clock.clone(), cfg).unwrap();
    s.start_at(10 * MS, 0);
    assert_eq!(s.wait().dt_measured_ns, 10 * MS); // measured from start
    clock.advance(100 * MS); // a huge stall
    let t = s.wait();
    assert_eq!(t.dt_measured_ns, 30 * MS);
    assert!(t.dt_clamped);
    let t = s.wait();
    assert_eq!(t.dt_measured_ns, 10 * MS);
    assert_eq!(clock.now_ns(), t.wake_ns);
}

#[test]
fn settings_out_of_range_are_refused() {
    let clock = MockClock::new(0);
    let mut cfg = SchedulerConfig::new(MS);
    cfg.spin_margin_ns = 600 * US; // more than half of 1 ms
    assert_eq!(
        Scheduler::new(clock.clone(), cfg).unwrap_err(),
        SchedulerError::MarginTooLarge {
            margin_ns: 600 * US,
            ceiling_ns: 500 * US
        }
    );
    assert_eq!(
        Scheduler::new(clock.clone(), SchedulerConfig::new(0)).unwrap_err(),
        SchedulerError::ZeroPeriod
    );
    let mut cfg = SchedulerConfig::new(MS);
    cfg.max_dt_ns = 10;
    assert!(Scheduler::new(clock, cfg).is_err());
    // The default margin is clamped to the ceiling for fast loops.
    assert_eq!(SchedulerConfig::new(100 * US).spin_margin_ns, 50 * US);
}

#[test]
fn budget_overruns_and_misses_are_counted_against_what_was_declared() {
    // 10 ms period, 2 ms budget, 1 ms tolerance; first release at 10 ms.
    // Cycle 0 wakes at 10 ms (on time) and works 3 ms: a budget overrun
    // (3 > 2), no completion miss (ends at 13 ms, the next release 20 ms
    // plus 1 ms is 21 ms).
    // Cycle 1 wakes at 20 ms and works 11.5 ms, to 31.5 ms: an overrun and
    // a completion miss (31.5 > 30 + 1).
    // Cycle 2 finds its release (30 ms) passed: it wakes at 31.5 ms, 1.5 ms
    // after its release point: a wake miss (1.5 > 1). It works 1 ms (no
    // overrun) and ends at 32.5, within its next release (40) plus 1 ms.
    // Cycle 3's work is judged at a fourth wait only, which never comes.
    let clock = MockClock::new(0);
    let mut cfg = SchedulerConfig::new(10 * MS);
    cfg.compute_budget_ns = Some(2 * MS);
    cfg.deadline_tolerance_ns = Some(MS);
    let mut s = Scheduler::new(clock.clone(), cfg).unwrap();
    s.start_at(10 * MS, 0);
    let mut declared = vec![s.wait().target_ns];
    clock.advance(3 * MS);
    declared.push(s.wait().target_ns);
    clock.advance(11_500 * US);
    let t2 = s.wait();
    declared.push(t2.target_ns);
    assert_eq!((t2.target_ns, t2.wake_ns), (30 * MS, 31_500 * US));
    clock.advance(MS);
    declared.push(s.wait().target_ns);
    let m = s.misses();
    assert_eq!(
        (m.budget_overruns, m.completion_misses, m.wake_misses),
        (2, 1, 1)
    );

    // The same script with nothing declared counts nothing, and the
    // release timeline is the same: a budget is statistics only.
    let clock2 = MockClock::new(0);
    let mut plain = Scheduler::new(clock2.clone(), SchedulerConfig::new(10 * MS)).unwrap();
    plain.start_at(10 * MS, 0);
    let mut targets = Vec::new();
    for work in [3 * MS, 11_500 * US, MS] {
        targets.push(plain.wait().target_ns);
        clock2.advance(work);
    }
    targets.push(plain.wait().target_ns);
    // The overdue cycle 2 (rebase) moves the next release to its wake plus
    // a period: 31.5 + 10 = 41.5 ms, budget or not.
    assert_eq!(targets, vec![10 * MS, 20 * MS, 30 * MS, 41_500 * US]);
    assert_eq!(targets, declared);
    assert_eq!(plain.misses(), Default::default());

    // A rephase (a pause) leaves the cycle before it unjudged: its long
    // "work" is the pause.
    s.rephase();
    clock.advance(50 * MS);
    s.wait();
    assert_eq!(s.misses().budget_overruns, 2, "the pause is no overrun");
}
