//! The shape of an envoyproxy/ratelimit configuration file, as serde reads it.
//!
//! The fields are that service's (`validKeys` in its `config_impl.go`), each at the
//! level where it means something; an unknown or misspelt field is refused, as that
//! service refuses it. One difference: that service accepts any of its field names at
//! any level (ignoring it where it means nothing), where weir refuses a field at a
//! level it does not belong to.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use crate::config::bans::RawOnLimited;
use crate::config::calendar::{RawStarts, RulePeriod};
use crate::config::file::AlgorithmName;
use crate::config::lease::RawLease;
use crate::config::period::Period;

/// A file: one domain and its descriptors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) domain: Option<Spanned<String>>,
    pub(super) descriptors: Option<Vec<Spanned<RawDescriptor>>>,
}

/// A descriptor: a key, maybe a value, maybe a limit, maybe descriptors under it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDescriptor {
    pub(super) key: Option<String>,
    pub(super) value: Option<String>,
    pub(super) rate_limit: Option<Spanned<RawRateLimit>>,
    pub(super) descriptors: Option<Vec<Spanned<RawDescriptor>>>,
    pub(super) shadow_mode: Option<bool>,
    /// Quota mode: an over-limit quota descriptor fails the request only when every
    /// quota descriptor of the request is over.
    pub(super) quota_mode: Option<bool>,
    /// Statistics options of that service: weir's metrics are its own; ignored.
    #[serde(rename = "detailed_metric")]
    _detailed_metric: Option<bool>,
    /// Ignored, as `detailed_metric`.
    #[serde(rename = "value_to_metric")]
    _value_to_metric: Option<bool>,
    /// One counter shared by every value the descriptor's wildcard matches; refused
    /// without a wildcard, as there.
    pub(super) share_threshold: Option<bool>,
    /// Dynamic metadata for Envoy: accepted, not sent.
    #[serde(rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    /// weir's additions to the descriptor's `rate_limit` (envoyproxy/ratelimit refuses
    /// the field: a file that has it is weir's).
    #[serde(rename = "x-weir")]
    pub(super) x_weir: Option<Spanned<RawWeir>>,
}

/// `x-weir`: how weir decides the descriptor's `rate_limit`: `requests_per_unit`
/// requests by `algorithm` per `period` (the unit's by default), with a `burst`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWeir {
    pub(super) algorithm: Option<AlgorithmName>,
    /// A duration, or a calendar period (`calendar_month`...), as a rule's `period`.
    pub(super) period: Option<Spanned<RulePeriod>>,
    /// A calendar period's time zone, as a rule's.
    pub(super) time_zone: Option<Spanned<String>>,
    /// Where a calendar period's windows start, as a rule's.
    pub(super) starts: Option<Spanned<RawStarts>>,
    pub(super) burst: Option<Spanned<u64>>,
    /// When the store cannot decide: `open` (the local fallback) or `unavailable`.
    pub(super) failure: Option<RawFailure>,
    /// More limits on the descriptor, each counted beside the `rate_limit`.
    pub(super) also: Option<Vec<Spanned<RawAlso>>>,
    /// How the descriptor's keys are leased on a shared store, as a rule's `lease`.
    pub(super) lease: Option<Spanned<RawLease>>,
    /// Ban a descriptor's values denied `after` times within `within`, as a rule's
    /// `on_limited` (no `status`: the answer is `OVER_LIMIT`).
    pub(super) on_limited: Option<Spanned<RawOnLimited>>,
}

/// One of `x-weir: { also }`: a `rate_limit`'s fields and `x-weir`'s in one mapping.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAlso {
    pub(super) requests_per_unit: Option<u32>,
    pub(super) unit: Option<Spanned<String>>,
    pub(super) name: Option<String>,
    pub(super) algorithm: Option<AlgorithmName>,
    pub(super) period: Option<Spanned<Period>>,
    pub(super) burst: Option<Spanned<u64>>,
}

/// A descriptor's own failure policy.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawFailure {
    Unavailable,
    Open,
}

/// A descriptor's `rate_limit`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRateLimit {
    pub(super) requests_per_unit: Option<u32>,
    pub(super) unit: Option<Spanned<String>>,
    pub(super) unlimited: Option<bool>,
    pub(super) name: Option<String>,
    pub(super) replaces: Option<Vec<Spanned<RawReplaces>>>,
}

/// One entry of `replaces`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReplaces {
    pub(super) name: Option<String>,
}
