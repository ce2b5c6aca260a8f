//! The config as text: the canonical TOML the manifest records, and the
//! part of it `config_hash` hashes (everything but where the output goes).

use super::*;

impl Config {
    /// Keys left out of `config_hash`: where the output goes, not what
    /// ran, so identical loops recorded into different directories hash
    /// alike (docs/runtime.md).
    pub const UNHASHED_KEYS: [(&'static str, &'static str); 3] = [
        ("run", "runs_dir"),
        ("run", "timing_ring_dir"),
        ("run", "label"),
    ];

    /// The text `config_hash` hashes: [`Config::to_toml`] without the
    /// [`Config::UNHASHED_KEYS`].
    ///
    /// # Errors
    /// As [`Config::to_toml`].
    pub fn hash_text(&self) -> Result<String, ConfigError> {
        let text = self.to_toml()?;
        let mut table: toml::Table =
            toml::from_str(&text).map_err(|e| ConfigError::Unwritable {
                message: e.to_string(),
            })?;
        for (section, key) in Self::UNHASHED_KEYS {
            if let Some(t) = table.get_mut(section).and_then(|v| v.as_table_mut()) {
                t.remove(key);
            }
        }
        toml::to_string(&table).map_err(|e| ConfigError::Unwritable {
            message: e.to_string(),
        })
    }

    /// The resolved config as canonical TOML: the manifest's record of
    /// it; `config_hash` hashes it less the output locations
    /// ([`Config::hash_text`]).
    ///
    /// # Errors
    /// [`ConfigError::Unwritable`] when a value has no TOML form (an integer
    /// above `i64::MAX`, which TOML cannot hold). [`Config::validate`] calls
    /// it, so a config that passed validation always has one.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string(self).map_err(|e| ConfigError::Unwritable {
            message: e.to_string(),
        })
    }
}
