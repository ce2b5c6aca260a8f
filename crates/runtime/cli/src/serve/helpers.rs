//! The simulated robot's helper threads of one episode, started together
//! before the control loop and stopped together after it.

use std::io::Write;
use std::sync::Arc;

use looptime_runtime::error::ServeError;
use looptime_runtime::stats::{LiveChannel, Maintenance, MaintenanceConfig};

use crate::config::{CameraMode, Config};
use crate::control::ThreadRecorders;
use crate::sim::{self, Mailbox, ThreadRecorder};

/// The simulated robot's helper threads of one episode: the camera reader
/// (background mode), the viewer transport, the policy worker and the
/// maintenance thread that prints live statistics.
pub(super) struct Helpers {
    pub(super) camera: Arc<Mailbox>,
    pub(super) viewer: Arc<Mailbox>,
    pub(super) policy: Arc<sim::PolicyQueues>,
    camera_worker: Option<sim::Worker<Option<ThreadRecorder>>>,
    viewer_worker: sim::Worker<Option<ThreadRecorder>>,
    policy_worker: sim::Worker<Option<ThreadRecorder>>,
    maintenance: Maintenance,
}

impl Helpers {
    /// What the control loop shares with the helpers, the live channel
    /// and the stop flag.
    pub(super) fn shared(
        &self,
        live: &Arc<LiveChannel>,
        stop: &Arc<std::sync::atomic::AtomicBool>,
        state: &Arc<crate::control::LoopState>,
    ) -> crate::control::Shared {
        crate::control::Shared {
            camera: self.camera.clone(),
            viewer: self.viewer.clone(),
            policy: self.policy.clone(),
            live: live.clone(),
            stop: stop.clone(),
            state: state.clone(),
        }
    }
}

impl Helpers {
    pub(super) fn spawn(
        cfg: &Config,
        live: &Arc<LiveChannel>,
        live_out: Box<dyn Write + Send>,
        recs: ThreadRecorders,
    ) -> Result<Helpers, ServeError> {
        let camera = Arc::new(Mailbox::default());
        let viewer = Arc::new(Mailbox::default());
        let st = &cfg.stages;
        let camera_worker = match st.camera_read.mode {
            CameraMode::Background => Some(
                sim::spawn_camera_reader(
                    camera.clone(),
                    st.camera_read.cost,
                    st.camera_read.reader_rate_hz,
                    cfg.run.seed ^ 0xC0FFEE,
                    recs.camera,
                )
                .map_err(|source| ServeError::Thread {
                    thread: "camera-reader",
                    source,
                })?,
            ),
            CameraMode::Inline => None,
        };
        let viewer_worker =
            sim::spawn_viewer_transport(viewer.clone(), recs.viewer).map_err(|source| {
                ServeError::Thread {
                    thread: "viewer-transport",
                    source,
                }
            })?;
        let (policy, policy_worker) =
            sim::spawn_policy_worker(&st.policy, cfg.run.seed ^ 0xBEEF, recs.policy).map_err(
                |source| ServeError::Thread {
                    thread: "policy-worker",
                    source,
                },
            )?;
        let maintenance = Maintenance::spawn(
            live.clone(),
            MaintenanceConfig {
                interval_s: cfg.stats.interval_s,
                // A declared deadline tolerance is the live warning's
                // threshold; without one, stats.late_warn_us.
                late_warn_ns: (cfg
                    .scheduler
                    .deadline_tolerance_us
                    .unwrap_or(cfg.stats.late_warn_us)
                    * 1e3) as i64,
                period_ns: if cfg.robot.transport == crate::config::Transport::Udp {
                    0
                } else {
                    cfg.effective_period_ns()
                },
                compute_budget_ns: cfg.scheduler_config().compute_budget_ns,
                deadline_tolerance_ns: cfg.scheduler_config().deadline_tolerance_ns,
            },
            live_out,
        )
        .map_err(|source| ServeError::Thread {
            thread: "maintenance",
            source,
        })?;
        Ok(Helpers {
            camera,
            viewer,
            policy,
            camera_worker,
            viewer_worker,
            policy_worker,
            maintenance,
        })
    }

    /// Stop the robot's threads and take back their recorders; the
    /// maintenance thread goes on until the events are collected, so it is
    /// handed back too.
    pub(super) fn stop(self) -> (Maintenance, Vec<ThreadRecorder>) {
        let mut recs = Vec::new();
        if let Some(w) = self.camera_worker {
            recs.extend(w.stop().flatten());
        }
        recs.extend(self.viewer_worker.stop().flatten());
        recs.extend(self.policy_worker.stop().flatten());
        (self.maintenance, recs)
    }
}
