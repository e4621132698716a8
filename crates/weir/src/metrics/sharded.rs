//! Counters, gauges and histograms that server threads update without sharing a cache
//! line: each value is split into a few cache-line-sized slots, a thread always adds to
//! its own, and a scrape sums them. weir runs one server thread per core, and every
//! request updates several metrics: with one shared atomic (or, for prometheus-client's
//! histogram, one mutex) each of those updates bounced a cache line between the
//! cores. Encoded through prometheus-client's `EncodeMetric`, like its own types.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Slots per value: threads beyond this share slots (still exact, only slower).
const SHARDS: usize = 4;

/// Threads seen so far, for their slots.
static THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SHARD: usize = THREADS.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

fn shard() -> usize {
    SHARD.with(|shard| *shard)
}

/// One slot, alone on its pair of cache lines (the adjacent-line prefetcher fetches
/// lines in pairs).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot<T>(T);

/// A counter.
#[derive(Debug, Clone, Default)]
pub(super) struct Counter(Arc<[Slot<AtomicU64>; SHARDS]>);

impl Counter {
    /// Adds one.
    pub(super) fn inc(&self) {
        self.inc_by(1);
    }

    /// Adds `n`.
    pub(super) fn inc_by(&self, n: u64) {
        self.0[shard()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The total.
    pub(super) fn get(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

impl TypedMetric for Counter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for Counter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A gauge that goes up and down (requests in flight).
#[derive(Debug, Clone, Default)]
pub(super) struct Gauge(Arc<[Slot<AtomicI64>; SHARDS]>);

impl Gauge {
    /// Adds one.
    pub(super) fn inc(&self) {
        self.0[shard()].0.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes one off (on any thread: the sum is what counts).
    pub(super) fn dec(&self) {
        self.0[shard()].0.fetch_sub(1, Ordering::Relaxed);
    }

    fn get(&self) -> i64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

impl TypedMetric for Gauge {
    const TYPE: MetricType = MetricType::Gauge;
}

impl EncodeMetric for Gauge {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A histogram of durations, with fixed buckets; sums are kept in whole nanoseconds.
#[derive(Debug, Clone)]
pub(super) struct Histogram {
    /// Upper bounds in seconds; the last is +Inf.
    bounds: Arc<[f64]>,
    /// Upper bounds in nanoseconds (the last `u64::MAX`).
    bounds_ns: Arc<[u64]>,
    /// Per slot: a count per bucket, then the sum in nanoseconds.
    slots: Arc<[Slot<Box<[AtomicU64]>>; SHARDS]>,
}

impl Histogram {
    /// A histogram with these upper bounds, in seconds (+Inf is added).
    pub(super) fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        let bounds: Vec<f64> = bounds
            .into_iter()
            .filter(|b| b.is_finite())
            .chain([f64::INFINITY])
            .collect();
        let bounds_ns = bounds
            .iter()
            .map(|b| {
                if b.is_finite() {
                    (b * 1e9) as u64
                } else {
                    u64::MAX
                }
            })
            .collect();
        let slot = || Slot((0..=bounds.len()).map(|_| AtomicU64::new(0)).collect());
        Self {
            slots: Arc::new(std::array::from_fn(|_| slot())),
            bounds: bounds.into(),
            bounds_ns,
        }
    }

    /// Records one duration.
    pub(super) fn observe(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bucket = self.bounds_ns.partition_point(|&b| b < ns);
        let slot = &self.slots[shard()].0;
        slot[bucket].fetch_add(1, Ordering::Relaxed);
        slot[self.bounds.len()].fetch_add(ns, Ordering::Relaxed);
    }
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut buckets: Vec<(f64, u64)> = self.bounds.iter().map(|&b| (b, 0)).collect();
        let mut sum_ns = 0u64;
        for slot in self.slots.iter() {
            for (bucket, count) in buckets.iter_mut().zip(slot.0.iter()) {
                bucket.1 += count.load(Ordering::Relaxed);
            }
            sum_ns = sum_ns.wrapping_add(slot.0[self.bounds.len()].load(Ordering::Relaxed));
        }
        let count = buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(sum_ns as f64 / 1e9, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let counter = Counter::default();
        let gauge = Gauge::default();
        let histogram = Histogram::new([0.001, 0.01]);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for i in 0..1000u64 {
                        counter.inc();
                        gauge.inc();
                        histogram.observe(Duration::from_micros(i * 20));
                    }
                });
                s.spawn(|| gauge.dec());
            }
        });
        assert_eq!(counter.get(), 8000);
        assert_eq!(gauge.get(), 8000 - 8);
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("took", "", histogram);
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        // Per thread, 0 to 19.98 ms in steps of 20 µs: 51 of them at most 1 ms (0 to
        // 1000 µs), 501 at most 10 ms.
        assert!(text.contains("took_bucket{le=\"0.001\"} 408\n"), "{text}");
        assert!(text.contains("took_bucket{le=\"0.01\"} 4008\n"), "{text}");
        assert!(text.contains("took_bucket{le=\"+Inf\"} 8000\n"), "{text}");
        assert!(text.contains("took_count 8000\n"), "{text}");
        // 8 × Σ i·20 µs for i < 1000 = 8 × 9.99 s.
        assert!(text.contains("took_sum 79.92\n"), "{text}");
    }
}
