//! The memory store's one-word states (GCRA at a whole number of nanoseconds per unit,
//! decided by compare-and-swap under a read lock): exact under concurrency, on the
//! admitting and the denying path, beside batches and refunds under the write lock; and
//! deciding as `weir_core` does while a key's policy changes under it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use weir_core::{Algorithm, ManualClock, Policy, State, check, refund};
use weir_store::{Check, Key, MemoryStore, MemoryStoreConfig};

const START: u64 = 1_796_032_800_000_000_000;

fn key(identity: &str) -> Key<'_> {
    Key {
        rule: "r",
        identity,
    }
}

/// 8 threads hammer one key with costs of 1-3, peeks, and batches that also take a
/// key of their own (the write-locked path), in phases; between phases the clock moves
/// by a quarter of the period. In every phase the units admitted on the hot key plus
/// what it has left are exactly what it had plus what refilled: none lost, none twice.
#[test]
fn a_word_state_admits_exactly_under_concurrency_as_time_moves() {
    for algorithm in [Algorithm::Gcra, Algorithm::LeakyBucket] {
        // 1,000 per second: one unit per millisecond, a burst of 1,000.
        let policy = Policy::new(algorithm, 1000, Duration::from_secs(1), None).unwrap();
        assert!(policy.packs());
        let clock = Arc::new(ManualClock::new(START));
        let store = MemoryStore::new(MemoryStoreConfig { max_keys: 100 }, clock.clone());
        let threads = 8;
        let phases = 4;
        let admitted: Vec<AtomicU64> = (0..phases).map(|_| AtomicU64::new(0)).collect();
        let barrier = Barrier::new(threads + 1);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (store, policy, admitted, barrier) = (&store, &policy, &admitted, &barrier);
                s.spawn(move || {
                    let own = format!("own-{t}");
                    for phase in admitted {
                        barrier.wait();
                        for i in 0..600 {
                            let cost = (t + i) as u64 % 4;
                            let allowed = if i % 5 == 0 {
                                let batch = [
                                    Check {
                                        key: key("hot"),
                                        policy,
                                        cost,
                                    },
                                    Check {
                                        key: key(&own),
                                        policy,
                                        cost: 1,
                                    },
                                ];
                                store.check_all_sync(&batch).unwrap()[0].allowed
                            } else {
                                store.check_sync(key("hot"), policy, cost).unwrap().allowed
                            };
                            if allowed {
                                phase.fetch_add(cost, Ordering::Relaxed);
                            }
                        }
                        barrier.wait();
                    }
                });
            }
            let mut left = 1000;
            for phase in &admitted {
                barrier.wait();
                barrier.wait();
                let now_left = store.check_sync(key("hot"), &policy, 0).unwrap().remaining;
                assert_eq!(
                    phase.load(Ordering::Relaxed) + now_left,
                    left,
                    "{algorithm}: admitted + left = had"
                );
                clock.advance(Duration::from_millis(250));
                left = (now_left + 250).min(1000);
            }
        });
    }
}

/// Two threads on one key of one unit per hour, most checks denied: exactly one is
/// admitted per hour, and a denial leaves the state as it was.
#[test]
fn denials_under_concurrency_change_nothing() {
    let policy = Policy::new(Algorithm::Gcra, 1, Duration::from_secs(3600), None).unwrap();
    let clock = Arc::new(ManualClock::new(START));
    let store = MemoryStore::new(MemoryStoreConfig { max_keys: 10 }, clock.clone());
    for _hour in 0..3 {
        let admitted = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..5_000 {
                        let d = store.check_sync(key("k"), &policy, 1).unwrap();
                        admitted.fetch_add(u64::from(d.allowed), Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(admitted.into_inner(), 1);
        let d = store.check_sync(key("k"), &policy, 1).unwrap();
        assert_eq!(d.retry_after, Some(Duration::from_secs(3600)));
        clock.advance(Duration::from_secs(3600));
    }
}

/// What the store did before one-word states, written with `weir_core` alone: a key's
/// state, when it expires (then it reads as none), and whether the store holds an entry
/// for it (expired entries stay until touched or swept).
#[derive(Default)]
struct Model {
    state: Option<State>,
    expires_at: u64,
    held: bool,
}

impl Model {
    /// The state as read at `now`.
    fn view(&self, now: u64) -> Option<State> {
        self.state.clone().filter(|_| self.expires_at > now)
    }

    /// `state`, decided at `now`, is written.
    fn keep(&mut self, state: Option<State>, now: u64, reset_after: Duration) {
        self.held = state.is_some();
        self.state = state;
        self.expires_at = now.saturating_add(reset_after.as_nanos() as u64);
    }
}

/// One key checked, batched, previewed, refunded, swept and reset, its policy switched
/// at random between policies that pack and policies that do not (so its state moves
/// between the tables), time going forwards and backwards: every decision and the
/// number of keys held are the model's.
/// Identities of every length class the store keeps apart: inline in 32-byte entries
/// (up to 24 bytes), inline in 48-byte ones (25 to 40), on the heap (longer, or ending
/// in a NUL byte).
const IDENTITIES: [&str; 7] = [
    "k",
    "user-0000000000000000024",
    "8c1f6d2e-0001-4a1b-9c3d-000000000001",
    "2001:0db8:0000:0000:0000:0000:0000:0001",
    "wk_live_00000000000000000000000000000040",
    "wk_live_000000000000000000000000000000041",
    "trailing-nul-is-not-padding\0",
];

#[test]
fn a_key_decides_as_weir_core_while_its_policy_changes() {
    for identity in IDENTITIES {
        decides_as_weir_core_while_its_policy_changes(identity);
    }
}

fn decides_as_weir_core_while_its_policy_changes(identity: &str) {
    let minute = Duration::from_secs(60);
    let policies = [
        Policy::new(Algorithm::Gcra, 6, minute, Some(3)).unwrap(),
        Policy::new(Algorithm::Gcra, 7, minute, Some(3)).unwrap(),
        Policy::new(Algorithm::LeakyBucket, 6, minute, None).unwrap(),
        Policy::new(Algorithm::TokenBucket, 6, minute, None).unwrap(),
        Policy::new(Algorithm::FixedWindow, 4, minute, None).unwrap(),
        Policy::new(Algorithm::SlidingLog, 4, minute, None).unwrap(),
    ];
    assert!(policies[0].packs() && !policies[1].packs() && policies[2].packs());
    let clock = Arc::new(ManualClock::new(START));
    let store = MemoryStore::new(MemoryStoreConfig { max_keys: 10 }, clock.clone());
    let mut model = Model::default();
    let other = Policy::new(Algorithm::FixedWindow, 1000, minute, None).unwrap();
    let mut now = START;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for step in 0..20_000 {
        // Mostly the same policy for a while, then another.
        let policy =
            &policies[(step / 40 + next(2) as usize * usize::from(next(10) == 0)) % policies.len()];
        now = match next(10) {
            0 => now - next(5_000_000_000),
            1..=6 => now + next(3_000_000_000),
            7 => now + next(120_000_000_000),
            _ => now,
        };
        clock.set(now);
        let cost = [0, 1, 1, 1, 2, 3, 4][next(7) as usize];
        let context = format!("{identity}: step {step}, {} {cost}", policy.algorithm());
        match next(12) {
            0 => {
                let checks = [Check {
                    key: key(identity),
                    policy,
                    cost,
                }];
                store.refund_all_sync(&checks);
                let mut state = model.view(now);
                refund(policy, &mut state, now, cost);
                let reset_after = check(policy, &mut state, now, 0).reset_after;
                model.keep(state, now, reset_after);
            }
            1 => {
                let batch = [
                    Check {
                        key: key(identity),
                        policy,
                        cost,
                    },
                    Check {
                        key: key("other"),
                        policy: &other,
                        cost: 0,
                    },
                ];
                let decided = store.check_all_sync(&batch).unwrap()[0];
                let mut state = model.view(now);
                let expected = check(policy, &mut state, now, cost);
                assert_eq!(decided, expected, "{context}, batch");
                // A denied batch writes nothing.
                if expected.allowed {
                    model.keep(state, now, expected.reset_after);
                }
            }
            2 => {
                let batch = [Check {
                    key: key(identity),
                    policy,
                    cost,
                }];
                let previewed = store.preview_all_sync(&batch)[0];
                let expected = check(policy, &mut model.view(now), now, cost);
                assert_eq!(previewed, expected, "{context}, preview");
            }
            3 => {
                store.sweep_expired();
                if model.expires_at <= now {
                    model.keep(None, now, Duration::ZERO);
                }
            }
            4 if next(10) == 0 => {
                store.reset_sync(key(identity));
                model.keep(None, now, Duration::ZERO);
            }
            _ => {
                let decided = store.check_sync(key(identity), policy, cost).unwrap();
                let mut state = model.view(now);
                let expected = check(policy, &mut state, now, cost);
                assert_eq!(decided, expected, "{context}");
                model.keep(state, now, expected.reset_after);
            }
        }
        assert_eq!(store.len(), usize::from(model.held), "{context}: keys held");
    }
}

/// Identities that differ only in what a padded entry could confuse (a trailing NUL
/// byte, a length of 40 and 41) are different keys, in whichever table each lives.
#[test]
fn identities_alike_but_for_padding_are_different_keys() {
    let policy = Policy::new(Algorithm::Gcra, 1, Duration::from_secs(60), None).unwrap();
    let clock = Arc::new(ManualClock::new(START));
    let store = MemoryStore::new(MemoryStoreConfig { max_keys: 100 }, clock);
    let forty = "a".repeat(40);
    let alike = [
        "a".repeat(30),
        "a".repeat(30) + "\0",
        "a".repeat(30) + "\0\0",
        "a".repeat(24),
        "a".repeat(25),
        forty.clone(),
        forty + "a",
        "a".repeat(39) + "\0",
    ];
    for identity in &alike {
        assert!(
            store.check_sync(key(identity), &policy, 1).unwrap().allowed,
            "{identity:?}"
        );
    }
    assert_eq!(store.len(), alike.len());
    for identity in &alike {
        assert!(
            !store.check_sync(key(identity), &policy, 1).unwrap().allowed,
            "{identity:?}"
        );
    }
}
