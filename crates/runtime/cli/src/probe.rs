//! `looptime probe`: check the host, then measure what an empty loop on the
//! scheduler achieves here. The first thing to run on a new machine.

use serde::Serialize;

use looptime_runtime::clock::{LoopClock, MonotonicClock};
use looptime_runtime::rt::{self, HostFacts, RealtimeObtained, RealtimeRequest};
use looptime_runtime::scheduler::{Scheduler, SchedulerConfig, SchedulerError};

/// Probe settings.
#[derive(Clone, Copy, Debug)]
pub struct ProbeOptions {
    /// Loop rate.
    pub rate_hz: f64,
    /// Seconds to run.
    pub duration_s: f64,
    /// Spin margin (None = the default, clamped to its ceiling); with
    /// `auto_margin`, the first wait's.
    pub spin_margin_ns: Option<u64>,
    /// Adapt the margin (`--spin-margin-us auto`).
    pub auto_margin: bool,
    /// Try SCHED_FIFO for the probe loop.
    pub realtime: bool,
    /// Hold /dev/cpu_dma_latency at 0 during the loop.
    pub dma_latency: bool,
}

/// Percentiles of a latency sample, in nanoseconds (nearest rank).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Percentiles {
    /// Values.
    pub count: u64,
    /// Median.
    pub p50_ns: i64,
    /// 99th percentile.
    pub p99_ns: i64,
    /// 99.9th percentile.
    pub p999_ns: i64,
    /// Maximum.
    pub max_ns: i64,
    /// Mean.
    pub mean_ns: f64,
}

/// Nearest-rank percentiles of `v` (sorted in place).
pub fn percentiles(v: &mut [i64]) -> Percentiles {
    if v.is_empty() {
        return Percentiles::default();
    }
    v.sort_unstable();
    let n = v.len();
    let rank = |q: f64| v[looptime_capture::quantile::nearest_rank_index(n, q)];
    Percentiles {
        count: n as u64,
        p50_ns: rank(0.5),
        p99_ns: rank(0.99),
        p999_ns: rank(0.999),
        max_ns: v[n - 1],
        mean_ns: v.iter().map(|&x| x as f64).sum::<f64>() / n as f64,
    }
}

/// What the probe found.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeReport {
    /// Host facts.
    pub host: HostFacts,
    /// Whether SCHED_FIFO is permitted (the error when not); in JSON
    /// `{"permitted": true}` or `{"permitted": false, "why": "..."}`.
    #[serde(serialize_with = "permission")]
    pub sched_fifo: Result<(), String>,
    /// What the probe loop obtained.
    pub realtime: RealtimeObtained,
    /// Whether the PM QoS hold was obtained.
    pub dma_latency_held: bool,
    /// Loop rate.
    pub rate_hz: f64,
    /// Period in ns.
    pub period_ns: u64,
    /// Spin margin in ns: the fixed one, or where the adaptive margin
    /// settled (the margin of the last wait).
    pub spin_margin_ns: u64,
    /// Whether the margin adapted (`auto`).
    pub spin_margin_auto: bool,
    /// The lowest and highest margin the waits used, ns.
    pub spin_margin_range_ns: (u64, u64),
    /// With `auto`, the floor and the ceiling the adaptive margin stays
    /// within, ns (docs/realtime.md); absent for a fixed margin.
    pub spin_margin_bounds_ns: Option<(u64, u64)>,
    /// Cycles measured.
    pub cycles: u64,
    /// Wake latency: cycle start (after sleep and spin) minus release point.
    pub wake_latency: Percentiles,
    /// OS sleep latency: when `clock_nanosleep` returned minus when it was
    /// asked to (what cyclictest measures).
    pub os_sleep_latency: Percentiles,
    /// Share of cycles whose wake latency is at most 1 µs.
    pub within_1us: f64,
    /// Overruns (release point already passed).
    pub overruns: u64,
    /// Time spent spinning, as a share of one core.
    pub spin_cpu_share: f64,
    /// Thread CPU time of the whole loop (sleep syscalls and spin), as a
    /// share of one core.
    pub loop_cpu_share: f64,
    /// The answer to "is this host fit for a loop at this rate?", with
    /// the figures behind it ([`verdict`]).
    pub verdict: Verdict,
}

/// The probe's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// `fit`, `fit_with_adaptive_margin` or `not_fit`.
    pub fit: &'static str,
    /// Why, in figures.
    pub reason: String,
    /// When the adaptive margin sat at its ceiling: what that costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_note: Option<String>,
}

/// Whether the host held the rate (docs/runtime.md, probe):
/// * **not fit** at this rate: an overrun, or a wake latency p99 above a
///   tenth of the period (what the analyzer calls a late start);
/// * **fit with the adaptive margin**: on time, but with a fixed margin
///   below the OS sleep latency p99, so starts drift late under load;
///   `--spin-margin-us auto` follows the latency;
/// * **fit**: otherwise.
///
/// With `auto`, a margin that settled at its ceiling is noted with the
/// share of a core the spin cost.
pub fn verdict(r: &ProbeReport) -> Verdict {
    let us = |ns: i64| format!("{:.1} µs", ns as f64 / 1e3);
    let late = r.period_ns as i64 / 10;
    let wake = r.wake_latency.p99_ns;
    let share = |ns: i64| ns as f64 / r.period_ns.max(1) as f64 * 100.0;
    let (fit, reason) = if r.overruns > 0 || wake > late {
        (
            "not_fit",
            format!(
                "not fit at {} Hz: {} overrun(s), and the wake latency p99 is {} ({:.1} % of the {} period; a start later than 10 % is late)",
                r.rate_hz,
                r.overruns,
                us(wake),
                share(wake),
                us(r.period_ns as i64)
            ),
        )
    } else if !r.spin_margin_auto && r.os_sleep_latency.p99_ns > r.spin_margin_ns as i64 {
        (
            "fit_with_adaptive_margin",
            format!(
                "fit at {} Hz with the adaptive margin: the OS sleep latency p99 ({}) exceeds the fixed {} margin, so starts come late by up to {} (p99); --spin-margin-us auto (scheduler.spin_margin_us = \"auto\") follows the latency",
                r.rate_hz,
                us(r.os_sleep_latency.p99_ns),
                us(r.spin_margin_ns as i64),
                us(wake)
            ),
        )
    } else {
        (
            "fit",
            format!(
                "fit at {} Hz: wake latency p99 {} ({:.2} % of the period), {:.1} % of starts within 1 µs, no overrun, spinning {:.2} % of a core",
                r.rate_hz,
                us(wake),
                share(wake),
                r.within_1us * 100.0,
                r.spin_cpu_share * 100.0
            ),
        )
    };
    let ceiling_note = r
        .spin_margin_bounds_ns
        .filter(|&(_, ceiling)| r.spin_margin_auto && r.spin_margin_ns >= ceiling)
        .map(|(_, ceiling)| {
            format!(
                "the adaptive margin sits at its ceiling ({}): the OS sleep latency reached it, and spinning that long costs {:.1} % of a core; a quieter host (isolated CPUs, PREEMPT_RT) or a lower rate would lower it",
                us(ceiling as i64),
                r.spin_cpu_share * 100.0
            )
        });
    Verdict {
        fit,
        reason,
        ceiling_note,
    }
}

/// Why the probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The rate or margin is out of range.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// `--rate` or `--duration` is not a positive, finite number in range.
    #[error("{0}")]
    Options(String),
    /// The probe thread could not start or died.
    #[error("probe loop thread: {0}")]
    Thread(String),
}

/// `--rate` and `--duration` in range.
fn check_options(opts: &ProbeOptions) -> Result<(), ProbeError> {
    if !(opts.rate_hz.is_finite() && opts.rate_hz > 0.0 && opts.rate_hz <= 100_000.0) {
        return Err(ProbeError::Options(format!(
            "--rate {} Hz is out of range: give a rate above 0 and at most 100000 Hz",
            opts.rate_hz
        )));
    }
    if !(opts.duration_s.is_finite() && opts.duration_s > 0.0 && opts.duration_s <= 86_400.0) {
        return Err(ProbeError::Options(format!(
            "--duration {} s is out of range: give more than 0 and at most 86400 s",
            opts.duration_s
        )));
    }
    Ok(())
}

/// What the probe's loop measured: the real-time setup it obtained, each
/// wake's latency after its target, each sleep's return after it was asked
/// for (only waits that slept), overruns, spin and wall and CPU time, and
/// the spin margin (last, and its range).
struct LoopRun {
    obtained: RealtimeObtained,
    wake: Vec<i64>,
    os: Vec<i64>,
    overruns: u64,
    spin: u64,
    wall: u64,
    cpu: u64,
    margin: u64,
    range: (u64, u64),
}

/// The probe's loop, on its own thread: `duration × rate` waits of the
/// scheduler and nothing else.
fn probe_loop(opts: ProbeOptions, cfg: SchedulerConfig) -> Result<LoopRun, SchedulerError> {
    let obtained = rt::setup_control_thread(&RealtimeRequest {
        enabled: opts.realtime,
        priority: 80,
        cpu: None,
        mlockall: opts.realtime,
    });
    let mut sched = Scheduler::new(MonotonicClock, cfg)?;
    let n = (opts.duration_s * opts.rate_hz).round().max(1.0) as usize;
    let mut wake = Vec::with_capacity(n);
    let mut os = Vec::with_capacity(n);
    let mut last_margin = cfg.spin_margin_ns;
    sched.start();
    let cpu0 = looptime_runtime::sys::thread_cpu_ns();
    let t0 = sched.clock().now_ns();
    for _ in 0..n {
        let t = sched.wait();
        wake.push(t.wake_ns as i64 - t.target_ns as i64);
        last_margin = t.spin_margin_ns;
        if !t.overdue && t.sleep_return_ns > t.wait_start_ns {
            // The margin this wait used (it moves with `auto`).
            let asked = t.target_ns - t.spin_margin_ns;
            // Only when the scheduler slept (remaining > margin).
            if t.target_ns - t.wait_start_ns > t.spin_margin_ns {
                os.push(t.sleep_return_ns as i64 - asked as i64);
            }
        }
    }
    let wall = sched.clock().now_ns() - t0;
    let cpu = looptime_runtime::sys::thread_cpu_ns() - cpu0;
    rt::teardown_control_thread(&obtained);
    Ok(LoopRun {
        obtained,
        wake,
        os,
        overruns: sched.overruns(),
        spin: sched.spin_total_ns(),
        wall,
        cpu,
        margin: last_margin,
        range: sched.spin_margin_range_ns(),
    })
}

/// Run the probe.
///
/// # Errors
/// [`ProbeError`] for an invalid rate or margin, or when the loop thread
/// cannot run.
pub fn probe(opts: ProbeOptions) -> Result<ProbeReport, ProbeError> {
    check_options(&opts)?;
    let host = rt::host_facts();
    let sched_fifo = rt::fifo_permitted();
    let period_ns = (1e9 / opts.rate_hz).round() as u64;
    let mut cfg = SchedulerConfig::new(period_ns);
    if let Some(m) = opts.spin_margin_ns {
        cfg.spin_margin_ns = m;
    }
    cfg.auto_margin = opts.auto_margin;
    let dma = if opts.dma_latency {
        rt::DmaLatencyHold::acquire().ok()
    } else {
        None
    };
    let handle = std::thread::Builder::new()
        .name("probe-loop".into())
        .spawn(move || probe_loop(opts, cfg))
        .map_err(|e| ProbeError::Thread(e.to_string()))?;
    let LoopRun {
        obtained,
        mut wake,
        mut os,
        overruns,
        spin,
        wall,
        cpu,
        margin,
        range,
    } = handle
        .join()
        .map_err(|_| ProbeError::Thread("the probe loop panicked".into()))??;
    let within = wake.iter().filter(|&&w| w <= 1_000).count() as f64 / wake.len().max(1) as f64;
    let mut report = ProbeReport {
        host,
        sched_fifo,
        realtime: obtained,
        dma_latency_held: dma.is_some(),
        rate_hz: opts.rate_hz,
        period_ns,
        spin_margin_ns: margin,
        spin_margin_auto: cfg.auto_margin,
        spin_margin_range_ns: range,
        spin_margin_bounds_ns: cfg.auto_margin.then(|| {
            let ceiling = SchedulerConfig::margin_ceiling(period_ns);
            let m = looptime_runtime::margin::AutoMargin::new(ceiling);
            (m.floor_ns(), m.ceiling_ns())
        }),
        cycles: wake.len() as u64,
        wake_latency: percentiles(&mut wake),
        os_sleep_latency: percentiles(&mut os),
        within_1us: within,
        overruns,
        spin_cpu_share: spin as f64 / wall.max(1) as f64,
        loop_cpu_share: cpu as f64 / wall.max(1) as f64,
        verdict: Verdict {
            fit: "fit",
            reason: String::new(),
            ceiling_note: None,
        },
    };
    report.verdict = verdict(&report);
    Ok(report)
}

fn us(ns: i64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

/// A permission as JSON: `{"permitted": true}`, or `false` with why.
fn permission<S: serde::Serializer>(r: &Result<(), String>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(None)?;
    m.serialize_entry("permitted", &r.is_ok())?;
    if let Err(why) = r {
        m.serialize_entry("why", why)?;
    }
    m.end()
}

/// The host part of the human-readable report.
fn host_section(r: &ProbeReport) -> String {
    let h = &r.host;
    let mut s = String::new();
    let yes = |b: bool| if b { "yes" } else { "no" };
    s += "looptime probe\n\nhost\n";
    s += &format!(
        "  kernel          {} ({})\n",
        h.kernel_release, h.preemption
    );
    s += &format!("  PREEMPT_RT      {}\n", yes(h.preempt_rt));
    s += &format!("  cpu             {} × {}\n", h.cpus, h.cpu_model);
    s += &format!(
        "  clocksource     {}{}\n",
        h.clocksource,
        if h.clocksource == "tsc" {
            ""
        } else {
            "  (not tsc: clock reads are slower)"
        }
    );
    s += &format!("  governor        {}\n", h.governor);
    s += &format!(
        "  timer slack     {}\n",
        r.realtime
            .timer_slack_ns
            .map_or("could not be set".to_string(), |n| format!(
                "{n} ns obtained (asked 1 ns)"
            ))
    );
    s += &format!(
        "  SCHED_FIFO      {}\n",
        match &r.sched_fifo {
            Ok(()) => "permitted".to_string(),
            Err(e) => format!("not permitted ({e})"),
        }
    );
    s += &format!(
        "  policy in loop  {} {}\n",
        r.realtime.sched_policy, r.realtime.sched_priority
    );
    s += &format!(
        "  dma latency     {}\n",
        if r.dma_latency_held {
            "held at 0 µs"
        } else {
            "not held"
        }
    );
    s
}

/// The human-readable report.
pub fn render(r: &ProbeReport) -> String {
    let mut s = host_section(r);
    let margin = if r.spin_margin_auto {
        let (floor, ceiling) = r.spin_margin_bounds_ns.unwrap_or_default();
        format!(
            "auto, settled at {} (range {} to {}; floor {}, ceiling {})",
            us(r.spin_margin_ns as i64),
            us(r.spin_margin_range_ns.0 as i64),
            us(r.spin_margin_range_ns.1 as i64),
            us(floor as i64),
            us(ceiling as i64)
        )
    } else {
        us(r.spin_margin_ns as i64)
    };
    s += &format!(
        "\nempty loop: {} cycles at {} Hz, spin margin {margin}\n",
        r.cycles, r.rate_hz,
    );
    s += "                         p50        p99      p99.9        max\n";
    for (name, p) in [
        ("wake latency", &r.wake_latency),
        ("OS sleep latency", &r.os_sleep_latency),
    ] {
        s += &format!(
            "  {:<18} {:>10} {:>10} {:>10} {:>10}\n",
            name,
            us(p.p50_ns),
            us(p.p99_ns),
            us(p.p999_ns),
            us(p.max_ns)
        );
    }
    s += &format!(
        "  within 1 µs of the deadline: {:.2} %\n",
        r.within_1us * 100.0
    );
    s += &format!("  overruns: {}\n", r.overruns);
    s += &format!(
        "  spin cost: {:.2} % of one core (whole loop {:.2} %)\n",
        r.spin_cpu_share * 100.0,
        r.loop_cpu_share * 100.0
    );
    for w in &r.realtime.warnings {
        s += &format!("[warn] {w}\n");
    }
    s += &format!("\nverdict: {}\n", r.verdict.reason);
    if let Some(n) = &r.verdict.ceiling_note {
        s += &format!("note: {n}\n");
    }
    if !r.spin_margin_auto && r.os_sleep_latency.p99_ns > r.spin_margin_ns as i64 {
        s += &format!(
            "hint: OS sleep latency p99 ({}) exceeds the spin margin; set scheduler.spin_margin_us = \"auto\" (looptime probe --spin-margin-us auto) to follow it, or raise the margin by hand, for on-time starts\n",
            us(r.os_sleep_latency.p99_ns)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of an empty loop at 100 Hz (period 10 ms) with the given
    /// wake and OS sleep p99s, overruns, margin and bounds.
    fn report(wake_p99: i64, os_p99: i64, overruns: u64, auto: bool, margin: u64) -> ProbeReport {
        let p = |p99| Percentiles {
            count: 100,
            p50_ns: 0,
            p99_ns: p99,
            p999_ns: p99,
            max_ns: p99,
            mean_ns: 0.0,
        };
        ProbeReport {
            host: rt::host_facts(),
            sched_fifo: Ok(()),
            realtime: RealtimeObtained::default(),
            dma_latency_held: false,
            rate_hz: 100.0,
            period_ns: 10_000_000,
            spin_margin_ns: margin,
            spin_margin_auto: auto,
            spin_margin_range_ns: (margin, margin),
            spin_margin_bounds_ns: auto.then_some((50_000, 2_000_000)),
            cycles: 100,
            wake_latency: p(wake_p99),
            os_sleep_latency: p(os_p99),
            within_1us: 0.99,
            overruns,
            spin_cpu_share: 0.02,
            loop_cpu_share: 0.03,
            verdict: Verdict {
                fit: "",
                reason: String::new(),
                ceiling_note: None,
            },
        }
    }

    #[test]
    fn the_verdict_follows_its_documented_rules() {
        // On time, the OS latency inside the 200 µs margin: fit.
        let v = verdict(&report(800, 150_000, 0, false, 200_000));
        assert_eq!(v.fit, "fit");
        assert!(
            v.reason
                .starts_with("fit at 100 Hz: wake latency p99 0.8 µs"),
            "{}",
            v.reason
        );
        // The OS latency beyond a fixed margin: fit with the adaptive one.
        let v = verdict(&report(300_000, 500_000, 0, false, 200_000));
        assert_eq!(v.fit, "fit_with_adaptive_margin");
        assert!(
            v.reason.contains("exceeds the fixed 200.0 µs margin"),
            "{}",
            v.reason
        );
        // A wake p99 above a tenth of the period (1 ms), or an overrun:
        // not fit.
        assert_eq!(
            verdict(&report(1_200_000, 1_200_000, 0, false, 200_000)).fit,
            "not_fit"
        );
        let v = verdict(&report(800, 150_000, 2, false, 200_000));
        assert_eq!(v.fit, "not_fit");
        assert!(v.reason.contains("2 overrun(s)"), "{}", v.reason);
        // The adaptive margin at its 2 ms ceiling: noted with its cost.
        let v = verdict(&report(800, 150_000, 0, true, 2_000_000));
        assert!(v
            .ceiling_note
            .unwrap()
            .contains("sits at its ceiling (2000.0 µs)"));
        assert!(verdict(&report(800, 150_000, 0, true, 90_000))
            .ceiling_note
            .is_none());
    }
}
