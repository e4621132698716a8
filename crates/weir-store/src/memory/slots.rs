//! Requests in flight per key, in this process: exact, since every take and release
//! of the store runs under one lock.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::{Key, SlotTake, SlotsFree};

/// A key as the table holds it: rule name and identity.
type OwnedKey = (Box<str>, Box<str>);

/// The slots held, by key: the ids of the requests holding them. A key is here only
/// while one of its slots is held (so the table is bounded by the requests in flight).
#[derive(Debug, Default)]
pub(super) struct Slots {
    held: Mutex<HashMap<OwnedKey, Vec<u64>>>,
}

fn owned(key: Key<'_>) -> OwnedKey {
    (key.rule.into(), key.identity.into())
}

impl Slots {
    /// Takes slot `id` under every key of `takes`, or none.
    pub(super) fn take(&self, takes: &[SlotTake<'_>], id: u64) -> Vec<SlotsFree> {
        let mut held = self.held.lock();
        let in_use = |key: Key<'_>| held.get(&owned(key)).map_or(0, |ids| ids.len() as u64);
        let allowed = takes.iter().all(|t| in_use(t.key) < t.limit);
        let free: Vec<u64> = takes
            .iter()
            .map(|t| t.limit.saturating_sub(in_use(t.key)))
            .collect();
        if !allowed {
            return free
                .into_iter()
                .map(|free| SlotsFree {
                    allowed: false,
                    free,
                })
                .collect();
        }
        for t in takes {
            held.entry(owned(t.key)).or_default().push(id);
        }
        free.into_iter()
            .map(|free| SlotsFree {
                allowed: true,
                free: free - 1,
            })
            .collect()
    }

    /// Releases slot `id` of each of `keys`.
    pub(super) fn release(&self, keys: &[Key<'_>], id: u64) {
        let mut held = self.held.lock();
        for &key in keys {
            let owned = owned(key);
            if let Some(ids) = held.get_mut(&owned) {
                ids.retain(|&held| held != id);
                if ids.is_empty() {
                    held.remove(&owned);
                }
            }
        }
    }
}
