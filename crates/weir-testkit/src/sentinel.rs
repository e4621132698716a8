//! A primary, its replica and three Redis Sentinels watching them (as `mymaster`),
//! quick to fail over: a primary is down after 500 ms without an answer. The primary
//! and the replica have the users of [`crate::acl`]; the sentinels reach them as the
//! administrator. Optionally with passwords: the sentinels' own, and another for the
//! data nodes' administrator.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use weir_store::{RedisAccess, Secret};

use crate::acl;
use crate::redis::{RedisServer, TlsSetup, program};
use crate::tls::{CertFiles, TestCerts};

/// The name the sentinels know the primary by.
pub const MASTER: &str = "mymaster";

/// One `redis-server --sentinel`, killed on drop.
struct Sentinel {
    child: Child,
    port: u16,
    /// Its TLS port, when it talks TLS.
    tls_port: Option<u16>,
    _dir: TempDir,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A primary, one replica and three sentinels on loopback ports.
pub struct RedisSentinels {
    /// The primary and the replica, in the order they started (the primary first).
    servers: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
    /// The sentinels' password, which the test's own `redis-cli` gives them.
    sentinel_password: Option<String>,
}

/// How [`RedisSentinels::start_with`] sets them up, beyond [`RedisSentinels::start`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SentinelSetup<'a> {
    /// The sentinels' own password (`requirepass` in `sentinel.conf`: their clients
    /// give it, and they give it to each other).
    pub sentinel_password: Option<&'a str>,
    /// The data nodes' password, another (`requirepass` and `masterauth` on the
    /// primary and the replica; the sentinels reach them with `sentinel auth-pass`).
    pub data_password: Option<&'a str>,
    /// More `redis-server` arguments for the primary and the replica.
    pub server_args: &'a [&'a str],
}

impl RedisSentinels {
    /// Starts them and waits until the replica has synced and every sentinel knows
    /// the replica and the two other sentinels (what a failover needs).
    pub fn start() -> Self {
        Self::start_with(&SentinelSetup::default())
    }

    /// [`RedisSentinels::start`] as `setup` says: with passwords (the sentinels' and
    /// the data nodes'), and more arguments for the servers.
    pub fn start_with(setup: &SentinelSetup<'_>) -> Self {
        let with = |extra: &[&str]| {
            let args: Vec<&str> = setup.server_args.iter().chain(extra).copied().collect();
            RedisServer::start_with_password(setup.data_password, &args)
        };
        let primary = with(&[]);
        let replica = with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
        let auth = Auth {
            sentinels: setup.sentinel_password,
            data: setup.data_password,
        };
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|_| sentinel(primary.port(), None, auth))
            .collect();
        Self::meet(
            vec![primary, replica],
            sentinels,
            setup.sentinel_password.map(str::to_owned),
        )
    }

    /// [`RedisSentinels::start`] over TLS, with `certs`' server certificate: clients,
    /// replication and the sentinels' links all TLS; [`RedisSentinels::urls`] are
    /// `rediss://`, and the sentinels name the primary's TLS port.
    pub fn start_tls(certs: &TestCerts) -> Self {
        Self::start_tls_as(certs, &certs.server)
    }

    /// [`RedisSentinels::start_tls`], every server and sentinel presenting `server`
    /// (one of `certs`, e.g. [`TestCerts::other_name`], for a name only).
    pub fn start_tls_as(certs: &TestCerts, server: &CertFiles) -> Self {
        let setup = TlsSetup {
            ca: &certs.ca,
            server,
            mutual: false,
        };
        let primary = RedisServer::start_tls(&setup, &[]);
        let replica = RedisServer::start_tls(
            &setup,
            &["--replicaof", "127.0.0.1", &primary.tls_port().to_string()],
        );
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|_| {
                sentinel(
                    primary.tls_port(),
                    Some((&certs.ca, server)),
                    Auth::default(),
                )
            })
            .collect();
        Self::meet(vec![primary, replica], sentinels, None)
    }

    /// Waits until the replica has synced and every sentinel knows the replica and the
    /// two other sentinels (what a failover needs).
    fn meet(
        servers: Vec<RedisServer>,
        sentinels: Vec<Sentinel>,
        sentinel_password: Option<String>,
    ) -> Self {
        let all = Self {
            servers,
            sentinels,
            sentinel_password,
        };
        all.wait(
            Duration::from_secs(20),
            "the replica and sentinels to meet",
            |s| {
                s.servers[1]
                    .cli(&["INFO", "replication"])
                    .contains("master_link_status:up")
                    && s.sentinels.iter().all(|sentinel| {
                        let ask =
                            |what: &str| s.sentinel_cli(sentinel.port, &["SENTINEL", what, MASTER]);
                        ask("replicas").contains("slave")
                            && ask("sentinels").matches("runid").count() >= 2
                    })
            },
        );
        all
    }

    /// How weir reaches the data nodes: as the minimal ACL user (see [`crate::acl`];
    /// the sentinels' own URLs carry no credentials, as the sentinels have none).
    pub fn access() -> RedisAccess {
        RedisAccess {
            username: Some(acl::USER.to_owned()),
            password: Some(Secret::new(acl::PASSWORD)),
            tls: None,
        }
    }

    /// The sentinels' URLs (no credentials: the sentinels have none; the data nodes'
    /// are [`RedisSentinels::access`]).
    pub fn urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| match s.tls_port {
                Some(port) => format!("rediss://127.0.0.1:{port}"),
                None => format!("redis://127.0.0.1:{}", s.port),
            })
            .collect()
    }

    /// The port of the primary as the first sentinel names it now (its TLS port, over
    /// TLS).
    pub fn primary_port(&self) -> u16 {
        let said = self.sentinel_cli(
            self.sentinels[0].port,
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER],
        );
        said.lines()
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no primary: {said}"))
    }

    /// Asks the first sentinel for a failover now (`SENTINEL FAILOVER`): the replica
    /// is promoted and the old primary, still running, becomes its replica.
    pub fn fail_over(&self) {
        let said = self.sentinel_cli(self.sentinels[0].port, &["SENTINEL", "FAILOVER", MASTER]);
        assert_eq!(said.trim(), "OK", "SENTINEL FAILOVER: {said}");
    }

    /// The server on `port` (the primary or the replica), to ask.
    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|s| s.has_port(port))
            .expect("a server of this set")
    }

    /// The server on `port` (the primary or the replica), to kill.
    pub fn server_on(&mut self, port: u16) -> &mut RedisServer {
        self.servers
            .iter_mut()
            .find(|s| s.has_port(port))
            .expect("a server of this set")
    }

    /// Polls `ready` every 20 ms until it holds, failing after `within`.
    pub fn wait(&self, within: Duration, what: &str, ready: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + within;
        while !ready(self) {
            assert!(Instant::now() < deadline, "waited {within:?} for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs a command on the `index`th sentinel (0 to 2) with `redis-cli` (giving
    /// the sentinels' password); its standard output.
    pub fn sentinel(&self, index: usize, args: &[&str]) -> String {
        self.sentinel_cli(self.sentinels[index].port, args)
    }

    fn sentinel_cli(&self, port: u16, args: &[&str]) -> String {
        sentinel_cli(port, self.sentinel_password.as_deref(), args)
    }
}

/// Runs `redis-cli` on the sentinel on `port`, giving `password`; its standard output.
fn sentinel_cli(port: u16, password: Option<&str>, args: &[&str]) -> String {
    let port = port.to_string();
    let mut all = vec!["-p", &port];
    if let Some(password) = password {
        all.extend(["-a", password, "--no-auth-warning"]);
    }
    all.extend(args);
    String::from_utf8_lossy(&crate::redis::redis_cli_unauthenticated(&all).stdout).into_owned()
}

/// The passwords a sentinel has (`requirepass`) and gives the data nodes.
#[derive(Debug, Clone, Copy, Default)]
struct Auth<'a> {
    sentinels: Option<&'a str>,
    data: Option<&'a str>,
}

/// A sentinel on a free port watching the primary on `primary`, over TLS when given
/// a CA and the certificate to present, with the passwords of `auth`.
fn sentinel(primary: u16, tls: Option<(&Path, &CertFiles)>, auth: Auth<'_>) -> Sentinel {
    for _ in 0..5 {
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = RedisServer::free_port();
        let tls_port = tls.map(|_| RedisServer::free_port());
        let conf = dir.path().join("sentinel.conf");
        let mut text = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {MASTER} 127.0.0.1 {primary} 2\nsentinel down-after-milliseconds {MASTER} 500\nsentinel failover-timeout {MASTER} 5000\nsentinel parallel-syncs {MASTER} 1\nsentinel auth-pass {MASTER} {}\n",
            dir.path().display(),
            acl::ADMIN_PASSWORD
        );
        if let Some(password) = auth.sentinels {
            text.push_str(&format!("requirepass {password}\n"));
        }
        if let Some(password) = auth.data {
            text.push_str(&format!("sentinel auth-pass {MASTER} {password}\n"));
        }
        if let (Some((ca, server)), Some(tls_port)) = (tls, tls_port) {
            text.push_str(&format!(
                "tls-port {tls_port}\ntls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-auth-clients no\ntls-replication yes\n",
                server.cert.display(),
                server.key.display(),
                ca.display()
            ));
        }
        std::fs::write(&conf, text).expect("write sentinel.conf");
        let mut child = Command::new(program("redis-server"))
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server --sentinel");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            if sentinel_cli(port, auth.sentinels, &["PING"]).trim() == "PONG" {
                return Sentinel {
                    child,
                    port,
                    tls_port,
                    _dir: dir,
                };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("redis-server --sentinel did not start on any of 5 free ports");
}
