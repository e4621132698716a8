//! `weir simulate fleet`: a whole deployment on a virtual clock, deciding with weir's
//! real engine, leases and failure policy against simulated Redis Clusters, so that
//! what the seed article's fleet would do (admitted against limit per plan, Redis
//! calls per shard with and without leases, the latency the store adds, what a shard
//! failure and a traffic shift do) can be read before it is built. Global rules run on
//! each gateway's real `RegionalStore`, its peers the other regions' clusters.
//!
//! It lives in the `weir` crate, not in `weir-simulate` (which depends on `weir-core`
//! alone), because it runs the engine itself. One idea per module: the scenario file
//! (`scenario`), who calls and when (`zipf`, `traffic`), the simulated Redis Cluster
//! (`cluster`) and what the stores tell the run (`recorder`), a run over the whole
//! fleet (`run`), what a run counts (`stats`), and
//! what comes out (`report`, `plot`). Each scenario runs twice from one seed, with the
//! rules' leases and without, on the same requests.

mod cluster;
mod plot;
mod recorder;
mod report;
mod run;
mod scenario;
mod stats;
mod traffic;
mod zipf;

#[cfg(test)]
mod tests;

use std::io::IsTerminal;
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

use self::report::FleetReport;
use self::scenario::Scenario;
use crate::config::{Config, ConfigError, StoreConfig};

/// Simulate a fleet of gateways: the scenario's regions, gateways and Redis Clusters
/// on a virtual clock, every gateway running weir's real engine (its rules, token
/// leases, regional shares of global rules, failure policy and local fallback, behind
/// the circuit breaker `weir serve` uses) against simulated Redis shards;
/// deterministic from --seed.
///
/// The scenario file (see examples/fleet/seed.yaml) names a weir configuration (the
/// rules every gateway runs, on a `redis_cluster` store: its `timeout` is how long a
/// call to a failed shard takes; the nodes are not contacted; with a `region` section
/// naming the scenario's regions, rules with `scope: global` share one limit across
/// them, rebalanced at its interval), the regions (gateways,
/// shards, the latency of a store call), populations of identities (a plan each, a
/// Zipf popularity; callers send `X-User` and `X-Plan`), routes with their shares, the
/// requests a second over time, a traffic shift between regions and a shard failure.
///
/// The scenario runs twice on the same requests: with the rules' leases and without.
/// The report (Markdown, on standard output, and in --report) gives per plan the
/// requests admitted, denied, admitted on a gateway's local fallback and failed
/// closed; the most admitted to one key in a trailing period against its limit, in
/// steady state, during the shift and during the failure, and where; Redis calls per
/// second per shard with and without leases; the latency store calls added (p50, p99);
/// and what the shard failure did. --plot draws, per plan over time, the worst key
/// against its rule's bound (burst plus a period's refill: 1.0 is at the bound, above
/// it a real excess) and calls per shard (SVG). A progress bar shows on a terminal.
///
/// Exit code 1 on a scenario or configuration that cannot be read (naming the file).
#[derive(Debug, clap::Args)]
pub struct FleetArgs {
    /// The scenario file (YAML).
    #[arg(long, value_name = "FILE")]
    scenario: PathBuf,
    /// The seed every random draw comes from: a seed replays the same report.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write the SVG plot here.
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,
    /// Also write the report (Markdown) here.
    #[arg(long, value_name = "OUT.md")]
    report: Option<PathBuf>,
}

/// Why a fleet simulation could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// The scenario file is invalid.
    #[error("{}: {message}", path.display())]
    Scenario {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The rules file is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A file could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// The plot could not be drawn.
    #[error("{}: cannot draw the plot: {message}", path.display())]
    Plot {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The simulation itself failed.
    #[error("the simulation failed: {0}")]
    Runtime(String),
}

/// Runs `weir simulate fleet`: prints the report, writes it and the plot if asked.
pub fn run(args: &FleetArgs) -> Result<(), FleetError> {
    if let Some(path) = &args.plot
        && !path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
    {
        return Err(FleetError::Plot {
            path: path.clone(),
            message: "the plot is written as SVG: name it *.svg".into(),
        });
    }
    let scenario = Scenario::load(&args.scenario)?;
    let started = std::time::Instant::now();
    let report = simulate(&scenario, args.seed, &Progress::on_terminal(&scenario))?;
    let mut text = report.markdown();
    if let Some(path) = &args.plot {
        plot::write_svg(&report, path)?;
        text.push_str(&format!("\nPlot: {}\n", path.display()));
    }
    if let Some(path) = &args.report {
        std::fs::write(path, &text).map_err(|error| FleetError::Io {
            path: path.clone(),
            error,
        })?;
    }
    println!("{text}");
    // The one wall-clock reading: how long the run took here, never in the report.
    eprintln!(
        "weir: simulated {} s of {} gateways twice in {:.1} s",
        scenario.duration.as_secs(),
        scenario.gateways(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs `scenario` from `seed` with its rules' leases and without.
pub(crate) fn simulate(
    scenario: &Scenario,
    seed: u64,
    progress: &Progress,
) -> Result<FleetReport, FleetError> {
    let config = Config::load(&scenario.rules)?;
    let StoreConfig::Redis(redis, _) = &config.store else {
        return Err(FleetError::Scenario {
            path: scenario.rules.clone(),
            message: "the rules must be on a `redis_cluster` store (its timeout and fallback_instances are simulated; its nodes are not contacted)".into(),
        });
    };
    if scenario.regions.len() > stats::MAX_REGIONS {
        return Err(FleetError::Runtime(format!(
            "at most {} regions",
            stats::MAX_REGIONS
        )));
    }
    let shares = shares(scenario, &config)?;
    // The run gives the store stacks their regions, on its clusters: the spec names none.
    let mut with = config.engine.clone();
    with.region = None;
    let mut without = with.clone();
    for rule in &mut without.rules {
        rule.lease = None;
    }
    let mut runs = Vec::new();
    for spec in [&with, &without] {
        let setup = run::Setup {
            scenario,
            spec,
            shares: shares.as_ref(),
            timeout: redis.timeout,
            seed,
        };
        runs.push(run::run(&setup, progress)?);
    }
    progress.finish();
    let without_leases = runs.pop();
    let with_leases = runs.pop();
    match (with_leases, without_leases) {
        (Some(with_leases), Some(without_leases)) => Ok(FleetReport::new(
            scenario,
            seed,
            &config,
            with_leases,
            without_leases,
        )),
        _ => Err(FleetError::Runtime("a run is missing".into())),
    }
}

/// The global rules of `config` and its `region` section, whose regions must be the
/// scenario's.
fn shares(scenario: &Scenario, config: &Config) -> Result<Option<run::Shares>, FleetError> {
    let Some(region) = &config.engine.region else {
        return Ok(None);
    };
    let mut configured: Vec<&str> = std::iter::once(region.name.as_str())
        .chain(region.peers.iter().map(|(name, _)| name.as_str()))
        .collect();
    let mut simulated: Vec<&str> = scenario.regions.iter().map(|r| r.name.as_str()).collect();
    configured.sort_unstable();
    simulated.sort_unstable();
    if configured != simulated {
        return Err(FleetError::Scenario {
            path: scenario.rules.clone(),
            message: format!(
                "the `region` section names the regions {configured:?}; the scenario simulates {simulated:?}"
            ),
        });
    }
    Ok(Some(run::Shares {
        rules: config
            .engine
            .rules
            .iter()
            .filter(|r| r.global)
            .map(|r| r.name.clone())
            .collect(),
        rebalance: region.rebalance,
        floor: region.floor,
    }))
}

/// A progress bar on standard error over both runs' virtual time, shown only on a
/// terminal.
#[derive(Debug)]
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar for `scenario`'s two runs when standard error is a terminal.
    fn on_terminal(scenario: &Scenario) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self::hidden();
        }
        let bar = ProgressBar::new(2 * scenario.duration.as_millis() as u64);
        let template = "  fleet [{bar:40}] {percent:>3}% {elapsed} (eta {eta})";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Self(Some(bar))
    }

    /// No bar.
    pub(crate) fn hidden() -> Self {
        Self(None)
    }

    fn advance(&self, ms: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(ms);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
