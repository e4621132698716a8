//! Live decision rates per rule for the admin API: the rules' totals sampled over time,
//! a rate being the difference between now and a sample about a minute old.

use std::collections::{HashMap, VecDeque};

use super::RuleTotals;

/// Rates are taken over about this long.
const OVER_NS: u64 = 60_000_000_000;
/// Samples closer together than this are not kept (bounded memory at any call rate).
const EVERY_NS: u64 = 5_000_000_000;

/// A rule's rates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Rates {
    /// Allowed requests a second.
    pub allowed_per_second: f64,
    /// Denied requests a second.
    pub denied_per_second: f64,
    /// Over how many seconds (0: not enough samples yet).
    pub over_seconds: f64,
}

/// Totals sampled over the last minute or so.
#[derive(Debug, Default)]
pub(super) struct Samples {
    samples: VecDeque<(u64, HashMap<String, RuleTotals>)>,
}

impl Samples {
    /// Keeps `totals` as of `now` (if the last sample is old enough), and forgets
    /// samples no rate needs any more.
    pub(super) fn sample(&mut self, now: u64, totals: HashMap<String, RuleTotals>) {
        if self
            .samples
            .back()
            .is_none_or(|(t, _)| now.saturating_sub(*t) >= EVERY_NS)
        {
            self.samples.push_back((now, totals));
        }
        // Keep one sample at least a minute old, as the base of the rates.
        while self
            .samples
            .get(1)
            .is_some_and(|(t, _)| now.saturating_sub(*t) >= OVER_NS)
        {
            self.samples.pop_front();
        }
    }

    /// Each rule's rates from the oldest sample kept to `totals` at `now`.
    pub(super) fn rates(
        &self,
        now: u64,
        totals: &HashMap<String, RuleTotals>,
    ) -> HashMap<String, Rates> {
        let Some((since, base)) = self.samples.front().filter(|(t, _)| *t < now) else {
            return totals
                .keys()
                .map(|name| (name.clone(), Rates::default()))
                .collect();
        };
        let seconds = (now - since) as f64 / 1e9;
        totals
            .iter()
            .map(|(name, now_totals)| {
                let then = base.get(name).copied().unwrap_or_default();
                let per_second = |a: u64, b: u64| a.saturating_sub(b) as f64 / seconds;
                let rates = Rates {
                    allowed_per_second: per_second(now_totals.allowed, then.allowed),
                    denied_per_second: per_second(now_totals.denied, then.denied),
                    over_seconds: seconds,
                };
                (name.clone(), rates)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn totals(allowed: u64, denied: u64) -> HashMap<String, RuleTotals> {
        HashMap::from([("api".to_owned(), RuleTotals { allowed, denied })])
    }

    #[test]
    fn rates_over_about_the_last_minute() {
        let mut samples = Samples::default();
        for s in 0..=120u64 {
            // 10 allowed and 2 denied a second.
            samples.sample(s * SECOND, totals(10 * s, 2 * s));
        }
        let rates = samples.rates(120 * SECOND, &totals(1200, 240))["api"];
        assert!((60.0..=65.0).contains(&rates.over_seconds), "{rates:?}");
        assert!((rates.allowed_per_second - 10.0).abs() < 1e-9, "{rates:?}");
        assert!((rates.denied_per_second - 2.0).abs() < 1e-9, "{rates:?}");
        assert!(samples.samples.len() <= 14);
    }

    #[test]
    fn no_rate_before_a_second_sample() {
        let samples = Samples::default();
        let rates = samples.rates(SECOND, &totals(5, 0))["api"];
        assert_eq!(rates, Rates::default());
    }
}
