//! Every metric of the report, computed once, from the evidence tables.
//! Definitions, units and exclusions are in `docs/metrics.md`; this module
//! is their only implementation. One file per family:
//!
//! * [`columns`]: the per-cycle columns (period, work, overshoot, lag) and
//!   command submissions every other family aggregates;
//! * [`rates`]: segments and phases (period, loop Hz, command Hz, overruns,
//!   skips, work, overshoot, lag distributions);
//! * [`stages`]: per stage, tree path and attributes;
//! * [`values`]: caller values;
//! * [`capture`]: state, capture counts and caveats;
//! * [`threads`]: background threads' own reports, and the overlap of the
//!   control stages with their work;
//! * [`diagnosis`]: pace, per-cycle attribution and the verdict;
//! * [`input_paced`]: phases released by an input's arrival (answer
//!   latency, lost inputs, gaps and bursts, the robot's success rate);
//! * [`summary`]: the first glance, one card per phase in a state (pass,
//!   warn, fail, not judged) by documented thresholds;
//! * [`report`]: the types, assembled into a [`Report`].
//!
//! Percentiles are nearest-rank (the value at 1-based rank ⌈p·N⌉ of the
//! sorted values, polars' `QuantileMethod::Equiprobable`; `table.rs` reads
//! them by selection), the same rank the capture summary's histograms use.
//! Nothing here reads the summary's figures: the cross-check, one layer
//! up, compares them.

pub mod budget;
pub mod callbacks;
pub mod capture;
pub mod columns;
pub mod data_age;
pub mod diagnosis;
pub mod input_paced;
pub mod rates;
pub mod report;
pub(crate) mod span_dists;
pub mod stages;
pub mod summary;
pub(crate) mod table;
pub mod threads;
pub mod values;

pub use columns::{
    command_columns, nominal_period, schedule_comparable, CommandColumns, CycleColumns,
};
pub use diagnosis::LATE_START_SHARE;
pub use report::*;

use crate::error::Result;
use crate::evidence::Evidence;

/// What the layers above need beside the report: the cross-check groups
/// the spans the way the summary does.
#[derive(Debug)]
pub struct Tables {
    /// The spans' distributions per stage, in stage order.
    pub(crate) stages_by_name: Vec<(u32, span_dists::SpanDist)>,
}

/// The aggregates: the phase, segment and stage reports, and the spans'
/// distributions per stage.
type Aggregates = (
    Vec<PhaseReport>,
    Vec<SegmentReport>,
    Vec<StageReport>,
    Vec<(u32, span_dists::SpanDist)>,
);

fn aggregates(ev: &Evidence, cc: &CycleColumns) -> Result<Aggregates> {
    use crate::profile::step;
    let h = &ev.header;
    let phase_name = |i: u64| h.phases.get(i as usize).cloned().unwrap_or_default();
    // The span table's gather runs on one thread for most of its time:
    // beside it, the phases and segments.
    let (dists, (phases, segments)) = rayon::join(
        || {
            let _s = step("metrics: span distributions (beside the phases)");
            span_dists::span_dists(&ev.spans)
        },
        || {
            let s = step("metrics: segments, phases and commands (row ranges)");
            let groups = rates::Groups::new(ev, cc);
            drop(s);
            let s = step("metrics: phases (each column gathered once)");
            let phases = rates::phase_reports(ev, cc, &groups, &phase_name);
            drop(s);
            let _s = step("metrics: segments (each column gathered once)");
            (phases, rates::segment_reports(ev, cc, &groups, &phase_name))
        },
    );
    let dists = dists?;
    let s = step("metrics: stages");
    let stages = stages::stage_reports(ev, &dists.by_key, &phases, nominal_period(h), &phase_name);
    drop(s);
    Ok((phases, segments, stages, dists.by_stage))
}

/// Every caveat of the report, in the order the report gives them: the
/// capture's and the files', then the input-paced, then data age's.
fn caveats(
    ev: &Evidence,
    (state, capture, absent): (EpisodeState, &CaptureReport, Option<&str>),
    input: Option<&InputPacedReport>,
    age: Option<&DataAgeReport>,
) -> Vec<String> {
    capture::caveats(ev, state, capture, absent)
        .into_iter()
        .chain(input.into_iter().flat_map(input_paced::caveats))
        .chain(
            input
                .into_iter()
                .flat_map(|r| input_paced::command_caveats(ev, r)),
        )
        .chain(age.into_iter().flat_map(data_age::caveats))
        .collect()
}

/// Compute every metric of `ev` from its cycle columns `cc` (and each
/// background thread's, `thread_cc`, in `ev.threads` order). The report's
/// `crosscheck` is left "not checked"; [`crate::analysis::Analysis::new`]
/// fills it in.
///
/// # Errors
/// Only on an internal aggregation failure.
pub fn compute(
    ev: &Evidence,
    cc: &CycleColumns,
    thread_cc: &[CycleColumns],
) -> Result<(Report, Tables)> {
    let h = &ev.header;
    use crate::profile::step;
    let (phases, segments, stages, stages_by_name) = aggregates(ev, cc)?;
    let s = step("metrics: diagnosis");
    let pace = diagnosis::pace(ev);
    let late_cycles = match diagnosis::judged_phase(ev) {
        Some(phase) => diagnosis::attribute_lateness(ev, cc, phase, pace)?,
        None => None,
    };
    drop(s);
    let s = step("metrics: threads and overlap");
    let threads =
        threads::thread_reports(ev, thread_cc, &|t, cc| compute(t, cc, &[]).map(|(r, _)| r))?;
    let overlap = threads::overlap(ev, &stages)?;
    drop(s);
    let state = capture::episode_state(ev);
    let capture = capture::capture_report(ev);
    let absent = capture::schedule_absent_reason(h);
    let thresholds = Thresholds::default();
    let age = data_age::data_age(ev);
    let input = input_paced::input_paced(ev, &cc.segment, pace);
    let budget = budget::budget(ev, cc, pace);
    let summary = summary::cards(
        &phases,
        pace,
        late_cycles.as_ref(),
        age.as_ref(),
        input.as_ref(),
        budget.as_ref(),
        &thresholds,
    );
    let report = Report {
        format: REPORT_FORMAT.to_string(),
        episode: ev.dir.display().to_string(),
        run: capture::run_identity(ev),
        state,
        summary,
        thresholds,
        caveats: caveats(
            ev,
            (state, &capture, absent.as_deref()),
            input.as_ref(),
            age.as_ref(),
        )
        .into_iter()
        .chain(callbacks::caveats(&threads))
        .collect(),
        capture,
        schedule_metrics_absent: absent,
        diagnosis: match input_paced::diagnosis(
            input.as_ref(),
            late_cycles.as_ref().map(|l| l.phase.as_str()),
        ) {
            Some(line) => vec![line],
            None => diagnosis::diagnose(&phases, pace, late_cycles.as_ref()),
        },
        phases,
        segments,
        stages,
        values: values::value_reports(ev, &cc.segment),
        threads,
        overlap,
        data_age: age,
        input_paced: input,
        budget,
        pace,
        late_cycles,
        crosscheck: CrossCheck {
            checked: 0,
            mismatches: Vec::new(),
            not_checked: Some("not cross-checked".into()),
        },
    };
    Ok((report, Tables { stages_by_name }))
}
