//! `looptime-analyze`: the offline analyzer behind `analyze_control_timing`.
//!
//! It reads saved evidence only (an episode directory written by
//! `looptime serve --control-timing` or any program using
//! `looptime-capture`), builds cycle and span tables with polars and
//! recomputes every figure from `control_timing.jsonl`. The saved summary is
//! only cross-checked.
//!
//! ```no_run
//! use looptime_analyze::{analyze, load_episode, LoadOptions};
//! let ev = load_episode("runs/latest".as_ref(), LoadOptions::default())?;
//! let report = analyze(&ev)?;
//! for p in &report.phases {
//!     println!("{}: {:?} Hz", p.phase, p.loop_hz);
//! }
//! # Ok::<(), looptime_analyze::AnalyzeError>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod compare;
pub mod crosscheck;
mod error;
pub mod html;
pub mod load;
pub mod metrics;
pub mod plots;
pub mod text;

pub use error::{AnalyzeError, Result};
pub use load::{load_episode, Evidence, LoadOptions};
pub use metrics::{analyze, Report};
