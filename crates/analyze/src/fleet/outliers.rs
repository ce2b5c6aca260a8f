//! What `fleet` says about its rows: the worst rows of each phase, the
//! robust outlier rule (docs/fleet.md), and the summary that `--json`
//! prints and the text summary renders.

use serde::Serialize;

use super::{Failure, Fleet, FleetRow};

/// The metrics the outlier rule looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutlierMetric {
    /// Period p99 in nominal periods.
    PeriodP99,
    /// Overruns per 1,000 cycles.
    #[serde(rename = "overruns_per_1000")]
    OverrunsPer1000,
    /// Work p99 in nominal periods.
    WorkP99,
    /// Input-paced phases: late answers per 1,000 answers.
    #[serde(rename = "late_answers_per_1000")]
    LateAnswersPer1000,
}

impl OutlierMetric {
    /// Every metric, in report order.
    pub const ALL: [OutlierMetric; 4] = [
        OutlierMetric::PeriodP99,
        OutlierMetric::OverrunsPer1000,
        OutlierMetric::WorkP99,
        OutlierMetric::LateAnswersPer1000,
    ];

    /// Its name in the summary.
    pub fn name(self) -> &'static str {
        match self {
            OutlierMetric::PeriodP99 => "period p99 / nominal",
            OutlierMetric::OverrunsPer1000 => "overruns per 1000",
            OutlierMetric::WorkP99 => "work p99 / nominal",
            OutlierMetric::LateAnswersPer1000 => "late answers per 1000",
        }
    }

    fn of(self, r: &FleetRow) -> Option<f64> {
        match self {
            OutlierMetric::PeriodP99 => r.period_p99_rel(),
            OutlierMetric::OverrunsPer1000 => r.overruns_per_1000,
            OutlierMetric::WorkP99 => r.work_p99_rel(),
            OutlierMetric::LateAnswersPer1000 => r.input.late_share.map(|s| s * 1000.0),
        }
    }

    /// The smallest spread the rule divides by, so that a fleet of nearly
    /// equal rows does not call a tiny difference an outlier: 1 % of the
    /// nominal period (0.01) for the two ratios, one overrun (or late
    /// answer) per 1,000 for the rates.
    fn spread_floor(self) -> f64 {
        match self {
            OutlierMetric::OverrunsPer1000 | OutlierMetric::LateAnswersPer1000 => 1.0,
            _ => 0.01,
        }
    }
}

/// The fewest rows of a phase for which the outlier rule is applied.
pub const OUTLIER_MIN_ROWS: usize = 8;
/// The modified z-score above which a row is an outlier.
pub const OUTLIER_Z: f64 = 3.5;

/// A row that stands out from its phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outlier {
    /// Index into [`Fleet::rows`].
    #[serde(skip)]
    pub row: usize,
    /// The metric.
    pub metric: OutlierMetric,
    /// The row's value.
    pub value: f64,
    /// The phase's median of it.
    pub median: f64,
    /// The modified z-score: `(value − median) / max(1.4826 · MAD, floor)`.
    pub z: f64,
}

/// The median of `v` (sorted in place); `None` when empty.
fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl Fleet {
    /// The phases of the table, in first-seen order.
    pub fn phases(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !out.contains(&r.phase.as_str()) {
                out.push(&r.phase);
            }
        }
        out
    }

    /// Rows that stand out, by the rule of docs/fleet.md: within one phase,
    /// over the rows where the metric is known (at least
    /// [`OUTLIER_MIN_ROWS`]), a row is an outlier on the high side when its
    /// modified z-score exceeds [`OUTLIER_Z`]. Sorted by phase order, then
    /// by z, highest first.
    pub fn outliers(&self) -> Vec<Outlier> {
        let mut out = Vec::new();
        for phase in self.phases() {
            let mut found = Vec::new();
            for metric in OutlierMetric::ALL {
                let xs: Vec<(usize, f64)> = self
                    .rows
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.phase == phase)
                    .filter_map(|(i, r)| metric.of(r).map(|x| (i, x)))
                    .collect();
                if xs.len() < OUTLIER_MIN_ROWS {
                    continue;
                }
                let mut vals: Vec<f64> = xs.iter().map(|&(_, x)| x).collect();
                let Some(med) = median(&mut vals) else {
                    continue;
                };
                let mut dev: Vec<f64> = xs.iter().map(|&(_, x)| (x - med).abs()).collect();
                let mad = median(&mut dev).unwrap_or(0.0);
                let spread = (1.4826 * mad).max(metric.spread_floor());
                if spread <= 0.0 {
                    continue;
                }
                for (i, x) in xs {
                    let z = (x - med) / spread;
                    if z > OUTLIER_Z {
                        found.push(Outlier {
                            row: i,
                            metric,
                            value: x,
                            median: med,
                            z,
                        });
                    }
                }
            }
            found.sort_by(|a, b| b.z.total_cmp(&a.z));
            out.extend(found);
        }
        out
    }

    /// The `n` worst rows of `phase`: highest period p99 in nominal
    /// periods, then most overruns per 1,000 cycles. Rows without a
    /// period p99 or a nominal period are not ranked.
    pub fn worst(&self, phase: &str, n: usize) -> Vec<usize> {
        let mut idx: Vec<(usize, f64, f64)> = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.phase == phase)
            .filter_map(|(i, r)| {
                r.period_p99_rel()
                    .map(|p| (i, p, r.overruns_per_1000.unwrap_or(0.0)))
            })
            .collect();
        idx.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
        idx.into_iter().take(n).map(|(i, _, _)| i).collect()
    }

    /// The `n` rows of `phase` with the largest stale share of a data-age
    /// source (above 0), ties broken by the larger age p99.
    pub fn worst_by_stale_share(&self, phase: &str, n: usize) -> Vec<usize> {
        let mut idx: Vec<(usize, f64, f64)> = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.phase == phase)
            .filter_map(|(i, r)| {
                r.max_stale_share
                    .filter(|s| *s > 0.0)
                    .map(|s| (i, s, r.max_age_p99_ms.unwrap_or(0.0)))
            })
            .collect();
        idx.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
        idx.into_iter().take(n).map(|(i, _, _)| i).collect()
    }

    /// The `n` input-paced rows of `phase` with the largest late-answer
    /// share (above 0), ties broken by the larger answer latency p99.
    pub fn worst_by_late_share(&self, phase: &str, n: usize) -> Vec<usize> {
        let mut idx: Vec<(usize, f64, f64)> = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.phase == phase)
            .filter_map(|(i, r)| {
                r.input
                    .late_share
                    .filter(|s| *s > 0.0)
                    .map(|s| (i, s, r.input.answer_latency_p99_ns.unwrap_or(0) as f64))
            })
            .collect();
        idx.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
        idx.into_iter().take(n).map(|(i, _, _)| i).collect()
    }

    /// The `n` rows of `phase` with the most overruns per 1,000 cycles
    /// (at least one overrun), ties broken by the higher period p99 in
    /// nominal periods.
    pub fn worst_by_overruns(&self, phase: &str, n: usize) -> Vec<usize> {
        let mut idx: Vec<(usize, f64, f64)> = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.phase == phase && r.overruns > 0)
            .filter_map(|(i, r)| {
                r.overruns_per_1000
                    .map(|o| (i, o, r.period_p99_rel().unwrap_or(0.0)))
            })
            .collect();
        idx.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
        idx.into_iter().take(n).map(|(i, _, _)| i).collect()
    }
}

/// The format name of `fleet --json`.
pub const FORMAT: &str = "looptime-fleet/1";

/// One phase's worst rows.
#[derive(Clone, Debug, Serialize)]
pub struct WorstList<'a> {
    /// The phase.
    pub phase: &'a str,
    /// Rows of the phase in the table.
    pub rows_in_phase: usize,
    /// The worst rows by period p99 in nominal periods, worst first.
    pub by_period_p99: Vec<&'a FleetRow>,
    /// The rows with the most overruns per 1,000 cycles (only rows that
    /// overran), most first.
    pub by_overruns: Vec<&'a FleetRow>,
    /// Data age: the rows with the largest stale share of a source (only
    /// rows with a stale use), most first; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_stale_share: Vec<&'a FleetRow>,
    /// Input-paced: the rows with the largest late-answer share (only rows
    /// with a late answer), most first; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_late_share: Vec<&'a FleetRow>,
}

/// An outlier with the row it names.
#[derive(Clone, Debug, Serialize)]
pub struct NamedOutlier<'a> {
    /// The rule's figures.
    #[serde(flatten)]
    pub outlier: Outlier,
    /// The row.
    pub row: &'a FleetRow,
}

/// What `fleet` prints: `--json` serializes it, the text summary renders
/// it. Deterministic for given episodes (no times, no worker count).
#[derive(Clone, Debug, Serialize)]
pub struct Summary<'a> {
    /// [`FORMAT`].
    pub format: &'static str,
    /// Episodes found under the roots.
    pub found: usize,
    /// Episodes analyzed.
    pub analyzed: usize,
    /// Episodes that failed.
    pub failed: usize,
    /// Rows in the table.
    pub rows: usize,
    /// Retained control-thread cycles of the analyzed episodes.
    pub cycles: u64,
    /// JSONL bytes read.
    pub bytes: u64,
    /// The rule's parameters, as applied.
    pub outlier_rule: OutlierRule,
    /// Per phase, its worst rows.
    pub worst: Vec<WorstList<'a>>,
    /// The outliers, by phase, then z highest first.
    pub outliers: Vec<NamedOutlier<'a>>,
    /// The episodes that could not be analyzed.
    pub failures: &'a [Failure],
}

/// The outlier rule's parameters.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OutlierRule {
    /// [`OUTLIER_Z`].
    pub z_above: f64,
    /// [`OUTLIER_MIN_ROWS`].
    pub min_rows: usize,
}

impl Fleet {
    /// The summary, with `worst` rows per phase.
    pub fn summary(&self, worst: usize) -> Summary<'_> {
        Summary {
            format: FORMAT,
            found: self.found,
            analyzed: self.analyzed,
            failed: self.failures.len(),
            rows: self.rows.len(),
            cycles: self.cycles,
            bytes: self.bytes,
            outlier_rule: OutlierRule {
                z_above: OUTLIER_Z,
                min_rows: OUTLIER_MIN_ROWS,
            },
            worst: self
                .phases()
                .into_iter()
                .map(|phase| WorstList {
                    phase,
                    rows_in_phase: self.rows.iter().filter(|r| r.phase == phase).count(),
                    by_period_p99: self
                        .worst(phase, worst)
                        .into_iter()
                        .map(|i| &self.rows[i])
                        .collect(),
                    by_overruns: self
                        .worst_by_overruns(phase, worst)
                        .into_iter()
                        .map(|i| &self.rows[i])
                        .collect(),
                    by_stale_share: self
                        .worst_by_stale_share(phase, worst)
                        .into_iter()
                        .map(|i| &self.rows[i])
                        .collect(),
                    by_late_share: self
                        .worst_by_late_share(phase, worst)
                        .into_iter()
                        .map(|i| &self.rows[i])
                        .collect(),
                })
                .collect(),
            outliers: self
                .outliers()
                .into_iter()
                .map(|o| NamedOutlier {
                    row: &self.rows[o.row],
                    outlier: o,
                })
                .collect(),
            failures: &self.failures,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(phase: &str, p99: i64, overruns: u64) -> FleetRow {
        FleetRow {
            robot: "r".into(),
            session: "s".into(),
            rollout: format!("{p99}"),
            episode_dir: String::new(),
            created_utc: None,
            config_hash: None,
            source_hash: None,
            state: "complete".into(),
            n_caveats: 0,
            caveats: Vec::new(),
            phase: phase.into(),
            cycles: 1000,
            segments: 1,
            nominal_period_ns: Some(10_000_000),
            loop_hz: Some(100.0),
            period_p50_ns: Some(10_000_000),
            period_p99_ns: Some(p99),
            period_p999_ns: Some(p99),
            overruns,
            overruns_per_1000: Some(overruns as f64),
            work_p99_ns: Some(1_000_000),
            top_stage: None,
            top_stage_p99_ns: None,
            label: None,
            config_name: None,
            max_age_p99_ms: None,
            max_stale_share: None,
            budget_overruns: None,
            budget_overruns_per_1000: None,
            completion_misses: None,
            completion_misses_per_1000: None,
            input: Default::default(),
        }
    }

    #[test]
    fn the_outlier_rule_flags_the_one_slow_row_and_nothing_in_a_uniform_fleet() {
        // Nine rows at p99 10.1-10.9 ms (0.1 ms apart) and one at 14 ms.
        // Relative to the 10 ms nominal the nine are 1.01..1.09: median of
        // the ten is (1.05+1.06)/2 = 1.055; absolute deviations sorted
        // 0.005,0.005,0.015,0.015,0.025,0.025,0.035,0.035,0.045,0.345, so
        // MAD = (0.025+0.025)/2 = 0.025, spread = 1.4826*0.025 = 0.037065,
        // and the 14 ms row has z = (1.4-1.055)/0.037065 = 9.31 > 3.5; the
        // 1.09 row has z = 0.94.
        let mut f = Fleet::default();
        for k in 1..=9 {
            f.rows.push(row("running", 10_000_000 + k * 100_000, 0));
        }
        f.rows.push(row("running", 14_000_000, 0));
        let o = f.outliers();
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(o[0].row, 9);
        assert_eq!(o[0].metric, OutlierMetric::PeriodP99);
        assert!((o[0].median - 1.055).abs() < 1e-12);
        assert!((o[0].z - (1.4 - 1.055) / (1.4826 * 0.025)).abs() < 1e-9);
        assert_eq!(f.worst("running", 2), vec![9, 8]);

        // Ten identical rows: MAD is 0, the floor (0.01, 1 % of the
        // nominal period) applies, and nothing stands out.
        let mut same = Fleet::default();
        for _ in 0..10 {
            same.rows.push(row("running", 10_050_000, 0));
        }
        assert!(same.outliers().is_empty());
    }

    #[test]
    fn overruns_use_a_floor_of_one_per_thousand_and_small_phases_are_not_judged() {
        // Nine rows without overruns (median 0, MAD 0: spread = the floor
        // 1.0) and one with 5 per 1000: z = 5 > 3.5. One with 3 would not
        // be flagged (z = 3).
        let mut f = Fleet::default();
        for _ in 0..9 {
            f.rows.push(row("running", 10_000_000, 0));
        }
        f.rows.push(row("running", 10_000_000, 5));
        let o = f.outliers();
        assert_eq!(o.len(), 1);
        assert_eq!((o[0].row, o[0].metric), (9, OutlierMetric::OverrunsPer1000));
        assert!((o[0].z - 5.0).abs() < 1e-12);
        f.rows[9].overruns_per_1000 = Some(3.0);
        assert!(f.outliers().is_empty());

        // Seven rows of a phase (fewer than OUTLIER_MIN_ROWS): not judged.
        let mut small = Fleet::default();
        for k in 0..7 {
            small
                .rows
                .push(row("warmup", 10_000_000 + k * 10_000_000, 0));
        }
        assert!(small.outliers().is_empty());
    }

    #[test]
    fn late_answers_are_ranked_and_judged_per_thousand_with_a_floor_of_one() {
        // Nine input-paced rows at 2 late answers per 1,000 (median 2, MAD
        // 0: spread = the floor 1.0) and one at 8 per 1,000: z = 6 > 3.5.
        // The worst list ranks by the share, ties by the latency p99: the
        // 8-per-1,000 row, then row 4 (p99 3 ms against the others' 2 ms).
        let mut f = Fleet::default();
        for k in 0..10 {
            let mut r = row("running", 10_000_000, 0);
            r.input.late_share = Some(if k == 9 { 0.008 } else { 0.002 });
            r.input.answer_latency_p99_ns = Some(if k == 4 { 3_000_000 } else { 2_000_000 });
            f.rows.push(r);
        }
        let o = f.outliers();
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(
            (o[0].row, o[0].metric),
            (9, OutlierMetric::LateAnswersPer1000)
        );
        assert!((o[0].z - 6.0).abs() < 1e-9, "{}", o[0].z);
        assert_eq!(f.worst_by_late_share("running", 2), vec![9, 4]);
        // Rows without late answers are not listed.
        f.rows
            .iter_mut()
            .for_each(|r| r.input.late_share = Some(0.0));
        assert!(f.worst_by_late_share("running", 5).is_empty());
    }
}
