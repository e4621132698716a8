//! Time per check: weir's memory store beside governor's keyed limiter, in one run.
//!
//! `cargo bench -p weir-store --bench memory_store`
//!
//! Both limiters see the same keys (strings), the same access pattern (a fixed
//! permutation of the key set, so the 1M-key runs miss the CPU caches alike) and a quota
//! that admits most checks. Multi-threaded runs split the same work over threads and
//! report time per check over all threads.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use weir_core::{Algorithm, Policy};
use weir_store::{Key, MemoryStore, MemoryStoreConfig, SystemClock};

const KEY_COUNTS: [usize; 3] = [1, 100_000, 1_000_000];
const THREADS: [usize; 2] = [1, 2];

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("user-{i:08}")).collect()
}

/// Index of the `i`-th access: a stride coprime with every key count used.
fn pick(i: u64, n: usize) -> usize {
    (i.wrapping_mul(2_654_435_761) % n as u64) as usize
}

/// Runs `iters` checks split over `threads` threads; returns the wall time.
fn timed<F: Fn(usize) + Sync>(iters: u64, threads: usize, check: F) -> Duration {
    let per_thread = iters.div_ceil(threads as u64);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let check = &check;
            s.spawn(move || {
                let offset = t as u64 * 7_919;
                for i in 0..per_thread {
                    check((offset + i) as usize);
                }
            });
        }
    });
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    group.sample_size(20);
    let quota = Quota::per_second(NonZeroU32::new(1_000_000).unwrap());
    for &n in &KEY_COUNTS {
        let keys = keys(n);
        for &threads in &THREADS {
            let param = format!("{n}keys/{threads}threads");
            let governor: Arc<DefaultKeyedRateLimiter<String>> =
                Arc::new(RateLimiter::keyed(quota));
            for key in &keys {
                let _ = governor.check_key(key);
            }
            group.bench_function(BenchmarkId::new("governor", &param), |b| {
                b.iter_custom(|iters| {
                    timed(iters, threads, |i| {
                        black_box(governor.check_key(&keys[pick(i as u64, n)]).is_ok());
                    })
                })
            });
            drop(governor);
            for algorithm in [Algorithm::Gcra, Algorithm::TokenBucket] {
                let policy =
                    Policy::new(algorithm, 1_000_000, Duration::from_secs(1), None).unwrap();
                let store = MemoryStore::new(
                    MemoryStoreConfig {
                        max_keys: 2_000_000,
                    },
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
                let name = format!("weir_{algorithm}");
                group.bench_function(BenchmarkId::new(name, &param), |b| {
                    b.iter_custom(|iters| {
                        timed(iters, threads, |i| {
                            let key = &keys[pick(i as u64, n)];
                            black_box(
                                store
                                    .check_sync(
                                        Key {
                                            rule: "api",
                                            identity: key,
                                        },
                                        &policy,
                                        1,
                                    )
                                    .unwrap()
                                    .allowed,
                            );
                        })
                    })
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
