//! The ranges every config key is checked against, after parsing and
//! before anything runs: a bad value names its key, what it got and what
//! is accepted.

use super::*;

impl Config {
    /// Check every range.
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`] naming the first bad key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_run()?;
        self.validate_sections()?;
        self.validate_stages()?;
        self.validate_robot()?;
        // The manifest records the config as TOML and hashes that text: a
        // config without a TOML form is refused here, never hashed as "".
        self.to_toml().map(|_| ())
    }

    /// `[run]`, including the recorder's memory budget.
    fn validate_run(&self) -> Result<(), ConfigError> {
        let r = &self.run;
        range("run.rate_hz", r.rate_hz, 1.0, 10_000.0, "1 to 10,000 Hz")?;
        range(
            "run.duration_s",
            r.duration_s,
            0.0,
            86_400.0,
            "0 to 86,400 s",
        )?;
        range("run.warmup_s", r.warmup_s, 0.0, 3_600.0, "0 to 3,600 s")?;
        range("run.episodes", r.episodes as f64, 1.0, 1000.0, "1 to 1000")?;
        range("run.rtf", r.rtf, 0.0, 100.0, "0 (uncapped) to 100")?;
        range(
            "run.timing_max_cycles",
            r.timing_max_cycles as f64,
            1.0,
            looptime_capture::MAX_CYCLES_CEILING as f64,
            "1 to 50,000,000",
        )?;
        range(
            "run.timing_max_spans_per_cycle",
            r.timing_max_spans_per_cycle as f64,
            8.0,
            looptime_capture::MAX_SPANS_CEILING as f64,
            "8 to 1024 (the simulated runtime opens 8 spans a cycle)",
        )?;
        range(
            "run.timing_memory_budget_mb",
            r.timing_memory_budget_mb as f64,
            1.0,
            MAX_TIMING_MEMORY_BUDGET_MB as f64,
            "1 to 1048576 MB",
        )?;
        let footprint = self.recorder_footprint_bytes();
        let threads_bytes = self.thread_recorders_footprint_bytes();
        if r.control_timing && footprint + threads_bytes > r.timing_memory_budget_mb << 20 {
            return Err(ConfigError::OverBudget {
                cycles: r.timing_max_cycles,
                spans: r.timing_max_spans_per_cycle,
                footprint_bytes: footprint,
                threads_bytes,
                budget_mb: r.timing_memory_budget_mb,
            });
        }
        for (key, v) in [
            ("run.runs_dir", &r.runs_dir),
            ("run.timing_ring_dir", &r.timing_ring_dir),
        ] {
            if v.trim().is_empty() {
                return Err(ConfigError::OutOfRange {
                    key: key.into(),
                    value: "\"\"".into(),
                    expected: "a directory path".into(),
                });
            }
        }
        Ok(())
    }

    /// `[scheduler]`, `[realtime]`, `[lifecycle]` and `[stats]`.
    fn validate_sections(&self) -> Result<(), ConfigError> {
        let period_ns = self.nominal_period_ns();
        let ceiling_us = SchedulerConfig::margin_ceiling(period_ns) as f64 / 1e3;
        if let SpinMargin::Us(us) = self.scheduler.spin_margin_us {
            range(
                "scheduler.spin_margin_us",
                us,
                0.0,
                ceiling_us,
                &format!("0 to {ceiling_us} µs (half the period, at most 2000 µs), or \"auto\""),
            )?;
        }
        range(
            "scheduler.max_dt_periods",
            self.scheduler.max_dt_periods,
            1.0,
            1000.0,
            "1 to 1000",
        )?;
        range(
            "realtime.priority",
            self.realtime.priority as f64,
            1.0,
            99.0,
            "1 to 99",
        )?;
        range(
            "realtime.cpu",
            self.realtime.cpu as f64,
            -1.0,
            4095.0,
            "-1 (none) or a CPU index",
        )?;
        range(
            "lifecycle.pause_at_s",
            self.lifecycle.pause_at_s,
            0.0,
            86_400.0,
            "0 (never) or seconds",
        )?;
        range(
            "lifecycle.pause_s",
            self.lifecycle.pause_s,
            0.0,
            3_600.0,
            "0 to 3,600 s",
        )?;
        range(
            "stats.interval_s",
            self.stats.interval_s,
            0.0,
            3_600.0,
            "0 (off) to 3,600 s",
        )?;
        range(
            "stats.late_warn_us",
            self.stats.late_warn_us,
            0.0,
            1e7,
            "0 to 10,000,000 µs",
        )?;
        self.validate_budget()
    }

    /// `scheduler.compute_budget_us` and `deadline_tolerance_us`, when set.
    fn validate_budget(&self) -> Result<(), ConfigError> {
        for (key, v) in [
            (
                "scheduler.compute_budget_us",
                self.scheduler.compute_budget_us,
            ),
            (
                "scheduler.deadline_tolerance_us",
                self.scheduler.deadline_tolerance_us,
            ),
        ] {
            if let Some(v) = v {
                range(
                    key,
                    v,
                    0.0,
                    1e7,
                    "0 to 10,000,000 µs (absent: not declared)",
                )?;
            }
        }
        Ok(())
    }

    /// `[stages.*]`: every cost and the stage parameters.
    fn validate_stages(&self) -> Result<(), ConfigError> {
        let s = &self.stages;
        check_cost("stages.camera_read.cost", &s.camera_read.cost)?;
        range(
            "stages.camera_read.reader_rate_hz",
            s.camera_read.reader_rate_hz,
            1.0,
            10_000.0,
            "1 to 10,000 Hz",
        )?;
        range(
            "stages.camera_read.max_age_ms",
            s.camera_read.max_age_ms,
            0.0,
            1e6,
            "0 to 1,000,000 ms",
        )?;
        check_cost("stages.viewer_control.cost", &s.viewer_control.cost)?;
        check_cost("stages.policy.worker_cost", &s.policy.worker_cost)?;
        range(
            "stages.policy.queue_capacity",
            s.policy.queue_capacity as f64,
            1.0,
            1024.0,
            "1 to 1024",
        )?;
        check_cost("stages.adapter_decode.cost", &s.adapter_decode.cost)?;
        check_cost("stages.executor.cost", &s.executor.cost)?;
        check_cost("stages.robot_send_command.cost", &s.robot_send_command.cost)?;
        range(
            "stages.robot_send_command.acceptance_rate",
            s.robot_send_command.acceptance_rate,
            0.0,
            1.0,
            "0 to 1",
        )?;
        range(
            "stages.robot_send_command.reply_delay_us",
            s.robot_send_command.reply_delay_us,
            0.0,
            1e6,
            "0 to 1,000,000 µs",
        )?;
        range(
            "stages.robot_send_command.reply_jitter_us",
            s.robot_send_command.reply_jitter_us,
            0.0,
            s.robot_send_command.reply_delay_us,
            "0 to reply_delay_us",
        )?;
        check_cost("stages.recording.cost", &s.recording.cost)
    }

    /// `[robot]`: the peer's stall and the injected late answers; a UDP
    /// peer runs in real time, without a pause (a paused loop sends no
    /// command, and the robot would count every state missed).
    pub(super) fn validate_robot(&self) -> Result<(), ConfigError> {
        let r = &self.robot;
        range(
            "robot.stall_every_ms",
            r.stall_every_ms,
            0.0,
            3_600_000.0,
            "0 (never) to 3,600,000 ms",
        )?;
        let most = if r.stall_every_ms > 0.0 {
            r.stall_every_ms
        } else {
            0.0
        };
        range(
            "robot.stall_ms",
            r.stall_ms,
            0.0,
            most,
            "0 to robot.stall_every_ms",
        )?;
        range(
            "robot.late_answer_us",
            r.late_answer_us,
            0.0,
            1e6,
            "0 to 1,000,000 µs",
        )?;
        if r.transport != Transport::Udp {
            return Ok(());
        }
        if self.run.rtf != 1.0 {
            return Err(ConfigError::OutOfRange {
                key: "run.rtf".into(),
                value: self.run.rtf.to_string(),
                expected:
                    "1 with robot.transport = \"udp\": the robot peer sends its states in real time"
                        .into(),
            });
        }
        if self.lifecycle.pause_at_s > 0.0 {
            return Err(ConfigError::OutOfRange {
                key: "lifecycle.pause_at_s".into(),
                value: self.lifecycle.pause_at_s.to_string(),
                expected: "0 with robot.transport = \"udp\": a paused loop sends no command, and the robot would count every state missed".into(),
            });
        }
        Ok(())
    }
}

fn range(key: &str, v: f64, lo: f64, hi: f64, expected: &str) -> Result<(), ConfigError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            key: key.into(),
            value: v.to_string(),
            expected: expected.into(),
        })
    }
}

fn check_cost(key: &str, c: &Cost) -> Result<(), ConfigError> {
    range(
        &format!("{key}.mean_us"),
        c.mean_us,
        0.0,
        1e7,
        "0 to 10,000,000 µs",
    )?;
    range(
        &format!("{key}.jitter_us"),
        c.jitter_us,
        0.0,
        c.mean_us.max(0.0),
        "0 to mean_us",
    )?;
    range(
        &format!("{key}.spike_probability"),
        c.spike_probability,
        0.0,
        1.0,
        "0 to 1",
    )?;
    range(
        &format!("{key}.spike_us"),
        c.spike_us,
        0.0,
        1e7,
        "0 to 10,000,000 µs",
    )
}
