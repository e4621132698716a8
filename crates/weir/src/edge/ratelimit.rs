//! Rate limit header fields: `Retry-After` and the IETF `RateLimit-Policy` / `RateLimit`
//! fields of draft-ietf-httpapi-ratelimit-headers-10.
//!
//! Both IETF fields are structured-field lists with one item per policy, named by the
//! rule (an sf-string; rule names are restricted to characters that need no escaping):
//! `RateLimit-Policy: "api";q=100;w=60` and `RateLimit: "api";r=0;t=12`. `q` is the
//! limit, `w` the period in seconds, `r` what remains, `t` the seconds until the quota
//! is full again. Seconds are rounded up, so a client never comes back too early.
//!
//! A denial also carries `Retry-After-Ms`, the same wait in milliseconds (rounded up):
//! HTTP's whole seconds make a client wait up to a second too long against a limit
//! that frees a unit every few milliseconds. It is the field OpenAI's and Azure's APIs
//! send, which their clients (and `weir-client`) read before `Retry-After`.

use std::time::Duration;

use axum::http::header::Entry;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use weir_core::{Decision, Policy};

/// `RateLimit-Policy`.
static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `Retry-After-Ms`.
static RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");

/// Whole seconds, rounded up.
pub(crate) fn ceil_secs(duration: Duration) -> u64 {
    duration.as_nanos().div_ceil(1_000_000_000) as u64
}

/// Whole milliseconds, rounded up.
pub(crate) fn ceil_millis(duration: Duration) -> u64 {
    duration.as_nanos().div_ceil(1_000_000) as u64
}

/// Room for one item, `"name";q=1000000;w=86400, `, with a rule name of 16 bytes.
const ITEM_BYTES: usize = 48;

/// One policy's part in the header fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quota<'a> {
    /// The rule's name (plain characters only, see `config::MAX_RULE_NAME`).
    pub name: &'a str,
    /// The rule's policy.
    pub policy: &'a Policy,
    /// What the check decided.
    pub decision: &'a Decision,
    /// Whether the policy limits requests in flight (`algorithm: concurrency`): its
    /// `q` is the slots, it has no window (`w`), and `r` is the slots free.
    pub in_flight: bool,
}

/// Adds `RateLimit-Policy` and `RateLimit` for `quotas` (after any items the headers
/// already hold, e.g. an upstream's own), and `Retry-After` (the longest retry of the
/// denying quotas) when every denying quota has a retry time.
pub(crate) fn insert_ratelimit(headers: &mut HeaderMap, quotas: &[Quota<'_>]) {
    // Room for a typical item each, so that the pieces never grow the strings.
    let mut policy = String::with_capacity(ITEM_BYTES * quotas.len());
    let mut state = String::with_capacity(ITEM_BYTES * quotas.len());
    // Written piece by piece: this runs for every answer, and the formatting
    // machinery costs several times what the pieces do.
    for (i, quota) in quotas.iter().enumerate() {
        if i > 0 {
            policy.push_str(", ");
            state.push_str(", ");
        }
        let limit = quota.policy.limit();
        if quota.in_flight {
            push_item(&mut policy, quota.name, [("q", limit)]);
        } else {
            let window = ceil_secs(quota.policy.period()).max(1);
            push_item(&mut policy, quota.name, [("q", limit), ("w", window)]);
        }
        let reset = ceil_secs(quota.decision.reset_after);
        let remaining = quota.decision.remaining;
        push_item(&mut state, quota.name, [("r", remaining), ("t", reset)]);
    }
    if quotas.is_empty() {
        return;
    }
    append_list(headers, &RATELIMIT_POLICY, policy);
    append_list(headers, &RATELIMIT, state);
    let mut denied = quotas.iter().filter(|q| !q.decision.allowed).peekable();
    if denied.peek().is_some() {
        let retry = denied.try_fold(Duration::ZERO, |longest, q| {
            q.decision.retry_after.map(|r| longest.max(r))
        });
        if let Some(retry) = retry {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(ceil_secs(retry)));
            headers.insert(
                RETRY_AFTER_MS.clone(),
                HeaderValue::from(ceil_millis(retry)),
            );
        }
    }
}

/// Appends `"name";k=v;k=v` to a structured field list.
fn push_item<const N: usize>(list: &mut String, name: &str, parameters: [(&str, u64); N]) {
    let mut digits = itoa::Buffer::new();
    list.push('"');
    list.push_str(name);
    list.push('"');
    for (key, value) in parameters {
        list.push(';');
        list.push_str(key);
        list.push('=');
        list.push_str(digits.format(value));
    }
}

/// Sets a list field to its existing items (all non-empty lines, joined) followed by
/// `items`: an upstream's RateLimit items, or the earlier hops of `X-Forwarded-For`.
fn append_list(headers: &mut HeaderMap, name: &HeaderName, items: String) {
    // Most answers have no such field yet: one lookup finds that and inserts.
    let mut earlier = match headers.entry(name) {
        Entry::Vacant(vacant) => {
            if let Ok(value) = HeaderValue::try_from(items) {
                vacant.insert(value);
            }
            return;
        }
        Entry::Occupied(occupied) => occupied
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.trim().is_empty())
            .collect::<Vec<&str>>()
            .join(", "),
    };
    if !earlier.is_empty() {
        earlier.push_str(", ");
    }
    earlier.push_str(&items);
    if let Ok(value) = HeaderValue::try_from(earlier) {
        headers.insert(name, value);
    }
}

/// Adds the older fields for the most constrained quota (the least remaining):
/// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and the same as
/// `X-RateLimit-*`, with the reset in seconds.
pub(super) fn insert_legacy(headers: &mut HeaderMap, quotas: &[Quota<'_>]) {
    let Some(tightest) = quotas.iter().min_by_key(|q| q.decision.remaining) else {
        return;
    };
    let values = [
        ("limit", tightest.policy.limit()),
        ("remaining", tightest.decision.remaining),
        ("reset", ceil_secs(tightest.decision.reset_after)),
    ];
    for (suffix, value) in values {
        for prefix in ["ratelimit-", "x-ratelimit-"] {
            if let Ok(name) = HeaderName::try_from(format!("{prefix}{suffix}")) {
                headers.insert(name, HeaderValue::from(value));
            }
        }
    }
}
