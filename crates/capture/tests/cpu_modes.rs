//! The three CPU-time modes: each writes what it says (the header's mode,
//! CPU time on cycles or on spans or nowhere), `cycle` mode with nested
//! spans and with a cycle left open at finish, the figure itself (a sleep
//! inside the work is off-CPU), and a live ring read back in `cycle` mode.

use std::time::Duration;

use looptime_capture::ring::RingReader;
use looptime_capture::{
    CaptureStatus, CpuTimeMode, CycleRecord, EvidenceReader, Header, RecorderBuilder, Release,
    RingStorage,
};

/// Three cycles of a loop with nested spans (outer ⊃ inner, inner
/// registered without CPU time, then a second top-level span), the last
/// one left open when `leave_open`; the files read back.
fn record(mode: CpuTimeMode, leave_open: bool) -> (Header, Vec<CycleRecord>) {
    let mut b = RecorderBuilder::new();
    b.measure_overhead(false)
        .ring(RingStorage::Heap)
        .cpu_time_mode(mode);
    let running = b.phase("running").unwrap();
    let outer = b.stage("outer").unwrap();
    let inner = b.stage_with_cpu_time("inner", false).unwrap();
    let other = b.stage("other").unwrap();
    let mut rec = b.build().unwrap();
    for i in 0..3 {
        rec.begin_cycle(running, Release::NONE);
        {
            let mut o = rec.span(outer);
            let _i = o.span(inner);
        }
        if leave_open && i == 2 {
            // A span still open at finish, in a cycle still open.
            let _open = rec.begin_span(other);
            break;
        }
        {
            let _s = rec.span(other);
        }
        rec.end_cycle();
    }
    let dir = tempfile::tempdir().unwrap();
    let status = if leave_open {
        CaptureStatus::Aborted
    } else {
        CaptureStatus::Complete
    };
    let report = rec.finish(dir.path(), status).unwrap();
    EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap()
}

#[test]
fn the_default_mode_is_cycle() {
    assert_eq!(CpuTimeMode::default(), CpuTimeMode::Cycle);
    let (h, cycles) = {
        let mut b = RecorderBuilder::new();
        b.measure_overhead(false).ring(RingStorage::Heap);
        let p = b.phase("running").unwrap();
        let mut rec = b.build().unwrap();
        rec.begin_cycle(p, Release::NONE);
        rec.end_cycle();
        let dir = tempfile::tempdir().unwrap();
        let r = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
        EvidenceReader::open(&r.cycles_path)
            .unwrap()
            .read_all()
            .unwrap()
    };
    assert_eq!(h.thread_cpu_mode, Some(CpuTimeMode::Cycle));
    assert!(cycles[0].cpu_ns.is_some());
}

#[test]
fn each_mode_writes_what_it_says() {
    for mode in CpuTimeMode::ALL {
        let (h, cycles) = record(mode, false);
        assert_eq!(h.thread_cpu_mode, Some(mode), "{mode}");
        assert_eq!(h.cpu_mode(), mode);
        assert_eq!(h.thread_cpu_time, mode != CpuTimeMode::Off, "{mode}");
        // Per-stage CPU time only in spans mode, and only for the stages
        // registered with it.
        let stage_cpu: Vec<bool> = h.stages.iter().map(|s| s.cpu_time).collect();
        let spans = mode == CpuTimeMode::Spans;
        assert_eq!(stage_cpu, [spans, false, spans], "{mode}");
        assert_eq!(cycles.len(), 3);
        for c in &cycles {
            assert_eq!(c.cpu_ns.is_some(), mode == CpuTimeMode::Cycle, "{mode}");
            let span_cpu: Vec<bool> = c.spans.iter().map(|s| s.cpu_ns.is_some()).collect();
            assert_eq!(span_cpu, [spans, false, spans], "{mode}");
        }
    }
}

#[test]
fn cycle_mode_keeps_nesting_and_leaves_an_open_cycle_without_cpu_time() {
    let (h, cycles) = record(CpuTimeMode::Cycle, true);
    assert_eq!(h.cpu_mode(), CpuTimeMode::Cycle);
    assert_eq!(cycles.len(), 3);
    for c in &cycles[..2] {
        assert!(c.end_ns.is_some() && c.cpu_ns.is_some());
        assert_eq!(c.spans[1].parent, Some(0));
        assert_eq!(c.spans[1].depth, 1);
        assert!(c.spans.iter().all(|s| s.cpu_ns.is_none()));
    }
    // The open cycle: no end, so no CPU time; its open span is closed at
    // its own start and marked.
    let last = &cycles[2];
    assert_eq!((last.end_ns, last.cpu_ns), (None, None));
    assert_eq!(last.spans.len(), 3);
    assert!(last.spans[2].closed_by_cycle_end);
}

#[test]
fn a_sleep_inside_the_work_is_off_cpu_and_a_busy_loop_is_not() {
    // Not a timing assertion: a thread that sleeps 20 ms does not run for
    // most of it on any scheduler, and a thread that spins does run for
    // at least part of it. A broken read (the wrong clock, or the two
    // reads swapped) fails one of the two.
    let mut b = RecorderBuilder::new();
    b.measure_overhead(false)
        .ring(RingStorage::Heap)
        .cpu_time_mode(CpuTimeMode::Cycle);
    let p = b.phase("running").unwrap();
    let mut rec = b.build().unwrap();
    rec.begin_cycle(p, Release::NONE);
    std::thread::sleep(Duration::from_millis(20));
    rec.end_cycle();
    rec.begin_cycle(p, Release::NONE);
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_millis(5) {
        std::hint::spin_loop();
    }
    rec.end_cycle();
    let dir = tempfile::tempdir().unwrap();
    let r = rec.finish(dir.path(), CaptureStatus::Complete).unwrap();
    let (_, c) = EvidenceReader::open(&r.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    let (wall0, cpu0) = (c[0].end_ns.unwrap() - c[0].start_ns, c[0].cpu_ns.unwrap());
    assert!(wall0 >= 20_000_000);
    assert!(cpu0 < wall0 / 2, "sleeping: {cpu0} ns CPU of {wall0} ns");
    let (wall1, cpu1) = (c[1].end_ns.unwrap() - c[1].start_ns, c[1].cpu_ns.unwrap());
    assert!(cpu1 > 0 && cpu1 <= wall1 + 1_000_000, "{cpu1} of {wall1}");
}

#[test]
fn a_live_ring_in_cycle_mode_reads_back_with_cycle_cpu_time() {
    let shm = tempfile::tempdir().unwrap();
    let mut b = RecorderBuilder::new();
    b.measure_overhead(false)
        .ring(RingStorage::SharedMemory(shm.path().to_path_buf()));
    let p = b.phase("running").unwrap();
    let mut rec = b.build().unwrap();
    for _ in 0..4 {
        rec.begin_cycle(p, Release::NONE);
        rec.end_cycle();
    }
    let r = RingReader::open(rec.ring_path().unwrap())
        .unwrap()
        .read(None)
        .unwrap();
    assert_eq!(r.cycles.len(), 4);
    assert!(r.cycles.iter().all(|c| c.cpu_ns.is_some()));
}
