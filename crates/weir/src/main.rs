//! `weir`: the rate limiter's command line.
//!
//! Exit codes: 0 on success; 1 when the configuration is invalid or the service cannot
//! start (the error names the file, line and field), or when `simulate` cannot read its
//! input (the error names the file and line); 2 for a bad command line.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio::net::TcpListener;
use weir::{Config, ConnectionLimits};

/// weir: a rate limiter for real APIs.
///
/// Rules are read from a YAML file: `weir example` lists the examples built in, `weir
/// example NAME --dir DIR` writes one to start from. With no `store:` section, state
/// lives in this process (the memory store). The user guide:
/// https://github.com/weir-rs/weir/tree/main/docs/guide/src
#[derive(Debug, Parser)]
#[command(version, about = "weir: a rate limiter for real APIs.", long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the decision API and /healthz, /readyz, /metrics; with an `upstream` in
    /// the configuration, serve the gateway instead and those on --admin-listen.
    ///
    /// One engine decides for every door. The decision API answers POST /v1/check (one
    /// rule and key), POST /v1/decide (a request's facts: the gateway's verdict, with
    /// the headers to send) and POST /v1/settle (the app's status for a decided request
    /// whose rules count by outcome). Rules with `count_statuses` reserve their cost
    /// before a request goes on and keep it or give it back by the answer's status.
    ///
    /// /metrics serves Prometheus metrics (OpenMetrics text). With an `admin` section
    /// (a bearer token from `token_env` or `token_file`), the admin listener also
    /// serves the admin API (/admin/api/...: rules and rates, a key's state, reset,
    /// the identities denied most) and the status page /admin/.
    ///
    /// The main listener speaks HTTP/1.1 and HTTP/2 (h2c with prior knowledge); with a
    /// `tls` section, TLS 1.2 and 1.3 with ALPN h2 and http/1.1, the certificate
    /// chosen by SNI, each handshake within --header-timeout-ms.
    ///
    /// Prints `weir listening on http://ADDR` (`https://` with TLS) once the socket is
    /// bound (with port 0, the port the system chose), and `weir admin listening on http://ADDR` when the admin
    /// listener is open (gateway mode, or an `admin` section). Reloads the configuration on SIGHUP or when the file changes (an invalid
    /// file is refused; the old one keeps serving). Stops on SIGTERM or Ctrl-C after
    /// finishing the requests in flight.
    Serve {
        /// The configuration file.
        #[arg(long, short)]
        config: PathBuf,
        /// The address to listen on.
        #[arg(long, short, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// The admin listener: in gateway mode the decision API, /healthz, /readyz and
        /// /metrics; with an `admin` section in the configuration, the admin API and
        /// status page (/admin/) too, in either mode.
        #[arg(long, default_value = "127.0.0.1:9090")]
        admin_listen: SocketAddr,
        /// Envoy's rate limit service (gRPC `ShouldRateLimit` and `grpc.health.v1`),
        /// served when the configuration has an `envoy` section.
        #[arg(long, default_value = "127.0.0.1:8081")]
        grpc_listen: SocketAddr,
        /// The forward-auth door (/v1/auth, any method): what nginx `auth_request`,
        /// ingress-nginx `auth-url`, Caddy `forward_auth`, Traefik `ForwardAuth` and
        /// Envoy `ext_authz` ask before forwarding a request. Served when the
        /// configuration has an `auth` section (default 127.0.0.1:8082); only the
        /// section's `trusted_proxies` may call it. Prints `weir auth listening on
        /// http://ADDR` once bound.
        #[arg(long)]
        auth_listen: Option<SocketAddr>,
        /// How log lines are written to standard error: `text` for people, `json` (one
        /// object a line) for log pipelines. The level comes from RUST_LOG (default
        /// info).
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
        /// The longest a client may take to send a request's headers, in milliseconds
        /// (on the main listener, its TLS handshake and HTTP/2 preface too); slower
        /// clients (and idle HTTP/1.1 keep-alive connections) are closed.
        #[arg(long, default_value_t = 10_000)]
        header_timeout_ms: u64,
        /// The longest a connection's writes may wait without any byte going out, in
        /// milliseconds: a client that stops reading its answers is closed after it (a
        /// slow reader is not). The gRPC listener's is 60 s.
        #[arg(long, default_value_t = 60_000)]
        send_timeout_ms: u64,
        /// How long an HTTP/2 connection to the main listener may have no request in
        /// flight before it is closed, in milliseconds (idle HTTP/1.1 connections are
        /// closed by --header-timeout-ms).
        #[arg(long, default_value_t = 120_000)]
        idle_timeout_ms: u64,
        /// The most connections each listener (the main one, the admin one, the gRPC
        /// one, the auth one) holds at once; past it, new connections wait in the kernel's listen
        /// queue until one closes. Default: a quarter of the file descriptors weir may
        /// open (its soft limit is raised to the hard one at start), less 256 kept for
        /// the store, the upstream and files; 10000 where that limit cannot be read.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        max_connections: Option<u64>,
    },
    /// A small app to try the gateway examples in front of, on their upstream's address.
    ///
    /// `POST /login` answers 200 when the JSON or form body's `password` is "correct
    /// horse battery staple" and 401 otherwise (examples/login.yaml counts the 401s);
    /// `POST /v1/chat/completions` answers with `usage.total_tokens` set to the body's
    /// `max_tokens` (default 800; examples/ai-tokens.yaml charges them); anything else
    /// is 200 with the method and path as JSON. Prints `weir demo-upstream listening on
    /// http://ADDR` once bound.
    DemoUpstream {
        /// The address to listen on: the examples' `upstream.url`.
        #[arg(long, short, default_value = "127.0.0.1:9000")]
        listen: SocketAddr,
    },
    /// List the example configurations, print one, or write one (and the files it
    /// names) to start from.
    ///
    /// `weir example` lists them; `weir example NAME` prints NAME's YAML; `weir example
    /// NAME --dir DIR` writes DIR/NAME.yaml and the files it names (never over an
    /// existing file). Then: `weir check-config DIR/NAME.yaml`, `weir serve --config
    /// DIR/NAME.yaml` (the gateway examples with `weir demo-upstream` running).
    Example {
        /// The example to print or write.
        name: Option<String>,
        /// Write it into this directory instead of printing it.
        #[arg(long, requires = "name")]
        dir: Option<PathBuf>,
    },
    /// Check a configuration file: exit 0 if it is valid, else print the error (file,
    /// line and field) and exit 1.
    CheckConfig {
        /// The configuration file.
        file: PathBuf,
        /// Also connect to the Redis store once, as `weir serve` does at start: its
        /// TLS certificate verified, the credentials and the ACL user's commands
        /// tried (a check previewed, nothing written); exit 1 with the reason if Redis
        /// cannot be reached or refuses weir.
        #[arg(long)]
        connect: bool,
    },
    // Its help is the doc of `OverrideArgs`.
    Override(weir::OverrideArgs),
    // Its help is the doc of `ListsArgs`.
    Lists(weir::ListsArgs),
    // Its help is the doc of `SimulateArgs`, followed by the fleet's.
    #[cfg(feature = "simulate")]
    Simulate(Box<Simulate>),
}

// `weir simulate`: the replay of traffic against rules (its flags, and its help, from
// `SimulateArgs`), or, as a subcommand, `weir simulate fleet`.
#[cfg(feature = "simulate")]
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_long_help = "Subcommand: `weir simulate fleet --scenario FILE [--seed N] [--plot OUT.svg] [--report OUT.md]` simulates a whole fleet of gateways (regions, Redis Clusters, leases, a traffic shift, a shard failure) running weir's real engine on a virtual clock; see `weir simulate fleet --help`."
)]
struct Simulate {
    #[command(subcommand)]
    fleet: Option<SimulateFleet>,
    #[command(flatten)]
    replay: weir_simulate::SimulateArgs,
}

#[cfg(feature = "simulate")]
#[derive(Debug, Subcommand)]
enum SimulateFleet {
    // Its help is the doc of `FleetArgs`.
    Fleet(weir::fleet::FleetArgs),
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// mimalloc: the allocator matters on a path that allocates for every request.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::CheckConfig { file, connect } => check_config(&file, connect),
        Command::DemoUpstream { listen } => demo_upstream(listen),
        Command::Override(args) => weir::run_override(&args).map_err(anyhow::Error::from),
        Command::Lists(args) => weir::run_lists(&args).map_err(anyhow::Error::from),
        Command::Example { name, dir } => example(name.as_deref(), dir.as_deref()),
        Command::Serve {
            config,
            listen,
            admin_listen,
            grpc_listen,
            auth_listen,
            header_timeout_ms,
            send_timeout_ms,
            idle_timeout_ms,
            max_connections,
            log_format,
        } => {
            let limits = ConnectionLimits {
                header_timeout: Duration::from_millis(header_timeout_ms.max(1)),
                send_timeout: Duration::from_millis(send_timeout_ms.max(1)),
                idle_timeout: Duration::from_millis(idle_timeout_ms.max(1)),
                ..ConnectionLimits::default()
            };
            let listeners = Listeners {
                listen,
                admin: admin_listen,
                grpc: grpc_listen,
                auth: auth_listen,
                max_connections,
            };
            serve(&config, listeners, limits, log_format)
        }
        #[cfg(feature = "simulate")]
        Command::Simulate(simulation) => match *simulation {
            Simulate {
                fleet: Some(SimulateFleet::Fleet(args)),
                ..
            } => weir::fleet::run(&args).map_err(anyhow::Error::from),
            Simulate { replay, .. } => simulate(&replay),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // A configuration's errors are several lines, one an error: each is weir's.
            for line in format!("{error:#}").lines() {
                eprintln!("weir: {line}");
            }
            ExitCode::FAILURE
        }
    }
}

/// `weir example`: the list, one example's YAML, or the example written into `dir`.
fn example(name: Option<&str>, dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    use weir::demo::EXAMPLES;
    let Some(name) = name else {
        for example in EXAMPLES {
            println!("{:<14} {}", example.name, example.about);
        }
        println!("\nweir example NAME prints one; weir example NAME --dir DIR writes it.");
        return Ok(());
    };
    let Some(example) = EXAMPLES.iter().find(|e| e.name == name) else {
        let names: Vec<&str> = EXAMPLES.iter().map(|e| e.name).collect();
        anyhow::bail!(
            "no example is named `{}`: the examples are {}",
            name.escape_debug(),
            names.join(", ")
        );
    };
    match dir {
        None => print!("{}", example.yaml),
        Some(dir) => {
            for path in weir::demo::write_example(example, dir)? {
                println!("wrote {}", path.display());
            }
        }
    }
    Ok(())
}

/// `weir demo-upstream`: the demo app on `listen`, until Ctrl-C or SIGTERM.
/// `weir check-config`: the file loaded (its warnings printed), and with `connect` the
/// store reached.
fn check_config(file: &std::path::Path, connect: bool) -> anyhow::Result<()> {
    let config = Config::load(file)?;
    for warning in &config.warnings {
        eprintln!("{}: warning: {warning}", file.display());
    }
    println!("{}: ok ({})", file.display(), config.summary());
    if connect {
        connect_to_store(&config.store)?;
    }
    Ok(())
}

/// `check-config --connect`: the store reached and weir admitted, once, as at start.
fn connect_to_store(store: &weir::StoreConfig) -> anyhow::Result<()> {
    let weir::StoreConfig::Redis(redis, _) = store else {
        println!("store: memory, nothing to connect to");
        return Ok(());
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let clock: Arc<dyn weir_core::Clock> = Arc::new(weir_store::SystemClock::new());
    runtime
        .block_on(weir_store::RedisStore::reached(redis, clock))
        .context("store: could not connect")?;
    println!("store: connected, and Redis lets weir check limits");
    Ok(())
}

fn demo_upstream(listen: SocketAddr) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = bind(listen).await?;
        announce(&format!(
            "weir demo-upstream listening on http://{}",
            listener.local_addr()?
        ));
        axum::serve(listener, weir::demo::router())
            .with_graceful_shutdown(shutdown_signal())
            .await?;
        Ok(())
    })
}

/// `weir simulate`, with `--config` read by weir's own loader: the policies simulated
/// are exactly those `weir serve` enforces.
#[cfg(feature = "simulate")]
fn simulate(args: &weir_simulate::SimulateArgs) -> anyhow::Result<()> {
    let load = |path: &std::path::Path| {
        let config = Config::load(path)?;
        let rules = config
            .engine
            .rules
            .into_iter()
            // A limit on requests in flight depends on how long each lasts, which a
            // trace does not say: not simulated.
            .filter(|rule| !rule.in_flight)
            .map(|rule| weir_simulate::Rule {
                name: rule.name,
                policy: rule.policy,
            });
        Ok(rules.collect())
    };
    Ok(weir_simulate::run(args, &load)?)
}

/// How the gRPC door runs.
enum Grpc {
    /// On the main runtime's pool.
    Pool(tokio::task::JoinHandle<std::io::Result<()>>),
    /// A thread per core, each with its own runtime and listening socket.
    Threads(Vec<std::thread::JoinHandle<std::io::Result<()>>>),
}

/// Where `weir serve` listens, and how many connections each listener holds at once
/// (`None`: from the file descriptor limit).
struct Listeners {
    listen: SocketAddr,
    admin: SocketAddr,
    grpc: SocketAddr,
    /// The forward-auth door's (`None`: its default, when there is an `auth` section).
    auth: Option<SocketAddr>,
    max_connections: Option<u64>,
}

/// Where the forward-auth door listens when the configuration has an `auth` section
/// and `--auth-listen` is not given.
const DEFAULT_AUTH_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8082);

/// File descriptors kept for what is not a client's connection: the store's and the
/// upstream's connections beyond one a client, configuration files, the runtime.
const RESERVED_FDS: u64 = 256;

/// Connections each listener holds at once where the file descriptor limit cannot be
/// read.
const FALLBACK_MAX_CONNECTIONS: u64 = 10_000;

/// How many connections each listener holds at once: `requested`, or a quarter of the
/// file descriptors left once [`RESERVED_FDS`] are kept (the main listener's clients,
/// as many upstream connections in gateway mode, the admin and gRPC listeners'). The
/// soft limit on file descriptors is raised to the hard one first, as servers do (a
/// soft limit of 1,024 is common, and would cap a gateway at 192).
fn max_connections(requested: Option<u64>) -> usize {
    // Where the soft limit cannot be raised, it is still the limit.
    let limit = rlimit::increase_nofile_limit(u64::MAX)
        .or_else(|_| rlimit::getrlimit(rlimit::Resource::NOFILE).map(|(soft, _)| soft))
        .ok()
        .filter(|_| rlimit::Resource::NOFILE.is_supported());
    let max = requested.unwrap_or_else(|| {
        limit.map_or(FALLBACK_MAX_CONNECTIONS, |limit| {
            (limit.saturating_sub(RESERVED_FDS) / 4).max(1)
        })
    });
    usize::try_from(max).unwrap_or(usize::MAX)
}

fn serve(
    config_path: &std::path::Path,
    Listeners {
        listen,
        admin: admin_listen,
        grpc: grpc_listen,
        auth: auth_listen,
        max_connections: requested_connections,
    }: Listeners,
    limits: ConnectionLimits,
    log_format: LogFormat,
) -> anyhow::Result<()> {
    let config = Config::load(config_path)?;
    let auth_listen = match (config.has_auth(), auth_listen) {
        (true, listen) => Some(listen.unwrap_or(DEFAULT_AUTH_LISTEN)),
        (false, None) => None,
        (false, Some(_)) => anyhow::bail!(
            "--auth-listen serves the forward-auth door, which needs an `auth` section in {}",
            config_path.display()
        ),
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr);
    match log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().init(),
    }
    for warning in &config.warnings {
        tracing::warn!("{}: {warning}", config_path.display());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let max_connections = max_connections(requested_connections);
    runtime.block_on(async {
        // Listened for before weir says that it listens: a SIGTERM sent once it has said
        // so stops it gracefully, never by the signal's default action (the process
        // killed with its requests in flight).
        let stop_signal = shutdown_signal();
        let service = weir::instance(&config)
            .await
            .context("cannot open the store")?;
        let (stop, stopped) = tokio::sync::watch::channel(());
        let stopped_rx = stopped.clone();
        let until_stopped = move || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.changed().await;
            }
        };
        let engine = service.engine.clone();
        let api = weir::decision_router(&service);
        let admin_router = weir::admin_router(&service);
        let envoy_door = weir::envoy_door(&service);
        let has_admin = service.has_admin();
        let gateway = service.gateway.clone();
        let tls = service.tls.clone();
        let auth_door = weir::auth_router(&service);
        let metrics = Arc::clone(&service.metrics);
        // Each listener's connection slots, reported in the metrics.
        let listener_metrics = Arc::clone(&service.metrics);
        let slots = move |name: &'static str| {
            let slots = weir::ConnectionSlots::new(name, max_connections);
            let open = slots.clone();
            listener_metrics.watch_listener(name, slots.max(), Box::new(move || open.open()));
            slots
        };
        // Decision rates (admin API) are taken between samples of the rules' totals.
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(5));
            loop {
                every.tick().await;
                metrics.sample();
            }
        });
        tokio::spawn(service.watch(config_path.to_path_buf()));
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        let listeners = weir::bind_shared(listen, threads)
            .with_context(|| format!("cannot listen on {listen}"))?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        announce(&format!(
            "weir listening on {scheme}://{}",
            listeners[0].local_addr()?
        ));
        // In gateway mode the decision API moves to the admin listener; the admin API
        // is only ever there.
        let admin = match (&gateway, has_admin) {
            (None, false) => None,
            _ => {
                let listener = bind(admin_listen).await?;
                announce(&format!(
                    "weir admin listening on http://{}",
                    listener.local_addr()?
                ));
                Some(tokio::spawn(weir::serve(
                    listener,
                    admin_router,
                    limits,
                    slots("admin"),
                    until_stopped(),
                )))
            }
        };
        // WEIR_GRPC_POOL (set) serves gRPC on the main runtime's pool instead of
        // a thread per core (kept to measure the two; see BENCHMARKS.md).
        let grpc = match envoy_door {
            Some(door) if std::env::var_os("WEIR_GRPC_POOL").is_some() => {
                let listener = bind(grpc_listen).await?;
                announce(&format!(
                    "weir grpc listening on {}",
                    listener.local_addr()?
                ));
                Some(Grpc::Pool(tokio::spawn(weir::serve_grpc(
                    listener,
                    door,
                    slots("grpc"),
                    until_stopped(),
                ))))
            }
            Some(door) => {
                let listeners = weir::bind_shared(grpc_listen, threads)
                    .with_context(|| format!("cannot listen on {grpc_listen}"))?;
                announce(&format!(
                    "weir grpc listening on {}",
                    listeners[0].local_addr()?
                ));
                Some(Grpc::Threads(weir::serve_grpc_on_threads(
                    listeners,
                    door,
                    slots("grpc"),
                    stopped_rx.clone(),
                )?))
            }
            None => None,
        };
        // The forward-auth door: a thread per core, as the main listener.
        let auth = match (auth_door, auth_listen) {
            (Some(door), Some(address)) => {
                let listeners = weir::bind_shared(address, threads)
                    .with_context(|| format!("cannot listen on {address}"))?;
                announce(&format!(
                    "weir auth listening on http://{}",
                    listeners[0].local_addr()?
                ));
                weir::serve_on_threads(listeners, door, limits, slots("auth"), stopped_rx.clone())?
            }
            _ => Vec::new(),
        };
        tracing::info!(
            rules = config.engine.rules.len(),
            auth = !auth.is_empty(),
            envoy = grpc.is_some(),
            gateway = config.has_gateway(),
            threads,
            max_connections,
            "serving"
        );
        let main = slots("main");
        let workers = match gateway {
            Some(gateway) => weir::serve_main_on_threads(
                listeners,
                gateway,
                limits,
                tls,
                main,
                stopped_rx.clone(),
            )?,
            None => {
                weir::serve_main_on_threads(listeners, api, limits, tls, main, stopped_rx.clone())?
            }
        };
        stop_signal.await;
        let _ = stop.send(());
        if let Some(admin) = admin {
            admin.await??;
        }
        match grpc {
            Some(Grpc::Pool(task)) => task.await??,
            Some(Grpc::Threads(threads)) => {
                tokio::task::spawn_blocking(move || {
                    for thread in threads {
                        thread
                            .join()
                            .map_err(|_| anyhow::anyhow!("a gRPC thread panicked"))??;
                    }
                    Ok::<_, anyhow::Error>(())
                })
                .await??;
            }
            None => {}
        }
        // The server threads finish their requests in flight, then end.
        tokio::task::spawn_blocking(move || {
            for worker in workers.into_iter().chain(auth) {
                worker
                    .join()
                    .map_err(|_| anyhow::anyhow!("a server thread panicked"))??;
            }
            Ok::<_, anyhow::Error>(())
        })
        .await??;
        // Units this instance holds in leases go back to the shared store (what is
        // not back within 5 s stays out until its lease expires).
        let _ =
            tokio::time::timeout(Duration::from_secs(5), engine.current().release_leases()).await;
        // Settlements owed to a shared store that was out are sent once more; what is
        // not written within 5 s is given up, logged with its count.
        engine.current().settle_owed(Duration::from_secs(5)).await;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Prints a line on standard output for whoever started weir; a closed output is not
/// an error (weir keeps serving).
fn announce(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

async fn bind(address: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address}"))
}

/// Completes on SIGTERM or Ctrl-C, listened for from this call on (not from the
/// future's first poll: until a signal is listened for, it kills the process).
fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (term, interrupt) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        async move {
            tokio::select! {
                () = received(term) => {}
                () = received(interrupt) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Completes when `signal` arrives; never, if it could not be listened for.
#[cfg(unix)]
async fn received(signal: std::io::Result<tokio::signal::unix::Signal>) {
    match signal {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
