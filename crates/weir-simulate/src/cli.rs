//! The `weir simulate` command: its options, and the run that prints the table and
//! writes the plot.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::ArgGroup;

use super::error::SimulateError;
use super::pattern::{Params, Pattern};
use super::plot;
use super::progress::Progress;
use super::replay::{Traffic, simulate};
use super::report::{Seconds, period};
use super::rules::{self, LoadRules};
use super::trace::Trace;
use weir_core::parse_period;

/// Replay traffic against rate limit rules offline, on a virtual clock, with weir's
/// own algorithms, and report what each rule would do.
///
/// Rules come from a weir configuration (--config, all its rules or those named by
/// --rule) and/or inline specs (--rule-spec fixed_window:100/1m). Traffic is one of: a
/// CSV trace (--trace, lines of `timestamp_ms,key[,cost]`, a header line optional), an
/// access log in the common or combined log format (--access-log; the client address
/// is the key), or a named pattern (--pattern). Each rule keeps a state per key, as
/// `weir serve` does; the rule's route, identities, plans and lockouts are not
/// simulated: the traffic's key is the rule's key.
///
/// For each rule it prints: attempts, admitted, denied; retry waste, the denied
/// attempts a client sent before the Retry-After of its previous denial had passed (in
/// a trace, a key is one client); and the worst window, the most cost admitted to one
/// key in any trailing period of the rule's length, counted exactly, as a multiple of
/// the limit (an exact sliding_log never exceeds 1.00x; a fixed_window reaches 2.00x
/// at a boundary). --plot draws, per rule over the span of the traffic, that trailing
/// count against the limit, and admitted and denied requests over time (SVG).
///
/// Exit code 1, with the file and line, on input that cannot be read; 2 on a bad
/// command line.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("traffic").required(true).args(["trace", "access_log", "pattern"])))]
pub struct SimulateArgs {
    /// A weir configuration file: its rules, exactly as `weir serve` enforces them.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Only this rule of --config (repeat for several; default: every rule).
    #[arg(long = "rule", value_name = "NAME", requires = "config")]
    rules: Vec<String>,
    /// A rule written inline, ALGORITHM:LIMIT/PERIOD[:BURST], e.g.
    /// sliding_window:100/1m or token_bucket:100/1m:20 (repeat for several).
    #[arg(long = "rule-spec", value_name = "SPEC")]
    rule_specs: Vec<String>,
    /// A CSV trace: `timestamp_ms,key[,cost]` per line, milliseconds since the Unix
    /// epoch. Lines out of time order are replayed in order (and counted).
    #[arg(long, value_name = "FILE.csv")]
    trace: Option<PathBuf>,
    /// An access log (common or combined log format): the client address is the key,
    /// the [time] (whole seconds) the request's time; every request costs 1.
    #[arg(long, value_name = "FILE")]
    access_log: Option<PathBuf>,
    /// A named traffic pattern, starting at time 0.
    #[arg(long, value_enum, value_name = "NAME")]
    pattern: Option<Pattern>,
    /// Requests a second: sent (steady, bot), or wanted by the clients between them
    /// (retry-storm, jittered-backoff).
    /// [default: 10]
    #[arg(long, requires = "pattern")]
    rate: Option<f64>,
    /// Clients: keys for steady and boundary-burst, clients of one account for the
    /// retry patterns [default: 10 for retry-storm and jittered-backoff, else 1].
    #[arg(long, requires = "pattern")]
    clients: Option<u32>,
    /// How long the pattern lasts (steady, bot, retry patterns).
    /// [default: 10m]
    #[arg(long, value_parser = duration, requires = "pattern")]
    duration: Option<Duration>,
    /// boundary-burst: requests per key on each side of the boundary [default: the
    /// largest limit among the rules].
    #[arg(long, requires = "pattern")]
    requests: Option<u64>,
    /// boundary-burst: the window boundary, from time 0 [default: the longest period
    /// among the rules; a calendar rule's first boundary in its time zone].
    #[arg(long, value_parser = duration, requires = "pattern")]
    boundary: Option<Duration>,
    /// boundary-burst: how long before the boundary the first half is sent.
    /// [default: 100ms]
    #[arg(long, value_parser = duration, requires = "pattern")]
    gap: Option<Duration>,
    /// retry-storm: the wait between attempts; jittered-backoff: the bound of the
    /// first jitter, doubled at each further denial (at most 10s).
    /// [default: 100ms]
    #[arg(long, value_parser = duration, requires = "pattern")]
    retry_delay: Option<Duration>,
    /// The seed of jittered-backoff's jitter: a seed replays the same run.
    /// [default: 1]
    #[arg(long, requires = "pattern")]
    seed: Option<u64>,
    /// Draw a panel per rule into this SVG file: the most admitted to one key in a
    /// trailing period against the limit, and admitted and denied requests over time.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// A duration as configuration writes periods (`500ms`, `10s`, `1m`).
fn duration(text: &str) -> Result<Duration, String> {
    parse_period(text).map_err(|e| e.to_string())
}

/// Refuses a pattern parameter the pattern does not read, rather than ignore it.
fn check_parameters(args: &SimulateArgs, pattern: Pattern) -> Result<(), SimulateError> {
    use Pattern::*;
    let given = [
        (
            "--rate",
            args.rate.is_some(),
            &[Steady, Bot, RetryStorm, JitteredBackoff][..],
        ),
        (
            "--clients",
            args.clients.is_some(),
            &[Steady, BoundaryBurst, RetryStorm, JitteredBackoff],
        ),
        (
            "--duration",
            args.duration.is_some(),
            &[Steady, Bot, RetryStorm, JitteredBackoff],
        ),
        ("--requests", args.requests.is_some(), &[BoundaryBurst]),
        ("--boundary", args.boundary.is_some(), &[BoundaryBurst]),
        ("--gap", args.gap.is_some(), &[BoundaryBurst]),
        (
            "--retry-delay",
            args.retry_delay.is_some(),
            &[RetryStorm, JitteredBackoff],
        ),
        ("--seed", args.seed.is_some(), &[JitteredBackoff]),
    ];
    for (flag, given, patterns) in given {
        if given && !patterns.contains(&pattern) {
            let name = |p: &Pattern| {
                clap::ValueEnum::to_possible_value(p)
                    .map_or_else(String::new, |v| v.get_name().to_owned())
            };
            let names: Vec<String> = patterns.iter().map(name).collect();
            return Err(SimulateError::Usage(format!(
                "{flag} does not apply to the pattern {} (only to {})",
                name(&pattern),
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// Runs `weir simulate`: prints the table on standard output and writes the plot.
/// `load` reads the rules of the `--config` file.
pub fn run(args: &SimulateArgs, load: &LoadRules<'_>) -> Result<(), SimulateError> {
    let progress = Progress::on_terminal();
    let mut rules = match &args.config {
        Some(path) => rules::pick(load(path).map_err(SimulateError::Rules)?, &args.rules, path)?,
        None => Vec::new(),
    };
    for spec in &args.rule_specs {
        rules.push(rules::from_spec(spec)?);
    }
    if rules.is_empty() {
        return Err(SimulateError::Usage(
            "no rules: give --config FILE (and --rule NAME) or --rule-spec ALGORITHM:LIMIT/PERIOD"
                .to_owned(),
        ));
    }
    if let Some(path) = &args.plot {
        plot::check_path(path)?;
    }
    let (traffic, source) = if let Some(path) = &args.trace {
        (
            Trace::from_csv(path, &progress)?.into(),
            path.display().to_string(),
        )
    } else if let Some(path) = &args.access_log {
        (
            Trace::from_access_log(path, &progress)?.into(),
            path.display().to_string(),
        )
    } else if let Some(pattern) = args.pattern {
        check_parameters(args, pattern)?;
        let retrying = matches!(pattern, Pattern::RetryStorm | Pattern::JitteredBackoff);
        let defaults = Params::default();
        let params = Params {
            rate: args.rate.unwrap_or(defaults.rate),
            clients: args.clients.unwrap_or(if retrying { 10 } else { 1 }),
            duration: args.duration.unwrap_or(defaults.duration),
            requests: args.requests,
            boundary: args.boundary,
            gap: args.gap.unwrap_or(defaults.gap),
            retry_delay: args.retry_delay.unwrap_or(defaults.retry_delay),
            seed: args.seed.unwrap_or(defaults.seed),
        };
        let name = clap::ValueEnum::to_possible_value(&pattern)
            .map_or_else(String::new, |v| v.get_name().to_owned());
        (pattern.traffic(&params, &rules)?, format!("pattern {name}"))
    } else {
        return Err(SimulateError::Usage(
            "no traffic: give --trace, --access-log or --pattern".to_owned(),
        ));
    };
    let outcome = simulate(&rules, &traffic, &progress);
    let mut out = std::io::stdout().lock();
    let summary = match &traffic {
        Traffic::Trace(trace) => {
            if let Some(disorder) = trace.out_of_order() {
                eprintln!(
                    "weir: note: {} of the requests came earlier than a line before them (the first on line {}); replayed in time order",
                    disorder.count, disorder.first_line
                );
            }
            let (start, end) = trace.span();
            format!(
                "{source}: {} requests, {} {}, the last at {}",
                trace.len(),
                trace.key_count(),
                if trace.key_count() == 1 {
                    "key"
                } else {
                    "keys"
                },
                Seconds(end - start)
            )
        }
        Traffic::Clients(clients) => format!(
            "{source}: {} clients of one account wanting {} requests over {}",
            clients.clients,
            outcome.demand.unwrap_or(0),
            period(Duration::from_nanos(clients.duration))
        ),
    };
    // A closed standard output (`| head`) is not an error worth a panic.
    let _ = writeln!(out, "{summary}\n\n{}", outcome.table());
    if let Some(path) = &args.plot {
        plot::write_svg(&outcome, path)?;
        let _ = writeln!(out, "plot: {}", path.display());
    }
    Ok(())
}
