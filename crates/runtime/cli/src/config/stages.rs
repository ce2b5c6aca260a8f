//! `[stages.*]`: the simulated control work, stage by stage: each stage's
//! cost (how long, how it is spent, its spikes), the camera's and the
//! policy's modes, and the robot command's.

use serde::{Deserialize, Serialize};

/// How a simulated cost is spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CostKind {
    /// Busy computation (CPU time ≈ wall time).
    #[default]
    Busy,
    /// Blocking wait (wall time without CPU time, like device I/O).
    Sleep,
}

/// A simulated cost: `mean_us ± jitter_us` (uniform), plus a spike of
/// `spike_us` with probability `spike_probability` per call.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cost {
    /// Mean cost in microseconds.
    pub mean_us: f64,
    /// Half-width of the uniform jitter in microseconds.
    pub jitter_us: f64,
    /// Probability of a spike per call.
    pub spike_probability: f64,
    /// Extra cost of a spike in microseconds.
    pub spike_us: f64,
    /// Busy or sleep.
    pub kind: CostKind,
}

impl Default for Cost {
    fn default() -> Self {
        Cost::busy(0.0, 0.0)
    }
}

impl Cost {
    /// A busy cost with no spikes.
    pub const fn busy(mean_us: f64, jitter_us: f64) -> Cost {
        Cost {
            mean_us,
            jitter_us,
            spike_probability: 0.0,
            spike_us: 0.0,
            kind: CostKind::Busy,
        }
    }
}

/// Camera reader mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CameraMode {
    /// Read the frame on the control thread.
    #[default]
    Inline,
    /// A reader thread polls at a capped rate into a snapshot mailbox.
    Background,
}

/// `[stages.camera_read]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CameraSection {
    /// `inline` or `background`.
    pub mode: CameraMode,
    /// Cost of one frame read (inline: on the control thread).
    pub cost: Cost,
    /// Background reader poll rate cap in hertz.
    pub reader_rate_hz: f64,
    /// A snapshot older than this is counted stale.
    pub max_age_ms: f64,
}

impl Default for CameraSection {
    fn default() -> Self {
        Self {
            mode: CameraMode::Inline,
            cost: Cost {
                mean_us: 1500.0,
                jitter_us: 300.0,
                spike_probability: 0.0,
                spike_us: 0.0,
                kind: CostKind::Sleep,
            },
            reader_rate_hz: 60.0,
            max_age_ms: 50.0,
        }
    }
}

/// `[stages.policy]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicySection {
    /// Cost of one inference on the worker thread.
    pub worker_cost: Cost,
    /// Observation and action queue capacity.
    pub queue_capacity: u32,
}

impl Default for PolicySection {
    fn default() -> Self {
        Self {
            worker_cost: Cost::busy(3000.0, 500.0),
            queue_capacity: 4,
        }
    }
}

/// `[stages.robot_send_command]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RobotSection {
    /// Cost of one command send.
    pub cost: Cost,
    /// Probability the robot accepts a command.
    pub acceptance_rate: f64,
    /// Mean delay between the control loop's request of the robot's state
    /// and the reply (µs): a cycle uses the newest state whose reply has
    /// arrived, stamped at its request (data age).
    pub reply_delay_us: f64,
    /// Uniform jitter of that delay, ± µs.
    pub reply_jitter_us: f64,
}

impl Default for RobotSection {
    fn default() -> Self {
        Self {
            cost: Cost::busy(150.0, 30.0),
            acceptance_rate: 0.999,
            reply_delay_us: 800.0,
            reply_jitter_us: 400.0,
        }
    }
}

/// A stage whose only setting is its cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct CostOnly {
    /// Cost per cycle.
    pub cost: Cost,
}

impl CostOnly {
    fn busy(mean_us: f64, jitter_us: f64) -> Self {
        Self {
            cost: Cost::busy(mean_us, jitter_us),
        }
    }
}

/// `[stages]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StagesSection {
    /// Camera read.
    pub camera_read: CameraSection,
    /// Viewer control mailbox read.
    pub viewer_control: CostOnly,
    /// Policy worker queue.
    pub policy: PolicySection,
    /// Adapter decode.
    pub adapter_decode: CostOnly,
    /// Timeline / executor.
    pub executor: CostOnly,
    /// Robot command send.
    pub robot_send_command: RobotSection,
    /// Episode recording.
    pub recording: CostOnly,
}

impl Default for StagesSection {
    fn default() -> Self {
        Self {
            camera_read: CameraSection::default(),
            viewer_control: CostOnly::busy(20.0, 5.0),
            policy: PolicySection::default(),
            adapter_decode: CostOnly::busy(300.0, 60.0),
            executor: CostOnly::busy(200.0, 40.0),
            robot_send_command: RobotSection::default(),
            recording: CostOnly::busy(250.0, 50.0),
        }
    }
}
