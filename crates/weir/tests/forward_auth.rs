//! The forward-auth door behind the real proxies, each with its configuration from
//! `examples/forward-auth/` (ports changed to free ones): nginx with `auth_request`,
//! nginx configured as ingress-nginx generates it for `auth-url` (`X-Original-URL`),
//! Caddy with `forward_auth`, and Envoy with `ext_authz` (HTTP service). Through each:
//! the limit holds exactly under concurrent requests, the client's 429 carries
//! `Retry-After` and the RateLimit fields, allowed answers carry the RateLimit fields,
//! path and host spellings share one budget, a login rule settled by the app (its
//! `Weir-Reservation`, reported with `/v1/settle`) counts only failures, and a caller
//! of the door outside its trusted proxies is refused.
//!
//! Every process (weir, the proxy, and the app on a runtime of the test's) is started
//! on free loopback ports and killed by its PID however the test ends. nginx and Caddy
//! come from PATH (`scripts/test` installs them), Envoy from `$WEIR_ENVOY`, else
//! `target/envoy-venv/bin/envoy`, else PATH; a missing one fails the test, saying how
//! to install it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use common::{Process, free_port, program, workspace};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::Server;

fn example(name: &str) -> String {
    std::fs::read_to_string(workspace().join("examples/forward-auth").join(name)).unwrap()
}

/// The app behind the proxy: `POST /login` (200 with `x-password: right`, else 401),
/// which settles the reservation weir's door made with its status before answering;
/// anything else echoed.
#[derive(Default)]
struct App {
    /// weir's decision API (`/v1/settle`).
    weir: OnceLock<String>,
    /// The `Weir-Reservation` of each login the app received.
    reservations: Mutex<Vec<Option<String>>>,
}

async fn login(State(app): State<Arc<App>>, headers: HeaderMap) -> StatusCode {
    let status = if headers.get("x-password").is_some_and(|p| p == "right") {
        StatusCode::OK
    } else {
        StatusCode::UNAUTHORIZED
    };
    let reservation = headers
        .get("weir-reservation")
        .map(|v| v.to_str().unwrap().to_owned());
    app.reservations.lock().unwrap().push(reservation.clone());
    if let Some(id) = reservation {
        let body = format!("{{\"settlement\":\"{id}\",\"status\":{}}}", status.as_u16());
        let mut stream = tokio::net::TcpStream::connect(app.weir.get().unwrap())
            .await
            .unwrap();
        let request = format!(
            "POST /v1/settle HTTP/1.1\r\nHost: weir\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    }
    status
}

async fn start_app(app: Arc<App>) -> SocketAddr {
    let router = axum::Router::new()
        .route("/login", axum::routing::post(login))
        // The Weir-Reservation a request under no rule brings (none: a client's own
        // never reaches the app).
        .route(
            "/peek",
            axum::routing::get(|headers: HeaderMap| async move {
                headers
                    .get("weir-reservation")
                    .map_or("none".to_owned(), |v| v.to_str().unwrap().to_owned())
            }),
        )
        .fallback(common::echo::echo)
        .with_state(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// weir, a proxy in front of the app asking weir's door, and the app.
struct Stack {
    /// Where clients send requests: the proxy.
    listen: SocketAddr,
    /// weir's forward-auth door.
    door: SocketAddr,
    _proxy: Process,
    weir: Server,
    app: Arc<App>,
    _runtime: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
}

/// The examples' ports, as the proxies' configurations name them, replaced by the
/// stack's.
struct Ports {
    listen: u16,
    app: u16,
    door: u16,
}

impl Ports {
    fn apply(&self, text: &str) -> String {
        text.replace(":10000", &format!(":{}", self.listen))
            .replace("127.0.0.1:8000", &format!("127.0.0.1:{}", self.app))
            .replace("127.0.0.1:8082", &format!("127.0.0.1:{}", self.door))
    }
}

impl Stack {
    /// weir with `weir_config`, and the proxy `start` makes from the ports.
    fn start(weir_config: &str, start: impl FnOnce(&Path, &Ports) -> Process) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let state = Arc::new(App::default());
        let app = runtime.block_on(start_app(Arc::clone(&state)));
        let config = dir.path().join("weir.yaml");
        std::fs::write(&config, example(weir_config)).unwrap();
        let weir = Server::start_with(&config, &["--auth-listen", "127.0.0.1:0"], Stdio::null());
        let door: SocketAddr = weir.auth.clone().unwrap().parse().unwrap();
        state.weir.set(weir.addr.clone()).unwrap();
        let ports = Ports {
            listen: free_port(),
            app: app.port(),
            door: door.port(),
        };
        let mut proxy = start(dir.path(), &ports);
        let listen: SocketAddr = format!("127.0.0.1:{}", ports.listen).parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(listen).is_err() {
            if let Ok(Some(status)) = proxy.0.try_wait() {
                panic!(
                    "the proxy ended ({status}); its files: {}",
                    logs(dir.path())
                );
            }
            assert!(
                Instant::now() < deadline,
                "the proxy does not listen after 60 s; its files: {}",
                logs(dir.path())
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            listen,
            door,
            _proxy: proxy,
            weir,
            app: state,
            _runtime: runtime,
            dir,
        }
    }

    fn get(&self, host: &str, path: &str) -> Answer {
        get(self.listen, host, path)
            .unwrap_or_else(|| panic!("no answer; logs: {}", logs(self.dir.path())))
    }

    /// A login with `password`, sending a forged reservation id of its own.
    fn login(&self, password: &str) -> Answer {
        let stream = TcpStream::connect(self.listen).unwrap();
        let request = format!(
            "POST /login HTTP/1.1\r\nHost: api.example\r\nx-password: {password}\r\n\
             Weir-Reservation: {FORGED}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        exchange(stream, &request)
            .unwrap_or_else(|| panic!("no answer; logs: {}", logs(self.dir.path())))
    }
}

/// The logs in `dir`, for a failure's message.
fn logs(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "log") {
            text.push_str(&format!(
                "\n--- {}:\n{}",
                entry.path().display(),
                std::fs::read_to_string(entry.path()).unwrap_or_default()
            ));
        }
    }
    text
}

fn nginx(example_name: &'static str) -> impl FnOnce(&Path, &Ports) -> Process {
    move |dir, ports| {
        let config = ports
            .apply(&example(example_name))
            .replace("worker_processes auto;", "worker_processes 1;");
        let path = dir.join("nginx.conf");
        std::fs::write(&path, config).unwrap();
        let child = Command::new(program("nginx", "WEIR_NGINX", None))
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&path)
            .arg("-e")
            .arg(dir.join("nginx-error.log"))
            .arg("-g")
            .arg(format!(
                "daemon off; master_process off; pid {};",
                dir.join("nginx.pid").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Process(child)
    }
}

fn caddy(dir: &Path, ports: &Ports) -> Process {
    let path = dir.join("Caddyfile");
    std::fs::write(&path, ports.apply(&example("Caddyfile"))).unwrap();
    let log = std::fs::File::create(dir.join("caddy.log")).unwrap();
    let child = Command::new(program("caddy", "WEIR_CADDY", None))
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&path)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env("XDG_DATA_HOME", dir)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Process(child)
}

fn envoy(dir: &Path, ports: &Ports) -> Process {
    let admin = free_port();
    let config = example("envoy.yaml")
        .replace(
            "port_value: 10000",
            &format!("port_value: {}", ports.listen),
        )
        .replace("port_value: 8000", &format!("port_value: {}", ports.app))
        .replace("port_value: 8082", &format!("port_value: {}", ports.door))
        .replace(
            "uri: http://127.0.0.1:8082",
            &format!("uri: http://127.0.0.1:{}", ports.door),
        )
        .replace("port_value: 9901", &format!("port_value: {admin}"));
    let path = dir.join("envoy.yaml");
    std::fs::write(&path, config).unwrap();
    common::start_envoy(&path, &dir.join("envoy.log"))
}

/// What a client got: the status and the head, names lower-cased.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .lines()
            .find_map(|line| {
                let (n, v) = line.split_once(':')?;
                n.eq_ignore_ascii_case(name).then_some(v)
            })
            .map(str::trim)
    }
}

/// One HTTP/1.1 GET with `Host: host`; none if the connection failed.
fn get(addr: SocketAddr, host: &str, path: &str) -> Option<Answer> {
    let stream = TcpStream::connect(addr).ok()?;
    exchange(
        stream,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    )
}

fn exchange(mut stream: TcpStream, request: &str) -> Option<Answer> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some(Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    })
}

/// `count` requests for `/books` at once: their answers.
fn at_once(stack: &Stack, count: usize) -> Vec<Answer> {
    let barrier = std::sync::Barrier::new(count);
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..count)
            .map(|_| {
                scope.spawn(|| {
                    let stream = TcpStream::connect(stack.listen).unwrap();
                    barrier.wait();
                    exchange(
                        stream,
                        "GET /books HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n",
                    )
                    .expect("an answer")
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// What every proxy must do with weir's door behind it (`books`: 5 an hour; `shelf`:
/// 3 an hour; GCRA, so after the burst a unit comes back every 12 or 20 minutes).
fn holds_the_limit(stack: &Stack) {
    // 12 at once to a limit of 5: exactly 5 go on.
    let answers = at_once(stack, 12);
    let allowed: Vec<&Answer> = answers.iter().filter(|a| a.status == 200).collect();
    let denied: Vec<&Answer> = answers.iter().filter(|a| a.status == 429).collect();
    assert_eq!(
        (allowed.len(), denied.len()),
        (5, 7),
        "{answers:#?}\n{}",
        logs(stack.dir.path())
    );
    // Allowed answers carry the RateLimit fields: the five remainders, one each. The
    // door's threads read the clock before they commit, so a check that read it a
    // moment before another's commit may report one unit fewer (never more): the
    // first is 4, and the k-th smallest at most k - 1.
    let mut remaining: Vec<u64> = allowed
        .iter()
        .map(|a| {
            assert_eq!(
                a.header("ratelimit-policy"),
                Some("\"books\";q=5;w=3600"),
                "{a:?}"
            );
            let field = a.header("ratelimit").unwrap();
            let r = field
                .strip_prefix("\"books\";r=")
                .and_then(|rest| rest.split(";t=").next())
                .unwrap_or_else(|| panic!("{a:?}"));
            r.parse().unwrap()
        })
        .collect();
    remaining.sort_unstable();
    assert_eq!(remaining.last(), Some(&4), "{remaining:?}");
    for (k, r) in remaining.iter().enumerate() {
        assert!(*r <= k as u64, "{remaining:?}");
    }
    // The client's 429: when to come back, and the quota.
    for answer in &denied {
        let retry: u64 = answer.header("retry-after").unwrap().parse().unwrap();
        // Concurrent checks read the clock before taking the key, so a check that read
        // it a few microseconds before another that went first is told a wait that much
        // longer: up to a millisecond over the interval once rounded up.
        assert!((719..=721).contains(&retry), "{answer:?}");
        let retry_ms: u64 = answer.header("retry-after-ms").unwrap().parse().unwrap();
        assert!((718_000..=720_001).contains(&retry_ms), "{answer:?}");
        assert!(
            answer
                .header("ratelimit")
                .unwrap()
                .starts_with("\"books\";r=0;t="),
            "{answer:?}"
        );
        assert_eq!(
            answer.header("ratelimit-policy"),
            Some("\"books\";q=5;w=3600")
        );
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json"),
            "{answer:?}"
        );
    }
    // A client that writes addresses of its own into X-Forwarded-For is still itself:
    // the proxy appends the address it saw, and the door never reads past it (a
    // client on the proxy's own address included).
    for forged in ["198.51.100.1", "198.51.100.2, 127.0.0.1", "::1"] {
        let stream = TcpStream::connect(stack.listen).unwrap();
        let request = format!(
            "GET /books HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-For: {forged}\r\n\
             Connection: close\r\n\r\n"
        );
        let answer = exchange(stream, &request).unwrap();
        assert_eq!(answer.status, 429, "forged {forged}: {answer:?}");
    }
    // A client's own Weir-Reservation never reaches the app, on a route weir sends
    // none for either.
    let stream = TcpStream::connect(stack.listen).unwrap();
    let request = format!(
        "GET /peek HTTP/1.1\r\nHost: api.example\r\nWeir-Reservation: {FORGED}\r\n\
         Connection: close\r\n\r\n"
    );
    let answer = exchange(stream, &request).unwrap();
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, "none"),
        "{answer:?}"
    );
    // Path and host spellings are one budget (3): the fourth spelling is limited.
    let port = stack.listen.port();
    let host_with_port = format!("api.example:{port}");
    let spellings = [
        ("api.example", "/shelf"),
        ("API.Example.", "//shelf/./"),
        (host_with_port.as_str(), "/SHELF/"),
        ("api.example", "/%73helf?page=2"),
    ];
    let statuses: Vec<u16> = spellings
        .iter()
        .map(|(host, path)| stack.get(host, path).status)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429], "{}", logs(stack.dir.path()));
    // The door refuses a caller outside its trusted proxies (127.0.0.1/32), whatever
    // it claims: nothing is decided, so no victim's budget is spent.
    counts_only_failed_logins(stack);
    untrusted_caller_is_refused(stack);
    // Every answer of the door counted: allowed (5 books, 1 peek, 3 shelf, 5 logins), denied
    // (7 books, 3 forged addresses, 1 shelf, 2 logins) and the untrusted caller.
    let metrics = get(stack.weir.addr.parse().unwrap(), "weir", "/metrics").unwrap();
    for (status, count) in [("2xx", 14), ("4xx", 14)] {
        let line = format!("weir_door_answers_total{{door=\"auth\",status=\"{status}\"}} {count}");
        assert!(metrics.body.contains(&line), "{line} in:\n{}", metrics.body);
    }
}

/// A reservation id a client makes up.
const FORGED: &str = "00000000000000000000000000000001";

/// Failed logins count, successes do not: the app settles each attempt with its
/// status through the reservation the door made (never the client's).
fn counts_only_failed_logins(stack: &Stack) {
    let statuses: Vec<u16> = ["right", "right", "right", "wrong", "wrong", "right"]
        .iter()
        .map(|password| stack.login(password).status)
        .collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 401, 401, 429],
        "{}",
        logs(stack.dir.path())
    );
    let locked = stack.login("right");
    assert_eq!(locked.status, 429, "{locked:?}");
    assert!(locked.header("retry-after").is_some(), "{locked:?}");
    assert!(
        locked
            .header("ratelimit")
            .is_some_and(|v| v.starts_with("\"login\";r=0;t=")),
        "{locked:?}"
    );
    // Five logins reached the app, each with the door's reservation (32 hex digits,
    // all different), never the client's.
    let seen = stack.app.reservations.lock().unwrap().clone();
    assert_eq!(seen.len(), 5, "{seen:?}");
    let mut ids: Vec<String> = seen.into_iter().map(Option::unwrap).collect();
    assert!(
        ids.iter()
            .all(|id| id != FORGED && id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())),
        "{ids:?}"
    );
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5);
}

/// From 127.0.0.2 (loopback, but not the configured 127.0.0.1/32), a well-formed
/// subrequest of every convention naming a client: 403, and no budget spent.
fn untrusted_caller_is_refused(stack: &Stack) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&"127.0.0.2:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    socket.connect(&stack.door.into()).unwrap();
    let answer = exchange(
        socket.into(),
        "GET /v1/auth/books HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-Method: GET\r\n\
         X-Forwarded-Proto: http\r\nX-Forwarded-Host: api.example\r\nX-Forwarded-Uri: /books\r\n\
         X-Original-Method: GET\r\nX-Original-URI: /books\r\nX-Forwarded-For: 192.0.2.99\r\n\
         Connection: close\r\n\r\n",
    )
    .unwrap();
    assert_eq!(answer.status, 403, "{answer:?}");
    assert!(
        answer.body.contains("\"/problems/untrusted-caller\""),
        "{answer:?}"
    );
    assert_eq!(
        answer.header("ratelimit"),
        None,
        "nothing decided: {answer:?}"
    );
}

#[test]
fn nginx_auth_request_limits_through_weir() {
    let stack = Stack::start("weir-original.yaml", nginx("nginx.conf"));
    holds_the_limit(&stack);
}

#[test]
fn ingress_nginx_auth_url_limits_through_weir() {
    let stack = Stack::start("weir-original.yaml", nginx("ingress-nginx.conf"));
    holds_the_limit(&stack);
}

#[test]
fn caddy_forward_auth_limits_through_weir() {
    let stack = Stack::start("weir-forwarded.yaml", caddy);
    holds_the_limit(&stack);
}

#[test]
fn envoy_ext_authz_limits_through_weir() {
    let stack = Stack::start("weir-envoy.yaml", envoy);
    holds_the_limit(&stack);
}

/// A subrequest as Caddy or Traefik send it for `GET path` on `host`, from 127.0.0.1.
fn ask_door(door: SocketAddr, host: &str, path: &str) -> Answer {
    let stream = TcpStream::connect(door).unwrap();
    exchange(
        stream,
        &format!(
            "GET /v1/auth HTTP/1.1\r\nHost: weir\r\nX-Forwarded-Method: GET\r\n\
             X-Forwarded-Proto: https\r\nX-Forwarded-Host: {host}\r\nX-Forwarded-Uri: {path}\r\n\
             X-Forwarded-For: 198.51.100.7\r\nConnection: close\r\n\r\n"
        ),
    )
    .unwrap()
}

/// A reload replaces the door with the rest: its settings and its rules.
#[test]
fn the_door_follows_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weir.yaml");
    let text = example("weir-forwarded.yaml");
    std::fs::write(&config, &text).unwrap();
    let weir = Server::start_with(&config, &["--auth-listen", "127.0.0.1:0"], Stdio::null());
    let door: SocketAddr = weir.auth.clone().unwrap().parse().unwrap();
    let statuses: Vec<u16> = (0..4)
        .map(|_| ask_door(door, "api.example", "/shelf").status)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429]);
    // The denial's status, as nginx needs it: taken at the next look at the file.
    std::fs::write(
        &config,
        text.replace(
            "  reservations: app\n",
            "  reservations: app\n  denied_status: 403\n",
        ),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = ask_door(door, "api.example", "/shelf");
        if answer.status == 403 {
            assert!(answer.header("retry-after").is_some(), "{answer:?}");
            assert!(answer.body.contains("\"status\":403"), "{answer:?}");
            break;
        }
        assert_eq!(answer.status, 429, "{answer:?}");
        assert!(Instant::now() < deadline, "not reloaded after 10 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Removing the section needs a restart: refused, the door keeps serving.
    let without = text
        .split("\nrules:")
        .nth(1)
        .map(|rules| format!("rules:{rules}"))
        .unwrap();
    std::fs::write(&config, without).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(ask_door(door, "api.example", "/books").status, 200);
}

/// `--auth-listen` serves the door of an `auth` section; without one it is an error,
/// not a door on defaults nobody checked the rules against.
#[test]
fn auth_listen_needs_an_auth_section() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weir.yaml");
    std::fs::write(
        &config,
        "rules:\n  - name: api\n    match: { path_prefix: / }\n    algorithm: gcra\n    limit: 5\n    period: 1m\n",
    )
    .unwrap();
    let out = common::weir()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--auth-listen",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("--auth-listen serves the forward-auth door, which needs an `auth` section"),
        "{stderr}"
    );
}
