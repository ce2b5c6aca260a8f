//! `looptime-cli`: the `looptime` command, over the `looptime-runtime`
//! library.
//!
//! This crate holds what only the command needs: its command line
//! ([`cli`]), the TOML config ([`config`]), `serve` and the simulated robot
//! ([`serve`], [`control`], [`sim`]), `probe`, `watch` and `recover`. The
//! scheduler, clocks, real-time setup, live statistics and episode layout
//! are [`looptime_runtime`]'s, which the Python and C bindings link on
//! their own.

#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
mod alloc_probe;
pub mod cli;
pub mod config;
pub mod control;
pub mod manifest;
pub mod probe;
pub mod recover;
pub mod robot;
pub mod serve;
pub mod sim;
pub mod watch;
