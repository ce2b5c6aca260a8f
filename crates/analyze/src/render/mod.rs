//! Rendering: text, JSON, HTML and plots. Each consumes a
//! [`Report`](crate::metrics::Report) or a
//! [`Comparison`](crate::compare::Comparison); none computes a metric.

pub mod compare_text;
pub mod fleet_text;
pub mod html;
pub mod plots;
pub mod text;

pub use text::terminal_safe;

/// Deterministic JSON of a report or comparison (struct field order, sorted
/// maps), newline-terminated.
pub fn json<T: serde::Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}
