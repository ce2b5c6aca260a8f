//! The scheduler's input mode: a loop released by its inputs (a robot's
//! state every millisecond, a bus's cycle) rather than by deadlines of its
//! own. There is no sleep: the caller blocks in its own receive, wrapped by
//! the recorder's `begin_wait` / `end_wait`, reads the clock when it
//! returns, and hands the arrival to [`InputPacer::arrived`]. The
//! [`InputTick`] it gets back carries the measured `dt` the controller
//! integrates with and the cycle's [`Release::input`] (docs/input-paced.md).
//!
//! ```
//! use looptime_runtime::input::{DtSource, InputPacer};
//!
//! let mut pacer = InputPacer::new(3_000_000).unwrap(); // dt at most 3 ms
//! pacer.start(0);
//! // States arrive at 1.0 and 2.1 ms; the robot's own clock says 1 ms apart.
//! let a = pacer.arrived(1_000_000, Some(41), None);
//! let b = pacer.arrived(2_100_000, Some(42), Some(1_000_000));
//! assert_eq!((a.dt_measured_ns, a.dt_source), (1_000_000, DtSource::Arrivals));
//! assert_eq!(b.dt_measured_ns, 1_100_000); // no earlier input clock yet
//! let c = pacer.arrived(3_050_000, Some(43), Some(2_000_000));
//! assert_eq!((c.dt_measured_ns, c.dt_source), (1_000_000, DtSource::InputClock));
//! ```

use looptime_capture::Release;

use crate::scheduler::SchedulerError;

/// Where an [`InputTick`]'s `dt_measured_ns` came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtSource {
    /// The gap between this arrival and the previous one (or the start).
    Arrivals,
    /// The difference of the input's own clock between this input and the
    /// previous one (the rule where the robot hands its time: FCI's).
    InputClock,
}

/// One input-paced release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputTick {
    /// When the input arrived (host monotonic ns, read after the receive).
    pub arrival_ns: u64,
    /// The input's own counter, when it carries one.
    pub seq: Option<u64>,
    /// The time to integrate over, bounded by `max_dt`.
    pub dt_measured_ns: u64,
    /// True when `dt_measured_ns` was clamped to `max_dt`.
    pub dt_clamped: bool,
    /// Where `dt_measured_ns` came from.
    pub dt_source: DtSource,
}

impl InputTick {
    /// What the recorder's `begin_cycle` takes of this tick.
    pub fn release(&self) -> Release {
        Release::input(self.arrival_ns, self.seq)
    }
}

/// Turns arrivals into input-paced releases with a measured, bounded `dt`.
#[derive(Clone, Copy, Debug)]
pub struct InputPacer {
    max_dt_ns: u64,
    prev_arrival: Option<u64>,
    prev_input_clock: Option<u64>,
}

impl InputPacer {
    /// A pacer whose `dt` is bounded by `max_dt_ns` (say three periods).
    ///
    /// # Errors
    /// [`SchedulerError::ZeroMaxDt`] for a zero bound: no `dt` could pass.
    pub fn new(max_dt_ns: u64) -> Result<Self, SchedulerError> {
        if max_dt_ns == 0 {
            return Err(SchedulerError::ZeroMaxDt);
        }
        Ok(InputPacer {
            max_dt_ns,
            prev_arrival: None,
            prev_input_clock: None,
        })
    }

    /// The origin the first arrival's `dt` is measured from (host
    /// monotonic ns); without it, the first `dt` is 0.
    pub fn start(&mut self, origin_ns: u64) {
        self.prev_arrival = Some(origin_ns);
        self.prev_input_clock = None;
    }

    /// An input arrived at `arrival_ns` with its counter `seq` and, when it
    /// carries one, its own clock `input_clock_ns`. The `dt` is the input
    /// clock's step when this and the previous input both carried one and
    /// it went forward, else the gap between arrivals; either bounded by
    /// `max_dt`.
    pub fn arrived(
        &mut self,
        arrival_ns: u64,
        seq: Option<u64>,
        input_clock_ns: Option<u64>,
    ) -> InputTick {
        let by_clock = match (self.prev_input_clock, input_clock_ns) {
            (Some(p), Some(c)) if c > p => Some(c - p),
            _ => None,
        };
        let (elapsed, dt_source) = match by_clock {
            Some(d) => (d, DtSource::InputClock),
            None => (
                self.prev_arrival
                    .map_or(0, |p| arrival_ns.saturating_sub(p)),
                DtSource::Arrivals,
            ),
        };
        self.prev_arrival = Some(arrival_ns);
        self.prev_input_clock = input_clock_ns;
        InputTick {
            arrival_ns,
            seq,
            dt_measured_ns: elapsed.min(self.max_dt_ns),
            dt_clamped: elapsed > self.max_dt_ns,
            dt_source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use looptime_capture::PaceKind;

    #[test]
    fn dt_is_the_arrival_gap_bounded_and_the_release_is_the_inputs() {
        let mut p = InputPacer::new(3_000).unwrap();
        // Without a start the first dt is 0; then the gaps: 1,000 and a
        // stall of 5,000 clamped to 3,000.
        let t: Vec<_> = [10_000, 11_000, 16_000]
            .iter()
            .zip(7..)
            .map(|(&a, s)| p.arrived(a, Some(s), None))
            .collect();
        let dts: Vec<_> = t.iter().map(|x| (x.dt_measured_ns, x.dt_clamped)).collect();
        assert_eq!(dts, [(0, false), (1_000, false), (3_000, true)]);
        let r = t[2].release();
        assert_eq!(
            (r.pace, r.arrival_ns, r.input_seq, r.target_ns),
            (PaceKind::Input, Some(16_000), Some(9), None)
        );
    }

    #[test]
    fn the_input_clock_wins_when_two_inputs_carry_it_and_it_goes_forward() {
        let mut p = InputPacer::new(10_000).unwrap();
        p.start(0);
        let a = p.arrived(1_500, None, Some(100_000));
        let b = p.arrived(2_600, None, Some(101_000));
        // The robot's clock went back (a restart): the arrival gap instead.
        let c = p.arrived(3_600, None, Some(50));
        assert_eq!(
            [a, b, c].map(|t| (t.dt_measured_ns, t.dt_source)),
            [
                (1_500, DtSource::Arrivals),
                (1_000, DtSource::InputClock),
                (1_000, DtSource::Arrivals)
            ]
        );
        assert_eq!(InputPacer::new(0).unwrap_err(), SchedulerError::ZeroMaxDt);
    }
}
