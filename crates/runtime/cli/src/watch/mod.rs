//! `looptime watch`: a running loop, live, from another process.
//!
//! The ring file is mapped read-only ([`RingReader`]): the watcher cannot
//! write to it, takes no lock the loop could wait on, and reads only the
//! newest `--window` cycles each refresh. Every figure is over that sliding
//! window, with the analyzer's own per-cycle definitions
//! (`looptime_capture::cycle`, docs/metrics.md): periods are adjacent cycle
//! starts within one segment, work is `end − start`, overshoot is
//! `wake − target` for a cycle that waited and was not overdue (only when
//! the schedule is on host time); percentiles are nearest-rank.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use looptime_capture::ring::{self, RingReader};
use looptime_capture::{cycle, CycleRecord};
use serde::Serialize;

/// p50, p99 and max of a set of nanosecond values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Values.
    pub count: u64,
    /// Nearest-rank median (ns).
    pub p50_ns: i64,
    /// Nearest-rank 99th percentile (ns).
    pub p99_ns: i64,
    /// Largest (ns).
    pub max_ns: i64,
}

impl Spread {
    /// Nearest-rank spread of `v` (sorted in place); `None` when empty.
    pub fn of(v: &mut [i64]) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let rank = |p: f64| v[looptime_capture::quantile::nearest_rank_index(v.len(), p)];
        Some(Spread {
            count: v.len() as u64,
            p50_ns: rank(0.50),
            p99_ns: rank(0.99),
            max_ns: v[v.len() - 1],
        })
    }
}

/// One phase over the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseView {
    /// Phase name.
    pub phase: String,
    /// Cycles of this phase in the window.
    pub cycles: u64,
    /// Periods (start-to-start within a segment) per second of the summed
    /// periods: `periods / Σ period`; absent with no period.
    pub loop_hz: Option<f64>,
    /// Start-to-start intervals within each segment of the phase.
    pub period: Option<Spread>,
    /// `end − start`.
    pub work: Option<Spread>,
    /// `wake − target`, when the schedule is on host time.
    pub overshoot: Option<Spread>,
    /// Cycles marked overdue.
    pub overruns: u64,
    /// Release points skipped.
    pub skipped: u64,
    /// Cycles whose work exceeded the declared compute budget (absent
    /// when the header declares none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_overruns: Option<u64>,
    /// Cycles that ended later than the next release point (their own plus
    /// the effective period, `nominal / rtf` of the header) plus the
    /// declared deadline tolerance (absent without one, uncapped or
    /// input-paced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_misses: Option<u64>,
    /// Input-paced cycles with a kernel arrival: how long their inputs
    /// waited in the socket (`read_ns − arrival_ns`; absent without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_wait: Option<Spread>,
}

/// One stage over the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageView {
    /// Stage name.
    pub stage: String,
    /// Spans.
    pub spans: u64,
    /// Wall time of its spans.
    pub wall: Option<Spread>,
}

/// What `watch` shows, and `watch --once --json` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Snapshot {
    /// The ring file.
    pub ring: String,
    /// Its writer's pid.
    pub pid: u32,
    /// Whether the writer still runs.
    pub writer_alive: bool,
    /// `recording`, `finishing` or `finished`.
    pub state: &'static str,
    /// Cycles begun since the recorder was built.
    pub total_cycles: u64,
    /// Complete cycles in the window.
    pub window_cycles: u64,
    /// The newest cycle's phase.
    pub current_phase: Option<String>,
    /// Per phase, in order of first appearance in the window.
    pub phases: Vec<PhaseView>,
    /// Per stage, in the header's order (stages with no span in the window
    /// are listed with 0).
    pub stages: Vec<StageView>,
    /// The newest periods (µs), oldest first, for the period chart.
    pub recent_periods_us: Vec<u64>,
    /// The header's nominal period (µs), which the chart marks.
    pub nominal_period_us: Option<u64>,
    /// The header's declared compute budget (ns), when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_budget_ns: Option<u64>,
    /// The header's declared deadline tolerance (ns), when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_tolerance_ns: Option<u64>,
    /// The process's background threads (their own rings), each with its
    /// stages over its newest `window` cycles.
    pub threads: Vec<ThreadView>,
}

/// One background thread over its window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadView {
    /// The thread's name.
    pub thread: String,
    /// Cycles (for a thread without cycles of its own, top-level spans) in
    /// the window.
    pub cycles: u64,
    /// Per stage, in its header's order.
    pub stages: Vec<StageView>,
}

/// The stages of `cycles` under `header`, in the header's order.
fn stage_views(header: &looptime_capture::Header, cycles: &[CycleRecord]) -> Vec<StageView> {
    let mut walls: Vec<Vec<i64>> = vec![Vec::new(); header.stages.len()];
    for c in cycles {
        for s in &c.spans {
            if let Some(i) = header.stages.iter().position(|st| st.name == s.stage) {
                walls[i].push(s.wall_ns as i64);
            }
        }
    }
    header
        .stages
        .iter()
        .zip(walls.iter_mut())
        .map(|(st, w)| StageView {
            stage: st.name.clone(),
            spans: w.len() as u64,
            wall: Spread::of(w),
        })
        .collect()
}

/// The background threads' rings of the process writing `control`: the
/// live rings in the same directory with the same pid and another thread
/// name, oldest first.
pub fn thread_rings(control: &RingReader) -> Vec<RingReader> {
    let dir = control
        .path()
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut out: Vec<(u64, RingReader)> = ring::list_rings(&dir)
        .into_iter()
        .filter_map(|p| RingReader::open(&p).ok())
        .filter(|r| {
            r.pid() == control.pid()
                && r.writer_alive()
                && r.thread_name().as_deref() != Some(looptime_capture::CONTROL_THREAD)
        })
        .map(|r| (r.created_unix_ns(), r))
        .collect();
    out.sort_by_key(|(t, _)| *t);
    out.into_iter().map(|(_, r)| r).collect()
}

/// The snapshot of `control`'s newest `window` cycles, with each of
/// `threads`' newest `window` cycles.
pub fn snapshot_with_threads(
    control: &RingReader,
    threads: &[RingReader],
    window: u64,
) -> Result<Snapshot> {
    let mut s = snapshot(control, window)?;
    for t in threads {
        // A thread whose ring went away (its rollout finished) is left out.
        let Ok(read) = t.read(Some(window)) else {
            continue;
        };
        s.threads.push(ThreadView {
            thread: read.header.thread_name().to_string(),
            cycles: read.cycles.len() as u64,
            stages: stage_views(&read.header, &read.cycles),
        });
    }
    Ok(s)
}

/// The period chart: the newest `width` periods as bars on a y-axis from
/// the smallest to the largest of them and the nominal period, `height`
/// rows, with the nominal period's row marked `┄` where no bar covers it.
/// Every bar is at least one eighth of a row, so the smallest shows.
pub fn period_chart(
    periods_us: &[u64],
    nominal_us: Option<u64>,
    width: usize,
    height: usize,
) -> Vec<String> {
    const PARTS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if width == 0 || height == 0 {
        return Vec::new();
    }
    let shown = &periods_us[periods_us.len().saturating_sub(width)..];
    let all = shown.iter().copied().chain(nominal_us);
    let lo = all.clone().min().unwrap_or(0);
    let hi = all.max().unwrap_or(0).max(lo + 1);
    let eighths = (height * 8) as f64;
    let bar =
        |v: u64| (1.0 + (v - lo) as f64 / (hi - lo) as f64 * (eighths - 1.0)).round() as usize;
    let nominal_row = nominal_us.map(|n| {
        let from_bottom =
            ((n - lo) as f64 / (hi - lo) as f64 * (height - 1) as f64).round() as usize;
        height - 1 - from_bottom
    });
    (0..height)
        .map(|row| {
            let floor = (height - 1 - row) * 8;
            shown
                .iter()
                .map(|&v| {
                    let h = bar(v);
                    if h >= floor + 8 {
                        '█'
                    } else if h > floor {
                        PARTS[h - floor]
                    } else if nominal_row == Some(row) {
                        '┄'
                    } else {
                        ' '
                    }
                })
                .collect()
        })
        .collect()
}

/// The chart's title: the y-axis range and the nominal period.
fn chart_title(s: &Snapshot) -> String {
    let shown = &s.recent_periods_us;
    let (lo, hi) = (
        shown
            .iter()
            .copied()
            .chain(s.nominal_period_us)
            .min()
            .unwrap_or(0),
        shown
            .iter()
            .copied()
            .chain(s.nominal_period_us)
            .max()
            .unwrap_or(0),
    );
    // In ms, as every table of the view.
    let ms = |us: u64| format!("{:.3}", us as f64 / 1e3);
    format!(
        "period, newest {} (ms; axis {} to {}{})",
        shown.len(),
        ms(lo),
        ms(hi),
        s.nominal_period_us
            .map(|n| format!(", nominal {} marked ┄", ms(n)))
            .unwrap_or_default()
    )
}

/// Period, work and overshoot samples of one phase.
type Samples = (Vec<i64>, Vec<i64>, Vec<i64>);

/// The view of `phase` in `phases`, added (empty) at its first cycle.
fn phase_of<'p>(
    phases: &'p mut Vec<PhaseView>,
    phase: &str,
    declared: &Declared,
) -> &'p mut PhaseView {
    let i = match phases.iter().position(|p| p.phase == phase) {
        Some(i) => i,
        None => {
            phases.push(PhaseView {
                phase: phase.to_string(),
                cycles: 0,
                loop_hz: None,
                period: None,
                work: None,
                overshoot: None,
                overruns: 0,
                skipped: 0,
                budget_overruns: declared.budget_ns.map(|_| 0),
                completion_misses: declared.next_release.map(|_| 0),
                socket_wait: None,
            });
            phases.len() - 1
        }
    };
    &mut phases[i]
}

/// The snapshot of the newest `window` cycles of `reader`'s ring.
pub fn snapshot(reader: &RingReader, window: u64) -> Result<Snapshot> {
    let read = reader.read(Some(window))?;
    let comparable = read.header.clocks.schedule_comparable();
    let declared = Declared::of(&read.header, comparable);
    let mut waits: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut phases: Vec<PhaseView> = Vec::new();
    let mut acc: BTreeMap<String, Samples> = BTreeMap::new();
    let mut recent = Vec::new();
    let mut prev: Option<&CycleRecord> = None;
    for c in &read.cycles {
        let p = phase_of(&mut phases, &c.phase, &declared);
        p.cycles += 1;
        p.overruns += c.overdue as u64;
        p.skipped += c.skipped as u64;
        declared.count(p, c);
        if let (Some(r), Some(a)) = (c.read_ns, c.arrival_ns) {
            waits
                .entry(c.phase.clone())
                .or_default()
                .push(r as i64 - a as i64);
        }
        let (period, work, over) = acc.entry(c.phase.clone()).or_default();
        // The analyzer's definitions (looptime_capture::cycle): a period only
        // between adjacent cycles of one segment, an overshoot only for a
        // cycle that waited and was not overdue.
        let f = cycle::figures(prev, c, comparable);
        if let Some(d) = f.period_ns {
            period.push(d);
            recent.push((d.max(0) / 1000) as u64);
        }
        work.extend(f.work_ns);
        over.extend(f.overshoot_ns);
        prev = Some(c);
    }
    for p in &mut phases {
        if let Some((period, work, over)) = acc.get_mut(&p.phase) {
            let sum: i64 = period.iter().sum();
            p.loop_hz = (sum > 0).then(|| period.len() as f64 * 1e9 / sum as f64);
            p.period = Spread::of(period);
            p.work = Spread::of(work);
            p.overshoot = Spread::of(over);
        }
        p.socket_wait = waits.get_mut(&p.phase).and_then(|w| Spread::of(w));
    }
    let stages = stage_views(&read.header, &read.cycles);
    let keep = recent.len().saturating_sub(400);
    Ok(Snapshot {
        ring: reader.path().display().to_string(),
        pid: reader.pid(),
        writer_alive: reader.writer_alive(),
        state: reader.state().as_str(),
        total_cycles: read.total_cycles,
        window_cycles: read.cycles.len() as u64,
        current_phase: read.cycles.last().map(|c| c.phase.clone()),
        phases,
        stages,
        recent_periods_us: recent.split_off(keep),
        nominal_period_us: read
            .header
            .nominal_period_ns
            .filter(|&n| n > 0)
            .map(|n| n / 1000),
        compute_budget_ns: read.header.compute_budget_ns,
        deadline_tolerance_ns: read.header.deadline_tolerance_ns,
        threads: Vec::new(),
    })
}

/// What `looptime watch` is asked for (the command line maps its flags
/// onto it, so this module does not depend on the CLI).
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// The ring of this process (its newest).
    pub pid: Option<u32>,
    /// The caller's runs directory: a ring recording into it is preferred.
    pub runs_dir: Option<PathBuf>,
    /// This ring file.
    pub ring: Option<PathBuf>,
    /// Where ring files are.
    pub ring_dir: PathBuf,
    /// Cycles in the sliding window.
    pub window: u64,
    /// Refresh interval in milliseconds (clamped to 50..=500).
    pub interval_ms: u64,
    /// Print one snapshot and exit.
    pub once: bool,
    /// With `once`: the snapshot as JSON.
    pub json: bool,
}

/// `looptime watch`.
///
/// # Errors
/// No ring to watch, a ring that cannot be read, or a terminal error.
pub fn run(args: &WatchOptions) -> Result<()> {
    if args.window == 0 {
        bail!("--window must be at least 1 cycle");
    }
    let picked = pick::pick_ring(args)?;
    for note in &picked.notes {
        eprintln!("{note}");
    }
    let path = picked.path;
    let reader = RingReader::open(&path)?;
    let threads = thread_rings(&reader);
    if args.once {
        let snap = snapshot_with_threads(&reader, &threads, args.window)?;
        let mut out = std::io::stdout();
        if args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&snap)?)?;
        } else {
            write!(out, "{}", render_text(&snap))?;
        }
        return Ok(());
    }
    tui::run(
        &reader,
        &threads,
        args.window,
        Duration::from_millis(args.interval_ms.clamp(50, 500)),
    )
    .context("the terminal view")?;
    Ok(())
}

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn spread_cells(s: Option<Spread>) -> [String; 3] {
    match s {
        Some(s) => [ms(s.p50_ns), ms(s.p99_ns), ms(s.max_ns)],
        None => ["-".into(), "-".into(), "-".into()],
    }
}

/// The header line of the view.
fn title(s: &Snapshot) -> String {
    format!(
        "looptime watch  {}  pid {} ({})  {}  {} cycles begun, window {} cycles{}",
        s.ring,
        s.pid,
        if s.writer_alive { "running" } else { "gone" },
        s.state,
        s.total_cycles,
        s.window_cycles,
        s.current_phase
            .as_deref()
            .map(|p| if s.state == "recording" && s.writer_alive {
                format!(", now in {p}")
            } else {
                format!(", last in {p}")
            })
            .unwrap_or_default()
    )
}

/// Phase rows: phase, cycles, Hz, period/work/overshoot p50 p99 max (ms),
/// overruns, skips.
fn phase_rows(s: &Snapshot) -> Vec<Vec<String>> {
    s.phases
        .iter()
        .map(|p| {
            let mut row = vec![
                p.phase.clone(),
                p.cycles.to_string(),
                p.loop_hz.map_or("-".into(), |h| format!("{h:.2}")),
            ];
            for sp in [p.period, p.work, p.overshoot] {
                row.extend(spread_cells(sp));
            }
            row.push(p.overruns.to_string());
            row.push(p.skipped.to_string());
            row
        })
        .collect()
}

const PHASE_HEADER: [&str; 14] = [
    "phase",
    "cycles",
    "Hz",
    "period p50",
    "p99",
    "max",
    "work p50",
    "p99",
    "max",
    "oversh p50",
    "p99",
    "max",
    "overruns",
    "skips",
];

fn stage_rows(s: &Snapshot) -> Vec<Vec<String>> {
    view_rows(&s.stages)
}

/// Stage rows: stage, spans, wall p50, p99, max (ms).
fn view_rows(stages: &[StageView]) -> Vec<Vec<String>> {
    stages
        .iter()
        .map(|st| {
            let mut row = vec![st.stage.clone(), st.spans.to_string()];
            row.extend(spread_cells(st.wall));
            row
        })
        .collect()
}

/// A thread panel's rows: stage, spans, wall p50, p99 (ms).
fn short_rows(stages: &[StageView]) -> Vec<Vec<String>> {
    let mut rows = view_rows(stages);
    for r in &mut rows {
        r.truncate(4);
    }
    rows
}

const STAGE_HEADER: [&str; 5] = ["stage", "spans", "wall p50", "p99", "max"];

/// The snapshot as plain text (`--once` without `--json`).
pub fn render_text(s: &Snapshot) -> String {
    let mut out = format!("{}\n\n", title(s));
    let table = |header: &[&str], rows: Vec<Vec<String>>| {
        let mut t = header.join("  ");
        t.push('\n');
        for r in rows {
            t.push_str(&r.join("  "));
            t.push('\n');
        }
        t
    };
    out.push_str("times in ms\n");
    out.push_str(&table(&PHASE_HEADER, phase_rows(s)));
    if let Some(d) = window_notes(s) {
        out.push_str(&d);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&table(&STAGE_HEADER, stage_rows(s)));
    for t in &s.threads {
        out.push_str(&format!("\nthread {} ({} cycles)\n", t.thread, t.cycles));
        out.push_str(&table(&STAGE_HEADER, view_rows(&t.stages)));
    }
    out.push_str(&format!("\n{}\n", chart_title(s)));
    for line in period_chart(&s.recent_periods_us, s.nominal_period_us, 60, 6) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

mod declared;
use declared::{window_notes, Declared};

mod tui;

mod pick;
pub use pick::{pick_ring, Picked};

#[cfg(test)]
mod tests;
