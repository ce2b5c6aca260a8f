//! MCAP (docs/export.md): the loop's timing on the wall-clock timeline robot
//! recordings use, for Foxglove and the MCAP tools.
//!
//! Channels, each JSON-encoded with a JSON Schema (`jsonschema`):
//!
//! * `/looptime/cycle`: one message per cycle, at its start: phase,
//!   segment, period, work, sleep overshoot, deadline lag, the overrun flag,
//!   skips, work CPU, the spin margin and spin, and the caller values;
//! * `/looptime/span`: one per control-thread span, at its start: stage,
//!   tree path, depth, wall and CPU time, attributes;
//! * `/looptime/event`: phase changes (at a segment's first cycle) and the
//!   report's caveats (at the first cycle);
//! * `/looptime/thread/<name>/span`: each background thread's spans.
//! * `/looptime/sample` (data age, when the evidence declares sources):
//!   one per sample a thread used or published, at that moment: source,
//!   seq, stamp, the thread, and for a use on the host clock its age and
//!   whether it was stale.
//!
//! Every figure is the analysis's own (the cycle columns computed once, the
//! report); the export computes none anew. A message's time is wall-clock
//! ns through the evidence's start anchor (`header.wall_clock`, each thread
//! its own), or host-monotonic ns when the evidence has none: the file's
//! `looptime` metadata record and the command's output say which.

use std::collections::BTreeMap;
use std::io::{Seek, Write};

use serde_json::{json, Value};

use crate::analysis::Analysis;
use crate::error::{AnalyzeError, Result};
use crate::evidence::{Cell, Evidence, GroupDecode};
use crate::metrics::CycleColumns;
use looptime_capture::WallClockAnchor;

mod schemas;
use schemas::{cycle_schema, event_schema, sample_schema, span_schema};

/// The cycle channel's topic.
pub const CYCLE_TOPIC: &str = "/looptime/cycle";
/// The control thread's span channel.
pub const SPAN_TOPIC: &str = "/looptime/span";
/// The event channel.
pub const EVENT_TOPIC: &str = "/looptime/event";
/// Topic of the data-age samples.
pub const SAMPLE_TOPIC: &str = "/looptime/sample";

/// What the export wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct McapSummary {
    /// Messages per topic.
    pub messages: BTreeMap<String, u64>,
    /// `wall_clock` or `host_monotonic`.
    pub timebase: &'static str,
    /// The start anchor's uncertainty, ns, with a wall-clock timebase.
    pub anchor_uncertainty_ns: Option<u64>,
}

/// One message before it is written: time, channel, JSON bytes.
pub(crate) struct Msg {
    pub(crate) time: u64,
    pub(crate) channel: usize,
    pub(crate) data: Vec<u8>,
}

/// A JSON value's bytes. A `serde_json::Value` always has a JSON form (its
/// map keys are strings, its numbers finite) and a `Vec` never fails to
/// take bytes, so this cannot fail.
fn json_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("a serde_json::Value always serializes into a Vec")
}

/// Every sample of `ev` (one thread's evidence) as a `/looptime/sample`
/// message: `age_ns` for a use on the host clock stamped no later than its
/// use (as the report's ages), `stale` where the source has a limit.
fn samples(ev: &Evidence, clock: Clock, channel: usize, out: &mut Vec<Msg>) {
    let thread = ev.header.thread_name();
    for x in &ev.samples {
        let Some(s) = ev.header.sources.get(x.source as usize) else {
            continue;
        };
        let age = crate::metrics::data_age::use_age(ev, x);
        let stale = age.and_then(|a| s.max_age_ns.map(|m| a as u64 > m));
        let m = json!({
            "thread": thread,
            "cycle": ev.cycles[x.row as usize].cycle,
            "source": s.name,
            "seq": x.seq,
            "stamp_ns": x.stamp_ns,
            "at_ns": x.at_ns,
            "produced": x.produced,
            "age_ns": age,
            "stale": stale,
        });
        out.push(Msg {
            time: clock.at(x.at_ns),
            channel,
            data: json_bytes(&m),
        });
    }
}

/// Maps an evidence's host-monotonic times to the export's timebase.
#[derive(Clone, Copy)]
struct Clock(Option<WallClockAnchor>);

impl Clock {
    fn of(ev: &Evidence, fallback: Option<WallClockAnchor>) -> Clock {
        Clock(ev.header.wall_clock.map(|w| w.start).or(fallback))
    }
    fn at(self, mono_ns: i64) -> u64 {
        let m = mono_ns.max(0) as u64;
        self.0.map_or(m, |a| a.wall_ns(m))
    }
}

fn cell(c: &Cell) -> Option<Value> {
    match c {
        Cell::Unset => None,
        Cell::Int(i) => Some(json!(i)),
        Cell::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number),
    }
}

fn cycles(ev: &Evidence, cc: &CycleColumns, clock: Clock, channel: usize, out: &mut Vec<Msg>) {
    let names = &ev.header.values;
    let n = names.len();
    let mut answers = vec![None; ev.cycles.len()];
    for (row, l) in crate::metrics::input_paced::answer_latencies(ev) {
        answers[row] = Some(l);
    }
    for (i, c) in ev.cycles.iter().enumerate() {
        let mut values = serde_json::Map::new();
        for (k, v) in names.iter().enumerate() {
            if let Some(x) = ev.values.get(i * n + k).and_then(cell) {
                values.insert(v.name.clone(), x);
            }
        }
        let m = json!({
            "cycle": c.cycle,
            "phase": ev.phase_name(c.phase),
            "segment": cc.segment[i],
            "start_ns": c.start_ns,
            "period_ns": cc.period[i],
            "work_ns": cc.work[i],
            "overshoot_ns": cc.overshoot[i],
            "lag_ns": cc.lag[i],
            "overrun": c.overdue,
            "skipped": c.skipped,
            "work_cpu_ns": cc.cpu[i],
            "spin_margin_ns": c.spin_margin_ns,
            "spin_ns": c.spin_ns,
            "pace": if c.input_paced { "input" } else { "deadline" },
            "arrival_ns": c.arrival_ns,
            "input_seq": c.input_seq,
            "read_ns": c.read_ns,
            "arrival_bound_ns": c.arrival_bound_ns,
            "answer_latency_ns": answers[i],
            "values": values,
        });
        out.push(Msg {
            time: clock.at(c.start_ns),
            channel,
            data: json_bytes(&m),
        });
    }
}

fn spans(ev: &Evidence, clock: Clock, channel: usize, out: &mut Vec<Msg>) -> Result<()> {
    let groups: std::collections::HashMap<u64, &GroupDecode> =
        ev.groups.iter().map(|g| (g.key, g)).collect();
    let rows = ev.span_rows()?;
    for c in &ev.cycles {
        let from = (c.span_row as usize).min(rows.len());
        let to = (from + c.n_spans as usize).min(rows.len());
        for s in &rows[from..to] {
            let g = groups.get(&s.key);
            let m = json!({
                "cycle": c.cycle,
                "stage": ev.header.stages.get(s.stage as usize).map_or("?", |st| st.name.as_str()),
                "path": g.map_or("", |g| g.path.as_str()),
                "depth": g.map_or(0, |g| g.depth),
                "start_ns": s.start_ns,
                "wall_ns": s.wall_ns,
                "cpu_ns": (s.cpu_ns >= 0).then_some(s.cpu_ns),
                "attrs": g.map_or(BTreeMap::new(), |g| g.attrs.clone()),
            });
            out.push(Msg {
                time: clock.at(s.start_ns),
                channel,
                data: json_bytes(&m),
            });
        }
    }
    Ok(())
}

fn events(a: &Analysis, clock: Clock, channel: usize, out: &mut Vec<Msg>) {
    let ev = &a.evidence;
    let cc = a.columns();
    let mut push = |at: i64, m: Value| {
        out.push(Msg {
            time: clock.at(at),
            channel,
            data: json_bytes(&m),
        })
    };
    let first = ev.cycles.first().map_or(0, |c| c.start_ns);
    for text in &a.report.caveats {
        push(
            first,
            json!({"kind": "caveat", "phase": null, "cycle": null, "text": text}),
        );
    }
    for (i, c) in ev.cycles.iter().enumerate() {
        if i == 0 || cc.segment[i] != cc.segment[i - 1] {
            let phase = ev.phase_name(c.phase);
            let text = match i {
                0 => format!("{phase} begins at cycle {}", c.cycle),
                _ => format!(
                    "{phase} begins at cycle {} (after {})",
                    c.cycle,
                    ev.phase_name(ev.cycles[i - 1].phase)
                ),
            };
            push(
                c.start_ns,
                json!({"kind": "phase", "phase": phase, "cycle": c.cycle, "text": text}),
            );
        }
    }
}

pub(crate) fn mcap_err(path: &std::path::Path, e: mcap::McapError) -> AnalyzeError {
    AnalyzeError::Write {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// A topic for background thread `name`.
pub fn thread_topic(name: &str) -> String {
    format!("/looptime/thread/{name}/span")
}

/// The looptime channels of an episode, before they are written.
pub(crate) struct Plan {
    /// (schema name, JSON Schema, topic) per channel, in channel order.
    pub(crate) channels: Vec<(&'static str, Vec<u8>, String)>,
    /// Every message, in time order.
    pub(crate) msgs: Vec<Msg>,
    /// The `looptime` metadata record.
    pub(crate) meta: BTreeMap<String, String>,
    pub(crate) timebase: &'static str,
    pub(crate) anchor_uncertainty_ns: Option<u64>,
}

impl Plan {
    /// The first and last message time.
    pub(crate) fn range(&self) -> Option<(u64, u64)> {
        Some((self.msgs.first()?.time, self.msgs.last()?.time))
    }
}

/// The `looptime` metadata record: the versions, the timebase, the
/// episode, the anchor's uncertainty and the manifest's identity.
fn metadata(ev: &Evidence, timebase: &str) -> BTreeMap<String, String> {
    let mut meta = BTreeMap::new();
    meta.insert(
        "looptime_version".to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    );
    meta.insert("timebase".into(), timebase.into());
    meta.insert("evidence_producer".into(), ev.header.producer.clone());
    meta.insert("episode".into(), ev.dir.display().to_string());
    if let Some(w) = ev.header.wall_clock {
        meta.insert(
            "anchor_uncertainty_ns".into(),
            w.start.uncertainty_ns.to_string(),
        );
        meta.insert(
            "anchor_end".into(),
            if w.end.is_some() {
                "present"
            } else {
                "absent (recovered evidence)"
            }
            .into(),
        );
    }
    for (key, pointer) in [
        ("config_hash", "/config_hash"),
        ("source_hash", "/source_hash"),
        ("host", "/host/hostname"),
        ("created_utc", "/created_utc"),
    ] {
        if let Some(v) = ev.manifest_str(pointer) {
            meta.insert(key.into(), v);
        }
    }
    meta
}

pub(crate) fn plan(a: &Analysis) -> Result<Plan> {
    let ev = &a.evidence;
    let control = Clock::of(ev, None);
    let mut channels = vec![
        ("looptime.Cycle", cycle_schema(), CYCLE_TOPIC.to_string()),
        (
            "looptime.Span",
            span_schema("looptime.Span"),
            SPAN_TOPIC.to_string(),
        ),
        ("looptime.Event", event_schema(), EVENT_TOPIC.to_string()),
    ];
    let mut msgs = Vec::new();
    cycles(ev, a.columns(), control, 0, &mut msgs);
    spans(ev, control, 1, &mut msgs)?;
    events(a, control, 2, &mut msgs);
    for (t, _) in a.threads() {
        channels.push((
            "looptime.ThreadSpan",
            span_schema("looptime.ThreadSpan"),
            thread_topic(t.header.thread_name()),
        ));
        spans(t, Clock::of(t, control.0), channels.len() - 1, &mut msgs)?;
    }
    // Data age: one channel for every thread's samples, present only when
    // a thread declares sources (older evidence exports as before).
    let with_sources = std::iter::once(ev)
        .chain(&ev.threads)
        .any(|t| !t.header.sources.is_empty());
    if with_sources {
        channels.push(("looptime.Sample", sample_schema(), SAMPLE_TOPIC.to_string()));
        let channel = channels.len() - 1;
        samples(ev, control, channel, &mut msgs);
        for t in &ev.threads {
            samples(t, Clock::of(t, control.0), channel, &mut msgs);
        }
    }
    // One timeline: all messages in time order (stable, so each channel
    // keeps its own order among equal times).
    msgs.sort_by_key(|x| x.time);
    let timebase = if control.0.is_some() {
        "wall_clock"
    } else {
        "host_monotonic"
    };
    let meta = metadata(ev, timebase);
    Ok(Plan {
        channels,
        msgs,
        meta,
        timebase,
        anchor_uncertainty_ns: ev.header.wall_clock.map(|w| w.start.uncertainty_ns),
    })
}

/// How the chunks of a written MCAP file are compressed
/// (`--compression`, docs/export.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// zstd, the MCAP tools' and rosbag2's usual choice (the default).
    #[default]
    Zstd,
    /// lz4: faster, larger.
    Lz4,
    /// No compression.
    None,
}

impl Compression {
    fn of(self) -> Option<mcap::Compression> {
        match self {
            Compression::Zstd => Some(mcap::Compression::Zstd),
            Compression::Lz4 => Some(mcap::Compression::Lz4),
            Compression::None => None,
        }
    }
}

/// An MCAP writer into `w` with chunks compressed as asked and the header's
/// `profile` (the recording's, for `--into`; empty for the plain export).
pub(crate) fn writer<W: Write + Seek>(
    w: W,
    path: &std::path::Path,
    compression: Compression,
    profile: &str,
) -> Result<mcap::Writer<W>> {
    mcap::WriteOptions::new()
        .compression(compression.of())
        .profile(profile)
        .library(format!("looptime-analyze {}", env!("CARGO_PKG_VERSION")))
        .create(w)
        .map_err(|e| mcap_err(path, e))
}

/// Add the plan's schemas and channels (ids the writer chooses, clear of
/// any it holds); their ids, in plan order.
pub(crate) fn add_channels<W: Write + Seek>(
    m: &mut mcap::Writer<W>,
    p: &Plan,
    path: &std::path::Path,
) -> Result<Vec<u16>> {
    p.channels
        .iter()
        .map(|(name, schema, topic)| {
            let sid = m
                .add_schema(name, "jsonschema", schema)
                .map_err(|e| mcap_err(path, e))?;
            m.add_channel(sid, topic, "json", &BTreeMap::new())
                .map_err(|e| mcap_err(path, e))
        })
        .collect()
}

/// Writes the plan's messages as they come, numbering each channel's.
pub(crate) struct Emitter<'p> {
    plan: &'p Plan,
    ids: Vec<u16>,
    sequence: Vec<u32>,
    counts: BTreeMap<String, u64>,
}

impl<'p> Emitter<'p> {
    pub(crate) fn new(plan: &'p Plan, ids: Vec<u16>) -> Self {
        Emitter {
            sequence: vec![0; ids.len()],
            counts: plan.channels.iter().map(|c| (c.2.clone(), 0)).collect(),
            plan,
            ids,
        }
    }

    pub(crate) fn emit<W: Write + Seek>(
        &mut self,
        m: &mut mcap::Writer<W>,
        i: usize,
        path: &std::path::Path,
    ) -> Result<()> {
        let msg = &self.plan.msgs[i];
        let c = msg.channel;
        let h = mcap::records::MessageHeader {
            channel_id: self.ids[c],
            sequence: self.sequence[c],
            log_time: msg.time,
            publish_time: msg.time,
        };
        self.sequence[c] = self.sequence[c].wrapping_add(1);
        m.write_to_known_channel(&h, &msg.data)
            .map_err(|e| mcap_err(path, e))?;
        *self
            .counts
            .entry(self.plan.channels[c].2.clone())
            .or_default() += 1;
        Ok(())
    }

    /// The `looptime` metadata record, then the summary.
    pub(crate) fn finish<W: Write + Seek>(
        self,
        m: &mut mcap::Writer<W>,
        path: &std::path::Path,
    ) -> Result<McapSummary> {
        m.write_metadata(&mcap::records::Metadata {
            name: "looptime".into(),
            metadata: self.plan.meta.clone(),
        })
        .map_err(|e| mcap_err(path, e))?;
        m.finish().map_err(|e| mcap_err(path, e))?;
        Ok(McapSummary {
            messages: self.counts,
            timebase: self.plan.timebase,
            anchor_uncertainty_ns: self.plan.anchor_uncertainty_ns,
        })
    }
}

/// Write `a`'s episode as MCAP into `w` (errors name `path`), its chunks
/// compressed as `compression` says.
///
/// # Errors
/// [`AnalyzeError::Write`] when writing fails.
pub fn write<W: Write + Seek>(
    a: &Analysis,
    w: W,
    path: &std::path::Path,
    compression: Compression,
) -> Result<McapSummary> {
    let p = plan(a)?;
    let mut m = writer(w, path, compression, "")?;
    let ids = add_channels(&mut m, &p, path)?;
    let mut e = Emitter::new(&p, ids);
    for i in 0..p.msgs.len() {
        e.emit(&mut m, i, path)?;
    }
    e.finish(&mut m, path)
}
