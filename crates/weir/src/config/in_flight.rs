//! A rule of `algorithm: concurrency`: at most `limit` requests of a key in flight at
//! once. It has no period and counts no cost; what a rate rule adds to its count
//! (costs, outcomes, lockouts, leases, regions, shadow) is refused here by name,
//! never ignored.

use std::time::Duration;

use serde_saphyr::Location;
use weir_core::{Algorithm, Policy};

use super::file::RawRule;
use crate::engine::{MAX_IN_FLIGHT, NamedPolicy};

/// A `concurrency` rule, checked: its name and limit, with the policy that carries
/// its limit (the number of slots; the policy's algorithm and period mean nothing and
/// are never checked on a store). An error is where, which field, and why.
pub(super) fn rule(
    raw: &RawRule,
    name: String,
) -> Result<NamedPolicy, (Location, &'static str, String)> {
    let at = raw.name.referenced;
    let foreign = [
        (raw.period.as_ref().map(|p| p.referenced), "period"),
        (raw.burst.as_ref().map(|b| b.referenced), "burst"),
        (raw.cost.as_ref().map(|c| c.referenced), "cost"),
        (raw.costs.first().map(|c| c.referenced), "costs"),
        (
            (!raw.count_statuses.is_empty()).then_some(at),
            "count_statuses",
        ),
        (
            (!raw.reset_statuses.is_empty()).then_some(at),
            "reset_statuses",
        ),
        (raw.lockout.as_ref().map(|l| l.referenced), "lockout"),
        (raw.cost_from.as_ref().map(|c| c.referenced), "cost_from"),
        (raw.lease.as_ref().map(|l| l.referenced), "lease"),
        (raw.scope.as_ref().map(|s| s.referenced), "scope"),
        (raw.shadow.then_some(at), "shadow"),
        (raw.time_zone.as_ref().map(|z| z.referenced), "time_zone"),
        (raw.starts.as_ref().map(|s| s.referenced), "starts"),
        (raw.on_limited.as_ref().map(|o| o.referenced), "on_limited"),
        (raw.lists.as_ref().map(|l| l.referenced), "lists"),
    ];
    if let Some((Some(at), field)) = foreign.iter().find(|(at, _)| at.is_some()) {
        return Err((
            *at,
            field,
            format!(
                "`{field}` does not apply to `algorithm: concurrency`: it limits the requests of a key in flight at once (one slot each, held until the answer ends), not a rate"
            ),
        ));
    }
    if raw.route.is_none() {
        return Err((
            at,
            "match",
            "`algorithm: concurrency` needs a `match`: only a door that passes requests on (the gateway, the tower layer) knows when a request ends".into(),
        ));
    }
    let limit = raw.limit.value;
    if !(1..=MAX_IN_FLIGHT).contains(&limit) {
        return Err((
            raw.limit.referenced,
            "limit",
            format!(
                "limit must be a whole number from 1 to {MAX_IN_FLIGHT}: the requests of a key in flight at once"
            ),
        ));
    }
    let policy = Policy::new(Algorithm::FixedWindow, limit, Duration::from_secs(1), None)
        .map_err(|e| (raw.limit.referenced, "limit", e.to_string()))?;
    Ok(NamedPolicy {
        name,
        policy,
        lease: None,
        global: false,
        in_flight: true,
    })
}
