//! What one run counts: per plan, requests and what became of them; per rule, the most
//! admitted to one key in a trailing period (counted exactly, as `weir simulate`
//! counts its worst window), in steady state, during the shift and during the
//! failure, with the regions that admitted it; the latency the store calls added to
//! each request; and what happened in the failed shard's region while it was down.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use weir_core::Policy;

/// The most regions a scenario may have (a key's admissions are kept per region).
pub(super) const MAX_REGIONS: usize = 8;

/// The phases of a run a trailing period can fall in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The period overlaps neither the shift nor the failure.
    Steady = 0,
    /// The period overlaps the traffic shift (not the failure).
    Shift = 1,
    /// The period overlaps the failure.
    Failure = 2,
}

/// The phases, in report order.
pub(super) const PHASES: [Phase; 3] = [Phase::Steady, Phase::Shift, Phase::Failure];

/// What became of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Admitted.
    Allowed,
    /// Denied (429).
    Denied,
    /// Answered 503: a rule failed closed (or the store could not decide).
    Unavailable,
    /// Refused as unreadable (never, with the scenario's requests).
    Refused,
}

/// Requests and their fates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    /// Requests.
    pub requests: u64,
    /// Admitted, decided on the shared store.
    pub allowed: u64,
    /// Denied by the shared store (or a lease's remembered denial).
    pub denied: u64,
    /// Admitted on a gateway's local fallback, the store having failed.
    pub fallback_allowed: u64,
    /// Denied on a gateway's local fallback.
    pub fallback_denied: u64,
    /// 503: failed closed.
    pub unavailable: u64,
    /// Refused as unreadable.
    pub refused: u64,
}

impl Counts {
    fn add(&mut self, fate: Fate, failed: bool) {
        self.requests += 1;
        match (fate, failed) {
            (Fate::Allowed, false) => self.allowed += 1,
            (Fate::Allowed, true) => self.fallback_allowed += 1,
            (Fate::Denied, false) => self.denied += 1,
            (Fate::Denied, true) => self.fallback_denied += 1,
            (Fate::Unavailable, _) => self.unavailable += 1,
            (Fate::Refused, _) => self.refused += 1,
        }
    }
}

/// The most admitted to one key of a rule within one trailing period.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Worst {
    /// Cost admitted in the period.
    pub admitted: u64,
    /// When the period ended (ns from the start).
    pub at: u64,
    /// Whose key: the population and rank.
    pub who: Option<(usize, u32)>,
    /// What each region admitted of it.
    pub by_region: [u64; MAX_REGIONS],
}

/// A key's admissions inside the trailing period ending at its latest one.
#[derive(Debug, Default)]
struct Track {
    /// (time ns, cost, region).
    window: VecDeque<(u64, u32, u8)>,
    in_window: u64,
    by_region: [u64; MAX_REGIONS],
}

/// A rule's worst windows, per phase, and per second of the run.
#[derive(Debug, Clone)]
pub(super) struct RuleStats {
    /// The rule's policy.
    pub policy: Policy,
    /// The worst window in each phase ([`Phase`] as index).
    pub worst: [Worst; 3],
    /// Per second, the most admitted to one key in a trailing period ending in it.
    pub per_second: Vec<u64>,
}

/// A latency histogram in whole microseconds, up to [`Latencies::MAX_US`].
#[derive(Debug, Clone)]
pub(super) struct Latencies {
    counts: Vec<u64>,
    total_ns: u128,
    n: u64,
}

impl Latencies {
    /// Latencies above this (µs) are counted here.
    const MAX_US: usize = 1_000_000;

    fn new() -> Self {
        Self {
            counts: vec![0; Self::MAX_US + 1],
            total_ns: 0,
            n: 0,
        }
    }

    fn add(&mut self, ns: u64) {
        self.counts[((ns / 1000) as usize).min(Self::MAX_US)] += 1;
        self.total_ns += u128::from(ns);
        self.n += 1;
    }

    /// The latency (µs) at quantile `q` (0 to 1): the least value at least that
    /// share of requests waited no longer than.
    pub(super) fn quantile_us(&self, q: f64) -> u64 {
        let want = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (us, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= want {
                return us as u64;
            }
        }
        Self::MAX_US as u64
    }

    /// The mean (µs).
    pub(super) fn mean_us(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.n as f64 / 1000.0
        }
    }

    /// The share of requests that waited for no store call.
    pub(super) fn none_share(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.counts[0] as f64 / self.n as f64
        }
    }
}

/// Everything one run counted.
#[derive(Debug, Clone)]
pub(super) struct RunStats {
    /// Per population (plan).
    pub plans: Vec<Counts>,
    /// Per population, admitted and denied (any way) per second.
    pub plan_seconds: Vec<Vec<(u64, u64)>>,
    /// Per routed rule.
    pub rules: Vec<RuleStats>,
    /// Latency added per request.
    pub latency: Latencies,
    /// Latency added per request, but for the failed shard's region from the failure
    /// on.
    pub latency_unfailed: Latencies,
    /// Store calls per routed rule (by index), every region together.
    pub rule_calls: Vec<u64>,
    /// Per region, per shard, store calls per second.
    pub calls: Vec<Vec<Vec<u32>>>,
    /// In the failed shard's region while it was down: requests whose keys live on
    /// the failed shard, and the others; after it came back, the requests still
    /// decided on the failure policy (a breaker waiting for its next probe).
    pub failure: (Counts, Counts, Counts),
    /// Requests the shift moved.
    pub moved: u64,
}

/// Counts a run as it goes.
pub(super) struct Recording {
    stats: RunStats,
    /// Per rule, its period in ns.
    periods: Vec<u64>,
    /// When the shift and the failure were (ns from the start).
    shift: Option<Range<u64>>,
    failure: Option<Range<u64>>,
    tracks: HashMap<(u16, u16, u32), Track, foldhash::fast::FixedState>,
}

impl Recording {
    /// Counting `populations` plans and the rules of `policies` over `seconds`, with
    /// the shift and the failure at these times.
    pub(super) fn new(
        populations: usize,
        policies: &[Policy],
        seconds: usize,
        shift: Option<Range<u64>>,
        failure: Option<Range<u64>>,
    ) -> Self {
        Self {
            stats: RunStats {
                plans: vec![Counts::default(); populations],
                plan_seconds: vec![vec![(0, 0); seconds]; populations],
                rules: policies
                    .iter()
                    .map(|&policy| RuleStats {
                        policy,
                        worst: Default::default(),
                        per_second: vec![0; seconds],
                    })
                    .collect(),
                latency: Latencies::new(),
                latency_unfailed: Latencies::new(),
                rule_calls: Vec::new(),
                calls: Vec::new(),
                failure: Default::default(),
                moved: 0,
            },
            periods: policies
                .iter()
                .map(|p| u64::try_from(p.period().as_nanos()).unwrap_or(u64::MAX))
                .collect(),
            tracks: HashMap::default(),
            shift,
            failure,
        }
    }

    /// The phase of the trailing `period` ending at `at`.
    fn phase(&self, at: u64, period: u64) -> Phase {
        let overlaps = |r: &Option<Range<u64>>| {
            r.as_ref()
                .is_some_and(|r| r.start <= at && r.end > at.saturating_sub(period))
        };
        if overlaps(&self.failure) {
            Phase::Failure
        } else if overlaps(&self.shift) {
            Phase::Shift
        } else {
            Phase::Steady
        }
    }

    /// A request's fate (`failed`: decided on the failure policy), and the latency
    /// its store calls added; `touched`: whether the failure could have touched it
    /// (its region, from the failure on).
    pub(super) fn request(
        &mut self,
        population: usize,
        at: u64,
        (fate, failed): (Fate, bool),
        latency: u64,
        touched: bool,
    ) {
        if !touched {
            self.stats.latency_unfailed.add(latency);
        }
        self.stats.plans[population].add(fate, failed);
        let second = self.second(at);
        let counts = &mut self.stats.plan_seconds[population][second];
        match fate {
            Fate::Allowed => counts.0 += 1,
            _ => counts.1 += 1,
        }
        self.stats.latency.add(latency);
    }

    /// A request of the failed shard's region while it was down; `on_shard`: its keys
    /// live on the failed shard.
    pub(super) fn during_failure(&mut self, on_shard: bool, fate: Fate, failed: bool) {
        let counts = match on_shard {
            true => &mut self.stats.failure.0,
            false => &mut self.stats.failure.1,
        };
        counts.add(fate, failed);
    }

    /// A request of the failed shard's region after it came back: counted if it was
    /// still decided on the failure policy.
    pub(super) fn after_failure(&mut self, fate: Fate, failed: bool) {
        if failed || fate == Fate::Unavailable {
            self.stats.failure.2.add(fate, failed);
        }
    }

    /// A request the shift moved.
    pub(super) fn moved(&mut self) {
        self.stats.moved += 1;
    }

    /// `cost` admitted at `at` (ns) to the key of rule `rule` of identity `rank` of
    /// `population`, in `region`.
    pub(super) fn admitted(
        &mut self,
        rule: usize,
        (population, rank): (usize, u32),
        region: usize,
        at: u64,
        cost: u64,
    ) {
        let period = self.periods[rule];
        let phase = self.phase(at, period);
        let track = self
            .tracks
            .entry((rule as u16, population as u16, rank))
            .or_default();
        while let Some(&(t, c, r)) = track.window.front() {
            if t.saturating_add(period) > at {
                break;
            }
            track.window.pop_front();
            track.in_window -= u64::from(c);
            track.by_region[usize::from(r)] -= u64::from(c);
        }
        let cost32 = u32::try_from(cost).unwrap_or(u32::MAX);
        track.window.push_back((at, cost32, region as u8));
        track.in_window += u64::from(cost32);
        track.by_region[region] += u64::from(cost32);
        let second = (at / 1_000_000_000) as usize;
        let stats = &mut self.stats.rules[rule];
        let last = stats.per_second.len() - 1;
        let slot = &mut stats.per_second[second.min(last)];
        *slot = (*slot).max(track.in_window);
        let worst = &mut stats.worst[phase as usize];
        if track.in_window > worst.admitted {
            *worst = Worst {
                admitted: track.in_window,
                at,
                who: Some((population, rank)),
                by_region: track.by_region,
            };
        }
    }

    /// Forgets the keys with nothing admitted in their trailing period at `now`.
    pub(super) fn forget_quiet(&mut self, now: u64) {
        let periods = &self.periods;
        self.tracks.retain(|&(rule, ..), track| {
            track
                .window
                .back()
                .is_some_and(|&(t, ..)| t.saturating_add(periods[usize::from(rule)]) > now)
        });
    }

    fn second(&self, at: u64) -> usize {
        let last = self.stats.plan_seconds.first().map_or(1, Vec::len).max(1) - 1;
        ((at / 1_000_000_000) as usize).min(last)
    }

    /// The run's counts, with the store calls counted by the clusters: per region,
    /// shard and second, and per rule.
    pub(super) fn finish(mut self, calls: Vec<Vec<Vec<u32>>>, rule_calls: Vec<u64>) -> RunStats {
        self.stats.calls = calls;
        self.stats.rule_calls = rule_calls;
        self.stats
    }
}
