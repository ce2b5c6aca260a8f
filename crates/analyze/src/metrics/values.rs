//! Caller values: count, min, mean, max, and lost states of `*_seq`
//! counters, in exact integers for `int` values.

use super::report::{Number, ValueReport};
use crate::evidence::{Cell, Evidence};

/// Every caller value's count, min, mean, max and (for `int` `*_seq`
/// counters) lost states, in header order. `segment` is
/// [`CycleColumns::segment`](super::columns::CycleColumns::segment).
pub fn value_reports(ev: &Evidence, segment: &[u32]) -> Vec<ValueReport> {
    let nv = ev.header.values.len();
    let n = ev.cycles.len();
    ev.header
        .values
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let cells = (0..n).map(|r| ev.values[r * nv + i]);
            let seq = info.name.ends_with("_seq") && info.kind == looptime_capture::ValueKind::Int;
            let (mut count, mut sum_i, mut sum_f) = (0u64, 0i128, 0f64);
            let (mut min, mut max): (Option<Number>, Option<Number>) = (None, None);
            let mut lost = 0u64;
            let mut before: Option<(u32, i64)> = None;
            for (r, c) in cells.enumerate() {
                match c {
                    Cell::Unset => {
                        before = None;
                        continue;
                    }
                    Cell::Int(v) => {
                        sum_i += v as i128;
                        min = Some(Number::Int(match min {
                            Some(Number::Int(m)) => m.min(v),
                            _ => v,
                        }));
                        max = Some(Number::Int(match max {
                            Some(Number::Int(m)) => m.max(v),
                            _ => v,
                        }));
                        if let Some((sg, b)) = before.filter(|(sg, _)| *sg == segment[r]) {
                            let _ = sg;
                            let gap = (v as i128 - b as i128 - 1).max(0);
                            lost = lost.saturating_add(u64::try_from(gap).unwrap_or(u64::MAX));
                        }
                        before = Some((segment[r], v));
                    }
                    Cell::Float(v) => {
                        sum_f += v;
                        min = Some(Number::Float(match min {
                            Some(Number::Float(m)) => m.min(v),
                            _ => v,
                        }));
                        max = Some(Number::Float(match max {
                            Some(Number::Float(m)) => m.max(v),
                            _ => v,
                        }));
                    }
                }
                count += 1;
            }
            let mean = (count > 0).then(|| {
                let total = sum_i as f64 + sum_f;
                ((total / count as f64) * 1e6).round() / 1e6
            });
            ValueReport {
                name: info.name.clone(),
                unit: info.unit.clone(),
                count,
                min,
                mean,
                max,
                lost: seq.then_some(lost),
            }
        })
        .collect()
}
