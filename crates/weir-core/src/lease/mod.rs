//! Token leases: take units from a key before spending them, give back the rest.
//!
//! An instance takes up to a batch of units from a shared key in one atomic step
//! ([`take`]), spends them without asking the store again, and gives back what it did
//! not spend ([`give_back`]). The key keeps, beside its algorithm state, a record per
//! lease ([`Leases`]): units granted, and an expiry in the store's time after which
//! the units count as spent (a holder that crashed, or stopped answering).
//!
//! **Units held in leases still count against the capacity.** The bucket never refills
//! beyond `capacity - outstanding` tokens (token bucket: the refill is capped there;
//! GCRA: the clamp `tat >= now` becomes `tat >= now + outstanding × period`), so the
//! tokens a key has plus the units out in its leases never exceed its capacity, and a
//! lease never makes the key admit more than the bucket alone: a plain bucket deciding
//! each unit at the instant it is spent would admit every one (the property tests
//! check exactly that). The cap holds at every instant: between two expiries the
//! bucket refills up to the capacity less the units still out, and what it could not
//! refill while a lease was out does not come back when the lease ends (else the
//! holder's units and that refill could be spent together, beyond the capacity). The
//! cost of leasing is units held by one instance while another is denied.
//!
//! Leases are for `token_bucket` and `gcra`, whose state is a level that refills
//! continuously, so a unit taken now and spent later is counted once, whenever it is
//! spent. Refused ([`LeaseError`]):
//! - `fixed_window`, `sliding_window`, `sliding_log` forget their counts as windows
//!   pass: units leased near a window's end and spent after it count in a window that
//!   no longer limits anything, while the new window admits its whole limit again;
//!   no cap on the state can hold them.
//! - `leaky_bucket` tells each admitted request how long to wait so that requests leave
//!   at the steady rate; units spent from a lease would skip that queue.
//!
//! Exact integer arithmetic as in [`check`]: the cap is applied in each algorithm's own
//! representation (tokens in `1 / period_ns` units, arrival time in ticks of `1 / limit`
//! ns), so nothing is approximated.

mod records;

use std::fmt;
use std::time::Duration;

pub use records::{LeaseId, Leases, MAX_LEASES};

use crate::algorithm::capped;
use crate::{Algorithm, Decision, MAX_PERIOD, Policy, State, check, refund};

/// What a [`take`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// The fewest units worth taking: fewer available is a denial (of a check costing
    /// `min`). 0 takes whatever is available, even nothing.
    pub min: u64,
    /// The most units to take (below `min`, it counts as `min`); 0 with `min` 0 peeks.
    pub max: u64,
    /// How long the units are held before they count as spent: a record is kept until
    /// then. Zero grants units spent at once, with no record: a check of a leased key
    /// that honours the other instances' leases. Longer than [`MAX_PERIOD`] counts as
    /// that.
    pub hold: Duration,
    /// A lease to give back first, in the same atomic step: the one being renewed.
    pub closing: Option<Closing>,
}

impl Take {
    /// A check of `cost` on a leased key: `cost` units spent at once, or a denial.
    pub fn check(cost: u64) -> Self {
        Self {
            min: cost,
            max: cost,
            hold: Duration::ZERO,
            closing: None,
        }
    }
}

/// A lease given back, with the units its holder did not spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closing {
    /// The lease.
    pub lease: LeaseId,
    /// Its units not spent (more than it holds counts as all of them).
    pub unspent: u64,
}

/// What a [`take`] granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The lease to spend the units from and give back, or `None` when the units are
    /// spent at once (no hold, nothing granted, or [`MAX_LEASES`] already out: then
    /// exactly `min` units are granted).
    pub lease: Option<LeaseId>,
    /// Units granted: 0 on a denial; else between `min` and `max`.
    pub units: u64,
    /// The key as a check of cost `units` reports it (allowed; for 0 units, what a
    /// peek reports, a denial on a clock stepped back far behind a GCRA state), or the
    /// denial of a check of cost `min` (`retry_after`: when `min` can be granted if no lease is
    /// given back early: the later of the refill reaching it and enough leases
    /// expiring).
    pub decision: Decision,
    /// Whether the take's [`Take::closing`] lease was found (and given back); false
    /// when it had expired (its units count as spent) or none was given.
    pub closed: bool,
    /// Units leased on the key by every instance together in the busiest of the
    /// current second and the one before, this grant's included
    /// ([`Leases::taken_rate`]): the key's demand as the store sees it, from which an
    /// instance sizes its share of a batch.
    pub taken_rate: u64,
}

/// Why a policy cannot be leased.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseError {
    /// Leases are for `token_bucket` and `gcra` only (see the module's doc for why).
    NotLeasable(Algorithm),
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::NotLeasable(Algorithm::LeakyBucket) => f.write_str(
                "leases are for token_bucket and gcra, not leaky_bucket: units spent from a lease would skip its queue's delay",
            ),
            LeaseError::NotLeasable(algorithm) => write!(
                f,
                "leases are for token_bucket and gcra, not {algorithm}: a window forgets its counts as it passes, so units leased in one window and spent in the next would not be counted"
            ),
        }
    }
}

impl std::error::Error for LeaseError {}

/// Whether `policy`'s keys can be leased.
pub fn leasable(policy: &Policy) -> Result<(), LeaseError> {
    match policy.algorithm() {
        Algorithm::TokenBucket | Algorithm::Gcra => Ok(()),
        other => Err(LeaseError::NotLeasable(other)),
    }
}

/// Takes units from a key at `now` (ns since the Unix epoch, the store's time), in one
/// step: drops the expired records (their units count as spent: nothing comes back);
/// gives back `take.closing` if it is still held (see [`give_back`]); then, if the bucket has at least `take.min` units
/// available under the cap (`capacity - outstanding`), grants `k = min(max, available)`
/// units, consumed exactly as a check of cost `k` consumes them, and records a lease of
/// `k` until `now + hold` when `hold > 0` and `k > 0` (counted in the key's
/// [`Leases::taken_rate`], which every grant reports). With fewer available, grants
/// nothing and changes nothing else but, for a take with a hold, the key's last turn:
/// its `retry_after` is then its turn behind the leasing takes denied before it (see
/// `Leases::next_turn`), so that instances waiting on a scarce key come back one after
/// the other (never further than a quarter of the hold, or the bucket's refill from
/// empty, unless its own units take longer).
pub fn take(
    policy: &Policy,
    state: &mut Option<State>,
    leases: &mut Leases,
    now: u64,
    take: &Take,
) -> Result<Grant, LeaseError> {
    leasable(policy)?;
    // A state found full is dropped, as a check drops it (nothing else changes).
    check(policy, state, now, 0);
    let (mut s, mut l) = (state.clone(), leases.clone());
    advance(policy, &mut s, &mut l, now);
    let closed = take
        .closing
        .is_some_and(|c| close(policy, &mut s, &mut l, now, c.lease, c.unspent));
    // Brought forward, the state is under the cap now: a check reads it as it is.
    let available = check(policy, &mut s, now, 0).remaining;
    if take.min > available || take.min > policy.capacity() {
        let mut decision = check(policy, &mut s.clone(), now, take.min);
        let mut turn = None;
        if take.min <= policy.capacity() {
            let mut wait = retry(policy, &s, &l, now, take.min);
            if !take.hold.is_zero() {
                // A leasing take waits its turn behind the others denied before it.
                let at = now.saturating_add(whole_micros(wait));
                let span = refill_micros(policy, take.max.clamp(take.min, policy.capacity()));
                let quarter = hold_micros(take.hold) / 4 * 1_000;
                let latest =
                    now.saturating_add(refill_micros(policy, policy.capacity()).min(quarter));
                let next = l.next_turn(now, at, span, latest);
                wait = Duration::from_nanos(next - now);
                turn = Some(next);
            }
            decision.retry_after = Some(wait);
        }
        let taken_rate = l.taken_rate(now);
        if closed {
            (*state, *leases) = (s, l);
        } else if let Some(turn) = turn {
            leases.keep_turn(turn);
        }
        return Ok(Grant {
            lease: None,
            units: 0,
            decision,
            closed,
            taken_rate,
        });
    }
    // With no room for a record, only `min` is granted (spent at once): units beyond it
    // with no record could not be held, and would be lost.
    let room = take.hold.is_zero() || l.len() < MAX_LEASES;
    let max = if room { take.max } else { take.min };
    let units = max.max(take.min).min(available);
    let decision = check(policy, &mut s, now, units);
    let mut lease = None;
    if units > 0 && !take.hold.is_zero() {
        let hold = u64::try_from(take.hold.min(MAX_PERIOD).as_nanos()).unwrap_or(u64::MAX);
        lease = l.add(now, units, now.saturating_add(hold));
        if lease.is_some() {
            l.note_taken(now, units);
        }
    }
    let taken_rate = l.taken_rate(now);
    if units > 0 || closed {
        (*state, *leases) = (s, l);
    }
    Ok(Grant {
        lease,
        units,
        decision,
        closed,
        taken_rate,
    })
}

/// Gives back lease `lease` at `now` with `unspent` of its units (at most its units)
/// not spent: removes its record and refunds `unspent` exactly as `weir_core::refund`
/// does, under the cap of the leases still out. A lease expired or unknown changes
/// nothing: its units already count as spent, and are never counted twice. Returns
/// whether the lease was found.
pub fn give_back(
    policy: &Policy,
    state: &mut Option<State>,
    leases: &mut Leases,
    now: u64,
    lease: LeaseId,
    unspent: u64,
) -> Result<bool, LeaseError> {
    leasable(policy)?;
    if !leases.holds(lease, now) {
        return Ok(false);
    }
    advance(policy, state, leases, now);
    Ok(close(policy, state, leases, now, lease, unspent))
}

/// Brings `state` forward to `now` under the leases' cap as it was at each instant:
/// between two expiries the bucket refills up to `capacity` less the units of the
/// records still unexpired, so a refill under a lease never comes back when the lease
/// ends (it would let the holder's units and the refill be spent together). Then drops
/// the expired records.
fn advance(policy: &Policy, state: &mut Option<State>, leases: &mut Leases, now: u64) {
    for end in leases.ends_until(now) {
        // Up to `end`, the records expiring at `end` or later held their units.
        *state = capped(policy, state, end, leases.outstanding(end - 1));
    }
    *state = capped(policy, state, now, leases.outstanding(now));
    leases.forward_to(now);
}

/// When a take of `min` (at most the capacity) denied at `now` would be granted if no
/// lease is given back early: once enough leases have expired for the cap to allow
/// `min`, as soon as the refill (under the cap until then) reaches it.
fn retry(policy: &Policy, state: &Option<State>, leases: &Leases, now: u64, min: u64) -> Duration {
    let at = leases.at_most_at(now, policy.capacity() - min);
    let (mut s, mut l) = (state.clone(), leases.clone());
    advance(policy, &mut s, &mut l, at);
    let refill = check(policy, &mut s, at, min)
        .retry_after
        .unwrap_or_default();
    Duration::from_nanos(at - now) + refill
}

/// `wait` rounded up to whole microseconds, in nanoseconds: turns are counted in the
/// microseconds a Redis store keeps them in, so that both decide alike.
fn whole_micros(wait: Duration) -> u64 {
    u64::try_from(wait.as_nanos().div_ceil(1_000) * 1_000).unwrap_or(u64::MAX)
}

/// A take's hold as a Redis store counts it: whole microseconds, rounded up, at most
/// [`MAX_PERIOD`].
fn hold_micros(hold: Duration) -> u64 {
    u64::try_from(hold.min(MAX_PERIOD).as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX)
}

/// The time `units` take to refill under `policy`, rounded up to whole microseconds,
/// in nanoseconds.
fn refill_micros(policy: &Policy, units: u64) -> u64 {
    let per_micro = u128::from(policy.limit()) * 1_000;
    let micros = (u128::from(units) * u128::from(policy.period_ns())).div_ceil(per_micro);
    u64::try_from(micros * 1_000).unwrap_or(u64::MAX)
}

/// Removes an unexpired record and refunds its `unspent` units under the cap of the
/// others, the state brought forward to `now`; whether it was found.
fn close(
    policy: &Policy,
    state: &mut Option<State>,
    leases: &mut Leases,
    now: u64,
    lease: LeaseId,
    unspent: u64,
) -> bool {
    let Some(units) = leases.remove(lease) else {
        return false;
    };
    let held = leases.outstanding(now);
    refund(policy, state, now, unspent.min(units));
    *state = capped(policy, state, now, held);
    true
}
