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

#[cfg(test)]
mod tests {
    use super::*;

    fn take<'a>(rule: &'a str, identity: &'a str, limit: u64) -> SlotTake<'a> {
        SlotTake {
            key: Key { rule, identity },
            limit,
        }
    }

    #[test]
    fn slots_are_taken_all_or_nothing_and_released_once_by_id() {
        let slots = Slots::default();
        let both = [take("a", "k", 2), take("b", "k", 1)];
        assert_eq!(
            slots.take(&both, 1),
            [
                SlotsFree {
                    allowed: true,
                    free: 1
                },
                SlotsFree {
                    allowed: true,
                    free: 0
                }
            ]
        );
        // `b` is full: nothing is taken of `a` either.
        let denied = slots.take(&both, 2);
        assert!(denied.iter().all(|d| !d.allowed));
        assert_eq!(denied[0].free, 1);
        assert_eq!(slots.take(&[take("a", "k", 2)], 3)[0].free, 0);
        // Released by id; a second release, or an unknown id, frees nothing more.
        let keys = [
            Key {
                rule: "a",
                identity: "k",
            },
            Key {
                rule: "b",
                identity: "k",
            },
        ];
        slots.release(&keys, 1);
        slots.release(&keys, 1);
        slots.release(&keys, 99);
        assert_eq!(slots.take(&[take("a", "k", 2)], 4)[0].free, 0);
        assert!(!slots.take(&[take("a", "k", 2)], 5)[0].allowed);
        slots.release(&keys, 3);
        slots.release(&keys, 4);
        assert!(slots.held.lock().is_empty(), "an idle key holds no memory");
    }
}
