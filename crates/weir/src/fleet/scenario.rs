//! The scenario file: the fleet (regions, gateways, Redis shards and their latency),
//! who calls (populations of identities, each a plan with a Zipf popularity), what
//! they call (routes), how much (requests a second over time), and what goes wrong
//! (a traffic shift, a shard failure). Read once and checked, so a run never meets a
//! scenario it cannot simulate.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use weir_core::parse_period;

use super::FleetError;

/// A validated scenario.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    /// Its name, for the report.
    pub name: String,
    /// The weir configuration every gateway runs (absolute, or as given).
    pub rules: PathBuf,
    /// How long the simulated span lasts.
    pub duration: Duration,
    /// Requests a second at instants from the start, linear between them (and flat
    /// after the last).
    pub traffic: Vec<(Duration, f64)>,
    /// Who calls.
    pub populations: Vec<Population>,
    /// What they call.
    pub routes: Vec<Route>,
    /// Where the gateways run.
    pub regions: Vec<Region>,
    /// Traffic moved from one region to another for a while.
    pub shift: Option<Shift>,
    /// A Redis shard that stops answering for a while.
    pub failure: Option<Failure>,
}

/// Callers of one plan.
#[derive(Debug, Clone)]
pub(crate) struct Population {
    /// The plan their requests carry (`X-Plan`).
    pub plan: String,
    /// How many identities (`X-User: PLAN-RANK`, rank 1 the busiest).
    pub identities: u64,
    /// Their share of all requests.
    pub share: f64,
    /// The exponent of their Zipf popularity (rank k asks in proportion to k^-zipf).
    pub zipf: f64,
}

/// A route requests are sent to.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    /// The method.
    pub method: axum::http::Method,
    /// The path.
    pub path: String,
    /// Its share of requests.
    pub share: f64,
}

/// A region: its gateways, its Redis Cluster and the latency of a call to it.
#[derive(Debug, Clone)]
pub(crate) struct Region {
    /// Its name.
    pub name: String,
    /// Gateways (each its own engine).
    pub gateways: usize,
    /// Shards of its Redis Cluster.
    pub shards: usize,
    /// Its share of the identities (each identity calls its home region).
    pub share: f64,
    /// A store call's latency.
    pub latency: Latency,
}

/// A store call's latency: `base` plus up to `spread` (uniform), plus, with
/// probability `tail`, an exponential delay of mean `tail_mean`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Latency {
    /// The least a call takes (ns).
    pub base: u64,
    /// Uniform extra (ns).
    pub spread: u64,
    /// The probability of a slow call.
    pub tail: f64,
    /// A slow call's mean extra (ns).
    pub tail_mean: u64,
}

/// A share of one region's traffic sent to another, from `start` to `end`.
#[derive(Debug, Clone)]
pub(crate) struct Shift {
    /// The region traffic leaves (index).
    pub from: usize,
    /// The region it goes to (index).
    pub to: usize,
    /// The share of `from`'s requests moved.
    pub share: f64,
    /// When it starts.
    pub start: Duration,
    /// When it ends.
    pub end: Duration,
}

/// A shard that stops answering (each call fails after the store's timeout).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    /// Its region (index).
    pub region: usize,
    /// The shard (index in its region).
    pub shard: usize,
    /// When it stops answering.
    pub start: Duration,
    /// When it is back.
    pub end: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    rules: PathBuf,
    duration: String,
    traffic: Vec<RawRate>,
    populations: Vec<RawPopulation>,
    routes: Vec<RawRoute>,
    regions: Vec<RawRegion>,
    shift: Option<RawShift>,
    failure: Option<RawFailure>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRate {
    at: String,
    rate: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPopulation {
    plan: String,
    identities: u64,
    share: f64,
    zipf: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    method: String,
    path: String,
    share: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegion {
    name: String,
    gateways: usize,
    shards: usize,
    share: f64,
    latency: RawLatency,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLatency {
    base_ms: f64,
    spread_ms: f64,
    tail: f64,
    tail_mean_ms: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShift {
    from: String,
    to: String,
    share: f64,
    start: String,
    end: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFailure {
    region: String,
    shard: usize,
    start: String,
    end: String,
}

/// The most identities a population may have (ranks are kept as `u32`).
const MAX_IDENTITIES: u64 = u32::MAX as u64;

/// The most gateways in a scenario.
const MAX_GATEWAYS: usize = 1000;

impl Scenario {
    /// Reads and checks the scenario at `path`; its `rules` is read relative to it.
    pub(crate) fn load(path: &Path) -> Result<Self, FleetError> {
        let text = std::fs::read_to_string(path).map_err(|error| FleetError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let mut scenario = Self::parse(&text).map_err(|message| FleetError::Scenario {
            path: path.to_path_buf(),
            message,
        })?;
        if scenario.rules.is_relative()
            && let Some(dir) = path.parent()
        {
            scenario.rules = dir.join(&scenario.rules);
        }
        Ok(scenario)
    }

    /// Checks scenario text; the error says what is wrong.
    fn parse(text: &str) -> Result<Self, String> {
        let raw: RawScenario = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let duration = period("duration", &raw.duration)?;
        let mut traffic = Vec::new();
        for rate in &raw.traffic {
            let at = period("traffic.at", &rate.at)?;
            if !(rate.rate.is_finite() && rate.rate >= 0.0) {
                return Err(format!("traffic: rate {} is not a rate", rate.rate));
            }
            if traffic.last().is_some_and(|&(last, _)| at <= last) {
                return Err("traffic: the instants must grow".into());
            }
            traffic.push((at, rate.rate));
        }
        if traffic.is_empty() {
            return Err("traffic: give at least one `{ at, rate }`".into());
        }
        let populations: Vec<Population> = raw
            .populations
            .into_iter()
            .map(|p| Population {
                plan: p.plan,
                identities: p.identities,
                share: p.share,
                zipf: p.zipf,
            })
            .collect();
        for p in &populations {
            if p.identities == 0 || p.identities > MAX_IDENTITIES {
                return Err(format!(
                    "populations: {} needs 1 to {MAX_IDENTITIES} identities",
                    p.plan
                ));
            }
            if !(p.zipf.is_finite() && p.zipf > 0.0 && p.zipf <= 10.0) {
                return Err(format!(
                    "populations: {}'s zipf must be above 0 (at most 10)",
                    p.plan
                ));
            }
            if axum::http::HeaderValue::from_str(&p.plan).is_err() {
                return Err(format!("populations: `{}` is not a plan name", p.plan));
            }
        }
        shares("populations", populations.iter().map(|p| p.share))?;
        let mut routes = Vec::new();
        for r in raw.routes {
            let method = axum::http::Method::from_bytes(r.method.as_bytes())
                .map_err(|_| format!("routes: `{}` is not a method", r.method))?;
            if !r.path.starts_with('/') {
                return Err(format!("routes: `{}` must start with `/`", r.path));
            }
            routes.push(Route {
                method,
                path: r.path,
                share: r.share,
            });
        }
        shares("routes", routes.iter().map(|r| r.share))?;
        let mut regions = Vec::new();
        for r in raw.regions {
            let l = r.latency;
            let ms = |v: f64, what: &str| -> Result<u64, String> {
                if v.is_finite() && (0.0..=60_000.0).contains(&v) {
                    Ok((v * 1e6).round() as u64)
                } else {
                    Err(format!("regions: {}'s {what} is out of range", r.name))
                }
            };
            if !(0.0..=1.0).contains(&l.tail) {
                return Err(format!("regions: {}'s tail is a probability", r.name));
            }
            if r.gateways == 0 || r.shards == 0 || r.shards > 16384 {
                return Err(format!(
                    "regions: {} needs at least a gateway and 1 to 16384 shards",
                    r.name
                ));
            }
            regions.push(Region {
                latency: Latency {
                    base: ms(l.base_ms, "base_ms")?,
                    spread: ms(l.spread_ms, "spread_ms")?,
                    tail: l.tail,
                    tail_mean: ms(l.tail_mean_ms, "tail_mean_ms")?,
                },
                name: r.name,
                gateways: r.gateways,
                shards: r.shards,
                share: r.share,
            });
        }
        shares("regions", regions.iter().map(|r| r.share))?;
        if regions.iter().map(|r| r.gateways).sum::<usize>() > MAX_GATEWAYS {
            return Err(format!("regions: at most {MAX_GATEWAYS} gateways"));
        }
        let region = |name: &str| {
            regions
                .iter()
                .position(|r| r.name == name)
                .ok_or_else(|| format!("no region is named `{name}`"))
        };
        let shift = match raw.shift {
            None => None,
            Some(s) => {
                let shift = Shift {
                    from: region(&s.from)?,
                    to: region(&s.to)?,
                    share: s.share,
                    start: period("shift.start", &s.start)?,
                    end: period("shift.end", &s.end)?,
                };
                if shift.from == shift.to || !(0.0..=1.0).contains(&shift.share) {
                    return Err("shift: two regions and a share from 0 to 1".into());
                }
                window("shift", shift.start, shift.end)?;
                Some(shift)
            }
        };
        let failure = match raw.failure {
            None => None,
            Some(f) => {
                let failure = Failure {
                    region: region(&f.region)?,
                    shard: f.shard,
                    start: period("failure.start", &f.start)?,
                    end: period("failure.end", &f.end)?,
                };
                if failure.shard >= regions[failure.region].shards {
                    return Err(format!(
                        "failure: {} has no shard {} (shards count from 0)",
                        f.region, f.shard
                    ));
                }
                window("failure", failure.start, failure.end)?;
                Some(failure)
            }
        };
        Ok(Self {
            name: raw.name,
            rules: raw.rules,
            duration,
            traffic,
            populations,
            routes,
            regions,
            shift,
            failure,
        })
    }

    /// Requests a second at `at` from the start.
    pub(super) fn rate(&self, at: Duration) -> f64 {
        let points = &self.traffic;
        match points.iter().position(|&(t, _)| t > at) {
            None => points[points.len() - 1].1,
            Some(0) => points[0].1,
            Some(i) => {
                let ((t0, r0), (t1, r1)) = (points[i - 1], points[i]);
                let f = (at - t0).as_secs_f64() / (t1 - t0).as_secs_f64();
                r0 + (r1 - r0) * f
            }
        }
    }

    /// Gateways in every region.
    pub(super) fn gateways(&self) -> usize {
        self.regions.iter().map(|r| r.gateways).sum()
    }

    /// Identities in every population.
    pub(super) fn identities(&self) -> u64 {
        self.populations.iter().map(|p| p.identities).sum()
    }
}

fn period(field: &str, text: &str) -> Result<Duration, String> {
    parse_period(text).map_err(|e| format!("{field}: {e}"))
}

fn window(what: &str, start: Duration, end: Duration) -> Result<(), String> {
    if start < end {
        Ok(())
    } else {
        Err(format!("{what}: `start` must come before `end`"))
    }
}

/// Shares must be positive and add up to 1 (within rounding).
fn shares(what: &str, shares: impl Iterator<Item = f64>) -> Result<(), String> {
    let mut total = 0.0;
    let mut any = false;
    for share in shares {
        if !(share.is_finite() && share > 0.0) {
            return Err(format!("{what}: every share must be above 0"));
        }
        total += share;
        any = true;
    }
    if !any || (total - 1.0).abs() > 1e-6 {
        return Err(format!(
            "{what}: the shares must add up to 1 (they add up to {total})"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = include_str!("../../../../examples/fleet/small.yaml");

    #[test]
    fn the_small_example_reads() {
        let scenario = Scenario::parse(SMALL).unwrap();
        assert_eq!(scenario.gateways(), 5);
        assert_eq!(scenario.identities(), 2205);
        assert_eq!(scenario.rate(Duration::from_secs(7)), 400.0);
    }

    #[test]
    fn the_rate_is_linear_between_points_and_flat_after() {
        let text = SMALL.replace(
            "  - { at: 0s, rate: 400 }",
            "  - { at: 0s, rate: 100 }\n  - { at: 10s, rate: 300 }",
        );
        let scenario = Scenario::parse(&text).unwrap();
        assert_eq!(scenario.rate(Duration::from_secs(5)), 200.0);
        assert_eq!(scenario.rate(Duration::from_secs(30)), 300.0);
    }

    #[test]
    fn mistakes_are_named() {
        for (from, to, says) in [
            ("share: 0.35, zipf", "share: 0.45, zipf", "add up to 1"),
            (
                "region: us-east, shard: 1",
                "region: us-west, shard: 1",
                "us-west",
            ),
            (
                "region: us-east, shard: 1",
                "region: us-east, shard: 2",
                "no shard 2",
            ),
            (
                "start: 25s, end: 32s",
                "start: 32s, end: 25s",
                "before `end`",
            ),
            ("duration: 40s", "duration: 40 s", "duration"),
            ("method: GET", "method: \"G T\"", "not a method"),
            ("zipf: 1.0 }", "zipf: 0 }", "zipf"),
        ] {
            assert!(SMALL.contains(from), "{from}");
            let error = Scenario::parse(&SMALL.replacen(from, to, 1)).unwrap_err();
            assert!(error.contains(says), "{to}: {error}");
        }
    }
}
