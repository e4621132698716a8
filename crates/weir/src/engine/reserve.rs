//! The one store step of a decision: every enforcing rule's cost, all or nothing, and
//! the lockouts and bans in force read in the same step.

use std::time::Duration;

use weir_core::Decision;
use weir_store::{Check, Key, Store, StoreError};

use super::applied::Applied;
use super::bans::{OnLimited, banned_decision};

/// What the store step found: whether the request is allowed, each rule's decision,
/// and per rule with `on_limited` whether its key is banned (and for how long).
pub(super) struct Reservation {
    pub(super) allowed: bool,
    pub(super) decisions: Vec<Decision>,
    /// `(rule's index in enforced, time left)`, for every rule with `on_limited`.
    pub(super) bans: Vec<(usize, Option<Duration>)>,
}

impl Reservation {
    /// No rule to reserve for: allowed.
    pub(super) fn nothing() -> Self {
        Self {
            allowed: true,
            decisions: Vec::new(),
            bans: Vec::new(),
        }
    }
}

/// Consumes every enforcing rule's cost, all or nothing, in one store step; rules
/// counted by outcome are reserved like the others. A lockout in force denies its rule
/// (and gives back what the step took), and so does a ban in force (reported as
/// nothing left until its end).
pub(super) async fn reserve(
    store: &dyn Store,
    enforced: &[Applied<'_>],
    timeout: Option<Duration>,
) -> Result<Reservation, StoreError> {
    if enforced.is_empty() {
        return Ok(Reservation::nothing());
    }
    let mut checks: Vec<Check<'_>> = enforced.iter().map(Applied::check).collect();
    // The lockouts in force, read (cost 0) in the same step; `locked_rules` says whose.
    let mut locked_rules = Vec::new();
    for (i, a) in enforced.iter().enumerate() {
        if let Some(lockout) = &a.rule.lockout {
            locked_rules.push(i);
            checks.push(Check {
                key: Key {
                    rule: &lockout.in_force_rule,
                    identity: &a.identity,
                },
                policy: &lockout.probe,
                cost: 0,
            });
        }
    }
    // The bans in force, likewise; `banned_rules` says whose.
    let mut banned_rules = Vec::new();
    for (i, a) in enforced.iter().enumerate() {
        if let Some(on) = &a.rule.on_limited {
            banned_rules.push(i);
            checks.push(on.probe(&a.identity));
        }
    }
    let mut decisions = match timeout {
        Some(timeout) => store.decide_within(&checks, false, timeout).await?,
        None => store.check_all(&checks).await?,
    };
    let mut probes = decisions.split_off(enforced.len());
    let ban_probes = probes.split_off(locked_rules.len());
    let consumed = decisions.iter().all(|d| d.allowed);
    let mut locked = false;
    let mut bans = Vec::new();
    for (&i, probe) in banned_rules.iter().zip(&ban_probes) {
        let left = OnLimited::remaining(probe);
        if let Some(left) = left {
            locked = true;
            decisions[i] = banned_decision(&enforced[i].policy, left);
        }
        bans.push((i, left));
    }
    for (&i, probe) in locked_rules.iter().zip(probes) {
        if probe.remaining == 0 && !probe.reset_after.is_zero() {
            locked = true;
            let d = &mut decisions[i];
            *d = Decision {
                allowed: false,
                remaining: 0,
                retry_after: Some(probe.reset_after),
                reset_after: d.reset_after.max(probe.reset_after),
                ..*d
            };
        }
    }
    if consumed && locked {
        // Nothing may stay consumed for a request that is denied.
        if let Err(error) = store.refund_all(&checks[..enforced.len()]).await {
            tracing::warn!(%error, "a locked-out or banned request's reservation could not be given back");
        }
    }
    Ok(Reservation {
        allowed: consumed && !locked,
        decisions,
        bans,
    })
}
