//! `weir serve` and `weir check-config` on a Redis that wants credentials and TLS: the
//! password from a file or the environment, used and printed nowhere (every output of
//! a run is searched for it), and through Sentinel the sentinels' own password beside
//! the data nodes'; a password, user or certificate Redis or a sentinel refuses stops
//! the start with the reason, rather than a stream of 503s; and `check-config` names
//! the field of each misconfiguration.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::weir;
use weir_testkit::{MASTER, RedisSentinels, RedisServer, SentinelSetup, TestCerts, TlsSetup};

const PASSWORD: &str = "pw-7f3a9c1e-must-never-be-printed";
/// The sentinels' own password, another.
const SENTINEL_PASSWORD: &str = "sentinel-pw-5d1b-must-never-be-printed";
const ADMIN_TOKEN: &str = "an-admin-token-of-at-least-16-bytes";
/// The variables the configurations read the passwords and admin token from.
const PASSWORD_ENV: &str = "WEIR_TEST_REDIS_PASSWORD";
const SENTINEL_PASSWORD_ENV: &str = "WEIR_TEST_SENTINEL_PASSWORD";
const TOKEN_ENV: &str = "WEIR_TEST_ADMIN_TOKEN";

/// A Redis whose `default` user and ACL user `weir` both have [`PASSWORD`] (`weir`
/// keeps the testkit's minimal commands, and its password).
fn redis_with_password() -> RedisServer {
    let redis = RedisServer::start();
    let acl = redis.cli(&["ACL", "SETUSER", "weir", &format!(">{PASSWORD}")]);
    assert_eq!(acl.trim(), "OK");
    // The default user's last: from here on the test's own redis-cli is refused too.
    let set = redis.cli(&["CONFIG", "SET", "requirepass", PASSWORD]);
    assert_eq!(set.trim(), "OK");
    redis
}

/// Writes `weir.yaml` in `dir` with `store` (indented lines) and one rule.
fn config(dir: &Path, store: &str) -> PathBuf {
    let path = dir.join("weir.yaml");
    let text = format!(
        "store:\n{store}  timeout: 2s\nrules:\n  - name: api\n    algorithm: gcra\n    limit: 3\n    period: 1h\nadmin:\n  token_env: {TOKEN_ENV}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn check_config(path: &Path) -> Output {
    check_config_with(path, &[])
}

fn check_config_with(path: &Path, flags: &[&str]) -> Output {
    weir()
        .arg("check-config")
        .args(flags)
        .arg(path)
        .env(PASSWORD_ENV, PASSWORD)
        .env(SENTINEL_PASSWORD_ENV, SENTINEL_PASSWORD)
        .env(TOKEN_ENV, ADMIN_TOKEN)
        .output()
        .unwrap()
}

/// `weir serve` on `path` at debug level, its log going to `log`; its address, or the
/// output of a run that ended before listening.
fn serve(path: &Path, log: &Path) -> (common::Process, Result<String, Output>) {
    let mut child = weir()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(path)
        .env(PASSWORD_ENV, PASSWORD)
        .env(SENTINEL_PASSWORD_ENV, SENTINEL_PASSWORD)
        .env(TOKEN_ENV, ADMIN_TOKEN)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let listening = line
        .trim()
        .strip_prefix("weir listening on http://")
        .map(str::to_owned);
    let result = match listening {
        Some(addr) => {
            // The rest of stdout, read as it comes, so weir never blocks on it.
            let log = log.with_extension("stdout");
            std::thread::spawn(move || {
                let mut rest = String::new();
                let _ = stdout.read_to_string(&mut rest);
                std::fs::write(log, rest).unwrap();
            });
            Ok(addr)
        }
        None => {
            let output = child.wait_with_output().unwrap();
            let _ = stdout.read_to_string(&mut line);
            return (
                common::Process(Command::new("true").spawn().unwrap()),
                Err(Output {
                    stdout: line.into_bytes(),
                    stderr: std::fs::read(log).unwrap(),
                    ..output
                }),
            );
        }
    };
    (common::Process(child), result)
}

/// A GET or POST on `addr`, with the admin token; the whole answer.
fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: weir\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn assert_never_said(what: &str, text: &str) {
    for password in [PASSWORD, SENTINEL_PASSWORD] {
        assert!(
            !text.contains(password),
            "{what} printed a password:\n{text}"
        );
    }
}

#[test]
fn a_password_from_a_file_or_the_environment_is_used_and_printed_nowhere() {
    let redis = redis_with_password();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("redis-password"), format!("{PASSWORD}\n")).unwrap();
    let port = redis.port();
    used_and_printed_nowhere(
        dir.path(),
        &[
            format!(
                "  type: redis\n  url: redis://127.0.0.1:{port}\n  username: weir\n  password_file: redis-password\n"
            ),
            format!(
                "  type: redis\n  url: redis://127.0.0.1:{port}\n  password_env: {PASSWORD_ENV}\n"
            ),
        ],
    );
}

/// Sentinels with a password of their own and data nodes with another: each read from
/// a file or the environment, both used (the sentinels asked for the primary, checks
/// decided on it), neither printed.
#[test]
fn the_sentinels_own_password_is_used_beside_the_data_nodes_and_printed_nowhere() {
    let set = RedisSentinels::start_with(&SentinelSetup {
        sentinel_password: Some(SENTINEL_PASSWORD),
        data_password: Some(PASSWORD),
        server_args: &[],
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("redis-password"), format!("{PASSWORD}\n")).unwrap();
    std::fs::write(
        dir.path().join("sentinel-password"),
        format!("{SENTINEL_PASSWORD}\n"),
    )
    .unwrap();
    let sentinels = format!(
        "  type: redis_sentinel\n  sentinels: [{}]\n  master_name: {MASTER}\n",
        set.urls().join(", ")
    );
    used_and_printed_nowhere(
        dir.path(),
        &[
            format!(
                "{sentinels}  password_env: {PASSWORD_ENV}\n  sentinel_password_file: sentinel-password\n"
            ),
            format!(
                "{sentinels}  password_file: redis-password\n  sentinel_password_env: {SENTINEL_PASSWORD_ENV}\n"
            ),
        ],
    );
}

/// For each `store` section: `check-config` (and `--connect`) passes, `weir serve`
/// decides on Redis, and nothing it prints or answers (check-config, the log at debug
/// level, stdout, the HTTP and admin answers, /metrics) holds a password.
fn used_and_printed_nowhere(dir: &Path, stores: &[String]) {
    for (round, store) in stores.iter().enumerate() {
        let path = config(dir, store);
        let connected = check_config_with(&path, &["--connect"]);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&connected.stdout),
            String::from_utf8_lossy(&connected.stderr)
        );
        assert!(connected.status.success(), "round {round}: {said}");
        assert_never_said("check-config --connect", &said);
        let checked = check_config(&path);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr)
        );
        assert!(checked.status.success(), "round {round}: {said}");
        assert_never_said("check-config", &said);

        let log = dir.join(format!("serve-{round}.log"));
        let (mut weir, addr) = serve(&path, &log);
        let addr = addr.unwrap_or_else(|output| panic!("round {round}: {output:?}"));
        let mut seen = String::new();
        for _ in 0..4 {
            seen += &http(&addr, "POST", "/v1/check", r#"{"rule": "api", "key": "k"}"#);
        }
        // Redis decided: the fourth of a limit of 3 is denied.
        assert!(
            seen.contains("429 Too Many Requests"),
            "round {round}: {seen}"
        );
        for path in [
            "/metrics",
            "/readyz",
            "/admin/api/rules",
            "/admin/api/key?rule=api&key=k",
        ] {
            seen += &http(&addr, "GET", path, "");
        }
        seen += &http(
            &addr,
            "POST",
            "/admin/api/reset",
            r#"{"rule": "api", "key": "k"}"#,
        );
        assert_never_said("the HTTP answers", &seen);
        weir.0.kill().unwrap();
        weir.0.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let stdout = log.with_extension("stdout");
        while !stdout.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for file in [&log, &stdout] {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            assert_never_said("weir serve's output", &text);
        }
        // The log says once how checks run (this user may load Functions).
        let said = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            said.matches("checks run as weir's Redis Functions library")
                .count(),
            1,
            "{said}"
        );
    }
}

#[test]
fn a_password_redis_refuses_stops_the_start_naming_the_user() {
    let redis = redis_with_password();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wrong"), "not-the-password\n").unwrap();
    let url = format!("  type: redis\n  url: redis://127.0.0.1:{}\n", redis.port());
    for (credentials, expected) in [
        (
            "  username: weir\n  password_file: wrong\n",
            "Redis refused weir: the password of ACL user weir was not accepted",
        ),
        // None given: Redis 7 would close the connection on weir's first long
        // command; weir asks a `PING` first and says why.
        (
            "",
            "Redis refused weir: ACL user default needs a password, and none was given",
        ),
    ] {
        let path = config(dir.path(), &format!("{url}{credentials}"));
        let connected = check_config_with(&path, &["--connect"]);
        let said = String::from_utf8_lossy(&connected.stderr);
        assert!(!connected.status.success());
        assert!(said.contains(expected), "{said}");
        let started = Instant::now();
        let (_weir, result) = serve(&path, &dir.path().join("serve.log"));
        let output = result.expect_err("weir served on a refused password");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(said.contains(expected), "{said}");
        assert!(!said.contains("not-the-password"), "{said}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

/// Sentinels that refuse weir's credentials for them (a wrong password, or none
/// where they require one) stop the start, naming each sentinel and saying it refused
/// them, rather than serving 503s while waiting for a primary they will never name.
#[test]
fn a_sentinel_that_refuses_the_credentials_stops_the_start_naming_it() {
    let set = RedisSentinels::start_with(&SentinelSetup {
        sentinel_password: Some(SENTINEL_PASSWORD),
        data_password: Some(PASSWORD),
        server_args: &[],
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wrong"), "not-the-sentinels-password\n").unwrap();
    let first = set.urls()[0].clone();
    for (sentinel_password, reason) in [
        (
            "  sentinel_password_file: wrong\n",
            "the sentinel refused weir: the password of ACL user default was not accepted",
        ),
        (
            "",
            "the sentinel refused weir: ACL user default needs a password, and none was given",
        ),
    ] {
        let path = config(
            dir.path(),
            &format!(
                "  type: redis_sentinel\n  sentinels: [{}]\n  master_name: {MASTER}\n  password_env: {PASSWORD_ENV}\n{sentinel_password}",
                set.urls().join(", ")
            ),
        );
        let expected =
            format!("Redis refused weir: no sentinel named a primary: {first}: {reason}");
        let connected = check_config_with(&path, &["--connect"]);
        let said = String::from_utf8_lossy(&connected.stderr);
        assert!(!connected.status.success());
        assert!(said.contains(&expected), "{said}");
        let started = Instant::now();
        let (_weir, result) = serve(&path, &dir.path().join("serve.log"));
        let output = result.expect_err("weir served through sentinels that refused it");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(said.contains(&expected), "{said}");
        assert!(!said.contains("not-the-sentinels-password"), "{said}");
        assert_never_said("weir serve", &said);
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn serve_on_tls_refuses_a_certificate_for_another_name_and_serves_on_a_good_one() {
    let certs = TestCerts::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = certs.ca.display();
    for (server, serves) in [(&certs.other_name, false), (&certs.server, true)] {
        let setup = TlsSetup {
            ca: &certs.ca,
            server,
            mutual: true,
        };
        let redis = RedisServer::start_tls(&setup, &[]);
        let path = config(
            dir.path(),
            &format!(
                "  type: redis\n  url: {}\n  tls: {{ ca_file: {ca}, cert_file: {}, key_file: {} }}\n",
                redis.tls_url(),
                certs.client.cert.display(),
                certs.client.key.display()
            ),
        );
        if !serves {
            // The default store timeout (50 ms, a check's) does not bound the handshake:
            // the certificate's fault is told, not a timeout.
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, text.replace("  timeout: 2s\n", "")).unwrap();
        }
        // check-config reads the files; it connects only when asked, and then says
        // why Redis could not be used.
        let checked = check_config(&path);
        assert!(checked.status.success(), "{checked:?}");
        let connected = check_config_with(&path, &["--connect"]);
        let said = String::from_utf8_lossy(&connected.stderr);
        if serves {
            assert!(connected.status.success(), "{connected:?}");
            assert!(
                String::from_utf8_lossy(&connected.stdout)
                    .contains("store: connected, and Redis lets weir check limits")
            );
        } else {
            assert!(!connected.status.success());
            assert!(said.contains("weir: store: could not connect"), "{said}");
            assert!(said.contains("not valid for name"), "{said}");
        }
        let (_weir, result) = serve(&path, &dir.path().join("serve.log"));
        match result {
            Ok(addr) if serves => {
                let answer = http(&addr, "POST", "/v1/check", r#"{"rule": "api", "key": "k"}"#);
                assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
            }
            Err(output) if !serves => {
                let said = String::from_utf8_lossy(&output.stderr);
                assert!(said.contains("not valid for name"), "{said}");
            }
            other => panic!("serves {serves}: {other:?}"),
        }
    }
}

/// A server certificate for a name only, the URL an address: `tls.server_name` with
/// that name connects; without it, or with another name, `check-config --connect`
/// and `serve` refuse with the name the certificate was checked for.
#[test]
fn serve_checks_the_configured_server_name_on_an_address_only_url() {
    let certs = TestCerts::new();
    let dir = tempfile::tempdir().unwrap();
    let setup = TlsSetup {
        ca: &certs.ca,
        server: &certs.other_name,
        mutual: false,
    };
    let redis = RedisServer::start_tls(&setup, &[]);
    let ca = certs.ca.display();
    for (name, refused_for) in [
        ("", Some("not valid for name \"127.0.0.1\"")),
        (
            ", server_name: redis.test",
            Some("not valid for name \"redis.test\""),
        ),
        (", server_name: redis.elsewhere.test", None),
    ] {
        let path = config(
            dir.path(),
            &format!(
                "  type: redis\n  url: {}\n  tls: {{ ca_file: {ca}{name} }}\n",
                redis.tls_url()
            ),
        );
        let connected = check_config_with(&path, &["--connect"]);
        let said = String::from_utf8_lossy(&connected.stderr);
        let (_weir, served) = serve(&path, &dir.path().join("serve.log"));
        match (refused_for, served) {
            (None, Ok(addr)) => {
                assert!(connected.status.success(), "{name}: {said}");
                let answer = http(&addr, "POST", "/v1/check", r#"{"rule": "api", "key": "k"}"#);
                assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
            }
            (Some(reason), Err(output)) => {
                assert!(!connected.status.success(), "{name}: connected");
                assert!(said.contains(reason), "{name}: {said}");
                let said = String::from_utf8_lossy(&output.stderr);
                assert!(said.contains(reason), "{name}: {said}");
            }
            (expected, other) => panic!("{name}: refused for {expected:?}, but {other:?}"),
        }
    }
}

/// The start of a `type: redis_sentinel` store section.
const SENTINEL: &str =
    "  type: redis_sentinel\n  sentinels: [redis://127.0.0.1:26379]\n  master_name: m\n";

#[test]
fn check_config_names_the_field_of_each_access_mistake() {
    let certs = TestCerts::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.pem"), "not a certificate\n").unwrap();
    std::fs::write(dir.path().join("empty"), "").unwrap();
    let client = format!(
        "cert_file: {}, key_file: {}",
        certs.client.cert.display(),
        certs.client.key.display()
    );
    for (store, field, reason) in [
        (
            "  type: redis\n  url: redis://127.0.0.1:6379\n  tls: { ca_file: junk.pem }\n".to_owned(),
            "store.tls",
            "rediss://",
        ),
        (
            "  type: redis\n  url: rediss://127.0.0.1:6379\n  tls: { ca_file: junk.pem }\n".to_owned(),
            "store.tls.ca_file",
            "junk.pem` cannot be used",
        ),
        (
            format!(
                "  type: redis\n  url: rediss://127.0.0.1:6379\n  tls: {{ cert_file: {}, key_file: {} }}\n",
                certs.client.cert.display(),
                certs.server.key.display()
            ),
            "store.tls.key_file",
            "not the certificate's",
        ),
        (
            format!(
                "  type: redis\n  url: rediss://127.0.0.1:6379\n  tls: {{ cert_file: {} }}\n",
                certs.client.cert.display()
            ),
            "store.tls.key_file",
            "needs its key",
        ),
        (
            // A server requiring weir's certificate would refuse it at each connection.
            format!(
                "  type: redis\n  url: rediss://127.0.0.1:6379\n  tls: {{ cert_file: {}, key_file: {} }}\n",
                certs.expired.cert.display(),
                certs.expired.key.display()
            ),
            "store.tls.cert_file",
            "the certificate expired on 2020",
        ),
        (
            "  type: redis\n  url: rediss://127.0.0.1:6379\n  password_file: nowhere\n".to_owned(),
            "store.password_file",
            "cannot read",
        ),
        (
            "  type: redis\n  url: rediss://127.0.0.1:6379\n  password_file: empty\n".to_owned(),
            "store.password_file",
            "is empty",
        ),
        (
            "  type: redis\n  url: rediss://127.0.0.1:6379\n  password_env: WEIR_TEST_NOT_SET_ANYWHERE\n"
                .to_owned(),
            "store.password_env",
            "is not set",
        ),
        (
            "  type: redis_cluster\n  nodes: [rediss://127.0.0.1:1, redis://127.0.0.1:2]\n".to_owned(),
            "store.nodes",
            "mixes",
        ),
        (
            "  type: redis_sentinel\n  sentinels: [redis://127.0.0.1:26379]\n".to_owned(),
            "store.master_name",
            "needs `master_name`",
        ),
        (
            "  type: redis_sentinel\n  url: redis://127.0.0.1:6379\n  master_name: m\n".to_owned(),
            "store.url",
            "applies to type redis, not redis_sentinel",
        ),
        (
            "  type: redis\n  url: rediss://127.0.0.1:6379\n  tls: { server_name: 127.0.0.1 }\n"
                .to_owned(),
            "store.tls.server_name",
            "is an IP address",
        ),
        (
            "  type: redis\n  url: rediss://127.0.0.1:6379\n  tls: { server_name: 'not a name' }\n"
                .to_owned(),
            "store.tls.server_name",
            "is not a DNS name",
        ),
        (
            "  type: redis_cluster\n  nodes: [rediss://127.0.0.1:1]\n  tls: { server_name: redis.test }\n"
                .to_owned(),
            "store.tls.server_name",
            "announces (CLUSTER SLOTS)",
        ),
        (
            "  type: redis\n  url: redis://127.0.0.1:6379\n  sentinel_username: weir\n".to_owned(),
            "store.sentinel_username",
            "applies to type redis_sentinel, not redis",
        ),
        (
            "  type: redis_cluster\n  nodes: [redis://127.0.0.1:1]\n  sentinel_password_env: X\n"
                .to_owned(),
            "store.sentinel_password_env",
            "applies to type redis_sentinel, not redis_cluster",
        ),
        (
            "  type: memory\n  sentinel_password_file: x\n".to_owned(),
            "store.sentinel_password_file",
            "applies to type redis_sentinel, not memory",
        ),
        (
            format!("{SENTINEL}  sentinel_username: weir\n  password_env: {PASSWORD_ENV}\n"),
            "store.sentinel_username",
            "an ACL user needs its password: set `sentinel_password_file` or `sentinel_password_env`",
        ),
        (
            format!("{SENTINEL}  sentinel_password_env: WEIR_TEST_NOT_SET_ANYWHERE\n"),
            "store.sentinel_password_env",
            "is not set",
        ),
        (
            format!("{SENTINEL}  sentinel_password_file: empty\n"),
            "store.sentinel_password_file",
            "is empty",
        ),
        (
            format!("  type: memory\n  tls: {{ {client} }}\n"),
            "store.tls",
            "applies to type redis, redis_cluster and redis_sentinel",
        ),
    ] {
        let checked = check_config(&config(dir.path(), &store));
        let said = String::from_utf8_lossy(&checked.stderr);
        assert!(!checked.status.success(), "{store}: passed");
        assert!(said.contains(field) && said.contains(reason), "{store}: {said}");
    }
    // A password in the URL still works, with a warning that does not repeat it.
    let checked = check_config(&config(
        dir.path(),
        &format!("  type: redis\n  url: redis://:{PASSWORD}@127.0.0.1:6379\n"),
    ));
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success(), "{said}");
    assert!(
        said.contains("warning: store.url") && said.contains("password_file"),
        "{said}"
    );
    assert_never_said("check-config's warning", &said);
    // So does a sentinel's, the warning naming the sentinels' fields.
    let checked = check_config(&config(
        dir.path(),
        &format!(
            "  type: redis_sentinel\n  sentinels: [redis://:{SENTINEL_PASSWORD}@127.0.0.1:26379]\n  master_name: m\n"
        ),
    ));
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success(), "{said}");
    assert!(
        said.contains("warning: store.sentinels") && said.contains("`sentinel_password_file`"),
        "{said}"
    );
    assert_never_said("check-config's warning", &said);
}

#[test]
fn check_config_connect_reports_a_redis_that_is_not_there_and_passes_the_memory_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(
        dir.path(),
        &format!(
            "  type: redis\n  url: redis://127.0.0.1:{}\n",
            common::free_port()
        ),
    );
    assert!(
        check_config(&path).status.success(),
        "no connection without --connect"
    );
    let connected = check_config_with(&path, &["--connect"]);
    let said = String::from_utf8_lossy(&connected.stderr);
    assert!(!connected.status.success());
    assert!(said.contains("weir: store: could not connect"), "{said}");
    let memory = dir.path().join("memory.yaml");
    std::fs::write(
        &memory,
        "rules:\n  - { name: api, algorithm: gcra, limit: 3, period: 1h }\n",
    )
    .unwrap();
    let checked = check_config_with(&memory, &["--connect"]);
    assert!(checked.status.success(), "{checked:?}");
    assert!(
        String::from_utf8_lossy(&checked.stdout).contains("store: memory, nothing to connect to")
    );
}

#[test]
fn a_password_of_two_lines_is_refused_and_a_malformed_url_never_shows_its_password() {
    let dir = tempfile::tempdir().unwrap();
    // A single line end is the file's; a second line would silently become part of
    // the password, which Redis then refuses with no hint.
    std::fs::write(dir.path().join("one"), format!("{PASSWORD}\r\n")).unwrap();
    std::fs::write(dir.path().join("two"), format!("{PASSWORD}\n\n")).unwrap();
    let url = "  type: redis\n  url: rediss://127.0.0.1:6379\n";
    let checked = check_config(&config(dir.path(), &format!("{url}  password_file: one\n")));
    assert!(checked.status.success(), "{checked:?}");
    let checked = check_config(&config(dir.path(), &format!("{url}  password_file: two\n")));
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success());
    assert!(
        said.contains("store.password_file") && said.contains("holds more than one line"),
        "{said}"
    );
    assert_never_said("check-config", &said);
    let path = config(
        dir.path(),
        &format!("{url}  password_env: WEIR_TEST_NEWLINE\n"),
    );
    let checked = weir()
        .args(["check-config"])
        .arg(&path)
        .env("WEIR_TEST_NEWLINE", format!("{PASSWORD}\n"))
        .env(TOKEN_ENV, ADMIN_TOKEN)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success());
    assert!(
        said.contains("store.password_env") && said.contains("holds a line end"),
        "{said}"
    );
    assert_never_said("check-config", &said);
    // A user without its password is reported at the user's line.
    let checked = check_config(&config(dir.path(), &format!("{url}  username: weir\n")));
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(said.contains("weir.yaml:4:"), "{said}");
    assert!(said.contains("an ACL user needs its password"), "{said}");
    // Generated passwords hold `/`: unescaped, the URL does not parse, and the error
    // saying so hides the password anyway.
    for store in [
        format!("  type: redis\n  url: redis://weir:{PASSWORD}/x@127.0.0.1:6379\n"),
        format!("  type: redis\n  url: redis://:{PASSWORD}?x@127.0.0.1:6379\n"),
        format!("  type: redis_cluster\n  nodes: [redis://:ab/{PASSWORD}@127.0.0.1:1]\n"),
    ] {
        let checked = check_config(&config(dir.path(), &store));
        let said = String::from_utf8_lossy(&checked.stderr);
        assert!(said.contains("<redacted>"), "{store}: {said}");
        assert_never_said("check-config", &said);
    }
}
