//! `LOOPTIME_PROFILE=1`: how long each step of loading and analysing an
//! episode takes, printed to stderr (docs/performance.md uses it). Off, a
//! step costs one check of a flag read once.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Whether `LOOPTIME_PROFILE` is set (to anything but empty or `0`).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var_os("LOOPTIME_PROFILE").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

/// Print one step's time.
pub fn report(step: &str, took: Duration) {
    eprintln!("profile: {step:<40} {:>10.1} ms", took.as_secs_f64() * 1e3);
}

/// Times the scope it lives in, when profiling is on.
#[derive(Debug)]
pub struct Step {
    name: &'static str,
    start: Option<Instant>,
}

/// Start timing `name`; the time is printed when the value is dropped.
pub fn step(name: &'static str) -> Step {
    Step {
        name,
        start: enabled().then(Instant::now),
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        if let Some(t) = self.start {
            report(self.name, t.elapsed());
        }
    }
}
