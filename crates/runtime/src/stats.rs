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
    /// End minus the next release point (its own plus one period), on the
    /// host clock; `None` without a release point (input-paced, uncapped).
    pub completion_lag_ns: Option<i64>,
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
    /// Lag threshold for the deadline warning (the declared tolerance, when
    /// there is one).
    pub late_warn_ns: i64,
    /// The effective period (0 for an input-paced loop): without a declared
    /// budget, the warning's verdict blames work longer than it.
    pub period_ns: u64,
    /// The declared compute budget: `[stats]` counts the cycles whose work
    /// exceeded it.
    pub compute_budget_ns: Option<u64>,
    /// The declared deadline tolerance: `[stats]` counts wake and
    /// completion misses against it, and the warning names both.
    pub deadline_tolerance_ns: Option<u64>,
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
    budget_overruns: u64,
    wake_misses: u64,
    completion_misses: u64,
}

/// The misses since the last warning.
#[derive(Default)]
struct LateWindow {
    /// Starts later than the threshold, and the largest lag.
    count: u64,
    max_lag: i64,
    /// Ends later than the next release plus the tolerance, and the
    /// largest excess.
    completion: u64,
    max_completion: i64,
    /// Of the misses, those that came with work over the budget (the
    /// period when none is declared) or after an overrun: work's.
    work_caused: u64,
}

impl LateWindow {
    /// Count `s`'s misses: a start later than `late_ns`, an end later than
    /// the next release plus `tolerance`.
    fn add(&mut self, s: &CycleStat, late_ns: i64, tolerance: Option<u64>, budget_ns: u64) {
        let late = s.lag_ns > late_ns;
        let completion = match (tolerance, s.completion_lag_ns) {
            (Some(t), Some(c)) if c > t as i64 => Some(c - t as i64),
            _ => None,
        };
        if late {
            self.count += 1;
            self.max_lag = self.max_lag.max(s.lag_ns);
        }
        if let Some(excess) = completion {
            self.completion += 1;
            self.max_completion = self.max_completion.max(excess);
        }
        if (late || completion.is_some()) && (s.work_ns > budget_ns || s.overdue) {
            self.work_caused += 1;
        }
    }

    fn misses(&self) -> u64 {
        self.count + self.completion
    }

    /// The aggregated warning: the misses by kind, then a first verdict.
    fn warning(&self, cfg: &MaintenanceConfig) -> String {
        let ms = |ns: i64| ns as f64 / 1e6;
        let mut parts = Vec::new();
        if self.count > 0 {
            parts.push(match cfg.deadline_tolerance_ns {
                Some(t) => format!(
                    "{} wake miss(es) (start later than release + {:.3} ms; max lag {:.3} ms)",
                    self.count,
                    t as f64 / 1e6,
                    ms(self.max_lag)
                ),
                None => format!(
                    "{} cycle(s) started more than {:.0} µs after their release point (max {:.3} ms)",
                    self.count,
                    cfg.late_warn_ns as f64 / 1e3,
                    ms(self.max_lag)
                ),
            });
        }
        if self.completion > 0 {
            parts.push(format!(
                "{} completion miss(es) (end later than the next release + {:.3} ms; max {:.3} ms over)",
                self.completion,
                cfg.deadline_tolerance_ns.unwrap_or(0) as f64 / 1e6,
                ms(self.max_completion)
            ));
        }
        let limit = if cfg.compute_budget_ns.is_some() {
            "the compute budget"
        } else {
            "the period"
        };
        let n = self.misses();
        let verdict = if 2 * self.work_caused >= n {
            format!(
                "work ({} of {n} came with work over {limit} or after an overrun)",
                self.work_caused
            )
        } else {
            format!(
                "scheduling ({} of {n} came with work within {limit} and no overrun before them: the wake was late)",
                n - self.work_caused
            )
        };
        format!("[warn] {}; first verdict: {verdict}", parts.join(", "))
    }
}

impl Window {
    fn add(&mut self, s: &CycleStat, cfg: &MaintenanceConfig, budget_ns: u64) {
        self.cycles += 1;
        self.period_sum += s.period_ns;
        self.period_max = self.period_max.max(s.period_ns);
        self.work_max = self.work_max.max(s.work_ns);
        self.overdue += s.overdue as u64;
        if cfg.compute_budget_ns.is_some() && s.work_ns > budget_ns {
            self.budget_overruns += 1;
        }
        if let Some(t) = cfg.deadline_tolerance_ns {
            self.wake_misses += (s.lag_ns > t as i64) as u64;
            self.completion_misses += s.completion_lag_ns.is_some_and(|c| c > t as i64) as u64;
        }
    }

    /// The `[stats]` line: the window's counts, declared ones included.
    fn line(&self, cfg: &MaintenanceConfig) -> String {
        let mean = self.period_sum as f64 / self.cycles as f64;
        let mut declared = String::new();
        if cfg.compute_budget_ns.is_some() {
            declared += &format!("{} budget overruns, ", self.budget_overruns);
        }
        // An input-paced loop (no period of its own) has no release point
        // to miss: its line counts budget overruns only.
        if cfg.deadline_tolerance_ns.is_some() && cfg.period_ns > 0 {
            declared += &format!(
                "{} wake misses, {} completion misses, ",
                self.wake_misses, self.completion_misses
            );
        }
        format!(
            "[stats] {} cycles, {:.2} Hz, period max {:.3} ms, work max {:.3} ms, {declared}{} overruns",
            self.cycles,
            if mean > 0.0 { 1e9 / mean } else { 0.0 },
            self.period_max as f64 / 1e6,
            self.work_max as f64 / 1e6,
            self.overdue
        )
    }
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
                // Work over this is work's fault in the warning's verdict.
                let budget_ns = cfg.compute_budget_ns.unwrap_or(if cfg.period_ns > 0 {
                    cfg.period_ns
                } else {
                    u64::MAX
                });
                loop {
                    let finished = ch.done.load(Ordering::Acquire);
                    while let Some(e) = ch.events.pop() {
                        report.events.push(e);
                    }
                    while let Some(s) = ch.stats.pop() {
                        report.cycles += 1;
                        win.add(&s, &cfg, budget_ns);
                        late.add(&s, cfg.late_warn_ns, cfg.deadline_tolerance_ns, budget_ns);
                    }
                    let t = now();
                    if late.misses() > 0 && t.saturating_sub(last_warning) >= 1_000_000_000 {
                        let _ = writeln!(out, "{}", late.warning(&cfg));
                        report.warnings_printed += 1;
                        last_warning = t;
                        late = LateWindow::default();
                    }
                    if interval_ns > 0
                        && t.saturating_sub(last_summary) >= interval_ns
                        && win.cycles > 0
                    {
                        let _ = writeln!(out, "{}", win.line(&cfg));
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

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
