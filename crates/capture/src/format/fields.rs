//! Field helpers the records' serde attributes name.

use serde::Deserialize;

pub(super) fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// An optional field that has a default reads `null` as that default, as
/// docs/evidence-format.md says of every optional field (absent and `null`
/// are the same).
pub(super) fn null_is_default<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
