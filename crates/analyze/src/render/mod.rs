//! Rendering: text, JSON, HTML and plots. Each consumes a
//! [`Report`](crate::metrics::Report) or a
//! [`Comparison`](crate::compare::Comparison); none computes a metric.

pub mod compare_text;
pub mod fleet_text;
pub mod gate;
pub mod html;
pub mod plots;
pub mod text;

pub use text::terminal_safe;

/// `v` with `digits` decimals, a negative value that rounds to zero
/// printed as zero (`0.000`, never `-0.000`): every fixed-point figure the
/// text, HTML and comparison reports print goes through it.
pub fn fixed(v: f64, digits: usize) -> String {
    let s = format!("{v:.digits$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

/// How many tests moved, in the words every surface uses (text, HTML,
/// Markdown): `N of M tests (W worse, B better)`; the gate counts the same
/// tests ([`crate::compare::Comparison::tests`]).
pub fn moved_count(c: &crate::compare::Comparison, moved: &[crate::compare::Moved]) -> String {
    let worse = moved
        .iter()
        .filter(|m| m.verdict == crate::compare::Verdict::Worse)
        .count();
    format!(
        "{} of {} tests ({worse} worse, {} better)",
        moved.len(),
        c.multiplicity.tests,
        moved.len() - worse
    )
}

/// Deterministic JSON of a report or comparison (struct field order, sorted
/// maps), newline-terminated.
pub fn json<T: serde::Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_negative_zero_prints_as_zero() {
        assert_eq!(super::fixed(-0.0001, 3), "0.000");
        assert_eq!(super::fixed(-0.0, 1), "0.0");
        assert_eq!(super::fixed(-0.0006, 3), "-0.001");
        assert_eq!(super::fixed(2.5, 1), "2.5");
    }
}
