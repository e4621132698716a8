//! Distinct keys close to their limit over the last minute, estimated in bounded
//! memory: six HyperLogLog sketches of ten seconds each (1 KiB apiece, about 3% error),
//! merged when read.

use pdatastructs::hyperloglog::HyperLogLog;

/// The length of one sketch's slice of time.
const SLICE_NS: u64 = 10_000_000_000;
/// Slices kept: one minute.
const SLICES: usize = 6;
/// Register bits per sketch: 2^10 registers, a standard error of about 3.2%.
const REGISTER_BITS: usize = 10;

/// The keys seen in each of the last six ten-second slices.
#[derive(Debug, Default)]
pub(super) struct NearLimit {
    slices: Vec<(u64, HyperLogLog<str>)>,
}

impl NearLimit {
    /// Notes `key` at time `now` (nanoseconds).
    pub(super) fn add(&mut self, key: &str, now: u64) {
        let slice = now / SLICE_NS;
        if let Some((_, sketch)) = self.slices.iter_mut().find(|(s, _)| *s == slice) {
            sketch.add(key);
            return;
        }
        let mut sketch = HyperLogLog::new(REGISTER_BITS);
        sketch.add(key);
        if self.slices.len() < SLICES {
            self.slices.push((slice, sketch));
        } else if let Some(oldest) = self.slices.iter_mut().min_by_key(|(s, _)| *s) {
            *oldest = (slice, sketch);
        }
    }

    /// About how many distinct keys were noted in the last minute before `now`.
    pub(super) fn estimate(&self, now: u64) -> u64 {
        let current = now / SLICE_NS;
        let mut merged = HyperLogLog::new(REGISTER_BITS);
        for (_, sketch) in self
            .slices
            .iter()
            .filter(|(s, _)| *s <= current && current - *s < SLICES as u64)
        {
            merged.merge(sketch);
        }
        merged.count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn counts_distinct_keys_of_the_last_minute_only() {
        let mut near = NearLimit::default();
        for i in 0..1000 {
            near.add(&format!("10.0.{}.{}", i / 256, i % 256), 5 * SECOND);
            // Seen again later: still one key.
            near.add(&format!("10.0.{}.{}", i / 256, i % 256), 35 * SECOND);
        }
        let estimate = near.estimate(40 * SECOND);
        assert!((900..=1100).contains(&estimate), "{estimate}");
        // At 65 s the first slice (0-10 s) is out of the minute; the keys seen at 35 s
        // remain.
        let estimate = near.estimate(65 * SECOND);
        assert!((900..=1100).contains(&estimate), "{estimate}");
        assert_eq!(near.estimate(100 * SECOND), 0);
    }

    #[test]
    fn memory_stays_bounded_whatever_the_traffic() {
        let mut near = NearLimit::default();
        for i in 0..100_000u64 {
            near.add(&i.to_string(), i * SECOND / 100);
        }
        assert_eq!(near.slices.len(), SLICES);
        let estimate = near.estimate(1000 * SECOND - 1);
        // 100 keys a second over the last 6 slices' worth.
        assert!((5_400..=6_600).contains(&estimate), "{estimate}");
    }
}
