//! Slots of requests in flight on a shared store (`algorithm: concurrency`, issue 38):
//! the specification of the slot leases that `slots.lua` and the engine implement, and
//! a [`stateright`] model of it that the test suite checks exhaustively (within bounds)
//! for 2 instances.
//!
//! One key of one rule: at most `limit` requests in flight. Time is in ticks of
//! Redis's clock. Two instances are enough: one instance holds several requests, and
//! what sets instances apart (a lease, a clock, a crash) needs only two. An
//! instance's clock enters only through when it renews: its rate, pauses and skew are
//! all in whether renewals are timely, which the model either assumes or not.
//!
//! # Redis (one sorted set per key; each script atomic)
//!
//! The set `<state key>:slots` maps slot ids to deadlines, and the key has a time to
//! live. Every `now` below is Redis's (`TIME`), never an instance's.
//!
//! - **Take** `(id, lease)`: drop every slot with `deadline <= now`; if fewer than
//!   `limit` are left, add `id` with deadline `now + lease` and allow, else deny.
//! - **Renew** `(lease, ids)`: for each `id` still in the set *and* `deadline > now`,
//!   move its deadline to `now + lease`. An expired or released slot is left alone.
//! - **Release** `id`: `ZREM`: removes that id only.
//! - **Expiry**: the key's TTL only ever grows, to the latest deadline set (`PTTL`
//!   compared before `PEXPIRE`), so the key never expires before a slot it holds.
//!
//! # An instance
//!
//! Per request, a fresh slot id (64 random bits: unique across instances). It sends a
//! take; if the take is allowed the request is in flight and the instance renews its
//! slot every `lease / 3` (on its own monotonic clock) until the request ends, then
//! stops renewing and releases. A take whose reply does not come in time (less than
//! the lease after it was sent) is answered as a store failure (503, or as the
//! failure policy says), and its slot, if the take ran, is released; if that release
//! is lost too, the slot is held by no request until its deadline. (The model sends
//! that release for a reply that comes too late, and counts a reply that never comes
//! as the lost case.)
//!
//! # Faults
//!
//! Any command or reply may be delayed, reordered or lost; a renewal or release may be
//! retried (run twice). An instance may crash: its requests vanish unreleased; what it
//! had already written to Redis's socket may still run, in the tick of the crash, and
//! nothing after. Instances may run with different leases (a rolling change of
//! `store.slot_lease`). Renewals are either *timely* (every slot in flight renewed
//! before its deadline) or not (late, lost: Redis unreachable, the instance stalled).
//!
//! # What is checked ([`properties`])
//!
//! - The set never counts more than `limit` unexpired slots, whatever the faults.
//! - Under timely renewals, at most `limit` requests of live instances are in flight,
//!   and each holds its own unexpired slot: no release, renewal or take of another
//!   request takes it away.
//! - A crashed instance's slots expire at most its `lease` after the crash: a take
//!   then finds them free.
//! - A slot once freed (released, dropped, expired) never comes back: a late or
//!   retried renewal cannot resurrect it, nor a release free another's.
//!
//! # The bound, and its trade
//!
//! A slot outlives its request by at most `lease` (a crash, a lost release) and is
//! never shared. Without timely renewals, a request in flight may lose its slot at its
//! deadline and another take it: more than `limit` requests in flight. The checker
//! finds that run (`timely: false`); the store logs it ("slots of requests in flight
//! expired before they were renewed") and it needs Redis unreachable, or the instance
//! stalled, for a whole lease (three renewals missed).
//!
//! # What the implementation must not do (checked to fail)
//!
//! - **Set the TTL to its own lease** ([`Expire::Set`], `slots.lua` as first written,
//!   found by this model): with leases that differ, a take or renewal with the shorter
//!   lease expires the key, and with it a longer-leased slot still in flight.
//! - **Renew without checking** ([`RenewCheck::Present`], [`RenewCheck::Upsert`]): a
//!   late renewal brings back an expired or released slot.
//! - **Ids per instance** ([`Ids::PerInstance`]): two requests share one slot, and a
//!   release frees another's.
//! - **The instance's clock** ([`Clock::Instance`]): a clock ahead drops others' slots
//!   before their deadline.

pub mod actions;
pub mod properties;
pub mod state;

pub use actions::{Action, Clock, Expire, Ids, RenewCheck, SlotModel, TakeWait};
