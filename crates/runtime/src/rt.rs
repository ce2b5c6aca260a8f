//! Real-time setup of the control thread and facts about the host.
//!
//! Everything here degrades: when the kernel or the permissions refuse a
//! setting, the caller gets one clear warning and a record of what was
//! obtained instead, and the run carries on.

use std::fs;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::sys;

/// What the control thread asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealtimeRequest {
    /// Ask for `SCHED_FIFO`.
    pub enabled: bool,
    /// Priority for `SCHED_FIFO` (1 to 99).
    pub priority: i32,
    /// Pin to this CPU.
    pub cpu: Option<usize>,
    /// Lock memory with `mlockall`.
    pub mlockall: bool,
}

/// What the control thread obtained.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealtimeObtained {
    /// Timer slack the kernel reports after asking for 1 ns.
    pub timer_slack_ns: Option<u64>,
    /// Scheduling policy in force (`SCHED_OTHER`, `SCHED_FIFO`, ...).
    pub sched_policy: String,
    /// Priority in force.
    pub sched_priority: i32,
    /// CPU the thread is pinned to, if pinning succeeded.
    pub cpu: Option<usize>,
    /// Whether `mlockall` succeeded.
    pub mlockall: bool,
    /// One line per refused setting.
    pub warnings: Vec<String>,
}

/// Apply timer slack (always) and the real-time request (when enabled) to
/// the calling thread. Never fails: refusals become warnings.
pub fn setup_control_thread(req: &RealtimeRequest) -> RealtimeObtained {
    let mut out = RealtimeObtained::default();
    match sys::set_timer_slack_ns(1) {
        Ok(ns) => out.timer_slack_ns = Some(ns),
        Err(e) => out.warnings.push(format!(
            "timer slack: could not set 1 ns ({e}); sleeps may wake up to 50 µs late"
        )),
    }
    if req.enabled {
        if let Err(e) = sys::set_fifo_priority(req.priority) {
            out.warnings.push(format!(
                "real-time: SCHED_FIFO priority {} refused ({e}); running with the default policy. \
                 Grant CAP_SYS_NICE or an rtprio limit (see docs/realtime.md)",
                req.priority
            ));
        }
        if let Some(cpu) = req.cpu {
            match sys::set_affinity(cpu) {
                Ok(()) => out.cpu = Some(cpu),
                Err(e) => out.warnings.push(format!(
                    "real-time: pinning to CPU {cpu} refused ({e}); not pinned"
                )),
            }
        }
        if req.mlockall {
            match sys::mlockall() {
                Ok(()) => out.mlockall = true,
                Err(e) => out.warnings.push(format!(
                    "real-time: mlockall refused ({e}); page faults may add latency"
                )),
            }
        }
    }
    let (policy, prio) = sys::current_policy();
    out.sched_policy = policy;
    out.sched_priority = prio;
    out
}

/// Release what [`setup_control_thread`] locked.
pub fn teardown_control_thread(obtained: &RealtimeObtained) {
    if obtained.mlockall {
        sys::munlockall();
    }
}

/// Holds `/dev/cpu_dma_latency` at 0 µs while alive (PM QoS: keeps the CPU
/// out of deep idle states). Needs root.
#[derive(Debug)]
pub struct DmaLatencyHold {
    _file: fs::File,
}

impl DmaLatencyHold {
    /// Open and write 0; `Err` with a message when refused.
    ///
    /// # Errors
    /// A human-readable reason when the device is missing or refused.
    pub fn acquire() -> Result<Self, String> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .map_err(|e| format!("/dev/cpu_dma_latency: {e}"))?;
        f.write_all(&0i32.to_ne_bytes())
            .map_err(|e| format!("/dev/cpu_dma_latency: {e}"))?;
        Ok(Self { _file: f })
    }
}

/// Facts about the host that can explain a timing difference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// Whether the kernel is PREEMPT_RT.
    pub preempt_rt: bool,
    /// The preemption model named by the kernel (`PREEMPT_DYNAMIC`, ...).
    pub preemption: String,
    /// CPU model from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Current clocksource.
    pub clocksource: String,
    /// cpufreq governor of CPU 0, or `unavailable` (common in VMs).
    pub governor: String,
    /// The hostname.
    pub hostname: String,
}

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Read the host facts (never fails; unknown facts read `unavailable`).
pub fn host_facts() -> HostFacts {
    let version = sys::kernel_version_string();
    let preempt_rt =
        version.contains("PREEMPT_RT") || read_trim("/sys/kernel/realtime").as_deref() == Some("1");
    let preemption = ["PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT"]
        .iter()
        .find(|p| version.contains(*p))
        .map_or("none named", |p| p)
        .to_string();
    let cpu_model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unavailable".into());
    HostFacts {
        kernel_release: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
        kernel_version: version,
        preempt_rt,
        preemption,
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        clocksource: read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_else(|| "unavailable".into()),
        governor: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .unwrap_or_else(|| "unavailable".into()),
        hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
    }
}

/// Whether this process may take `SCHED_FIFO` (tried on a short-lived
/// thread, so the caller's policy is untouched).
pub fn fifo_permitted() -> Result<(), String> {
    std::thread::Builder::new()
        .name("rt-permission-check".into())
        .spawn(|| sys::set_fifo_priority(1).map_err(|e| e.to_string()))
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "check thread panicked".to_string())?
}
