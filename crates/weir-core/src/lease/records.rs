//! The lease records of one key: who holds how many units, until when.
//!
//! Kept beside the key's algorithm state, and small: one record per instance holding a
//! lease on the key, at most [`MAX_LEASES`]. A record's units count against the
//! capacity until it is given back or expires; an expired record's units count as
//! spent (its holder may have spent them all before it stopped answering).

/// The most lease records one key holds. A take that finds them all in use grants its
/// `min` units spent at once, with no record (as a take with no hold does): never more
/// than the bucket allows, and nothing granted that could not be held.
pub const MAX_LEASES: usize = 64;

/// A lease's name, unique on its key: the grant's time or, for several grants within
/// one instant, one more than the last id given (see [`Leases`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub u64);

/// One lease: units granted, held until `expires` (the store's time, exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    id: LeaseId,
    units: u64,
    expires: u64,
}

/// The lease records of one key, the last id given, the time the key's state was
/// last brought forward under them (see `super::advance`), and the units leased in
/// its last two seconds (every instance's takes: see [`Leases::taken_rate`]).
///
/// Ids are `max(last + 1, now)`: they grow while the records are kept, and once the
/// records are gone (a store drops them after the last expiry) the time has moved past
/// every id given, so an id never names two leases and a late give-back of a lease
/// long gone finds nothing (on a clock that does not step back by more than that).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leases {
    last_id: u64,
    /// Every record was made at or before this time, and the state is as of it under
    /// their cap: from here on, only their expiries change the cap.
    since: u64,
    records: Vec<Record>,
    /// Units leased in the second `second` (of the store's time) and in the one before.
    taken: Taken,
    /// The latest time a leasing take denied before was told to come back: the refill
    /// until then is promised to the takes waiting (see [`Leases::next_turn`]).
    turn: u64,
}

/// Units leased on a key in one second of the store's time and in the one before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Taken {
    second: u64,
    this: u64,
    last: u64,
}

/// Nanoseconds in a second.
const SECOND: u64 = 1_000_000_000;

impl Taken {
    /// The counts as of `now`: moved on to its second when it is later (the second
    /// before counts only if it is the one just past). A clock stepped back counts in
    /// the second last seen.
    fn at(self, now: u64) -> Self {
        let second = now / SECOND;
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
}

impl Leases {
    /// Units leased on the key (by every instance together) in the busiest of the
    /// current second and the one before it, as of `now`: the key's demand where it is
    /// known, from which an instance sizes its share of a batch (each take reports it).
    pub fn taken_rate(&self, now: u64) -> u64 {
        let taken = self.taken.at(now);
        taken.this.max(taken.last)
    }

    /// Counts `units` leased at `now` in [`Leases::taken_rate`].
    pub(super) fn note_taken(&mut self, now: u64, units: u64) {
        let mut taken = self.taken.at(now);
        taken.this = taken.this.saturating_add(units);
        self.taken = taken;
    }

    /// The time a leasing take denied at `now` is told to come back: `at`, when the
    /// bucket will have its units, or, while takes denied before are still to come back
    /// (the last turn is after `now`), `span` (the time the units it asks for take to
    /// refill)
    /// after that turn, but no later than `latest` (a quarter of the hold, or the
    /// bucket's refill from empty, after `now`) unless `at` is. So the instances waiting on a scarce key come back one after the
    /// other, each to a batch, rather than all at once and all but one to be denied
    /// again. Only a denial's wait: nothing is reserved, and whoever comes first is
    /// granted what the bucket has.
    pub(super) fn next_turn(&mut self, now: u64, at: u64, span: u64, latest: u64) -> u64 {
        let turn = match self.turn > now {
            true => at.max(self.turn.saturating_add(span).min(latest)),
            false => at,
        };
        self.turn = turn;
        turn
    }

    /// Keeps `turn` as the latest turn given (see [`Leases::next_turn`]).
    pub(super) fn keep_turn(&mut self, turn: u64) {
        self.turn = turn;
    }

    /// Units held by leases unexpired at `now`.
    pub fn outstanding(&self, now: u64) -> u64 {
        self.records
            .iter()
            .filter(|r| r.expires > now)
            .map(|r| r.units)
            .sum()
    }

    /// Records kept (expired ones included until the next take or give-back).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The expiries after the state was last brought forward, up to `now`, in order:
    /// the instants the cap rose at since.
    pub(super) fn ends_until(&self, now: u64) -> Vec<u64> {
        let mut ends: Vec<u64> = self
            .records
            .iter()
            .map(|r| r.expires)
            .filter(|&e| e > self.since && e <= now)
            .collect();
        ends.sort_unstable();
        ends.dedup();
        ends
    }

    /// The state has been brought forward to `now`: drops the records expired by then
    /// (their units count as spent). `since` follows `now` even back in time: the
    /// records left all expire after both, and one made now must have its expiry
    /// counted from now on, not from a later instant the clock stepped back from.
    pub(super) fn forward_to(&mut self, now: u64) {
        self.since = now;
        self.records.retain(|r| r.expires > now);
    }

    /// Whether lease `id` is held (not expired) at `now`.
    pub(super) fn holds(&self, id: LeaseId, now: u64) -> bool {
        self.records.iter().any(|r| r.id == id && r.expires > now)
    }

    /// Removes lease `id`; returns its units, or `None` when it is not kept.
    pub(super) fn remove(&mut self, id: LeaseId) -> Option<u64> {
        let at = self.records.iter().position(|r| r.id == id)?;
        Some(self.records.swap_remove(at).units)
    }

    /// Records a lease of `units` until `expires`; its id, or `None` when
    /// [`MAX_LEASES`] are kept.
    pub(super) fn add(&mut self, now: u64, units: u64, expires: u64) -> Option<LeaseId> {
        if self.records.len() >= MAX_LEASES {
            return None;
        }
        self.last_id = self.last_id.saturating_add(1).max(now);
        let id = LeaseId(self.last_id);
        self.records.push(Record { id, units, expires });
        Some(id)
    }

    /// The first instant from `now` on when the unexpired records hold at most `room`
    /// units, if none is given back (`now` when they already do).
    pub(super) fn at_most_at(&self, now: u64, room: u64) -> u64 {
        let mut held = self.outstanding(now);
        let mut ends: Vec<(u64, u64)> = self
            .records
            .iter()
            .filter(|r| r.expires > now)
            .map(|r| (r.expires, r.units))
            .collect();
        ends.sort_unstable();
        let mut at = now;
        for (expires, units) in ends {
            if held <= room {
                break;
            }
            held -= units;
            at = expires;
        }
        at
    }
}
