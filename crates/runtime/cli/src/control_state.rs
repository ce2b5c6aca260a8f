//! Where the control loop is, as the signal thread sees it: one atomic
//! that says whether a stop request aborts the rollout.

use std::sync::atomic::{AtomicU8, Ordering};

/// Where the control loop is, shared with the signal thread, so that what a
/// signal's first line says is what happens: a stop requested while the
/// loop runs ends it after the current cycle (the rollout is `aborted`),
/// and one that arrives after the loop's last cycle cannot abort it (the
/// rollout stays `complete`). One atomic, changed by compare-and-swap on
/// both sides, so a signal during the last cycle is one or the other,
/// never a line that says the opposite of the result.
#[derive(Debug, Default)]
pub struct LoopState(AtomicU8);

/// What a stop request meets ([`LoopState::request_stop`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopMeets {
    /// The loop runs: it ends after its current cycle, and the rollout is
    /// written marked aborted.
    RunningLoop,
    /// The loop had ended: its files are being written, and it stays
    /// complete.
    Finishing,
    /// No loop was running (before the first cycle or between rollouts).
    NoLoop,
}

impl LoopState {
    const IDLE: u8 = 0;
    const LOOPING: u8 = 1;
    const STOP: u8 = 2;
    const FINISHING: u8 = 3;

    /// A stop request (the signal thread's side).
    pub fn request_stop(&self) -> StopMeets {
        match self.0.compare_exchange(
            Self::LOOPING,
            Self::STOP,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => StopMeets::RunningLoop,
            Err(Self::STOP) => StopMeets::RunningLoop,
            Err(Self::FINISHING) => StopMeets::Finishing,
            Err(_) => StopMeets::NoLoop,
        }
    }

    /// The loop starts (or had a stop requested before: then it stops at
    /// its first check).
    pub(super) fn enter(&self) {
        let _ = self.0.compare_exchange(
            Self::IDLE,
            Self::LOOPING,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }

    /// Whether a stop was requested while the loop ran.
    pub(super) fn stop_requested(&self) -> bool {
        self.0.load(Ordering::Relaxed) == Self::STOP
    }

    /// The loop ran its last cycle. Returns true when a stop was requested
    /// meanwhile (its line said aborted, so the rollout is aborted).
    pub(super) fn finish(&self) -> bool {
        self.0
            .compare_exchange(
                Self::LOOPING,
                Self::FINISHING,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_err()
    }

    /// The rollout's files are written.
    pub(crate) fn idle(&self) {
        self.0.store(Self::IDLE, Ordering::SeqCst);
    }
}
