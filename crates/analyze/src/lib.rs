//! `looptime-analyze`: the offline analyzer behind `analyze_control_timing`.
//!
//! It reads saved evidence only (an episode directory written by
//! `looptime serve --control-timing` or any program using
//! `looptime-capture`), builds cycle and span tables with polars and
//! recomputes every figure from `control_timing.jsonl`. The saved summary is
//! only cross-checked.
//!
//! Layers, each using only those below it (docs/architecture.md):
//!
//! | layer | may use |
//! |---|---|
//! | [`cli`] (and `main`) | everything below |
//! | [`render`]: text, JSON, HTML, plots | [`fleet`], [`compare`], [`analysis`], [`metrics`] types, [`evidence`] |
//! | [`fleet`]: many episodes in parallel, one table, outliers | [`analysis`], [`export`], [`metrics`], [`evidence`] |
//! | [`compare`]: manifest differences, resampling, verdicts | [`analysis`], [`metrics`], [`evidence`] |
//! | [`export`]: Chrome trace, HdrHistogram log, Parquet dataset | [`analysis`], [`metrics`], [`evidence`] |
//! | [`analysis`]: one analysed episode (cycle columns once, the report) | [`crosscheck`], [`metrics`], [`evidence`] |
//! | [`crosscheck`]: the summary against the recomputation | [`metrics`], [`evidence`] |
//! | [`metrics`]: one file per metric family, and the `Report` type | [`evidence`] |
//! | [`evidence`]: reads and validates an episode into tables | capture's schema, [`AnalyzeError`] |
//! | `error` | capture's error type only |
//!
//! ```no_run
//! use looptime_analyze::{analyze, load_episode, LoadOptions};
//! let ev = load_episode("runs/latest".as_ref(), LoadOptions::default())?;
//! let analysis = analyze(ev)?;
//! for p in &analysis.report.phases {
//!     println!("{}: {:?} Hz", p.phase, p.loop_hz);
//! }
//! # Ok::<(), looptime_analyze::AnalyzeError>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod analysis;
pub mod atomic;
pub mod cli;
pub mod compare;
pub mod crosscheck;
mod error;
pub mod evidence;
pub mod export;
pub mod fleet;
pub mod gate;
pub mod metrics;
pub mod profile;
pub mod render;

pub use analysis::{analyze, Analysis};
pub use error::{AnalyzeError, PlotError, Result};
pub use evidence::{load_episode, load_episode_bytes, Evidence, LoadOptions};
pub use metrics::Report;
