//! Heap bytes per key at 1M keys: weir's memory store beside governor's keyed limiter.
//!
//! `cargo bench -p weir-store --bench memory_per_key`
//!
//! A counting allocator measures the live heap before and after 1M distinct keys are
//! checked once, for each limiter in turn; the key strings the caller holds are
//! allocated before the measurement, so only what each limiter keeps is counted
//! (including its own copy of every key).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use weir_core::{Algorithm, Policy};
use weir_store::{Key, MemoryStore, MemoryStoreConfig, SystemClock};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is delegated unchanged to the system allocator; this only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const KEYS: usize = 1_000_000;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// A kind of key: its name, and its `i`-th key.
type KeyKind = (&'static str, fn(usize) -> String);

/// Keys of the lengths a gateway sees: short user ids and IPv4 addresses (inline in
/// weir's entries), then IPv6 addresses, UUIDs and 40-byte API keys.
const KINDS: [KeyKind; 5] = [
    ("user-00000000 (13 B)", |i| format!("user-{i:08}")),
    ("ipv4 (8-14 B)", |i| {
        format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255)
    }),
    ("ipv6 (39 B)", |i| {
        format!(
            "2001:0db8:0000:0000:0000:{:04x}:{:04x}:{:04x}",
            i >> 32 & 0xffff,
            i >> 16 & 0xffff,
            i & 0xffff
        )
    }),
    ("uuid (36 B)", |i| {
        format!(
            "8c1f6d2e-{:04x}-4a1b-9c3d-{:012x}",
            i >> 48 & 0xffff,
            i & 0xffff_ffff_ffff
        )
    }),
    ("api key (40 B)", |i| format!("wk_live_{i:032x}")),
];

fn main() {
    // `cargo bench` passes `--bench`; any other argument is a filter we do not use.
    let quota = Quota::per_minute(NonZeroU32::new(100).unwrap());
    println!("heap bytes per key at {KEYS} keys (key copy included), ratio to governor:");
    for (kind, key) in KINDS {
        let keys: Vec<String> = (0..KEYS).map(key).collect();
        let before = live();
        let governor: DefaultKeyedRateLimiter<String> = RateLimiter::keyed(quota);
        for key in &keys {
            let _ = governor.check_key(key);
        }
        let governor_bytes = (live() - before) as f64 / KEYS as f64;
        drop(governor);
        let mut line = format!("{kind:<22} governor {governor_bytes:6.1}");
        for algorithm in [
            Algorithm::Gcra,
            Algorithm::TokenBucket,
            Algorithm::FixedWindow,
        ] {
            let policy = Policy::new(algorithm, 100, Duration::from_secs(60), None).unwrap();
            let before = live();
            let store = MemoryStore::new(
                MemoryStoreConfig { max_keys: KEYS },
                Arc::new(SystemClock::new()),
            );
            for key in &keys {
                store
                    .check_sync(
                        Key {
                            rule: "api",
                            identity: key,
                        },
                        &policy,
                        1,
                    )
                    .unwrap();
            }
            let bytes = (live() - before) as f64 / KEYS as f64;
            line += &format!(
                "  {} {bytes:6.1} ({:.2}x)",
                algorithm.name(),
                bytes / governor_bytes
            );
            drop(store);
        }
        println!("{line}");
    }
}
