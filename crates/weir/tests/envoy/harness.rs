//! A weir serving Envoy's rate limit service in process, on a loopback port, and a
//! gRPC client for it: the envoy tests' harness.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::Channel;
use weir::{Config, Instance};
use weir_core::{Clock, ManualClock};
use weir_store::{BackingStore, MemoryStore, MemoryStoreConfig};

/// Where the tests' clock starts: 10 s into an hour (windows are aligned to the
/// epoch), so a minute's window has 50 s left and an hour's 3,590 s.
pub(crate) const T0: u64 = (1_699_999_200 + 10) * 1_000_000_000;

/// The envoyproxy/ratelimit fixture `name`, as copied into this repository.
pub(crate) fn upstream(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/envoy/upstream")
        .join(name)
}

/// A directory holding `weir.yaml` (an `envoy:` section over `rl/`, with `options`
/// under it, and `more` after it) and the ratelimit files given.
pub(crate) fn config_dir(files: &[(&str, String)], options: &str, more: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rl")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join("rl").join(name), text).unwrap();
    }
    std::fs::write(
        dir.path().join("weir.yaml"),
        format!("envoy:\n  config_dir: rl\n{options}{more}"),
    )
    .unwrap();
    dir
}

/// The text of an upstream fixture, to hand to [`config_dir`].
pub(crate) fn fixture(name: &str) -> (&str, String) {
    (name, std::fs::read_to_string(upstream(name)).unwrap())
}

/// A `weir serve` child process, killed (by its PID, through `Child`) on drop.
pub(crate) struct WeirProcess {
    pub child: std::process::Child,
    /// Where its gRPC door listens.
    pub grpc: std::net::SocketAddr,
    /// Where its HTTP listener (`--listen`) listens.
    pub http: std::net::SocketAddr,
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl WeirProcess {
    /// `weir serve --config config` on free loopback ports, once it listens.
    pub(crate) fn start(config: &Path) -> Self {
        Self::start_logging(config, None)
    }

    /// [`WeirProcess::start`], its log (standard error) written to `log` if given.
    pub(crate) fn start_logging(config: &Path, log: Option<&Path>) -> Self {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--grpc-listen",
                "127.0.0.1:0",
            ])
            .arg("--config")
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(match log {
                Some(log) => Stdio::from(std::fs::File::create(log).unwrap()),
                None => Stdio::null(),
            })
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (mut grpc, mut http) = (None, None);
        for _ in 0..3 {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            if let Some(addr) = line.trim().strip_prefix("weir listening on http://") {
                http = Some(addr.parse().unwrap());
            }
            if let Some(addr) = line.trim().strip_prefix("weir grpc listening on ") {
                grpc = Some(addr.parse().unwrap());
                break;
            }
        }
        Self {
            child,
            grpc: grpc.expect("weir announced its gRPC listener"),
            http: http.expect("weir announced its HTTP listener"),
            _stdout: stdout,
        }
    }

    /// A client of its gRPC door.
    pub(crate) async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc))
            .await
            .unwrap()
    }
}

impl Drop for WeirProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running door and a client for it.
pub(crate) struct Harness {
    /// The door's address.
    pub addr: std::net::SocketAddr,
    pub client: RateLimitServiceClient<Channel>,
    pub channel: Channel,
    pub clock: Arc<ManualClock>,
    pub dir: tempfile::TempDir,
    pub service: Instance,
}

impl Harness {
    /// The door of the configuration in `dir`, on a memory store and a manual clock.
    pub(crate) async fn memory(dir: tempfile::TempDir) -> Self {
        let clock = Arc::new(ManualClock::new(T0));
        let store: Arc<dyn BackingStore> = Arc::new(MemoryStore::new(
            MemoryStoreConfig::default(),
            clock.clone(),
        ));
        let config = Config::load(&dir.path().join("weir.yaml")).unwrap();
        let service = Instance::with_store(&config, store, clock.clone() as Arc<dyn Clock>);
        Self::serve(service, clock, dir).await
    }

    /// The door of `service` on a loopback port.
    pub(crate) async fn serve(
        service: Instance,
        clock: Arc<ManualClock>,
        dir: tempfile::TempDir,
    ) -> Self {
        let door = weir::envoy_door(&service).expect("an envoy section");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(weir::serve_grpc(
            listener,
            door,
            weir::ConnectionSlots::new("grpc", 1_024),
            std::future::pending(),
        ));
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Self {
            addr,
            client: RateLimitServiceClient::new(channel.clone()),
            channel,
            clock,
            dir,
            service,
        }
    }

    /// `ShouldRateLimit` in `domain` for descriptors of `(key, value)` entries.
    pub(crate) async fn ask(
        &self,
        domain: &str,
        descriptors: &[&[(&str, &str)]],
    ) -> RateLimitResponse {
        self.send(request(domain, descriptors)).await.unwrap()
    }

    /// Sends a request as it is.
    pub(crate) async fn send(
        &self,
        request: RateLimitRequest,
    ) -> Result<RateLimitResponse, tonic::Status> {
        let mut client = self.client.clone();
        client
            .should_rate_limit(request)
            .await
            .map(tonic::Response::into_inner)
    }
}

/// A request in `domain` for descriptors of `(key, value)` entries, one hit each.
pub(crate) fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: descriptors
            .iter()
            .map(|entries| RateLimitDescriptor {
                entries: entries
                    .iter()
                    .map(|(key, value)| Entry {
                        key: (*key).to_owned(),
                        value: (*value).to_owned(),
                    })
                    .collect(),
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend: 0,
    }
}
