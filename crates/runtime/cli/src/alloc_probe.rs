//! Test builds only: a counting global allocator for the runtime's unit
//! tests, so that one of them can show that `serve`'s control loop
//! allocates nothing once its first cycle begins (the hot-path rule of the
//! design). Counting is per thread and off by default; the control loop
//! switches it on for its own thread just before its first cycle and off
//! after its last, and publishes what it counted in [`CONTROL_LOOP`].
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::AtomicU64;

// Const-initialised thread locals without destructors never allocate.
thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

/// Allocations, reallocations and frees the last control loop made on its
/// thread between its first and last cycle (`u64::MAX` before any loop).
pub(crate) static CONTROL_LOOP: AtomicU64 = AtomicU64::new(u64::MAX);

/// Start counting on this thread, from zero.
pub(crate) fn start() {
    COUNT.with(|c| c.set(0));
    ON.with(|c| c.set(true));
}

/// Stop counting on this thread; returns what was counted.
pub(crate) fn stop() -> u64 {
    ON.with(|c| c.set(false));
    COUNT.with(Cell::get)
}

fn bump() {
    if ON.with(Cell::get) {
        COUNT.with(|c| c.set(c.get() + 1));
    }
}

struct Counting;

// SAFETY: every method forwards to the system allocator unchanged; the
// counters are thread-local cells, which do not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        bump();
        // SAFETY: ptr came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use crate::config::Config;
    use crate::control::LoopState;
    use crate::serve::{serve, ServeOptions};

    #[test]
    fn the_counter_counts_on_its_thread_only_while_on() {
        super::start();
        let v: Vec<u64> = std::hint::black_box(Vec::with_capacity(8));
        drop(v);
        assert_eq!(super::stop(), 2, "one allocation and one free");
        drop(std::hint::black_box(vec![1u8; 8]));
        assert_eq!(super::stop(), 2, "nothing counted while off");
    }

    /// Serve `[run]` keys `run` and the further tables `rest` into a fresh
    /// directory; the allocations the control loop counted, with what
    /// serve printed.
    fn serve_counted(run: &str, rest: &str) -> (u64, String) {
        let tmp = tempfile::tempdir().unwrap();
        let text = format!(
            "[run]\n{run}\nruns_dir = {:?}\n{rest}\n",
            tmp.path().display().to_string()
        );
        let config = Config::from_toml(&text, Path::new("alloc.toml")).unwrap();
        let opts = ServeOptions {
            config,
            config_source: "test".into(),
        };
        let mut out = Vec::new();
        let outcome = serve(
            &opts,
            Arc::new(AtomicBool::new(false)),
            Arc::new(LoopState::default()),
            &mut out,
            || Box::new(std::io::sink()),
        )
        .unwrap();
        assert!(!outcome.stopped);
        let allocs = super::CONTROL_LOOP.load(Ordering::SeqCst);
        (allocs, String::from_utf8_lossy(&out).into_owned())
    }

    #[test]
    fn the_loop_paced_by_the_robot_peer_allocates_nothing_across_its_cycles() {
        // 0.3 s at 1 kHz against the UDP peer, with stalls and late answers:
        // every receive, release and answer, counted on the control thread.
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (allocs, out) = serve_counted(
            "rate_hz = 1000.0\nwarmup_s = 0.05\nduration_s = 0.3\ncontrol_timing = true\n\
             timing_max_cycles = 200\ntiming_ring = \"heap\"",
            "[robot]\ntransport = \"udp\"\nstall_every_ms = 100.0\nstall_ms = 5.0\n\
             late_answer_every = 50\nlate_answer_us = 2000.0\n\
             [stages.camera_read.cost]\nmean_us = 2.0\n[stages.viewer_control.cost]\nmean_us = 2.0\n\
             [stages.adapter_decode.cost]\nmean_us = 2.0\n[stages.executor.cost]\nmean_us = 2.0\n\
             [stages.robot_send_command.cost]\nmean_us = 2.0\n[stages.recording.cost]\nmean_us = 2.0",
        );
        // What the test controls: the rollout ran to its end (complete:
        // the peer's stream ended, whatever a loaded host lost on the way)
        // over at least 200 cycles, more than the 200-cycle ring holds (so
        // wraparound is inside the count), with no allocation. Never that
        // a loaded host kept every one of the 350 states.
        let cycles: u64 = out
            .split(" cycles, complete")
            .next()
            .and_then(|head| head.rsplit(": ").next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no complete rollout in {out}"));
        assert!(cycles >= 200, "{cycles} cycles\n{out}");
        assert_eq!(
            allocs, 0,
            "{allocs} allocations in the input-paced loop\n{out}"
        );
    }

    /// The probe's result is one static: the serve tests take turns.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn serves_control_loop_allocates_nothing_across_its_cycles() {
        // An uncapped 1,100-cycle run (warmup, running, a pause) of the
        // simulated robot, recording into a heap ring of 500 cycles, so it
        // wraps, with background threads recorded, live statistics and
        // events: every cycle of the loop, counted on the control thread.
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (allocs, out) = serve_counted(
            "rtf = 0.0\nwarmup_s = 1.0\nduration_s = 10.0\ncontrol_timing = true\n\
             timing_max_cycles = 500\ntiming_ring = \"heap\"",
            "[lifecycle]\npause_at_s = 3.0\npause_s = 1.0\n[stats]\ninterval_s = 0.5",
        );
        assert_eq!(allocs, 0, "{allocs} allocations in the control loop\n{out}");
    }
}
