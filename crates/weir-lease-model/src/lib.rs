//! A model-checked specification of weir's token leases for hot keys (issue 21).
//!
//! This crate is the written specification the implementation follows, and a
//! [`stateright`] model of it that the test suite checks exhaustively (within bounds)
//! for 3 instances. It models one key of one rule of a token bucket (GCRA seen as a
//! bucket), in integers, with time in discrete ticks.
//!
//! # Policy
//!
//! Capacity `C` units (the burst); one unit refilled every `R` ticks; leases of up to
//! `B` units ("batch"), held `H` ticks.
//!
//! # The shared store (one Redis key; every operation atomic)
//!
//! - `tokens` in `0..=C`, and `leases`: lease id → (units granted, expiry tick).
//!   `outstanding` is the sum of the units of the unexpired records.
//! - **The cap.** Tokens never exceed `C - outstanding`: the refill stops there, and a
//!   return adds at most up to there. Units held in leases still count against the
//!   capacity, so the bucket cannot refill under them.
//! - A record is dropped when its expiry tick comes (`granted + H`); its units are then
//!   considered spent: removed from `outstanding`, nothing added to `tokens`. (The model
//!   drops it, then refills, at the start of each tick. An implementation computing the
//!   refill lazily must apply the cap piecewise, between the expiry instants of the
//!   records it drops: the refill elapsed while capped is lost, not credited later.)
//! - **Take** (instance asks for up to `B`): grant `k = min(B, tokens)`, `tokens -= k`,
//!   record the lease `(id, k, now + H)` when `k > 0`, reply `Grant(id, k)`; when
//!   `k == 0` the reply also says the ticks until the next token.
//! - **Return** `(id, unspent)`: if record `id` still exists, drop it and add `unspent`
//!   to tokens (capped at `C - outstanding` after the drop); if it has expired, ignore
//!   the return entirely: its units were released at expiry, counting them again would
//!   admit them twice.
//! - **Direct check** (a caller that does not lease): one unit from `tokens`, under the
//!   same cap.
//!
//! # An instance
//!
//! Local `units` of at most one lease, a local `deadline`, and `denied_until`. A request:
//!
//! 1. if it holds units and `now < deadline`: spend one (admitted, no store call);
//! 2. else if `now < denied_until`: deny locally (no store call);
//! 3. else send a take, having first returned any units whose deadline passed.
//!
//! The instance measures the hold from when it *sent* the take, so its deadline
//! `sent + H` is never later than the store's expiry `granted + H`: both are durations
//! on one side's own clock, no clocks are compared. It therefore never spends a unit
//! of a record the store has dropped. On `Grant(id, k)`: `units = k`,
//! `deadline = sent + H`, or `denied_until = now + retry` when `k == 0`. A grant for a
//! take it gave up waiting for is returned at once, unspent. When the deadline passes
//! with units left, and on reload or shutdown: send `Return(id, unspent)`, `units = 0`.
//!
//! # Faults
//!
//! Any message (take, grant, return) may be delayed across ticks, delivered in any
//! order, or lost: the messages in flight are a set any of which may arrive next, or
//! never (a lost message is one never delivered, which needs no step of its own). An
//! instance may stop waiting for a reply (a timeout) and take again. An instance may
//! crash holding a lease: its units vanish, never returned, and the model does not
//! restart it (a crash holding nothing is an instance that stays silent, which every
//! run already includes).
//!
//! # The bound ([`bound`])
//!
//! A plain bucket admits over the ticks `first..=last` at most
//! `C + floor(last / R) - floor(first / R)` ([`bucket_bound`]): what it held when `first`
//! began, plus the refills at the ticks after it. Cumulatively, ticks `0..=t` admit at
//! most `C + floor(t / R)`; any `W` consecutive ticks at most `C + ceil((W - 1) / R)`
//! ([`window_bound`], which is `C + floor(W / R)` or one more, by phase, for `R >= 2`).
//!
//! **Leases admit zero more than that.** Why: let `U = tokens + unspent units of live
//! records`. Every admission takes one unit from `U` (a direct check from `tokens`, a
//! spend from a live record, by the deadline rule). Takes move units from `tokens` to
//! a record (`U` unchanged); returns and expiries never raise `U`; a refill raises it by
//! one only while `tokens + outstanding < C`, so `U <= C` always, and `U` never exceeds
//! the level of a plain bucket that admitted the same units at the same ticks. The
//! checker verifies the stronger form ([`plain_bucket_admits`]): the sequence admitted
//! per tick is one a plain bucket could have admitted.
//!
//! The cost of leasing is under-admission, never over-admission: units held by one
//! instance while another is denied, units stranded until expiry by a crash or a lost
//! message (at most `H` ticks after the grant), and refills lost while the bucket sits
//! at `C - outstanding` under spent-but-unexpired leases.
//!
//! # What the implementation must not do (checked to fail)
//!
//! - **No cap** ([`Refill::Uncapped`]): tokens refill up to `C` whatever the leases hold.
//!   An instance holds a lease while the bucket refills under it, then both are spent in
//!   one window: over-admission. (The cumulative bound still holds; the burst does not.)
//! - **The cap applied once per call** ([`Refill::CappedPerCall`]), the natural lazy
//!   Redis script: drop the expired records, then add all the refill since the last call,
//!   capped by what is outstanding now. Refill that came while a since-expired lease held
//!   the bucket at its cap is credited after all: over-admission. A lazy store must apply
//!   the cap piecewise, between the expiry instants of the records it drops.
//! - **The hold measured from the grant's arrival** ([`HoldFrom::Received`]): a delayed
//!   grant outlives its record, and the instance spends units the store has released.
//!
//! # Batches of every size ([`sizing`])
//!
//! `lease: auto` sizes each batch from the key's take rate the store reports (issue
//! 41), so a take may ask for anything from one unit to the capacity.
//! [`SizedLeaseModel`] lets the checker choose every take's batch: the bound holds for
//! any sizing rule (`tests/sizing_checker.rs`).
//!
//! # Checked
//!
//! [`properties`] lists what is checked; `tests/` runs the checker with bounds (ticks,
//! takes, crashes) small enough for the test suite.
//!
//! # Regional shares ([`share`])
//!
//! The crate also specifies and models the protocol by which regions share a global
//! limit (issue 22): each region enforces a constant floor plus a share of the rest
//! that one home store grants, renewed by claims with deadlines, and home keeps
//! counting a share a region may still enforce. [`share`] is that specification and
//! its model; the checker verifies that the shares in force never sum to more than the
//! grantable part, whatever the delays, reorderings, losses, timeouts and partitions
//! (`tests/share_checker.rs`).
//!
//! # Slots of requests in flight ([`slots`])
//!
//! And the slot leases of `algorithm: concurrency` on Redis (issue 38): a sorted set of
//! slots with deadlines on Redis's clock, taken, renewed while a request lasts, and
//! released. The checker verifies that the set never counts more than `limit` slots,
//! that under timely renewals no more than `limit` requests are in flight, that a
//! crashed instance's slots expire within its lease, and that no late or retried
//! renewal or release brings back or frees a slot it should not
//! (`tests/slots_checker.rs`).

#![deny(missing_docs)]

pub mod actions;
pub mod bound;
pub mod properties;
pub mod share;
pub mod sizing;
pub mod slots;
pub mod state;

pub use actions::{Action, HoldFrom, LeaseModel, Refill};
pub use bound::{bucket_bound, plain_bucket_admits, window_bound};
pub use sizing::SizedLeaseModel;
