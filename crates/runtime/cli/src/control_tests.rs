//! Tests of `control`: what a stop request meets at each point of a
//! rollout.

use super::{LoopState, StopMeets};

#[test]
fn a_signal_says_what_happens_to_the_rollout() {
    // During the loop: it stops after the current cycle, aborted.
    let s = LoopState::default();
    s.enter();
    assert_eq!(s.request_stop(), StopMeets::RunningLoop);
    assert!(s.stop_requested());
    assert!(s.finish(), "told aborted, so aborted");
    s.idle();

    // During the last cycle: the loop has no further check, but its
    // finish sees the request, so the line ("aborted") holds.
    s.enter();
    assert_eq!(s.request_stop(), StopMeets::RunningLoop);
    assert!(s.finish());
    s.idle();

    // After the last cycle, while the files are written: complete,
    // and the line says so; a second signal says the same.
    s.enter();
    assert!(!s.finish(), "no stop requested: complete");
    assert_eq!(s.request_stop(), StopMeets::Finishing);
    assert_eq!(s.request_stop(), StopMeets::Finishing);
    s.idle();

    // Between rollouts.
    assert_eq!(s.request_stop(), StopMeets::NoLoop);
    assert!(!s.stop_requested());
}
