//! The compare page's tables of rate tests: per 1,000 cycles (overruns,
//! late starts, …) and in Hz (the loop's and the commands' rate).

use maud::{html, Markup};

use crate::compare::Comparison;

/// The rate tests (per 1,000 cycles) of a comparison.
pub(super) fn rates_table(c: &Comparison) -> Markup {
    html! {
        @if !c.rates.is_empty() {
            h2 { "Rates (per 1,000 cycles)" }
            table {
                tr { th.l { "phase" } th.l { "rate" } th { "A" } th { "B" } th { "Δ" } th { "95 % CI Δ" } th { "detectable Δ" } th { "Holm p" } th.l { "verdict" } }
                @for r in &c.rates {
                    tr {
                        td.l { (r.phase) }
                        td.l { (r.display_name()) }
                        td { (format!("{:.3}", r.a_per_1000)) } td { (format!("{:.3}", r.b_per_1000)) }
                        td { (format!("{:+.3}", r.diff_per_1000)) }
                        td { (format!("[{:.3}, {:.3}]", r.ci_per_1000[0], r.ci_per_1000[1])) }
                        td { (format!("{:.3}", r.test.detectable)) }
                        td { (format!("{:.3}", r.p_holm)) }
                        td.l { (r.verdict.word()) }
                    }
                }
            }
        }
    }
}

/// The loop's and the commands' Hz tests of a comparison.
pub(super) fn hz_table(c: &Comparison) -> Markup {
    html! {
        @if !c.hz.is_empty() {
            h2 { "Loop and command rates (Hz; lower is worse)" }
            table {
                tr { th.l { "phase" } th.l { "rate" } th { "A" } th { "B" } th { "Δ" } th { "95 % CI Δ" } th { "detectable Δ" } th { "Holm p" } th.l { "verdict" } }
                @for h in &c.hz {
                    tr {
                        td.l { (h.phase) }
                        td.l { (h.display_name()) }
                        td { (format!("{:.3}", h.a_hz)) } td { (format!("{:.3}", h.b_hz)) }
                        td { (format!("{:+.3}", h.diff_hz)) }
                        td { (format!("[{:+.3}, {:+.3}]", h.ci_hz[0], h.ci_hz[1])) }
                        td { (format!("{:.3}", h.test.detectable)) }
                        td { (format!("{:.3}", h.p_holm)) }
                        td.l { (h.verdict.word()) }
                    }
                }
            }
        }
    }
}
