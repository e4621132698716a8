//! Three regions on memory stores and one virtual clock: shares follow the traffic,
//! and the regions together never admit more than one bucket would.

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Clock, ManualClock, Policy};

use super::*;
use crate::{MemoryStore, MemoryStoreConfig, ShareStore};

const SECOND: u64 = 1_000_000_000;
const STEP: u64 = SECOND / 10;
const ROUND: Duration = Duration::from_secs(2);

/// 600 a minute, bursts of 60: any 60 s admit at most 663 (a burst, a unit per region,
/// and a period's refill), whatever the regions do.
fn policy() -> Policy {
    Policy::new(
        Algorithm::TokenBucket,
        600,
        Duration::from_secs(60),
        Some(60),
    )
    .unwrap()
}

struct World {
    clock: Arc<ManualClock>,
    regions: Vec<Arc<RegionalStore>>,
}

impl World {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(1_800_000_000 * SECOND));
        let names = ["ap", "eu", "us"];
        let stores: Vec<(String, Arc<dyn BackingStore>)> = names
            .iter()
            .map(|name| {
                let store = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
                ((*name).to_owned(), Arc::new(store) as Arc<dyn BackingStore>)
            })
            .collect();
        let regions = stores
            .iter()
            .map(|(name, store)| {
                let config = Regions {
                    this: name.clone(),
                    stores: stores.clone(),
                    rebalance: ROUND,
                    floor: 0.02,
                };
                let rules = [("partner".to_owned(), 0)];
                RegionalStore::new(Arc::clone(store), config, rules, Arc::new(()), false).unwrap()
            })
            .collect();
        Self { clock, regions }
    }

    /// Runs `seconds` of traffic offering `per_second[i]` requests a second in region
    /// `i` (spread over 100 ms steps), rebalancing every round; returns what each
    /// second admitted in all regions together.
    async fn run(&self, seconds: u64, per_second: [u64; 3]) -> Vec<u64> {
        let policy = policy();
        let key = Key {
            rule: "partner",
            identity: "acme",
        };
        let mut admitted = vec![0; seconds as usize];
        let mut sent = [0u64; 3];
        for step in 0..seconds * 10 {
            for (i, region) in self.regions.iter().enumerate() {
                // Requests due by the end of this step, minus those sent already.
                let due = per_second[i] * (step + 1) / 10;
                for _ in sent[i]..due {
                    if region.check(key, &policy, 1).await.unwrap().allowed {
                        admitted[(step / 10) as usize] += 1;
                    }
                }
                sent[i] = due;
            }
            self.clock.advance(Duration::from_nanos(STEP));
            let now = self.clock.now();
            if (now / STEP).is_multiple_of(20) {
                for region in &self.regions {
                    region.rebalance().await;
                }
            }
        }
        admitted
    }
}

/// The most admitted in any `window` consecutive seconds.
fn worst(admitted: &[u64], window: usize) -> u64 {
    admitted
        .windows(window.min(admitted.len()))
        .map(|w| w.iter().sum())
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn skewed_traffic_at_twice_the_limit_gets_the_limit_and_never_more() {
    let world = World::new();
    // 80/15/5 % of 20 a second: twice the limit of 10 a second.
    let admitted = world.run(180, [16, 3, 1]).await;
    assert!(worst(&admitted, 60) <= 663, "{}", worst(&admitted, 60));
    // After three rounds, the minutes that follow admit at least 90 % of the limit.
    let settled = &admitted[6..];
    let least = settled
        .windows(60)
        .map(|w| w.iter().sum::<u64>())
        .min()
        .unwrap();
    assert!(least >= 540, "{least} a minute");
}

#[tokio::test]
async fn shares_follow_traffic_that_moves_to_another_region() {
    let world = World::new();
    world.run(30, [18, 1, 1]).await;
    // The traffic moves from the first region to the third: within three rounds
    // (6 s), the third admits nearly all of it.
    let after = world.run(20, [1, 1, 18]).await;
    let late: u64 = after[8..].iter().sum();
    assert!(late >= 12 * 9, "{late} in the last 12 s: {after:?}");
}

#[tokio::test]
async fn a_key_seen_in_one_region_gets_all_but_the_others_floors() {
    let world = World::new();
    let admitted = world.run(130, [0, 30, 0]).await;
    // G = 600 - 3 × 12 = 564, and the region's own floor: 576 a minute.
    let minute: u64 = admitted[70..130].iter().sum();
    assert!((570..=576).contains(&minute), "{minute}");
}

#[test]
fn floors_are_a_fraction_of_the_limit_at_least_one_unit() {
    assert_eq!(region_floor(20_000, 3, 0.02), Some(400));
    assert_eq!(region_floor(60, 3, 0.02), Some(1));
    assert_eq!(
        region_floor(60, 3, 0.5),
        Some(20),
        "at most limit / regions"
    );
    assert_eq!(region_floor(2, 3, 0.02), None, "fewer units than regions");
}

/// Counts what the rebalancing did.
#[derive(Default)]
struct Counting {
    reported: std::sync::atomic::AtomicUsize,
    unreachable: std::sync::atomic::AtomicUsize,
}

impl ShareEvents for Counting {
    fn round(&self, keys: usize) {
        self.reported
            .fetch_add(keys, std::sync::atomic::Ordering::Relaxed);
    }
    fn used(&self, _: usize, _: u64, _: bool) {}
    fn renewed(&self, _: usize, _: bool) {}
    fn holding(&self, _: usize, _: u64) {}
    fn stale(&self, _: usize) {}
    fn unreachable(&self, _: &str) {
        self.unreachable
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn untracked(&self, _: usize) {}
}

/// A store that never answers a renewal (a region whose Redis hangs).
struct Hung(MemoryStore);

impl Store for Hung {
    fn check_all<'a>(
        &'a self,
        checks: &'a [Check<'a>],
    ) -> crate::StoreFuture<'a, Vec<weir_core::Decision>> {
        self.0.check_all(checks)
    }
    fn preview_all<'a>(
        &'a self,
        checks: &'a [Check<'a>],
    ) -> crate::StoreFuture<'a, Vec<weir_core::Decision>> {
        self.0.preview_all(checks)
    }
    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> crate::StoreFuture<'a, ()> {
        self.0.refund_all(checks)
    }
    fn reset<'a>(&'a self, key: Key<'a>, policy: &'a Policy) -> crate::StoreFuture<'a, ()> {
        self.0.reset(key, policy)
    }
}

impl LeaseStore for Hung {}

impl crate::SlotStore for Hung {}

impl ShareStore for Hung {
    fn report_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        report: weir_core::Report,
    ) -> crate::StoreFuture<'a, Option<weir_core::Claim>> {
        self.0.report_share(key, policy, report)
    }
    fn apply_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        seq: u64,
        grant: u64,
        hold: Duration,
    ) -> crate::StoreFuture<'a, bool> {
        self.0.apply_share(key, policy, seq, grant, hold)
    }
    fn renew_share<'a>(
        &'a self,
        _: Key<'a>,
        _: &'a Policy,
        _: weir_core::Renewal,
    ) -> crate::StoreFuture<'a, Option<u64>> {
        Box::pin(std::future::pending())
    }
}

fn region_with(
    peer: Arc<dyn BackingStore>,
    events: Arc<Counting>,
) -> (Arc<RegionalStore>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(1_800_000_000 * SECOND));
    let local: Arc<dyn BackingStore> = Arc::new(MemoryStore::new(
        MemoryStoreConfig::default(),
        clock.clone(),
    ));
    let config = Regions {
        this: "eu".into(),
        stores: vec![("eu".into(), Arc::clone(&local)), ("us".into(), peer)],
        rebalance: ROUND,
        floor: 0.02,
    };
    let rules = [("partner".to_owned(), 0)];
    let store = RegionalStore::new(local, config, rules, events, false).unwrap();
    (store, clock)
}

#[tokio::test]
async fn a_flood_of_distinct_keys_renews_the_busiest_ten_thousand() {
    let events = Arc::new(Counting::default());
    let clock = Arc::new(ManualClock::new(0));
    let peer = Arc::new(MemoryStore::new(MemoryStoreConfig::default(), clock));
    let (region, _) = region_with(peer, Arc::clone(&events));
    let policy = policy();
    for i in 0..round::MAX_RENEWED_PER_ROUND + 500 {
        let key = Key {
            rule: "partner",
            identity: &format!("bot-{i}"),
        };
        region.check(key, &policy, 1).await.unwrap();
    }
    let hot = Key {
        rule: "partner",
        identity: "acme",
    };
    for _ in 0..40 {
        region.check(hot, &policy, 1).await.unwrap();
    }
    region.rebalance().await;
    let reported = events.reported.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(reported, round::MAX_RENEWED_PER_ROUND);
    // The busiest key was among them: its share is in force.
    let regional = policy.regional(12, 2).unwrap();
    let report = weir_core::Report {
        offered: 0,
        round: ROUND,
        force: true,
        hold: ROUND * 3,
    };
    let claim = region
        .local
        .report_share(hot, &regional, report)
        .await
        .unwrap();
    assert!(claim.is_some_and(|c| c.enforcing > 0), "{claim:?}");
}

#[tokio::test(start_paused = true)]
async fn a_region_that_hangs_costs_a_few_timeouts_a_round_not_one_per_key() {
    let events = Arc::new(Counting::default());
    let clock = Arc::new(ManualClock::new(0));
    let peer = Arc::new(Hung(MemoryStore::new(MemoryStoreConfig::default(), clock)));
    let (region, _) = region_with(peer, Arc::clone(&events));
    let policy = policy();
    // 200 keys whose home is the hung region.
    let names: Vec<String> = (0..)
        .map(|i| format!("k{i}"))
        .filter(|identity| {
            region.home_of(Key {
                rule: "partner",
                identity,
            }) == 1
        })
        .take(200)
        .collect();
    for identity in &names {
        region
            .check(
                Key {
                    rule: "partner",
                    identity,
                },
                &policy,
                1,
            )
            .await
            .unwrap();
    }
    region.rebalance().await;
    let unreachable = events
        .unreachable
        .load(std::sync::atomic::Ordering::Relaxed);
    // The calls in flight when the eighth timed out also count; at most one batch.
    assert!((8..8 + 512).contains(&unreachable), "{unreachable}");
}
