//! Live statistics and lifecycle events, off the control thread.
//!
//! The control thread pushes one [`CycleStat`] per cycle (and an
//! [`Event`] per lifecycle transition) into bounded lock-free queues with a
//! non-blocking push: when a queue is full the item is dropped and counted.
//! A maintenance thread drains them, prints a summary every statistics
//! interval and at most one aggregated deadline warning per second, and
//! keeps the events for `events.jsonl`. The control thread never prints.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_queue::ArrayQueue;
use serde::Serialize;

/// Capacity of the per-cycle statistics queue.
pub const STATS_QUEUE_CAPACITY: usize = 4096;
/// Capacity of the lifecycle event queue.
pub const EVENT_QUEUE_CAPACITY: usize = 256;

/// One cycle, as the maintenance thread sees it (host monotonic ns).
#[derive(Clone, Copy, Debug, Default)]
pub struct CycleStat {
    /// Cycle index.
    pub cycle: u64,
    /// Start-to-start time from the previous cycle.
    pub period_ns: u64,
    /// Work duration.
    pub work_ns: u64,
    /// Start minus release point (0 when not on a host clock).
    pub lag_ns: i64,
    /// The release point had passed.
    pub overdue: bool,
}

/// A lifecycle event kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Threads started, buffers allocated.
    Prepare,
    /// Warmup phase began.
    Warmup,
    /// Running phase began.
    Running,
    /// Pause began.
    Pause,
    /// Pause ended.
    Resume,
    /// The loop ended normally.
    Finish,
    /// The loop ended on a signal.
    Abort,
    /// Evidence files written.
    EvidenceWritten,
}

/// A lifecycle event (a line of `events.jsonl`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Event {
    /// Host monotonic time of the event.
    pub t_ns: u64,
    /// The cycle about to run (or the last one, for finish/abort).
    pub cycle: u64,
    /// What happened.
    pub event: EventKind,
}

/// The queues shared between the control thread and the maintenance thread.
#[derive(Debug)]
pub struct LiveChannel {
    stats: ArrayQueue<CycleStat>,
    events: ArrayQueue<Event>,
    stats_dropped: AtomicU64,
    events_dropped: AtomicU64,
    done: AtomicBool,
}

impl LiveChannel {
    /// Empty, bounded queues.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            stats: ArrayQueue::new(STATS_QUEUE_CAPACITY),
            events: ArrayQueue::new(EVENT_QUEUE_CAPACITY),
            stats_dropped: AtomicU64::new(0),
            events_dropped: AtomicU64::new(0),
            done: AtomicBool::new(false),
        })
    }

    /// Non-blocking push; drops and counts when full.
    #[inline]
    pub fn push_stat(&self, s: CycleStat) {
        if self.stats.push(s).is_err() {
            self.stats_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Non-blocking push; drops and counts when full.
    #[inline]
    pub fn push_event(&self, e: Event) {
        if self.events.push(e).is_err() {
            self.events_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Items dropped because a queue was full: (stats, events).
    pub fn dropped(&self) -> (u64, u64) {
        (
            self.stats_dropped.load(Ordering::Relaxed),
            self.events_dropped.load(Ordering::Relaxed),
        )
    }
}

/// Settings of the maintenance thread.
#[derive(Clone, Copy, Debug)]
pub struct MaintenanceConfig {
    /// Seconds between summaries (0 = none).
    pub interval_s: f64,
    /// Lag threshold for the deadline warning.
    pub late_warn_ns: i64,
}

/// What the maintenance thread saw over the whole episode.
#[derive(Debug, Default, Clone)]
pub struct MaintenanceReport {
    /// Events in arrival order.
    pub events: Vec<Event>,
    /// Cycles received.
    pub cycles: u64,
    /// Deadline warnings printed.
    pub warnings_printed: u64,
    /// Summaries printed.
    pub summaries_printed: u64,
}

/// The running maintenance thread.
#[derive(Debug)]
pub struct Maintenance {
    channel: Arc<LiveChannel>,
    handle: Option<JoinHandle<MaintenanceReport>>,
}

#[derive(Default)]
struct Window {
    cycles: u64,
    period_sum: u64,
    period_max: u64,
    work_max: u64,
    overdue: u64,
}

#[derive(Default)]
struct LateWindow {
    count: u64,
    max_lag: i64,
}

impl Maintenance {
    /// Start the maintenance thread; it prints to `out` (stderr in the CLI).
    ///
    /// # Errors
    /// When the thread cannot be spawned.
    pub fn spawn(
        channel: Arc<LiveChannel>,
        cfg: MaintenanceConfig,
        mut out: Box<dyn Write + Send>,
    ) -> std::io::Result<Self> {
        let ch = channel.clone();
        let handle = std::thread::Builder::new()
            .name("maintenance".into())
            .spawn(move || {
                let mut report = MaintenanceReport::default();
                let mut win = Window::default();
                let mut late = LateWindow::default();
                let now = || looptime_capture::clock::monotonic_ns();
                let mut last_summary = now();
                let mut last_warning = 0u64;
                let interval_ns = (cfg.interval_s * 1e9) as u64;
                loop {
                    let finished = ch.done.load(Ordering::Acquire);
                    while let Some(e) = ch.events.pop() {
                        report.events.push(e);
                    }
                    while let Some(s) = ch.stats.pop() {
                        report.cycles += 1;
                        win.cycles += 1;
                        win.period_sum += s.period_ns;
                        win.period_max = win.period_max.max(s.period_ns);
                        win.work_max = win.work_max.max(s.work_ns);
                        win.overdue += s.overdue as u64;
                        if s.lag_ns > cfg.late_warn_ns {
                            late.count += 1;
                            late.max_lag = late.max_lag.max(s.lag_ns);
                        }
                    }
                    let t = now();
                    if late.count > 0 && t.saturating_sub(last_warning) >= 1_000_000_000 {
                        let _ = writeln!(
                            out,
                            "[warn] {} cycle(s) started more than {:.0} µs after their release point (max {:.3} ms)",
                            late.count,
                            cfg.late_warn_ns as f64 / 1e3,
                            late.max_lag as f64 / 1e6
                        );
                        report.warnings_printed += 1;
                        last_warning = t;
                        late = LateWindow::default();
                    }
                    if interval_ns > 0 && t.saturating_sub(last_summary) >= interval_ns && win.cycles > 0 {
                        let mean = win.period_sum as f64 / win.cycles as f64;
                        let _ = writeln!(
                            out,
                            "[stats] {} cycles, {:.2} Hz, period max {:.3} ms, work max {:.3} ms, {} overruns",
                            win.cycles,
                            if mean > 0.0 { 1e9 / mean } else { 0.0 },
                            win.period_max as f64 / 1e6,
                            win.work_max as f64 / 1e6,
                            win.overdue
                        );
                        report.summaries_printed += 1;
                        last_summary = t;
                        win = Window::default();
                    }
                    if finished && ch.stats.is_empty() && ch.events.is_empty() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                report
            })?;
        Ok(Self {
            channel,
            handle: Some(handle),
        })
    }

    /// Drain what is left and stop.
    pub fn stop(mut self) -> MaintenanceReport {
        self.channel.done.store(true, Ordering::Release);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Maintenance {
    fn drop(&mut self) {
        self.channel.done.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
