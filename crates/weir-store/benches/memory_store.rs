//! Time per check: weir's memory store beside governor's keyed limiter, in one run.
//!
//! `cargo bench -p weir-store --bench memory_store` (all rows), or with a filter on the
//! row names: `cargo bench -p weir-store --bench memory_store -- 1m/uuid`.
//!
//! Each row runs governor (`DefaultKeyedRateLimiter<String>`) and weir (GCRA, token
//! bucket) on the same key strings in the same order, round after round, the order of
//! the limiters rotating from round to round so that the machine's drift falls on all
//! of them alike; it prints the median time per check of each and the median of the
//! per-round ratios to governor. Multi-threaded rows split the same work over the
//! threads and report wall time per check over all of them.
//!
//! Rows:
//! - `hot/1t/admitted`, `hot/1t/denied`, `hot/2t/admitted`, `hot/2t/denied`: one key,
//!   with a quota that admits every check, or one that admits the first and denies
//!   every other (governor writes nothing on a denial).
//! - `1m/<kind>/warm` and `1m/<kind>/cold`: 1,000,000 keys of one kind (IPv4, IPv6,
//!   UUID, 40-byte API key), each checked once per pass, in a random order unrelated
//!   to the order the limiters stored them in (so their tables, and governor's copies
//!   of the keys, are visited at random). `warm`: the caller's key strings were
//!   allocated in the order they are checked, so the prefetcher brings them in, as a
//!   gateway holds the key it just built. `cold`: the caller's strings are those the
//!   keys were stored from, visited at random, so that each is itself a cache miss.
//!
//! For instruction counts under valgrind, `WEIR_BENCH_ONLY=<governor|weir_gcra|
//! weir_token_bucket>` runs one limiter and `WEIR_BENCH_CHECKS=<n>` sets the checks per
//! measurement; `WEIR_BENCH_ROUNDS=<n>` sets the rounds (5).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use weir_core::{Algorithm, Policy};
use weir_store::{Key, MemoryStore, MemoryStoreConfig, SystemClock};

const MANY_KEYS: usize = 1_000_000;

/// The kinds of identity a gateway keys by, at their usual lengths.
#[derive(Clone, Copy)]
enum KeyKind {
    /// `10.a.b.c`: 8-14 bytes.
    Ipv4,
    /// Eight groups of four hex digits: 39 bytes.
    Ipv6,
    /// `8-4-4-4-12` hex digits: 36 bytes.
    Uuid,
    /// `wk_live_` and 32 hex digits: 40 bytes.
    ApiKey,
}

impl KeyKind {
    const ALL: [KeyKind; 4] = [KeyKind::Ipv4, KeyKind::Ipv6, KeyKind::Uuid, KeyKind::ApiKey];

    fn name(self) -> &'static str {
        match self {
            KeyKind::Ipv4 => "ipv4",
            KeyKind::Ipv6 => "ipv6",
            KeyKind::Uuid => "uuid",
            KeyKind::ApiKey => "apikey40",
        }
    }

    /// The `i`-th key of this kind (distinct for distinct `i`).
    fn key(self, i: usize) -> String {
        let r = mix(i as u64);
        match self {
            KeyKind::Ipv4 => format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255),
            KeyKind::Ipv6 => format!(
                "2001:0db8:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}",
                r >> 48 & 0xffff,
                r >> 32 & 0xffff,
                r >> 16 & 0xffff,
                r & 0xffff,
                i >> 16 & 0xffff,
                i & 0xffff
            ),
            KeyKind::Uuid => format!(
                "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
                r >> 32,
                r >> 16 & 0xffff,
                r & 0xfff,
                i >> 36 & 0xfff,
                i & 0xffff_ffff_ffff
            ),
            KeyKind::ApiKey => format!("wk_live_{:016x}{:016x}", r, i),
        }
    }
}

/// A bijective mix of 64 bits (splitmix64's finaliser).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `0..n` in a random (fixed) order.
fn shuffled(n: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        let j = (mix(i as u64 ^ 0x5eed) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// The limiters of a row, by name, each a function of the key's index.
type Limiter<'a> = (&'static str, Box<dyn Fn(usize) -> bool + Sync + 'a>);

/// Runs `checks` checks split over `threads` threads, the `i`-th on key `order[i %
/// order.len()]`; returns the wall time per check.
fn per_check(
    checks: usize,
    threads: usize,
    order: &[u32],
    check: &(dyn Fn(usize) -> bool + Sync),
) -> f64 {
    let per_thread = checks / threads;
    let barrier = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| {
        for t in 0..threads {
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                let offset = t * order.len() / threads;
                let mut admitted = 0usize;
                for i in 0..per_thread {
                    let at = (offset + i) % order.len();
                    admitted += usize::from(check(order[at] as usize));
                }
                black_box(admitted);
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins the threads when this closure returns.
        start
    });
    elapsed.elapsed().as_nanos() as f64 / (per_thread * threads) as f64
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Whether the limiter `name` is measured (all unless `WEIR_BENCH_ONLY` names one).
fn wanted(name: &str) -> bool {
    std::env::var("WEIR_BENCH_ONLY").map_or(true, |only| only == name)
}

/// Settings read from the environment (see the module docs).
struct Settings {
    checks: Option<usize>,
    rounds: usize,
    filter: Option<String>,
}

impl Settings {
    fn read() -> Self {
        let env = |name| std::env::var(name).ok();
        Self {
            checks: env("WEIR_BENCH_CHECKS").and_then(|n| n.parse().ok()),
            rounds: env("WEIR_BENCH_ROUNDS")
                .and_then(|n| n.parse().ok())
                .unwrap_or(5),
            filter: std::env::args().skip(1).find(|a| !a.starts_with("--")),
        }
    }

    fn runs(&self, row: &str) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| row.contains(f.as_str()))
    }
}

/// Measures one row: every limiter `rounds` times, rotating their order; prints medians.
fn row(
    settings: &Settings,
    name: &str,
    checks: usize,
    threads: usize,
    order: &[u32],
    limiters: &[Limiter<'_>],
) {
    let checks = settings.checks.unwrap_or(checks);
    let mut times = vec![Vec::new(); limiters.len()];
    for round in 0..settings.rounds {
        for k in 0..limiters.len() {
            let l = (round + k) % limiters.len();
            times[l].push(per_check(checks, threads, order, &*limiters[l].1));
        }
    }
    let governor = limiters.iter().position(|(n, _)| *n == "governor");
    let mut line = format!("{name:<24}");
    for (l, (limiter, _)) in limiters.iter().enumerate() {
        line += &format!(" {limiter} {:7.1} ns", median(&mut times[l].clone()));
        if let Some(g) = governor.filter(|&g| g != l) {
            let mut ratios: Vec<f64> = times[l].iter().zip(&times[g]).map(|(w, g)| w / g).collect();
            line += &format!(" ({:.2}x)", median(&mut ratios));
        }
    }
    println!("{line}");
}

/// A weir store holding `keys` (each checked once) under `policy`.
fn weir(keys: &[String], policy: &Policy) -> MemoryStore {
    let store = MemoryStore::new(
        MemoryStoreConfig {
            max_keys: 2 * keys.len().max(1),
        },
        Arc::new(SystemClock::new()),
    );
    for key in keys {
        store.check_sync(weir_key(key), policy, 1).unwrap();
    }
    store
}

fn weir_key(identity: &str) -> Key<'_> {
    Key {
        rule: "api",
        identity,
    }
}

/// A governor limiter holding `keys` (each checked once) under `quota`.
fn governor(keys: &[String], quota: Quota) -> DefaultKeyedRateLimiter<String> {
    let limiter = RateLimiter::keyed(quota);
    for key in keys {
        let _ = limiter.check_key(key);
    }
    limiter
}

/// The limiters of a row, checking the key strings of `keys`: governor, and weir's
/// `stores`.
fn limiters<'a>(
    governor: Option<&'a DefaultKeyedRateLimiter<String>>,
    keys: &'a [String],
    stores: &'a [(Algorithm, MemoryStore, Policy)],
) -> Vec<Limiter<'a>> {
    let mut all: Vec<Limiter<'a>> = Vec::new();
    if let Some(governor) = governor {
        all.push((
            "governor",
            Box::new(move |i| governor.check_key(&keys[i]).is_ok()),
        ));
    }
    for (algorithm, store, policy) in stores {
        all.push((
            name(*algorithm),
            Box::new(move |i| {
                store
                    .check_sync(weir_key(&keys[i]), policy, 1)
                    .is_ok_and(|d| d.allowed)
            }),
        ));
    }
    all
}

/// Quotas, governor's and weir's limit and period, that admit every check (a billion
/// per second) or one per hour.
fn quota(admit_all: bool) -> (Quota, u64, Duration) {
    if admit_all {
        (
            Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap()),
            1_000_000_000,
            Duration::from_secs(1),
        )
    } else {
        (
            Quota::per_hour(NonZeroU32::new(1).unwrap()),
            1,
            Duration::from_secs(3600),
        )
    }
}

/// The name of weir's limiter for `algorithm`.
fn name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::Gcra => "weir_gcra",
        _ => "weir_token_bucket",
    }
}

/// weir's stores (GCRA, token bucket) holding `keys`, at `limit` per `period`.
fn stores(keys: &[String], limit: u64, period: Duration) -> Vec<(Algorithm, MemoryStore, Policy)> {
    [Algorithm::Gcra, Algorithm::TokenBucket]
        .into_iter()
        .filter(|&algorithm| wanted(name(algorithm)))
        .map(|algorithm| {
            let policy = Policy::new(algorithm, limit, period, None).unwrap();
            (algorithm, weir(keys, &policy), policy)
        })
        .collect()
}

fn main() {
    let settings = Settings::read();
    println!(
        "time per check (median of {} rounds), ratio to governor in the same round:",
        settings.rounds
    );
    let hot = vec!["203.0.113.7".to_string()];
    for threads in [1, 2] {
        for admit_all in [true, false] {
            let name = format!(
                "hot/{threads}t/{}",
                if admit_all { "admitted" } else { "denied" }
            );
            if !settings.runs(&name) {
                continue;
            }
            let (quota, limit, period) = quota(admit_all);
            let stores = stores(&hot, limit, period);
            let governor = wanted("governor").then(|| governor(&hot, quota));
            let limiters = limiters(governor.as_ref(), &hot, &stores);
            row(&settings, &name, 5_000_000, threads, &[0], &limiters);
        }
    }
    for kind in KeyKind::ALL {
        let warm = format!("1m/{}/warm", kind.name());
        let cold = format!("1m/{}/cold", kind.name());
        if !settings.runs(&warm) && !settings.runs(&cold) {
            continue;
        }
        // The limiters copy the keys in this order.
        let keys: Vec<String> = (0..MANY_KEYS).map(|i| kind.key(i)).collect();
        let (quota, limit, period) = quota(true);
        let stores = stores(&keys, limit, period);
        let governor = wanted("governor").then(|| governor(&keys, quota));
        let order = shuffled(MANY_KEYS);
        if settings.runs(&warm) {
            // The caller's strings allocated afresh in the order they are checked.
            let walk: Vec<String> = order.iter().map(|&i| keys[i as usize].clone()).collect();
            let in_order: Vec<u32> = (0..MANY_KEYS as u32).collect();
            let limiters = limiters(governor.as_ref(), &walk, &stores);
            row(&settings, &warm, MANY_KEYS, 1, &in_order, &limiters);
        }
        if settings.runs(&cold) {
            let limiters = limiters(governor.as_ref(), &keys, &stores);
            row(&settings, &cold, MANY_KEYS, 1, &order, &limiters);
        }
    }
}
