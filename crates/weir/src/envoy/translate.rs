//! The protocol's messages to and from the engine's: envoy-types' generated structs
//! (from Envoy's own `.proto` files) on one side, `EnvoyAsk` and `EnvoyAnswer` on the
//! other.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as PbUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tonic::Status;

use crate::engine::{DescriptorAnswer, DescriptorAsk, EnvoyAnswer, EnvoyAsk, Unit};

/// The most descriptors one request may carry (Envoy sends one per matching
/// `rate_limits` entry: a handful).
pub(super) const MAX_DESCRIPTORS: usize = 256;

/// The most entries one descriptor may have.
pub(super) const MAX_ENTRIES: usize = 64;

/// The engine's question, or `INVALID_ARGUMENT` for a request envoyproxy/ratelimit
/// refuses too (no domain, no descriptors), a limit override in an unknown unit, or
/// more than [`MAX_DESCRIPTORS`] descriptors or [`MAX_ENTRIES`] entries in one.
pub(super) fn ask(request: &RateLimitRequest) -> Result<EnvoyAsk<'_>, Status> {
    if request.descriptors.len() > MAX_DESCRIPTORS
        || request
            .descriptors
            .iter()
            .any(|d| d.entries.len() > MAX_ENTRIES)
    {
        return Err(Status::invalid_argument(format!(
            "at most {MAX_DESCRIPTORS} descriptors of at most {MAX_ENTRIES} entries each"
        )));
    }
    if request.domain.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit domain must not be empty",
        ));
    }
    if request.descriptors.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit descriptor list must not be empty",
        ));
    }
    let default_hits = u64::from(request.hits_addend.max(1));
    let descriptors = request
        .descriptors
        .iter()
        .map(|descriptor| {
            let limit = match &descriptor.limit {
                Some(limit) => {
                    let unit = PbUnit::try_from(limit.unit)
                        .ok()
                        .and_then(unit_from)
                        .ok_or_else(|| {
                            Status::invalid_argument(format!(
                                "a descriptor's limit has an unknown unit ({})",
                                limit.unit
                            ))
                        })?;
                    Some((limit.requests_per_unit, unit))
                }
                None => None,
            };
            // Negative hits (giving back) are not implemented: such a descriptor only
            // looks.
            let hits = if descriptor.is_negative_hits {
                0
            } else {
                descriptor
                    .hits_addend
                    .as_ref()
                    .map_or(default_hits, |hits| hits.value)
            };
            Ok(DescriptorAsk {
                entries: descriptor
                    .entries
                    .iter()
                    .map(|e| (e.key.as_str(), e.value.as_str()))
                    .collect(),
                limit,
                hits,
            })
        })
        .collect::<Result<_, Status>>()?;
    Ok(EnvoyAsk {
        domain: &request.domain,
        descriptors,
    })
}

/// The protocol's answer; with `headers`, the `RateLimit-*` fields of the descriptor
/// closest to its limit (an over-limit one first), as envoyproxy/ratelimit adds them.
pub(super) fn response(answer: &EnvoyAnswer, headers: bool) -> RateLimitResponse {
    let statuses: Vec<DescriptorStatus> = answer.statuses.iter().map(status).collect();
    let response_headers_to_add = if headers {
        closest(&answer.statuses).map_or_else(Vec::new, rate_limit_headers)
    } else {
        Vec::new()
    };
    RateLimitResponse {
        overall_code: code(answer.over_limit) as i32,
        statuses,
        response_headers_to_add,
        ..RateLimitResponse::default()
    }
}

fn code(over_limit: bool) -> Code {
    if over_limit {
        Code::OverLimit
    } else {
        Code::Ok
    }
}

fn status(answer: &DescriptorAnswer) -> DescriptorStatus {
    DescriptorStatus {
        code: code(answer.over_limit) as i32,
        current_limit: answer.limit.as_ref().map(|limit| RateLimit {
            name: limit.name.clone(),
            requests_per_unit: limit.requests_per_unit,
            unit: unit_to(limit.unit) as i32,
        }),
        limit_remaining: answer.remaining,
        duration_until_reset: answer.until_reset.map(|d| PbDuration {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
        }),
        quota: None,
    }
}

/// The descriptor with a limit closest to it: the first over its limit, else the one
/// with the least remaining.
fn closest(statuses: &[DescriptorAnswer]) -> Option<&DescriptorAnswer> {
    let limited = || statuses.iter().filter(|s| s.limit.is_some());
    limited()
        .find(|s| s.over_limit)
        .or_else(|| limited().min_by_key(|s| s.remaining))
}

fn rate_limit_headers(status: &DescriptorAnswer) -> Vec<HeaderValue> {
    let limit = status.limit.as_ref().map_or(0, |l| l.requests_per_unit);
    // Whole seconds, rounded up: a window with 0.3 s left resets in 1.
    let reset = status
        .until_reset
        .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
    // itoa, not `to_string`: Rust's formatting machinery costs several times more.
    let mut digits = itoa::Buffer::new();
    [
        ("RateLimit-Limit", u64::from(limit)),
        ("RateLimit-Remaining", u64::from(status.remaining)),
        ("RateLimit-Reset", reset),
    ]
    .into_iter()
    .map(|(key, value)| HeaderValue {
        key: key.to_owned(),
        value: digits.format(value).to_owned(),
        ..HeaderValue::default()
    })
    .collect()
}

fn unit_from(unit: PbUnit) -> Option<Unit> {
    Some(match unit {
        PbUnit::Unknown => return None,
        PbUnit::Second => Unit::Second,
        PbUnit::Minute => Unit::Minute,
        PbUnit::Hour => Unit::Hour,
        PbUnit::Day => Unit::Day,
        PbUnit::Week => Unit::Week,
        PbUnit::Month => Unit::Month,
        PbUnit::Year => Unit::Year,
    })
}

fn unit_to(unit: Unit) -> PbUnit {
    match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    }
}
