//! The engine's verdicts as HTTP answers, the same from every front door: the 429
//! problem with `Retry-After`, and the RateLimit fields on every decided answer.

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::headers::{self, Quota, ceil_secs};
use super::problem::Problem;
use crate::engine::{Denied, RuleDecision};

/// Adds the RateLimit fields of `quotas` (and the older fields when `legacy`).
pub fn add_quota_headers(headers: &mut HeaderMap, quotas: &[RuleDecision<'_>], legacy: bool) {
    let list: Vec<Quota<'_>> = quotas.iter().map(RuleDecision::quota).collect();
    headers::insert(headers, &list);
    if legacy {
        headers::insert_legacy(headers, &list);
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
