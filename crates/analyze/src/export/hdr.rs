//! HdrHistogram interval logs: each metric of an episode as one compressed
//! V2 histogram, base64 encoded, one tagged line each (docs/export.md).
//!
//! The histogram layout follows HdrHistogram's published encoding: values
//! are counted in buckets of `2^(k + u)` with 2,048 sub-buckets per
//! bucket at 3 significant digits; the counts are written as ZigZag LEB128
//! varints with runs of zeros as one negative count; the payload is
//! zlib-compressed behind an 8-byte header.

use std::io::Write;

use base64::Engine as _;

/// The V2 encoding cookie with the word-size nibble of the ZigZag LEB128
/// counts (0x10).
const ENCODING_COOKIE: u32 = 0x1c84_9303 | 0x10;
/// The V2 compressed-encoding cookie.
const COMPRESSION_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// A histogram of non-negative integer values (ns), as HdrHistogram lays
/// its counts out.
#[derive(Clone, Debug)]
pub struct Histogram {
    lowest: u64,
    highest: u64,
    digits: u32,
    unit_magnitude: u32,
    sub_bucket_half_count_magnitude: u32,
    sub_bucket_half_count: u64,
    sub_bucket_mask: u64,
    leading_zero_count_base: u32,
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

impl Histogram {
    /// A histogram of values 1 ..= `highest` (at least 2) with `digits`
    /// significant decimal digits (1 to 5). Values above `highest` are
    /// counted at `highest`.
    pub fn new(highest: u64, digits: u32) -> Histogram {
        let lowest = 1u64;
        let digits = digits.clamp(1, 5);
        let highest = highest.max(2 * lowest);
        let unit_magnitude = 63 - lowest.leading_zeros();
        let largest_single_unit = 2 * 10u64.pow(digits);
        // ⌈log2(2·10^digits)⌉
        let sub_bucket_count_magnitude = 64 - (largest_single_unit - 1).leading_zeros();
        let sub_bucket_half_count_magnitude = sub_bucket_count_magnitude.max(1) - 1;
        let sub_bucket_count = 1u64 << (sub_bucket_half_count_magnitude + 1);
        let sub_bucket_half_count = sub_bucket_count / 2;
        let sub_bucket_mask = (sub_bucket_count - 1) << unit_magnitude;
        let mut smallest_untrackable = sub_bucket_count << unit_magnitude;
        let mut buckets = 1u64;
        while smallest_untrackable <= highest {
            if smallest_untrackable > u64::MAX / 4 {
                buckets += 1;
                break;
            }
            smallest_untrackable <<= 1;
            buckets += 1;
        }
        let len = ((buckets + 1) * sub_bucket_half_count) as usize;
        Histogram {
            lowest,
            highest,
            digits,
            unit_magnitude,
            sub_bucket_half_count_magnitude,
            sub_bucket_half_count,
            sub_bucket_mask,
            leading_zero_count_base: 64 - unit_magnitude - sub_bucket_half_count_magnitude - 1,
            counts: vec![0; len],
            total: 0,
            max: 0,
        }
    }

    fn index(&self, v: u64) -> usize {
        let bucket = self.leading_zero_count_base - (v | self.sub_bucket_mask).leading_zeros();
        let sub = v >> (bucket + self.unit_magnitude);
        (((bucket as u64 + 1) << self.sub_bucket_half_count_magnitude) + sub
            - self.sub_bucket_half_count) as usize
    }

    /// Count `v` once (values above `highest` at `highest`).
    pub fn record(&mut self, v: u64) {
        let v = v.min(self.highest);
        let i = self.index(v);
        self.counts[i] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    /// Values counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The largest value counted.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The uncompressed V2 encoding: a 40-byte big-endian header (cookie,
    /// payload length, normalising offset 0, digits, lowest, highest,
    /// conversion ratio 1.0), then the counts up to the last non-zero one
    /// as ZigZag LEB128 varints, a run of `k` zeros as `−k`.
    fn encode(&self) -> Vec<u8> {
        let last = self
            .counts
            .iter()
            .rposition(|&c| c != 0)
            .map_or(0, |i| i + 1);
        let mut payload = Vec::new();
        let mut i = 0;
        while i < last {
            let c = self.counts[i];
            if c == 0 {
                let run = self.counts[i..last].iter().take_while(|&&c| c == 0).count();
                put_zigzag(&mut payload, -(run as i64));
                i += run;
            } else {
                put_zigzag(&mut payload, c as i64);
                i += 1;
            }
        }
        let mut out = Vec::with_capacity(40 + payload.len());
        out.extend_from_slice(&ENCODING_COOKIE.to_be_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&self.digits.to_be_bytes());
        out.extend_from_slice(&self.lowest.to_be_bytes());
        out.extend_from_slice(&self.highest.to_be_bytes());
        out.extend_from_slice(&1.0f64.to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// The compressed V2 encoding, base64 (standard alphabet, padded): the
    /// compression cookie, the length of the zlib stream, the zlib stream of
    /// the uncompressed V2 encoding.
    pub fn to_base64(&self) -> String {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        // Writing into a Vec cannot fail.
        let _ = z.write_all(&self.encode());
        let compressed = z.finish().unwrap_or_default();
        let mut out = Vec::with_capacity(8 + compressed.len());
        out.extend_from_slice(&COMPRESSION_COOKIE.to_be_bytes());
        out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
        out.extend_from_slice(&compressed);
        base64::engine::general_purpose::STANDARD.encode(out)
    }
}

/// ZigZag, then LEB128 (7 bits a byte, low first, high bit = more; at
/// most 9 bytes, the ninth carrying 8 bits).
fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    for _ in 0..8 {
        if u < 0x80 {
            out.push(u as u8);
            return;
        }
        out.push((u as u8 & 0x7f) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_leb128_matches_hand_encoded_bytes() {
        // 1 → zigzag 2 → [0x02]; −1 → 1 → [0x01]; 300 → 600 = 0b100_1011000
        // → [0xD8, 0x04]; −3 (a run of three zeros) → 5 → [0x05].
        let mut b = Vec::new();
        for v in [1, -1, 300, -3] {
            put_zigzag(&mut b, v);
        }
        assert_eq!(b, vec![0x02, 0x01, 0xD8, 0x04, 0x05]);
    }

    #[test]
    fn layout_matches_the_published_bucket_rule() {
        // 3 digits: 2,048 sub-buckets (2·10³ = 2,000 → 2^11); values below
        // 2,048 each get their own slot, so index(v) = v.
        let h = Histogram::new(3_600_000_000_000, 3);
        assert_eq!(h.sub_bucket_half_count, 1024);
        assert_eq!(h.index(1), 1);
        assert_eq!(h.index(2047), 2047);
        // 2,048 opens bucket 1 (width 2): index = (2 << 10) + 1024 − 1024.
        assert_eq!(h.index(2048), 2048);
        assert_eq!(h.index(2049), 2048);
        assert_eq!(h.index(4096), 3072);
    }

    #[test]
    fn encoding_is_a_header_and_run_length_counts() {
        let mut h = Histogram::new(1_000_000, 3);
        h.record(3);
        h.record(3);
        h.record(5);
        let e = h.encode();
        assert_eq!(&e[0..4], &ENCODING_COOKIE.to_be_bytes());
        // Counts: slots 0..=2 zero (−3), slot 3 = 2, slot 4 zero (−1), slot 5 = 1.
        assert_eq!(&e[40..], &[0x05, 0x04, 0x01, 0x02]);
        assert_eq!(u32::from_be_bytes(e[4..8].try_into().unwrap()), 4);
        assert_eq!(h.total(), 3);
    }
}
