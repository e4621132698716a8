//! A request's checks when some of its keys are leased: the leased ones spent here (or
//! taken for), the others on the shared store, all or nothing.

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Closing, Decision, Grant, Policy, Take};

use super::slot::{Denial, Install, Spend};
use super::table::Entry;
use super::{LeasedRule, LeasingStore};
use crate::{Check, Key, LeaseStore, Store, StoreError};

/// How long a request waits for another request's take of the same key, when its
/// own call has no shorter bound (the store's own timeout bounds the take).
const WAIT_FOR_TAKE: Duration = Duration::from_secs(5);

/// Rounds of waiting for another request's take before a request checks on the store
/// directly: each round is a take that left too little for it.
const ROUNDS: usize = 3;

/// Where a request's units came from, to give them back if the request is denied by
/// another of its rules.
enum Source {
    /// The lease of `generation` held in `entry`.
    Lease { entry: Arc<Entry>, generation: u64 },
    /// The store, spent at once.
    Store,
}

/// One leased check's answer.
struct Leased {
    decision: Decision,
    /// Where its units came from, when it was allowed a cost above 0.
    source: Option<Source>,
}

impl LeasingStore {
    /// `checks` decided all or nothing (or, when `preview`, only read): the leased
    /// ones here, the others on the shared store within `timeout`.
    pub(super) async fn decide_leased(
        &self,
        checks: &[Check<'_>],
        preview: bool,
        timeout: Option<Duration>,
    ) -> Result<Vec<Decision>, StoreError> {
        if let [check] = checks
            && let Some(rule) = self.leased(check)
        {
            // One leased rule, the usual case: no lists to split.
            let cost = if preview { 0 } else { check.cost };
            let leased = self
                .leased_check(rule, check.key, check.policy, cost, timeout)
                .await?;
            return Ok(vec![leased.decision]);
        }
        let leased: Vec<Option<&LeasedRule>> = checks.iter().map(|c| self.leased(c)).collect();
        let others: Vec<Check<'_>> = checks
            .iter()
            .zip(&leased)
            .filter(|(_, l)| l.is_none())
            .map(|(c, _)| *c)
            .collect();
        if others.len() == checks.len() {
            return self.on_store(&others, preview, timeout).await;
        }
        let mut decisions: Vec<Option<Decision>> = vec![None; checks.len()];
        let mut spent = Vec::new();
        let mut allowed = true;
        for (i, (check, rule)) in checks.iter().zip(&leased).enumerate() {
            let Some(rule) = rule else { continue };
            let cost = if preview { 0 } else { check.cost };
            match self
                .leased_check(rule, check.key, check.policy, cost, timeout)
                .await
            {
                Ok(leased) => {
                    allowed &= leased.decision.allowed;
                    decisions[i] = Some(leased.decision);
                    if let Some(source) = leased.source {
                        spent.push((i, source));
                    }
                }
                Err(error) => {
                    self.give_back_spent(checks, spent).await;
                    return Err(error);
                }
            }
        }
        let mut others_decided = if others.is_empty() {
            Vec::new()
        } else {
            // A denied request only reads the other keys, as a store's `check_all` does.
            match self.on_store(&others, preview || !allowed, timeout).await {
                Ok(decided) => decided,
                Err(error) => {
                    self.give_back_spent(checks, spent).await;
                    return Err(error);
                }
            }
        };
        allowed &= others_decided.iter().all(|d| d.allowed);
        if !allowed && !spent.is_empty() {
            // The units of a denied request go back; its leased checks that passed
            // report the state unchanged.
            for (i, _) in &spent {
                if let Some(d) = decisions[*i].as_mut() {
                    d.remaining = d.remaining.saturating_add(checks[*i].cost);
                }
            }
            self.give_back_spent(checks, spent).await;
        }
        let mut others_decided = others_decided.drain(..);
        Ok(decisions
            .into_iter()
            .map(|d| d.or_else(|| others_decided.next()).unwrap_or(DENIED))
            .collect())
    }

    /// Checks (or, when `preview`, reads) keys not leased on the shared store.
    async fn on_store(
        &self,
        checks: &[Check<'_>],
        preview: bool,
        timeout: Option<Duration>,
    ) -> Result<Vec<Decision>, StoreError> {
        self.inner.decide(checks, preview, timeout).await
    }

    /// Gives back units spent by a request that was denied after all: to the lease
    /// they came from if it is still held, else refunded on the store.
    async fn give_back_spent(&self, checks: &[Check<'_>], spent: Vec<(usize, Source)>) {
        let refunds: Vec<Check<'_>> = spent
            .into_iter()
            .filter(|(i, source)| match source {
                Source::Lease { entry, generation } => {
                    !entry.slot.restore(*generation, checks[*i].cost)
                }
                Source::Store => true,
            })
            .map(|(i, _)| checks[i])
            .collect();
        if !refunds.is_empty()
            && let Err(error) = self.inner.refund_all(&refunds).await
        {
            tracing::warn!(%error, "a denied request's leased units could not be given back");
        }
    }

    /// One leased check of `cost` (0 reads): spent from this instance's lease, denied
    /// from a denial remembered, or taken for on the store.
    async fn leased_check(
        &self,
        rule: &LeasedRule,
        key: Key<'_>,
        policy: &Policy,
        cost: u64,
        timeout: Option<Duration>,
    ) -> Result<Leased, StoreError> {
        // A read, an engine whose leases went back, or a table full: on the store.
        let entry = match cost {
            0 => None,
            _ if self.closed.load(std::sync::atomic::Ordering::SeqCst) => None,
            _ => rule.slots.get_or_make(key.identity, policy),
        };
        // A key shared by callers of another policy (plans) is checked on the store.
        let Some(entry) = entry.filter(|e| e.policy == *policy) else {
            return self.direct(key, policy, cost).await;
        };
        // A cost above the capacity is never granted: no demand to lease for.
        let demand = if cost <= policy.capacity() { cost } else { 0 };
        let asked = entry.slot.note(demand, self.clock.now());
        for _ in 0..ROUNDS {
            // Read again after each wait: a unit is spent only before the deadline as
            // it is when the unit is spent.
            let now = self.clock.now();
            match entry.slot.spend(cost, now) {
                Spend::Spent { generation, left } => {
                    return Ok(Leased {
                        decision: self.local_decision(&entry, policy, left, None, now),
                        source: Some(Source::Lease { entry, generation }),
                    });
                }
                Spend::Denied { until } => {
                    self.events.denied_locally(rule.index);
                    return Ok(Leased {
                        decision: self.local_decision(&entry, policy, 0, Some(until), now),
                        source: None,
                    });
                }
                Spend::Empty => {}
            }
            let taken = entry.taken.notified();
            tokio::pin!(taken);
            taken.as_mut().enable();
            if let Some(closing) = entry.slot.begin_take() {
                let (min, max, hold) = rule.plan.take_sizes(
                    policy,
                    asked,
                    entry.slot.share(now),
                    entry.slot.starving(),
                    entry.slot.unsure(),
                    cost,
                );
                let take = Taking {
                    store: self.inner.clone(),
                    events: self.events.clone(),
                    clock: self.clock.clone(),
                    rule: key.rule.to_owned(),
                    index: rule.index,
                    identity: key.identity.to_owned(),
                    policy: *policy,
                    take: Take {
                        min,
                        max,
                        hold,
                        closing: closing.map(|(c, _)| c),
                    },
                    cost,
                    entry: Arc::clone(&entry),
                    closed: Arc::clone(&self.closed),
                };
                // Spawned, so that a request given up (a client gone, a timeout) does
                // not abandon a grant: its units are installed for the others.
                let task = tokio::spawn(take.run());
                let wait = timeout.unwrap_or(WAIT_FOR_TAKE);
                return match tokio::time::timeout(wait, task).await {
                    Ok(Ok(result)) => result,
                    Ok(Err(_)) => Err(StoreError::Unavailable("a lease take was cancelled".into())),
                    Err(_) => Err(StoreError::Timeout(wait)),
                };
            }
            let wait = timeout.unwrap_or(WAIT_FOR_TAKE);
            if tokio::time::timeout(wait, taken).await.is_err() {
                return Err(StoreError::Timeout(wait));
            }
        }
        self.direct(key, policy, cost).await
    }

    /// A check of a leased key on the store itself (a take spent at once), honouring
    /// every instance's leases: when this instance keeps nothing for the key.
    async fn direct(&self, key: Key<'_>, policy: &Policy, cost: u64) -> Result<Leased, StoreError> {
        let grant = self.inner.take(key, policy, Take::check(cost)).await?;
        let source = (grant.decision.allowed && cost > 0).then_some(Source::Store);
        Ok(Leased {
            decision: grant.decision,
            source,
        })
    }

    /// A decision made here: allowed with `left` units held, or denied until `until`.
    fn local_decision(
        &self,
        entry: &Entry,
        policy: &Policy,
        left: u64,
        until: Option<u64>,
        now: u64,
    ) -> Decision {
        let (remaining, full_at) = entry.slot.last_seen();
        Decision {
            allowed: until.is_none(),
            limit: policy.limit(),
            remaining: remaining.saturating_add(left).min(policy.capacity()),
            reset_after: Duration::from_nanos(full_at.saturating_sub(now)),
            retry_after: until.map(|until| Duration::from_nanos(until.saturating_sub(now))),
            delay: Duration::ZERO,
        }
    }
}

/// The answer for a check no decision was found for (never: every check has one).
const DENIED: Decision = Decision {
    allowed: false,
    limit: 0,
    remaining: 0,
    reset_after: Duration::ZERO,
    retry_after: None,
    delay: Duration::ZERO,
};

/// One take on its way, owned by its own task.
struct Taking {
    store: Arc<dyn LeaseStore>,
    events: Arc<dyn super::LeaseEvents>,
    clock: Arc<dyn weir_core::Clock>,
    rule: String,
    index: usize,
    identity: String,
    policy: Policy,
    take: Take,
    /// What the request that asked spends of the grant.
    cost: u64,
    entry: Arc<Entry>,
    /// The store's leases went back while this take was on its way: give the grant
    /// back at once.
    closed: Arc<std::sync::atomic::AtomicBool>,
}

/// Ends a take once, even if its task is dropped (the runtime shutting down): then the
/// slot takes no lease, and the requests waiting are woken.
struct Finish<'a> {
    entry: &'a Entry,
    done: bool,
}

impl Finish<'_> {
    /// Installs what the take left and wakes the requests waiting for it; the
    /// generation installed under.
    fn finish(&mut self, install: Option<Install>) -> u64 {
        self.done = true;
        let generation = self.entry.slot.finish_take(install);
        self.entry.taken.notify_waiters();
        generation
    }
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.finish(None);
        }
    }
}

impl Taking {
    async fn run(self) -> Result<Leased, StoreError> {
        let mut finish = Finish {
            entry: &self.entry,
            done: false,
        };
        // The hold is measured from before the take is sent, so the local deadline
        // comes before the store's record ends however long the reply takes.
        let sent = self.clock.now();
        let key = Key {
            rule: &self.rule,
            identity: &self.identity,
        };
        let granted = self.store.take(key, &self.policy, self.take).await;
        let now = self.clock.now();
        if let Some(closing) = self.take.closing {
            self.count_closing(closing, granted.as_ref().is_ok_and(|g| g.closed));
        }
        let grant = granted?;
        let (install, decision) = self.settle(&grant, sent, now);
        let installs = install.lease.is_some();
        let generation = finish.finish(Some(install));
        if self.closed.load(std::sync::atomic::Ordering::SeqCst)
            && let Some((closing, policy)) = self.entry.slot.release()
        {
            let back = self
                .store
                .give_back(key, &policy, closing.lease, closing.unspent)
                .await;
            self.count_closing(closing, back.unwrap_or(false));
        }
        let source = decision.allowed.then(|| match installs {
            true => Source::Lease {
                entry: Arc::clone(&self.entry),
                generation,
            },
            false => Source::Store,
        });
        Ok(Leased { decision, source })
    }

    /// What the grant leaves in the slot, and the answer of the request that asked.
    fn settle(&self, grant: &Grant, sent: u64, now: u64) -> (Install, Decision) {
        let full_at = now.saturating_add(duration_ns(grant.decision.reset_after));
        if grant.units < self.take.min || !grant.decision.allowed {
            // A take for a whole batch (the key starving) was denied: every request
            // here would ask for that batch until the retry time, whatever its cost.
            let min = if self.take.min > self.cost {
                1
            } else {
                self.take.min
            };
            let denied = grant.decision.retry_after.map(|retry| Denial {
                min,
                until: now.saturating_add(duration_ns(retry)),
            });
            let install = Install {
                lease: None,
                deadline: 0,
                denied,
                scarce: true,
                remaining: grant.decision.remaining,
                full_at,
                granted: 0,
                at: now,
                taken_rate: grant.taken_rate,
            };
            let decision = Decision {
                allowed: false,
                ..grant.decision
            };
            return (install, decision);
        }
        let left = grant.units - self.cost;
        let lease = match grant.lease {
            Some(lease) => {
                self.events.granted(self.index, grant.units);
                Some((lease, left, self.policy))
            }
            None => {
                // Units granted with no record are spent at once: those the request
                // does not spend are lost (never held where the store cannot see).
                if left > 0 {
                    self.events.expired(self.index, left);
                }
                None
            }
        };
        let hold = duration_ns(self.take.hold);
        let install = Install {
            lease,
            deadline: sent.saturating_add(hold - hold / 4),
            denied: None,
            // A grant with no record (the key's records all in use) is not scarcity.
            scarce: grant.lease.is_some() && grant.units < self.take.max,
            remaining: grant.decision.remaining,
            full_at,
            granted: if grant.lease.is_some() {
                grant.units
            } else {
                0
            },
            at: now,
            taken_rate: grant.taken_rate,
        };
        let decision = Decision {
            remaining: grant
                .decision
                .remaining
                .saturating_add(left)
                .min(self.policy.capacity()),
            ..grant.decision
        };
        (install, decision)
    }

    /// Counts what became of the units of the lease the take gave back.
    fn count_closing(&self, closing: Closing, closed: bool) {
        if closing.unspent == 0 {
            return;
        }
        if closed {
            self.events.returned(self.index, closing.unspent);
        } else {
            self.events.expired(self.index, closing.unspent);
        }
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
