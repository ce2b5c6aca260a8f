//! `scheduler.spin_margin_us`: microseconds, or `"auto"`, in TOML and on
//! the command line, and the default a file that does not write it gets.

use serde::{Deserialize, Serialize};

use looptime_runtime::scheduler::{SchedulerConfig, DEFAULT_SPIN_MARGIN_NS};

use super::Config;

impl Config {
    /// An unwritten spin margin is the default (200 µs) within the ceiling
    /// of the rate (half the period): call it again after a flag changes
    /// the rate. A margin the file wrote is left as written (and checked).
    pub fn fit_default_margin(&mut self) {
        if !self.scheduler.margin_written {
            let ceiling = SchedulerConfig::margin_ceiling(self.nominal_period_ns());
            self.scheduler.spin_margin_us =
                SpinMargin::Us(DEFAULT_SPIN_MARGIN_NS.min(ceiling) as f64 / 1e3);
        }
    }
}

/// `scheduler.spin_margin_us` (and `looptime probe --spin-margin-us`): a
/// fixed margin in µs, or `"auto"` (looptime_runtime::margin).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SpinMargin {
    /// A fixed margin, µs.
    Us(f64),
    /// The adaptive margin.
    Auto,
}

impl std::str::FromStr for SpinMargin {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(SpinMargin::Auto);
        }
        s.parse::<f64>()
            .map(SpinMargin::Us)
            .map_err(|_| format!("`{s}` is not a spin margin: give microseconds (200) or \"auto\""))
    }
}

impl Serialize for SpinMargin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SpinMargin::Us(us) => s.serialize_f64(*us),
            SpinMargin::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for SpinMargin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Name(String),
        }
        let raw = Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("spin_margin_us is a number of microseconds (200) or \"auto\"")
        })?;
        match raw {
            Raw::Num(us) => Ok(SpinMargin::Us(us)),
            Raw::Name(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}
