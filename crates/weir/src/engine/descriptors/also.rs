//! More limits on one descriptor (`x-weir: { also }`: "per second and per day"), and
//! which of a descriptor's decisions its status reports.

use std::time::Duration;

use weir_core::{Decision, Policy};

use super::Unit;

/// One more limit on a descriptor, counted beside its `rate_limit` on a counter of
/// its own (in the same store call as the request's other counters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AlsoLimit {
    /// `requests_per_unit` as written: reported as `current_limit` when this limit is
    /// the one that binds.
    pub requests_per_unit: u32,
    /// Its `unit`, reported likewise.
    pub unit: Unit,
    /// Its `name`, reported likewise (the descriptor's when it has none).
    pub name: Option<String>,
    /// What is decided: `requests_per_unit` per `period` (the unit's by default), by
    /// its algorithm.
    pub policy: Policy,
    /// The rule its counter is kept under in the store (the descriptor's, with the
    /// limit's place in `also` after it: `envoy.1`).
    pub rule: String,
}

/// Which of a descriptor's decisions (its limits', in order) its status reports: the
/// most constraining one. Of those over the limit, the one that lets the hits through
/// last (one that never will, last of all); when none is over, the one with the least
/// remaining; the first of equals.
pub(super) fn binding(decisions: &[Decision]) -> usize {
    let over = decisions
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.allowed)
        .fold(None, |best: Option<(usize, Duration)>, (i, d)| {
            let wait = d.retry_after.unwrap_or(Duration::MAX);
            match best {
                Some((_, longest)) if longest >= wait => best,
                _ => Some((i, wait)),
            }
        });
    if let Some((i, _)) = over {
        return i;
    }
    decisions
        .iter()
        .enumerate()
        .min_by_key(|(i, d)| (d.remaining, *i))
        .map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allowed: bool, remaining: u64, retry: Option<u64>) -> Decision {
        Decision {
            allowed,
            limit: 10,
            remaining,
            reset_after: Duration::ZERO,
            retry_after: retry.map(Duration::from_secs),
            delay: Duration::ZERO,
        }
    }

    #[test]
    fn the_most_constraining_limit_binds() {
        let ok = |remaining| decision(true, remaining, None);
        let over = |retry| decision(false, 0, retry);
        assert_eq!(binding(&[ok(5)]), 0);
        assert_eq!(binding(&[ok(5), ok(3), ok(3)]), 1);
        assert_eq!(binding(&[ok(0), over(Some(1))]), 1);
        assert_eq!(binding(&[over(Some(1)), over(Some(60)), ok(0)]), 1);
        assert_eq!(binding(&[over(Some(60)), over(None)]), 1);
        assert_eq!(binding(&[over(Some(60)), over(Some(60))]), 0);
    }
}
