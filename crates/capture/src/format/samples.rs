//! Data age in the evidence: the header's declared sources and a cycle's
//! sample records (schema 2, additive; docs/evidence-format.md).

use serde::{Deserialize, Serialize};

/// A declared data source (schema 2, added with data age): a camera, a
/// robot state stream, a policy output. Cycles record which sample of it
/// they used ([`SampleRecord`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceInfo {
    /// The source's name, unique among the recorder's sources.
    pub name: String,
    /// The clock its stamps are on: `host_monotonic` (comparable with the
    /// recorder's times, so ages are computed), or a name of the caller's
    /// (another host, a device clock: ages are not computed, and the
    /// analyzer says why).
    pub clock: String,
    /// The age beyond which a use counts as stale, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ns: Option<u64>,
}

/// One sample a cycle used (or, `produced`, published): which sample of
/// which source, its stamp, and when the cycle touched it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRecord {
    /// The source's name (one of `Header::sources`).
    pub source: String,
    /// The sample's sequence number, as the producer counts it.
    pub seq: u64,
    /// The sample's stamp on its source's clock: its capture time, or for a
    /// polled state its request time.
    pub stamp_ns: u64,
    /// When the recorder was told (host monotonic): the moment of use, or
    /// of publication when `produced`.
    pub at_ns: u64,
    /// True when this thread published the sample rather than used it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub produced: bool,
}
