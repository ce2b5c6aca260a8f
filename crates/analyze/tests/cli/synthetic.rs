//! Synthetic serve-like episodes with known answers, for tests that judge
//! figures (comparisons, rates) without recording in real time: their
//! verdicts depend on seeds, never on how loaded the machine is.
//!
//! An episode is the v1 serve fixture's header and manifest with `cycles`
//! running cycles at 100 Hz (or `period_ns`) on the host clock. Cycle `i`
//! is released at `T0 + i·P`, wakes 100 ns after it and starts 200 ns + `u(0..50 µs)`
//! after it (the jitter and late starts are settable), then runs its spans
//! back to back: camera_read (with its
//! `mode`), adapter_decode, executor with robot_send_command nested in it,
//! and recording. Each span's wall time is its mean plus a uniform
//! jitter of ± its jitter, from a seeded splitmix64 stream, so two
//! episodes of the same seed differ only where their settings say.

use super::*;
use serde_json::json;

const P: u64 = 10_000_000;
const T0: u64 = 1_000_000_000_000;

/// What one synthetic episode is made of.
#[derive(Clone, Debug)]
pub struct Synth {
    /// The stream's seed (not written into the manifest: episodes of two
    /// seeds are repeats of one configuration).
    pub seed: u64,
    /// Running cycles.
    pub cycles: u64,
    /// `stages.camera_read.mode`: `inline` (1.5 ms ± 300 µs) or
    /// `background` (20 µs ± 5 µs).
    pub camera_mode: &'static str,
    /// Added to every adapter_decode span (300 µs ± 60 µs), ns; also added
    /// to the manifest's `stages.adapter_decode.cost.mean_us`.
    pub decode_extra_ns: u64,
    /// `scheduler.spin_margin_us`.
    pub spin_margin_us: f64,
    /// A cycle starts 200 ns + u(0 .. 2·this) after its release point.
    pub start_jitter_ns: u64,
    /// Every this-many cycles (from cycle 1; 0 = never) starts 2 ms after
    /// its release point: a late start (above 10 % of the period), not
    /// overdue.
    pub late_every: u64,
    /// Every this-many cycles (from cycle 1; 0 = never), adapter_decode
    /// takes `decode_tail_ns` more: a tail that moves its p99, not its
    /// median.
    pub decode_tail_every: u64,
    /// See `decode_tail_every`.
    pub decode_tail_ns: u64,
    /// Added to every adapter_decode span and left out of the manifest:
    /// a host's run-to-run offset, ns.
    pub host_offset_ns: u64,
    /// The manifest's `source_hash`, when set.
    pub source_hash: Option<&'static str>,
    /// The manifest's `host.hostname`, when set.
    pub hostname: Option<&'static str>,
    /// The release period, ns (10 ms: 100 Hz).
    pub period_ns: u64,
    /// Whether a period other than 10 ms is declared (the header's
    /// nominal period and the manifest's `run.rate_hz` follow it), or left
    /// undeclared (the nominal period stays 10 ms and the manifest's
    /// `run.rtf` is 10 ms / period, as `looptime serve --rtf` runs it).
    pub declare_period: bool,
    /// Record CPU time per cycle (`thread_cpu_mode` `cycle`, schema 2, as
    /// `serve` records by default): each cycle's `cpu_ns` is its work's
    /// wall time less 10 µs, spans are wall-only. Otherwise the v1
    /// header's `spans` mode, each span's CPU time its wall time.
    pub cycle_cpu: bool,
}

impl Default for Synth {
    fn default() -> Self {
        Synth {
            seed: 1,
            cycles: 400,
            camera_mode: "inline",
            decode_extra_ns: 0,
            spin_margin_us: 200.0,
            start_jitter_ns: 25_000,
            late_every: 0,
            decode_tail_every: 0,
            decode_tail_ns: 0,
            host_offset_ns: 0,
            source_hash: None,
            hostname: None,
            period_ns: P,
            declare_period: true,
            cycle_cpu: false,
        }
    }
}

/// splitmix64: the `k`-th number of stream `seed`.
fn mix(seed: u64, k: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(k.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `mean ± jitter` (ns), uniform, from draw `k` of stream `seed`.
fn around(seed: u64, k: u64, mean: u64, jitter: u64) -> u64 {
    mean - jitter + mix(seed, k) % (2 * jitter + 1)
}

/// Write the episode into `dir` (created) and return `dir`.
pub fn write(dir: &Path, s: &Synth) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let fixture_text =
        std::fs::read_to_string(fixture("v1/serve-episode/control_timing.jsonl")).unwrap();
    let mut header = fixture_text.lines().next().unwrap().to_string();
    if s.declare_period {
        header = header.replace(
            &format!("\"nominal_period_ns\":{P}"),
            &format!("\"nominal_period_ns\":{}", s.period_ns),
        );
    }
    if s.cycle_cpu {
        let mut h: Value = serde_json::from_str(&header).unwrap();
        h["schema_version"] = json!(2);
        h["thread_cpu_mode"] = json!("cycle");
        for st in h["stages"].as_array_mut().unwrap() {
            st["cpu_time"] = json!(false);
        }
        header = h.to_string();
    }
    let mut lines = vec![header];
    let mut prev_end = T0 - s.period_ns;
    for i in 0..s.cycles {
        let target = T0 + i * s.period_ns;
        let every = |k: u64| k > 0 && i % k == 1 % k;
        let start = if every(s.late_every) {
            target + 2_000_000
        } else {
            target + 200 + around(s.seed, 6 * i, s.start_jitter_ns, s.start_jitter_ns)
        };
        let camera = if s.camera_mode == "inline" {
            around(s.seed, 6 * i + 1, 1_500_000, 300_000)
        } else {
            around(s.seed, 6 * i + 1, 20_000, 5_000)
        };
        let tail = if every(s.decode_tail_every) {
            s.decode_tail_ns
        } else {
            0
        };
        let decode = around(s.seed, 6 * i + 2, 300_000, 60_000)
            + s.decode_extra_ns
            + s.host_offset_ns
            + tail;
        let send = around(s.seed, 6 * i + 3, 150_000, 30_000);
        let executor = around(s.seed, 6 * i + 4, 200_000, 40_000) + send;
        let recording = around(s.seed, 6 * i + 5, 250_000, 50_000);
        let mut t = start;
        let span = |stage: &str, wall: u64, parent: Option<u64>, depth: u64, at: u64| {
            let attrs = if stage == "camera_read" {
                json!({"mode": s.camera_mode})
            } else {
                json!({})
            };
            let cpu = if s.cycle_cpu {
                Value::Null
            } else {
                json!(wall)
            };
            json!({"stage": stage, "parent": parent, "depth": depth, "start_ns": at,
                   "wall_ns": wall, "cpu_ns": cpu, "closed_by_cycle_end": false, "attrs": attrs})
        };
        let mut spans = vec![span("camera_read", camera, None, 0, t)];
        t += camera;
        spans.push(span("adapter_decode", decode, None, 0, t));
        t += decode;
        spans.push(span("executor", executor, None, 0, t));
        spans.push(span(
            "robot_send_command",
            send,
            Some(2),
            1,
            t + executor - send,
        ));
        t += executor;
        spans.push(span("recording", recording, None, 0, t));
        t += recording;
        let mut c = json!({"type": "cycle", "cycle": i, "phase": "running", "start_ns": start,
            "end_ns": t, "target_ns": target, "sleep_start_ns": prev_end, "wake_ns": target + 100,
            "overdue": false, "skipped": 0, "spans_dropped": 0, "values": {}, "spans": spans});
        if s.cycle_cpu {
            c["cpu_ns"] = json!(t - start - 10_000);
        }
        lines.push(c.to_string());
        prev_end = t;
    }
    std::fs::write(dir.join("control_timing.jsonl"), lines.join("\n") + "\n").unwrap();
    let mut m: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("v1/serve-episode/manifest.json")).unwrap(),
    )
    .unwrap();
    m["config"]["stages"]["camera_read"]["mode"] = json!(s.camera_mode);
    m["config"]["scheduler"]["spin_margin_us"] = json!(s.spin_margin_us);
    let mean = m["config"]["stages"]["adapter_decode"]["cost"]["mean_us"]
        .as_f64()
        .unwrap();
    m["config"]["stages"]["adapter_decode"]["cost"]["mean_us"] =
        json!(mean + s.decode_extra_ns as f64 / 1e3);
    if s.period_ns != P && s.declare_period {
        m["config"]["run"]["rate_hz"] = json!(1e9 / s.period_ns as f64);
    } else if s.period_ns != P {
        m["config"]["run"]["rtf"] = json!(P as f64 / s.period_ns as f64);
    }
    if let Some(h) = s.source_hash {
        m["source_hash"] = json!(h);
    }
    if let Some(h) = s.hostname {
        m["host"]["hostname"] = json!(h);
    }
    std::fs::write(dir.join("manifest.json"), m.to_string()).unwrap();
    dir.to_path_buf()
}
