//! The one store step of a decision: every enforcing rule's cost, all or nothing, and
//! the lockouts in force read in the same step.

use std::time::Duration;

use weir_core::Decision;
use weir_store::{Check, Key, Store, StoreError};

use super::applied::Applied;

/// Consumes every enforcing rule's cost, all or nothing, in one store step; rules
/// counted by outcome are reserved like the others. A lockout in force denies its rule
/// (and gives back what the step took). Returns whether the request is allowed, and
/// each rule's decision.
pub(super) async fn reserve(
    store: &dyn Store,
    enforced: &[Applied<'_>],
    timeout: Option<Duration>,
) -> Result<(bool, Vec<Decision>), StoreError> {
    if enforced.is_empty() {
        return Ok((true, Vec::new()));
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
    let mut decisions = match timeout {
        Some(timeout) => store.decide_within(&checks, false, timeout).await?,
        None => store.check_all(&checks).await?,
    };
    let probes = decisions.split_off(enforced.len());
    let consumed = decisions.iter().all(|d| d.allowed);
    let mut locked = false;
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
            tracing::warn!(%error, "a locked-out request's reservation could not be given back");
        }
    }
    Ok((consumed && !locked, decisions))
}
