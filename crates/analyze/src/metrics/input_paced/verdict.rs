//! An input-paced phase's verdict in words: none on zero answers; the
//! loop's and the link's figures, split by what preceded each; and, when
//! the robot's own success rate disagrees with the loop's count, what the
//! evidence cannot separate (docs/metrics.md, Input-paced phases).

use super::*;

/// The phase's verdict and its reason: none on zero answers, else the
/// loop's and the link's figures, unless the robot's count disagrees.
#[allow(clippy::too_many_arguments)]
pub(super) fn phase_verdict(
    ev: &Evidence,
    late_answers: u64,
    answered: u64,
    budget_ns: Option<u64>,
    lost: &Option<LostInputs>,
    gaps: Gaps,
    bursts: &Bursts,
    success_rate: Option<&SuccessRate>,
    kernel: bool,
) -> (&'static str, String) {
    if answered == 0 {
        // No span of the command stage: no answer to time, so no verdict on
        // the loop or the link built on zero answers.
        (
            "no answers",
            format!(
                "no cycle of the phase has a span of the command stage `{}`, so no answer was timed and neither the loop nor the link is judged",
                ev.command_stage.0
            ),
        )
    } else {
        let v = verdict(
            late_answers,
            answered,
            budget_ns,
            lost.as_ref(),
            gaps,
            bursts,
        );
        robot_disagrees(v, late_answers, answered, success_rate, kernel)
    }
}

/// When the loop's count finds no late answer but the robot's own success
/// rate counted answers late or missing, the verdict says so instead of
/// blaming the link alone or calling the phase on rate: the evidence
/// cannot separate a state that waited in the socket before the loop read
/// it (the arrival is when the receive returned) from an answer lost or
/// late on its way back.
fn robot_disagrees(
    v: (&'static str, String),
    late: u64,
    answered: u64,
    success: Option<&SuccessRate>,
    kernel: bool,
) -> (&'static str, String) {
    let Some(s) = success.filter(|s| late == 0 && s.below_one > 0) else {
        return v;
    };
    let robot = format!(
        "but the robot's {} fell below 1 in {} of {} cycles (min {:.4}): answers were late or missing by the robot's count",
        s.value, s.below_one, s.count, s.min
    );
    if kernel {
        // The socket's queue is in every latency: what is left is before
        // the kernel's stamp, or after the answer left.
        return (
            "the link or the host's receive path",
            format!(
                "0 of {answered} answers late by the loop's count (from each arrival as the kernel stamped it, the socket's wait included), {robot}; the evidence cannot separate a state held before the kernel stamped it (on the wire, in the NIC's or the driver's queue) from an answer lost or late on its way back ({})",
                v.1
            ),
        );
    }
    (
        "the link or the loop's socket queue",
        format!(
            "0 of {answered} answers late by the loop's count (from each arrival as its receive returned), {robot}; the evidence cannot separate a state that waited in the socket before the loop read it from an answer lost or late on its way back ({})",
            v.1
        ),
    )
}

/// The verdict in words: `the loop` when an answer was late; `the link`
/// when, after an on-time answer, inputs were lost before arrival or
/// discarded in a burst, or the arrivals had a gap (a gap or a burst that
/// follows a late answer is the loop's own: it held the next arrival
/// back); both when both; else `on rate`.
fn verdict(
    late: u64,
    answered: u64,
    budget: Option<u64>,
    lost: Option<&LostInputs>,
    gaps: Gaps,
    bursts: &Bursts,
) -> (&'static str, String) {
    let link_lost = lost.map_or(0, |l| l.before_arrival + l.discarded_in_bursts);
    let link = gaps.links() > 0 || link_lost > 0;
    let ms = |ns: u64| format!("{:.3} ms", ns as f64 / 1e6);
    let loop_part = budget.map_or(String::new(), |b| {
        let after = lost.map_or(0, |l| l.after_late_answer);
        format!(
            "{late} of {answered} answers later than {} after their input ({after} inputs lost, {} gaps and {} bursts right after a late answer)",
            ms(b),
            gaps.after_late_answer,
            bursts.after_late_answer
        )
    });
    let link_part = format!(
        "{} gaps in the arrivals and {} bursts after an on-time answer, {link_lost} inputs lost before arrival or discarded in a burst",
        gaps.links(),
        bursts.count - bursts.after_late_answer
    );
    match (late > 0, link) {
        (false, false) => (
            "on rate",
            format!("every answer on time and no input lost or late: {link_part}"),
        ),
        (true, false) => ("the loop", loop_part),
        (false, true) => (
            "the link",
            format!("{link_part}, with every answer on time"),
        ),
        (true, true) => ("the loop and the link", format!("{loop_part}; {link_part}")),
    }
}
