//! `[robot]`: what the loop talks to. `sim` (the default) is the simulated
//! robot inside the loop, paced by the loop's own deadlines; `udp` is a
//! robot peer over loopback UDP that paces the loop by its states
//! (`crate::robot`, docs/input-paced.md), with a stalling transmit path
//! and injected late answers to try the analyzer's figures against.

use serde::{Deserialize, Serialize};

/// What the loop talks to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// The simulated robot inside the loop (deadline-paced).
    #[default]
    Sim,
    /// A robot peer over loopback UDP (input-paced).
    Udp,
}

/// `[robot]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RobotLink {
    /// `sim` or `udp`.
    pub transport: Transport,
    /// The peer's transmit path stalls once every this many ms (0: never)…
    pub stall_every_ms: f64,
    /// …for this many ms, then sends the held states in a burst.
    pub stall_ms: f64,
    /// The loop answers every this many-th cycle late (0: never)…
    pub late_answer_every: u64,
    /// …by this many µs (a fault to find in the report).
    pub late_answer_us: f64,
}
