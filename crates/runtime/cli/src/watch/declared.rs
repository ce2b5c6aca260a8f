//! What `watch` adds below its phase table: the counts against a compute
//! budget and a deadline tolerance the ring's header declares
//! (docs/metrics.md, Budget and tolerance), and the socket wait of
//! input-paced phases with kernel arrivals (docs/input-paced.md).

use looptime_capture::CycleRecord;

use super::{ms, PhaseView, Snapshot};

/// What the header declares of a budget and a tolerance, as watch judges
/// it (docs/metrics.md, Budget and tolerance).
pub(super) struct Declared {
    pub(super) budget_ns: Option<u64>,
    /// The effective period and the tolerance, when completion misses can
    /// be judged: a tolerance, a nominal period, a real-time factor above
    /// 0 (the header's `rtf`, 1 when absent) and targets on host time.
    pub(super) next_release: Option<(u64, u64)>,
}

impl Declared {
    pub(super) fn of(h: &looptime_capture::Header, comparable: bool) -> Self {
        let rtf = h
            .metadata
            .get("rtf")
            .and_then(|r| r.parse::<f64>().ok())
            .unwrap_or(1.0);
        let effective = h
            .nominal_period_ns
            .filter(|&n| n > 0 && rtf.is_finite() && rtf > 0.0 && comparable)
            .map(|n| ((n as f64) / rtf).round().max(1.0) as u64);
        Declared {
            budget_ns: h.compute_budget_ns,
            next_release: h.deadline_tolerance_ns.zip(effective).map(|(t, p)| (p, t)),
        }
    }

    pub(super) fn count(&self, p: &mut PhaseView, c: &CycleRecord) {
        let work = c.end_ns.map(|e| e.saturating_sub(c.start_ns));
        if let (Some(b), Some(n), Some(w)) = (self.budget_ns, p.budget_overruns.as_mut(), work) {
            *n += (w > b) as u64;
        }
        if let (Some((period, tol)), Some(n)) = (self.next_release, p.completion_misses.as_mut()) {
            if let (true, Some(t), Some(e)) = (c.pace.is_deadline(), c.target_ns, c.end_ns) {
                *n += (e > t + period + tol) as u64;
            }
        }
    }
}

/// What the window counts against a declared budget and tolerance, per
/// phase: `budget 2.000 ms: running 3 overruns; tolerance 1.000 ms:
/// running 1 completion misses`, and for input-paced phases with kernel
/// arrivals their socket wait (`None` when there is none of these).
pub(crate) fn window_notes(s: &Snapshot) -> Option<String> {
    let per_phase = |get: fn(&PhaseView) -> Option<u64>, what: &str| {
        s.phases
            .iter()
            .filter_map(|p| get(p).map(|n| format!("{} {n} {what}", p.phase)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if let Some(b) = s.compute_budget_ns {
        parts.push(format!(
            "budget {} ms: {}",
            ms(b as i64),
            per_phase(|p| p.budget_overruns, "budget overruns")
        ));
    }
    if let Some(t) = s.deadline_tolerance_ns {
        let misses = per_phase(|p| p.completion_misses, "completion misses");
        parts.push(format!(
            "tolerance {} ms: {}",
            ms(t as i64),
            if misses.is_empty() {
                "no release points to judge".to_string()
            } else {
                misses
            }
        ));
    }
    let waits: Vec<String> = s
        .phases
        .iter()
        .filter_map(|p| {
            let w = p.socket_wait?;
            Some(format!(
                "{} socket wait p50 {} p99 {} max {} ms",
                p.phase,
                ms(w.p50_ns),
                ms(w.p99_ns),
                ms(w.max_ns)
            ))
        })
        .collect();
    if !waits.is_empty() {
        parts.push(waits.join(", "));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
