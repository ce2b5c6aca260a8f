//! Data age: how old each sample (a camera frame, a robot state, a policy
//! output) was when the control loop used it, per declared source and
//! phase; how often a cycle reused the previous sample or skipped some;
//! and, where a thread recorded publishing them, how long samples waited
//! for their first use and how many were never used (docs/metrics.md,
//! Data age).

use std::collections::HashMap;

use super::report::{DataAgeReport, Production, SourceAge, SourcePhase};
use super::table::{dist_of, r4};
use crate::evidence::{Evidence, SampleRow};

/// The clock name a source's stamps must carry for ages to be computed.
const HOST: &str = "host_monotonic";

/// How far a stamp may lie after its moment of use and still count as
/// taken at it: the moment of use is a TSC read mapped onto
/// `CLOCK_MONOTONIC`, the stamp a `CLOCK_MONOTONIC` read, and the mapping
/// is good to well under a microsecond (the anchors' uncertainty is tens of
/// ns), so a frame stamped and used back to back can read a few ns "in the
/// future".
pub const CLOCK_TOLERANCE_NS: i64 = 1_000;

/// The age at use of a sample stamped `stamp_ns` and used at `at_ns` (both
/// host monotonic): `at − stamp`, 0 for a stamp up to
/// [`CLOCK_TOLERANCE_NS`] after the use, `None` for a stamp later than that
/// (counted as stamped in the future, left out of the ages).
pub fn age_of(stamp_ns: i64, at_ns: i64) -> Option<i64> {
    let age = at_ns - stamp_ns;
    if age >= 0 {
        Some(age)
    } else if age >= -CLOCK_TOLERANCE_NS {
        Some(0)
    } else {
        None
    }
}

/// The age at use of sample `x` of `ev` when it has one: a use (not a
/// publication) of a source on the host clock, stamped no more than
/// [`CLOCK_TOLERANCE_NS`] after its use. The one rule every export, plot
/// and comparison reads ages by.
pub fn use_age(ev: &Evidence, x: &SampleRow) -> Option<i64> {
    let host = ev
        .header
        .sources
        .get(x.source as usize)
        .is_some_and(|s| s.clock == HOST);
    if host && !x.produced {
        age_of(x.stamp_ns, x.at_ns)
    } else {
        None
    }
}

/// The data-age report of `ev` (absent when its header declares no source).
pub fn data_age(ev: &Evidence) -> Option<DataAgeReport> {
    let h = &ev.header;
    if h.sources.is_empty() {
        return None;
    }
    // Command span starts of each cycle row, in order.
    let mut commands: HashMap<u32, Vec<i64>> = HashMap::new();
    for &(row, start) in &ev.commands {
        commands.entry(row).or_default().push(start);
    }
    let sources = h
        .sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let uses: Vec<&SampleRow> = ev
                .samples
                .iter()
                .filter(|x| x.source as usize == i && !x.produced)
                .collect();
            let comparable = s.clock == HOST;
            let not_comparable = (!comparable).then(|| {
                format!(
                    "its stamps are on the clock `{}`, not this host's monotonic clock, so no age is computed: map the stamps onto CLOCK_MONOTONIC before recording them, or declare the source on the host clock",
                    s.clock
                )
            });
            SourceAge {
                source: s.name.clone(),
                clock: s.clock.clone(),
                max_age_ns: s.max_age_ns,
                not_comparable,
                phases: phases_of(ev, &uses, comparable, s.max_age_ns, &commands),
                production: production(ev, &s.name, &uses),
            }
        })
        .collect();
    Some(DataAgeReport {
        samples_dropped: ev.cycles.iter().map(|c| c.samples_dropped as u64).sum(),
        sources,
    })
}

/// Per phase: ages, staleness, reuse and gaps of `uses` (one source's, in
/// file order).
fn phases_of(
    ev: &Evidence,
    uses: &[&SampleRow],
    comparable: bool,
    max_age: Option<u64>,
    commands: &HashMap<u32, Vec<i64>>,
) -> Vec<SourcePhase> {
    let n_phases = ev.header.phases.len();
    let mut acc: Vec<(SourcePhase, Vec<i64>, Vec<i64>)> = (0..n_phases)
        .map(|p| {
            (
                SourcePhase {
                    phase: ev.header.phases[p].clone(),
                    uses: 0,
                    age_at_use: None,
                    age_at_command: None,
                    stale: None,
                    stale_share: None,
                    stamped_in_future: 0,
                    reused: 0,
                    skipped: 0,
                    seq_resets: 0,
                },
                Vec::new(),
                Vec::new(),
            )
        })
        .collect();
    let mut prev: Option<u64> = None;
    for x in uses {
        let phase = ev.cycles[x.row as usize].phase as usize;
        let Some((p, ages, at_cmd)) = acc.get_mut(phase) else {
            continue;
        };
        p.uses += 1;
        match prev {
            Some(q) if x.seq == q => p.reused += 1,
            Some(q) if x.seq > q => p.skipped += x.seq - q - 1,
            Some(_) => p.seq_resets += 1,
            None => {}
        }
        prev = Some(x.seq);
        if !comparable {
            continue;
        }
        let Some(age) = age_of(x.stamp_ns, x.at_ns) else {
            p.stamped_in_future += 1;
            continue;
        };
        ages.push(age);
        let cmd = commands
            .get(&x.row)
            .and_then(|v| v.iter().find(|&&s| s >= x.at_ns));
        if let Some(&s) = cmd {
            at_cmd.push((s - x.stamp_ns).max(0));
        }
    }
    acc.into_iter()
        .filter(|(p, _, _)| p.uses > 0)
        .map(|(mut p, mut ages, mut at_cmd)| {
            if comparable {
                if let Some(limit) = max_age {
                    let stale = ages.iter().filter(|&&a| a as u64 > limit).count() as u64;
                    p.stale = Some(stale);
                    p.stale_share =
                        (!ages.is_empty()).then(|| r4(stale as f64 / ages.len() as f64));
                }
            }
            p.age_at_use = dist_of(&mut ages);
            p.age_at_command = dist_of(&mut at_cmd);
            p
        })
        .collect()
}

/// What a reader of the data-age figures must know: samples used before
/// their recorded publication, which `wait_to_first_use` leaves out.
pub fn caveats(r: &DataAgeReport) -> Vec<String> {
    r.sources
        .iter()
        .filter_map(|s| {
            let p = s.production.as_ref()?;
            (p.used_before_published > 0).then(|| format!(
                "data age: {} of {} published `{}` samples were used before their publication was recorded, so they are left out of wait_to_first_use: record produced() before the sample becomes visible to the loop (docs/python.md)",
                p.used_before_published, p.produced, s.source
            ))
        })
        .collect()
}

/// Publication of source `name`: by the control thread or any background
/// thread that declared a source of that name and recorded `produced`.
fn production(ev: &Evidence, name: &str, uses: &[&SampleRow]) -> Option<Production> {
    let mut threads = Vec::new();
    let mut published: Vec<(u64, i64)> = Vec::new();
    for t in std::iter::once(ev).chain(&ev.threads) {
        let Some(i) = t.header.sources.iter().position(|s| s.name == name) else {
            continue;
        };
        let before = published.len();
        published.extend(
            t.samples
                .iter()
                .filter(|x| x.produced && x.source as usize == i)
                .map(|x| (x.seq, x.at_ns)),
        );
        if published.len() > before {
            threads.push(t.header.thread_name().to_string());
        }
    }
    if published.is_empty() {
        return None;
    }
    published.sort_by_key(|&(_, at)| at);
    let mut first_use: HashMap<u64, i64> = HashMap::new();
    for x in uses {
        first_use.entry(x.seq).or_insert(x.at_ns);
    }
    let last_use = uses.iter().map(|x| x.at_ns).max();
    let mut waits = Vec::new();
    let (mut never_used, mut used_before_published) = (0, 0);
    for &(seq, at) in &published {
        match first_use.get(&seq) {
            Some(&u) if u >= at => waits.push(u - at),
            Some(_) => used_before_published += 1,
            None if last_use.is_some_and(|l| at < l) => never_used += 1,
            None => {}
        }
    }
    let seq_gaps = published
        .windows(2)
        .map(|w| w[1].0.saturating_sub(w[0].0).saturating_sub(1))
        .sum();
    let n = published.len();
    let span = published[n - 1].1 - published[0].1;
    Some(Production {
        threads,
        produced: n as u64,
        rate_hz: (n >= 2 && span > 0).then(|| r4((n - 1) as f64 * 1e9 / span as f64)),
        wait_to_first_use: dist_of(&mut waits),
        never_used,
        seq_gaps,
        used_before_published,
    })
}
