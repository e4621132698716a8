//! Heap bytes per key at 1M keys: weir's memory store beside governor's keyed limiter.
//!
//! `cargo bench -p weir-store --bench memory_per_key`
//!
//! A counting allocator measures the live heap before and after 1M distinct keys are
//! checked once, for each limiter in turn; the key strings the caller holds are
//! allocated before the measurement, so only what each limiter keeps is counted
//! (including its own copy of every key).

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

fn main() {
    // `cargo bench` passes `--bench`; any other argument is a filter we do not use.
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user-{i:08}")).collect();
    let quota = Quota::per_minute(NonZeroU32::new(100).unwrap());

    let before = live();
    let governor: DefaultKeyedRateLimiter<String> = RateLimiter::keyed(quota);
    for key in &keys {
        let _ = governor.check_key(key);
    }
    let governor_bytes = (live() - before) as f64 / KEYS as f64;
    drop(governor);

    println!("memory per key at {KEYS} keys (heap bytes, key copy included):");
    println!("  governor keyed (dashmap)  {governor_bytes:>7.1}");
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
        println!(
            "  weir {:<20} {bytes:>7.1}  ({:.2}x governor)",
            algorithm.name(),
            bytes / governor_bytes
        );
        drop(store);
    }
}
