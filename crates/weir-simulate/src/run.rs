//! One rule's run: the real algorithm on a virtual clock, a state per key, and what
//! its decisions add up to.
//!
//! - *Worst window*: per key (what a limit promises is per key), the most cost admitted
//!   in any trailing period of the rule's length, counted as an exact sliding log
//!   counts (an admission at `t` is inside every period ending before `t + period`).
//!   The count only grows at an admission, so checking there finds the maximum over
//!   every window, exactly: each key keeps a queue of its admissions still inside the
//!   period ending now, amortised O(1) per admission.
//! - *Retry waste*: denied attempts a client sent before the `Retry-After` of its
//!   previous denial had passed, that is attempts a client honouring `Retry-After`
//!   would not have sent. In a trace a key is taken as one client.

use std::collections::VecDeque;

use weir_core::{Decision, Policy, State};

use super::report::{RuleReport, Series, Worst};

/// A key's limiter state and its admissions still inside the trailing period.
#[derive(Default)]
struct Key {
    state: Option<State>,
    /// (time, cost) of admissions inside the period ending at the newest one.
    window: VecDeque<(u64, u64)>,
    in_window: u64,
}

/// A rule being run over traffic.
pub(super) struct Run {
    policy: Policy,
    keys: Vec<Key>,
    /// Per client: until when its last denial asked it to wait (0: no wait).
    wait_until: Vec<u64>,
    /// The worst window so far: cost admitted, when, which key.
    worst: Option<(u64, u64, u32)>,
    report: RuleReport,
}

impl Run {
    /// A run of `policy` named `name` over `keys` keys and `clients` clients, its
    /// admissions and denials counted in `series`' buckets.
    pub(super) fn new(
        name: &str,
        policy: Policy,
        keys: usize,
        clients: usize,
        series: Series,
    ) -> Self {
        let mut key_states = Vec::new();
        key_states.resize_with(keys, Key::default);
        Self {
            policy,
            keys: key_states,
            wait_until: vec![0; clients],
            worst: None,
            report: RuleReport {
                name: name.to_owned(),
                policy,
                attempts: 0,
                admitted: 0,
                denied: 0,
                retry_waste: 0,
                worst: None,
                series,
            },
        }
    }

    /// Checks an attempt of `client` on `key` at `now` (ns) costing `cost`, and counts it.
    pub(super) fn attempt(&mut self, now: u64, key: u32, client: u32, cost: u64) -> Decision {
        let entry = &mut self.keys[key as usize];
        let decision = weir_core::check(&self.policy, &mut entry.state, now, cost);
        let report = &mut self.report;
        report.attempts += 1;
        let wait_until = &mut self.wait_until[client as usize];
        if decision.allowed {
            report.admitted += 1;
            *wait_until = 0;
            let period = self.policy.period_ns();
            while let Some(&(at, cost)) = entry.window.front() {
                if at.saturating_add(period) > now {
                    break;
                }
                entry.window.pop_front();
                entry.in_window -= cost;
            }
            match entry.window.back_mut() {
                Some((at, admitted)) if *at == now => *admitted += cost,
                _ => entry.window.push_back((now, cost)),
            }
            entry.in_window += cost;
            report.series.trailing(now, entry.in_window);
            if self.worst.is_none_or(|(most, ..)| entry.in_window > most) {
                self.worst = Some((entry.in_window, now, key));
            }
        } else {
            report.denied += 1;
            if now < *wait_until {
                report.retry_waste += 1;
            }
            if let Some(retry_after) = decision.retry_after {
                *wait_until = now.saturating_add(retry_after.as_nanos() as u64);
            }
        }
        report.series.count(now, decision.allowed);
        decision
    }

    /// What the run came to; `key_name` names a key by its number.
    pub(super) fn finish<'a>(mut self, key_name: impl Fn(u32) -> &'a str) -> RuleReport {
        self.report.worst = self.worst.map(|(admitted, at, key)| Worst {
            admitted,
            at,
            key: key_name(key).to_owned(),
        });
        self.report
    }
}
