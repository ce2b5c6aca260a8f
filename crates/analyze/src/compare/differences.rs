//! What differs between the two sides' manifests: every key of the
//! config, source, host, real-time and schedule facts, flattened to dotted
//! keys, with the output locations and the label left out
//! (docs/compare.md, What differs).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Difference, IGNORED_CONFIG_KEYS};

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.clone());
        }
    }
}

/// Manifest differences between A and B.
pub fn manifest_differences(a: Option<&Value>, b: Option<&Value>) -> Vec<Difference> {
    let (Some(a), Some(b)) = (a, b) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let sections: [(&str, &str); 6] = [
        ("config", "config"),
        ("source_hash", "source"),
        ("host", "host"),
        ("realtime", "realtime"),
        ("cpu_dma_latency_held", "realtime"),
        ("schedule", "schedule"),
    ];
    for (field, kind) in sections {
        let (mut fa, mut fb) = (BTreeMap::new(), BTreeMap::new());
        flatten("", a.get(field).unwrap_or(&Value::Null), &mut fa);
        flatten("", b.get(field).unwrap_or(&Value::Null), &mut fb);
        let keys: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
        for k in keys {
            if kind == "config" && IGNORED_CONFIG_KEYS.contains(&k.as_str()) {
                continue;
            }
            if kind == "realtime" && k.starts_with("warnings") {
                continue;
            }
            let va = fa.get(k).cloned().unwrap_or(Value::Null);
            let vb = fb.get(k).cloned().unwrap_or(Value::Null);
            if va != vb {
                let key = if k.is_empty() {
                    field.to_string()
                } else {
                    k.clone()
                };
                out.push(Difference {
                    kind: kind.into(),
                    key,
                    a: va,
                    b: vb,
                });
            }
        }
    }
    out
}
