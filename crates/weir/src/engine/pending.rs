//! Settlements waiting for a `POST /v1/settle`: the answer's status of a request that a
//! service decided with `POST /v1/decide` and forwarded itself.
//!
//! Bounded in time and number: a settlement not reported within its time, or pushed
//! out by newer ones when [`MAX_PENDING`] are waiting, is dropped, which keeps its
//! reservations (the attempt counts). Ids are random, so one caller cannot settle (and
//! so give back) another's reservation by guessing.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::Settlement;
use super::ids::RandomIds;

/// The most settlements waiting at once.
pub(super) const MAX_PENDING: usize = 100_000;

/// How long a parked settlement waits for `POST /v1/settle` (from `/v1/decide`, or a
/// forward-auth reservation) before it stays counted.
pub const SETTLE_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

/// Every how many parked settlements the expired ones are swept.
const SWEEP_EVERY: u64 = 1024;

/// The id of a parked settlement: 128 random-looking bits, as 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SettlementId(u128);

impl fmt::Display for SettlementId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl FromStr for SettlementId {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(());
        }
        u128::from_str_radix(text, 16).map(Self).map_err(|_| ())
    }
}

#[derive(Default)]
pub(super) struct Pending {
    waiting: Mutex<HashMap<SettlementId, (u64, Settlement)>>,
    ids: RandomIds,
}

impl Pending {
    /// Parks `settlement` until `now + keep_for` (nanoseconds on the engine's clock).
    pub(super) fn park(
        &self,
        settlement: Settlement,
        now: u64,
        keep_for: std::time::Duration,
    ) -> SettlementId {
        let (id, n) = self.next_id();
        let deadline = now.saturating_add(u64::try_from(keep_for.as_nanos()).unwrap_or(u64::MAX));
        let dropped = {
            let mut waiting = self.waiting();
            let mut dropped = Vec::new();
            // Expired ones go now and then, and whenever the map is full.
            if waiting.len() >= MAX_PENDING || n.is_multiple_of(SWEEP_EVERY) {
                let expired: Vec<SettlementId> = waiting
                    .iter()
                    .filter(|(_, (until, _))| *until <= now)
                    .map(|(id, _)| *id)
                    .collect();
                dropped.extend(expired.iter().filter_map(|id| waiting.remove(id)));
                if waiting.len() >= MAX_PENDING {
                    let oldest = waiting
                        .iter()
                        .min_by_key(|(_, (until, _))| *until)
                        .map(|(id, _)| *id);
                    dropped.extend(oldest.and_then(|id| waiting.remove(&id)));
                }
            }
            waiting.insert(id, (deadline, settlement));
            dropped
        };
        // Dropped outside the lock: each keeps its reservations.
        drop(dropped);
        id
    }

    /// Takes the settlement parked under `id`, unless it has expired.
    pub(super) fn unpark(&self, id: SettlementId, now: u64) -> Option<Settlement> {
        let (deadline, settlement) = self.waiting().remove(&id)?;
        (deadline > now).then_some(settlement)
    }

    fn waiting(&self) -> MutexGuard<'_, HashMap<SettlementId, (u64, Settlement)>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new id, and how many were made before it.
    fn next_id(&self) -> (SettlementId, u64) {
        let (id, n) = self.ids.next();
        (SettlementId(id), n)
    }
}
