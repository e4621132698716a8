//! The identities a rule denied most over the last minutes, in bounded memory whatever
//! the traffic: one Space-Saving sketch (Metwally, Agrawal and El Abbadi, 2005) per
//! minute, five minutes kept.
//!
//! A sketch tracks at most [`TRACKED`] identities. An identity not tracked takes the
//! place of the least counted one and inherits its count (as an overestimate, kept as
//! `error`): any identity denied more than 1/[`TRACKED`] of the minute's denials is
//! always in the sketch, with a count off by at most its `error`.
//! (pdatastructs' top-k sketch is not `Send` and reports no counts.)

use std::collections::HashMap;

use serde::Serialize;

/// Identities tracked per minute and rule.
const TRACKED: usize = 64;
/// Minutes kept.
const MINUTES: u64 = 5;
const MINUTE_NS: u64 = 60_000_000_000;

/// An identity and about how many times it was denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub(crate) struct Counted {
    /// The identity (the rule's key, as stored).
    pub identity: String,
    /// Its denials (an overestimate by at most `error`).
    pub denied: u64,
    /// By how much `denied` may overstate.
    pub error: u64,
}

/// One minute's sketch.
#[derive(Debug, Default)]
struct SpaceSaving {
    counted: Vec<Counted>,
    /// Where each identity is in `counted`: looked up on every denial, so by foldhash
    /// (several times quicker than SipHash on short keys, and seeded).
    index: HashMap<String, usize, foldhash::fast::RandomState>,
}

impl SpaceSaving {
    fn add(&mut self, identity: &str) {
        if let Some(&i) = self.index.get(identity) {
            self.counted[i].denied += 1;
            return;
        }
        if self.counted.len() < TRACKED {
            self.index.insert(identity.to_owned(), self.counted.len());
            self.counted.push(Counted {
                identity: identity.to_owned(),
                denied: 1,
                error: 0,
            });
            return;
        }
        #[expect(
            clippy::expect_used,
            reason = "here the sketch is full: it holds TRACKED entries, so it has a least"
        )]
        let (least, _) = self
            .counted
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| c.denied)
            .expect("a full sketch has entries");
        let replaced = &mut self.counted[least];
        self.index.remove(&replaced.identity);
        self.index.insert(identity.to_owned(), least);
        *replaced = Counted {
            identity: identity.to_owned(),
            denied: replaced.denied + 1,
            error: replaced.denied,
        };
    }
}

/// The sketches of the last five minutes.
#[derive(Debug, Default)]
pub(super) struct TopDenied {
    minutes: Vec<(u64, SpaceSaving)>,
}

impl TopDenied {
    /// Counts a denial of `identity` at `now` (nanoseconds).
    pub(super) fn add(&mut self, identity: &str, now: u64) {
        let minute = now / MINUTE_NS;
        if let Some((_, sketch)) = self.minutes.iter_mut().find(|(m, _)| *m == minute) {
            sketch.add(identity);
            return;
        }
        let mut sketch = SpaceSaving::default();
        sketch.add(identity);
        if self.minutes.len() < MINUTES as usize {
            self.minutes.push((minute, sketch));
        } else if let Some(oldest) = self.minutes.iter_mut().min_by_key(|(m, _)| *m) {
            *oldest = (minute, sketch);
        }
    }

    /// The `n` identities denied most in the last `minutes` (1 to 5, the current one
    /// included), most first; ties by identity.
    pub(super) fn top(&self, now: u64, minutes: u64, n: usize) -> Vec<Counted> {
        let current = now / MINUTE_NS;
        let minutes = minutes.clamp(1, MINUTES);
        let mut merged: HashMap<&str, (u64, u64)> = HashMap::new();
        for (_, sketch) in self
            .minutes
            .iter()
            .filter(|(m, _)| *m <= current && current - *m < minutes)
        {
            for c in &sketch.counted {
                let entry = merged.entry(&c.identity).or_default();
                entry.0 += c.denied;
                entry.1 += c.error;
            }
        }
        let mut top: Vec<Counted> = merged
            .into_iter()
            .map(|(identity, (denied, error))| Counted {
                identity: identity.to_owned(),
                denied,
                error,
            })
            .collect();
        top.sort_by(|a, b| b.denied.cmp(&a.denied).then(a.identity.cmp(&b.identity)));
        top.truncate(n);
        top
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn exact_while_few_identities_are_denied() {
        let mut top = TopDenied::default();
        for _ in 0..30 {
            top.add("bot", SECOND);
        }
        for _ in 0..5 {
            top.add("ana", 2 * SECOND);
        }
        top.add("bo", 70 * SECOND);
        let found = top.top(75 * SECOND, 5, 10);
        let summary: Vec<(&str, u64, u64)> = found
            .iter()
            .map(|c| (c.identity.as_str(), c.denied, c.error))
            .collect();
        assert_eq!(summary, [("bot", 30, 0), ("ana", 5, 0), ("bo", 1, 0)]);
        // The last minute alone.
        assert_eq!(top.top(75 * SECOND, 1, 10).len(), 1);
        // Long after: nothing.
        assert!(top.top(400 * SECOND, 5, 10).is_empty());
    }

    #[test]
    fn a_heavy_hitter_survives_a_flood_of_one_off_identities() {
        let mut top = TopDenied::default();
        for i in 0..100_000u64 {
            top.add(&format!("spoofed-{i}"), SECOND);
            if i % 10 == 0 {
                top.add("attacker", SECOND);
            }
        }
        let found = top.top(SECOND, 1, 3);
        assert_eq!(found[0].identity, "attacker");
        // 10,000 denials, overstated by at most what it inherited.
        assert!(found[0].denied - found[0].error <= 10_000 && found[0].denied >= 10_000);
        let sketch = &top.minutes[0].1;
        assert_eq!(sketch.counted.len(), TRACKED);
        assert_eq!(sketch.index.len(), TRACKED);
    }
}
