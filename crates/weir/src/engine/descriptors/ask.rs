//! What a `ShouldRateLimit` call asks and what it is answered, free of the protocol's
//! types.

use std::time::Duration;

use super::{PerDescriptor, Unit};

/// A request: its domain and descriptors.
#[derive(Debug, Clone)]
pub(crate) struct EnvoyAsk<'a> {
    /// The configuration domain the descriptors are looked up in.
    pub domain: &'a str,
    /// The descriptors, each decided (and answered) in order.
    pub descriptors: Vec<DescriptorAsk<'a>>,
}

/// One descriptor of a request.
#[derive(Debug, Clone)]
pub(crate) struct DescriptorAsk<'a> {
    /// Its entries, `(key, value)`, in order.
    pub entries: PerDescriptor<(&'a str, &'a str)>,
    /// A limit sent with the descriptor (Envoy's `limit` override): used instead of
    /// the configuration's.
    pub limit: Option<(u32, Unit)>,
    /// Hits to add: the descriptor's `hits_addend`, else the request's, else 1. Zero
    /// only looks.
    pub hits: u64,
}

/// The answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvoyAnswer {
    /// Whether the request is over the limit (`overall_code`): some descriptor not in
    /// shadow mode is over, and global shadow mode is off.
    pub over_limit: bool,
    /// One status per descriptor, in the request's order.
    pub statuses: Vec<DescriptorAnswer>,
}

/// One descriptor's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DescriptorAnswer {
    /// Whether it is over its limit (`OVER_LIMIT`; `OK` in shadow mode).
    pub over_limit: bool,
    /// The limit that applied (`current_limit`), if one did.
    pub limit: Option<CurrentLimit>,
    /// What is left in the window (`limit_remaining`): 0 when over or without a limit,
    /// `u32::MAX` when unlimited.
    pub remaining: u32,
    /// Until the window ends (`duration_until_reset`), when a limit applied.
    pub until_reset: Option<Duration>,
}

/// The limit a descriptor was decided by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CurrentLimit {
    /// Its `name`, if it has one (empty otherwise, as in the protocol).
    pub name: String,
    /// `requests_per_unit`.
    pub requests_per_unit: u32,
    /// `unit`.
    pub unit: Unit,
}

impl DescriptorAnswer {
    /// The answer for a descriptor no limit applies to.
    pub(super) fn no_limit() -> Self {
        Self {
            over_limit: false,
            limit: None,
            remaining: 0,
            until_reset: None,
        }
    }

    /// The answer for an unlimited descriptor.
    pub(super) fn unlimited() -> Self {
        Self {
            remaining: u32::MAX,
            ..Self::no_limit()
        }
    }
}
