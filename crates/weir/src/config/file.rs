//! The configuration file's shape, as serde reads it, before validation.
//!
//! Every struct refuses unknown fields, so a misspelt field is an error rather than a
//! silently ignored line. Values that later checks need to point at are `Spanned`, so
//! that those checks can name the line too.

use serde::Deserialize;
use serde_saphyr::Spanned;
use weir_core::Algorithm;

use super::period::Period;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) store: RawStore,
    pub(super) rules: Vec<RawRule>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    #[serde(rename = "type", default)]
    pub(super) kind: Option<Spanned<StoreKind>>,
    pub(super) max_keys: Option<Spanned<usize>>,
    pub(super) url: Option<Spanned<String>>,
    pub(super) nodes: Option<Spanned<Vec<String>>>,
    pub(super) key_prefix: Option<Spanned<String>>,
    pub(super) timeout: Option<Spanned<Period>>,
    pub(super) clock: Option<Spanned<ClockName>>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum StoreKind {
    #[default]
    Memory,
    Redis,
    RedisCluster,
}

/// Whose clock decides, as written in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ClockName {
    Redis,
    Local,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) name: Spanned<String>,
    pub(super) algorithm: AlgorithmName,
    pub(super) limit: Spanned<u64>,
    pub(super) period: Spanned<Period>,
    #[serde(default)]
    pub(super) burst: Option<Spanned<u64>>,
}

/// Algorithm names as written in configuration.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum AlgorithmName {
    FixedWindow,
    SlidingLog,
    SlidingWindow,
    TokenBucket,
    Gcra,
    LeakyBucket,
}

impl From<AlgorithmName> for Algorithm {
    fn from(name: AlgorithmName) -> Self {
        match name {
            AlgorithmName::FixedWindow => Algorithm::FixedWindow,
            AlgorithmName::SlidingLog => Algorithm::SlidingLog,
            AlgorithmName::SlidingWindow => Algorithm::SlidingWindow,
            AlgorithmName::TokenBucket => Algorithm::TokenBucket,
            AlgorithmName::Gcra => Algorithm::Gcra,
            AlgorithmName::LeakyBucket => Algorithm::LeakyBucket,
        }
    }
}
