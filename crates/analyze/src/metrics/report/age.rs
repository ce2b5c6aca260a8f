//! The data-age part of the report (computed by `metrics::data_age`).

use serde::{Deserialize, Serialize};

use super::Dist;

/// Data age of an episode: one entry per declared source of the control
/// thread's header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataAgeReport {
    /// Samples beyond a cycle's slots, summed over the control thread's
    /// retained cycles (counted by the recorder, not stored).
    pub samples_dropped: u64,
    /// Per declared source, in declaration order.
    pub sources: Vec<SourceAge>,
}

/// One source's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceAge {
    /// The source's name.
    pub source: String,
    /// The clock its stamps are on.
    pub clock: String,
    /// Its declared staleness limit.
    pub max_age_ns: Option<u64>,
    /// Why ages are not computed, when they are not (a stamp clock that
    /// is not this host's monotonic clock).
    pub not_comparable: Option<String>,
    /// Per phase of the uses, in phase order.
    pub phases: Vec<SourcePhase>,
    /// Publication, when a thread recorded it.
    pub production: Option<Production>,
}

/// One source's uses in one phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourcePhase {
    /// The phase.
    pub phase: String,
    /// Samples of the source the control thread's cycles of this phase used.
    pub uses: u64,
    /// Moment of use − stamp, over the uses with a stamp not after the use.
    pub age_at_use: Option<Dist>,
    /// Start of the first command span at or after the use in the same
    /// cycle − stamp (uses followed by no command span have none).
    pub age_at_command: Option<Dist>,
    /// Uses older than `max_age_ns` (absent without a limit or a
    /// comparable clock).
    pub stale: Option<u64>,
    /// `stale / uses with an age`, rounded to 10⁻⁴.
    pub stale_share: Option<f64>,
    /// Uses whose stamp is after the moment of use (clocks disagree, or
    /// the caller passed a wrong stamp): left out of the ages and counted.
    pub stamped_in_future: u64,
    /// Uses of the same sequence number as the source's previous use.
    pub reused: u64,
    /// Sequence numbers passed over between successive uses: `seq − prev − 1`
    /// summed where `seq > prev`.
    pub skipped: u64,
    /// Uses whose sequence number is below the previous use's (a producer
    /// restart or a wrap): neither reuse nor a gap.
    pub seq_resets: u64,
}

/// How a source's samples were published and taken up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Production {
    /// The threads that recorded publishing it.
    pub threads: Vec<String>,
    /// Samples published.
    pub produced: u64,
    /// `(produced − 1) / (last − first publication)`, in Hz (absent with
    /// fewer than two).
    pub rate_hz: Option<f64>,
    /// First use − publication, per published sample that was used.
    pub wait_to_first_use: Option<Dist>,
    /// Samples published before the source's last use and never used.
    pub never_used: u64,
    /// Σ (`seq − prev − 1`) over publications, in time order, whose `seq`
    /// exceeds the previous one's: sequence numbers the producer never
    /// recorded (for a ROS subscription, messages published that it never
    /// received). A `seq` below the previous one's counts as none.
    #[serde(default)]
    pub seq_gaps: u64,
    /// Published samples whose first use came before their publication (the
    /// producer recorded `produced()` after the sample was visible to the
    /// loop): left out of `wait_to_first_use`, and named in a caveat.
    #[serde(default)]
    pub used_before_published: u64,
}
