//! The HTTP edge every front door shares: problems as `application/problem+json`, the
//! RateLimit header fields, and the engine's verdicts as answers (the 429 with
//! `Retry-After`, the RateLimit fields on every decided answer).

mod problem;
pub mod ratelimit;

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

pub use self::problem::Problem;
use self::ratelimit::{Quota, ceil_secs};
use crate::engine::{Denied, Refused, RuleDecision};

/// Adds the RateLimit fields of `quotas` (and the older fields when `legacy`).
pub fn add_quota_headers(headers: &mut HeaderMap, quotas: &[RuleDecision<'_>], legacy: bool) {
    let list: Vec<Quota<'_>> = quotas.iter().map(RuleDecision::quota).collect();
    ratelimit::insert(headers, &list);
    if legacy {
        ratelimit::insert_legacy(headers, &list);
    }
}

/// The 429 answer: problem+json naming the violated rules, `Retry-After`, RateLimit.
pub fn too_many(denied: &Denied<'_>, legacy: bool) -> Response {
    let violated = denied.violated().map(str::to_owned).collect();
    let retry = denied.retry_after().map(ceil_secs);
    let mut response = Problem::rate_limited(violated, retry).into_response();
    add_quota_headers(response.headers_mut(), &denied.quotas, legacy);
    response
}

/// A request the engine refused to decide on (400, 415 or 421).
pub fn refused(refused: &Refused) -> Response {
    Problem::refused(refused.reason, refused.detail.clone()).into_response()
}
