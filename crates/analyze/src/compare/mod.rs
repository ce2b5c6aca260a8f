//! Paired A/B comparison of two sides, each one episode or several
//! rollouts: what differs between their manifests, which metrics moved,
//! and whether each move is larger than noise (a seeded two-level block
//! bootstrap of the difference of medians and of p99, over rollouts and
//! then blocks of cycles). Definitions and thresholds are in
//! `docs/compare.md`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::analysis::Analysis;
use crate::evidence::Evidence;

#[cfg(test)]
mod hand_test;
pub(crate) mod resample;
mod run_level;
pub(crate) mod student;

use resample::{bootstrap_diffs, rank, Estimate, Rng, Rollouts};

/// One side of a comparison: its episodes (the rollouts of a session, or
/// episode directories given one by one), each analysed.
pub type SideInput<'a> = [&'a Analysis];

mod differences;
mod hz;
mod judge;
mod notes;
pub use differences::manifest_differences;
pub use hz::HzComparison;
mod samples;
mod test_types;
mod types;
use judge::judge;
#[cfg(test)]
use judge::noise_floors;
pub(crate) use judge::{detectable, holm_levels, judge_shift, verdict_of};
use notes::pair_notes;
pub(crate) use resample::holm;
pub use test_types::*;
pub use types::*;

use samples::{rate_samples, samples};

/// The seed of one metric's bootstrap: `--seed` folded with the bytes of
/// the metric's name `phase/metric/stage`, each step the SplitMix64
/// finaliser of `h ^ (byte + 1) · 0x9E3779B97F4A7C15`.
fn name_seed(seed: u64, name: &str) -> u64 {
    name.bytes()
        .fold(seed, |h, b| crate::evidence::mix(h, b as u64 + 1))
}

fn side(v: &[i64]) -> Side {
    let mut s = v.to_vec();
    let mean = if v.is_empty() {
        0.0
    } else {
        v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64
    };
    let n = v.len() as u64;
    Side {
        count: n,
        median_ns: rank(&mut s, 0.5),
        p99_ns: rank(&mut s, 0.99),
        p999_ns: rank(&mut s, 0.999),
        beyond_p999: looptime_capture::quantile::beyond_nearest_rank(v.len(), 0.999) as u64,
        mean_ns: (mean * 10.0).round() / 10.0,
    }
}

/// What one metric's test gives: the 95 % intervals, p-values, standard
/// errors and degrees of freedom of (median B − median A) and
/// (p99 B − p99 A), how they were made, and each side's (weighted mean)
/// block length.
struct Boot {
    median: Estimate,
    p99: Estimate,
    method: &'static str,
    rollouts: [u64; 2],
    block_a: f64,
    block_b: f64,
}

/// Which test a pair of sides gets: the run-level test when both hold two
/// or more rollouts with samples, else the two-level bootstrap.
fn method(a: &[&[i64]], b: &[&[i64]]) -> &'static str {
    if a.len() >= 2 && b.len() >= 2 {
        "rollouts"
    } else {
        "bootstrap"
    }
}

/// `K` statistics' differences by the pair's test ([`method`]): the
/// run-level test ([`run_level::run_level`]) or the two-level stationary
/// block bootstrap ([`resample::bootstrap_diffs`]: rollouts with
/// replacement, then blocks of each drawn rollout, the block length from
/// each rollout's own series; A's resample, then B's, each round), seeded
/// by the test's name. Returns the estimates, the method and each side's
/// block length.
fn infer<const K: usize>(
    a: &[&[i64]],
    b: &[&[i64]],
    observed: [f64; K],
    stat: impl Fn(&mut [i64]) -> [f64; K],
    cfg: BootstrapConfig,
    name: &str,
) -> ([Estimate; K], &'static str, [f64; 2]) {
    let mut rng = Rng::new(name_seed(cfg.seed, name));
    let mut ra = Rollouts::new(a.to_vec(), MAX_BOOTSTRAP_SAMPLES);
    let mut rb = Rollouts::new(b.to_vec(), MAX_BOOTSTRAP_SAMPLES);
    let how = method(a, b);
    let e = if how == "rollouts" {
        run_level::run_level(a, b, MAX_BOOTSTRAP_SAMPLES, stat, cfg.resamples, &mut rng)
    } else {
        bootstrap_diffs(&mut ra, &mut rb, observed, stat, cfg.resamples, &mut rng)
    };
    (e, how, [ra.mean_length(), rb.mean_length()])
}

/// One metric's test of its median and p99 ([`infer`]).
fn bootstrap(
    a: &[&[i64]],
    b: &[&[i64]],
    observed: [i64; 2],
    cfg: BootstrapConfig,
    name: &str,
) -> Boot {
    let ([median, p99], method, [block_a, block_b]) = infer(
        a,
        b,
        observed.map(|x| x as f64),
        |v| [rank(v, 0.5) as f64, rank(v, 0.99) as f64],
        cfg,
        name,
    );
    Boot {
        median,
        p99,
        method,
        rollouts: [a.len() as u64, b.len() as u64],
        block_a,
        block_b,
    }
}

/// A test's inference record before the verdict sets its level and its
/// detectable shift ([`judge`]); `round` rounds its figures.
fn inference(
    e: &Estimate,
    method: &str,
    rollouts: [u64; 2],
    round: fn(f64) -> f64,
) -> TestInference {
    TestInference {
        method: method.to_string(),
        rollouts,
        estimate: round(e.estimate),
        se: round(e.se),
        df: (e.df * 100.0).round() / 100.0,
        level: FAMILY_ALPHA,
        detectable: 0.0,
        floor: 0.0,
    }
}

/// Rounds ns figures to 0.1 ns.
fn tenth(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Rounds per-1,000 figures to 10⁻⁴.
fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// The rate the reports give for period and command interval: one
/// report's, or the mean over the side's reports that have it.
fn implied_hz(phase: &str, metric: &str, side: &SideInput) -> Option<f64> {
    let hz: Vec<f64> = side
        .iter()
        .filter_map(|a| {
            let report = &a.report;
            let p = report.phases.iter().find(|p| p.phase == phase)?;
            match metric {
                "period" => p.loop_hz,
                "command_interval" => p.command_hz,
                _ => None,
            }
        })
        .collect();
    match hz.len() {
        0 => None,
        1 => Some(hz[0]),
        n => Some(hz.iter().sum::<f64>() / n as f64),
    }
}

/// A side's samples per metric, rollout by rollout: the judged quantity,
/// and (rollout index, samples) for each rollout that has the metric.
type SideSamples<K> = BTreeMap<K, (Option<i64>, String, Vec<(usize, Vec<i64>)>)>;

fn side_samples(side: &SideInput) -> SideSamples<(String, String, Option<String>)> {
    let mut out: SideSamples<_> = BTreeMap::new();
    for (i, a) in side.iter().enumerate() {
        for (key, (judged, v)) in samples(a) {
            out.entry(key)
                .or_insert_with(|| (None, judged, Vec::new()))
                .2
                .push((i, v));
        }
    }
    out
}

fn side_rates(side: &SideInput) -> SideSamples<(String, String)> {
    let mut out: SideSamples<_> = BTreeMap::new();
    for (i, a) in side.iter().enumerate() {
        for (key, (threshold, v)) in rate_samples(a) {
            let e = out
                .entry(key)
                .or_insert_with(|| (threshold, String::new(), Vec::new()));
            // Rollouts of one config share the threshold; keep the first.
            e.0 = e.0.or(threshold);
            e.2.push((i, v));
        }
    }
    out
}

/// How a side is named: its one directory, or `N rollouts in <dir>` when
/// its episodes share a parent directory, else `N episodes`.
fn side_name(side: &SideInput) -> String {
    let name = side_path(side);
    // A side whose every episode carries one label is named by it.
    let label = side.first().and_then(|a| a.report.run.label.clone());
    match label.filter(|l| {
        side.iter()
            .all(|a| a.report.run.label.as_deref() == Some(l))
    }) {
        Some(l) => format!("{l} ({name})"),
        None => name,
    }
}

/// A side's episodes as paths: one directory, or how many rollouts of
/// which session.
fn side_path(side: &SideInput) -> String {
    match side {
        [] => String::new(),
        [a] => a.evidence.dir.display().to_string(),
        many => {
            let parent = many[0].evidence.dir.parent();
            if parent.is_some() && many.iter().all(|a| a.evidence.dir.parent() == parent) {
                format!(
                    "{} rollouts in {}",
                    many.len(),
                    parent.map(|p| p.display().to_string()).unwrap_or_default()
                )
            } else {
                format!("{} episodes", many.len())
            }
        }
    }
}

/// How one episode of a side is named in caveats and warnings: `A` for a
/// side of one, else `A (<directory name>)`.
fn episode_label(side_label: &str, side: &SideInput, i: usize) -> String {
    if side.len() == 1 {
        side_label.to_string()
    } else {
        let dir = &side[i].evidence.dir;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        format!("{side_label} ({name})")
    }
}

/// The phase the first glance judges, from A's first episode.
fn judged_phase(a: &SideInput) -> Option<String> {
    let first = a.first()?;
    let i = crate::metrics::diagnosis::judged_phase(&first.evidence)?;
    first.evidence.header.phases.get(i as usize).cloned()
}

/// Where phase `p` goes in the tables: the judged phase first, then the
/// others in A's phase order.
fn phase_rank(a: &SideInput, judged: Option<&str>, p: &str) -> usize {
    if judged == Some(p) {
        return 0;
    }
    a.first()
        .and_then(|a| a.report.phases.iter().position(|x| x.phase == p))
        .map_or(usize::MAX, |i| i + 1)
}

/// Where metric `m` goes within a phase: the loop's figures, the stages,
/// data age, then the overlaps.
fn metric_rank(m: &str) -> usize {
    [
        "period",
        "work",
        "work_cpu",
        "sleep_overshoot",
        "deadline_lag",
        "command_interval",
        "stage_wall",
        "stage_cpu",
        "age_at_use",
    ]
    .iter()
    .position(|x| *x == m)
    .unwrap_or(if m.starts_with("overlap:") { 50 } else { 99 })
}

/// The comparison's tests before Holm: one per metric (phase, metric,
/// stage) both sides have, one per rate, and one per loop or command Hz,
/// in the report's order.
fn tests(
    a: &SideInput,
    b: &SideInput,
    cfg: BootstrapConfig,
) -> (
    Vec<MetricComparison>,
    Vec<RateComparison>,
    Vec<HzComparison>,
) {
    let sa = side_samples(a);
    let sb = side_samples(b);
    let judged = judged_phase(a);
    let phase_rank = |p: &str| phase_rank(a, judged.as_deref(), p);
    let mut keys: Vec<&(String, String, Option<String>)> =
        sa.keys().filter(|k| sb.contains_key(*k)).collect();
    keys.sort_by_key(|k| (phase_rank(&k.0), metric_rank(&k.1), k.2.clone()));
    let metrics: Vec<MetricComparison> = keys
        .into_iter()
        .filter_map(|key| compare_metric(key, &sa[key].2, &sb[key].2, &sa[key].1, (a, b), cfg))
        .collect();
    let (ra, rb) = (side_rates(a), side_rates(b));
    let mut rates: Vec<RateComparison> = ra
        .iter()
        .filter_map(|(key, (thr, _, va))| {
            let (_, _, vb) = rb.get(key)?;
            compare_rate(key, *thr, va, vb, cfg)
        })
        .collect();
    rates.sort_by_key(|r| (phase_rank(&r.phase), r.metric.clone()));
    let mut hz = hz::hz_tests(a, b, cfg);
    hz.sort_by_key(|h| (phase_rank(&h.phase), h.metric != "loop_hz"));
    (metrics, rates, hz)
}

/// Compare two sides, each one or more loaded episodes (with their
/// reports). The manifests compared are each side's first episode's;
/// rollouts of one side that differ among themselves are warned about.
///
/// # Panics
/// Never for a side of at least one episode; an empty side gives a
/// comparison with no metrics.
pub fn compare(a: &SideInput, b: &SideInput, cfg: BootstrapConfig) -> Comparison {
    fn manifest<'s>(side: &'s SideInput) -> Option<&'s Value> {
        side.first().and_then(|a| a.evidence.manifest.as_ref())
    }
    let differences = manifest_differences(manifest(a), manifest(b));
    let settings: Vec<String> = differences
        .iter()
        .filter(|d| d.kind == "config")
        .map(|d| d.key.clone())
        .collect();
    let (warnings, caveats) = pair_notes(a, b, &differences, &settings);
    let (mut metrics, mut rates, mut hz) = tests(a, b, cfg);
    let nominal = a
        .first()
        .and_then(|x| crate::metrics::nominal_period(&x.evidence.header));
    let multiplicity = judge(&mut metrics, &mut rates, &mut hz, nominal);
    let dirs = |side: &SideInput| {
        side.iter()
            .map(|a| a.evidence.dir.display().to_string())
            .collect()
    };
    Comparison {
        format: COMPARISON_FORMAT.into(),
        a: side_name(a),
        b: side_name(b),
        a_episodes: dirs(a),
        b_episodes: dirs(b),
        settings_differing: settings,
        differences,
        warnings,
        caveats,
        metrics,
        rates,
        hz,
        multiplicity,
        bootstrap: cfg,
        gate: None,
        left_out: Vec::new(),
    }
}

/// One rate, by the two-level block bootstrap of the difference of
/// means of the indicator series. `None` with fewer than two cycles on a
/// side.
fn compare_rate(
    key: &(String, String),
    threshold: Option<i64>,
    va: &[(usize, Vec<i64>)],
    vb: &[(usize, Vec<i64>)],
    cfg: BootstrapConfig,
) -> Option<RateComparison> {
    let (a, b) = (series(va), series(vb));
    let count = |s: &[&[i64]]| s.iter().map(|v| v.len()).sum::<usize>();
    if count(&a) < 2 || count(&b) < 2 {
        return None;
    }
    let pooled_mean =
        |s: &[&[i64]]| s.iter().flat_map(|v| v.iter()).sum::<i64>() as f64 / count(s) as f64;
    let (ma, mb) = (pooled_mean(&a), pooled_mean(&b));
    let (na, nb) = (count(&a), count(&b));
    let diff = mb - ma;
    let mean = |v: &mut [i64]| [v.iter().sum::<i64>() as f64 / v.len().max(1) as f64];
    let rollouts = [a.len() as u64, b.len() as u64];
    let name = format!("{}/{}/", key.0, key.1);
    let ([e], how, blocks) = infer(&a, &b, [diff], mean, cfg, &name);
    let p = e.p;
    let r2 = |x: f64| (x * 100.0).round() / 100.0;
    Some(RateComparison {
        phase: key.0.clone(),
        metric: key.1.clone(),
        threshold_ns: threshold,
        cycles: [na as u64, nb as u64],
        a_per_1000: r4(ma),
        b_per_1000: r4(mb),
        diff_per_1000: r4(diff),
        ci_per_1000: e.interval.map(r4),
        block_length: blocks.map(r2),
        p,
        p_holm: 1.0,
        test: inference(&e, how, rollouts, r4),
        verdict: Verdict::NoClearChange,
        why: String::new(),
    })
}

/// The non-empty series of a side's rollouts.
fn series(v: &[(usize, Vec<i64>)]) -> Vec<&[i64]> {
    v.iter()
        .map(|(_, s)| s.as_slice())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The rate each side's figure implies (for a period metric), their
/// difference and its share of A's, rounded as the report shows them.
type HzFigures = (Option<f64>, Option<f64>, Option<f64>, Option<f64>);

fn hz_figures(
    key: &(String, String, Option<String>),
    sides: (&SideInput, &SideInput),
) -> HzFigures {
    let (a_hz, b_hz) = (
        implied_hz(&key.0, &key.1, sides.0),
        implied_hz(&key.0, &key.1, sides.1),
    );
    let diff_hz = a_hz.zip(b_hz).map(|(x, y)| ((y - x) * 1e4).round() / 1e4);
    let rel_diff_hz = a_hz
        .zip(diff_hz)
        .filter(|(x, _)| *x != 0.0)
        .map(|(x, d)| ((d / x) * 1e6).round() / 1e6);
    (a_hz, b_hz, diff_hz, rel_diff_hz)
}

/// Each rollout's count, median and p99 (rollouts with samples).
fn per_rollout(v: &[(usize, Vec<i64>)]) -> Vec<RolloutFigures> {
    v.iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(i, s)| {
            let mut s = s.clone();
            RolloutFigures {
                rollout: *i,
                count: s.len() as u64,
                median_ns: rank(&mut s, 0.5),
                p99_ns: rank(&mut s, 0.99),
            }
        })
        .collect()
}

/// The warning when the p99.9 rests on few cycles beyond it (`fewest`: the
/// smaller side's count beyond its p99.9).
fn tail_warning(fewest: u64) -> Option<String> {
    (fewest < MIN_TAIL_SAMPLES).then(|| match fewest {
        0 => "the p99.9 is a side's maximum: no cycle lies beyond it".to_string(),
        1 => "the tail rests on 1 cycle".to_string(),
        n => format!("the tail rests on {n} cycles"),
    })
}

/// One metric of one phase (and stage): both sides' figures (pooled and
/// per rollout), the seeded bootstrap intervals and the verdict. `None`
/// with fewer than two samples on a side.
fn compare_metric(
    key: &(String, String, Option<String>),
    va: &[(usize, Vec<i64>)],
    vb: &[(usize, Vec<i64>)],
    judged: &str,
    sides: (&SideInput, &SideInput),
    cfg: BootstrapConfig,
) -> Option<MetricComparison> {
    let (a, b) = (series(va), series(vb));
    let pooled = |s: &[&[i64]]| s.concat();
    let (pa, pb) = (pooled(&a), pooled(&b));
    if pa.len() < 2 || pb.len() < 2 {
        return None;
    }
    let (a_side, b_side) = (side(&pa), side(&pb));
    let name = format!("{}/{}/{}", key.0, key.1, key.2.as_deref().unwrap_or(""));
    let dm = b_side.median_ns - a_side.median_ns;
    let dp = b_side.p99_ns - a_side.p99_ns;
    let boot = bootstrap(&a, &b, [dm, dp], cfg, &name);
    let p99_tested = pa.len().min(pb.len()) >= MIN_SAMPLES_FOR_P99_VERDICT;
    let rel = |d: i64, base: i64| {
        (base != 0).then(|| ((d as f64 / base.unsigned_abs() as f64) * 1e4).round() / 1e4)
    };
    let (a_hz, b_hz, diff_hz, rel_diff_hz) = hz_figures(key, sides);
    let ci = |i: [f64; 2]| i.map(|x| x.round() as i64);
    Some(MetricComparison {
        phase: key.0.clone(),
        diff_hz,
        rel_diff_hz,
        metric: key.1.clone(),
        stage: key.2.clone(),
        judged_on: judged.to_string(),
        a_hz,
        b_hz,
        diff_median_ns: dm,
        rel_diff_median: rel(dm, a_side.median_ns),
        ci_median_ns: ci(boot.median.interval),
        diff_p99_ns: dp,
        rel_diff_p99: rel(dp, a_side.p99_ns),
        ci_p99_ns: ci(boot.p99.interval),
        diff_p999_ns: b_side.p999_ns - a_side.p999_ns,
        tail_warning: tail_warning(a_side.beyond_p999.min(b_side.beyond_p999)),
        block_length: [
            (boot.block_a * 100.0).round() / 100.0,
            (boot.block_b * 100.0).round() / 100.0,
        ],
        p_median: boot.median.p,
        p_median_holm: 1.0,
        p_p99: p99_tested.then_some(boot.p99.p),
        p_p99_holm: None,
        test_median: inference(&boot.median, boot.method, boot.rollouts, tenth),
        test_p99: p99_tested.then(|| inference(&boot.p99, boot.method, boot.rollouts, tenth)),
        // Set by `judge`, once the whole family's p-values are known.
        verdict_median: Verdict::NoClearChange,
        verdict_p99: None,
        verdict: Verdict::NoClearChange,
        why_median: String::new(),
        why_p99: None,
        a_rollouts: per_rollout(va),
        b_rollouts: per_rollout(vb),
        a: a_side,
        b: b_side,
    })
}
