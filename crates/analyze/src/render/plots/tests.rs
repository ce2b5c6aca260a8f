//! Unit tests of `plots`.

use super::compare::side_dists;
use super::*;
use crate::evidence::{load_episode, LoadOptions};

#[test]
fn the_distributions_stop_at_the_reports_p999_not_at_one_of_their_own() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/serve-episode");
    let a = Analysis::new(load_episode(&dir, LoadOptions::default()).unwrap()).unwrap();
    let d = episode_data(&a);
    let running = a
        .report
        .phases
        .iter()
        .find(|p| p.phase == "running")
        .unwrap();
    // The report's figures, in the plots' units: ms for period and
    // work, µs for overshoot.
    let want = [
        running.period.as_ref().unwrap().p999_ns as f64 / 1e6,
        running.work.as_ref().unwrap().p999_ns as f64 / 1e6,
        running.sleep_overshoot.as_ref().unwrap().p999_ns as f64 / 1e3,
    ];
    let got: Vec<f64> = d.dists.iter().map(|s| s.clip.unwrap()).collect();
    assert_eq!(got, want);
    // A comparison of the episode with itself stops at the same figures.
    let side = [&a];
    let clips: Vec<Option<f64>> = side_dists(&side).iter().map(|s| s.clip).collect();
    assert_eq!(clips, want.map(Some));
}

/// Issue 47, point 6: the timeline's legend is in a strip of its own at the
/// right, outside the plotting area, and lists only the phases shaded. The
/// v2 fixture declares `paused` but never enters it.
#[test]
fn the_timeline_legend_sits_outside_the_plot_and_names_the_shaded_phases() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/serve-episode");
    let a = Analysis::new(load_episode(&dir, LoadOptions::default()).unwrap()).unwrap();
    let plots = episode_plots(&a, None).unwrap();
    let svg = &plots
        .iter()
        .find(|p| p.name == "period_timeline")
        .unwrap()
        .svg;
    // The x of each <text> whose content is `word`.
    let xs_of = |word: &str| -> Vec<f64> {
        svg.split("<text")
            .filter(|t| {
                t.split('>')
                    .nth(1)
                    .and_then(|c| c.split('<').next())
                    .is_some_and(|c| c.trim() == word)
            })
            .filter_map(|t| {
                let x = t.split("x=\"").nth(1)?.split('"').next()?;
                x.parse().ok()
            })
            .collect()
    };
    let strip = (W - LEGEND_W) as f64;
    for word in ["warmup", "running"] {
        let xs = xs_of(word);
        assert!(
            !xs.is_empty() && xs.iter().all(|&x| x >= strip),
            "{word}: {xs:?}"
        );
    }
    assert!(
        xs_of("paused").is_empty(),
        "an unvisited phase is not in the legend"
    );
}
