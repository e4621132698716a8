//! Clients that retry: traffic that depends on the answers, so it is played out
//! afresh against each rule (a discrete-event simulation on the virtual clock).
//!
//! Every client shares one account (key `account`) and works through its requests one
//! at a time: a request is due every `interval`, the clients' due times staggered by
//! `offset`; a denied request is retried (after a wait that depends on the [`Retry`]
//! behaviour) until admitted, and requests that fall due meanwhile wait their turn.
//! Nothing is sent at or after `duration`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::report::{RuleReport, Series};
use super::rules::Rule;
use super::run::Run;

/// How a client waits after a denial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// A fixed wait, whatever `Retry-After` says.
    Storm { every: u64 },
    /// `Retry-After` (rounded up to the millisecond) plus a uniformly random jitter
    /// of up to `base × 2^(n-1)` after the n-th denial in a row, at most `cap`.
    Backoff { base: u64, cap: u64 },
}

/// Retrying clients of one account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clients {
    pub(super) retry: Retry,
    pub(super) clients: u32,
    /// Between one client's requests (ns).
    pub(super) interval: u64,
    /// Between the first requests of successive clients (ns).
    pub(super) offset: u64,
    pub(super) duration: u64,
    pub(super) seed: u64,
}

impl Clients {
    /// Requests the clients want to make before the end, had nothing been denied.
    pub(super) fn demand(&self) -> u64 {
        (0..u64::from(self.clients))
            .map(|c| c.saturating_mul(self.offset))
            .filter(|&first| first < self.duration)
            .map(|first| (self.duration - 1 - first) / self.interval + 1)
            .sum()
    }

    /// Plays the clients against `rule`.
    pub(super) fn run(&self, rule: &Rule, series: Series) -> RuleReport {
        let clients = self.clients as usize;
        let mut run = Run::new(&rule.name, rule.policy, 1, clients, series);
        let mut rng = SplitMix(self.seed);
        // Per client: when its current request fell due, and its denials in a row.
        let mut due: Vec<u64> = (0..clients as u64)
            .map(|c| c.saturating_mul(self.offset))
            .collect();
        let mut denials = vec![0u32; clients];
        // Sends, earliest first; at one instant, the lower client first.
        let mut sends: BinaryHeap<Reverse<(u64, u32)>> = (0..self.clients)
            .map(|c| Reverse((due[c as usize], c)))
            .collect();
        while let Some(Reverse((now, client))) = sends.pop() {
            if now >= self.duration {
                break;
            }
            let c = client as usize;
            let decision = run.attempt(now, 0, client, 1);
            let next = if decision.allowed {
                denials[c] = 0;
                due[c] = due[c].saturating_add(self.interval);
                due[c].max(now)
            } else {
                denials[c] += 1;
                let wait = match self.retry {
                    Retry::Storm { every } => every,
                    Retry::Backoff { base, cap } => {
                        let retry_after = decision
                            .retry_after
                            .map_or(rule.policy.period_ns(), |d| d.as_nanos() as u64);
                        let bound = base
                            .checked_shl(denials[c] - 1)
                            .filter(|&b| b <= cap)
                            .unwrap_or(cap);
                        retry_after.div_ceil(1_000_000) * 1_000_000 + rng.below(bound + 1)
                    }
                };
                now.saturating_add(wait)
            };
            sends.push(Reverse((next, client)));
        }
        run.finish(|_| "account")
    }
}

/// SplitMix64: a small, fast generator, enough for jitter and reproducible by seed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
