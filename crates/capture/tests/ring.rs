//! The shared-memory ring: what another process reads while the loop
//! runs, and what `recover` rebuilds after the writer is killed with
//! SIGKILL. The writer is this test binary itself, re-run as a child
//! process (`ring_child_writer`) so that it can really be killed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use looptime_capture::ring::{self, Recovered, RingReader, RingState};
use looptime_capture::{
    CaptureError, CaptureStatus, EvidenceReader, PaceKind, RecorderBuilder, Release, RingStorage,
    ValueKind,
};

/// The recorder every test here uses: phases `warmup`/`running`, stages
/// `outer` and `inner` (nested), one integer value `seq` set to the cycle
/// index, targets at `index × 10 ms`, and a source `camera` whose sample
/// `i` (stamped `i × 1000`) cycle `i` uses.
fn builder(dir: &Path, capacity: usize, episode: Option<&Path>) -> RecorderBuilder {
    let mut b = RecorderBuilder::new();
    b.max_cycles(capacity)
        .max_spans_per_cycle(4)
        .ring(RingStorage::SharedMemory(dir.to_path_buf()));
    if let Some(e) = episode {
        b.episode_dir(e);
    }
    b
}

struct Ids {
    warmup: looptime_capture::PhaseId,
    running: looptime_capture::PhaseId,
    outer: looptime_capture::StageId,
    inner: looptime_capture::StageId,
    seq: looptime_capture::ValueId,
    camera: looptime_capture::SourceId,
}

fn register(b: &mut RecorderBuilder) -> Ids {
    Ids {
        warmup: b.phase("warmup").unwrap(),
        running: b.phase("running").unwrap(),
        outer: b.stage("outer").unwrap(),
        inner: b.stage_with_cpu_time("inner", false).unwrap(),
        seq: b.value("seq", ValueKind::Int, "count").unwrap(),
        camera: b
            .source("camera", looptime_capture::SourceSpec::default())
            .unwrap(),
    }
}

/// Cycle `i`: warmup for the first 5, then running; an `outer` span with
/// an `inner` child; `seq = i`. Odd running cycles are input-paced
/// ([`input_paced`]), the others scheduled at `i × 10 ms`.
fn record(rec: &mut looptime_capture::Recorder, ids: &Ids, i: u64) {
    rec.begin_wait();
    rec.end_wait();
    let phase = if i < 5 { ids.warmup } else { ids.running };
    let release = if input_paced(i) {
        // A kernel arrival, read 3 µs later, converted within 40 ns.
        Release::input(i * 10_000_000 + 7, Some(1_000 + i))
            .with_read(i * 10_000_000 + 3_007, Some(40))
    } else {
        Release::at(i * 10_000_000)
    };
    rec.begin_cycle(phase, release);
    rec.set_int(ids.seq, i as i64);
    rec.sample(ids.camera, i, i * 1000);
    {
        let mut o = rec.span(ids.outer);
        let _i = o.span(ids.inner);
    }
    rec.end_cycle();
}

/// Whether [`record`] releases cycle `i` by an input (arriving at
/// `i × 10 ms + 7`, its counter `1000 + i`, read 3 µs later with a 40 ns
/// conversion bound): the odd running cycles.
fn input_paced(i: u64) -> bool {
    i >= 5 && i % 2 == 1
}

/// Not a test of its own (hence ignored): the child process of the kill
/// tests, run with `--ignored`. It records `RING_CHILD_CYCLES` cycles,
/// optionally finishes, leaves one cycle open, prints `READY <ring>` and
/// waits to be killed.
#[test]
#[ignore = "the child process of the kill tests"]
fn ring_child_writer() {
    let Ok(dir) = std::env::var("RING_CHILD_DIR") else {
        return;
    };
    let episode = PathBuf::from(std::env::var("RING_CHILD_EPISODE").unwrap());
    let cycles: u64 = std::env::var("RING_CHILD_CYCLES").unwrap().parse().unwrap();
    let capacity: usize = std::env::var("RING_CHILD_CAPACITY")
        .unwrap()
        .parse()
        .unwrap();
    let mut b = builder(Path::new(&dir), capacity, Some(&episode));
    let ids = register(&mut b);
    let mut rec = if std::env::var("RING_CHILD_THREAD").is_ok() {
        // A background thread `camera_reader` with the same names records
        // its cycles on a thread of its own, then stops; its ring stays.
        let mut tb = builder(Path::new(&dir), capacity, None);
        let tids = register(&mut tb);
        let mut reg = looptime_capture::Registry::new(b);
        reg.thread("camera_reader", tb).unwrap();
        let mut set = reg.build().unwrap();
        let mut cam = set.threads.remove(0);
        let cam = std::thread::spawn(move || {
            for i in 0..cycles {
                record(&mut cam, &tids, i);
            }
            cam
        })
        .join()
        .unwrap();
        std::mem::forget(cam); // as the kill would: the ring is not removed
        set.control
    } else {
        b.build().unwrap()
    };
    for i in 0..cycles {
        record(&mut rec, &ids, i);
    }
    if std::env::var("RING_CHILD_FINISH").is_ok() {
        std::fs::create_dir_all(&episode).unwrap();
        rec.finish(&episode, CaptureStatus::Complete).unwrap();
    } else {
        // The cycle in progress at the kill: begun, a span open.
        rec.begin_cycle(ids.running, Release::at(cycles * 10_000_000));
        let _open = rec.span(ids.outer);
        std::mem::forget(_open);
    }
    println!("READY {}", rec.ring_path().unwrap().display());
    loop {
        std::thread::park();
    }
}

/// Run the child writer and kill it with SIGKILL once it is ready; returns
/// the ring it left.
fn killed_writer(
    dir: &Path,
    episode: &Path,
    cycles: u64,
    capacity: usize,
    finish: bool,
) -> PathBuf {
    killed_writer_with(dir, episode, cycles, capacity, finish, false)
}

/// [`killed_writer`], with a background thread `camera_reader` recorded
/// too when `thread`.
fn killed_writer_with(
    dir: &Path,
    episode: &Path,
    cycles: u64,
    capacity: usize,
    finish: bool,
    thread: bool,
) -> PathBuf {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "ring_child_writer",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("RING_CHILD_DIR", dir)
    .env("RING_CHILD_EPISODE", episode)
    .env("RING_CHILD_CYCLES", cycles.to_string())
    .env("RING_CHILD_CAPACITY", capacity.to_string())
    .stdout(Stdio::piped());
    if finish {
        cmd.env("RING_CHILD_FINISH", "1");
    }
    if thread {
        cmd.env("RING_CHILD_THREAD", "1");
    }
    let mut child: Child = cmd.spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let ring = out
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.split_once("READY ").map(|(_, p)| PathBuf::from(p)))
        .expect("the child writer never got ready");
    child.kill().unwrap(); // SIGKILL: no destructor, no finish runs
    child.wait().unwrap();
    if finish {
        assert!(!ring.exists(), "a finish removes its ring at once");
    } else {
        assert!(ring.exists(), "a kill must leave the ring file behind");
    }
    ring
}

#[test]
fn a_killed_writer_leaves_a_ring_that_recovers_every_complete_cycle() {
    let shm = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let episode = runs.path().join("session-x/rollout-000");
    let ring = killed_writer(shm.path(), &episode, 50, 1000, false);

    let Recovered::Written { dir, report, .. } = ring::recover(&ring).unwrap() else {
        panic!("expected the evidence to be written");
    };
    assert_eq!(dir, episode);
    assert!(
        !ring.exists(),
        "the ring is removed once its files are written"
    );
    let s = &report.summary;
    assert_eq!(s.status, CaptureStatus::Recovered);
    let r = s.recovery.as_ref().unwrap();
    // 50 cycles ended; the 51st was begun and never ended: lost, not invented.
    assert_eq!(r.cycles_recovered, 50);
    assert_eq!(r.in_progress_records, 1);
    assert_eq!(r.torn_records, 0);
    assert_eq!(r.last_complete_cycle, Some(49));
    assert_eq!(r.ring_state, "recording");
    assert_eq!(s.capture.total_cycles, 51);
    assert_eq!(s.capture.retained_cycles, 50);
    assert_eq!(s.capture.dropped_cycles, 1);

    // The files read back like any evidence, with what the child recorded.
    let (header, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(header.tsc.slope_source, "quanta");
    assert_eq!(cycles.len(), 50);
    for (i, c) in cycles.iter().enumerate() {
        let i = i as u64;
        assert_eq!(c.cycle, i);
        assert_eq!(c.phase, if i < 5 { "warmup" } else { "running" });
        // The release kind survives the kill: the pace, the arrival and
        // the counter of an input-paced cycle, the target of the others.
        if input_paced(i) {
            assert_eq!(
                (c.pace, c.target_ns, c.arrival_ns, c.input_seq),
                (
                    PaceKind::Input,
                    None,
                    Some(i * 10_000_000 + 7),
                    Some(1_000 + i)
                )
            );
            // The read beside the kernel arrival survives too (layout 4).
            assert_eq!(
                (c.read_ns, c.arrival_bound_ns),
                (Some(i * 10_000_000 + 3_007), Some(40))
            );
        } else {
            assert_eq!(
                (c.pace, c.target_ns, c.arrival_ns, c.input_seq),
                (PaceKind::Deadline, Some(i * 10_000_000), None, None)
            );
            assert_eq!((c.read_ns, c.arrival_bound_ns), (None, None));
        }
        assert_eq!(c.values["seq"].as_u64(), Some(i));
        assert!(c.end_ns.unwrap() >= c.start_ns);
        let shape: Vec<_> = c
            .spans
            .iter()
            .map(|s| (s.stage.as_str(), s.parent, s.depth))
            .collect();
        assert_eq!(shape, [("outer", None, 0), ("inner", Some(0), 1)]);
        // The sample each finished cycle used is back, with its moment of
        // use inside the cycle.
        assert_eq!(c.samples.len(), 1);
        let x = &c.samples[0];
        assert_eq!(
            (x.source.as_str(), x.seq, x.stamp_ns, x.produced),
            ("camera", i, i * 1000, false)
        );
        assert!(
            c.start_ns <= x.at_ns && x.at_ns <= c.end_ns.unwrap(),
            "{x:?}"
        );
    }
    assert_eq!(header.sources.len(), 1);
    assert_eq!(header.capacity.max_samples_per_cycle, 8);
    // Both are Options: require the value, so that None == None cannot pass.
    let end = cycles[49].end_ns.expect("cycle 49 ended");
    assert_eq!(r.last_complete_end_ns, Some(end));
}

#[test]
fn a_wrapped_ring_recovers_its_newest_cycles_and_counts_the_rest_as_dropped() {
    let shm = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let episode = runs.path().join("ep");
    // Capacity 16, 40 complete cycles, the 41st in progress in slot 40 % 16
    // = 8, where it overwrote cycle 24: cycles 25..=39 remain (15).
    let ring = killed_writer(shm.path(), &episode, 40, 16, false);
    let Recovered::Written { report, .. } = ring::recover(&ring).unwrap() else {
        panic!("expected the evidence to be written");
    };
    let s = &report.summary;
    assert_eq!(s.capture.retained_cycles, 15);
    assert_eq!(s.capture.first_cycle, Some(25));
    assert_eq!(s.capture.last_cycle, Some(39));
    assert_eq!(s.capture.dropped_cycles, 41 - 15);
    assert_eq!(s.recovery.as_ref().unwrap().in_progress_records, 1);
}

#[test]
fn a_writer_killed_after_finishing_keeps_its_files_and_only_loses_the_ring() {
    let shm = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let episode = runs.path().join("ep");
    let ring = killed_writer(shm.path(), &episode, 12, 100, true);
    // The finish removed the ring as soon as the files were written: the
    // kill after it leaves the evidence whole and no ring to recover (a
    // finished recorder's ring never lingers while its owner lives on).
    assert!(!ring.exists());
    assert!(ring::list_rings(shm.path()).is_empty());
    let summary = std::fs::read_to_string(episode.join(looptime_capture::SUMMARY_FILE)).unwrap();
    assert!(summary.contains("\"status\": \"complete\""), "{summary}");
}

#[test]
fn a_running_writer_is_read_live_and_never_recovered() {
    let shm = tempfile::tempdir().unwrap();
    let mut b = builder(shm.path(), 100, None);
    let ids = register(&mut b);
    let mut rec = b.build().unwrap();
    let path = rec.ring_path().unwrap().to_path_buf();
    assert!(path.starts_with(shm.path()));
    for i in 0..10 {
        record(&mut rec, &ids, i);
    }
    rec.begin_cycle(ids.running, Release::NONE);

    let reader = RingReader::open(&path).unwrap();
    assert_eq!(reader.pid(), std::process::id());
    assert!(reader.writer_alive());
    match ring::recover(&path) {
        Err(CaptureError::RingInUse { pid, .. }) => assert_eq!(pid, std::process::id()),
        other => panic!("a live ring must not be recovered: {other:?}"),
    }
    assert_eq!(reader.state(), RingState::Recording);
    let live = reader.read(None).unwrap();
    assert_eq!(live.total_cycles, 11);
    assert_eq!(live.cycles.len(), 10);
    assert_eq!(live.in_progress, 1);
    let last3 = reader.read(Some(3)).unwrap();
    let idx: Vec<u64> = last3.cycles.iter().map(|c| c.cycle).collect();
    assert_eq!(idx, [8, 9], "the newest 3 are 8, 9 and the open 10");

    // The live view carries the same records `finish` writes (the times may
    // differ by the slope: finish has an end anchor, the ring does not).
    rec.end_cycle();
    let out = tempfile::tempdir().unwrap();
    let fin = rec.finish(out.path(), CaptureStatus::Complete).unwrap();
    assert_eq!(reader.state(), RingState::Finished);
    let (_, written) = EvidenceReader::open(&fin.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    let again = reader.read(None).unwrap();
    assert_eq!(again.cycles.len(), written.len());
    for (a, w) in again.cycles.iter().zip(&written) {
        assert_eq!(
            (a.cycle, &a.phase, a.target_ns, &a.values),
            (w.cycle, &w.phase, w.target_ns, &w.values)
        );
        assert_eq!(a.spans.len(), w.spans.len());
        let us = |x: u64, y: u64| x.abs_diff(y) < 1_000_000;
        assert!(
            us(a.start_ns, w.start_ns),
            "{} vs {}",
            a.start_ns,
            w.start_ns
        );
    }

    // The finish removed the ring file (the reader's mapping stays valid)
    // while the recorder object still lives.
    assert!(!path.exists(), "a finish removes the ring file at once");
    drop(reader);
    drop(rec);
    assert!(!path.exists());
}

#[test]
fn a_ring_read_maps_its_times_by_the_writers_running_anchors() {
    // 1.2 s of cycles 20 ms apart, each begun between two reads of
    // CLOCK_MONOTONIC. A reader of the live ring fits the TSC's slope
    // between the start anchor and the recorder's newest running anchor
    // (one every 100 ms), so each cycle's start maps inside its bracket,
    // up to the anchors' own uncertainty (a 20 µs allowance here). With
    // quanta's calibration alone (off by 250 ppm on the machine this was
    // found on) the last starts were 0.3 ms off.
    let shm = tempfile::tempdir().unwrap();
    let mut b = builder(shm.path(), 100, None);
    let ids = register(&mut b);
    let mut rec = b.build().unwrap();
    let mut brackets = Vec::new();
    for _ in 0..60 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let m0 = looptime_capture::clock::monotonic_ns();
        rec.begin_cycle(ids.running, Release::NONE);
        let m1 = looptime_capture::clock::monotonic_ns();
        rec.end_cycle();
        brackets.push((m0, m1));
    }
    let reader = RingReader::open(rec.ring_path().unwrap()).unwrap();
    let live = reader.read(None).unwrap();
    assert_eq!(live.header.tsc.slope_source, "anchors");
    assert!(live.header.tsc.end.monotonic_ns > live.header.tsc.start.monotonic_ns + 1_000_000_000);
    assert_eq!(live.cycles.len(), 60);
    for (c, &(m0, m1)) in live.cycles.iter().zip(&brackets) {
        assert!(
            m0 - 20_000 <= c.start_ns && c.start_ns <= m1 + 20_000,
            "cycle {}: start {} outside [{m0}, {m1}] by more than 20 µs",
            c.cycle,
            c.start_ns
        );
    }
}

#[test]
fn a_panicking_owner_leaves_its_ring_for_recover() {
    let shm = tempfile::tempdir().unwrap();
    let dir = shm.path().to_path_buf();
    let result = std::thread::spawn(move || {
        let mut b = builder(&dir, 10, None);
        let ids = register(&mut b);
        let mut rec = b.build().unwrap();
        record(&mut rec, &ids, 0);
        panic!("the loop failed");
    })
    .join();
    assert!(result.is_err());
    assert_eq!(ring::list_rings(shm.path()).len(), 1);
}

#[test]
fn reset_forgets_the_last_episode_in_the_ring_too() {
    let shm = tempfile::tempdir().unwrap();
    let mut b = builder(shm.path(), 8, None);
    let ids = register(&mut b);
    let mut rec = b.build().unwrap();
    for i in 0..6 {
        record(&mut rec, &ids, i);
    }
    rec.reset();
    record(&mut rec, &ids, 100);
    let read = RingReader::open(rec.ring_path().unwrap())
        .unwrap()
        .read(None)
        .unwrap();
    // Only the new episode's cycle 0 (seq 100); slots 1..5 of the old one
    // must not read as the new episode's.
    assert_eq!(read.total_cycles, 1);
    assert_eq!(read.cycles.len(), 1);
    assert_eq!(read.cycles[0].values["seq"].as_i64(), Some(100));
}

#[test]
fn the_episode_dir_can_be_named_after_build() {
    let shm = tempfile::tempdir().unwrap();
    let mut b = builder(shm.path(), 8, None);
    register(&mut b);
    let mut rec = b.build().unwrap();
    let reader = RingReader::open(rec.ring_path().unwrap()).unwrap();
    assert_eq!(reader.meta().unwrap().episode_dir, None);
    rec.set_episode_dir("/runs/s/rollout-001").unwrap();
    assert_eq!(
        reader.meta().unwrap().episode_dir,
        Some(PathBuf::from("/runs/s/rollout-001"))
    );
    let long = "x".repeat(20_000);
    assert!(matches!(
        rec.set_episode_dir(long),
        Err(CaptureError::InvalidOption { .. })
    ));
}

#[test]
fn damaged_ring_files_are_refused_with_their_path_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("looptime-1-0.ring");
    std::fs::write(&short, [0u8; 100]).unwrap();
    let zeros = dir.path().join("looptime-2-0.ring");
    std::fs::write(&zeros, vec![0u8; 8192]).unwrap();
    let msg = |p: &Path| match RingReader::open(p) {
        Err(e @ CaptureError::BadRing { .. }) => e.to_string(),
        other => panic!("{}: {other:?}", p.display()),
    };
    let m = msg(&short);
    assert!(
        m.contains("looptime-1-0.ring") && m.contains("shorter than a ring header"),
        "{m}"
    );
    assert!(msg(&zeros).contains("no looptime ring magic"));

    // A real ring cut short: its header promises regions the file lacks.
    let mut b = builder(dir.path(), 1000, None);
    register(&mut b);
    let rec = b.build().unwrap();
    let bytes = std::fs::read(rec.ring_path().unwrap()).unwrap();
    let cut = dir.path().join("cut.ring");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(msg(&cut).contains("do not fit the file"));
    // A ring of the previous layout (3: no read time in its cycle slots)
    // is refused by its version, not misread: the version is the u32
    // after the 8-byte magic.
    let mut old = bytes.clone();
    old[8..12].copy_from_slice(&3u32.to_ne_bytes());
    let old_path = dir.path().join("old.ring");
    std::fs::write(&old_path, &old).unwrap();
    let m = msg(&old_path);
    assert!(
        m.contains("old.ring") && m.contains("ring layout version 3 is not the 4 this build reads"),
        "{m}"
    );
    // A missing file is an error naming it (the owner check's lstat is
    // the first look at it).
    let gone = dir.path().join("gone.ring");
    let e = looptime_capture::error_chain(&RingReader::open(&gone).unwrap_err());
    assert!(
        e.contains("cannot look at ring file")
            && e.contains("gone.ring")
            && e.contains("No such file"),
        "{e}"
    );
}

#[test]
fn list_rings_finds_only_ring_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("looptime-7-0.ring"), b"").unwrap();
    std::fs::write(dir.path().join("other.ring"), b"").unwrap();
    std::fs::write(dir.path().join("looptime-7-0.txt"), b"").unwrap();
    let found = ring::list_rings(dir.path());
    assert_eq!(found, [dir.path().join("looptime-7-0.ring")]);
    assert!(ring::list_rings(&dir.path().join("missing")).is_empty());
}

#[test]
fn an_explicit_shared_memory_ring_fails_loudly_and_the_heap_has_no_file() {
    let mut b = RecorderBuilder::new();
    b.max_cycles(10);
    b.ring(RingStorage::SharedMemory(PathBuf::from("/nonexistent/dir")));
    let e = b.build().unwrap_err();
    let text = looptime_capture::error_chain(&e);
    assert!(
        text.starts_with("cannot create ring file /nonexistent/dir/looptime-"),
        "{text}"
    );
    b.ring(RingStorage::Heap);
    let rec = b.build().unwrap();
    assert!(rec.ring_path().is_none() && rec.ring_note().is_none());
}

#[test]
fn a_failed_finish_keeps_the_ring_for_recover() {
    let shm = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // The JSONL's name is taken by a non-empty directory: the rename fails.
    let blocker = out.path().join(looptime_capture::CYCLES_FILE);
    std::fs::create_dir(&blocker).unwrap();
    std::fs::write(blocker.join("x"), b"x").unwrap();
    let mut b = builder(shm.path(), 10, Some(out.path()));
    let ids = register(&mut b);
    let mut rec = b.build().unwrap();
    record(&mut rec, &ids, 0);
    let path = rec.ring_path().unwrap().to_path_buf();
    assert!(rec.finish(out.path(), CaptureStatus::Complete).is_err());
    assert_eq!(
        RingReader::open(&path).unwrap().state(),
        RingState::Recording
    );
    drop(rec);
    assert!(
        path.exists(),
        "the evidence was not written, so the ring must stay"
    );
    // A later successful finish would have cleared it; here, clean up.
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_killed_writer_with_a_background_thread_recovers_both_threads_files() {
    let shm = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let episode = runs.path().join("ep");
    let control_ring = killed_writer_with(shm.path(), &episode, 20, 100, false, true);
    let rings = ring::list_rings(shm.path());
    assert_eq!(rings.len(), 2, "{rings:?}");
    for r in &rings {
        let Recovered::Written { dir, .. } = ring::recover(r).unwrap() else {
            panic!("expected {} to be written", r.display());
        };
        assert_eq!(dir, episode);
    }
    assert!(!control_ring.exists());
    let (control, ccycles) = EvidenceReader::open(episode.join("control_timing.jsonl"))
        .unwrap()
        .read_all()
        .unwrap();
    let (thread, tcycles) =
        EvidenceReader::open(episode.join("control_timing.camera_reader.jsonl"))
            .unwrap()
            .read_all()
            .unwrap();
    assert!(episode
        .join("control_timing_summary.camera_reader.json")
        .exists());
    assert_eq!(control.threads, ["camera_reader"]);
    assert_eq!(control.thread_name(), "control");
    assert_eq!(thread.thread_name(), "camera_reader");
    let (ct, tt) = (control.thread.unwrap().tid, thread.thread.unwrap().tid);
    assert!(ct.is_some() && tt.is_some() && ct != tt, "{ct:?} {tt:?}");
    // The thread stopped after 20 complete cycles; the control thread was
    // killed inside its 21st.
    assert_eq!(tcycles.len(), 20);
    assert_eq!(ccycles.len(), 20);
}

#[test]
fn a_reader_racing_a_writer_that_overwrites_gets_only_whole_cycles() {
    // The writer laps an 8-cycle ring as fast as it can on one thread while
    // this thread reads it over and over. Every cycle a read returns must
    // be one whole cycle, never a mix of two: its `seq` value equals its
    // index, its phase is the one cycle `i` was given, and it has its two
    // nested spans. Torn records (overwritten while read) are counted and
    // left out, not returned.
    const CYCLES: u64 = 300_000;
    let shm = tempfile::tempdir().unwrap();
    let mut b = builder(shm.path(), 8, None);
    let ids = register(&mut b);
    let mut rec = b.build().unwrap();
    let reader = RingReader::open(rec.ring_path().unwrap()).unwrap();
    // The writer goes on until the reader has read 100 times, so the two
    // overlap however the machine schedules them.
    let reads_done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = reads_done.clone();
    let writer = std::thread::spawn(move || {
        let mut i = 0;
        while i < CYCLES || seen.load(std::sync::atomic::Ordering::Relaxed) < 100 {
            record(&mut rec, &ids, i);
            i += 1;
        }
        rec
    });
    let (mut reads, mut returned, mut torn) = (0u64, 0u64, 0u64);
    while !writer.is_finished() {
        let r = reader.read(None).unwrap();
        reads += 1;
        reads_done.store(reads, std::sync::atomic::Ordering::Relaxed);
        torn += r.torn;
        assert!(r.cycles.len() <= 8, "{}", r.cycles.len());
        let mut prev = None;
        for c in &r.cycles {
            assert_eq!(c.values["seq"].as_u64(), Some(c.cycle), "a mixed record");
            let phase = if c.cycle < 5 { "warmup" } else { "running" };
            assert_eq!(c.phase, phase, "cycle {}", c.cycle);
            assert_eq!(c.spans.len(), 2, "cycle {}", c.cycle);
            assert_eq!(
                (c.spans[0].stage.as_str(), c.spans[1].stage.as_str()),
                ("outer", "inner")
            );
            assert_eq!(c.spans[1].parent, Some(0));
            assert!(c.cycle < r.total_cycles.max(1));
            if let Some(p) = prev {
                assert!(c.cycle > p, "oldest first");
            }
            prev = Some(c.cycle);
            returned += 1;
        }
    }
    let rec = writer.join().unwrap();
    assert!(rec.total_cycles() >= CYCLES);
    assert!(reads >= 100, "the reader read while the writer wrote");
    eprintln!("{reads} reads, {returned} whole cycles returned, {torn} torn records left out");
}

#[test]
fn unknown_phase_and_stage_ids_in_a_ring_are_damaged_records_skipped() {
    // Ten cycles in a live ring, then five slots damaged in the file at
    // the offsets of the fixed header and the slot layout (`Fixed`,
    // `CycleSlot`, `SpanSlot` in capture): cycle 3's phase id, cycle 6's
    // inner span's stage id, and cycle 8's inner span's parent (pointing
    // forward). The reader counts them as damaged and returns the other 7.
    use std::io::{Seek, SeekFrom, Write};
    let shm = tempfile::tempdir().unwrap();
    let mut b = builder(shm.path(), 100, None);
    let ids = register(&mut b);
    let mut rec = b.build().unwrap();
    for i in 0..10 {
        record(&mut rec, &ids, i);
    }
    let path = rec.ring_path().unwrap().to_path_buf();
    let bytes = std::fs::read(&path).unwrap();
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as u64;
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let (cycle_slot, span_slot) = (u32_at(20), u32_at(24));
    let (max_spans, cycles_at, spans_at) = (u64_at(32), u64_at(88), u64_at(96));
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let mut poke = |at: u64, v: u16| {
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&v.to_le_bytes()).unwrap();
    };
    // CycleSlot.phase is at byte 128 of its slot (15 u64s, 2 u32s before
    // it); SpanSlot.stage at 48 and
    // .parent at 50; span k of cycle c is slot c * max_spans + k.
    poke(cycles_at + 3 * cycle_slot + 128, 999);
    poke(spans_at + (6 * max_spans + 1) * span_slot + 48, 999);
    poke(spans_at + (8 * max_spans + 1) * span_slot + 50, 1);
    // Found by the `ring` fuzz target: cycle 5's own index (byte 8 of its
    // slot, after the sequence number) set to 99 came back as a cycle 99
    // between 4 and 6, and the recovered file broke the order every reader
    // of evidence requires. A slot whose index is not its place is damaged.
    poke(cycles_at + 5 * cycle_slot + 8, 99);
    // Also found by it: a span's attribute count (byte 53 of its slot)
    // damaged to 115, beyond the slot's 4, made recover panic slicing the
    // attributes. Such a span makes its cycle damaged.
    poke(spans_at + (7 * max_spans) * span_slot + 53, 115);
    let r = RingReader::open(&path).unwrap().read(None).unwrap();
    assert_eq!(r.damaged, 5);
    let kept: Vec<u64> = r.cycles.iter().map(|c| c.cycle).collect();
    assert_eq!(kept, [0, 1, 2, 4, 9]);
}

/// The ring's meta is JSON; an episode directory that is not UTF-8 has no
/// JSON form. It used to be written as an empty meta (a ring `recover`
/// could not read); now the build, or the later `set_episode_dir`, says so.
#[test]
fn an_episode_directory_that_is_not_utf8_is_refused_not_written_as_an_empty_meta() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp
        .path()
        .join(std::ffi::OsStr::from_bytes(b"episode-\xff"));
    let mut b = builder(tmp.path(), 16, Some(&bad));
    register(&mut b);
    let err = b.build().unwrap_err().to_string();
    assert!(err.contains("describe the episode directory"), "{err}");
    // Set later, on a recorder built without one: refused the same way,
    // and the recorder keeps its earlier (readable) meta.
    let mut b = builder(tmp.path(), 16, None);
    register(&mut b);
    let mut rec = b.build().unwrap();
    let err = looptime_capture::error_chain(&rec.set_episode_dir(&bad).unwrap_err());
    assert!(
        err.contains("describe the episode directory") && err.contains("UTF-8"),
        "{err}"
    );
}

#[test]
fn recover_into_writes_where_it_is_told_and_leaves_the_ring() {
    // A ring that names an episode directory; recover_into writes into
    // another one, never into the named one, and keeps the ring.
    let shm = tempfile::tempdir().unwrap();
    let named = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut b = builder(shm.path(), 100, Some(&named.path().join("ep")));
    let ids = register(&mut b);
    let mut rec = b.build().unwrap();
    for i in 0..12 {
        record(&mut rec, &ids, i);
    }
    let ring_path = rec.ring_path().unwrap().to_path_buf();
    let report = ring::recover_into(&ring_path, out.path()).unwrap();
    assert_eq!(report.summary.status, CaptureStatus::Recovered);
    let (_, cycles) = EvidenceReader::open(&report.cycles_path)
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(cycles.len(), 12);
    assert!(report.cycles_path.starts_with(out.path()));
    assert!(
        !named.path().join("ep").exists(),
        "the named directory is untouched"
    );
    assert!(ring_path.exists(), "the ring stays");
}

#[test]
fn a_ring_whose_header_names_an_unknown_schema_is_refused_not_recovered() {
    // Found by the `ring` fuzz target: schema_version in the ring's meta
    // damaged to 3 was recovered into a control_timing.jsonl that every
    // evidence reader refuses. The ring reader now refuses the ring.
    let shm = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut b = builder(shm.path(), 100, None);
    let ids = register(&mut b);
    let mut rec = b.build().unwrap();
    for i in 0..4 {
        record(&mut rec, &ids, i);
    }
    let path = rec.ring_path().unwrap().to_path_buf();
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes
        .windows(18)
        .position(|w| w == b"\"schema_version\":2")
        .expect("the meta's schema_version");
    bytes[at + 17] = b'3';
    let copy = shm.path().join("damaged.ring");
    std::fs::write(&copy, &bytes).unwrap();
    let err = RingReader::open(&copy)
        .unwrap()
        .read(None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("schema_version 3") && err.contains("damaged.ring"),
        "{err}"
    );
    let err = ring::recover_into(&copy, out.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("schema_version 3"), "{err}");
    assert!(!out.path().join("control_timing.jsonl").exists());
}

#[test]
fn recover_through_a_foreign_link_refuses_and_keeps_the_ring() {
    // A killed writer's ring names an episode under `runs`, a symbolic link
    // that (as root can arrange) another user owns: recover refuses it,
    // naming the link, writes nothing where it points and keeps the ring;
    // the same link owned by the caller is followed. Without root no link
    // can be made foreign, and only the followed case runs.
    let shm = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    std::fs::create_dir(base.join("target")).unwrap();
    std::os::unix::fs::symlink(base.join("target"), base.join("runs")).unwrap();
    let episode = base.join("runs/session-x/rollout-000");
    let ring_path = killed_writer(shm.path(), &episode, 5, 100, false);
    if std::os::unix::fs::lchown(base.join("runs"), Some(12345), None).is_ok() {
        let e = looptime_capture::error_chain(&ring::recover(&ring_path).unwrap_err());
        assert!(
            e.contains("runs is a symbolic link owned by uid 12345"),
            "{e}"
        );
        assert!(
            ring_path.exists(),
            "the ring is kept for a recover that may write"
        );
        assert!(!base.join("target/session-x").exists());
        std::os::unix::fs::lchown(
            base.join("runs"),
            Some(looptime_capture::ring::owner::euid()),
            None,
        )
        .unwrap();
    }
    let Recovered::Written { dir, report, .. } = ring::recover(&ring_path).unwrap() else {
        panic!("expected the evidence to be written");
    };
    // The report names the directory as the ring does, and the files are
    // where the caller's own link leads.
    assert_eq!(dir, episode);
    assert_eq!(report.cycles_path, episode.join("control_timing.jsonl"));
    assert!(base
        .join("target/session-x/rollout-000/control_timing.jsonl")
        .is_file());
}
