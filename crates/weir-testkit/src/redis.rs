//! `redis-server` processes for tests.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const INSTALL: &str = "redis-server and redis-cli are needed: install them with `apt-get install redis-server redis-tools`, or run the tests with `scripts/test` (it installs them), or set WEIR_REDIS_BIN_DIR to the absolute path of a directory holding both";

/// The variable naming a directory (an absolute path) that holds `redis-server` and
/// `redis-cli`; unset, both are looked up on `PATH`.
const BIN_DIR: &str = "WEIR_REDIS_BIN_DIR";

/// The program to run for `name` (`redis-server` or `redis-cli`): `$WEIR_REDIS_BIN_DIR/name`
/// when the variable is set, else `name` on `PATH`. Panics when the variable is set but is
/// not the absolute path of a directory holding both programs.
fn program(name: &str) -> PathBuf {
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

/// A port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// Runs `redis-cli` with `args`, returning its output.
pub fn redis_cli(args: &[&str]) -> Output {
    let cli = program("redis-cli");
    Command::new(&cli)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); {INSTALL}", cli.display()))
}

/// One `redis-server` on a free loopback port, in a temporary directory, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server on `port` (e.g. one that a test has kept free until now).
    pub fn start_on(port: u16) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut server = Self {
            child: None,
            port: 0,
            dir,
            extra: Vec::new(),
        };
        server.restart_on(port);
        server
    }

    /// A loopback port nobody listens on right now.
    pub fn free_port() -> u16 {
        free_port()
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut server = Self {
            child: None,
            port: 0,
            dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        server.restart_on(free_port());
        server
    }

    fn restart_on(&mut self, port: u16) {
        let server = program("redis-server");
        for attempt in 0..5 {
            let port = if attempt == 0 { port } else { free_port() };
            let child = Command::new(&server)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(self.dir.path())
                .args(&self.extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {} ({e}); {INSTALL}", server.display()));
            self.child = Some(child);
            self.port = port;
            if self.wait_ready(Duration::from_secs(5)) {
                return;
            }
            self.kill();
        }
        panic!("redis-server did not start");
    }

    fn wait_ready(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child
                && child.try_wait().ok().flatten().is_some()
            {
                return false;
            }
            let out = redis_cli(&["-p", &self.port.to_string(), "PING"]);
            if String::from_utf8_lossy(&out.stdout).trim() == "PONG" {
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

    /// The URL to connect to.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs a command on this server with `redis-cli`; returns its standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut all = vec!["-p".to_owned(), self.port.to_string()];
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

    /// Starts the server again on the same port (after [`RedisServer::kill`]).
    pub fn restart(&mut self) {
        self.kill();
        let port = self.port;
        self.restart_on(port);
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
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let mut args = vec!["--cluster", "create"];
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

    /// Seed URLs of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
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
