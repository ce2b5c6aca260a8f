//! Assembling one episode's report: the metrics, then the cross-check of
//! the saved summary against them. This is the layer above both; metrics
//! never call the cross-check.

use crate::error::Result;
use crate::evidence::Evidence;
use crate::metrics::{self, Report};

/// Compute the report of `ev`, cross-checked against its summary.
///
/// # Errors
/// Only on an internal aggregation failure.
pub fn analyze(ev: &Evidence) -> Result<Report> {
    let (mut report, tables) = metrics::compute(ev)?;
    let view = crate::crosscheck::summary_view(ev, &tables)?;
    report.crosscheck = crate::crosscheck::check(
        ev.summary.as_ref(),
        &report.capture,
        &report.segments,
        &view,
    );
    Ok(report)
}
