//! `looptime-runtime`: the loop scheduler, clocks, real-time setup, live
//! statistics and the episode directory layout, as a library.
//!
//! It is what the Python binding (`crates/python`) and the C library
//! (`crates/capture-c`) link, and what the `looptime` command
//! (`crates/runtime/cli`, crate `looptime-cli`) is built on. It has no
//! command line, no config file format and no terminal UI: those, and the
//! simulated robot, are the command's.
//!
//! The [`scheduler`] is a library a real robot runtime can use on its own:
//! absolute deadlines, sleep-then-spin, overrun policies and measured `dt`,
//! on an injected [`clock::LoopClock`].
//!
//! ```
//! use looptime_runtime::clock::MockClock;
//! use looptime_runtime::scheduler::{Scheduler, SchedulerConfig};
//!
//! // 100 Hz on a mock clock: no real sleeping.
//! let clock = MockClock::new(0);
//! let mut sched = Scheduler::new(clock.clone(), SchedulerConfig::new(10_000_000)).unwrap();
//! sched.start();
//! let first = sched.wait();
//! assert_eq!(first.target_ns, 10_000_000);
//! clock.advance(6_000_000); // 6 ms of work
//! let second = sched.wait(); // sleeps the remaining 4 ms
//! assert_eq!(second.target_ns, 20_000_000);
//! assert_eq!(second.dt_measured_ns, 10_000_000);
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
pub mod embed;
pub mod episode;
pub mod error;
pub mod input;
pub mod margin;
pub mod rt;
pub mod scheduler;
pub mod stats;
pub mod sys;
