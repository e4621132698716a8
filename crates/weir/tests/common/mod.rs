//! Running the real `weir` binary in tests.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

pub(crate) mod echo;
pub(crate) mod login_app;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The `weir` binary under test.
pub(crate) fn weir() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weir"))
}

/// A `weir serve` child, killed if the test ends early.
pub(crate) struct Server {
    /// The process.
    pub child: Child,
    /// Its standard output, kept open while it runs.
    _stdout: BufReader<std::process::ChildStdout>,
    /// Where it listens.
    pub addr: String,
    /// Where the admin listener is: the decision API in gateway mode, and the admin
    /// API with an `admin` section.
    pub admin: Option<String>,
    /// Where the gRPC door listens, with an `envoy` section (and `--grpc-listen`).
    pub grpc: Option<String>,
    /// Where the forward-auth door listens, with an `auth` section (and
    /// `--auth-listen`).
    pub auth: Option<String>,
}

impl Server {
    /// Starts `weir serve` on a free loopback port and waits for it to listen.
    pub(crate) fn start(config: &Path) -> Self {
        Self::start_with(config, &[], Stdio::null())
    }

    /// [`Server::start`] with more arguments to `weir serve`, and its standard error
    /// (its log) sent to `stderr`.
    pub(crate) fn start_with(config: &Path, arguments: &[&str], stderr: Stdio) -> Self {
        let mut child = weir()
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .args(arguments)
            .arg("--config")
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        // The address on the next line weir prints, which must begin with `said`.
        let mut next = |said: &str| {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            line.trim()
                .strip_prefix(said)
                .unwrap_or_else(|| panic!("expected {said:?}, got {line:?}"))
                .to_owned()
        };
        // `https://` when the configuration has a `tls` section.
        let addr = next("weir listening on ");
        let addr = addr
            .strip_prefix("http://")
            .or_else(|| addr.strip_prefix("https://"))
            .unwrap_or_else(|| panic!("no address in {addr:?}"))
            .to_owned();
        let text = std::fs::read_to_string(config).unwrap();
        let section = |name: &str| text.starts_with(name) || text.contains(&format!("\n{name}"));
        let admin = (section("upstream:") || section("admin:"))
            .then(|| next("weir admin listening on http://"));
        let grpc = section("envoy:").then(|| next("weir grpc listening on "));
        let auth = section("auth:").then(|| next("weir auth listening on http://"));
        Self {
            child,
            _stdout: stdout,
            addr,
            admin,
            grpc,
            auth,
        }
    }

    /// One HTTP/1.1 request; returns the status line and the body.
    pub(crate) fn request(&self, method: &str, path: &str, body: &str) -> (String, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response.lines().next().unwrap_or_default().to_owned();
        let body = response
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        (status, body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway on Redis (100 ms timeout) in front of `upstream`, with a fail-open rule on
/// `/open`, a fail-closed one on `/closed` (both never reached), and `tight`: a fixed
/// window of `tight_limit` an hour on `/tight`, failing `tight_failure` (`open`,
/// `closed`). The fault and recovery tests' configuration.
pub(crate) fn failure_policies(
    redis_url: &str,
    upstream: std::net::SocketAddr,
    tight_limit: u64,
    tight_failure: &str,
) -> String {
    format!(
        "store:\n  type: redis\n  url: {redis_url}\n  timeout: 100ms\nupstream:\n  url: http://{upstream}\nrules:\n\
         \x20 - name: open\n    match: {{ path_prefix: /open }}\n    algorithm: gcra\n    limit: 1000000\n    period: 1m\n    failure: open\n\
         \x20 - name: closed\n    match: {{ path_prefix: /closed }}\n    algorithm: gcra\n    limit: 1000000\n    period: 1m\n    failure: closed\n\
         \x20 - name: tight\n    match: {{ path_prefix: /tight }}\n    algorithm: fixed_window\n    limit: {tight_limit}\n    period: 1h\n    failure: {tight_failure}\n"
    )
}

/// The `store` section's lines (indented) for the primary that `sentinels` name,
/// reached as the testkit's ACL user (its password written to `dir`); the sentinels
/// themselves have no credentials.
pub(crate) fn sentinel_store(sentinels: &weir_testkit::RedisSentinels, dir: &Path) -> String {
    let password = dir.join("redis-password");
    std::fs::write(&password, weir_testkit::acl::PASSWORD).unwrap();
    format!(
        "  type: redis_sentinel\n  sentinels: [{}]\n  master_name: {}\n  username: {}\n  password_file: {}\n",
        sentinels.urls().join(", "),
        weir_testkit::MASTER,
        weir_testkit::acl::USER,
        password.display()
    )
}

/// One HTTP/1.1 request to `addr` (a JSON `body`), with `Authorization: Bearer` and
/// `token` when given: the status code and the body. The admin API's tests' call.
pub(crate) fn call_with_token(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

/// A free loopback port (for a program the test starts: nginx, Caddy, Envoy).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (by its PID, through `Child`) when the test ends, however it
/// ends.
pub(crate) struct Process(pub(crate) Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The workspace's root.
pub(crate) fn workspace() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A program a test needs: from the variable `env`, else `venv` (relative to the
/// workspace) when it exists, else `name` on PATH; or a failure saying how to get it.
pub(crate) fn program(name: &str, env: &str, venv: Option<&str>) -> std::path::PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return std::path::PathBuf::from(path);
    }
    if let Some(venv) = venv.map(|v| workspace().join(v))
        && venv.exists()
    {
        return venv;
    }
    let found = Command::new(name)
        .arg(if name == "nginx" { "-v" } else { "version" })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        found.is_ok(),
        "no {name}: run scripts/test (it installs it), or install it (Debian: apt-get install \
         {}), or set {env} to its binary",
        if name == "nginx" { "nginx-light" } else { name }
    );
    std::path::PathBuf::from(name)
}

/// A real Envoy (`WEIR_ENVOY`, else scripts/test's venv) on the configuration at
/// `config`, one worker, its log in `log`: stopped by PID when the process is dropped.
pub(crate) fn start_envoy(config: &Path, log: &Path) -> Process {
    let envoy = program("envoy", "WEIR_ENVOY", Some("target/envoy-venv/bin/envoy"));
    let child = Command::new(envoy)
        .arg("-c")
        .arg(config)
        .args([
            "--disable-hot-restart",
            "--concurrency",
            "1",
            "-l",
            "warning",
        ])
        .arg("--log-path")
        .arg(log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Process(child)
}
