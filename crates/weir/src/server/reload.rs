//! Reloading the configuration: on SIGHUP or when the file changes, a valid file
//! replaces the engine and gateway whole; requests in flight keep the ones they started
//! with, and the store (with its counts) is kept when its section is unchanged.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use weir_store::StoreError;

use super::Instance;
use crate::auth::AuthDoor;
use crate::config::{Config, ConfigError, fingerprint_of};
use crate::engine::{Engine, Owed};
use crate::gateway::Gateway;
use crate::stack;

/// How often the configuration file is looked at for changes.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Why a new configuration was refused (the old one keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Its store cannot be opened.
    #[error("cannot open the new store: {0}")]
    Store(#[from] StoreError),
    /// It would switch between gateway and decision-API mode, which changes listeners.
    #[error("adding or removing `upstream` needs a restart")]
    ModeChange,
    /// It would add or remove the admin API, whose listener is opened at start.
    #[error("adding or removing `admin` needs a restart")]
    AdminChange,
    /// It would add or remove Envoy's rate limit service, whose listener is opened at
    /// start.
    #[error("adding or removing `envoy` needs a restart")]
    EnvoyChange,
    /// It would add or remove the forward-auth door, whose listener is opened at start.
    #[error("adding or removing `auth` needs a restart")]
    AuthChange,
    /// It would add or remove TLS on the main listener, whose transport is chosen at
    /// start.
    #[error("adding or removing `tls` needs a restart")]
    TlsChange,
}

impl Instance {
    /// Replaces the configuration with the one at `path`, if it is valid: requests in
    /// flight finish on the old one, new requests get the new one. The store is kept
    /// (with its state) when its section is unchanged.
    pub async fn reload(&mut self, path: &Path) -> Result<(), ReloadError> {
        let result = self.replace(path).await;
        self.metrics.reloaded(result.is_ok());
        result
    }

    async fn replace(&mut self, path: &Path) -> Result<(), ReloadError> {
        let config = Config::load(path)?;
        if config.gateway.is_some() != self.gateway.is_some() {
            return Err(ReloadError::ModeChange);
        }
        if config.admin.is_some() != self.admin.is_some() {
            return Err(ReloadError::AdminChange);
        }
        if config.envoy.is_some() != self.envoy.is_some() {
            return Err(ReloadError::EnvoyChange);
        }
        if config.auth.is_some() != self.auth.is_some() {
            return Err(ReloadError::AuthChange);
        }
        if config.tls.is_some() != self.tls.is_some() {
            return Err(ReloadError::TlsChange);
        }
        if config.overrides_file != self.overrides_file || config.store != self.store_config {
            tracing::warn!(
                "where overrides are kept (the store, `overrides.file`) is chosen at start: they stay where they are until weir restarts"
            );
        }
        if config.store != self.store_config {
            let (store, watch) = stack::open(&config.store, self.clock.clone()).await?;
            self.store = store;
            self.metrics.watch_store(watch);
            self.store_config = config.store.clone();
        }
        let max_owed = config.engine.max_owed;
        match &self.owed {
            Some(owed) => owed.set_max(max_owed),
            None if config.engine.store.is_shared() => {
                self.owed = Some(Owed::new(max_owed, self.clock.clone(), &self.metrics));
            }
            None => {}
        }
        let stack = stack::build(
            &config.engine,
            Arc::clone(&self.store),
            &self.clock,
            &self.metrics,
            self.owed.as_ref(),
        );
        let engine = Arc::new(
            Engine::with_stack(
                &config.engine,
                stack,
                self.clock.clone(),
                Arc::clone(&self.metrics),
            )
            .with_overrides(Arc::clone(&self.overrides)),
        );
        self.metrics.serving_config(&config.sha256);
        self.config_sha256 = config.fingerprint();
        self.envoy_dir = config.envoy.as_ref().map(|envoy| envoy.dir.clone());
        self.watched_files = config.watched_files();
        let replaced = self.engine.current();
        self.engine.replace(Arc::clone(&engine));
        // The old engine's leases go back; the new one takes its own.
        tokio::spawn(async move { replaced.release_leases().await });
        if let (Some(shared), Some(admin)) = (&self.admin, config.admin) {
            // A new token takes effect at once; the old one stops working.
            shared.replace(Arc::new(admin));
        }
        if let (Some(shared), Some(envoy)) = (&self.envoy, config.envoy) {
            shared.replace(Arc::new(envoy.descriptors));
        }
        if let (Some(shared), Some(auth)) = (&self.auth, config.auth) {
            let door = AuthDoor::new(auth, &config.client_ip, Arc::clone(&engine));
            shared.replace(Arc::new(door));
        }
        if let (Some(shared), Some(tls)) = (&self.tls, &config.tls) {
            // New handshakes get the new certificates; connections open keep theirs.
            shared.replace(Arc::new(super::tls_settings(tls)));
        }
        if let (Some(shared), Some(gateway)) = (&self.gateway, config.gateway) {
            shared.replace(Arc::new(Gateway::new(gateway, engine)));
        }
        Ok(())
    }

    /// Reloads on SIGHUP and whenever the file changes, until the process ends. A
    /// refused configuration is logged; the old one keeps serving.
    ///
    /// A change is a change of the file's SHA-256 (what `weir_config_loaded` names),
    /// with an `envoy` section of its directory's files (names and contents), or with
    /// a `tls` section of its certificate and key files,
    /// looked at every second: a rewrite of the same size within the file system's
    /// time resolution is still seen, and a touch that changes nothing reloads nothing.
    /// It polls rather than asking the kernel (inotify): reading a small file once a
    /// second costs nothing, and polling sees every way a file is replaced (an
    /// editor's rename, a Kubernetes ConfigMap's symlink swap, a network file system)
    /// with no platform code or watcher crate.
    ///
    /// SIGHUP is listened for from this call on, not from the future's first poll
    /// (until it is listened for, a SIGHUP kills the process): call it inside the
    /// runtime, before saying that weir listens.
    pub fn watch(self, path: PathBuf) -> impl Future<Output = ()> + Send + 'static {
        let hangups = hangups();
        self.watch_with(path, hangups)
    }

    async fn watch_with(mut self, path: PathBuf, mut hangups: tokio::sync::mpsc::Receiver<()>) {
        // With an `envoy` section, its directory's files count too: a change there
        // reloads, and a refused file leaves the last good ones serving.
        let fingerprint =
            |path: &Path, dir: Option<&Path>, files: &[PathBuf]| fingerprint_of(path, dir, files);
        // What serves now, not what the file holds by now: a file changed before this
        // loop started is reloaded.
        let mut seen = Some(self.config_sha256.clone());
        let mut every = tokio::time::interval(WATCH_EVERY);
        loop {
            let cause = tokio::select! {
                Some(()) = hangups.recv() => "SIGHUP",
                _ = every.tick() => {
                    let now = fingerprint(&path, self.envoy_dir.as_deref(), &self.watched_files);
                    if now == seen { continue }
                    seen = now;
                    "the file changed"
                }
            };
            match self.reload(&path).await {
                Ok(()) => {
                    // A SIGHUP after an edit does not reload the edit a second time.
                    seen = Some(self.config_sha256.clone());
                    tracing::info!(cause, file = %path.display(), "configuration reloaded");
                }
                Err(error) => {
                    tracing::error!(cause, %error, "new configuration refused; the old one keeps serving")
                }
            }
        }
    }
}

/// SIGHUPs from this call on, as a stream (nothing where there are no signals).
fn hangups() -> tokio::sync::mpsc::Receiver<()> {
    let (send, receive) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut hangup) = signal(SignalKind::hangup()) {
            tokio::spawn(async move {
                while hangup.recv().await.is_some() {
                    if send.send(()).await.is_err() {
                        break;
                    }
                }
            });
        }
    }
    #[cfg(not(unix))]
    drop(send);
    receive
}
