//! The report of a fleet simulation, as Markdown: the scenario in a line, then per
//! plan what was admitted, the worst windows against the limits and where, Redis calls
//! per shard with and without leases, the latency store calls added, what the shard
//! failure and the traffic shift did, and what the simulation leaves out.

use std::fmt::Write as _;

use weir_core::{Algorithm, Policy};

use super::run::{PLAN_HEADER, USER_HEADER};
use super::scenario::Scenario;
use super::stats::{Counts, PHASES, Phase, RunStats, Worst};
use crate::config::{Config, StoreConfig};

/// Both runs of a scenario and what they found.
#[derive(Debug, Clone)]
pub(crate) struct FleetReport {
    pub(super) scenario: Scenario,
    pub(super) seed: u64,
    /// The routed rules' names, in file order.
    pub(super) rules: Vec<String>,
    /// How each routed rule is shared: leased, global, or neither.
    marks: Vec<&'static str>,
    fallback_instances: u64,
    timeout_ms: u128,
    /// With the rules' leases.
    pub(super) with_leases: RunStats,
    /// Without leases.
    pub(super) without_leases: RunStats,
}

impl FleetReport {
    pub(super) fn new(
        scenario: &Scenario,
        seed: u64,
        config: &Config,
        with_leases: RunStats,
        without_leases: RunStats,
    ) -> Self {
        let routed = &config.engine.routing.rules;
        let marks = routed
            .iter()
            .map(|r| {
                let named = config.engine.rules.iter().find(|n| n.name == r.name);
                match named {
                    Some(n) if n.lease.is_some() => " (leased)",
                    Some(n) if n.global => " (global)",
                    _ => "",
                }
            })
            .collect();
        let (fallback_instances, timeout_ms) = match &config.store {
            StoreConfig::Redis(redis, fallback) => (fallback.instances, redis.timeout.as_millis()),
            StoreConfig::Memory(_) => (1, 0),
        };
        Self {
            scenario: scenario.clone(),
            seed,
            rules: routed.iter().map(|r| r.name.clone()).collect(),
            marks,
            fallback_instances,
            timeout_ms,
            with_leases,
            without_leases,
        }
    }

    /// The runs, named.
    pub(super) fn runs(&self) -> [(&'static str, &RunStats); 2] {
        [
            ("with leases", &self.with_leases),
            ("without leases", &self.without_leases),
        ]
    }

    /// The report, as Markdown.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        self.summary(&mut out);
        self.plans(&mut out);
        self.worst(&mut out);
        self.calls(&mut out);
        self.latency(&mut out);
        self.failure(&mut out);
        self.shift(&mut out);
        self.caveats(&mut out);
        out
    }

    fn summary(&self, out: &mut String) {
        let s = &self.scenario;
        let shards: usize = s.regions.iter().map(|r| r.shards).sum();
        let requests: u64 = self.with_leases.plans.iter().map(|c| c.requests).sum();
        let peak = s.traffic.iter().map(|&(_, r)| r).fold(0.0, f64::max);
        let _ = writeln!(out, "# weir simulate fleet: {}\n", s.name);
        let _ = writeln!(
            out,
            "Seed {}. {} s of virtual time; {} regions, {} gateways, {} Redis shards; {} identities; {} requests (at most {}/s), the same requests in both runs: with the rules' leases and without.\n",
            self.seed,
            s.duration.as_secs(),
            s.regions.len(),
            s.gateways(),
            shards,
            thousands(s.identities()),
            thousands(requests),
            thousands(peak.round() as u64),
        );
        let _ = writeln!(
            out,
            "| region | gateways | Redis shards | identities' share | store call latency |"
        );
        let _ = writeln!(out, "| --- | ---: | ---: | ---: | --- |");
        for r in &s.regions {
            let l = r.latency;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0}% | {:.2} ms + up to {:.2} ms, {:.1}% of calls {:.1} ms more on average |",
                r.name,
                r.gateways,
                r.shards,
                r.share * 100.0,
                l.base as f64 / 1e6,
                l.spread as f64 / 1e6,
                l.tail * 100.0,
                l.tail_mean as f64 / 1e6
            );
        }
        let _ = writeln!(out);
    }

    fn plans(&self, out: &mut String) {
        let _ = writeln!(out, "## Requests per plan\n");
        let _ = writeln!(
            out,
            "Admitted and denied on the shared store (or a lease), admitted and denied on a gateway's local fallback (the store having failed: each limit divided by the {} instances of `fallback_instances`), and failed closed (503).\n",
            self.fallback_instances
        );
        let _ = writeln!(
            out,
            "| plan | identities | run | requests | admitted | denied | fallback admitted | fallback denied | failed closed |"
        );
        let _ = writeln!(
            out,
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        for (i, p) in self.scenario.populations.iter().enumerate() {
            for (run, stats) in self.runs() {
                let c = &stats.plans[i];
                let _ = writeln!(
                    out,
                    "| {} | {} | {run} | {} | {} | {} | {} | {} | {} |",
                    p.plan,
                    thousands(p.identities),
                    thousands(c.requests),
                    percent(c.allowed, c.requests),
                    percent(c.denied, c.requests),
                    thousands(c.fallback_allowed),
                    thousands(c.fallback_denied),
                    thousands(c.unavailable),
                );
            }
        }
        let _ = writeln!(out);
    }

    fn who(&self, worst: &Worst) -> String {
        match worst.who {
            Some((population, rank)) => {
                format!("{}-{}", self.scenario.populations[population].plan, rank)
            }
            None => "-".into(),
        }
    }

    fn where_(&self, worst: &Worst) -> String {
        let parts: Vec<String> = self
            .scenario
            .regions
            .iter()
            .zip(worst.by_region)
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{} {}", r.name, thousands(n)))
            .collect();
        parts.join(", ")
    }

    fn worst(&self, out: &mut String) {
        let _ = writeln!(out, "## Admitted against limit\n");
        let _ = writeln!(
            out,
            "Per rule, the most cost admitted to one key in any trailing period of the rule's length (counted exactly, over every admission), as a multiple of its limit, in periods that overlap neither the shift nor the failure, that overlap the shift, and that overlap the failure. A bucket (`gcra`, `token_bucket`) may admit its burst and a whole period's refill within one period: its bound is (burst + limit) / limit, 2.00x when the burst is the limit. A region's store enforces that bound for the keys it sees, so a key whose requests reach two regions has a bucket in each, unless its rule is global (`scope: global`): then the regions' shares add up to one bucket.\n"
        );
        let _ = writeln!(
            out,
            "| rule | limit | bound | run | steady | overlapping the shift | overlapping the failure |"
        );
        let _ = writeln!(out, "| --- | ---: | ---: | --- | ---: | ---: | ---: |");
        for (i, name) in self.rules.iter().enumerate() {
            let policy = self.with_leases.rules[i].policy;
            for (run, stats) in self.runs() {
                let cells: Vec<String> = PHASES
                    .iter()
                    .map(|&phase| {
                        let w = &stats.rules[i].worst[phase as usize];
                        match w.who {
                            Some(_) => format!("{:.2}x", ratio(w.admitted, &policy)),
                            None => "-".into(),
                        }
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "| {name}{} | {} | {} | {run} | {} |",
                    self.marks[i],
                    limit(&policy),
                    bound(&policy).map_or("-".into(), |b| format!("{b:.2}x")),
                    cells.join(" | ")
                );
            }
        }
        let _ = writeln!(out, "\nThe worst of each rule, and where (with leases):\n");
        let _ = writeln!(
            out,
            "| rule | key | admitted | x limit | at | phase | admitted by |"
        );
        let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | --- | --- |");
        for (i, name) in self.rules.iter().enumerate() {
            let stats = &self.with_leases.rules[i];
            let Some((phase, w)) = PHASES
                .iter()
                .map(|&p| (p, &stats.worst[p as usize]))
                .max_by_key(|(_, w)| w.admitted)
                .filter(|(_, w)| w.who.is_some())
            else {
                continue;
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {:.2}x | {:.1} s | {} | {} |",
                self.who(w),
                thousands(w.admitted),
                ratio(w.admitted, &stats.policy),
                w.at as f64 / 1e9,
                phase_name(phase),
                self.where_(w)
            );
        }
        let _ = writeln!(out);
    }

    fn calls(&self, out: &mut String) {
        let _ = writeln!(out, "## Redis calls per second, per shard\n");
        let seconds = self.scenario.duration.as_secs().max(1) as f64;
        let _ = writeln!(
            out,
            "Every call a gateway makes to its region's cluster (checks, lease takes and give-backs), per shard and second of virtual time: the mean over the run and the busiest second.\n"
        );
        let _ = writeln!(
            out,
            "| region | shard | with leases: mean | max | without leases: mean | max | saved |"
        );
        let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
        let mut totals = [0u64; 2];
        for (r, region) in self.scenario.regions.iter().enumerate() {
            for shard in 0..region.shards {
                let with = &self.with_leases.calls[r][shard];
                let without = &self.without_leases.calls[r][shard];
                let sum = |c: &[u32]| c.iter().map(|&n| u64::from(n)).sum::<u64>();
                let max = |c: &[u32]| c.iter().copied().max().unwrap_or(0);
                totals[0] += sum(with);
                totals[1] += sum(without);
                let _ = writeln!(
                    out,
                    "| {} | {shard} | {} | {} | {} | {} | {} |",
                    region.name,
                    thousands((sum(with) as f64 / seconds).round() as u64),
                    thousands(u64::from(max(with))),
                    thousands((sum(without) as f64 / seconds).round() as u64),
                    thousands(u64::from(max(without))),
                    saved(sum(with), sum(without)),
                );
            }
        }
        let _ = writeln!(
            out,
            "\nEvery shard together: {} calls/s with leases, {} without ({} fewer). Per rule, every region together (a call checking two rules, a login's plan and login limits, counts for both; a global rule's include its rebalancing: every gateway reports the keys it was asked for at each rebalance, and one per region claims, renews at the key's home and applies the share):\n",
            thousands((totals[0] as f64 / seconds).round() as u64),
            thousands((totals[1] as f64 / seconds).round() as u64),
            saved(totals[0], totals[1])
        );
        let _ = writeln!(out, "| rule | with leases | without leases | saved |");
        let _ = writeln!(out, "| --- | ---: | ---: | ---: |");
        for (i, name) in self.rules.iter().enumerate() {
            let (with, without) = (
                self.with_leases.rule_calls[i],
                self.without_leases.rule_calls[i],
            );
            let _ = writeln!(
                out,
                "| {name}{} | {} | {} | {} |",
                self.marks[i],
                thousands((with as f64 / seconds).round() as u64),
                thousands((without as f64 / seconds).round() as u64),
                saved(with, without)
            );
        }
        let _ = writeln!(out);
    }

    fn latency(&self, out: &mut String) {
        let _ = writeln!(out, "## Latency added\n");
        let _ = writeln!(
            out,
            "What the store calls a request waited for added to it, drawn per call from its region's latency model (a request spent from a lease, or denied from a remembered denial, waits for none; a call to the failed shard waits the store's timeout, {} ms, until the gateways' health loops find its slots lost, two timeouts after it failed, or while a gateway's breaker, opened by failures in a row, waits for a probe).\n",
            self.timeout_ms
        );
        let _ = writeln!(
            out,
            "| run | requests | no store call | mean | p50 | p99 | p99.9 |"
        );
        let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: | ---: |");
        let rows = self.runs().into_iter().flat_map(|(run, stats)| {
            [
                (run, "all", &stats.latency),
                (
                    run,
                    "but the failed region's from the failure on",
                    &stats.latency_unfailed,
                ),
            ]
        });
        for (run, which, l) in rows {
            let _ = writeln!(
                out,
                "| {run} | {which} | {:.1}% | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms |",
                l.none_share() * 100.0,
                l.mean_us() / 1000.0,
                l.quantile_us(0.5) as f64 / 1000.0,
                l.quantile_us(0.99) as f64 / 1000.0,
                l.quantile_us(0.999) as f64 / 1000.0,
            );
        }
        let _ = writeln!(out);
    }

    fn failure(&self, out: &mut String) {
        let Some(f) = &self.scenario.failure else {
            return;
        };
        let region = &self.scenario.regions[f.region];
        let _ = writeln!(out, "## The shard failure\n");
        let _ = writeln!(
            out,
            "Shard {} of {} answered nothing from {} s to {} s (each call failing after {} ms until the gateways' health loops found its slots lost, two timeouts in; from then on refused at once). The region's requests meanwhile, those whose keys live on that shard (decided on the failure policy) and the others (still on Redis, but for those a gateway's breaker refused in the first moments, opened by failures in a row until a probe succeeded), and after the shard came back, the requests still decided on the failure policy (until the health loops found it back, 300 ms, or a breaker's next probe):\n",
            f.shard,
            region.name,
            f.start.as_secs(),
            f.end.as_secs(),
            self.timeout_ms
        );
        let _ = writeln!(
            out,
            "| run | keys | requests | admitted | denied | fallback admitted | fallback denied | failed closed |"
        );
        let _ = writeln!(
            out,
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        for (run, stats) in self.runs() {
            for (keys, c) in [
                ("on the failed shard", &stats.failure.0),
                ("on the other shards", &stats.failure.1),
                ("after it came back", &stats.failure.2),
            ] {
                let _ = writeln!(out, "| {run} | {keys} | {} |", counts_row(c));
            }
        }
        let _ = writeln!(out);
    }

    fn shift(&self, out: &mut String) {
        let Some(s) = &self.scenario.shift else {
            return;
        };
        let _ = writeln!(out, "## The traffic shift\n");
        let _ = writeln!(
            out,
            "{:.0}% of {}'s requests went to {} from {} s to {} s: {} requests moved. The identities moved have a bucket in both regions' stores meanwhile, but for global rules, whose regions' shares follow the demand at each rebalance: the \"overlapping the shift\" column above.\n",
            s.share * 100.0,
            self.scenario.regions[s.from].name,
            self.scenario.regions[s.to].name,
            s.start.as_secs(),
            s.end.as_secs(),
            thousands(self.with_leases.moved)
        );
    }

    fn caveats(&self, out: &mut String) {
        let _ = writeln!(out, "## What is simulated, and what is not\n");
        let _ = writeln!(
            out,
            "- Real: each gateway's `Engine` (routing, plans from `{PLAN_HEADER}`, identities from `{USER_HEADER}`, costs, all-or-nothing checks, failure policy and local fallback), its `LeasingStore` (takes, local spending, remembered denials, give-backs at the deadline, driven on the virtual clock), for global rules its `RegionalStore` (its peers the other regions' clusters, rebalanced on the virtual clock at the `region` section's interval), and the `Breaker` in front of the store (its jitter seeded; the health loop that closes it as soon as Redis answers is not run: it closes by its timed probes). A failed shard's slots are refused at once from two store timeouts after it failed, as the health loop's finding them lost makes the Redis store do.\n- Simulated: each Redis shard keeps state with weir-core's `check`, `take`, `give_back`, `refund` and share functions (the functions the Lua scripts are tested against), keys on the shard of their identity's CRC16 hash slot; calls answer at once and their latency is drawn from the model, added to the request's statistics only (no queueing: a shard's load does not slow it down).\n- Arrivals are spread evenly at the scenario's rate; a caller does not retry or honour Retry-After. Rules not global are per region (their state lives in each region's cluster)."
        );
    }
}

fn counts_row(c: &Counts) -> String {
    format!(
        "{} | {} | {} | {} | {} | {}",
        thousands(c.requests),
        thousands(c.allowed),
        thousands(c.denied),
        thousands(c.fallback_allowed),
        thousands(c.fallback_denied),
        thousands(c.unavailable)
    )
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Steady => "steady",
        Phase::Shift => "shift",
        Phase::Failure => "failure",
    }
}

/// Admitted cost over the limit.
pub(super) fn ratio(admitted: u64, policy: &Policy) -> f64 {
    admitted as f64 / policy.limit() as f64
}

/// A bucket's bound in a trailing period, as a multiple of its limit (the report's
/// `bound` column; the windows' are left out there, as they were before the plot drew
/// every rule against its [`most_in_a_period`]).
pub(super) fn bound(policy: &Policy) -> Option<f64> {
    policy
        .algorithm()
        .takes_burst()
        .then(|| most_in_a_period(policy) as f64 / policy.limit() as f64)
}

/// The most cost one store can admit to one key in any trailing period of the rule's
/// length, which is what a key that reaches one region is held to: a bucket's burst
/// plus a period's refill (`capacity + limit`); a fixed or sliding window's limit in
/// each of the two windows a trailing period overlaps (`2 x limit`); an exact sliding
/// log's limit. Above it is a real excess: a key that reached two regions' buckets,
/// or a gateway's fallback.
pub(super) fn most_in_a_period(policy: &Policy) -> u64 {
    match policy.algorithm() {
        Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket => {
            policy.capacity() + policy.limit()
        }
        Algorithm::FixedWindow | Algorithm::SlidingWindow => 2 * policy.limit(),
        Algorithm::SlidingLog => policy.limit(),
    }
}

fn limit(policy: &Policy) -> String {
    let period = policy.period();
    let every = match period.as_secs() {
        60 => "min".to_owned(),
        1 => "s".to_owned(),
        3600 => "h".to_owned(),
        _ => format!("{period:?}"),
    };
    format!("{}/{every}", thousands(policy.limit()))
}

fn percent(n: u64, of: u64) -> String {
    if of == 0 {
        return "0".into();
    }
    format!("{} ({:.1}%)", thousands(n), n as f64 * 100.0 / of as f64)
}

fn saved(with: u64, without: u64) -> String {
    if without == 0 {
        return "-".into();
    }
    // Rounded to a whole number first: a hair more calls with leases reads 0%, not -0%.
    let saved = ((1.0 - with as f64 / without as f64) * 100.0).round() as i64;
    format!("{saved}%")
}

/// `1234567` as `1,234,567`.
pub(super) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
