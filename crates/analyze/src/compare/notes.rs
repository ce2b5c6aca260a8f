//! What a comparison says about the pair itself, beside its tests: the
//! warnings (manifests, hosts, rollouts that differ within a side, one set
//! of runs compared with itself) and every episode's own caveats.

use super::*;

/// The warnings about the pair (manifests, hosts, rollouts differing
/// within a side, one set of runs compared with itself) and every
/// episode's own caveats, labelled by side.
pub(super) fn pair_notes(
    a: &SideInput,
    b: &SideInput,
    differences: &[Difference],
    settings: &[String],
) -> (Vec<String>, Vec<String>) {
    // The same episode directories on both sides: not an A/A pair of runs,
    // but one set of runs compared with itself.
    let dirs = |side: &SideInput| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = side.iter().map(|a| a.evidence.dir.clone()).collect();
        v.sort();
        v
    };
    let same = !a.is_empty() && dirs(a) == dirs(b);
    let mut warnings = match (a.first(), b.first()) {
        (Some(x), Some(y)) => warnings(&x.evidence, &y.evidence, differences, settings, same),
        _ => Vec::new(),
    };
    for (label, side) in [("A", a), ("B", b)] {
        warnings.extend(within_side(label, side));
    }
    let mut caveats = Vec::new();
    for (label, side) in [("A", a), ("B", b)] {
        caveats.extend(no_cycle_cpu(label, side));
        for (i, r) in side.iter().map(|a| &a.report).enumerate() {
            for c in &r.caveats {
                caveats.push(format!("{}: {c}", episode_label(label, side, i)));
            }
        }
    }
    (warnings, caveats)
}

/// Why `work_cpu` is not tested, when a side's evidence has no per-cycle
/// CPU time: its CPU-time mode is `spans` or `off` (docs/compare.md, The
/// cycle's CPU time).
fn no_cycle_cpu(label: &str, side: &SideInput) -> Option<String> {
    use looptime_capture::CpuTimeMode;
    let mode = side
        .iter()
        .map(|a| a.evidence.header.cpu_mode())
        .find(|m| *m != CpuTimeMode::Cycle)?;
    let word = match mode {
        CpuTimeMode::Spans => "spans",
        _ => "off",
    };
    Some(format!(
        "{label}: work_cpu (the cycle's CPU time) is not tested: its evidence records CPU time in `{word}` mode, not per cycle; record in the default `cycle` mode to test it"
    ))
}

/// Warnings about one side of several episodes: a rollout whose config,
/// source or host differs from the side's first (its variance would then
/// be more than run-to-run noise), and a side of one or two rollouts (too
/// few to resample between runs).
fn within_side(label: &str, side: &SideInput) -> Vec<String> {
    let mut out = Vec::new();
    let Some(first) = side.first() else {
        return out;
    };
    for (i, a) in side.iter().enumerate().skip(1) {
        let keys: Vec<String> = manifest_differences(
            first.evidence.manifest.as_ref(),
            a.evidence.manifest.as_ref(),
        )
        .into_iter()
        .filter(|d| {
            matches!(d.kind.as_str(), "config" | "source" | "host")
                    // Each rollout of a session gets its own seed.
                    && d.key != "run.seed"
        })
        .map(|d| d.key)
        .collect();
        if !keys.is_empty() {
            out.push(format!(
                "{} differs from {} in {}: the side's spread is more than run-to-run noise",
                episode_label(label, side, i),
                episode_label(label, side, 0),
                keys.join(", ")
            ));
        }
    }
    match side.len() {
        1 => out.push(format!(
            "{label} has 1 rollout: the variance between runs is not measured, only the variance within one; record at least 3 (looptime serve --episodes 3)"
        )),
        2 => out.push(format!(
            "{label} has 2 rollouts: the variance between runs rests on two; record at least 3 (looptime serve --episodes 3)"
        )),
        _ => {}
    }
    out
}

/// The warnings that come before any figure: a missing manifest, more than
/// one setting differing, an A/A pair, different source or host.
fn warnings(
    a: &Evidence,
    b: &Evidence,
    differences: &[Difference],
    settings: &[String],
    same: bool,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for (side, ev) in [("A", a), ("B", b)] {
        if ev.manifest.is_none() {
            warnings.push(format!(
                "{side} has no manifest.json: what differs between the runs is unknown"
            ));
        }
    }
    if settings.len() > 1 {
        warnings.push(format!(
            "{} settings differ ({}): a change cannot be attributed to one of them; rerun with one setting changed",
            settings.len(),
            settings.join(", ")
        ));
    }
    if same {
        warnings.push("the same rollouts on both sides: every figure is compared with itself, so nothing can move".into());
    } else if settings.is_empty() && a.manifest.is_some() && b.manifest.is_some() {
        warnings
            .push("no config setting differs: this is an A/A comparison (run-to-run noise)".into());
    }
    if differences.iter().any(|d| d.kind == "source") {
        warnings.push("the two runs were built from different source (source_hash differs)".into());
    }
    if differences.iter().any(|d| d.kind == "host") {
        warnings
            .push("the two runs come from different hosts or kernels (host facts differ)".into());
    }
    warnings
}
