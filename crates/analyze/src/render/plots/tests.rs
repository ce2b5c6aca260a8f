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
