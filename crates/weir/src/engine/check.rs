//! The decision API's one-rule question: `cost` units for one key under one rule.

use weir_core::Decision;
use weir_store::{Key, StoreError};

use super::bans::banned_decision;
use super::{Engine, NamedPolicy, key};
use crate::metrics::{Outcome, StoreOp};

impl Engine {
    /// Checks `cost` units for `identity` under the named `rule`: the decision API's
    /// one-rule question, asked of the shared store.
    ///
    /// State is kept per (rule, identity); rule names cannot contain `:`, so no
    /// identity can reach another rule's state.
    pub async fn check(
        &self,
        rule: &NamedPolicy,
        identity: &str,
        cost: u64,
    ) -> Result<Decision, StoreError> {
        // Kept as the gateway keeps keys (a long one by its hash), so that the admin API
        // finds the same key whichever door counted it.
        let stored = key::stored_form(identity);
        let identity = stored.as_ref();
        let key = Key {
            rule: &rule.name,
            identity,
        };
        let policy = self.overridden(&rule.name, identity, &rule.policy);
        // A rule with `on_limited` (a gateway rule asked by name): its bans apply here
        // too, read before the check (a request checked as a ban starts may pass).
        let banning = self
            .routing
            .rules
            .iter()
            .find(|r| r.name == rule.name && r.on_limited.is_some())
            .filter(|_| cost > 0);
        if let Some(banning) = banning
            && let Some(left) = self.ban_of(banning, identity).await?
        {
            self.metrics.ban_refused(&banning.name);
            return Ok(banned_decision(&policy, left));
        }
        let timer = self.metrics.store_timer(StoreOp::Check, false);
        let decided = self.store.check(key, &policy, cost).await;
        timer.finish(decided.as_ref().err());
        if let (Some(banning), Ok(d)) = (banning, &decided)
            && !d.allowed
        {
            self.denied_by(self.store.as_ref(), &[(banning, identity)])
                .await;
        }
        // A cost-0 check only reads: not a decision.
        if let (Some(&series), true) = (self.named.get(&rule.name), cost > 0) {
            let outcome = match &decided {
                Ok(d) if d.allowed => Outcome::Allowed,
                Ok(_) => {
                    self.log_denial(&rule.name, identity, None, None, "denied");
                    Outcome::Denied
                }
                Err(_) => Outcome::Unavailable,
            };
            let now = self.clock.now();
            self.metrics
                .decided(series, None, outcome, identity, decided.as_ref().ok(), now);
        }
        decided
    }
}
