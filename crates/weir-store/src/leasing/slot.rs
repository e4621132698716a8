//! One key's lease on this instance: the units it holds, spent by many threads without
//! a lock, and what the store last said of it.
//!
//! The units and the lease they belong to are one atomic word (a generation in the top
//! bits, the units in the rest): a spend is a compare-and-swap on it, so two threads
//! never spend one unit, and a spend that races with the lease being taken out (to give
//! it back or renew it) either lands before (and is not given back) or fails (and is
//! not spent). Every change of lease moves the generation on, so units given back to a
//! lease (a request that spent them was denied by another rule) go back only to the
//! lease they came from.
//!
//! A unit is spent only before the lease's local deadline, which is measured from when
//! the take was *sent*, on this instance's clock, and ends before the store's record
//! does (see `weir-lease-model`): this instance never spends a unit of a record the
//! store has dropped. The slow path (taking, installing, giving back) holds the lock.

use weir_core::{Closing, LeaseId, Policy};

use super::sync::{AtomicBool, AtomicU64, Mutex, Ordering};

/// Bits of the word holding the units; the rest hold the generation.
const UNIT_BITS: u32 = 40;
const UNIT_MASK: u64 = (1 << UNIT_BITS) - 1;
/// The most units one lease holds locally (a larger grant keeps this many).
pub(super) const MAX_UNITS: u64 = UNIT_MASK;

fn pack(generation: u64, units: u64) -> u64 {
    (generation << UNIT_BITS) | (units & UNIT_MASK)
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> UNIT_BITS, word & UNIT_MASK)
}

/// What a spend found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spend {
    /// `cost` units spent from the lease of `generation`; `left` remain.
    Spent { generation: u64, left: u64 },
    /// Denied here, as the store said: nothing of this cost is available before
    /// `until` (this instance's clock).
    Denied { until: u64 },
    /// Not enough units held, or the lease is past its deadline: ask the store.
    Empty,
}

/// The lease a slot holds, and whether a take for it is on its way.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// The lease the units belong to, and the policy it was taken under (to give it
    /// back under).
    pub(super) lease: Option<(LeaseId, Policy)>,
    /// A take is on its way: the others wait for it rather than ask too.
    pub(super) taking: bool,
    /// Units this instance was granted in leases of the key, per second.
    granted: Window,
    /// The key's take rate (every instance's) the store reported at the last take.
    taken_rate: u64,
}

/// Units counted in one second of this instance's clock and in the one before it.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    second: u64,
    this: u64,
    last: u64,
}

impl Window {
    /// The counts moved on to the second of `now` (the one before kept only if it is
    /// the one just past).
    fn at(self, now: u64) -> Self {
        let second = now / 1_000_000_000;
        if second <= self.second {
            return self;
        }
        let last = if second == self.second + 1 {
            self.this
        } else {
            0
        };
        Self {
            second,
            this: 0,
            last,
        }
    }

    /// The busier of the second of `now` and the one before.
    fn busiest(self, now: u64) -> u64 {
        let window = self.at(now);
        window.this.max(window.last)
    }
}

/// What a finished take leaves in the slot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Install {
    /// The lease granted, its units to hold here and the policy; `None` when nothing is
    /// held (a denial, or units spent at once).
    pub(super) lease: Option<(LeaseId, u64, Policy)>,
    /// Units may be spent before this instant (this instance's clock).
    pub(super) deadline: u64,
    /// When the store denied the take: requests costing at least `min` are denied here
    /// until `until`.
    pub(super) denied: Option<Denial>,
    /// The take got less than it asked for (or nothing): the key is scarce.
    pub(super) scarce: bool,
    /// The remaining units the store reported, and when the key is full again.
    pub(super) remaining: u64,
    pub(super) full_at: u64,
    /// Units the take was granted in a lease (0 for none), when it answered (this
    /// instance's clock), and the key's take rate the store reported.
    pub(super) granted: u64,
    pub(super) at: u64,
    pub(super) taken_rate: u64,
}

/// A denial remembered: requests of at least `min` units wait until `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Denial {
    pub(super) min: u64,
    pub(super) until: u64,
}

/// One key's lease on this instance.
#[derive(Debug)]
pub(super) struct Slot {
    /// Generation and units of the lease held (see the module's doc).
    word: AtomicU64,
    /// Units are spent only at a time before this.
    deadline: AtomicU64,
    denied_min: AtomicU64,
    denied_until: AtomicU64,
    /// The store's `remaining` at the last take, and when it said the key is full.
    remaining: AtomicU64,
    full_at: AtomicU64,
    /// The last take got less than a batch: the next asks for a whole batch at least,
    /// so that a key offered more than its limit costs a call per batch, not one per
    /// few units refilled.
    starving: AtomicBool,
    /// The last take failed (it may have been granted all the same).
    unsure: AtomicBool,
    /// Units asked for in this second and the one before it (auto batch sizes), and
    /// which second this is.
    second: AtomicU64,
    this_second: AtomicU64,
    last_second: AtomicU64,
    /// Whether a lease is held (what `Held::lease` says), readable without the lock:
    /// the loop that gives leases back visits only these.
    leased: AtomicBool,
    held: Mutex<Held>,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            word: AtomicU64::new(0),
            deadline: AtomicU64::new(0),
            denied_min: AtomicU64::new(u64::MAX),
            denied_until: AtomicU64::new(0),
            remaining: AtomicU64::new(0),
            full_at: AtomicU64::new(0),
            starving: AtomicBool::new(false),
            unsure: AtomicBool::new(false),
            second: AtomicU64::new(0),
            this_second: AtomicU64::new(0),
            last_second: AtomicU64::new(0),
            leased: AtomicBool::new(false),
            held: Mutex::new(Held::default()),
        }
    }
}

impl Slot {
    /// Spends `cost` units at `now` if the lease holds them and is before its deadline;
    /// else a denial remembered for this cost, or [`Spend::Empty`].
    pub(super) fn spend(&self, cost: u64, now: u64) -> Spend {
        let mut word = self.word.load(Ordering::SeqCst);
        loop {
            let (generation, units) = unpack(word);
            // The deadline is read after the word: a lease installed since has a new
            // generation, and the swap below fails.
            if units < cost || now >= self.deadline.load(Ordering::SeqCst) {
                break;
            }
            let spent = pack(generation, units - cost);
            match self
                .word
                .compare_exchange(word, spent, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => {
                    return Spend::Spent {
                        generation,
                        left: units - cost,
                    };
                }
                Err(current) => word = current,
            }
        }
        let until = self.denied_until.load(Ordering::SeqCst);
        if now < until && cost >= self.denied_min.load(Ordering::SeqCst) {
            return Spend::Denied { until };
        }
        Spend::Empty
    }

    /// Gives `units` spent from the lease of `generation` back to it, if it is still
    /// the lease held; else returns false (the lease was given back or renewed since,
    /// with those units counted as spent: the caller refunds them on the store).
    pub(super) fn restore(&self, generation: u64, units: u64) -> bool {
        let mut word = self.word.load(Ordering::SeqCst);
        loop {
            let (now_generation, held) = unpack(word);
            if now_generation != generation || held + units > MAX_UNITS {
                return false;
            }
            match self.word.compare_exchange(
                word,
                pack(generation, held + units),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(current) => word = current,
            }
        }
    }

    /// Starts a take if none is on its way: takes the lease held out of the slot (no
    /// unit of it can be spent from now on) and returns it with its unspent units, to
    /// be given back by the take. `None` when a take is already on its way (wait for
    /// it).
    pub(super) fn begin_take(&self) -> Option<Option<(Closing, Policy)>> {
        let mut held = self.lock();
        if held.taking {
            return None;
        }
        held.taking = true;
        Some(self.take_out(&mut held))
    }

    /// Ends a take: installs what it granted (or remembers its denial) and lets the
    /// next take start; `None`: the take failed. Returns the generation of the lease
    /// installed.
    pub(super) fn finish_take(&self, install: Option<Install>) -> u64 {
        let mut held = self.lock();
        held.taking = false;
        let generation = unpack(self.word.load(Ordering::SeqCst)).0;
        self.unsure.store(install.is_none(), Ordering::SeqCst);
        let Some(install) = install else {
            return generation;
        };
        let mut granted = held.granted.at(install.at);
        granted.this = granted.this.saturating_add(install.granted);
        held.granted = granted;
        held.taken_rate = install.taken_rate;
        self.remaining.store(install.remaining, Ordering::SeqCst);
        self.full_at.store(install.full_at, Ordering::SeqCst);
        self.starving.store(install.scarce, Ordering::SeqCst);
        match install.denied {
            Some(denial) => {
                self.denied_min.store(denial.min, Ordering::SeqCst);
                self.denied_until.store(denial.until, Ordering::SeqCst);
            }
            None => self.denied_until.store(0, Ordering::SeqCst),
        }
        if let Some((lease, units, policy)) = install.lease {
            // The word holds no units (`begin_take` took them out, and nothing
            // installs while a take is on its way): the deadline can move first.
            self.deadline.store(install.deadline, Ordering::SeqCst);
            self.word
                .store(pack(generation, units.min(MAX_UNITS)), Ordering::SeqCst);
            held.lease = Some((lease, policy));
            self.leased.store(true, Ordering::SeqCst);
        }
        generation
    }

    /// Takes the lease out to give it back, whatever its deadline (reload, shutdown),
    /// if it is held and no take is on its way (a take gives it back itself).
    pub(super) fn release(&self) -> Option<(Closing, Policy)> {
        let mut held = self.lock();
        if held.taking || held.lease.is_none() {
            return None;
        }
        self.take_out(&mut held)
    }

    /// What the loop does at `now` with a lease past its deadline: takes it out to be
    /// given back, as [`Slot::release`]; but with `keep_spent`, a lease spent to its
    /// last unit stays until `keep_spent` past its deadline, for the next take to
    /// close with no call of its own (a request past the deadline finds no units and
    /// takes), and is then forgotten with none (`None`: its record has ended).
    pub(super) fn release_due(
        &self,
        now: u64,
        keep_spent: Option<u64>,
    ) -> Option<(Closing, Policy)> {
        let mut held = self.lock();
        let deadline = self.deadline.load(Ordering::SeqCst);
        if held.taking || held.lease.is_none() || now < deadline {
            return None;
        }
        let Some(keep) = keep_spent else {
            return self.take_out(&mut held);
        };
        // Units come back to a lease only by a restore, which a later tick sees.
        let spent = unpack(self.word.load(Ordering::SeqCst)).1 == 0;
        if spent && now < deadline.saturating_add(keep) {
            return None;
        }
        self.take_out(&mut held)
            .filter(|(closing, _)| closing.unspent > 0)
    }

    /// Forgets the lease without giving it back (the key was reset: its records are
    /// gone with its state).
    pub(super) fn forget(&self) {
        let mut held = self.lock();
        let _ = self.take_out(&mut held);
        self.denied_until.store(0, Ordering::SeqCst);
    }

    /// Moves the generation on with no units held; returns the lease that was held,
    /// with its unspent units.
    fn take_out(&self, held: &mut Held) -> Option<(Closing, Policy)> {
        let word = self.word.load(Ordering::SeqCst);
        let (generation, _) = unpack(word);
        let (_, unspent) = unpack(self.word.swap(pack(generation + 1, 0), Ordering::SeqCst));
        self.leased.store(false, Ordering::SeqCst);
        held.lease
            .take()
            .map(|(lease, policy)| (Closing { lease, unspent }, policy))
    }

    /// Whether a take is on its way, no lease is held and no denial remembered at
    /// `now`: the slot can be dropped once its key is quiet.
    pub(super) fn is_idle(&self, now: u64) -> bool {
        if self.holds_lease() || now < self.denied_until.load(Ordering::SeqCst) {
            return false;
        }
        let held = self.lock();
        !held.taking && held.lease.is_none() && now >= self.denied_until.load(Ordering::SeqCst)
    }

    /// Whether the last take failed.
    pub(super) fn unsure(&self) -> bool {
        self.unsure.load(Ordering::SeqCst)
    }

    /// Whether a lease is held.
    pub(super) fn holds_lease(&self) -> bool {
        self.leased.load(Ordering::SeqCst)
    }

    /// Whether the last take got less than it asked for.
    pub(super) fn starving(&self) -> bool {
        self.starving.load(Ordering::SeqCst)
    }

    /// The store's remaining at the last take, and when it said the key is full.
    pub(super) fn last_seen(&self) -> (u64, u64) {
        (
            self.remaining.load(Ordering::SeqCst),
            self.full_at.load(Ordering::SeqCst),
        )
    }

    /// Counts `cost` units asked for at `now` (for auto batch sizes); returns the units
    /// asked for in this second and the one before.
    pub(super) fn note(&self, cost: u64, now: u64) -> u64 {
        let second = now / 1_000_000_000;
        let seen = self.second.load(Ordering::Relaxed);
        if second != seen
            && self
                .second
                .compare_exchange(seen, second, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let this = self.this_second.swap(0, Ordering::Relaxed);
            let last = if second == seen + 1 { this } else { 0 };
            self.last_second.store(last, Ordering::Relaxed);
        }
        let this = self.this_second.fetch_add(cost, Ordering::Relaxed) + cost;
        this.saturating_add(self.last_second.load(Ordering::Relaxed))
    }

    /// This instance's part of the key's takes at `now`: the units it was granted in
    /// the busier of this second and the one before, and the key's take rate (every
    /// instance's) the store reported at the last take.
    pub(super) fn share(&self, now: u64) -> (u64, u64) {
        let held = self.lock();
        (held.granted.busiest(now), held.taken_rate)
    }

    /// The second a unit was last asked for.
    pub(super) fn last_asked(&self) -> u64 {
        self.second.load(Ordering::Relaxed)
    }

    fn lock(&self) -> impl std::ops::DerefMut<Target = Held> + '_ {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(all(test, not(feature = "loom")))]
#[allow(
    clippy::unwrap_used,
    reason = "test code (clippy's test allowance does not see a compound cfg)"
)]
mod tests {
    use std::time::Duration;

    use weir_core::Algorithm;

    use super::*;

    fn policy() -> Policy {
        Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(1), None).unwrap()
    }

    fn install(lease: u64, units: u64, deadline: u64) -> Install {
        Install {
            lease: Some((LeaseId(lease), units, policy())),
            deadline,
            denied: None,
            scarce: false,
            remaining: 50,
            full_at: 0,
            granted: units,
            at: 0,
            taken_rate: units,
        }
    }

    #[test]
    fn units_are_spent_until_the_deadline_and_no_further() {
        let slot = Slot::default();
        assert_eq!(slot.spend(1, 0), Spend::Empty, "nothing held yet");
        assert_eq!(slot.begin_take(), Some(None));
        assert_eq!(slot.begin_take(), None, "one take at a time");
        let generation = slot.finish_take(Some(install(7, 3, 100)));
        assert_eq!(
            slot.spend(2, 10),
            Spend::Spent {
                generation,
                left: 1
            }
        );
        assert_eq!(slot.spend(2, 10), Spend::Empty, "one unit left");
        assert_eq!(slot.spend(1, 100), Spend::Empty, "the deadline has come");
        assert_eq!(
            slot.spend(1, 99),
            Spend::Spent {
                generation,
                left: 0
            }
        );
    }

    #[test]
    fn a_renewal_gives_back_what_was_not_spent_and_old_units_stay_out() {
        let slot = Slot::default();
        slot.begin_take();
        let first = slot.finish_take(Some(install(7, 5, 100)));
        assert!(matches!(slot.spend(2, 1), Spend::Spent { .. }));
        let (closing, _) = slot.begin_take().unwrap().unwrap();
        assert_eq!(
            closing,
            Closing {
                lease: LeaseId(7),
                unspent: 3
            }
        );
        assert_eq!(
            slot.spend(1, 1),
            Spend::Empty,
            "taken out: none left to spend"
        );
        let second = slot.finish_take(Some(install(8, 4, 200)));
        assert_ne!(first, second);
        assert!(
            !slot.restore(first, 2),
            "units of the old lease do not come back"
        );
        assert!(slot.restore(second, 0));
        assert!(matches!(slot.spend(4, 150), Spend::Spent { left: 0, .. }));
        assert!(slot.restore(second, 4));
        assert!(matches!(slot.spend(4, 150), Spend::Spent { left: 0, .. }));
    }

    #[test]
    fn denials_are_remembered_for_their_cost_and_time() {
        let slot = Slot::default();
        slot.begin_take();
        slot.finish_take(Some(Install {
            lease: None,
            deadline: 0,
            denied: Some(Denial { min: 5, until: 100 }),
            scarce: true,
            remaining: 2,
            full_at: 0,
            granted: 0,
            at: 0,
            taken_rate: 0,
        }));
        assert!(slot.starving());
        assert_eq!(slot.spend(5, 50), Spend::Denied { until: 100 });
        assert_eq!(
            slot.spend(4, 50),
            Spend::Empty,
            "a smaller cost may still fit"
        );
        assert_eq!(slot.spend(5, 100), Spend::Empty, "the retry time has come");
        slot.begin_take();
        slot.finish_take(Some(install(9, 10, 300)));
        assert!(!slot.starving());
        assert!(matches!(slot.spend(5, 50), Spend::Spent { .. }));
    }

    #[test]
    fn release_takes_only_a_lease_due_and_not_during_a_take() {
        let slot = Slot::default();
        slot.begin_take();
        slot.finish_take(Some(install(7, 5, 100)));
        assert!(slot.release_due(50, None).is_none());
        slot.begin_take().unwrap();
        assert!(slot.release().is_none(), "the take gives it back");
        slot.finish_take(Some(install(8, 5, 100)));
        let (closing, _) = slot.release().unwrap();
        assert_eq!(
            closing,
            Closing {
                lease: LeaseId(8),
                unspent: 5
            }
        );
        assert!(slot.is_idle(0));
    }

    #[test]
    fn the_share_counts_units_granted_here_against_the_keys_take_rate() {
        let slot = Slot::default();
        let s = 1_000_000_000;
        let grant = |lease, units, at, taken_rate| {
            slot.begin_take();
            slot.finish_take(Some(Install {
                at,
                taken_rate,
                ..install(lease, units, at + s)
            }));
        };
        grant(1, 30, 10 * s, 120);
        grant(2, 20, 10 * s + 1, 200);
        assert_eq!(slot.share(10 * s + 2), (50, 200));
        grant(3, 10, 11 * s, 240);
        assert_eq!(slot.share(11 * s), (50, 240), "the second before counts");
        assert_eq!(slot.share(13 * s), (0, 240), "quiet seconds forget");
    }

    #[test]
    fn a_spent_lease_waits_for_the_next_take_until_its_record_ends() {
        let keep = Some(50);
        let slot = Slot::default();
        slot.begin_take();
        slot.finish_take(Some(install(7, 2, 100)));
        assert!(slot.release_due(99, keep).is_none(), "before the deadline");
        assert!(matches!(slot.spend(2, 10), Spend::Spent { left: 0, .. }));
        assert!(slot.release_due(100, keep).is_none(), "spent: kept");
        assert!(slot.release_due(149, keep).is_none());
        assert!(slot.holds_lease());
        assert!(
            slot.release_due(150, keep).is_none(),
            "its record has ended"
        );
        assert!(!slot.holds_lease(), "forgotten");
        // Kept, the next take closes it.
        slot.begin_take();
        slot.finish_take(Some(install(8, 1, 300)));
        assert!(matches!(slot.spend(1, 200), Spend::Spent { left: 0, .. }));
        assert!(slot.release_due(320, keep).is_none());
        let (closing, _) = slot.begin_take().unwrap().unwrap();
        assert_eq!(closing.lease, LeaseId(8));
        assert_eq!(closing.unspent, 0);
        // A lease with units left goes back at its deadline, kept or not.
        slot.finish_take(Some(install(9, 3, 400)));
        let (closing, _) = slot.release_due(400, keep).unwrap();
        assert_eq!(closing.unspent, 3);
        slot.begin_take();
        slot.finish_take(Some(install(10, 1, 500)));
        assert!(matches!(slot.spend(1, 450), Spend::Spent { left: 0, .. }));
        let (closing, _) = slot.release_due(500, None).unwrap();
        assert_eq!(closing.unspent, 0, "a fixed plan's spent lease goes back");
    }

    #[test]
    fn the_last_two_seconds_size_the_batch() {
        let slot = Slot::default();
        let s = 1_000_000_000;
        assert_eq!(slot.note(3, 10 * s), 3);
        assert_eq!(slot.note(4, 10 * s + 1), 7);
        assert_eq!(slot.note(1, 11 * s), 8, "the second before counts");
        assert_eq!(slot.note(2, 12 * s), 3, "and only that one");
        assert_eq!(slot.note(1, 14 * s), 1, "a quiet second in between forgets");
    }
}

/// Every interleaving of threads spending, a lease renewed and given back, checked by
/// loom: no unit is spent twice, none is lost (spent + given back + still held is what
/// was granted), and none is spent from a lease after it was taken out.
#[cfg(all(test, feature = "loom"))]
#[allow(
    clippy::expect_used,
    reason = "test code (clippy's test allowance does not see a compound cfg)"
)]
mod interleavings {
    use std::time::Duration;

    use ::loom::sync::Arc;
    use ::loom::thread;
    use weir_core::Algorithm;

    use super::*;

    fn install(lease: u64, units: u64) -> Install {
        let policy = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(1), None)
            .expect("a valid policy");
        Install {
            lease: Some((LeaseId(lease), units, policy)),
            deadline: 1_000,
            denied: None,
            scarce: false,
            remaining: 0,
            full_at: 0,
            granted: units,
            at: 0,
            taken_rate: units,
        }
    }

    /// Units spent by one thread trying `tries` one-unit spends, giving one back when
    /// `give_back` (a request denied by another rule).
    fn spender(slot: &Slot, tries: usize, give_back: bool) -> u64 {
        let mut spent = 0;
        for _ in 0..tries {
            if let Spend::Spent { generation, .. } = slot.spend(1, 10) {
                if give_back && slot.restore(generation, 1) {
                    continue;
                }
                spent += 1;
            }
        }
        spent
    }

    /// Loom's explorer, bounded to three preemptions per execution (the bound loom's
    /// documentation suggests: most concurrency bugs need no more) so that the check
    /// finishes in seconds.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = ::loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(f);
    }

    #[test]
    fn spends_racing_a_renewal_count_every_unit_once() {
        model(|| {
            let slot = Arc::new(Slot::default());
            slot.begin_take();
            slot.finish_take(Some(install(1, 2)));
            let threads: Vec<_> = [false, true]
                .into_iter()
                .map(|give_back| {
                    let slot = Arc::clone(&slot);
                    thread::spawn(move || spender(&slot, 2, give_back))
                })
                .collect();
            // The renewal: the first lease taken out (to be given back with its
            // unspent units), the second installed.
            let (closing, _) = slot
                .begin_take()
                .expect("no other take")
                .expect("the first lease is held");
            slot.finish_take(Some(install(2, 1)));
            let spent: u64 = threads
                .into_iter()
                .map(|t| t.join().expect("a spender"))
                .sum();
            let (_, held) = unpack(slot.word.load(Ordering::SeqCst));
            assert_eq!(
                spent + closing.unspent + held,
                2 + 1,
                "spent {spent}, given back {}, held {held}",
                closing.unspent
            );
        });
    }

    #[test]
    fn a_release_at_the_deadline_races_spends_without_losing_a_unit() {
        model(|| {
            let slot = Arc::new(Slot::default());
            slot.begin_take();
            slot.finish_take(Some(install(1, 3)));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let slot = Arc::clone(&slot);
                    thread::spawn(move || spender(&slot, 2, false))
                })
                .collect();
            let released = slot.release().map_or(0, |(c, _)| c.unspent);
            let spent: u64 = threads
                .into_iter()
                .map(|t| t.join().expect("a spender"))
                .sum();
            let (_, held) = unpack(slot.word.load(Ordering::SeqCst));
            assert_eq!(held, 0, "nothing is held once released");
            assert_eq!(spent + released, 3);
        });
    }
}
