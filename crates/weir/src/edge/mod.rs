//! The HTTP edge every front door shares: problems as `application/problem+json`, the
//! RateLimit header fields, and the engine's verdicts as answers. A verdict becomes an
//! answer here and nowhere else ([`answer`]), so the gateway, `/v1/decide` and the
//! doors to come answer one request alike. `accept` is the accept loop every listener
//! runs (connection slots, send timeout, the first deadline, graceful stop).

mod accept;
mod body;
pub(crate) mod contract;
mod cost;
mod forwarding;
mod grpc;
pub(crate) mod json;
mod problem;
mod ratelimit;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};

pub use self::accept::ConnectionSlots;
pub(crate) use self::accept::{
    Accept, Auto, AutoConnection, Certificates, Connection, Http1, Http1Connection, Http2,
    IDLE_TIMEOUT, Io, OverTls, Protocol, SEND_TIMEOUT, Tls, Version, server_config,
};
pub(crate) use self::body::{BodyReader, to_bytes_within};
pub(crate) use self::cost::settle;
pub(crate) use self::forwarding::{host_of_target, write_forwarding};
pub(crate) use self::grpc::{for_grpc, is_grpc};
pub(crate) use self::problem::{Problem, ProblemJson};
use self::ratelimit::insert_legacy;
pub(crate) use self::ratelimit::{Quota, ceil_millis, ceil_secs, insert_ratelimit};
use crate::engine::{Allowed, Denied, RuleDecision, Verdict};
use crate::request::Refused;

/// What a door does with a verdict.
#[derive(Debug)]
pub(crate) enum Answer<'e> {
    /// Go on (forward the request, or tell the caller it may): the quotas to report and
    /// the settlement to make.
    Proceed(Allowed<'e>),
    /// Send weir's own answer instead.
    Stop(Response),
}

/// What a door does with `verdict`: go on when it allows, else send weir's own answer
/// (429 with `Retry-After` and the RateLimit fields, the refusal's 400, 415 or 421, or
/// 503 with a fixed detail). `legacy` adds the older RateLimit fields.
pub(crate) fn answer(verdict: Verdict<'_>, legacy: bool) -> Answer<'_> {
    match verdict {
        Verdict::Allowed(allowed) => Answer::Proceed(allowed),
        Verdict::Denied(denied) => Answer::Stop(too_many(&denied, legacy)),
        Verdict::Refused(refused) => Answer::Stop(self::refused(&refused)),
        Verdict::Unavailable => Answer::Stop(Problem::store_unavailable().into_response()),
    }
}

/// The header that reports shadow rules that would have denied the request.
pub(crate) const SHADOW_HEADER: HeaderName = HeaderName::from_static("weir-shadow-limited");

/// Adds to the answer of an allowed request what every door reports on it: the
/// RateLimit fields of its quotas (and the older fields when `legacy`), and the shadow
/// rules that would have denied it.
pub(crate) fn add_allowed_headers(headers: &mut HeaderMap, allowed: &Allowed<'_>, legacy: bool) {
    add_quota_headers(headers, &allowed.quotas, legacy);
    if !allowed.shadow_denied.is_empty()
        && let Ok(value) = HeaderValue::try_from(allowed.shadow_denied.join(", "))
    {
        headers.insert(SHADOW_HEADER, value);
    }
}

/// Adds the RateLimit fields of `quotas` (and the older fields when `legacy`).
pub(crate) fn add_quota_headers(
    headers: &mut HeaderMap,
    quotas: &[RuleDecision<'_>],
    legacy: bool,
) {
    let list: Vec<Quota<'_>> = quotas.iter().map(quota).collect();
    insert_ratelimit(headers, &list);
    if legacy {
        insert_legacy(headers, &list);
    }
}

/// A rule's decision as its part in the RateLimit header fields.
fn quota<'a>(decision: &'a RuleDecision<'_>) -> Quota<'a> {
    Quota {
        name: decision.name,
        policy: &decision.policy,
        decision: &decision.decision,
        in_flight: decision.in_flight,
    }
}

/// The 429 answer (or a ban's 429 or 403): problem+json naming the violated rules,
/// `Retry-After`, RateLimit.
fn too_many(denied: &Denied<'_>, legacy: bool) -> Response {
    let violated = denied.violated().map(str::to_owned).collect();
    let retry = denied.retry_after().map(ceil_secs);
    let problem = match denied.banned {
        Some(status) => Problem::banned(violated, retry, status == 403),
        None => Problem::rate_limited(violated, retry),
    };
    let mut response = problem.into_response();
    add_quota_headers(response.headers_mut(), &denied.quotas, legacy);
    response
}

/// A request the engine refused to decide on (400, 415 or 421).
pub(crate) fn refused(refused: &Refused) -> Response {
    Problem::refused(refused.reason, refused.detail.clone()).into_response()
}
