//! The memory store: exact under concurrency, all-or-nothing layers, bounded, expiring.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weir_core::{Algorithm, ManualClock, Policy};
use weir_store::LeaseStore;
use weir_store::{Check, Key, MemoryStore, MemoryStoreConfig, Store, StoreError};
use weir_testkit::{calendar_sequences, conformance_sequences};

const START: u64 = 1_796_032_800_000_000_000;

fn store(max_keys: usize) -> (Arc<ManualClock>, MemoryStore) {
    let clock = Arc::new(ManualClock::new(START));
    let store = MemoryStore::new(MemoryStoreConfig { max_keys }, clock.clone());
    (clock, store)
}

/// A key of the rule `r`.
fn key(identity: &str) -> Key<'_> {
    Key {
        rule: "r",
        identity,
    }
}

fn per_hour(algorithm: Algorithm, limit: u64) -> Policy {
    Policy::new(algorithm, limit, Duration::from_secs(3600), None).unwrap()
}

#[test]
fn exactly_the_limit_is_admitted_under_concurrency() {
    for algorithm in Algorithm::ALL {
        let (_, store) = store(1000);
        let policy = per_hour(algorithm, 500);
        let admitted = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..250 {
                        if store
                            .check_sync(key("one-key"), &policy, 1)
                            .unwrap()
                            .allowed
                        {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(admitted.into_inner(), 500, "{algorithm}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_limit_is_admitted_through_the_async_trait() {
    let (_, store) = store(1000);
    let store: Arc<dyn Store> = Arc::new(store);
    let policy = per_hour(Algorithm::TokenBucket, 300);
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..20 {
                    admitted += u64::from(store.check(key("k"), &policy, 1).await.unwrap().allowed);
                }
                admitted
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    assert_eq!(total, 300);
}

#[test]
fn layered_limits_are_all_or_nothing() {
    let (clock, store) = store(1000);
    let second = Policy::new(Algorithm::FixedWindow, 2, Duration::from_secs(1), None).unwrap();
    let minute = Policy::new(Algorithm::SlidingWindow, 3, Duration::from_secs(60), None).unwrap();
    let day = Policy::new(
        Algorithm::TokenBucket,
        100,
        Duration::from_secs(86_400),
        None,
    )
    .unwrap();
    let layers = [
        Check {
            key: key("u:s"),
            policy: &second,
            cost: 1,
        },
        Check {
            key: key("u:m"),
            policy: &minute,
            cost: 1,
        },
        Check {
            key: key("u:d"),
            policy: &day,
            cost: 1,
        },
    ];
    for _ in 0..2 {
        let all = store.check_all_sync(&layers).unwrap();
        assert!(all.iter().all(|d| d.allowed));
    }
    // Third request in the same second: the per-second layer denies, nothing is taken.
    let denied = store.check_all_sync(&layers).unwrap();
    assert_eq!(
        denied
            .iter()
            .map(|d| (d.allowed, d.remaining))
            .collect::<Vec<_>>(),
        [(false, 0), (true, 1), (true, 98)]
    );
    clock.advance(Duration::from_secs(1));
    // The minute and day layers still hold what the denied request did not take.
    let next = store.check_all_sync(&layers).unwrap();
    assert_eq!(
        next.iter()
            .map(|d| (d.allowed, d.remaining))
            .collect::<Vec<_>>(),
        [(true, 1), (true, 0), (true, 97)]
    );
    // Now the minute layer denies, in the middle: the others are untouched.
    let denied = store.check_all_sync(&layers).unwrap();
    assert_eq!(
        denied
            .iter()
            .map(|d| (d.allowed, d.remaining))
            .collect::<Vec<_>>(),
        [(true, 1), (false, 0), (true, 97)]
    );
}

#[test]
fn a_key_checked_twice_in_one_batch_sees_its_first_check() {
    let (_, store) = store(1000);
    let policy = per_hour(Algorithm::Gcra, 3);
    let twice = [
        Check {
            key: key("k"),
            policy: &policy,
            cost: 2,
        },
        Check {
            key: key("k"),
            policy: &policy,
            cost: 2,
        },
    ];
    let decisions = store.check_all_sync(&twice).unwrap();
    assert!(!decisions[1].allowed, "2 + 2 > 3");
    assert_eq!(store.check_sync(key("k"), &policy, 0).unwrap().remaining, 3);
}

#[test]
fn a_full_store_refuses_new_keys_and_never_resets_existing_ones() {
    let (clock, store) = store(100);
    let policy = per_hour(Algorithm::FixedWindow, 1);
    assert!(store.check_sync(key("victim"), &policy, 1).unwrap().allowed);
    assert!(!store.check_sync(key("victim"), &policy, 1).unwrap().allowed);
    let mut refused = 0;
    for i in 0..10_000 {
        match store.check_sync(key(&format!("flood-{i}")), &policy, 1) {
            Ok(d) => assert!(d.allowed),
            Err(StoreError::Full { max_keys: 100 }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(refused, 10_000 - 99);
    assert_eq!(store.len(), 100);
    assert!(
        !store.check_sync(key("victim"), &policy, 1).unwrap().allowed,
        "the flood must not reset the victim's state"
    );
    // A peek, or a cost that never fits, needs no new key, so it is answered.
    assert!(
        store
            .check_sync(key("newcomer"), &policy, 0)
            .unwrap()
            .allowed
    );
    assert!(
        !store
            .check_sync(key("newcomer"), &policy, 2)
            .unwrap()
            .allowed
    );
    // Once the window is over, every entry is full again and new keys are welcome.
    clock.advance(Duration::from_secs(3600));
    assert!(
        store
            .check_sync(key("newcomer"), &policy, 1)
            .unwrap()
            .allowed
    );
    assert_eq!(store.len(), 1, "a full shard sweeps its expired entries");
}

#[test]
fn a_full_store_refuses_a_batch_with_new_keys_whole() {
    let (_, store) = store(2);
    let policy = per_hour(Algorithm::FixedWindow, 5);
    store.check_sync(key("a"), &policy, 1).unwrap();
    let batch = [
        Check {
            key: key("a"),
            policy: &policy,
            cost: 1,
        },
        Check {
            key: key("b"),
            policy: &policy,
            cost: 1,
        },
        Check {
            key: key("c"),
            policy: &policy,
            cost: 1,
        },
    ];
    assert!(matches!(
        store.check_all_sync(&batch),
        Err(StoreError::Full { .. })
    ));
    assert_eq!(
        store.check_sync(key("a"), &policy, 0).unwrap().remaining,
        4,
        "nothing taken"
    );
}

#[test]
fn entries_expire_when_their_state_is_full_again() {
    let (clock, store) = store(1000);
    let policy = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(10), None).unwrap();
    for i in 0..50 {
        store.check_sync(key(&format!("k{i}")), &policy, 5).unwrap();
    }
    assert_eq!(store.len(), 50);
    clock.advance(Duration::from_millis(4_999));
    store.sweep_expired();
    assert_eq!(store.len(), 50, "half a bucket takes 5 s to refill");
    clock.advance(Duration::from_millis(1));
    store.sweep_expired();
    assert!(store.is_empty());
}

#[tokio::test]
async fn the_conformance_sequences_decide_as_weir_core() {
    let (clock, store) = store(1_000);
    let sequences = conformance_sequences(0x5eed, 240)
        .into_iter()
        .chain(calendar_sequences(0x5eed, 30));
    for (n, (policy, steps)) in sequences.enumerate() {
        let identity = format!("seq-{n}");
        let mut state = None;
        let mut now = START;
        for (i, step) in steps.iter().enumerate() {
            now = now.saturating_add_signed(step.gap_us * 1_000);
            clock.set(now);
            let expected = step.replay_on(&mut state, &policy, now);
            let actual = step.replay(&store, key(&identity), &policy).await;
            assert_eq!(actual, Ok(expected), "sequence {n}, step {i} {step:?}");
        }
    }
}

#[test]
fn a_refund_gives_back_each_check_and_never_creates_keys() {
    let (clock, store) = store(1000);
    let second = Policy::new(Algorithm::FixedWindow, 2, Duration::from_secs(1), None).unwrap();
    let day = per_hour(Algorithm::SlidingLog, 5);
    let layers = [
        Check {
            key: key("u:s"),
            policy: &second,
            cost: 1,
        },
        Check {
            key: key("u:d"),
            policy: &day,
            cost: 2,
        },
        Check {
            key: key("u:d"),
            policy: &day,
            cost: 1,
        },
    ];
    let remaining = |store: &MemoryStore| {
        layers
            .iter()
            .map(|c| store.check_sync(c.key, c.policy, 0).unwrap().remaining)
            .collect::<Vec<_>>()
    };
    assert!(
        store
            .check_all_sync(&layers)
            .unwrap()
            .iter()
            .all(|d| d.allowed)
    );
    assert_eq!(remaining(&store), [1, 2, 2]);
    clock.advance(Duration::from_millis(300));
    store.refund_all_sync(&layers);
    assert_eq!(
        remaining(&store),
        [2, 5, 5],
        "all given back, the key twice"
    );
    assert!(store.is_empty(), "full keys are dropped");
    // Refunding keys with nothing counted changes nothing and adds no key.
    store.refund_all_sync(&layers);
    assert!(store.is_empty());
    // A key refunded more than it holds is full, no more.
    store.check_sync(key("u:d"), &day, 1).unwrap();
    store.refund_all_sync(&layers[1..]);
    assert_eq!(store.check_sync(key("u:d"), &day, 0).unwrap().remaining, 5);
}

#[test]
fn reserving_then_settling_under_concurrency_counts_exactly_the_kept() {
    for algorithm in Algorithm::ALL {
        let (_, store) = store(1000);
        let policy = per_hour(algorithm, 100);
        let kept = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..8 {
                let (store, policy, kept) = (&store, &policy, &kept);
                s.spawn(move || {
                    for i in 0..100 {
                        let reserve = [Check {
                            key: key("login"),
                            policy,
                            cost: 1,
                        }];
                        if store.check_all_sync(&reserve).unwrap()[0].allowed {
                            // Every other outcome counts; the rest is given back.
                            if (t + i) % 2 == 0 {
                                kept.fetch_add(1, Ordering::Relaxed);
                            } else {
                                store.refund_all_sync(&reserve);
                            }
                        }
                    }
                });
            }
        });
        let kept = kept.into_inner();
        let remaining = store
            .check_sync(key("login"), &policy, 0)
            .unwrap()
            .remaining;
        assert!(kept <= 100, "{algorithm}");
        assert_eq!(
            remaining,
            100 - kept,
            "{algorithm}: every refund given back"
        );
    }
}

#[test]
fn reset_forgets_a_key() {
    let (_, store) = store(1000);
    let policy = per_hour(Algorithm::SlidingLog, 2);
    store.check_sync(key("k"), &policy, 2).unwrap();
    assert!(!store.check_sync(key("k"), &policy, 1).unwrap().allowed);
    store.reset_sync(key("k"));
    assert_eq!(store.check_sync(key("k"), &policy, 1).unwrap().remaining, 1);
}

#[test]
fn an_identity_under_two_rules_is_two_keys() {
    let (clock, store) = store(1000);
    let policy = per_hour(Algorithm::Gcra, 2);
    let under = |rule| Key {
        rule,
        identity: "203.0.113.7",
    };
    store.check_sync(under("login"), &policy, 2).unwrap();
    assert!(
        !store
            .check_sync(under("login"), &policy, 1)
            .unwrap()
            .allowed
    );
    assert!(store.check_sync(under("api"), &policy, 1).unwrap().allowed);
    assert_eq!(store.len(), 2);
    store.reset_sync(under("login"));
    assert_eq!(store.len(), 1);
    clock.advance(Duration::from_secs(3600));
    store.sweep_expired();
    assert!(store.is_empty());
    assert_eq!(
        store
            .check_sync(under("api"), &policy, 1)
            .unwrap()
            .remaining,
        1
    );
}

/// The memory store does not lease: a take is a check of its `min`, spent at once.
#[tokio::test]
async fn a_take_on_the_memory_store_is_a_check_of_its_min() {
    let (_, store) = store(1000);
    let policy = per_hour(Algorithm::Gcra, 10);
    let take = weir_store::Take {
        min: 3,
        max: 10,
        hold: Duration::from_secs(5),
        closing: None,
    };
    let grant = store.take(key("a"), &policy, take).await.unwrap();
    assert_eq!((grant.lease, grant.units), (None, 3));
    assert_eq!(grant.decision.remaining, 7);
    let more = store
        .take(key("a"), &policy, weir_store::Take { min: 8, ..take })
        .await;
    assert_eq!(more.unwrap().units, 0, "denied as a check of 8");
    let found = store
        .give_back(key("a"), &policy, weir_store::LeaseId(1), 3)
        .await
        .unwrap();
    assert!(!found, "nothing was leased");
    let window = per_hour(Algorithm::FixedWindow, 10);
    let refused = store.take(key("a"), &window, take).await;
    assert!(matches!(refused, Err(StoreError::Lease(_))), "{refused:?}");
}
