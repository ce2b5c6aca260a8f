//! What one episode gives a comparison: its samples per (phase, metric,
//! stage), the cycle columns and span table read as they are (never
//! recomputed), and its rate indicator series.

use std::collections::{BTreeMap, HashMap};

use crate::analysis::Analysis;
use crate::evidence::Evidence;
use crate::metrics::{command_columns, schedule_comparable};

/// Samples keyed by (phase, metric, stage), with what they are judged on.
pub(super) type Samples = BTreeMap<(String, String, Option<String>), (String, Vec<i64>)>;

pub(super) fn samples(a: &Analysis) -> Samples {
    let (ev, cc) = (&a.evidence, a.columns());
    let h = &ev.header;
    let nominal = crate::metrics::nominal_period(h).map(|p| p as i64);
    let phase_name = |i: u32| h.phases.get(i as usize).cloned().unwrap_or_default();
    let mut out: Samples = BTreeMap::new();
    let mut push = |phase: u32, metric: &str, stage: Option<String>, judged: &str, v: i64| {
        out.entry((phase_name(phase), metric.to_string(), stage))
            .or_insert_with(|| (judged.to_string(), Vec::new()))
            .1
            .push(v);
    };
    for i in 0..ev.cycles.len() {
        let p = cc.phase[i];
        if let Some(x) = cc.period[i] {
            match nominal {
                Some(n) => push(p, "period", None, "|period − nominal|", (x - n).abs()),
                None => push(p, "period", None, "value", x),
            }
        }
        if let Some(x) = cc.work[i] {
            push(p, "work", None, "value", x);
        }
        // The cycle's thread CPU time (`cycle` CPU-time mode): moves with
        // the code, not with the neighbours.
        if let Some(x) = cc.cpu[i] {
            push(p, "work_cpu", None, "value", x);
        }
        if let Some(x) = cc.overshoot[i] {
            push(p, "sleep_overshoot", None, "value", x);
        }
        if let Some(x) = cc.lag[i] {
            push(p, "deadline_lag", None, "value", x);
        }
    }
    let cmd = command_columns(ev, &cc.segment);
    for i in 0..cmd.segment.len() {
        if let Some(x) = cmd.interval[i] {
            match nominal {
                Some(n) => push(
                    cmd.phase[i],
                    "command_interval",
                    None,
                    "|interval − nominal|",
                    (x - n).abs(),
                ),
                None => push(cmd.phase[i], "command_interval", None, "value", x),
            }
        }
    }
    // Stages by (phase, path), attributes pooled: an A/B of `mode` compares
    // the same stage under both modes.
    stage_samples(ev, &|p| phase_name(p), &mut out);
    thread_and_age_samples(ev, &cc.phase, &phase_name, &mut out);
    // Input-paced phases: each answer's latency (docs/metrics.md).
    for s in input_series(a) {
        out.entry((phase_name(s.phase), "answer_latency".into(), None))
            .or_insert_with(|| ("value".to_string(), Vec::new()))
            .1
            .extend(s.latency);
    }
    out
}

/// The per-cycle series of `a`'s input-paced phases.
fn input_series(a: &Analysis) -> Vec<crate::metrics::input_paced::PhaseSeries> {
    let ev = &a.evidence;
    crate::metrics::input_paced::phase_series(
        ev,
        &a.columns().segment,
        crate::metrics::diagnosis::pace(ev),
    )
}

/// The rates of input-paced phases, each an indicator series in file
/// order: `late_answers` (per 1,000 answers, the budget its threshold),
/// the inputs lost per 1,000 compared arrivals by cause (`lost_before_arrival`,
/// `lost_after_late_answer`, `lost_discarded`), `bursts` per 1,000
/// arrivals, `success_shortfall`, the robot's (1 − success rate) per
/// 1,000 cycles (its mean), and `success_below_one`, the cycles whose rate
/// fell below 1 per 1,000 (the dips a minimum marks: a minimum itself, one
/// cycle, has no bootstrap distribution).
fn input_rates(a: &Analysis, out: &mut RateSamples) {
    let h = &a.evidence.header;
    for s in input_series(a) {
        let p = h.phases.get(s.phase as usize).cloned().unwrap_or_default();
        let [before, after, discarded] = s.lost;
        for (metric, threshold, v) in [
            ("late_answers", s.budget_ns.map(|b| b as i64), s.late),
            ("lost_before_arrival", None, before),
            ("lost_after_late_answer", None, after),
            ("lost_discarded", None, discarded),
            ("bursts", None, s.bursts),
            (
                "success_below_one",
                None,
                s.shortfall
                    .iter()
                    .map(|&x| if x > 0 { 1000 } else { 0 })
                    .collect(),
            ),
            ("success_shortfall", None, s.shortfall),
        ] {
            if !v.is_empty() {
                out.entry((p.clone(), metric.into()))
                    .or_insert_with(|| (threshold, Vec::new()))
                    .1
                    .extend(v);
            }
        }
    }
}

/// Background threads' stages under `<thread>/<phase>`, per control span
/// the time it overlapped each thread's work, and each data-age use's age
/// at use per (phase, source) for the sources on the host clock (the
/// others have no age).
fn thread_and_age_samples(
    ev: &Evidence,
    phase: &[u32],
    phase_name: &dyn Fn(u32) -> String,
    out: &mut Samples,
) {
    // Background threads: their stages under `<thread>/<phase>`, and per
    // control span the time it overlapped each thread's work.
    for t in &ev.threads {
        let name = t.header.thread_name();
        let tphase = |i: u32| {
            format!(
                "{name}/{}",
                t.header.phases.get(i as usize).cloned().unwrap_or_default()
            )
        };
        stage_samples(t, &tphase, out);
    }
    // Data age: each use's age at use, per (phase, source), for the
    // sources on the host clock (the others have no age).
    for (i, age) in uses(ev) {
        let source = ev.header.sources[i.source as usize].name.clone();
        out.entry((
            phase_name(phase[i.row as usize]),
            "age_at_use".into(),
            Some(source),
        ))
        .or_insert_with(|| ("value".to_string(), Vec::new()))
        .1
        .push(age);
    }
    for ((phase, path, thread), v) in crate::metrics::threads::overlap_samples(ev) {
        out.entry((phase, format!("overlap:{thread}"), Some(path)))
            .or_insert_with(|| ("value".to_string(), Vec::new()))
            .1
            .extend(v);
    }
}

/// The control thread's uses of its host-clock sources with their age at
/// use (stamps after their use left out, as the report leaves them out).
fn uses(ev: &Evidence) -> impl Iterator<Item = (&crate::evidence::SampleRow, i64)> + '_ {
    ev.samples
        .iter()
        .filter_map(|x| crate::metrics::data_age::use_age(ev, x).map(|a| (x, a)))
}

/// Push every span's wall (and CPU) time of `ev` under its (phase, path).
fn stage_samples(ev: &Evidence, phase_name: &dyn Fn(u32) -> String, out: &mut Samples) {
    let groups: HashMap<u64, &crate::evidence::GroupDecode> =
        ev.groups.iter().map(|g| (g.key, g)).collect();
    let col = |name: &str| {
        ev.spans
            .column(name)
            .ok()
            .map(|c| c.as_materialized_series().clone())
    };
    let mut push = |phase: u32, metric: &str, path: &str, v: i64| {
        out.entry((
            phase_name(phase),
            metric.to_string(),
            Some(path.to_string()),
        ))
        .or_insert_with(|| ("value".to_string(), Vec::new()))
        .1
        .push(v);
    };
    if let (Some(k), Some(w), Some(c)) = (col("key"), col("wall_ns"), col("cpu_ns")) {
        // The loader rechunks the span table and never writes nulls.
        let (k, w, c) = (k.rechunk(), w.rechunk(), c.rechunk());
        if let (Ok(k), Ok(w), Ok(c)) = (k.u64(), w.i64(), c.i64()) {
            if let (Ok(k), Ok(w), Ok(c)) = (k.cont_slice(), w.cont_slice(), c.cont_slice()) {
                for ((&k, &w), &c) in k.iter().zip(w).zip(c) {
                    let Some(g) = groups.get(&k) else { continue };
                    push(g.phase, "stage_wall", &g.path, w);
                    if c >= 0 {
                        push(g.phase, "stage_cpu", &g.path, c);
                    }
                }
            }
        }
    }
}

/// Per phase, the 0/1000 indicator series of deadline misses (`overdue`)
/// and, when the schedule is paced and its clocks comparable, of late
/// starts (lag above [`crate::metrics::LATE_START_SHARE`] of the effective
/// period); with the late-start threshold.
pub(super) type RateSamples = BTreeMap<(String, String), (Option<i64>, Vec<i64>)>;

pub(super) fn rate_samples(a: &Analysis) -> RateSamples {
    let (ev, cc) = (&a.evidence, a.columns());
    let h = &ev.header;
    let phase_name = |i: u32| h.phases.get(i as usize).cloned().unwrap_or_default();
    let threshold = match crate::metrics::diagnosis::pace(ev) {
        crate::metrics::Pace::Paced { effective_ns, .. } if schedule_comparable(h) => {
            Some((crate::metrics::LATE_START_SHARE * effective_ns as f64).round() as i64)
        }
        _ => None,
    };
    let mut out: RateSamples = BTreeMap::new();
    declared_rates(a, &mut out);
    input_rates(a, &mut out);
    for (i, c) in ev.cycles.iter().enumerate() {
        let p = phase_name(cc.phase[i]);
        out.entry((p.clone(), "deadline_miss".into()))
            .or_insert_with(|| (None, Vec::new()))
            .1
            .push(if c.overdue { 1000 } else { 0 });
        if let (Some(t), Some(lag)) = (threshold, cc.lag[i]) {
            out.entry((p, "late_start".into()))
                .or_insert_with(|| (Some(t), Vec::new()))
                .1
                .push(if lag > t { 1000 } else { 0 });
        }
    }
    // Stale uses per source with a limit: one indicator per use, in file
    // order (the uses' own series, so the block bootstrap follows them).
    for (x, age) in uses(ev) {
        let s = &h.sources[x.source as usize];
        let Some(limit) = s.max_age_ns else { continue };
        out.entry((
            phase_name(cc.phase[x.row as usize]),
            format!("stale:{}", s.name),
        ))
        .or_insert_with(|| (Some(limit as i64), Vec::new()))
        .1
        .push(if age as u64 > limit { 1000 } else { 0 });
    }
    out
}

/// The rates of what the evidence declares (docs/metrics.md, Budget and
/// tolerance): per phase, `budget_overrun` (work over the declared compute
/// budget, over the cycles with an end) and `completion_miss` (an end after
/// the next release point plus the declared tolerance, over the
/// deadline-paced cycles with an end and a comparable target). A side that
/// declares neither has neither series, so `compare` tests them only when
/// both sides declared them.
fn declared_rates(a: &Analysis, out: &mut RateSamples) {
    let (ev, cc) = (&a.evidence, a.columns());
    let h = &ev.header;
    let phase_name = |i: u32| h.phases.get(i as usize).cloned().unwrap_or_default();
    let effective = match crate::metrics::diagnosis::pace(ev) {
        crate::metrics::Pace::Paced { effective_ns, .. } if schedule_comparable(h) => {
            Some(effective_ns as i64)
        }
        _ => None,
    };
    for (i, c) in ev.cycles.iter().enumerate() {
        let p = phase_name(cc.phase[i]);
        if let (Some(b), Some(w)) = (h.compute_budget_ns, cc.work[i]) {
            out.entry((p.clone(), "budget_overrun".into()))
                .or_insert_with(|| (Some(b as i64), Vec::new()))
                .1
                .push(if w > b as i64 { 1000 } else { 0 });
        }
        let next_release = effective
            .zip(c.target_ns)
            .filter(|_| !c.input_paced)
            .map(|(e, t)| t + e);
        if let (Some(tol), Some(next), Some(end)) =
            (h.deadline_tolerance_ns, next_release, c.end_ns)
        {
            out.entry((p, "completion_miss".into()))
                .or_insert_with(|| (Some(tol as i64), Vec::new()))
                .1
                .push(if end > next + tol as i64 { 1000 } else { 0 });
        }
    }
}
