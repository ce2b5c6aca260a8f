//! Callbacks by name: a background thread whose top-level spans carry a
//! `name` attribute (`looptime.ros`'s executor threads, each callback a
//! span with its `kind` and `name`) gets, per phase and name, its calls,
//! the period between successive calls' starts, and, for a callback whose
//! period the control thread's header declares
//! (`metadata["period_ns.NAME"]`, a ROS timer's), the periods it skipped:
//! ros2_control's per-controller periodicity, as distributions
//! (docs/metrics.md, Threads; docs/ros2.md).

use std::collections::BTreeMap;

use super::report::CallbackReport;
use super::table::dist_of;
use crate::error::Result;
use crate::evidence::Evidence;

/// The attribute that names a callback.
pub const NAME_ATTR: &str = "name";
/// The name `looptime.ros` records a callback created after `instrument` under.
pub const LATE_NAME: &str = "other";

/// One named callback's kind and its calls' starts, in file order.
type Calls<'a> = (Option<&'a str>, Vec<i64>);

/// The callbacks of thread `t` by phase and name (empty when its spans
/// carry no `name`); `control` holds the declared periods.
///
/// # Errors
/// On an internal span-table failure.
pub fn callbacks(control: &Evidence, t: &Evidence) -> Result<Vec<CallbackReport>> {
    let named: BTreeMap<u64, (u32, &str, Option<&str>)> = t
        .groups
        .iter()
        .filter(|g| g.depth == 0)
        .filter_map(|g| {
            let name = g.attrs.get(NAME_ATTR)?;
            Some((
                g.key,
                (
                    g.phase,
                    name.as_str(),
                    g.attrs.get("kind").map(String::as_str),
                ),
            ))
        })
        .collect();
    if named.is_empty() {
        return Ok(Vec::new());
    }
    let key = t.spans.column("key")?.u64()?;
    let start = t.spans.column("start_ns")?.i64()?;
    let mut by: BTreeMap<(u32, &str), Calls> = BTreeMap::new();
    for (k, s) in key.into_no_null_iter().zip(start.into_no_null_iter()) {
        if let Some(&(phase, name, kind)) = named.get(&k) {
            by.entry((phase, name))
                .or_insert((kind, Vec::new()))
                .1
                .push(s);
        }
    }
    Ok(by
        .into_iter()
        .map(|((phase, name), (kind, starts))| {
            let mut periods: Vec<i64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
            let period_ns = control
                .header
                .metadata
                .get(&format!("period_ns.{name}"))
                .and_then(|p| p.parse::<u64>().ok())
                .filter(|&p| p > 0);
            let skipped = period_ns.map(|p| {
                periods
                    .iter()
                    .map(|&d| ((d as f64 / p as f64).round() as i64 - 1).max(0) as u64)
                    .sum()
            });
            CallbackReport {
                phase: t.phase_name(phase),
                name: name.to_string(),
                kind: kind.map(str::to_string),
                calls: starts.len() as u64,
                period: dist_of(&mut periods),
                period_ns,
                skipped,
            }
        })
        .collect())
}

/// A caveat per thread that recorded calls of callbacks created after
/// `instrument` (named [`LATE_NAME`]): their calls are pooled under it.
pub fn caveats(threads: &[super::report::ThreadReport]) -> Vec<String> {
    threads
        .iter()
        .filter_map(|t| {
            let n: u64 = t
                .callbacks
                .iter()
                .filter(|c| c.name == LATE_NAME)
                .map(|c| c.calls)
                .sum();
            (n > 0).then(|| {
                format!(
                    "thread `{}`: {n} calls of callbacks created after the node was instrumented are pooled under the name `{LATE_NAME}` (call looptime.ros.instrument after the node's timers, subscriptions and services exist)",
                    t.thread
                )
            })
        })
        .collect()
}
