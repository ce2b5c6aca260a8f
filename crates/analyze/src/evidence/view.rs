//! A cycle line as the conversion reads it: every field of
//! [`CycleRecord`], with strings borrowed instead of owned and the maps and
//! lists flattened into vectors a parser can reuse line after line.
//!
//! Two parsers fill it: [`super::scan`] straight from the line's bytes (the
//! fast path, no allocation once its vectors have grown), and
//! [`CycleView::of_record`] from a record serde parsed (the path that
//! names every error). The conversion (`super::parse`) cannot tell them
//! apart.

use looptime_capture::{CycleRecord, PaceKind};
use serde_json::Number;

/// One span of a [`CycleView`].
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SpanView<'a> {
    pub(super) stage: &'a str,
    pub(super) parent: Option<u32>,
    pub(super) depth: u32,
    pub(super) start_ns: u64,
    pub(super) wall_ns: u64,
    pub(super) cpu_ns: Option<u64>,
    /// This span's attributes: `CycleView::attrs[attrs.0 .. attrs.1]`,
    /// sorted by key with no key twice (a map's order).
    pub(super) attrs: (u32, u32),
}

/// One data-age sample of a [`CycleView`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SampleView<'a> {
    pub(super) source: &'a str,
    pub(super) seq: u64,
    pub(super) stamp_ns: u64,
    pub(super) at_ns: u64,
    pub(super) produced: bool,
}

/// One cycle line, borrowed from the line (or from a parsed record).
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct CycleView<'a> {
    pub(super) cycle: u64,
    pub(super) phase: &'a str,
    pub(super) start_ns: u64,
    pub(super) end_ns: Option<u64>,
    pub(super) cpu_ns: Option<u64>,
    pub(super) target_ns: Option<u64>,
    pub(super) sleep_start_ns: Option<u64>,
    pub(super) wake_ns: Option<u64>,
    pub(super) spin_margin_ns: Option<u64>,
    pub(super) spin_ns: Option<u64>,
    pub(super) overdue: bool,
    pub(super) skipped: u32,
    pub(super) pace: PaceKind,
    pub(super) arrival_ns: Option<u64>,
    pub(super) input_seq: Option<u64>,
    pub(super) read_ns: Option<u64>,
    pub(super) arrival_bound_ns: Option<u64>,
    pub(super) spans_dropped: u32,
    pub(super) samples_dropped: u32,
    /// Caller values, sorted by name with no name twice (a map's order).
    pub(super) values: Vec<(&'a str, Number)>,
    pub(super) spans: Vec<SpanView<'a>>,
    /// Every span's attributes, (key, value), each span's run sorted by key.
    pub(super) attrs: Vec<(&'a str, &'a str)>,
    pub(super) samples: Vec<SampleView<'a>>,
}

impl<'a> CycleView<'a> {
    /// The attributes of `span`, sorted by key.
    pub(super) fn span_attrs(&self, span: &SpanView<'a>) -> &[(&'a str, &'a str)] {
        &self.attrs[span.attrs.0 as usize..span.attrs.1 as usize]
    }

    /// Empty the view for the next line, keeping its vectors' capacity.
    pub(super) fn clear(&mut self) {
        let (mut values, mut spans, mut attrs, mut samples) = (
            std::mem::take(&mut self.values),
            std::mem::take(&mut self.spans),
            std::mem::take(&mut self.attrs),
            std::mem::take(&mut self.samples),
        );
        values.clear();
        spans.clear();
        attrs.clear();
        samples.clear();
        *self = CycleView {
            values,
            spans,
            attrs,
            samples,
            ..CycleView::default()
        };
    }

    /// The view of a record serde parsed.
    pub(super) fn of_record(rec: &'a CycleRecord) -> Self {
        let mut attrs = Vec::new();
        let spans = rec
            .spans
            .iter()
            .map(|s| {
                let from = attrs.len() as u32;
                attrs.extend(s.attrs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                SpanView {
                    stage: &s.stage,
                    parent: s.parent,
                    depth: s.depth,
                    start_ns: s.start_ns,
                    wall_ns: s.wall_ns,
                    cpu_ns: s.cpu_ns,
                    attrs: (from, attrs.len() as u32),
                }
            })
            .collect();
        CycleView {
            cycle: rec.cycle,
            phase: &rec.phase,
            start_ns: rec.start_ns,
            end_ns: rec.end_ns,
            cpu_ns: rec.cpu_ns,
            target_ns: rec.target_ns,
            sleep_start_ns: rec.sleep_start_ns,
            wake_ns: rec.wake_ns,
            spin_margin_ns: rec.spin_margin_ns,
            spin_ns: rec.spin_ns,
            overdue: rec.overdue,
            skipped: rec.skipped,
            pace: rec.pace,
            arrival_ns: rec.arrival_ns,
            input_seq: rec.input_seq,
            read_ns: rec.read_ns,
            arrival_bound_ns: rec.arrival_bound_ns,
            spans_dropped: rec.spans_dropped,
            samples_dropped: rec.samples_dropped,
            values: rec
                .values
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect(),
            spans,
            attrs,
            samples: rec
                .samples
                .iter()
                .map(|x| SampleView {
                    source: &x.source,
                    seq: x.seq,
                    stamp_ns: x.stamp_ns,
                    at_ns: x.at_ns,
                    produced: x.produced,
                })
                .collect(),
        }
    }
}
