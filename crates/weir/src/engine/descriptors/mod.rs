//! Envoy's rate limit service (`ShouldRateLimit`) as the engine decides it: the
//! descriptor limits of envoyproxy/ratelimit's configuration ([`Descriptors`]), a
//! request's descriptors ([`EnvoyAsk`]) and the answer per descriptor
//! ([`EnvoyAnswer`]). The gRPC door translates the protocol's messages to and from
//! these; the decisions are the store's, as every door's are.

mod also;
mod ask;
mod bans;
mod groups;
mod limits;
mod lists;
mod overrides;
mod should_rate_limit;

pub(crate) use self::also::AlsoLimit;
pub(crate) use self::ask::{CurrentLimit, DescriptorAnswer, DescriptorAsk, EnvoyAnswer, EnvoyAsk};
pub(crate) use self::limits::{DescriptorLimit, Descriptors, NodeId, Quota, Unit};
pub(crate) use self::overrides::{descriptor_key, named as named_limit};
pub(crate) use self::should_rate_limit::RULE as ENVOY_RULE;

/// One small value per descriptor of a call (its key, ban, decisions, checks) or per
/// entry of a descriptor, kept inline for the usual few: Envoy's route actions send one
/// to three descriptors of a few entries, and none of these then costs an allocation.
/// The large ones (limits, statuses) stay in `Vec`s: moving them inline costs more
/// than allocating them (callgrind, BENCHMARKS.md).
pub(crate) type PerDescriptor<T> = smallvec::SmallVec<[T; 4]>;
