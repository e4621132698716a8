//! Reading what a server says about waiting: `Retry-After` and the RateLimit fields.

mod ratelimit;
mod retry_after;

pub(crate) use self::ratelimit::{exhausted_reset, pacing, quotas};
pub(crate) use self::retry_after::retry_after;
