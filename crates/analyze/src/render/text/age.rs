//! The text report's data-age section: per declared source, its clock
//! and limit, per phase its uses and age distributions, then its
//! publication.

use std::fmt::Write as _;

use super::{dist_row, ms, terminal_safe};
use crate::metrics::Report;

/// Data age per declared source (absent without sources).
pub(super) fn data_age(o: &mut String, r: &Report) {
    let Some(d) = &r.data_age else {
        return;
    };
    let _ = writeln!(
        o,
        "\ndata age: how old each source's sample was when the loop used it (ms; the stamp is the sample's capture or request time)"
    );
    if d.samples_dropped > 0 {
        let _ = writeln!(
            o,
            "  ! {} sample(s) beyond a cycle's slots were counted and not stored: raise max_samples_per_cycle",
            d.samples_dropped
        );
    }
    for s in &d.sources {
        source_age(o, s);
    }
}

/// One data-age source's lines: its clock and limit, per phase its counts
/// and age distributions, then its publication.
fn source_age(o: &mut String, s: &crate::metrics::SourceAge) {
    let limit = s.max_age_ns.map_or("no staleness limit".into(), |m| {
        format!("stale beyond {} ms", ms(m as f64))
    });
    let _ = writeln!(
        o,
        "  {} (clock {}, {limit})",
        terminal_safe(&s.source),
        terminal_safe(&s.clock)
    );
    if let Some(why) = &s.not_comparable {
        let _ = writeln!(o, "    ages not comparable: {}", terminal_safe(why));
    }
    if s.phases.is_empty() {
        let _ = writeln!(o, "    no cycle used it");
    }
    for p in &s.phases {
        let stale = match (p.stale, p.stale_share) {
            (Some(n), Some(share)) => format!(", {n} stale ({:.2} %)", share * 100.0),
            (Some(n), None) => format!(", {n} stale"),
            _ => String::new(),
        };
        let future = if p.stamped_in_future > 0 {
            format!(
                ", {} stamped after their use (left out)",
                p.stamped_in_future
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "    {}: {} uses, {} reused, {} skipped, {} sequence resets{stale}{future}",
            terminal_safe(&p.phase),
            p.uses,
            p.reused,
            p.skipped,
            p.seq_resets
        );
        if s.not_comparable.is_none() {
            let _ = writeln!(
                o,
                "  {:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                "", "mean", "p50", "p90", "p99", "p99.9", "max"
            );
            dist_row(o, "  age at use", &p.age_at_use, ms);
            dist_row(o, "  age at command", &p.age_at_command, ms);
        }
    }
    if let Some(pr) = &s.production {
        let wait = pr.wait_to_first_use.as_ref().map_or("-".into(), |w| {
            format!(
                "p50 {} ms, p99 {} ms",
                ms(w.p50_ns as f64),
                ms(w.p99_ns as f64)
            )
        });
        let _ = writeln!(
            o,
            "    published by {}: {} samples at {} Hz; wait to first use {wait}; {} never used; {} sequence numbers never recorded",
            terminal_safe(&pr.threads.join(", ")),
            pr.produced,
            pr.rate_hz.map_or("-".into(), |h| format!("{h:.2}")),
            pr.never_used,
            pr.seq_gaps
        );
    }
}
