//! Building the simulated runtime's recorders: the control thread's names
//! and ids, one builder per background thread, and the registry that
//! allocates them together (`build_recorder`, one level up, picks the ring
//! storage and falls back to the heap).

use super::*;

/// The control thread's builder and ids.
pub(super) fn control_builder(
    cfg: &Config,
    domain: ClockDomain,
    episode: &Path,
) -> Result<(RecorderBuilder, Ids), ServeError> {
    let mut b = RecorderBuilder::new();
    b.episode_dir(episode);
    b.max_cycles(cfg.run.timing_max_cycles as usize)
        .max_spans_per_cycle(cfg.run.timing_max_spans_per_cycle as usize)
        .cpu_time_mode(cfg.run.timing_thread_cpu)
        .nominal_period_ns(cfg.nominal_period_ns())
        .target_clock(domain)
        .metadata(
            "producer",
            format!("looptime {}", env!("CARGO_PKG_VERSION")),
        )
        .metadata("rtf", cfg.run.rtf.to_string())
        .metadata("overrun_policy", cfg.scheduler.overrun_policy.as_str());
    let key = b.attr_key("mode")?;
    let inline = b.attr_value(key, "inline")?;
    let background = b.attr_value(key, "background")?;
    let ids = Ids {
        warmup: b.phase("warmup")?,
        running: b.phase("running")?,
        paused: b.phase("paused")?,
        camera: b.stage("camera_read")?,
        viewer: b.stage("viewer_control")?,
        policy: b.stage("policy")?,
        decode: b.stage("adapter_decode")?,
        executor: b.stage("executor")?,
        send: b.stage("robot_send_command")?,
        recording: b.stage("recording")?,
        mode: match cfg.stages.camera_read.mode {
            CameraMode::Inline => inline,
            CameraMode::Background => background,
        },
        robot_seq: b.value("robot_state_seq", ValueKind::Int, "count")?,
        robot_ms: b.value("robot_time_ms", ValueKind::Int, "ms")?,
        success: b.value("command_success_rate", ValueKind::Float, "ratio")?,
        dt: b.value("dt_measured_us", ValueKind::Float, "us")?,
        robot_success: (cfg.robot.transport == crate::config::Transport::Udp)
            .then(|| b.value("control_command_success_rate", ValueKind::Float, "ratio"))
            .transpose()?,
        robot_bad: (cfg.robot.transport == crate::config::Transport::Udp)
            .then(|| b.value("robot_bad_datagrams", ValueKind::Int, "count"))
            .transpose()?,
        frame: b.source(
            "camera",
            SourceSpec {
                max_age_ns: Some((cfg.stages.camera_read.max_age_ms * 1e6) as u64),
                ..SourceSpec::default()
            },
        )?,
        state: b.source("robot_state", SourceSpec::default())?,
        action: b.source("policy", SourceSpec::default())?,
    };
    // The recording says which stage sends the commands, and the budget
    // and tolerance the runtime declared (only when declared).
    b.command_stage(ids.send);
    if let Some(us) = cfg.scheduler.compute_budget_us {
        b.compute_budget_ns((us * 1e3).round() as u64);
    }
    if let Some(us) = cfg.scheduler.deadline_tolerance_us {
        b.deadline_tolerance_ns((us * 1e3).round() as u64);
    }
    debug_assert_eq!(b.footprint_bytes(), cfg.recorder_footprint_bytes());
    Ok((b, ids))
}

/// A background thread's builder: `work` (and `publish`) as stages, the
/// control thread's capacity in cycles, [`THREAD_SPANS_PER_CYCLE`] slots.
#[allow(clippy::type_complexity)]
fn thread_builder(
    cfg: &Config,
    storage: &RingStorage,
    work: &str,
    publish: Option<&str>,
    implicit: bool,
    source: Option<&str>,
) -> Result<(RecorderBuilder, StageId, Option<StageId>, Option<SourceId>), ServeError> {
    let mut b = RecorderBuilder::new();
    b.max_cycles(cfg.run.timing_max_cycles as usize)
        .max_spans_per_cycle(THREAD_SPANS_PER_CYCLE as usize)
        .cpu_time_mode(cfg.run.timing_thread_cpu)
        .measure_overhead(false)
        .ring(storage.clone())
        .implicit_cycles(implicit);
    if !implicit {
        b.phase("poll")?;
    }
    let w = b.stage(work)?;
    let p = publish.map(|name| b.stage(name)).transpose()?;
    let s = source
        .map(|name| b.source(name, SourceSpec::default()))
        .transpose()?;
    Ok((b, w, p, s))
}

pub(super) fn build_all(
    cfg: &Config,
    domain: ClockDomain,
    episode: &Path,
    storage: RingStorage,
) -> Result<Built, ServeError> {
    let (mut control, ids) = control_builder(cfg, domain, episode)?;
    control.ring(storage.clone());
    let mut reg = Registry::new(control);
    let mut plan: Vec<(&str, StageId, Option<StageId>, Option<SourceId>)> = Vec::new();
    if cfg.run.timing_threads {
        let mut threads = vec![
            (
                "viewer_transport",
                "viewer_receive",
                Some("viewer_publish"),
                false,
                None,
            ),
            ("policy_worker", "policy_infer", None, true, Some("policy")),
        ];
        if cfg.stages.camera_read.mode == CameraMode::Background {
            threads.insert(
                0,
                (
                    "camera_reader",
                    "camera_grab",
                    Some("camera_publish"),
                    false,
                    Some("camera"),
                ),
            );
        }
        if cfg.robot.transport == crate::config::Transport::Udp {
            threads.push(("robot_peer", "send_state", None, true, None));
        }
        for (name, work, publish, implicit, source) in threads {
            let (b, w, p, s) = thread_builder(cfg, &storage, work, publish, implicit, source)?;
            reg.thread(name, b)?;
            plan.push((name, w, p, s));
        }
    }
    let mut set = reg.build()?;
    let mut threads = ThreadRecorders::default();
    for ((name, work, publish, source), rec) in plan.into_iter().zip(set.threads.drain(..)) {
        let t = Some(ThreadRecorder {
            rec,
            work,
            publish,
            source,
        });
        match name {
            "camera_reader" => threads.camera = t,
            "viewer_transport" => threads.viewer = t,
            "robot_peer" => threads.robot = t,
            _ => threads.policy = t,
        }
    }
    Ok(Built {
        rec: set.control,
        ids,
        threads,
        ring_note: None,
    })
}
