//! Regional shares of a global limit (issue 22): the specification of the share
//! protocol, and a [`stateright`] model of it that the test suite checks exhaustively
//! (within bounds) for 3 regions.
//!
//! One key of one global rule: a limit of `L` units per period, enforced by `N = 3`
//! regions that each decide their own requests. The model is in integers (shares in
//! units, time in discrete ticks).
//!
//! # Floors and shares
//!
//! Each region `i` has a constant floor `f_i` units per period, always in force locally
//! and never exchanged. `G = L - sum(f_i)` is the grantable part. A region enforces
//! `f_i + s_i`, where `s_i` is its *share in force*: the share it was last granted while
//! that share's local deadline has not passed, else 0. The protocol keeps, at every
//! instant,
//!
//! ```text
//! sum over regions of (share in force)  <=  G                 (the invariant)
//! ```
//!
//! The floors take no part in it, so the model leaves them out.
//!
//! # Home (one store, chosen by hashing the key; every operation atomic)
//!
//! Per region `i`, a record: `share_i, expires_i, held_i, held_expires_i, demand_i,
//! seq_i`, and
//!
//! ```text
//! reserved_i(h) = max(share_i if h < expires_i else 0, held_i if h < held_expires_i else 0)
//! ```
//!
//! at home's time `h`: what home counts as possibly enforced by region `i`.
//!
//! # A region (one local record per key, in its own store; every operation atomic)
//!
//! The region has many instances but one record per key: `s` (the share), `D` (its
//! deadline), `a` (units offered since the last claim), a claim token with `claimed_at`,
//! and a `seq` counter. Every request in the region adds its cost to `a` (offered,
//! allowed or not) and is decided against a token bucket of rate `(f_i + s if now < D
//! else f_i)` per period and capacity `C * (f_i + s) / L`.
//!
//! # A rebalance round, per active key, by one instance of the region (the claimer)
//!
//! 1. **Claim** (the region's store): if no claim younger than the claim timeout is
//!    open, take a new claim token, `claimed_at = now`, read and reset `a` into the
//!    demand `d` (units per period), `e = s if now < D else 0` (the share in force now),
//!    `seq = ++seq`, and send `RENEW(i, d, e, seq)` to home. Else do nothing: another
//!    instance renews the key this round.
//! 2. **Renew** (home, at home's time `h`):
//!    - if `seq <= seq_i`: stale; reply "stale", change nothing;
//!    - `avail = max(0, G - sum_{j != i} reserved_j(h))`;
//!    - `target = 0` if `d == 0`, else `floor(G * d / (d + sum of demand_j))` over the
//!      `j != i` whose record is unexpired (`reserved_j(h) > 0` or `expires_j > h`)
//!      and `demand_j > 0`;
//!    - `g = min(target, avail)`;
//!    - record `i := share = g, expires = h + H, held = min(e, reserved_i(h)),
//!      held_expires = h + H, demand = d, seq = seq` (`reserved_i(h)` of the record it
//!      replaces); reply `g`.
//! 3. **Apply** (the region's store), on the reply: only if the claim token is still
//!    the open one and `now < claimed_at + 3H/4`: `s = g`, `D = claimed_at + 3H/4` (the
//!    bucket is first brought to now at its old rate, then the rate changes); close
//!    the claim. Otherwise (the claim was replaced, the reply is too late or stale):
//!    close the claim if it is ours, ignore `g`. A lost reply is one never applied.
//! 4. **Confirm**: if `g < e` (the region shrank), the claimer claims and renews again
//!    at once, with the same demand `d`, so that home stops reserving `held = e` and
//!    the units freed go to the others this round.
//!
//! ## The fix to `held` (found by this model)
//!
//! The notes first said `held = e`. A renewal can be delayed past the expiry of the
//! record that reserved `e` (`h_prev + H`); meanwhile home grants those units to
//! another region; when the renewal arrives, `held = e` reserves them a second time.
//! Home then reserves more than `G`, and `G - sum_{j != i} reserved_j` is *negative*
//! at the next renewal of another region (the notes said "`>= 0` by the invariant"): in
//! unsigned arithmetic it wraps to a huge grant, in signed arithmetic it grants a
//! negative share. A counterexample the checker finds (`G = 3, H = 3`, local deadline
//! 2; [`Held::AsClaimed`]):
//!
//! ```text
//! tick 0  A claims (d = 2, e = 0); home grants 3 (A's record expires at 3); A applies
//!         s = 3 until tick 2. A claims again (d = 0, e = 3); the RENEW is delayed.
//! tick 3  A's record has expired (and A's share lapsed at 2). B claims (d = 1): home
//!         grants B 3. A's delayed RENEW arrives: share 0, held = e = 3, until 6.
//!         Home reserves 3 for A and 3 for B: 6 > G = 3. The next renewal of C finds
//!         avail = 3 - 6.
//! ```
//!
//! The shares in force stay within `G` (A's share lapsed before its record expired, and
//! a grant computed from a negative `avail` clamped at 0 is 0): the invariant itself
//! holds in every run the checker explores; but home's bound does not, and an implementation that trusts `avail >= 0`
//! over-admits. The fix: `held = min(e, reserved_i(h))`. Holding what home no longer
//! reserves protects nothing: if the region still enforced `e` at `h`, home still
//! reserves at least `e` for it (the cover below), so the minimum is `e` exactly when
//! it is needed. With it home never reserves more than `G`, so `avail >= 0`; clamping
//! `avail` at 0 stays as a defence.
//!
//! # Why the invariant holds
//!
//! Two facts, each kept by every step, give it (the checker verifies both, [`COVERED`]
//! and [`RESERVED`]):
//!
//! - **Home never reserves more than `G`.** A renewal of `i` sets `reserved_i` to
//!   `max(g, held)` with `g <= avail = G - sum_{j != i} reserved_j(h)` and `held <=
//!   reserved_i(h)` (the old one, itself `<= avail` since the sum was `<= G`).
//!   Expiries only lower reservations.
//! - **Home reserves for each region at least the share it enforces**
//!   (`in force_i(t) <= reserved_i(t)`). A region's share in force came from a claim `c`
//!   made before home recorded its renewal at `h >= c`; the share lasts until `c + 3H/4`
//!   on the region's clock, home reserves it until `h + H` on its own, which comes
//!   later. The record can be replaced before then only by a renewal of a *later* claim
//!   (an older one is stale, by `seq`), and a later claim was made either after `g` was
//!   applied, so its `e` is `g` and home holds it, or (the claim `c` timed out and was
//!   replaced) before, in which case `g` is never applied (the token is not the open
//!   one) and the region still enforces the `e` it reported, which home holds. While a
//!   claim is open nothing but its own reply changes `s`.
//!
//! Summing the second over the regions and applying the first gives the invariant.
//! Hence, per window `T`, the regions admit at most `C + L * T / period` between them,
//! as one bucket would, provided each region's bucket never holds more than its
//! current capacity: when its share lapses at `D` or shrinks, its level is capped to the
//! smaller capacity at that instant (a lazy bucket applies the cap piecewise, at `D`, as
//! the lease store does at expiries).
//!
//! ## Clocks and the discretisation
//!
//! Clocks are never compared: each duration is measured on one side's own clock.
//! `3H/4` on the region's clock ends before `H` on home's as long as the clock rates
//! differ by less than 25%, the margin the protocol keeps. The model runs every clock
//! on one shared tick (as the lease model does), so it checks the protocol with the
//! rates equal; the deadline rule it checks is the discrete one, `D = claimed_at +
//! deadline` with `deadline = floor(3H/4)` ticks (2 for `H = 3`, 3 for `H = 4`), and
//! shares are in force while `now < D`, reserved while `h < h_renew + H`. Since
//! `claimed_at <= h_renew` and `deadline < H`, the local deadline comes strictly before
//! home's expiry, as in the protocol. (In ticks, any `deadline <= H` would keep the
//! invariant with one clock: the quarter is for the rates, which one clock cannot show.)
//!
//! # Notes for the implementation
//!
//! - **`avail`**: computed signed and clamped at 0 (`max(0, ...)`), and the grant with
//!   it; never subtracted in unsigned arithmetic.
//! - **Sequence numbers never go backwards** for a (key, region): if the region's
//!   record can expire or be lost, take `seq` from something monotone (for example the
//!   region's clock in milliseconds times a constant, plus the counter), so that a
//!   recreated record still sorts after every renewal sent before.
//! - **Home's record may expire** (a TTL) once its share has expired and it holds
//!   nothing, `seq` included: a renewal delayed past that is recorded, but its reply
//!   finds its claim replaced or closed, so the units it reserves are never enforced
//!   (checked, [`ShareModel::home_ttl`]).
//! - **A retried RENEW** (the same `seq`) is stale at home if the first one arrived.
//!   Replying with the recorded grant when `seq == seq_i` instead (an idempotent retry)
//!   is safe: the record is still the one this claim made, so `D` still comes before
//!   its expiry. (Not modelled: the model never duplicates a message.)
//! - **The bucket at a lapse**: when the share lapses at `D`, or a smaller one is
//!   applied, the region's bucket is brought to that instant at the old rate, then
//!   capped to the smaller capacity. Without the cap, a region's old burst and the
//!   burst of the region its units went to add up to more than `C`. (Not modelled:
//!   the model stops at the shares.)
//!
//! # Faults
//!
//! Any message (renewal, reply) may be delayed across ticks, delivered in any order,
//! or lost: the messages in flight are a set any of which may arrive next, or never. A
//! claim may time out and be replaced by a new one while its renewal or reply is in
//! flight. A region may be cut off from home (its messages in flight and those it sends
//! are dropped) and later heal. The claimer may not send the confirm (it is sent in the
//! tick of the shrink or never).
//!
//! # What the implementation must not do (checked to fail)
//!
//! - **NoHeld** ([`Held::Forgotten`]): home records only `share = g` at a renewal. The
//!   reply is lost, the region keeps enforcing its previous share, and home grants it to
//!   another region.
//! - **HoldFromReply** ([`DeadlineFrom::Reply`]): the region measures `D` from the
//!   reply's arrival. A reply late within the claim's window outlives home's record.
//! - **NoSeq** ([`SeqCheck::Unchecked`]): home records a renewal older than the one it
//!   recorded. The older renewal of a timed-out claim, reordered after the renewal of the
//!   claim that replaced it, overwrites the record whose share the region applied.
//! - **ApplyAnyReply** ([`Apply::AnyReply`]): the region applies a reply to a claim that
//!   was replaced, a share home has since overwritten with the replacing renewal's.
//! - **held = e** ([`Held::AsClaimed`]): home reserves more than `G` (above).
//!
//! # Checked
//!
//! [`properties`] lists what is checked: the invariant [`IN_FORCE`], home's bound
//! [`RESERVED`], the per-region cover [`COVERED`], and that the interesting cases happen
//! in the explored space. `tests/share_checker.rs` runs the checker with small bounds
//! (`G = 3`, `H = 3` or `4`, up to 4 ticks, 2 to 4 claims, demands 0, 1 or 2, from the
//! first state and from steady shares), finds each pitfall's counterexample and one for
//! a local deadline past home's expiry, and drives fault-free rounds with steady
//! demands to the demand-weighted target: within 3 rounds, for every order of the
//! regions in each round, from several starts and after a partition heals (and a
//! fourth round is needed without the confirm).
//!
//! [`COVERED`]: properties::COVERED
//! [`RESERVED`]: properties::RESERVED
//! [`IN_FORCE`]: properties::IN_FORCE

pub mod actions;
pub mod properties;
pub mod state;

pub use actions::{Action, Apply, DeadlineFrom, Held, SeqCheck, ShareModel};
