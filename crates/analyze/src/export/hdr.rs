//! HdrHistogram interval logs, written with the `hdrhistogram` crate: each
//! metric of an episode as one `Histogram<u64>`, serialized by its
//! `V2DeflateSerializer` (the compressed V2 encoding), one tagged line each
//! through its `IntervalLogWriter` (docs/export.md).
//!
//! The crate writes the interval lines and comments; the log's version line
//! and the column legend, which it does not write, come first from here, so
//! that HdrHistogram's own log readers and the Python `hdrhistogram`
//! package read the file as before.

use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

use crate::error::{AnalyzeError, Result};

/// The highest value an exported histogram tracks: one hour in ns.
pub const HDR_HIGHEST_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits of an exported histogram.
pub const HDR_DIGITS: u8 = 3;

/// One interval of the log: a tag and its samples.
#[derive(Debug)]
pub struct Interval<'a> {
    /// The tag; commas and whitespace already replaced.
    pub tag: &'a str,
    /// From the log's time origin to the first sample.
    pub start: Duration,
    /// From the first sample to the last.
    pub length: Duration,
    /// The samples (ns); negative ones are counted as 0.
    pub values: &'a [i64],
}

/// A histogram of 1 ns ..= [`HDR_HIGHEST_NS`] at [`HDR_DIGITS`] digits.
pub fn histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, HDR_HIGHEST_NS, HDR_DIGITS).map_err(|e| encode_err(&e))
}

/// The log: the version line, a comment naming `source`, the legend, then
/// one line per interval, in the order given. Values above one hour are
/// counted at one hour; a comment before an interval says how many of its
/// values were negative (counted as 0).
///
/// # Errors
/// [`AnalyzeError::Encode`] if the crate refuses a histogram (a bug).
pub fn write_log<'a>(
    source: &str,
    intervals: impl IntoIterator<Item = Interval<'a>>,
) -> Result<String> {
    let mut out: Vec<u8> = Vec::new();
    out.extend_from_slice(b"#[Histogram log format version 1.3]\n");
    out.extend_from_slice(
        format!(
            "#[looptime export of {source}: values in ns, Interval_Max in ms, times in s since the first cycle]\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(
        b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
    );
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .with_max_value_divisor(1e6)
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| encode_err(&e))?;
    let mut h = histogram()?;
    for iv in intervals {
        h.reset();
        let mut negative = 0u64;
        for &v in iv.values {
            negative += u64::from(v < 0);
            h.saturating_record(v.max(0) as u64);
        }
        if negative > 0 {
            log.write_comment(&format!(
                "[{}: {negative} negative values counted as 0]",
                iv.tag
            ))
            .map_err(|e| encode_err(&e))?;
        }
        let tag = Tag::new(iv.tag).ok_or_else(|| {
            AnalyzeError::Encode(format!("tag {:?} has a comma or whitespace", iv.tag))
        })?;
        log.write_histogram(&h, iv.start, iv.length, Some(tag))
            .map_err(|e| encode_err(&e))?;
    }
    drop(log);
    // Only the source path, which is the caller's text, could be non-UTF-8;
    // it came in as a str.
    String::from_utf8(out).map_err(|e| encode_err(&e))
}

fn encode_err(e: &dyn std::fmt::Display) -> AnalyzeError {
    AnalyzeError::Encode(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn the_log_reads_back_through_the_crate_with_every_count() {
        // Two intervals: 1,000 periods of 10,000,000 ns ± 1 µs, and three
        // lags, one negative. Each must decode to its counts.
        let periods: Vec<i64> = (0..1000).map(|i| 10_000_000 + (i % 3 - 1) * 1000).collect();
        let lags = [-5_000i64, 20_000, 40_000];
        let text = write_log(
            "runs/x",
            [
                Interval {
                    tag: "running/period",
                    start: Duration::from_millis(10),
                    length: Duration::from_secs(10),
                    values: &periods,
                },
                Interval {
                    tag: "running/deadline_lag",
                    start: Duration::from_millis(10),
                    length: Duration::from_secs(10),
                    values: &lags,
                },
            ],
        )
        .unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "#[Histogram log format version 1.3]");
        assert!(lines[2].starts_with("\"StartTimestamp\""));
        assert!(text.contains("#[running/deadline_lag: 1 negative values counted as 0]"));
        let mut read = Vec::new();
        for entry in IntervalLogIterator::new(text.as_bytes()) {
            if let Ok(LogEntry::Interval(iv)) = entry {
                let bytes = base64_decode(iv.encoded_histogram());
                let h: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut bytes.as_slice())
                    .unwrap();
                read.push((iv.tag().unwrap().as_str().to_string(), iv.max(), h));
            }
        }
        assert_eq!(read.len(), 2);
        let (tag, max_ms, h) = &read[0];
        assert_eq!(tag, "running/period");
        assert_eq!(h.len(), 1000);
        // 10,001,000 ns, to the bucket at 3 digits: Interval_Max is the
        // bucket's highest equivalent value, within 1/1024 of it, in ms.
        assert!((max_ms - 10.001).abs() < 10.001 / 1024.0, "{max_ms}");
        // The median is 10,000,000 ns to within its bucket.
        assert!(h.equivalent(h.value_at_quantile(0.5), 10_000_000));
        let (tag, _, h) = &read[1];
        assert_eq!(tag, "running/deadline_lag");
        assert_eq!(h.len(), 3);
        assert_eq!(h.count_at(0), 1, "the negative lag is counted as 0");
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(s).unwrap()
    }
}
