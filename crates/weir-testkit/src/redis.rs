//! `redis-server` processes for tests.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::acl;
use crate::tls::{CertFiles, TestCerts};

const INSTALL: &str = "redis-server and redis-cli are needed: install them with `apt-get install redis-server redis-tools`, or run the tests with `scripts/test` (it installs them), or set WEIR_REDIS_BIN_DIR to the absolute path of a directory holding both";

/// The variable naming a directory (an absolute path) that holds `redis-server` and
/// `redis-cli`; unset, both are looked up on `PATH`.
const BIN_DIR: &str = "WEIR_REDIS_BIN_DIR";

/// The program to run for `name` (`redis-server` or `redis-cli`): `$WEIR_REDIS_BIN_DIR/name`
/// when the variable is set, else `name` on `PATH`. Panics when the variable is set but is
/// not the absolute path of a directory holding both programs.
pub(crate) fn program(name: &str) -> PathBuf {
    resolve(std::env::var_os(BIN_DIR).as_deref(), name).unwrap_or_else(|e| panic!("{e}"))
}

fn resolve(bin_dir: Option<&OsStr>, name: &str) -> Result<PathBuf, String> {
    let Some(dir) = bin_dir else {
        return Ok(PathBuf::from(name));
    };
    let dir = Path::new(dir);
    if !dir.is_absolute() {
        // Each test binary runs in its own crate's directory.
        return Err(format!(
            "{BIN_DIR} is set to `{}`, which is not an absolute path; set it to the absolute \
             path of the directory holding redis-server and redis-cli, or unset it to find \
             them on PATH",
            dir.display()
        ));
    }
    if !dir.is_dir() {
        return Err(format!(
            "{BIN_DIR} is set to `{}`, which is not a directory; set it to the directory \
             holding redis-server and redis-cli, or unset it to find them on PATH",
            dir.display()
        ));
    }
    // Both, whichever is asked for: a directory with only one of them is wrong too.
    for needed in ["redis-server", "redis-cli"] {
        if !dir.join(needed).is_file() {
            return Err(format!(
                "{BIN_DIR} is set to `{}`, but `{}` does not exist; set it to the directory \
                 holding redis-server and redis-cli, or unset it to find them on PATH",
                dir.display(),
                dir.join(needed).display()
            ));
        }
    }
    Ok(dir.join(name))
}

/// A loopback port held for a server to come: bound but not listening, so a
/// connection to it is refused (as to a server that is down) and no other socket can
/// take it, until [`RedisServer::start_on`] lets it go to the server it starts.
pub struct ReservedPort {
    socket: socket2::Socket,
    port: u16,
}

impl ReservedPort {
    /// The port held.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL, as weir's ACL user, of the server to come.
    pub fn url(&self) -> String {
        acl::url_on(self.port)
    }

    fn new() -> Self {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
        // No SO_REUSEADDR: nothing else binds the port while it is held.
        let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("an address");
        socket.bind(&any.into()).expect("no free loopback port");
        let port = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.port())
            .expect("a bound port");
        Self { socket, port }
    }
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// Runs `redis-cli` with `args` as the administrator (the `default` user, whose
/// password only the testkit knows), returning its output.
pub fn redis_cli(args: &[&str]) -> Output {
    cli_command()
        .env("REDISCLI_AUTH", acl::ADMIN_PASSWORD)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run redis-cli ({e}); {INSTALL}"))
}

/// Runs `redis-cli` with `args` and no password (for a sentinel, which has none).
pub(crate) fn redis_cli_unauthenticated(args: &[&str]) -> Output {
    cli_command()
        .env_remove("REDISCLI_AUTH")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run redis-cli ({e}); {INSTALL}"))
}

fn cli_command() -> Command {
    Command::new(program("redis-cli"))
}

/// One `redis-server` on a free loopback port, in a temporary directory, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
    extra: Vec<String>,
    /// With TLS: the TLS port and the `redis-server` arguments of its certificates
    /// (the plaintext port stays, for the test's own `redis-cli`).
    tls: Option<(u16, Vec<String>)>,
    /// The `default` user's password (`requirepass`, and `masterauth` for when it
    /// replicates another of the same password), which the test's own `redis-cli` gives.
    password: Option<String>,
}

/// How a TLS server is set up: its certificate, and whether it requires one of its
/// clients (mutual TLS, checked against the CA).
#[derive(Debug, Clone)]
pub struct TlsSetup<'a> {
    /// The CA file clients' certificates must chain to.
    pub ca: &'a Path,
    /// The server's certificate and key.
    pub server: &'a CertFiles,
    /// Whether a client must present a certificate.
    pub mutual: bool,
}

impl TlsSetup<'_> {
    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--tls-cert-file".to_owned(),
            self.server.cert.display().to_string(),
            "--tls-key-file".to_owned(),
            self.server.key.display().to_string(),
            "--tls-ca-cert-file".to_owned(),
            self.ca.display().to_string(),
            "--tls-auth-clients".to_owned(),
            if self.mutual { "yes" } else { "no" }.to_owned(),
        ];
        args.extend(["--tls-replication".to_owned(), "yes".to_owned()]);
        args
    }
}

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server on the port `reserved` held until now (the server that a test
    /// pointed weir at before it ran). The port is let go only as the server starts,
    /// and a server that cannot listen on it fails the test: the port never changes.
    pub fn start_on(reserved: ReservedPort) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut server = Self {
            child: None,
            port: reserved.port,
            dir,
            extra: Vec::new(),
            tls: None,
            password: None,
        };
        drop(reserved.socket);
        server.start_on_own_port();
        server
    }

    /// Holds a free loopback port for a server to be started on it later with
    /// [`RedisServer::start_on`]; meanwhile a connection to it is refused.
    pub fn reserve_port() -> ReservedPort {
        ReservedPort::new()
    }

    /// A loopback port nobody listens on right now (and that nothing holds: another
    /// process may take it; [`RedisServer::reserve_port`] holds one).
    pub fn free_port() -> u16 {
        free_port()
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_with_password(None, extra)
    }

    /// [`RedisServer::start_with`], the `default` user having `password` when given
    /// (`requirepass`, and `masterauth` to replicate a server of the same password).
    pub fn start_with_password(password: Option<&str>, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut server = Self {
            child: None,
            port: 0,
            dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls: None,
            password: password.map(str::to_owned),
        };
        server.start_on_free_port();
        server
    }

    /// Starts a server that also listens for TLS, on [`RedisServer::tls_url`], as
    /// `setup` says, with extra `redis-server` arguments.
    pub fn start_tls(setup: &TlsSetup<'_>, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut server = Self {
            child: None,
            port: 0,
            dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls: Some((0, setup.args())),
            password: None,
        };
        server.start_on_free_port();
        server
    }

    /// The TLS port (a server started by [`RedisServer::start_tls`]).
    pub fn tls_port(&self) -> u16 {
        self.tls.as_ref().expect("a TLS server").0
    }

    /// Whether the server listens on `port` (in cleartext or TLS).
    pub fn has_port(&self, port: u16) -> bool {
        self.port == port || self.tls.as_ref().is_some_and(|(tls, _)| *tls == port)
    }

    /// The `rediss://` URL of the TLS port, as weir's ACL user.
    pub fn tls_url(&self) -> String {
        acl::url("rediss", self.tls_port())
    }

    /// Starts on a free port, another each time one is taken before the server
    /// listens on it (no port was promised to anyone yet).
    fn start_on_free_port(&mut self) {
        for _ in 0..5 {
            self.port = free_port();
            if let Some((port, _)) = &mut self.tls {
                *port = free_port();
            }
            if self.spawn() {
                return;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    /// Starts on `self.port`, and on no other: a test may have pointed weir at it.
    fn start_on_own_port(&mut self) {
        assert!(
            self.spawn(),
            "redis-server did not start on port {}, the port this test needs (is another \
             process listening on it?)",
            self.port
        );
    }

    /// Runs `redis-server` on `self.port`; returns whether it answers `PING` (else it
    /// is killed).
    fn spawn(&mut self) -> bool {
        let server = program("redis-server");
        let child = Command::new(&server)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(acl::server_args())
            .args(&self.extra)
            .args(
                self.password
                    .iter()
                    .flat_map(|password| ["--requirepass", password, "--masterauth", password]),
            )
            .args(self.tls.iter().flat_map(|(port, args)| {
                [String::from("--tls-port"), port.to_string()]
                    .into_iter()
                    .chain(args.iter().cloned())
            }))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({e}); {INSTALL}", server.display()));
        self.child = Some(child);
        if self.wait_ready(Duration::from_secs(5)) {
            return true;
        }
        self.kill();
        false
    }

    fn wait_ready(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child
                && child.try_wait().ok().flatten().is_some()
            {
                return false;
            }
            if self.cli(&["PING"]).trim() == "PONG" {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL to connect to, as weir's ACL user (see [`crate::acl`]).
    pub fn url(&self) -> String {
        acl::url_on(self.port)
    }

    /// The URL to connect to as the administrator (the `default` user), for a test's
    /// own client that drives Redis as no weir instance may (`MEMORY`, `SCRIPT`,
    /// `PUBLISH`, a server standing in for a sentinel).
    pub fn admin_url(&self) -> String {
        format!(
            "redis://default:{}@127.0.0.1:{}",
            acl::ADMIN_PASSWORD,
            self.port
        )
    }

    /// Grants weir's ACL user what bans and rules of `algorithm: concurrency` need
    /// beside the minimal list ([`acl::SORTED_SET_COMMANDS`]), for a test that runs
    /// them.
    pub fn grant_bans_and_concurrency(&self) {
        let mut args = vec!["ACL", "SETUSER", acl::USER];
        args.extend(acl::SORTED_SET_COMMANDS);
        let said = self.cli(&args);
        assert_eq!(said.trim(), "OK", "ACL SETUSER: {said}");
    }

    /// Runs a command on this server with `redis-cli`, as the administrator (the
    /// `default` user); returns its standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut all = vec!["-p".to_owned(), self.port.to_string()];
        if let Some(password) = &self.password {
            all.extend([
                "-a".to_owned(),
                password.clone(),
                "--no-auth-warning".to_owned(),
            ]);
        }
        all.extend(args.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        String::from_utf8_lossy(&redis_cli(&all).stdout).into_owned()
    }

    /// How many times `command` ran (`calls` in `INFO commandstats`; 0 if never).
    pub fn calls(&self, command: &str) -> u64 {
        self.command_stat(command, "calls")
    }

    /// The microseconds `command` executed for in all (`usec` in `INFO commandstats`,
    /// Redis's own timing of each call; 0 if never): for comparing what two kinds of
    /// call cost Redis, measured in one run.
    pub fn usec(&self, command: &str) -> u64 {
        self.command_stat(command, "usec")
    }

    /// An integer field of `command`'s line in `INFO commandstats` (0 if it never ran).
    fn command_stat(&self, command: &str, field: &str) -> u64 {
        let stats = self.cli(&["INFO", "commandstats"]);
        let prefix = format!("cmdstat_{command}:");
        let field = format!("{field}=");
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').find_map(|f| f.strip_prefix(&field)))
            .map_or(0, |n| n.trim().parse().expect("an integer"))
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): it keeps its connections but answers nothing, as
    /// a hung server does.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let status = Command::new("kill")
                .args([signal, &pid.to_string()])
                .status()
                .expect("kill");
            assert!(status.success(), "kill {signal} {pid}");
        }
    }

    /// Starts the server again on the same port (after [`RedisServer::kill`]); fails
    /// the test if it cannot have that port again.
    pub fn restart(&mut self) {
        self.kill();
        self.start_on_own_port();
    }

    /// The temporary directory the server runs in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A paused server would not die of SIGKILL until resumed on some systems.
        self.resume();
        self.kill();
    }
}

/// What makes a node of a test cluster.
const CLUSTER_ARGS: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "2000",
];

/// A local Redis Cluster of masters and no replicas (three, unless asked).
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three nodes, creates the cluster, and waits until every node reports it
    /// ready.
    pub fn start() -> Self {
        Self::with_primaries(3)
    }

    /// [`RedisCluster::start`] with `count` nodes (at least 3), each a primary
    /// holding an equal share of the slots.
    pub fn with_primaries(count: usize) -> Self {
        let nodes: Vec<RedisServer> = (0..count.max(3))
            .map(|_| RedisServer::start_with(&CLUSTER_ARGS))
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        Self::create(nodes, &addresses, &[])
    }

    /// Three primaries that talk TLS to clients and to each other (`tls-cluster yes`),
    /// with `certs`' server certificate; [`RedisCluster::tls_urls`] are the seeds.
    pub fn start_tls(certs: &TestCerts) -> Self {
        let setup = TlsSetup {
            ca: &certs.ca,
            server: &certs.server,
            mutual: false,
        };
        let mut extra = CLUSTER_ARGS.to_vec();
        extra.extend(["--tls-cluster", "yes"]);
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start_tls(&setup, &extra))
            .collect();
        // The cluster's bus runs on the TLS port's: create it over TLS.
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.tls_port()))
            .collect();
        let tls = [
            "--tls".to_owned(),
            "--cacert".to_owned(),
            certs.ca.display().to_string(),
            "--cert".to_owned(),
            certs.client.cert.display().to_string(),
            "--key".to_owned(),
            certs.client.key.display().to_string(),
        ];
        Self::create(nodes, &addresses, &tls)
    }

    /// The `rediss://` seed URLs of a cluster made by [`RedisCluster::start_tls`], as
    /// weir's ACL user.
    pub fn tls_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::tls_url).collect()
    }

    fn create(nodes: Vec<RedisServer>, addresses: &[String], tls: &[String]) -> Self {
        let mut args: Vec<&str> = tls.iter().map(String::as_str).collect();
        args.extend(["--cluster", "create"]);
        args.extend(addresses.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = redis_cli(&args);
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = Self { nodes };
        cluster.wait_ready(Duration::from_secs(20));
        cluster
    }

    /// Seed URLs of every node, as weir's ACL user.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// [`RedisServer::grant_bans_and_concurrency`] on every node.
    pub fn grant_bans_and_concurrency(&self) {
        self.nodes
            .iter()
            .for_each(RedisServer::grant_bans_and_concurrency);
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// A node, to kill, pause or restart it.
    pub fn node_mut(&mut self, index: usize) -> &mut RedisServer {
        &mut self.nodes[index]
    }

    /// An identity (`<name>-<n>`) whose keys, hash-tagged `{<identity>}`, live on node
    /// `node`.
    pub fn identity_on(&self, node: usize, name: &str) -> String {
        (0..)
            .map(|n| format!("{name}-{n}"))
            .find(|identity| self.owner_of(&format!("{{{identity}}}")) == node)
            .expect("some identity lands on every node")
    }

    /// The index of the node that serves `key`'s slot.
    pub fn owner_of(&self, key: &str) -> usize {
        let slot: u16 = self.nodes[0]
            .cli(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("a slot");
        let nodes = self.nodes[0].cli(&["CLUSTER", "NODES"]);
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let Some(port) = fields.get(1).and_then(|a| a.split(['@', ':']).nth(1)) else {
                continue;
            };
            let serves = fields
                .iter()
                .skip(8)
                .any(|range| match range.split_once('-') {
                    Some((a, b)) => {
                        a.parse::<u16>().is_ok_and(|a| a <= slot)
                            && b.parse::<u16>().is_ok_and(|b| slot <= b)
                    }
                    None => range.parse::<u16>() == Ok(slot),
                });
            if serves
                && let Some(index) = self.nodes.iter().position(|n| n.port().to_string() == port)
            {
                return index;
            }
        }
        panic!("no node serves slot {slot}:\n{nodes}");
    }

    /// Waits until every node reports the cluster ready again.
    pub fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while !self
            .nodes
            .iter()
            .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        {
            assert!(
                Instant::now() < deadline,
                "the cluster did not become ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_finds_the_programs_on_path() {
        assert_eq!(
            resolve(None, "redis-cli").unwrap(),
            PathBuf::from("redis-cli")
        );
    }

    #[test]
    fn a_directory_holding_both_programs_is_used() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["redis-server", "redis-cli"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let server = resolve(Some(dir.path().as_os_str()), "redis-server").unwrap();
        assert_eq!(server, dir.path().join("redis-server"));
    }

    #[test]
    fn a_wrong_directory_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nowhere");
        let e = resolve(Some(missing.as_os_str()), "redis-cli").unwrap_err();
        assert!(
            e.contains("WEIR_REDIS_BIN_DIR") && e.contains("not a directory"),
            "{e}"
        );
        for relative in ["", "bin", "./bin"] {
            let e = resolve(Some(OsStr::new(relative)), "redis-cli").unwrap_err();
            assert!(e.contains("not an absolute path"), "{e}");
        }

        // redis-cli alone is not enough, even when redis-cli is asked for.
        std::fs::write(dir.path().join("redis-cli"), "").unwrap();
        let e = resolve(Some(dir.path().as_os_str()), "redis-cli").unwrap_err();
        assert!(e.contains("redis-server` does not exist"), "{e}");
    }
}
