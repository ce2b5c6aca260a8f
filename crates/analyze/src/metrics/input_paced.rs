//! Input-paced phases: cycles released by an input's arrival (a robot's
//! state stream, a bus) rather than by a deadline of the loop's own. Per
//! phase: the arrival period and rate, the answer latency (command span
//! start − arrival) and late answers, inputs the source's counter says
//! were lost (before arrival, after a late answer, or discarded in a
//! burst), gaps and bursts, the socket wait of kernel arrivals, the
//! robot's own success rate, and a verdict in words (docs/input-paced.md,
//! docs/metrics.md, Input-paced phases). Submodules: `verdict` (the words)
//! and `series` (the per-cycle series `compare` tests).

use looptime_capture::quantile::nearest_rank;

use super::report::{
    Bursts, Dist, InputPacedReport, InputPhase, LostInputs, Pace, SocketWait, SuccessRate,
};
use super::table::{dist_of, r4};
use crate::evidence::{Cell, Evidence};

/// An arrival interval longer than this many periods is a gap.
pub const GAP_PERIODS: f64 = 1.5;
/// After a gap, arrivals closer than this many periods belong to a burst.
pub const BURST_PERIODS: f64 = 0.25;

/// The input-paced report of `ev` (absent when no cycle was released by
/// an input). `segment` is the cycle columns' segment per row.
pub fn input_paced(ev: &Evidence, segment: &[u32], pace: Pace) -> Option<InputPacedReport> {
    if !ev.cycles.iter().any(|c| c.input_paced) {
        return None;
    }
    let answers = answer_starts(ev);
    let phases = phase_rows(ev)
        .into_iter()
        .map(|(ph, rows)| phase_figures(ev, segment, pace, ph, &rows, &answers))
        .collect();
    Some(InputPacedReport { phases })
}

/// What a reader of the phase tables must know: an input-paced phase has
/// no sleep overshoot or deadline lag, and a phase that mixes kinds has a
/// period made of two kinds of wait.
pub fn caveats(r: &InputPacedReport) -> Vec<String> {
    let mut out = Vec::new();
    for p in &r.phases {
        if p.deadline_cycles > 0 {
            out.push(format!(
                "mixed pace: phase `{}` holds {} input-paced and {} deadline-paced cycles; its period and loop Hz mix two kinds of wait (record each kind in a phase of its own)",
                p.phase, p.cycles, p.deadline_cycles
            ));
        }
        out.push(format!(
            "input-paced: phase `{}` was released by its inputs' arrivals, not by a deadline of its own, so sleep overshoot and deadline lag are not reported for its {} input-paced cycles; answer latency is judged instead (docs/input-paced.md)",
            p.phase, p.cycles
        ));
    }
    out
}

/// A caveat per input-paced phase with no answer: the command stage used
/// (and where its name came from), the stages the phase has, and the flag.
pub fn command_caveats(ev: &Evidence, r: &InputPacedReport) -> Vec<String> {
    let silent: Vec<&InputPhase> = r
        .phases
        .iter()
        .filter(|p| p.unanswered == p.cycles)
        .collect();
    if silent.is_empty() {
        return Vec::new();
    }
    let (stage, from) = &ev.command_stage;
    let from = match *from {
        "flag" => "given by --command-stage",
        "header" => "declared by the recording",
        _ => "the default; the recording declares none",
    };
    let spans = ev.span_rows().unwrap_or_default();
    silent
        .iter()
        .map(|p| {
            let ph = ev.header.phases.iter().position(|n| *n == p.phase);
            let mut names: Vec<&str> = ev
                .cycles
                .iter()
                .filter(|c| Some(c.phase as usize) == ph && c.input_paced)
                .flat_map(|c| &spans[c.span_row as usize..(c.span_row + c.n_spans as u64) as usize])
                .filter_map(|s| ev.header.stages.get(s.stage as usize).map(|x| x.name.as_str()))
                .collect();
            names.sort_unstable();
            names.dedup();
            format!(
                "input-paced: phase `{}` has no span of the command stage `{stage}` ({from}) in its {} input-paced cycles, so no answer is timed and no verdict is given; its stages are {}: name the one that sends the command with --command-stage NAME, or declare it in the recorder",
                p.phase,
                p.cycles,
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            )
        })
        .collect()
}

/// The diagnosis of the judged phase `phase` when it is mostly released by
/// its inputs: the input-paced verdict replaces the sleep-to-deadline one.
pub fn diagnosis(r: Option<&InputPacedReport>, phase: Option<&str>) -> Option<String> {
    let p = r?
        .phases
        .iter()
        .find(|p| Some(p.phase.as_str()) == phase && p.cycles >= p.deadline_cycles)?;
    Some(format!(
        "{}: input-paced, {}: {}",
        p.phase, p.verdict, p.reason
    ))
}

/// `(row, answer latency)` of every input-paced cycle with a command span,
/// in file order: the per-cycle figure the answer-latency distribution,
/// plot and exports read.
pub fn answer_latencies(ev: &Evidence) -> Vec<(usize, i64)> {
    answer_starts(ev)
        .into_iter()
        .enumerate()
        .filter_map(|(row, a)| {
            let c = &ev.cycles[row];
            Some((row, a? - c.arrival_ns.filter(|_| c.input_paced)?))
        })
        .collect()
}

/// The start of each cycle's first command span, by row.
fn answer_starts(ev: &Evidence) -> Vec<Option<i64>> {
    let mut out = vec![None; ev.cycles.len()];
    for &(row, start) in &ev.commands {
        let slot = &mut out[row as usize];
        if slot.is_none_or(|s: i64| start < s) {
            *slot = Some(start);
        }
    }
    out
}

/// One phase's rows, as the figures walk them: `rows` are the phase's
/// input-paced rows in file order; `follows[i]` says whether `rows[i]`
/// directly follows `rows[i − 1]` in the same segment (so that an
/// interval or a counter step between them means something).
struct Walk<'a> {
    ev: &'a Evidence,
    rows: &'a [usize],
    follows: Vec<bool>,
    late: Vec<bool>,
}

impl<'a> Walk<'a> {
    fn new(ev: &'a Evidence, rows: &'a [usize], segment: &[u32]) -> Self {
        Walk {
            ev,
            rows,
            follows: (0..rows.len())
                .map(|i| {
                    i > 0 && rows[i] == rows[i - 1] + 1 && segment[rows[i]] == segment[rows[i - 1]]
                })
                .collect(),
            late: vec![false; rows.len()],
        }
    }
    fn arrival(&self, i: usize) -> i64 {
        self.ev.cycles[self.rows[i]].arrival_ns.unwrap_or(0)
    }
    fn interval(&self, i: usize) -> Option<i64> {
        self.follows[i].then(|| self.arrival(i) - self.arrival(i - 1))
    }
    fn seq(&self, i: usize) -> Option<u64> {
        self.ev.cycles[self.rows[i]].input_seq
    }
    /// Each answered row's latency (its command span's start − arrival),
    /// marking the late ones (over `budget`) in `late`.
    fn answer(&mut self, answers: &[Option<i64>], budget: Option<u64>) -> Vec<i64> {
        let mut out = Vec::new();
        for (i, &r) in self.rows.iter().enumerate() {
            if let Some(a) = answers[r] {
                let l = a - self.arrival(i);
                self.late[i] = budget.is_some_and(|b| l > b as i64);
                out.push(l);
            }
        }
        out
    }
    /// The counter's step from `rows[i − 1]` to `rows[i]`.
    fn step(&self, i: usize) -> Option<i128> {
        if !self.follows[i] {
            return None;
        }
        Some(self.seq(i)? as i128 - self.seq(i - 1)? as i128)
    }
}

/// Each phase with input-paced cycles and its input-paced rows, in file
/// order.
fn phase_rows(ev: &Evidence) -> Vec<(u32, Vec<usize>)> {
    (0..ev.header.phases.len() as u32)
        .filter_map(|ph| {
            let rows: Vec<usize> = (0..ev.cycles.len())
                .filter(|&r| ev.cycles[r].phase == ph && ev.cycles[r].input_paced)
                .collect();
            (!rows.is_empty()).then_some((ph, rows))
        })
        .collect()
}

/// What a phase's figures and its series both start from: the walk, the
/// arrival-period distribution, the period P and where it came from, and
/// the answer budget and where it came from.
type Start<'a> = (
    Walk<'a>,
    Option<Dist>,
    (Option<u64>, &'static str),
    (Option<u64>, &'static str),
);

fn start<'a>(ev: &'a Evidence, rows: &'a [usize], segment: &[u32], pace: Pace) -> Start<'a> {
    let w = Walk::new(ev, rows, segment);
    let mut intervals: Vec<i64> = (1..rows.len()).filter_map(|i| w.interval(i)).collect();
    let arrival_period = dist_of(&mut intervals);
    let (period_ns, period_from) = period(pace, arrival_period.as_ref());
    let budget = match ev.answer_budget_ns {
        Some(b) => (Some(b), "flag"),
        None => (period_ns, "period"),
    };
    (w, arrival_period, (period_ns, period_from), budget)
}

fn phase_figures(
    ev: &Evidence,
    segment: &[u32],
    pace: Pace,
    ph: u32,
    rows: &[usize],
    answers: &[Option<i64>],
) -> InputPhase {
    let (mut w, arrival_period, (period_ns, period_from), (budget_ns, budget_from)) =
        start(ev, rows, segment, pace);
    let mut latencies = w.answer(answers, budget_ns);
    let answered = latencies.len() as u64;
    let late_answers = w.late.iter().filter(|&&l| l).count() as u64;
    let arrival_hz = arrival_hz(&w);
    let (bursts, in_burst, gaps) = match period_ns {
        Some(p) => bursts(&w, p as f64),
        None => (Bursts::default(), vec![false; rows.len()], Gaps::default()),
    };
    let lost = lost(&w, &in_burst);
    let success_rate = success_rate(ev, rows);
    let deadline_cycles = ev
        .cycles
        .iter()
        .filter(|c| c.phase == ph && !c.input_paced)
        .count() as u64;
    let socket_wait = socket_wait(ev, rows);
    // Every arrival the kernel's: the socket's queue is in the latencies.
    let kernel = socket_wait
        .as_ref()
        .is_some_and(|s| s.stamped == rows.len() as u64);
    let (verdict, reason) = phase_verdict(
        ev,
        late_answers,
        answered,
        budget_ns,
        &lost,
        gaps,
        &bursts,
        success_rate.as_ref(),
        kernel,
    );
    InputPhase {
        phase: ev
            .header
            .phases
            .get(ph as usize)
            .cloned()
            .unwrap_or_default(),
        cycles: rows.len() as u64,
        deadline_cycles,
        period_ns,
        period_from: period_from.into(),
        arrival_rate_error_pct: rate_error(arrival_hz, period_ns),
        arrival_period,
        arrival_hz,
        budget_ns,
        budget_from: budget_from.into(),
        answer_latency: dist_of(&mut latencies),
        unanswered: rows.len() as u64 - answered,
        socket_wait,
        late_answers,
        late_share: (answered > 0).then(|| r4(late_answers as f64 / answered as f64)),
        lost,
        gaps: gaps.count,
        gaps_after_late_answer: gaps.after_late_answer,
        bursts,
        success_rate,
        verdict: verdict.into(),
        reason,
    }
}

/// The phase's socket wait (absent when no row has a read time): per row
/// with one, `read − arrival`; a read earlier than its arrival by more
/// than the row's bound is a clock step, counted and left out.
fn socket_wait(ev: &Evidence, rows: &[usize]) -> Option<SocketWait> {
    let (mut waits, mut steps, mut stamped, mut bound_max) = (Vec::new(), 0u64, 0u64, None);
    for &r in rows {
        let c = &ev.cycles[r];
        let (Some(read), Some(arrival)) = (c.read_ns, c.arrival_ns) else {
            continue;
        };
        stamped += 1;
        let bound = c.arrival_bound_ns.unwrap_or(0);
        bound_max = bound_max.max(c.arrival_bound_ns);
        let wait = read - arrival;
        if wait < -bound {
            steps += 1;
        } else {
            waits.push(wait);
        }
    }
    (stamped > 0).then(|| SocketWait {
        stamped,
        wait: dist_of(&mut waits),
        bound_max_ns: bound_max,
        clock_steps: steps,
    })
}

/// The period P of an input-paced phase and where it came from: the
/// effective nominal period, else the median arrival period.
fn period(pace: Pace, arrival_period: Option<&Dist>) -> (Option<u64>, &'static str) {
    match (pace, arrival_period) {
        (Pace::Paced { effective_ns, .. }, _) => (Some(effective_ns), "nominal"),
        (_, Some(d)) if d.p50_ns > 0 => (Some(d.p50_ns as u64), "arrivals"),
        _ => (None, "nominal"),
    }
}

/// `(hz − 1e9/P) / (1e9/P)` in %, rounded to 10⁻⁴.
fn rate_error(hz: Option<f64>, period_ns: Option<u64>) -> Option<f64> {
    let want = 1e9 / period_ns? as f64;
    Some(r4((hz? - want) / want * 100.0))
}

/// Σ(arrivals − 1) / Σ(last − first arrival) over runs of successive rows.
fn arrival_hz(w: &Walk) -> Option<f64> {
    let (mut n, mut span) = (0u64, 0i64);
    for i in 1..w.rows.len() {
        if let Some(d) = w.interval(i) {
            n += 1;
            span += d;
        }
    }
    (n > 0 && span > 0).then(|| r4(n as f64 * 1e9 / span as f64))
}

/// Gaps in the arrivals: all of them, and those whose cycle before the gap
/// answered late (the loop's own stall held the next arrival back, so the
/// gap is not the link's evidence).
#[derive(Clone, Copy, Debug, Default)]
struct Gaps {
    count: u64,
    after_late_answer: u64,
}

impl Gaps {
    /// The gaps that followed an on-time answer (or no answer): the link's.
    fn links(self) -> u64 {
        self.count - self.after_late_answer
    }
}

/// Gaps (intervals over 1.5 P) and the bursts after them (the arrival
/// that ends the gap and the following ones closer than P/4, when there
/// are at least two); which rows are in a burst.
fn bursts(w: &Walk, p: f64) -> (Bursts, Vec<bool>, Gaps) {
    let mut b = Bursts::default();
    let mut in_burst = vec![false; w.rows.len()];
    let mut gaps = Gaps::default();
    let mut i = 1;
    while i < w.rows.len() {
        let Some(d) = w.interval(i) else {
            i += 1;
            continue;
        };
        if (d as f64) <= GAP_PERIODS * p {
            i += 1;
            continue;
        }
        gaps.count += 1;
        gaps.after_late_answer += w.late[i - 1] as u64;
        let mut end = i + 1;
        while end < w.rows.len()
            && w.interval(end)
                .is_some_and(|d| (d as f64) < BURST_PERIODS * p)
        {
            end += 1;
        }
        let members = (end - i) as u64;
        if members >= 2 {
            let advance = match (w.seq(end - 1), w.seq(i - 1)) {
                (Some(last), Some(before)) if last > before => last - before,
                _ => members,
            };
            b.count += 1;
            b.after_late_answer += w.late[i - 1] as u64;
            b.arrivals += members;
            b.states += advance.max(members);
            b.states_max = b.states_max.max(advance.max(members));
            in_burst[i..end].iter_mut().for_each(|x| *x = true);
        }
        i = end;
    }
    b.discarded = b.states - b.arrivals;
    (b, in_burst, gaps)
}

/// The counter's figures over successive counted rows (absent when no row
/// carries a counter).
fn lost(w: &Walk, in_burst: &[bool]) -> Option<LostInputs> {
    if !w.rows.iter().any(|&r| w.ev.cycles[r].input_seq.is_some()) {
        return None;
    }
    let mut l = LostInputs {
        compared: 0,
        total: 0,
        before_arrival: 0,
        after_late_answer: 0,
        discarded_in_bursts: 0,
        repeated: 0,
        resets: 0,
    };
    for step in lost_rows(w, in_burst) {
        match step {
            Step::Unknown => continue,
            Step::Reset => l.resets += 1,
            Step::Repeated => l.repeated += 1,
            Step::Lost([before, after, discarded]) => {
                l.total += before + after + discarded;
                l.before_arrival += before;
                l.after_late_answer += after;
                l.discarded_in_bursts += discarded;
            }
        }
        l.compared += 1;
    }
    Some(l)
}

/// What one row's counter step says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// No successive counted row before it: not compared.
    Unknown,
    /// The counter went back.
    Reset,
    /// The counter repeated.
    Repeated,
    /// The inputs lost before this row, by cause: before arrival, after a
    /// late answer, discarded in a burst (all 0 for a step of one).
    Lost([u64; 3]),
}

/// Each row's counter step, its lost inputs put down to one cause: after
/// a late answer when the row before answered late, else discarded when
/// the row is in a burst, else before arrival.
fn lost_rows(w: &Walk, in_burst: &[bool]) -> Vec<Step> {
    (0..w.rows.len())
        .map(|i| match (i, w.step(i)) {
            (0, _) | (_, None) => Step::Unknown,
            (_, Some(s)) if s < 0 => Step::Reset,
            (_, Some(0)) => Step::Repeated,
            (_, Some(s)) => {
                let gap = (s - 1) as u64;
                Step::Lost(if w.late[i - 1] {
                    [0, gap, 0]
                } else if in_burst[i] {
                    [0, 0, gap]
                } else {
                    [gap, 0, 0]
                })
            }
        })
        .collect()
}

/// The success rates the phase's `rows` set, in file order, the first row
/// left out (the robot has rated no command of ours before it).
fn success_values(ev: &Evidence, rows: &[usize]) -> Vec<f64> {
    let Some(col) = success_value(ev) else {
        return Vec::new();
    };
    let nv = ev.header.values.len();
    rows[1..]
        .iter()
        .filter_map(|&r| match ev.values[r * nv + col] {
            Cell::Int(i) => Some(i as f64),
            Cell::Float(f) => Some(f),
            Cell::Unset => None,
        })
        .collect()
}

/// The value the robot's success rate is recorded as: `success_rate`, or
/// FCI's `control_command_success_rate`, or the first value whose name
/// ends in `_success_rate`.
fn success_value(ev: &Evidence) -> Option<usize> {
    let v = &ev.header.values;
    let named = |n: &str| v.iter().position(|x| x.name == n);
    named("success_rate")
        .or_else(|| named("control_command_success_rate"))
        .or_else(|| v.iter().position(|x| x.name.ends_with("_success_rate")))
}

/// The success rate over the phase's input-paced cycles that set it, the
/// first left out (the robot has rated no command of ours before it).
fn success_rate(ev: &Evidence, rows: &[usize]) -> Option<SuccessRate> {
    let col = success_value(ev)?;
    let mut v = success_values(ev, rows);
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let at = |q: f64| nearest_rank(&v, q).unwrap_or(f64::NAN);
    Some(SuccessRate {
        value: ev.header.values[col].name.clone(),
        count: n as u64,
        mean: r4(v.iter().sum::<f64>() / n as f64),
        min: v[0],
        p1: at(0.01),
        p10: at(0.1),
        p50: at(0.5),
        below_one: v.iter().filter(|&&x| x < 1.0).count() as u64,
    })
}

mod series;
mod verdict;
pub use series::{phase_series, PhaseSeries};
use verdict::phase_verdict;
