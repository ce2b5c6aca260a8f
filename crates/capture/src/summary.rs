//! The capture summary, built in one streaming pass over the cycle records
//! while they are written.
//!
//! Distributions use HDR histograms with three significant figures; means,
//! minima and maxima are exact. Percentiles are nearest-rank: the p-th
//! percentile is the value at 1-based rank ⌈p·N⌉ of the sorted values, read
//! from the histogram (so it is exact to 0.1 %). The analyzer recomputes
//! every figure exactly from the JSONL and flags any summary figure that
//! differs by more than that precision.

use std::collections::HashMap;

use hdrhistogram::Histogram;

use crate::format::{
    CaptureInfo, CaptureStatus, ClockTable, CycleRecord, Distribution, Header, SegmentSummary,
    StageSummary, Summary, SCHEMA_VERSION,
};

/// Accumulates a [`Distribution`] of signed nanosecond values.
#[derive(Debug)]
pub struct DistributionBuilder {
    hist: Histogram<u64>,
    count: u64,
    negative: u64,
    sum: i128,
    min: u64,
    max: u64,
}

impl Default for DistributionBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl DistributionBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            // Three significant figures, auto-resizing: any u64 fits.
            hist: Histogram::new(3).unwrap_or_else(|_| unreachable!("3 sigfigs is valid")),
            count: 0,
            negative: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Record one value; negative values count in `negative_count` and are
    /// recorded as 0.
    pub fn record(&mut self, v: i64) {
        let v = if v < 0 {
            self.negative += 1;
            0
        } else {
            v as u64
        };
        // Auto-resize means this cannot fail for a u64.
        let _ = self.hist.record(v);
        self.count += 1;
        self.sum += v as i128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// The distribution, or `None` when nothing was recorded.
    pub fn build(&self) -> Option<Distribution> {
        if self.count == 0 {
            return None;
        }
        let q = |p: f64| self.hist.value_at_quantile(p).clamp(self.min, self.max);
        Some(Distribution {
            count: self.count,
            negative_count: self.negative,
            mean_ns: self.sum as f64 / self.count as f64,
            min_ns: self.min,
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: self.max,
        })
    }
}

#[derive(Debug)]
struct OpenSegment {
    phase: String,
    first_cycle: u64,
    last_cycle: u64,
    cycles: u64,
    first_start: u64,
    last_start: u64,
    period: DistributionBuilder,
    overdue: u64,
    skipped: u64,
}

impl OpenSegment {
    fn close(self) -> SegmentSummary {
        let span = self.last_start.saturating_sub(self.first_start);
        SegmentSummary {
            phase: self.phase,
            first_cycle: self.first_cycle,
            last_cycle: self.last_cycle,
            cycles: self.cycles,
            loop_hz: (self.cycles >= 2 && span > 0)
                .then(|| (self.cycles - 1) as f64 * 1e9 / span as f64),
            period: self.period.build(),
            overdue: self.overdue,
            skipped: self.skipped,
        }
    }
}

/// Streams cycle records into a [`Summary`].
#[derive(Debug)]
pub struct SummaryBuilder {
    clocks: ClockTable,
    schedule_comparable: bool,
    stage_index: HashMap<String, usize>,
    stage_names: Vec<String>,
    stage_wall: Vec<DistributionBuilder>,
    stage_cpu: Vec<DistributionBuilder>,
    work: DistributionBuilder,
    overshoot: DistributionBuilder,
    lag: DistributionBuilder,
    segments: Vec<SegmentSummary>,
    open: Option<OpenSegment>,
    retained: u64,
    spans_dropped_retained: u64,
    first: Option<(u64, u64)>,
    last: Option<(u64, u64)>,
}

impl SummaryBuilder {
    /// A builder for the file with `header`.
    pub fn new(header: &Header) -> Self {
        let n = header.stages.len();
        let c = &header.clocks;
        Self {
            schedule_comparable: c.target_ns.comparable_with(c.wake_ns)
                && c.target_ns.comparable_with(c.start_ns),
            clocks: c.clone(),
            stage_index: header
                .stages
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.clone(), i))
                .collect(),
            stage_names: header.stages.iter().map(|s| s.name.clone()).collect(),
            stage_wall: (0..n).map(|_| DistributionBuilder::new()).collect(),
            stage_cpu: (0..n).map(|_| DistributionBuilder::new()).collect(),
            work: DistributionBuilder::new(),
            overshoot: DistributionBuilder::new(),
            lag: DistributionBuilder::new(),
            segments: Vec::new(),
            open: None,
            retained: 0,
            spans_dropped_retained: 0,
            first: None,
            last: None,
        }
    }

    /// Add the next cycle (records must come in file order).
    pub fn push(&mut self, c: &CycleRecord) {
        self.retained += 1;
        self.spans_dropped_retained += c.spans_dropped as u64;
        if self.first.is_none() {
            self.first = Some((c.cycle, c.start_ns));
        }
        self.last = Some((c.cycle, c.start_ns));

        let continues = self
            .open
            .as_ref()
            .is_some_and(|s| s.phase == c.phase && s.last_cycle + 1 == c.cycle);
        if continues {
            if let Some(s) = self.open.as_mut() {
                s.period.record(c.start_ns as i64 - s.last_start as i64);
                s.last_cycle = c.cycle;
                s.last_start = c.start_ns;
                s.cycles += 1;
                s.overdue += c.overdue as u64;
                s.skipped += c.skipped as u64;
            }
        } else {
            if let Some(s) = self.open.take() {
                self.segments.push(s.close());
            }
            self.open = Some(OpenSegment {
                phase: c.phase.clone(),
                first_cycle: c.cycle,
                last_cycle: c.cycle,
                cycles: 1,
                first_start: c.start_ns,
                last_start: c.start_ns,
                period: DistributionBuilder::new(),
                overdue: c.overdue as u64,
                skipped: c.skipped as u64,
            });
        }

        if let Some(end) = c.end_ns {
            self.work.record(end as i64 - c.start_ns as i64);
        }
        if self.schedule_comparable {
            if let Some(target) = c.target_ns {
                self.lag.record(c.start_ns as i64 - target as i64);
                if let (Some(wake), false) = (c.wake_ns, c.overdue) {
                    self.overshoot.record(wake as i64 - target as i64);
                }
            }
        }
        for s in &c.spans {
            if let Some(&i) = self.stage_index.get(&s.stage) {
                self.stage_wall[i].record(s.wall_ns as i64);
                if let Some(cpu) = s.cpu_ns {
                    self.stage_cpu[i].record(cpu as i64);
                }
            }
        }
    }

    /// Finish the summary.
    pub fn finish(
        mut self,
        header: &Header,
        status: CaptureStatus,
        total_cycles: u64,
        spans_dropped: u64,
        spans_outside_cycle: u64,
    ) -> Summary {
        if let Some(s) = self.open.take() {
            self.segments.push(s.close());
        }
        let reason = (!self.schedule_comparable).then(|| {
            format!(
                "target_ns is on the {} clock and wake_ns/start_ns on the {} clock; they cannot be subtracted",
                self.clocks.target_ns.as_str(),
                self.clocks.wake_ns.as_str()
            )
        });
        let stages = self
            .stage_names
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                let wall = self.stage_wall[i].build()?;
                Some(StageSummary {
                    stage: name.clone(),
                    count: wall.count,
                    wall,
                    cpu: self.stage_cpu[i].build(),
                })
            })
            .collect();
        Summary {
            schema_version: SCHEMA_VERSION,
            producer: header.producer.clone(),
            status,
            capture: CaptureInfo {
                capacity_cycles: header.capacity.max_cycles,
                total_cycles,
                retained_cycles: self.retained,
                dropped_cycles: total_cycles.saturating_sub(self.retained),
                spans_dropped,
                spans_dropped_retained: self.spans_dropped_retained,
                spans_outside_cycle,
                values_dropped: None,
                first_cycle: self.first.map(|f| f.0),
                last_cycle: self.last.map(|l| l.0),
                first_start_ns: self.first.map(|f| f.1),
                last_start_ns: self.last.map(|l| l.1),
            },
            segments: self.segments,
            work: self.work.build(),
            sleep_overshoot: self.overshoot.build(),
            deadline_lag: self.lag.build(),
            schedule_metrics_absent_reason: reason,
            stages,
            overhead: header.overhead.clone(),
            recovery: None,
            threads: Vec::new(),
        }
    }
}
