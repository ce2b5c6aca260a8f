//! The JSON Schemas of the looptime channels (`jsonschema` encoding),
//! one per message type; docs/export.md lists their fields.

use serde_json::{json, Value};

use super::json_bytes;

fn nullable(t: &str) -> Value {
    json!({ "type": [t, "null"] })
}

fn schema(title: &str, description: &str, properties: Value, required: &[&str]) -> Vec<u8> {
    let s = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "description": description,
        "type": "object",
        "properties": properties,
        "required": required,
    });
    json_bytes(&s)
}

pub(super) fn cycle_schema() -> Vec<u8> {
    schema(
        "looptime.Cycle",
        "One cycle of the loop, at its start (docs/metrics.md defines each figure; ns).",
        json!({
            "cycle": {"type": "integer"},
            "phase": {"type": "string"},
            "segment": {"type": "integer"},
            "start_ns": {"type": "integer", "description": "host monotonic"},
            "period_ns": nullable("integer"),
            "work_ns": nullable("integer"),
            "overshoot_ns": nullable("integer"),
            "lag_ns": nullable("integer"),
            "overrun": {"type": "boolean"},
            "skipped": {"type": "integer"},
            "work_cpu_ns": nullable("integer"),
            "spin_margin_ns": nullable("integer"),
            "spin_ns": nullable("integer"),
            "pace": {"type": "string", "enum": ["deadline", "input"], "description": "what released the cycle"},
            "arrival_ns": {"type": ["integer", "null"], "description": "input-paced: when the releasing input arrived, host monotonic"},
            "input_seq": {"type": ["integer", "null"], "description": "input-paced: the input's own counter"},
            "read_ns": {"type": ["integer", "null"], "description": "input-paced, with a kernel arrival: when the loop read the input, host monotonic"},
            "arrival_bound_ns": {"type": ["integer", "null"], "description": "input-paced, with a kernel arrival: the bound of its conversion onto the monotonic clock"},
            "answer_latency_ns": {"type": ["integer", "null"], "description": "input-paced: the first command span's start − arrival"},
            "values": {"type": "object", "additionalProperties": {"type": "number"}},
        }),
        &[
            "cycle",
            "phase",
            "segment",
            "start_ns",
            "period_ns",
            "work_ns",
            "overshoot_ns",
            "lag_ns",
            "overrun",
            "skipped",
            "pace",
            "values",
        ],
    )
}

pub(super) fn span_schema(title: &str) -> Vec<u8> {
    schema(
        title,
        "One span (a stage's run within a cycle), at its start; a parent's wall time includes its children's.",
        json!({
            "cycle": {"type": "integer"},
            "stage": {"type": "string"},
            "path": {"type": "string"},
            "depth": {"type": "integer"},
            "start_ns": {"type": "integer", "description": "host monotonic"},
            "wall_ns": {"type": "integer"},
            "cpu_ns": nullable("integer"),
            "attrs": {"type": "object", "additionalProperties": {"type": "string"}},
        }),
        &["cycle", "stage", "path", "depth", "start_ns", "wall_ns", "cpu_ns", "attrs"],
    )
}

pub(super) fn event_schema() -> Vec<u8> {
    schema(
        "looptime.Event",
        "A phase change (kind phase) or a caveat of the report (kind caveat).",
        json!({
            "kind": {"type": "string", "enum": ["phase", "caveat"]},
            "phase": nullable("string"),
            "cycle": nullable("integer"),
            "text": {"type": "string"},
        }),
        &["kind", "text"],
    )
}

pub(super) fn sample_schema() -> Vec<u8> {
    schema(
        "looptime.Sample",
        "A data-age sample a thread used (produced false) or published (produced true), at that moment; for a use on the host clock, its age (moment of use − stamp) and whether it exceeded the source's limit.",
        json!({
            "thread": {"type": "string"},
            "cycle": {"type": "integer"},
            "source": {"type": "string"},
            "seq": {"type": "integer", "minimum": 0},
            "stamp_ns": {"type": "integer"},
            "at_ns": {"type": "integer"},
            "produced": {"type": "boolean"},
            "age_ns": nullable("integer"),
            "stale": nullable("boolean"),
        }),
        &["thread", "cycle", "source", "seq", "stamp_ns", "at_ns", "produced", "age_ns", "stale"],
    )
}
