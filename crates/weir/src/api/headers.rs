//! Rate limit header fields: `Retry-After` and the IETF `RateLimit-Policy` / `RateLimit`
//! fields of draft-ietf-httpapi-ratelimit-headers-10.
//!
//! Both IETF fields are structured-field lists with one item per policy, named by the
//! rule (an sf-string; rule names are restricted to characters that need no escaping):
//! `RateLimit-Policy: "api";q=100;w=60` and `RateLimit: "api";r=0;t=12`. `q` is the
//! limit, `w` the period in seconds, `r` what remains, `t` the seconds until the quota
//! is full again. Seconds are rounded up, so a client never comes back too early.

use std::fmt::Write;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use weir_core::{Decision, Policy};

/// `RateLimit-Policy`.
pub static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Whole seconds, rounded up.
pub fn ceil_secs(duration: Duration) -> u64 {
    duration.as_nanos().div_ceil(1_000_000_000) as u64
}

/// Whole milliseconds, rounded up.
pub fn ceil_millis(duration: Duration) -> u64 {
    duration.as_nanos().div_ceil(1_000_000) as u64
}

/// One policy's part in the header fields.
#[derive(Debug, Clone, Copy)]
pub struct Quota<'a> {
    /// The rule's name (plain characters only, see `config::MAX_RULE_NAME`).
    pub name: &'a str,
    /// The rule's policy.
    pub policy: &'a Policy,
    /// What the check decided.
    pub decision: &'a Decision,
}

/// Adds `RateLimit-Policy` and `RateLimit` for `quotas`, and `Retry-After` (the longest
/// retry of a denying quota) when one denies with a retry time.
pub fn insert(headers: &mut HeaderMap, quotas: &[Quota<'_>]) {
    let mut policy = String::new();
    let mut state = String::new();
    for (i, quota) in quotas.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let window = ceil_secs(quota.policy.period()).max(1);
        let _ = write!(
            policy,
            "{sep}\"{}\";q={};w={window}",
            quota.name,
            quota.policy.limit()
        );
        let reset = ceil_secs(quota.decision.reset_after);
        let _ = write!(
            state,
            "{sep}\"{}\";r={};t={reset}",
            quota.name, quota.decision.remaining
        );
    }
    if let (Ok(policy), Ok(state)) = (HeaderValue::try_from(policy), HeaderValue::try_from(state)) {
        headers.insert(RATELIMIT_POLICY.clone(), policy);
        headers.insert(RATELIMIT.clone(), state);
    }
    let retry = quotas
        .iter()
        .filter(|q| !q.decision.allowed)
        .filter_map(|q| q.decision.retry_after)
        .max();
    if let Some(retry) = retry {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(ceil_secs(retry)));
    }
}
