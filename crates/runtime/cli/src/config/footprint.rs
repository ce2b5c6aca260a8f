//! What the simulated runtime's recorders preallocate with a config: the
//! control thread's and the background threads', checked against
//! `run.timing_memory_budget_mb` (docs/durability.md has the formula).

use super::*;

impl Config {
    /// Bytes the simulated runtime's recorder preallocates with these
    /// settings (capture's `footprint_bytes`; checked against
    /// `run.timing_memory_budget_mb` only when `run.control_timing` is on).
    pub fn recorder_footprint_bytes(&self) -> u64 {
        looptime_capture::footprint_bytes(
            self.run.timing_max_cycles,
            self.run.timing_max_spans_per_cycle as u64,
            looptime_capture::DEFAULT_MAX_SAMPLES_PER_CYCLE as u64,
            SIM_VALUE_COUNT + 2 * (self.robot.transport == Transport::Udp) as u64,
        )
    }

    /// Bytes the background threads' recorders preallocate (0 without
    /// `run.timing_threads`): the viewer transport, the policy worker and,
    /// in background camera mode, the camera reader, each with
    /// `run.timing_max_cycles` cycles of 4 span slots; the policy worker
    /// and the camera reader publish a data-age source, so they also take
    /// the default 8 sample slots a cycle; with `[robot] transport = "udp"`
    /// also the robot peer, without samples.
    pub fn thread_recorders_footprint_bytes(&self) -> u64 {
        if !self.run.timing_threads {
            return 0;
        }
        let with = |samples: usize| {
            looptime_capture::footprint_bytes(
                self.run.timing_max_cycles,
                THREAD_SPANS_PER_CYCLE,
                samples as u64,
                0,
            )
        };
        let publishers = if self.stages.camera_read.mode == CameraMode::Background {
            2
        } else {
            1
        };
        // The robot peer's send times (`[robot] transport = "udp"`).
        let peer = (self.robot.transport == Transport::Udp) as u64 * with(0);
        with(0) + publishers * with(looptime_capture::DEFAULT_MAX_SAMPLES_PER_CYCLE) + peer
    }
}
