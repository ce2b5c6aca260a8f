//! Aggregation helpers shared by the metric families: the distribution
//! expressions (count, mean, min, max, nearest-rank p50/p90/p99/p99.9), a
//! typed view of an aggregated `DataFrame`, and the report's rounding.

use polars::prelude::*;

use super::report::Dist;
use crate::error::Result;

pub(crate) fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
pub(crate) fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

const QS: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)];

pub(crate) fn dist_aggs(c: &str) -> Vec<Expr> {
    dist_aggs_of(c, col(c))
}

fn dist_aggs_of(c: &str, e: Expr) -> Vec<Expr> {
    let mut v = vec![
        e.clone().count().alias(format!("{c}__count")),
        e.clone().mean().alias(format!("{c}__mean")),
        e.clone().min().alias(format!("{c}__min")),
        e.clone().max().alias(format!("{c}__max")),
    ];
    for (name, q) in QS {
        v.push(
            e.clone()
                .quantile(lit(q), QuantileMethod::Equiprobable)
                .alias(format!("{c}__{name}")),
        );
    }
    v
}

pub(crate) struct Table {
    pub(crate) df: DataFrame,
}

impl Table {
    pub(crate) fn f(&self, name: &str, i: usize) -> Result<Option<f64>> {
        let s = self
            .df
            .column(name)?
            .as_materialized_series()
            .cast(&DataType::Float64)?;
        Ok(s.f64()?.get(i))
    }
    pub(crate) fn u(&self, name: &str, i: usize) -> Result<u64> {
        Ok(self.f(name, i)?.unwrap_or(0.0) as u64)
    }
    pub(crate) fn height(&self) -> usize {
        self.df.height()
    }
    pub(crate) fn dist(&self, c: &str, i: usize) -> Result<Option<Dist>> {
        let count = self.u(&format!("{c}__count"), i)?;
        if count == 0 {
            return Ok(None);
        }
        let g =
            |s: &str| -> Result<i64> { Ok(self.f(&format!("{c}__{s}"), i)?.unwrap_or(0.0) as i64) };
        Ok(Some(Dist {
            count,
            mean_ns: r1(self.f(&format!("{c}__mean"), i)?.unwrap_or(0.0)),
            min_ns: g("min")?,
            p50_ns: g("p50")?,
            p90_ns: g("p90")?,
            p99_ns: g("p99")?,
            p999_ns: g("p999")?,
            max_ns: g("max")?,
        }))
    }
}

pub(crate) fn hz(mean_period: Option<f64>) -> Option<f64> {
    mean_period.filter(|m| *m > 0.0).map(|m| r4(1e9 / m))
}

impl Table {
    /// Group `df` by `key`, aggregate with `aggs`, sort by `sort`.
    pub(crate) fn grouped(df: &DataFrame, key: &str, aggs: Vec<Expr>, sort: &str) -> Result<Table> {
        Ok(Table {
            df: df
                .clone()
                .lazy()
                .group_by([col(key)])
                .agg(aggs)
                .sort([sort], Default::default())
                .collect()?,
        })
    }

    /// The row whose `key` column equals `v`.
    pub(crate) fn find(&self, key: &str, v: f64) -> Result<Option<usize>> {
        for i in 0..self.height() {
            if self.f(key, i)? == Some(v) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }
}
