//! The live state of one rule that the admin API reads: how many requests it allowed
//! and denied, whom it denied most, and how many keys came close to its limit.

use parking_lot::Mutex;

use super::near_limit::NearLimit;
use super::sharded::Counter;
use super::top::{Counted, TopDenied};

/// One rule's live state, shared by every engine that has the rule (reloads keep it).
#[derive(Debug, Default)]
pub(crate) struct RuleLive {
    allowed: Counter,
    denied: Counter,
    near_limit: Mutex<NearLimit>,
    top: Mutex<TopDenied>,
}

/// A rule's decisions so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RuleTotals {
    /// Requests it allowed (shadow and fallback decisions included).
    pub allowed: u64,
    /// Requests it denied (or would have, for a shadow rule).
    pub denied: u64,
}

impl RuleLive {
    /// Counts a request the rule allowed; `near_limit` when it left less than 10% of
    /// the limit to `identity`.
    pub(super) fn allowed(&self, identity: &str, near_limit: bool, now: u64) {
        self.allowed.inc();
        if near_limit {
            self.near_limit.lock().add(identity, now);
        }
    }

    /// Counts a request the rule denied to `identity`.
    pub(super) fn denied(&self, identity: &str, now: u64) {
        self.denied.inc();
        self.top.lock().add(identity, now);
    }

    /// Its decisions so far.
    pub(crate) fn totals(&self) -> RuleTotals {
        RuleTotals {
            allowed: self.allowed.get(),
            denied: self.denied.get(),
        }
    }

    /// The identities it denied most over the last `minutes` (at most 5), most first,
    /// at most `n` of them.
    pub(crate) fn top_denied(&self, now: u64, minutes: u64, n: usize) -> Vec<Counted> {
        self.top.lock().top(now, minutes, n)
    }

    /// About how many distinct keys it allowed with less than 10% left, over the last
    /// minute.
    pub(crate) fn near_limit_keys(&self, now: u64) -> u64 {
        self.near_limit.lock().estimate(now)
    }
}
