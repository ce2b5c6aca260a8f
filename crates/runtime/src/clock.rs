//! Clocks the scheduler runs on: the host's `CLOCK_MONOTONIC`, a
//! simulation clock for uncapped runs, and a mock for deterministic tests.
//!
//! Time is injected: the scheduler only ever asks a [`LoopClock`] for the
//! time, to sleep until an absolute instant, or to spin until one.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use looptime_capture::ClockDomain;

/// A clock that can read the time and wait until an absolute instant.
pub trait LoopClock {
    /// Current time in nanoseconds on this clock.
    fn now_ns(&self) -> u64;
    /// Block until `deadline_ns` (absolute) has passed, or return at once if
    /// it already has. May return late, never early.
    fn sleep_until_ns(&self, deadline_ns: u64);
    /// Busy-wait until `deadline_ns`; returns the time read when it passed.
    fn spin_until_ns(&self, deadline_ns: u64) -> u64 {
        loop {
            let t = self.now_ns();
            if t >= deadline_ns {
                return t;
            }
            std::hint::spin_loop();
        }
    }
    /// The clock domain its timestamps are in.
    fn domain(&self) -> ClockDomain;
}

/// `CLOCK_MONOTONIC`, sleeping with `clock_nanosleep(TIMER_ABSTIME)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonotonicClock;

impl LoopClock for MonotonicClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        looptime_capture::clock::monotonic_ns()
    }

    fn sleep_until_ns(&self, deadline_ns: u64) {
        crate::sys::sleep_until_monotonic_ns(deadline_ns);
    }

    fn domain(&self) -> ClockDomain {
        ClockDomain::HostMonotonic
    }
}

/// Virtual time for uncapped runs (`rtf = 0`): sleeping and spinning jump
/// straight to the deadline, and work takes no virtual time, so the loop runs
/// as fast as the work allows while `dt` follows the nominal schedule.
///
/// Its time is an atomic (read and written only by the thread that owns
/// the scheduler), so a scheduler on it can live in a Python object.
#[derive(Debug, Default)]
pub struct SimulationClock {
    now: AtomicU64,
}

impl SimulationClock {
    /// A simulation clock starting at `start_ns`.
    pub fn new(start_ns: u64) -> Self {
        Self {
            now: AtomicU64::new(start_ns),
        }
    }
}

impl LoopClock for SimulationClock {
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }
    fn sleep_until_ns(&self, deadline_ns: u64) {
        self.now.fetch_max(deadline_ns, Ordering::Relaxed);
    }
    fn spin_until_ns(&self, deadline_ns: u64) -> u64 {
        self.sleep_until_ns(deadline_ns);
        self.now_ns()
    }
    fn domain(&self) -> ClockDomain {
        ClockDomain::Simulation
    }
}

/// The clock a program's loop runs on, chosen by its real-time factor:
/// the host's monotonic clock when paced (`rtf > 0`), the simulation clock
/// when uncapped (`rtf = 0`), as `looptime serve` chooses. The bindings'
/// schedulers use it, so one scheduler type serves both.
#[derive(Debug)]
pub enum PacedClock {
    /// `CLOCK_MONOTONIC` (`rtf > 0`).
    Host(MonotonicClock),
    /// Virtual time from 0 (`rtf = 0`).
    Simulation(SimulationClock),
}

impl PacedClock {
    /// The clock for a real-time factor: simulation for 0, host otherwise.
    pub fn for_rtf(rtf: f64) -> Self {
        if rtf == 0.0 {
            PacedClock::Simulation(SimulationClock::new(0))
        } else {
            PacedClock::Host(MonotonicClock)
        }
    }
}

impl LoopClock for PacedClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        match self {
            PacedClock::Host(c) => c.now_ns(),
            PacedClock::Simulation(c) => c.now_ns(),
        }
    }
    fn sleep_until_ns(&self, deadline_ns: u64) {
        match self {
            PacedClock::Host(c) => c.sleep_until_ns(deadline_ns),
            PacedClock::Simulation(c) => c.sleep_until_ns(deadline_ns),
        }
    }
    fn spin_until_ns(&self, deadline_ns: u64) -> u64 {
        match self {
            PacedClock::Host(c) => c.spin_until_ns(deadline_ns),
            PacedClock::Simulation(c) => c.spin_until_ns(deadline_ns),
        }
    }
    fn domain(&self) -> ClockDomain {
        match self {
            PacedClock::Host(c) => c.domain(),
            PacedClock::Simulation(c) => c.domain(),
        }
    }
}

/// A scripted clock for tests: time moves only when the test advances it or
/// the scheduler sleeps; every sleep can be made to return late.
///
/// Cloning shares the same time, so a test keeps a handle while the
/// scheduler owns another.
#[derive(Debug, Clone, Default)]
pub struct MockClock {
    now: Rc<Cell<u64>>,
    oversleep_ns: Rc<Cell<u64>>,
    sleeps: Rc<Cell<u64>>,
}

impl MockClock {
    /// A mock clock at `start_ns`.
    pub fn new(start_ns: u64) -> Self {
        let c = Self::default();
        c.now.set(start_ns);
        c
    }
    /// Move time forward (simulated work).
    pub fn advance(&self, ns: u64) {
        self.now.set(self.now.get() + ns);
    }
    /// Make every later sleep return this much after its deadline.
    pub fn set_oversleep(&self, ns: u64) {
        self.oversleep_ns.set(ns);
    }
    /// How many times `sleep_until_ns` actually slept.
    pub fn sleeps(&self) -> u64 {
        self.sleeps.get()
    }
}

impl LoopClock for MockClock {
    fn now_ns(&self) -> u64 {
        self.now.get()
    }
    fn sleep_until_ns(&self, deadline_ns: u64) {
        if deadline_ns > self.now.get() {
            self.sleeps.set(self.sleeps.get() + 1);
            self.now.set(deadline_ns + self.oversleep_ns.get());
        }
    }
    fn spin_until_ns(&self, deadline_ns: u64) -> u64 {
        if deadline_ns > self.now.get() {
            self.now.set(deadline_ns);
        }
        self.now.get()
    }
    fn domain(&self) -> ClockDomain {
        ClockDomain::Simulation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtf_zero_runs_on_virtual_time_and_any_other_on_the_host() {
        let sim = PacedClock::for_rtf(0.0);
        assert_eq!(sim.domain(), ClockDomain::Simulation);
        assert_eq!(sim.now_ns(), 0);
        // Sleeping jumps to the deadline; an earlier deadline never moves it back.
        sim.sleep_until_ns(2_000_000);
        sim.sleep_until_ns(1_000_000);
        assert_eq!(sim.now_ns(), 2_000_000);
        assert_eq!(sim.spin_until_ns(3_000_000), 3_000_000);

        let host = PacedClock::for_rtf(0.5);
        assert_eq!(host.domain(), ClockDomain::HostMonotonic);
        let t = host.now_ns();
        assert!(host.spin_until_ns(t + 1_000) >= t + 1_000);
    }
}
