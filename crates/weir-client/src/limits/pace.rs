//! Slowing down before being cut off: when an answer's RateLimit fields say little is
//! left, the client spaces its next requests to the same server (host and port) by
//! the interval the answer implies, until the quota's reset; an answer with room again
//! ends it. Requests in flight at once each take the next free slot, so a pool of
//! tasks sharing one client is spaced as a whole, not released together.

use std::collections::HashMap;
use std::time::Duration;

/// Servers remembered at most; past it, entries whose pacing has ended are dropped,
/// then the oldest.
const MAX_SERVERS: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Gate {
    /// The earliest time the next request may go.
    next: Duration,
    /// Between two requests.
    interval: Duration,
    /// When pacing ends (the quota's reset).
    until: Duration,
}

/// Pacing per server.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    gates: HashMap<String, Gate>,
}

impl Pace {
    /// Takes a slot for a request to `server` at `now`: how long to wait first.
    pub(crate) fn slot(&mut self, server: &str, now: Duration) -> Duration {
        let Some(gate) = self.gates.get_mut(server) else {
            return Duration::ZERO;
        };
        if now >= gate.until {
            self.gates.remove(server);
            return Duration::ZERO;
        }
        let at = gate.next.max(now);
        gate.next = at.saturating_add(gate.interval);
        at - now
    }

    /// From an answer of `server` at `now`: space requests by `interval` for `lasting`,
    /// or (`None`) stop pacing.
    pub(crate) fn update(
        &mut self,
        server: &str,
        now: Duration,
        pace: Option<(Duration, Duration)>,
    ) {
        let Some((interval, lasting)) = pace else {
            self.gates.remove(server);
            return;
        };
        let until = now.saturating_add(lasting);
        if let Some(gate) = self.gates.get_mut(server) {
            gate.interval = interval;
            gate.until = until;
            return;
        }
        if self.gates.len() >= MAX_SERVERS {
            self.gates.retain(|_, gate| gate.until > now);
            if self.gates.len() >= MAX_SERVERS
                && let Some(oldest) = self
                    .gates
                    .iter()
                    .min_by_key(|(_, gate)| gate.until)
                    .map(|(name, _)| name.clone())
            {
                self.gates.remove(&oldest);
            }
        }
        self.gates.insert(
            server.to_owned(),
            Gate {
                next: now,
                interval,
                until,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn requests_are_spaced_until_the_reset_and_only_for_that_server() {
        let mut pace = Pace::default();
        assert_eq!(pace.slot("a:80", MS(0)), MS(0));
        pace.update("a:80", MS(0), Some((MS(100), MS(1000))));
        // Three requests at once take consecutive slots.
        assert_eq!(pace.slot("a:80", MS(0)), MS(0));
        assert_eq!(pace.slot("a:80", MS(0)), MS(100));
        assert_eq!(pace.slot("a:80", MS(0)), MS(200));
        assert_eq!(
            pace.slot("b:80", MS(0)),
            MS(0),
            "another server is not paced"
        );
        // Later, the next free slot is now.
        assert_eq!(pace.slot("a:80", MS(700)), MS(0));
        assert_eq!(pace.slot("a:80", MS(1000)), MS(0), "the reset ends pacing");
        assert_eq!(pace.slot("a:80", MS(1000)), MS(0));
    }

    #[test]
    fn an_answer_with_room_ends_pacing() {
        let mut pace = Pace::default();
        pace.update("a:80", MS(0), Some((MS(100), MS(1000))));
        assert_eq!(pace.slot("a:80", MS(0)), MS(0));
        pace.update("a:80", MS(0), None);
        assert_eq!(pace.slot("a:80", MS(0)), MS(0));
    }

    #[test]
    fn the_table_is_bounded() {
        let mut pace = Pace::default();
        for i in 0..(MAX_SERVERS + 10) {
            pace.update(
                &format!("s{i}:80"),
                MS(i as u64),
                Some((MS(1), MS(1_000_000))),
            );
        }
        assert_eq!(pace.gates.len(), MAX_SERVERS);
        assert!(pace.gates.contains_key(&format!("s{}:80", MAX_SERVERS + 9)));
        assert!(!pace.gates.contains_key("s0:80"), "the oldest went");
    }
}
