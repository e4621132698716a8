//! `weir`: the rate limiter's command line.
//!
//! Exit codes: 0 on success; 1 when the configuration is invalid or the service cannot
//! start (the error names the file, line and field); 2 for a bad command line.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio::net::TcpListener;
use weir::config::Config;

/// weir: a rate limiter for real APIs.
///
/// Rules are read from a YAML file (see examples/ and the README). With no `store:`
/// section, state lives in this process (the memory store).
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the decision API (POST /v1/check) and /healthz.
    ///
    /// Prints `weir listening on http://ADDR` once the socket is bound (with port 0, the
    /// port the system chose). Stops on SIGTERM or Ctrl-C after finishing the requests
    /// in flight.
    Serve {
        /// The configuration file.
        #[arg(long, short)]
        config: PathBuf,
        /// The address to listen on.
        #[arg(long, short, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
    },
    /// Check a configuration file: exit 0 if it is valid, else print the error (file,
    /// line and field) and exit 1.
    CheckConfig {
        /// The configuration file.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::CheckConfig { file } => Config::load(&file)
            .map(|config| println!("{}: ok ({} rules)", file.display(), config.rules.len()))
            .map_err(anyhow::Error::from),
        Command::Serve { config, listen } => serve(&config, listen),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("weir: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(config: &std::path::Path, listen: SocketAddr) -> anyhow::Result<()> {
    let config = Config::load(config)?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(async {
        let engine = weir::server::engine(&config)
            .await
            .context("cannot open the store")?;
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let local = listener.local_addr()?;
        println!("weir listening on http://{local}");
        tracing::info!(%local, rules = config.rules.len(), "serving");
        weir::server::serve(listener, engine, shutdown_signal()).await?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
