//! The clocks of the evidence: the domain each timestamp is taken on, the
//! table of them a header carries, the anchors that map TSC ticks and the
//! wall clock onto the host monotonic clock, and the TSC calibration.

use serde::{Deserialize, Serialize};

/// The clock a timestamp was taken on.
///
/// Two timestamps may be subtracted only when their domains are
/// [comparable](ClockDomain::comparable_with).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockDomain {
    /// `CLOCK_MONOTONIC` nanoseconds, read directly from the kernel.
    HostMonotonic,
    /// TSC ticks read in the loop and mapped onto `CLOCK_MONOTONIC`
    /// nanoseconds when the file was written, through the two anchors in
    /// [`TscCalibration`].
    TscHostMonotonic,
    /// A simulation clock (for example an uncapped run, `rtf = 0`). It has
    /// no fixed relation to host time.
    Simulation,
}

impl ClockDomain {
    /// Whether timestamps of `self` and `other` can be subtracted.
    ///
    /// Host monotonic and TSC-derived timestamps are comparable (the TSC is
    /// mapped onto the monotonic clock); a simulation clock is comparable
    /// only with itself.
    pub fn comparable_with(self, other: ClockDomain) -> bool {
        use ClockDomain::*;
        matches!(
            (self, other),
            (
                HostMonotonic | TscHostMonotonic,
                HostMonotonic | TscHostMonotonic
            ) | (Simulation, Simulation)
        )
    }

    /// The name used in the files.
    pub fn as_str(self) -> &'static str {
        match self {
            ClockDomain::HostMonotonic => "host_monotonic",
            ClockDomain::TscHostMonotonic => "tsc_host_monotonic",
            ClockDomain::Simulation => "simulation",
        }
    }
}

/// The clock domain of every timestamp field of a [`CycleRecord`](super::CycleRecord).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockTable {
    /// `CycleRecord::start_ns`.
    pub start_ns: ClockDomain,
    /// `CycleRecord::end_ns`.
    pub end_ns: ClockDomain,
    /// `CycleRecord::sleep_start_ns`.
    pub sleep_start_ns: ClockDomain,
    /// `CycleRecord::wake_ns`.
    pub wake_ns: ClockDomain,
    /// `CycleRecord::target_ns`.
    pub target_ns: ClockDomain,
    /// `SpanRecord::start_ns`.
    pub span_start_ns: ClockDomain,
}

impl ClockTable {
    /// Whether `target_ns` can be subtracted from `wake_ns` and `start_ns`
    /// (sleep overshoot and deadline lag exist only then).
    pub fn schedule_comparable(&self) -> bool {
        self.target_ns.comparable_with(self.wake_ns)
            && self.target_ns.comparable_with(self.start_ns)
    }
}

/// One (TSC tick, monotonic nanosecond) pair taken back to back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockAnchor {
    /// Raw TSC ticks (the midpoint of the two reads that bracket `monotonic_ns`).
    pub raw: u64,
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub monotonic_ns: u64,
    /// Half the width of the bracket, in nanoseconds: how far `raw` may be
    /// from the instant `monotonic_ns` was read.
    pub uncertainty_ns: u64,
}

/// A wall-clock reading paired with a monotonic one, taken back to back:
/// what maps the evidence's host-monotonic times onto the wall-clock time
/// robot recordings (rosbag2, MCAP) stamp their messages with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallClockAnchor {
    /// `CLOCK_REALTIME`, ns since the Unix epoch.
    pub realtime_ns: u64,
    /// `CLOCK_MONOTONIC` at the same instant (the midpoint of the two reads
    /// that bracket the wall-clock read).
    pub monotonic_ns: u64,
    /// Half the gap between those two monotonic reads: how far apart the
    /// pair may be.
    pub uncertainty_ns: u64,
}

impl WallClockAnchor {
    /// The wall-clock time of host-monotonic `mono_ns` through this anchor.
    pub fn wall_ns(&self, mono_ns: u64) -> u64 {
        (self.realtime_ns as i128 + mono_ns as i128 - self.monotonic_ns as i128)
            .clamp(0, u64::MAX as i128) as u64
    }
}

/// The wall-clock anchors of a recording (schema 2, added with the MCAP
/// export; absent in older files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallClock {
    /// Taken when the recorder was built (or reset).
    pub start: WallClockAnchor,
    /// Taken at finish; absent in recovered evidence (the process died).
    #[serde(default)]
    pub end: Option<WallClockAnchor>,
}

/// How TSC ticks were mapped onto host monotonic nanoseconds.
///
/// `ns(raw) = start.monotonic_ns + (raw − start.raw) × ns_per_tick`, where
/// `ns_per_tick` is the slope between the two anchors (or quanta's own
/// calibration when the anchors are less than `MIN_FIT_SPAN_NS` apart).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TscCalibration {
    /// Taken when the recorder was built.
    pub start: ClockAnchor,
    /// Taken when the files were written.
    pub end: ClockAnchor,
    /// Nanoseconds per raw tick used for the mapping.
    pub ns_per_tick: f64,
    /// `anchors` when the slope came from the two anchors, `quanta` when the
    /// anchors were too close and quanta's calibration was used.
    pub slope_source: String,
}
