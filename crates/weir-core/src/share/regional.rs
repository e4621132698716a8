//! A region's record of one key of a global rule: the bucket it decides on, and the
//! share in force.

use super::{Claim, EXACT, Report, deadline, ns};
use crate::algorithm::{AlgorithmState, TokenBucket};
use crate::state::{Inner, State};
use crate::{Decision, Policy};

/// The bucket, at the rate of the floor plus the share in force, and the claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Regional {
    bucket: TokenBucket,
    /// Units per period on top of the floor, in force before `deadline`.
    share: u64,
    deadline: u64,
    /// Units the instances reported offered since the last claim.
    offered: u64,
    /// The last claim's number (its time); 0 before the first.
    since: u64,
    /// Whether the claim numbered `since` awaits its grant.
    open: bool,
    /// Until when the record is kept for the claims (a report keeps it two rounds).
    keep_until: u64,
    /// The demand in units per period, averaged over the claims (exponentially, with a
    /// time constant of a round): one region's reports arrive unevenly (several
    /// instances, a few requests a round), and a share that followed each sample would
    /// swing with them.
    demand: u64,
}

impl Regional {
    /// The record in `state` (a fresh one, full at the floor, when there is none or it
    /// is another algorithm's), taken out of it.
    pub(crate) fn take_from(policy: &Policy, state: &mut Option<State>, now: u64) -> Self {
        match state.take().map(|s| s.0) {
            Some(Inner::Regional(regional)) if !regional.idle(policy, now) => *regional,
            _ => Self {
                bucket: TokenBucket::full(&Self::at_floor(policy), now),
                share: 0,
                deadline: 0,
                offered: 0,
                since: 0,
                open: false,
                keep_until: 0,
                demand: 0,
            },
        }
    }

    /// The record as the state to keep: `None` once nothing in it matters any more
    /// (the bucket full at the floor, no share in force, nothing to report).
    pub(crate) fn keep(self, policy: &Policy, now: u64) -> Option<State> {
        (!self.idle(policy, now)).then(|| State(Inner::Regional(Box::new(self))))
    }

    /// Whether nothing in the record matters any more at `now`: its bucket full, no
    /// share in force, and its claims' time over (units offered and not claimed by
    /// then are stale). A store may drop it then, and one that still holds it reads it
    /// as none.
    fn idle(&self, policy: &Policy, now: u64) -> bool {
        if self.deadline > now || self.keep_until > now {
            return false;
        }
        let mut copy = self.clone();
        copy.advance(policy, now);
        let bucket = copy.in_force(policy, now);
        copy.bucket.check(&bucket, now, 0).reset_after.is_zero()
    }

    /// Until when a store keeps the record even with its bucket full.
    pub(crate) fn live_until(&self) -> u64 {
        self.deadline.max(self.keep_until)
    }

    /// The bucket of the floor alone.
    fn at_floor(policy: &Policy) -> Policy {
        policy.scaled_bucket(policy.region_floor().unwrap_or(1))
    }

    /// The bucket in force at `now`: the floor plus the share until its deadline.
    fn in_force(&self, policy: &Policy, now: u64) -> Policy {
        let share = if now < self.deadline { self.share } else { 0 };
        policy.scaled_bucket(policy.region_floor().unwrap_or(1).saturating_add(share))
    }

    /// Brings the bucket to the deadline at the share's rate if the deadline passed
    /// since it was last brought up to date: from there on, the floor's rate applies.
    fn advance(&mut self, policy: &Policy, now: u64) {
        if self.share > 0 && self.bucket.last() < self.deadline && self.deadline <= now {
            let before = self.in_force(policy, self.deadline - 1);
            self.bucket = self.bucket.capped(&before, self.deadline, 0);
        }
    }

    /// A check of `cost` at `now` on the bucket in force.
    pub(crate) fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision {
        self.advance(policy, now);
        let bucket = self.in_force(policy, now);
        let fits_ever = cost <= bucket.capacity();
        let mut decision = self
            .bucket
            .check(&bucket, now, if fits_ever { cost } else { 0 });
        if !fits_ever {
            decision.allowed = false;
            decision.retry_after = None;
        }
        // The rule's limit, as every check of it reports; `remaining` is this region's.
        decision.limit = policy.limit();
        // Full again: at the share's rate, unless the share ends first; then at its
        // deadline, where the capacity drops to the floor's, and at the floor's rate
        // from there.
        let to_deadline = self.deadline.saturating_sub(now);
        if self.share > 0
            && to_deadline > 0
            && decision.reset_after.as_nanos() > u128::from(to_deadline)
        {
            let after = self.clone().check(policy, self.deadline, 0).reset_after;
            decision.reset_after = std::time::Duration::from_nanos(to_deadline) + after;
        }
        decision
    }

    /// `cost` back into the bucket in force, up to its capacity.
    pub(crate) fn refund(&mut self, policy: &Policy, now: u64, cost: u64) {
        self.advance(policy, now);
        let bucket = self.in_force(policy, now);
        if cost > 0 && cost <= bucket.capacity() {
            self.bucket.refund(&bucket, now, cost);
        }
    }

    /// [`super::report`] on this record.
    pub(crate) fn report(&mut self, policy: &Policy, now: u64, report: &Report) -> Option<Claim> {
        let period_us = (policy.period_ns() / 1_000).max(1);
        let round = ns(report.round).max(1);
        // Bounded so that the Lua's products stay exact (below 2^53, see super::EXACT),
        // identically here: a count this large only says "more than the limit".
        let most_offered = EXACT / 2 / period_us;
        self.offered = self
            .offered
            .saturating_add(report.offered)
            .min(most_offered);
        self.keep_until = self
            .keep_until
            .max(now.saturating_add(round.saturating_mul(2)));
        let open = self.open && now < self.since.saturating_add(round);
        let due = self.since == 0 || report.force || now >= self.since.saturating_add(round / 2);
        if open || !due {
            return None;
        }
        let enforcing = if now < self.deadline { self.share } else { 0 };
        let elapsed = match now.checked_sub(self.since) {
            Some(elapsed) if self.since != 0 && elapsed > 0 => elapsed,
            _ => round,
        };
        let sample =
            u128::from(self.offered) * u128::from(policy.period_ns()) / u128::from(elapsed);
        let demand = match self.since {
            0 => sample,
            _ => {
                let (elapsed, round) = (u128::from(elapsed), u128::from(round));
                (u128::from(self.demand) * round + sample * elapsed) / (round + elapsed)
            }
        };
        let most_demand = EXACT / 2 / ns(report.round).div_ceil(1_000).max(1);
        let demand = u64::try_from(demand).unwrap_or(u64::MAX).min(most_demand);
        self.demand = demand;
        self.offered = 0;
        // Claims are numbered at least a microsecond apart (the stores count in
        // microseconds).
        self.since = now.max(self.since.saturating_add(1_000));
        self.open = false;
        if demand == 0 && enforcing == 0 && !report.force {
            // Nothing wanted, nothing held: no renewal (home's record expires alone).
            return None;
        }
        // The share in force ends no later than this claim's deadline under the hold
        // used now: home holds it that long at most (a hold shortened by a reload).
        self.deadline = self.deadline.min(deadline(self.since, report.hold));
        self.open = true;
        Some(Claim {
            seq: self.since,
            demand,
            enforcing,
        })
    }

    /// [`super::apply`] on this record.
    pub(crate) fn apply(
        &mut self,
        policy: &Policy,
        now: u64,
        seq: u64,
        grant: u64,
        hold: std::time::Duration,
    ) -> bool {
        if !self.open || self.since != seq {
            return false;
        }
        self.open = false;
        let until = deadline(seq, hold);
        if now >= until {
            return false;
        }
        // The bucket up to now at the old rate; the new rate from now on. (A smaller
        // capacity caps the level at the next check.)
        self.advance(policy, now);
        let before = self.in_force(policy, now);
        self.bucket = self.bucket.capped(&before, now, 0);
        let grantable = policy.limit() - policy.region_floor().unwrap_or(1);
        self.share = grant.min(grantable);
        self.deadline = until;
        true
    }
}
