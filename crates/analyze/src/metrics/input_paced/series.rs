//! The per-cycle series `compare` tests an input-paced phase on: the same
//! walk as the report's figures (its answers, its counter's steps, its
//! bursts), kept per cycle in file order instead of summed.

use super::*;

/// Per-cycle series of one input-paced phase, for `compare`'s tests (in
/// file order, as the block bootstrap needs): each answer's latency and
/// whether it was late (0 or 1000), per arrival the inputs lost before it
/// by cause and whether a burst begins there (× 1000), and per cycle that
/// set it the robot's success shortfall, `(1 − rate) × 1000` (the phase's
/// first left out, as [`SuccessRate`]).
#[derive(Clone, Debug, Default)]
pub struct PhaseSeries {
    /// The phase.
    pub phase: u32,
    /// The answer budget a late answer is judged against (ns).
    pub budget_ns: Option<u64>,
    /// Answer latencies (ns).
    pub latency: Vec<i64>,
    /// Per answer: 1000 when late, else 0.
    pub late: Vec<i64>,
    /// Per compared arrival, 1000 × the inputs lost before it, by cause
    /// (before arrival, after a late answer, discarded in a burst).
    pub lost: [Vec<i64>; 3],
    /// Per arrival: 1000 where a burst begins, else 0 (absent without a
    /// period).
    pub bursts: Vec<i64>,
    /// Per cycle that set the success rate: (1 − rate) × 1000, rounded.
    pub shortfall: Vec<i64>,
}

/// The series of every input-paced phase of `ev` (none without input-paced
/// cycles).
pub fn phase_series(ev: &Evidence, segment: &[u32], pace: Pace) -> Vec<PhaseSeries> {
    if !ev.cycles.iter().any(|c| c.input_paced) {
        return Vec::new();
    }
    let answers = answer_starts(ev);
    phase_rows(ev)
        .into_iter()
        .map(|(ph, rows)| series_of(ev, segment, pace, ph, &rows, &answers))
        .collect()
}

fn series_of(
    ev: &Evidence,
    segment: &[u32],
    pace: Pace,
    ph: u32,
    rows: &[usize],
    answers: &[Option<i64>],
) -> PhaseSeries {
    let (mut w, _, (period_ns, _), (budget_ns, _)) = start(ev, rows, segment, pace);
    let latency = w.answer(answers, budget_ns);
    let late = (0..rows.len())
        .filter(|&i| answers[rows[i]].is_some())
        .map(|i| if w.late[i] { 1000 } else { 0 })
        .collect();
    let (in_burst, starts) = match period_ns {
        Some(p) => {
            let (_, in_burst, _) = bursts(&w, p as f64);
            // A burst begins at the arrival that ends its gap: the one
            // member whose interval is a gap (the others' are under P/4).
            let starts = (0..rows.len())
                .map(|i| {
                    let gap = w
                        .interval(i)
                        .is_some_and(|d| d as f64 > GAP_PERIODS * p as f64);
                    if in_burst[i] && gap {
                        1000
                    } else {
                        0
                    }
                })
                .collect();
            (in_burst, starts)
        }
        None => (vec![false; rows.len()], Vec::new()),
    };
    let mut lost: [Vec<i64>; 3] = Default::default();
    if rows.iter().any(|&r| ev.cycles[r].input_seq.is_some()) {
        for step in lost_rows(&w, &in_burst) {
            if let Step::Lost(by) = step {
                for (k, n) in by.iter().enumerate() {
                    lost[k].push(*n as i64 * 1000);
                }
            } else if step != Step::Unknown {
                for l in &mut lost {
                    l.push(0);
                }
            }
        }
    }
    let shortfall = success_values(ev, rows)
        .into_iter()
        .map(|v| ((1.0 - v) * 1000.0).round() as i64)
        .collect();
    PhaseSeries {
        phase: ph,
        budget_ns,
        latency,
        late,
        lost,
        bursts: starts,
        shortfall,
    }
}
