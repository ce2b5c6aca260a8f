//! A comparison whose every checked figure is derived here, not by the
//! binary: medians and p99s by hand, and the seeded bootstrap interval
//! recomputed from docs/compare.md's procedure.
//!
//! What is recomputed independently: the series (from the generator's
//! formula, not from the evidence), the nearest-rank quantiles, the seed of
//! the metric (`--seed` folded with the name's bytes), the order of draws
//! (A's resample, then B's, each round), the differences, their variance,
//! the widening around the observed difference and the rounding. What is
//! reused, as building blocks: the random generator, a rollout set's
//! resampling (the stationary block draw), its variance inflation and its
//! degrees of freedom, and the t quantile.

use std::path::Path;

use super::resample::{Rng, Rollouts};
use super::student;
use super::{compare, BootstrapConfig, MAX_BOOTSTRAP_SAMPLES};
use crate::analysis::analyze;
use crate::evidence::{load_episode, mix, LoadOptions};

/// Cycles a side.
const N: u64 = 1200;

/// adapter_decode's wall time in cycle `i`: 100 µs + 100 ns · (7919 · i mod
/// 1200). 7919 is prime and 1200 = 2⁴·3·5², so `i ↦ 7919·i mod 1200` is a
/// permutation of 0..1200: the side's values are 100,000 + 100·k for k =
/// 0..1199, each once, in a scrambled order (so blocks matter).
fn decode_ns(i: u64, extra: i64) -> i64 {
    100_000 + 100 * ((7919 * i) % N) as i64 + extra
}

/// An episode of `N` cycles whose only span is adapter_decode, from the
/// v1 serve fixture's header (which declares that stage and `running`).
fn episode(dir: &Path, extra: i64) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v1/serve-episode/control_timing.jsonl");
    let text = std::fs::read_to_string(fixture).unwrap();
    let mut lines = vec![text.lines().next().unwrap().to_string()];
    for i in 0..N {
        let start = 1_000_000_000_000 + i * 10_000_000;
        let wall = decode_ns(i, extra) as u64;
        lines.push(
            serde_json::json!({"type": "cycle", "cycle": i, "phase": "running",
                "start_ns": start, "end_ns": start + wall, "values": {},
                "spans": [{"stage": "adapter_decode", "depth": 0, "start_ns": start, "wall_ns": wall}]})
            .to_string(),
        );
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("control_timing.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// Nearest rank: the value at 1-based rank ⌈q·n⌉ of the sorted values.
fn nearest_rank(v: &[i64], q: f64) -> i64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    let r = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[r - 1]
}

/// Sample variance (n − 1).
fn var(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
}

/// The interval of the differences `d`, recomputed: the percentile interval,
/// widened around the observed difference by the inflation and t over z,
/// from each side's resampled statistics `(va, vb)` and rollouts.
fn interval(
    d: &mut [f64],
    (va, vb): (&[f64], &[f64]),
    (ra, rb): (&Rollouts, &Rollouts),
    observed: f64,
) -> [i64; 2] {
    let (a_var, b_var) = (var(va), var(vb));
    let (wa, wb) = (ra.inflation() * a_var, rb.inflation() * b_var);
    let (na, nb) = (ra.degrees_of_freedom(), rb.degrees_of_freedom());
    let (inflate, nu) = if a_var + b_var <= 0.0 {
        (1.0, na.min(nb))
    } else {
        (
            ((wa + wb) / (a_var + b_var)).sqrt(),
            (wa + wb).powi(2) / (wa * wa / na + wb * wb / nb),
        )
    };
    let w = inflate * student::quantile(0.975, nu) / 1.959_963_984_540_054;
    d.sort_by(f64::total_cmp);
    let at = |q: f64| d[((q * d.len() as f64).ceil() as usize).clamp(1, d.len()) - 1];
    let widen = |q: f64| observed + w * (q - observed);
    [
        widen(at(0.025)).round() as i64,
        widen(at(0.975)).round() as i64,
    ]
}

#[test]
fn a_comparison_recomputed_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    let (da, db) = (tmp.path().join("a"), tmp.path().join("b"));
    episode(&da, 0);
    episode(&db, 20_000);
    let load = |d: &Path| analyze(load_episode(d, LoadOptions::default()).unwrap()).unwrap();
    let (a, b) = (load(&da), load(&db));
    let cfg = BootstrapConfig::default();
    let c = compare(&[&a], &[&b], cfg);
    let m = c
        .metrics
        .iter()
        .find(|m| m.metric == "stage_wall" && m.stage.as_deref() == Some("adapter_decode"))
        .unwrap();

    // By hand: the sorted values are 100,000 + 100·k. The median is at rank
    // ⌈0.5·1200⌉ = 600, k = 599: 159,900 ns; the p99 at rank ⌈0.99·1200⌉ =
    // 1188, k = 1187: 218,700 ns. B is A plus 20,000 ns everywhere.
    assert_eq!((m.a.median_ns, m.a.p99_ns), (159_900, 218_700));
    assert_eq!((m.b.median_ns, m.b.p99_ns), (179_900, 238_700));
    assert_eq!((m.diff_median_ns, m.diff_p99_ns), (20_000, 20_000));
    assert_eq!(m.a.count, N);
    // p99.9 at rank ⌈0.999·1200⌉ = 1199, k = 1198: 219,800 ns; one value
    // (k = 1199) lies above it.
    assert_eq!(m.a.p999_ns, 219_800);
    assert_eq!(m.a.beyond_p999, 1);

    // The interval, recomputed. The seed: --seed folded with the bytes of
    // `running/stage_wall/adapter_decode`, each step mix(h, byte + 1).
    let name = "running/stage_wall/adapter_decode";
    let seed = name.bytes().fold(cfg.seed, |h, x| mix(h, x as u64 + 1));
    let mut rng = Rng::new(seed);
    let sa: Vec<i64> = (0..N).map(|i| decode_ns(i, 0)).collect();
    let sb: Vec<i64> = (0..N).map(|i| decode_ns(i, 20_000)).collect();
    let mut ra = Rollouts::new(vec![&sa[..]], MAX_BOOTSTRAP_SAMPLES);
    let mut rb = Rollouts::new(vec![&sb[..]], MAX_BOOTSTRAP_SAMPLES);
    let (mut xa, mut xb) = (Vec::new(), Vec::new());
    let (mut med, mut p99) = (Vec::new(), Vec::new());
    let (mut va, mut vb) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..cfg.resamples {
        ra.resample(&mut rng, &mut xa);
        rb.resample(&mut rng, &mut xb);
        let (ma, mb) = (nearest_rank(&xa, 0.5) as f64, nearest_rank(&xb, 0.5) as f64);
        let (pa, pb) = (
            nearest_rank(&xa, 0.99) as f64,
            nearest_rank(&xb, 0.99) as f64,
        );
        med.push(mb - ma);
        p99.push(pb - pa);
        va[0].push(ma);
        vb[0].push(mb);
        va[1].push(pa);
        vb[1].push(pb);
    }
    let sides = (&ra, &rb);
    assert_eq!(
        m.ci_median_ns,
        interval(&mut med, (&va[0], &vb[0]), sides, 20_000.0)
    );
    assert_eq!(
        m.ci_p99_ns,
        interval(&mut p99, (&va[1], &vb[1]), sides, 20_000.0)
    );
    // And the shift is inside both: B is A moved by exactly 20 µs.
    assert!(m.ci_median_ns[0] <= 20_000 && 20_000 <= m.ci_median_ns[1]);
}

#[test]
fn where_files_go_and_the_label_are_not_differences() {
    // Two manifests that differ in the output locations, the label, the
    // clock offsets looptime.ros measured and one real setting: only the
    // setting is a difference.
    let m = |label: &str, runs: &str, integrator: &str| {
        let offset = runs.len() as u64 * 1_000_003;
        serde_json::json!({"config": {
            "run": {"label": label, "runs_dir": runs, "timing_ring_dir": runs, "rtf": 1.0},
            "program": {"integrator": integrator, "ros_clock_offset_ns": offset,
                        "ros_stamp_offset_ns": offset + 7},
        }})
    };
    let (a, b) = (m("a", "runs/a", "implicitfast"), m("b", "runs/b", "rk4"));
    let d = super::manifest_differences(Some(&a), Some(&b));
    let keys: Vec<&str> = d.iter().map(|x| x.key.as_str()).collect();
    assert_eq!(keys, ["program.integrator"]);
    assert!(super::manifest_differences(Some(&a), Some(&m("b", "x", "implicitfast"))).is_empty());
}

#[test]
fn the_noise_floor_follows_the_nominal_period() {
    use super::noise_floors;
    // A 18 µs median and a 50 µs p99 (the MuJoCo arm's `step`): 5 % and
    // 25 % of them are 0.9 µs and 12.5 µs, below every period floor.
    // 100 Hz: 0.2 % and 0.5 % of 10 ms = 20 µs and 50 µs (the fixed floors
    // before the period was used, so 100 Hz verdicts are unchanged).
    assert_eq!(
        noise_floors(18_000, 50_000, Some(10_000_000)),
        (20_000.0, 50_000.0)
    );
    assert_eq!(noise_floors(18_000, 50_000, None), (20_000.0, 50_000.0));
    // 500 Hz: 0.2 % and 0.5 % of 2 ms = 4 µs and 10 µs, and the p99's
    // 25 % (12.5 µs) is above its floor.
    assert_eq!(
        noise_floors(18_000, 50_000, Some(2_000_000)),
        (4_000.0, 12_500.0)
    );
    // A large median sets its own floor: 5 % of 1 ms = 50 µs.
    assert_eq!(noise_floors(1_000_000, 0, Some(2_000_000)).0, 50_000.0);
}
