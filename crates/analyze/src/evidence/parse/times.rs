//! A cycle line's timestamps and release fields, checked together: the
//! times as signed ns, an input-paced release's arrival, and a kernel
//! arrival's read time and bound.

use super::*;

/// The cycle's timestamps as signed ns, after the checks one line can
/// fail: negative or absurd work and wait, and (when the clocks are
/// comparable) an absurd deadline lag or sleep overshoot.
pub(super) struct Times {
    pub(super) start: i64,
    pub(super) end: Option<i64>,
    pub(super) cpu: Option<i64>,
    pub(super) margin: Option<i64>,
    pub(super) spin: Option<i64>,
    pub(super) target: Option<i64>,
    pub(super) sleep: Option<i64>,
    pub(super) wake: Option<i64>,
    pub(super) arrival: Option<i64>,
    pub(super) read: Option<i64>,
    pub(super) bound: Option<i64>,
}

/// The input-paced release's fields, checked together: an `input` cycle
/// carries its arrival, and only it carries an arrival or a counter.
fn check_release(
    rec: &CycleView,
    start: i64,
    arrival: Option<i64>,
) -> std::result::Result<(), String> {
    let input = rec.pace == looptime_capture::PaceKind::Input;
    match (input, arrival) {
        (true, None) => Err("the cycle's pace is `input` but it has no arrival_ns: an input-paced release carries the input's arrival".into()),
        (false, Some(_)) => Err("the cycle has an arrival_ns but its pace is not `input`: only an input-paced release carries an arrival".into()),
        (false, None) if rec.input_seq.is_some() => Err("the cycle has an input_seq but its pace is not `input`: only an input-paced release carries the input's counter".into()),
        (true, Some(a)) => check_offset_of(
            "input wait (start_ns − arrival_ns)",
            start - a,
            "arrival_ns must be on the host monotonic clock, as start_ns",
        ),
        _ => Ok(()),
    }
}

/// A read time goes with a kernel arrival: only beside an `arrival_ns`, on
/// its clock; a conversion bound only beside a read time.
fn check_read(
    arrival: Option<i64>,
    read: Option<i64>,
    bound: Option<i64>,
) -> std::result::Result<(), String> {
    match (arrival, read) {
        (None, Some(_)) => Err("the cycle has a read_ns but no arrival_ns: a read time is kept beside an input's kernel arrival".into()),
        (_, None) if bound.is_some() => Err("the cycle has an arrival_bound_ns but no read_ns: the bound goes with a kernel arrival and its read".into()),
        (Some(a), Some(r)) => check_offset_of(
            "socket wait (read_ns − arrival_ns)",
            r - a,
            "read_ns must be on the host monotonic clock, as arrival_ns",
        )
        .and_then(|()| match bound {
            Some(b) if b > ABSURD_DURATION_NS => Err("the cycle's arrival_bound_ns is absurd (more than an hour)".into()),
            _ => Ok(()),
        }),
        _ => Ok(()),
    }
}

pub(super) fn check_times(t: &Tables, rec: &CycleView) -> std::result::Result<Times, String> {
    let start = ns("start_ns", rec.start_ns)?;
    let opt = |f: &'static str, v: Option<u64>| v.map(|x| ns(f, x)).transpose();
    let end = opt("end_ns", rec.end_ns)?;
    let sleep = opt("sleep_start_ns", rec.sleep_start_ns)?;
    let wake = opt("wake_ns", rec.wake_ns)?;
    let target = opt("target_ns", rec.target_ns)?;
    let cpu = opt("cpu_ns", rec.cpu_ns)?;
    let margin = opt("spin_margin_ns", rec.spin_margin_ns)?;
    let spin = opt("spin_ns", rec.spin_ns)?;
    let arrival = opt("arrival_ns", rec.arrival_ns)?;
    check_release(rec, start, arrival)?;
    let read = opt("read_ns", rec.read_ns)?;
    let bound = opt("arrival_bound_ns", rec.arrival_bound_ns)?;
    check_read(arrival, read, bound)?;
    for (name, v) in [
        ("cpu_ns", cpu),
        ("spin_margin_ns", margin),
        ("spin_ns", spin),
    ] {
        if v.is_some_and(|c| c > ABSURD_DURATION_NS) {
            return Err(format!("the cycle's {name} is absurd (more than an hour)"));
        }
    }
    if let Some(e) = end {
        let work = e - start;
        if work < 0 {
            return Err(format!(
                "end_ns ({e}) is before start_ns ({start}): a negative work duration"
            ));
        }
        if work > ABSURD_DURATION_NS {
            return Err(format!(
                "work duration {work} ns is absurd (more than an hour)"
            ));
        }
    }
    if let (Some(s), Some(w)) = (sleep, wake) {
        if w < s {
            return Err(format!(
                "wake_ns ({w}) is before sleep_start_ns ({s}): a negative wait"
            ));
        }
        if w - s > ABSURD_DURATION_NS {
            return Err(format!(
                "wait of {} ns is absurd (more than an hour)",
                w - s
            ));
        }
    }
    if let Some(t_ns) = target.filter(|_| t.comparable) {
        check_offset("deadline lag (start_ns − target_ns)", start - t_ns)?;
        if let Some(w) = wake.filter(|_| !rec.overdue) {
            check_offset("sleep overshoot (wake_ns − target_ns)", w - t_ns)?;
        }
    }
    Ok(Times {
        start,
        end,
        cpu,
        margin,
        spin,
        target,
        sleep,
        wake,
        arrival,
        read,
        bound,
    })
}
