//! The requests of a scenario, in time order, drawn from a seed: arrivals spread evenly
//! at the scenario's rate, each from an identity of a population (its plan) drawn by
//! Zipf popularity, to a route by its share, through a gateway of the identity's home
//! region (or, during the shift, of the region its traffic moved to).

use std::time::Duration;

use super::scenario::Scenario;
use super::zipf::Zipf;

/// One request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Request {
    /// When, in ns from the start.
    pub at: u64,
    /// Whose population (index): its plan.
    pub population: usize,
    /// The identity's rank in its population (1 the busiest).
    pub rank: u32,
    /// The region it reached (index).
    pub region: usize,
    /// The gateway it reached (index over every region's gateways).
    pub gateway: usize,
    /// The route (index).
    pub route: usize,
}

/// The requests of a scenario from a seed: the same seed, the same requests.
pub(super) struct Traffic<'s> {
    scenario: &'s Scenario,
    seed: u64,
    rng: fastrand::Rng,
    zipfs: Vec<Zipf>,
    populations: Vec<f64>,
    routes: Vec<f64>,
    regions: Vec<f64>,
    first_gateway: Vec<usize>,
    /// The millisecond being sent, its requests, and how many were sent.
    ms: u64,
    in_ms: u64,
    sent_in_ms: u64,
    /// The fraction of a request carried to the next millisecond.
    carry: f64,
    end_ms: u64,
}

impl<'s> Traffic<'s> {
    /// The requests of `scenario` drawn from `seed`.
    pub(super) fn new(scenario: &'s Scenario, seed: u64) -> Self {
        let mut first_gateway = Vec::new();
        let mut gateways = 0;
        for region in &scenario.regions {
            first_gateway.push(gateways);
            gateways += region.gateways;
        }
        Self {
            scenario,
            seed,
            rng: fastrand::Rng::with_seed(seed),
            zipfs: scenario
                .populations
                .iter()
                .map(|p| Zipf::new(p.identities, p.zipf))
                .collect(),
            populations: cumulative(scenario.populations.iter().map(|p| p.share)),
            routes: cumulative(scenario.routes.iter().map(|r| r.share)),
            regions: cumulative(scenario.regions.iter().map(|r| r.share)),
            first_gateway,
            ms: 0,
            in_ms: 0,
            sent_in_ms: 0,
            carry: 0.0,
            end_ms: scenario.duration.as_millis() as u64,
        }
    }

    /// The home region of an identity: fixed by the seed, in proportion to the
    /// regions' shares.
    pub(super) fn home(&self, population: usize, rank: u32) -> usize {
        let hash = mix(self.seed ^ mix(((population as u64) << 32) | u64::from(rank)));
        pick(&self.regions, (hash >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// The next request, or none past the end.
    pub(super) fn next_request(&mut self) -> Option<Request> {
        while self.sent_in_ms == self.in_ms {
            if self.ms >= self.end_ms {
                return None;
            }
            let now = Duration::from_millis(self.ms);
            self.carry += self.scenario.rate(now) / 1000.0;
            self.in_ms = self.carry.floor() as u64;
            self.carry -= self.in_ms as f64;
            self.sent_in_ms = 0;
            self.ms += 1;
        }
        let at = (self.ms - 1) * 1_000_000 + self.sent_in_ms * 1_000_000 / self.in_ms;
        self.sent_in_ms += 1;
        let population = pick(&self.populations, self.rng.f64());
        let rng = &mut self.rng;
        let rank = self.zipfs[population].sample(|| rng.f64()) as u32;
        let route = pick(&self.routes, self.rng.f64());
        let mut region = self.home(population, rank);
        if let Some(shift) = &self.scenario.shift
            && region == shift.from
            && (shift.start.as_nanos() as u64..shift.end.as_nanos() as u64).contains(&at)
            && self.rng.f64() < shift.share
        {
            region = shift.to;
        }
        let gateway =
            self.first_gateway[region] + self.rng.usize(..self.scenario.regions[region].gateways);
        Some(Request {
            at,
            population,
            rank,
            region,
            gateway,
            route,
        })
    }
}

/// Running totals of `shares`.
fn cumulative(shares: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut total = 0.0;
    shares
        .map(|s| {
            total += s;
            total
        })
        .collect()
}

/// The index whose cumulative share first exceeds `u` (the last for rounding).
fn pick(cumulative: &[f64], u: f64) -> usize {
    cumulative
        .iter()
        .position(|&c| u < c)
        .unwrap_or(cumulative.len() - 1)
}

/// SplitMix64's finaliser: a well-spread hash of a number.
pub(super) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
