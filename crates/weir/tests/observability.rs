//! What operators see: the Prometheus metrics (read back by the Prometheus project's
//! own OpenMetrics parser), the admin API (its token, a locked-out caller inspected
//! and unlocked, the identities denied most, decision rates), the status page in a
//! real headless Chromium, and denials logged once per caller, as JSON.
//!
//! The in-process tests run `examples/login.yaml` in front of a login app on a manual
//! clock; the page and the logs come from the real binary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use common::login_app::App;
use serde_json::Value;
use weir::Config;
use weir::{Handler, Instance};
use weir_core::{Clock, ManualClock};
use weir_store::{MemoryStore, MemoryStoreConfig};

/// 2026-11-30 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;
const TOKEN: &str = "test-admin-token-0123456789";
const ANA: &str = "email=ana@example.com&client_ip=203.0.113.7";

/// The login example (with an `admin` section reading `token_file`) in front of `app`.
fn login_config(app: SocketAddr, dir: &Path) -> String {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/login.yaml");
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    let text = std::fs::read_to_string(example)
        .unwrap()
        .replace("http://127.0.0.1:9000", &format!("http://{app}"));
    format!("{text}\nadmin:\n  token_file: token\n")
}

/// weir in process: the gateway, and the admin listener's router.
struct Weir {
    service: Instance,
    admin: Router,
    clock: Arc<ManualClock>,
}

impl Weir {
    fn start(app: SocketAddr, dir: &Path) -> Self {
        let text = login_config(app, dir);
        let config = Config::parse(&text, &dir.join("login.yaml")).unwrap();
        let clock = Arc::new(ManualClock::new(MIDNIGHT));
        let store = Arc::new(MemoryStore::new(
            MemoryStoreConfig { max_keys: 10_000 },
            clock.clone(),
        ));
        let service = Instance::with_store(&config, store, clock.clone() as Arc<dyn Clock>);
        assert!(service.has_admin(), "an admin section");
        let admin = weir::admin_router(&service);
        Self {
            service,
            admin,
            clock,
        }
    }

    async fn login(&self, password: &str) -> u16 {
        let body = format!(r#"{{"email":"ana@example.com","password":"{password}"}}"#);
        let request = Request::post("/login")
            .header("host", "app.test")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let peer = SocketAddr::new("203.0.113.7".parse::<IpAddr>().unwrap(), 40000);
        let gateway = self.service.gateway.clone().unwrap();
        gateway.call(request, peer).await.status().as_u16()
    }

    /// An admin listener request; returns the status, the headers and the body.
    async fn admin(
        &self,
        method: &str,
        uri: &str,
        token: Option<&str>,
        body: &str,
    ) -> (u16, axum::http::HeaderMap, String) {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        let response = self
            .admin
            .call(request, "127.0.0.1:1".parse().unwrap())
            .await;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
    }

    async fn admin_json(&self, uri: &str) -> Value {
        let (status, _, body) = self.admin("GET", uri, Some(TOKEN), "").await;
        assert_eq!(status, 200, "{uri}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

/// `config`'s service in process, on a small memory store and a manual clock.
fn small_service(config: &Config) -> Instance {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(MIDNIGHT));
    let store = Arc::new(MemoryStore::new(
        MemoryStoreConfig { max_keys: 10 },
        clock.clone(),
    ));
    Instance::with_store(config, store, clock)
}

/// The samples of an OpenMetrics text, as read by the Prometheus project's Python
/// parser (`scripts/test` provides it): `name{labels}` (labels sorted) to value.
fn parse_openmetrics(text: &str) -> HashMap<String, f64> {
    let python = std::env::var("WEIR_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        out[f"{s.name}{{{labels}}}"] = s.value
print(json.dumps(out))
"#;
    let mut child = Command::new(&python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python} (scripts/test sets WEIR_PYTHON): {e}"));
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the OpenMetrics parser refused /metrics (or is missing: run scripts/test): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn sample(samples: &HashMap<String, f64>, key: &str) -> f64 {
    *samples
        .get(key)
        .unwrap_or_else(|| panic!("no sample {key} in {:#?}", samples.keys()))
}

#[tokio::test]
async fn metrics_count_each_rules_decisions_and_parse_as_openmetrics() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let weir = Weir::start(app.addr, dir.path());
    // Seven wrong passwords: five reach the app (401), the pair is then locked out.
    let mut statuses = Vec::new();
    for _ in 0..7 {
        statuses.push(weir.login("guess").await);
    }
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429]);

    let (status, headers, text) = weir.admin("GET", "/metrics", None, "").await;
    assert_eq!(status, 200);
    assert_eq!(
        headers[header::CONTENT_TYPE],
        weir::METRICS_CONTENT_TYPE,
        "Prometheus reads the type from the header"
    );
    assert!(
        !text.contains("ana@example.com"),
        "no label holds a caller's key"
    );
    let samples = parse_openmetrics(&text);
    let decisions = |rule: &str, outcome: &str| {
        sample(
            &samples,
            &format!(r#"weir_decisions_total{{outcome="{outcome}",plan="(none)",rule="{rule}"}}"#),
        )
    };
    assert_eq!(decisions("login-account-ip", "allowed"), 5.0);
    assert_eq!(decisions("login-account-ip", "denied"), 2.0);
    assert!(
        !samples.keys().any(|k| k.contains("shadow_")),
        "no shadow series for rules that are not shadow rules"
    );
    // Each rule counts its own decision: the account-wide rule allowed all seven (the
    // two denied by the pair's rule consumed nothing).
    assert_eq!(decisions("login-account", "allowed"), 7.0);
    assert_eq!(decisions("login-account", "denied"), 0.0);
    // The fifth attempt left the pair's rule with nothing: under 10% of 5.
    assert_eq!(
        sample(
            &samples,
            r#"weir_near_limit_decisions_total{rule="login-account-ip"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(&samples, r#"weir_near_limit_keys{rule="login-account-ip"}"#),
        1.0
    );
    assert_eq!(
        sample(
            &samples,
            r#"weir_gateway_requests_total{route="login-account-ip",status="4xx"}"#
        ),
        7.0
    );
    // ... and the door they came in by.
    assert_eq!(
        sample(
            &samples,
            r#"weir_door_answers_total{door="gateway",status="4xx"}"#
        ),
        7.0
    );
    assert_eq!(
        sample(
            &samples,
            r#"weir_store_latency_seconds_count{operation="check",store="memory"}"#
        ),
        7.0
    );
    // On the memory store nothing decides on a fallback: no series says it could.
    assert!(
        !text.contains(r#"store="fallback""#),
        "fallback series on the memory store:\n{text}"
    );
    // Nor is a settlement ever owed to it.
    assert!(
        !text.contains("weir_settlements_"),
        "owed settlement series on the memory store:\n{text}"
    );
    assert_eq!(
        sample(&samples, r#"weir_gateway_upstream_latency_seconds_count{}"#),
        5.0
    );
    assert_eq!(sample(&samples, r#"weir_gateway_in_flight{}"#), 0.0);
    let text_of_config = login_config(app.addr, dir.path());
    let config = Config::parse(&text_of_config, &dir.path().join("login.yaml")).unwrap();
    let loaded = format!(r#"weir_config_loaded{{sha256="{}"}}"#, config.sha256);
    assert_eq!(sample(&samples, &loaded), 1.0);

    // A request refused before any rule counted it.
    let refused = Request::post("/login")
        .header("host", "app.test")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"email":"a@x","email":"b@x"}"#))
        .unwrap();
    let gateway = weir.service.gateway.clone().unwrap();
    let status = gateway
        .call(refused, "198.51.100.1:1".parse().unwrap())
        .await
        .status();
    assert_eq!(status, 400);
    let (_, _, text) = weir.admin("GET", "/metrics", None, "").await;
    let samples = parse_openmetrics(&text);
    assert_eq!(
        sample(
            &samples,
            r#"weir_refused_requests_total{reason="unreadable"}"#
        ),
        1.0
    );
}

#[tokio::test]
async fn the_admin_api_needs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let weir = Weir::start(app.addr, dir.path());
    for token in [None, Some("wrong-token-but-long-enough"), Some("")] {
        for (method, uri) in [
            ("GET", "/admin/api/rules"),
            ("GET", "/admin/api/key?rule=login-account-ip&key=x"),
            ("GET", "/admin/api/top?rule=login-account-ip"),
            ("POST", "/admin/api/reset"),
        ] {
            let body = r#"{"rule":"login-account-ip","key":"x"}"#;
            let (status, headers, _) = weir.admin(method, uri, token, body).await;
            assert_eq!(status, 401, "{method} {uri} with {token:?}");
            assert_eq!(
                headers[header::WWW_AUTHENTICATE],
                "Bearer realm=\"weir admin\""
            );
        }
    }
    // A token sent another way than `Bearer` is refused too.
    let request = Request::get("/admin/api/rules")
        .header(header::AUTHORIZATION, format!("Basic {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let status = weir
        .admin
        .call(request, "127.0.0.1:1".parse().unwrap())
        .await
        .status();
    assert_eq!(status, 401);
    // The page itself holds no data, and is served without the token.
    let (status, headers, page) = weir.admin("GET", "/admin/", None, "").await;
    assert_eq!(status, 200);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    assert!(page.contains("weir status") && !page.contains(TOKEN));
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
    let (status, headers, _) = weir.admin("GET", "/admin/page.js", None, "").await;
    assert_eq!(status, 200);
    assert_eq!(
        headers[header::CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
}

#[tokio::test]
async fn a_locked_out_caller_is_inspected_listed_and_unlocked() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let weir = Weir::start(app.addr, dir.path());
    for _ in 0..5 {
        assert_eq!(weir.login("guess").await, 401);
    }
    for _ in 0..3 {
        assert_eq!(weir.login("right").await, 429, "locked out");
    }
    weir.clock.advance(Duration::from_secs(30));

    let key = |rule: &str| {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("rule", rule)
            .append_pair("key", ANA)
            .finish();
        format!("/admin/api/key?{query}")
    };
    let state = weir.admin_json(&key("login-account-ip")).await;
    assert_eq!(state["key"], ANA);
    assert_eq!(state["limit"], 5);
    assert_eq!(state["remaining"], 0);
    assert_eq!(state["locked_out"], true);
    assert_eq!(
        state["locked_for_ms"], 870_000,
        "15 minutes from the fifth, 30 s on"
    );
    assert_eq!(state["lockouts"], 1);

    let top = weir
        .admin_json("/admin/api/top?rule=login-account-ip&minutes=5&n=5")
        .await;
    assert_eq!(
        top["top"],
        serde_json::json!([{"identity": ANA, "denied": 3, "error": 0}])
    );

    let rules = weir.admin_json("/admin/api/rules").await;
    let pair = &rules.as_array().unwrap()[0];
    assert_eq!(pair["name"], "login-account-ip");
    assert_eq!(pair["allowed_total"], 5);
    assert_eq!(pair["denied_total"], 3);
    assert_eq!(pair["near_limit_keys"], 1);

    // Unlocked: the owner's right password reaches the app at once.
    let reset = serde_json::json!({"rule": "login-account-ip", "key": ANA}).to_string();
    let (status, _, body) = weir
        .admin("POST", "/admin/api/reset", Some(TOKEN), &reset)
        .await;
    assert_eq!(status, 200, "{body}");
    let state = weir.admin_json(&key("login-account-ip")).await;
    assert_eq!(
        (
            &state["remaining"],
            &state["locked_out"],
            &state["lockouts"]
        ),
        (
            &serde_json::json!(5),
            &serde_json::json!(false),
            &serde_json::json!(0)
        )
    );
    assert_eq!(weir.login("right").await, 200);
}

#[tokio::test]
async fn the_admin_api_refuses_bad_questions() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let weir = Weir::start(app.addr, dir.path());
    let cases = [
        ("GET", "/admin/api/key?rule=nope&key=x", "", 404),
        ("GET", "/admin/api/key?rule=login-account-ip", "", 400),
        ("GET", "/admin/api/key?rule=login-account-ip&key=", "", 400),
        (
            "GET",
            "/admin/api/key?rule=login-account-ip&key=a&key=b",
            "",
            400,
        ),
        ("GET", "/admin/api/top?rule=nope", "", 404),
        (
            "GET",
            "/admin/api/top?rule=login-account-ip&minutes=0",
            "",
            400,
        ),
        (
            "GET",
            "/admin/api/top?rule=login-account-ip&n=1000",
            "",
            400,
        ),
        ("GET", "/admin/api/top?rule=login-account-ip&n=-1", "", 400),
        (
            "GET",
            "/admin/api/top?rule=login-account-ip&minute=1",
            "",
            400,
        ),
        (
            "GET",
            "/admin/api/key?rule=login-account-ip&key=%FF%FE",
            "",
            400,
        ),
        ("POST", "/admin/api/reset", "{", 400),
        (
            "POST",
            "/admin/api/reset",
            r#"{"rule":"login-account-ip"}"#,
            400,
        ),
        (
            "POST",
            "/admin/api/reset",
            r#"{"rule":"login-account-ip","key":""}"#,
            400,
        ),
        (
            "POST",
            "/admin/api/reset",
            r#"{"rule":"nope","key":"x"}"#,
            404,
        ),
        (
            "POST",
            "/admin/api/reset",
            r#"{"rule":"login-account-ip","key":"x","all":true}"#,
            400,
        ),
        ("GET", "/admin/api/reset", "", 405),
    ];
    for (method, uri, body, expected) in cases {
        let (status, _, text) = weir.admin(method, uri, Some(TOKEN), body).await;
        assert_eq!(status, expected, "{method} {uri} {body}: {text}");
    }
    let (status, _, _) = weir
        .admin("POST", "/admin/api/reset", Some(TOKEN), &"x".repeat(10_000))
        .await;
    assert_eq!(status, 413);
}

#[tokio::test]
async fn decision_rates_are_taken_over_the_last_minute() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let weir = Weir::start(app.addr, dir.path());
    let metrics = weir.service.metrics.clone();
    metrics.sample();
    // Two minutes: one success a second, sampled every five seconds.
    for second in 1..=120 {
        weir.clock.advance(Duration::from_secs(1));
        assert_eq!(weir.login("right").await, 200);
        if second % 5 == 0 {
            metrics.sample();
        }
    }
    let rules = weir.admin_json("/admin/api/rules").await;
    let pair = &rules.as_array().unwrap()[0];
    assert_eq!(pair["rates_over_seconds"], 60.0);
    assert_eq!(pair["allowed_per_second"], 1.0);
    assert_eq!(pair["denied_per_second"], 0.0);
}

#[tokio::test]
async fn the_admin_api_is_only_on_the_admin_listener_and_only_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let text = login_config(app.addr, dir.path()).replace("\nadmin:\n  token_file: token\n", "");
    let config = Config::parse(&text, &dir.path().join("login.yaml")).unwrap();
    assert!(!config.has_admin());
    let service = small_service(&config);
    let admin_listener = weir::admin_router(&service);
    let get = |uri: &str| {
        Request::get(uri)
            .header("host", "app.test")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .body(Body::empty())
            .unwrap()
    };
    for uri in ["/admin/", "/admin/api/rules", "/admin/page.js"] {
        let response = admin_listener
            .call(get(uri), "127.0.0.1:1".parse().unwrap())
            .await;
        assert_eq!(response.status(), 404, "{uri} without an admin section");
    }
    // With one, the admin listener serves it; the gateway's port never does: there the
    // request goes on to the app, which knows no such path.
    let weir = Weir::start(app.addr, dir.path());
    let (status, _, _) = weir.admin("GET", "/admin/api/rules", Some(TOKEN), "").await;
    assert_eq!(status, 200);
    let gateway = weir.service.gateway.clone().unwrap();
    for uri in ["/admin/", "/admin/api/rules"] {
        let response = gateway
            .call(get(uri), "203.0.113.9:1".parse().unwrap())
            .await;
        assert_eq!(response.status(), 404, "{uri}");
        assert!(
            !response.headers().contains_key(header::CONTENT_TYPE),
            "the app's bare 404, not weir's problem"
        );
    }
}

#[tokio::test]
async fn a_reload_rotates_the_admin_token_and_cannot_remove_the_admin_api() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let path = dir.path().join("login.yaml");
    std::fs::write(&path, login_config(app.addr, dir.path())).unwrap();
    let config = Config::load(&path).unwrap();
    let mut service = small_service(&config);
    let admin = weir::admin_router(&service);
    let status = |token: &str| {
        let request = Request::get("/admin/api/rules")
            .header(header::AUTHORIZATION, format!("bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let call = admin.call(request, "127.0.0.1:1".parse().unwrap());
        async move { call.await.status().as_u16() }
    };
    assert_eq!(status(TOKEN).await, 200, "the scheme is case-insensitive");
    let rotated = "a-new-admin-token-after-a-leak";
    std::fs::write(dir.path().join("token"), rotated).unwrap();
    service.reload(&path).await.unwrap();
    assert_eq!(status(TOKEN).await, 401, "the old token stops working");
    assert_eq!(status(rotated).await, 200);

    let without = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\nadmin:\n  token_file: token\n", "");
    std::fs::write(&path, without).unwrap();
    let refused = service.reload(&path).await.unwrap_err().to_string();
    assert!(refused.contains("`admin` needs a restart"), "{refused}");
    assert_eq!(
        status(rotated).await,
        200,
        "the old configuration keeps serving"
    );
}

#[test]
fn admin_tokens_are_checked_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let base = "rules:\n  - {name: api, algorithm: gcra, limit: 10, period: 1m}\n";
    let load = |admin: &str| {
        let text = format!("{base}admin:\n{admin}");
        Config::parse(&text, &dir.path().join("weir.yaml")).map(|c| c.has_admin())
    };
    std::fs::write(dir.path().join("short"), "too-short\n").unwrap();
    std::fs::write(dir.path().join("good"), format!("{TOKEN}\n")).unwrap();
    assert!(load("  token_file: good\n").unwrap());
    for (admin, says) in [
        ("  token_file: short\n", "at least 16 bytes"),
        ("  token_file: missing\n", "cannot read"),
        (
            "  token_env: WEIR_TEST_SURELY_UNSET_VARIABLE\n",
            "is not set",
        ),
        ("  token_file: good\n  token_env: X\n", "exactly one of"),
        ("  {}\n", "exactly one of"),
        ("  token: inline-secrets-are-refused\n", "unknown field"),
    ] {
        let error = load(admin).unwrap_err().to_string();
        assert!(error.contains(says), "{admin}: {error}");
        assert!(error.contains("admin"), "{error}");
    }
}

/// The real binary with the login example and an admin token, in front of `app`;
/// its stderr (JSON logs) goes to `log`.
fn start_binary(app: SocketAddr, dir: &Path, log: &Path) -> common::Server {
    let config = dir.join("login.yaml");
    std::fs::write(&config, login_config(app, dir)).unwrap();
    let log = std::fs::File::create(log).unwrap();
    common::Server::start_with(&config, &["--log-format", "json"], log.into())
}

/// A login attempt through the binary; returns the status.
async fn login_at(gateway: &str, password: &str) -> u16 {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Body>();
    let request = Request::post(format!("http://{gateway}/login"))
        .header("content-type", "application/json")
        .body(Body::from(format!(
            r#"{{"email":"ana@example.com","password":"{password}"}}"#
        )))
        .unwrap();
    client.request(request).await.unwrap().status().as_u16()
}

/// Where the test leaves the status page's screenshot.
fn screenshot_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_TMPDIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    target.join("weir-status-page.png")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_rules_and_limited_callers_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let log = dir.path().join("weir.log");
    let binary = start_binary(app.addr, dir.path(), &log);
    let admin = binary
        .admin
        .clone()
        .expect("gateway mode has an admin listener");
    for _ in 0..5 {
        assert_eq!(login_at(&binary.addr, "guess").await, 401);
    }
    for _ in 0..10 {
        assert_eq!(login_at(&binary.addr, "guess").await, 429);
    }

    // A deny list entry set at runtime, shown in its own table.
    tokio::task::block_in_place(|| {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&admin).unwrap();
        let body = r#"{"reason": "scraping"}"#;
        write!(
            stream,
            "PUT /admin/api/lists/deny/client_ip/192.0.2.0%2F24 HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    });

    let chromium = std::env::var("WEIR_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let page = format!("http://{admin}/admin/#token={TOKEN}");
    let shot = screenshot_path();
    let browse = |extra: &[String]| {
        let output = Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--window-size=1200,800",
                "--virtual-time-budget=5000",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("chromium").display()
            ))
            .args(extra)
            .arg(&page)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {chromium} (scripts/test installs it): {e}"));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let dom = tokio::task::block_in_place(|| browse(&["--dump-dom".to_owned()]));
    // Rendered by the page's script from the admin API, with the token it was given.
    for shown in [
        r#"<tr data-rule="login-account-ip"><td>login-account-ip</td><td>sliding_log</td><td class="n">5</td><td class="n">15 min</td>"#,
        r#"<table data-rule="login-account-ip"><caption>login-account-ip</caption>"#,
        "<code>email=ana@example.com&amp;client_ip=127.0.0.1</code>",
        // The traffic by door: 15 answers of the gateway, all 4xx (5 failed logins,
        // then 10 denials).
        r#"<tr data-door="gateway"><td>gateway</td>"#,
        r#"<td class="n">0</td><td class="n deny">15</td><td class="n">0</td><td class="n">15</td></tr>"#,
        // The bans in force (this configuration bans no one).
        r#"<td class="muted" colspan="4">No ban in force.</td>"#,
        // The runtime list entries.
        r#"<tr data-list="deny"><td class="deny">deny</td><td>client_ip</td><td><code>192.0.2.0/24</code></td><td>never</td><td>scraping</td>"#,
        "updated ",
    ] {
        assert!(dom.contains(shown), "the page lacks {shown}:\n{dom}");
    }
    assert!(!dom.contains(r#"<div id="status" class="error">"#), "{dom}");
    tokio::task::block_in_place(|| browse(&[format!("--screenshot={}", shot.display())]));
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a real picture"
    );
    println!("status page screenshot: {}", shot.display());

    // Without the token the page says so, and shows no data.
    let bare = format!("http://{admin}/admin/");
    let output = tokio::task::block_in_place(|| {
        Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--virtual-time-budget=3000",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("bare").display()
            ))
            .args(["--dump-dom", &bare])
            .output()
            .unwrap()
    });
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(
        dom.contains(r#"<div id="status" class="error">the admin token was not accepted</div>"#),
        "{dom}"
    );
    assert!(!dom.contains("<code>"), "{dom}");

    // The log: JSON lines; the ten denials of one caller by one rule logged once.
    drop(binary);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let denials: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "denied")
        .collect();
    assert_eq!(denials.len(), 1, "{text}");
    let fields = &denials[0]["fields"];
    assert_eq!(fields["rule"], "login-account-ip");
    assert_eq!(
        fields["identity"],
        "email=ana@example.com&client_ip=127.0.0.1"
    );
    assert_eq!(fields["client"], "127.0.0.1");
    assert_eq!(fields["plan"], "(none)");
    // The fifth failure locked the caller out: the line says who.
    let locked: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "caller locked out")
        .collect();
    assert_eq!(locked.len(), 1, "{text}");
    let fields = &locked[0]["fields"];
    assert_eq!(fields["rule"], "login-account-ip");
    assert_eq!(
        fields["identity"],
        "email=ana@example.com&client_ip=127.0.0.1"
    );
    assert_eq!(fields["lockout"], 1);
}

#[test]
fn a_check_denial_is_logged_with_its_rule_and_key_and_no_client() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weir.yaml");
    std::fs::write(
        &config,
        "rules:\n  - name: once\n    algorithm: fixed_window\n    limit: 1\n    period: 1h\n",
    )
    .unwrap();
    let log = dir.path().join("weir.log");
    let file = std::fs::File::create(&log).unwrap();
    let server = common::Server::start_with(&config, &["--log-format", "json"], file.into());
    let body = r#"{"rule": "once", "key": "user-42"}"#;
    assert_eq!(
        server.request("POST", "/v1/check", body).0,
        "HTTP/1.1 200 OK"
    );
    assert_eq!(
        server.request("POST", "/v1/check", body).0,
        "HTTP/1.1 429 Too Many Requests"
    );
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let denials: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["fields"]["message"] == "denied")
        .collect();
    assert_eq!(denials.len(), 1, "{text}");
    let fields = &denials[0]["fields"];
    assert_eq!(
        (&fields["rule"], &fields["identity"], &fields["plan"]),
        (
            &serde_json::json!("once"),
            &serde_json::json!("user-42"),
            &serde_json::json!("(none)")
        )
    );
    // The address that sent a check is the app's, not its caller's: not logged.
    assert_eq!(fields.get("client"), None, "{text}");
}

/// The metric names an expression uses (`weir_...`).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("weir_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.push(name);
    }
    names
}

#[tokio::test]
async fn the_grafana_dashboard_queries_only_metrics_weir_serves() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let weir = Weir::start(app.addr, dir.path());
    assert_eq!(weir.login("guess").await, 401);
    let (_, _, text) = weir.admin("GET", "/metrics", None, "").await;
    let served: std::collections::HashSet<String> = parse_openmetrics(&text)
        .into_keys()
        .map(|k| k.split('{').next().unwrap().to_owned())
        .collect();

    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/grafana/weir.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for name in metric_names(expr) {
                queried += 1;
                assert!(
                    served.contains(&name),
                    "panel {:?} queries {name}, which weir does not serve ({served:?})",
                    panel["title"]
                );
            }
        }
    }
    assert!(queried >= 20, "{queried}");
}

#[tokio::test]
async fn reloads_are_counted_and_the_served_configuration_is_named_by_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    let first = "rules:\n  - {name: api, algorithm: gcra, limit: 10, period: 1m}\n";
    std::fs::write(&path, first).unwrap();
    let config = Config::load(&path).unwrap();
    let mut service = small_service(&config);
    let scrape = |service: &Instance| parse_openmetrics(&service.metrics.encode());
    let hash_of = |samples: &HashMap<String, f64>| {
        let loaded: Vec<&String> = samples
            .keys()
            .filter(|k| k.starts_with("weir_config_loaded{"))
            .collect();
        assert_eq!(loaded.len(), 1, "one configuration serves: {loaded:?}");
        loaded[0].clone()
    };
    let before = scrape(&service);
    assert!(hash_of(&before).contains(&config.sha256));
    assert_eq!(
        sample(&before, r#"weir_config_reloads_total{result="ok"}"#),
        0.0
    );

    std::fs::write(&path, first.replace("limit: 10", "limit: 20")).unwrap();
    service.reload(&path).await.unwrap();
    std::fs::write(&path, "rules: [oops").unwrap();
    assert!(service.reload(&path).await.is_err());
    let after = scrape(&service);
    assert_eq!(
        sample(&after, r#"weir_config_reloads_total{result="ok"}"#),
        1.0
    );
    assert_eq!(
        sample(&after, r#"weir_config_reloads_total{result="refused"}"#),
        1.0
    );
    let second = Config::parse(
        &first.replace("limit: 10", "limit: 20"),
        Path::new("x.yaml"),
    )
    .unwrap();
    assert!(
        hash_of(&after).contains(&second.sha256),
        "the refused file never served"
    );
    assert_ne!(config.sha256, second.sha256);
}

#[tokio::test]
async fn a_long_key_counted_by_the_decision_api_is_found_and_reset_by_the_admin_api() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start().await;
    let weir = Weir::start(app.addr, dir.path());
    let long = "L".repeat(200);
    let check = serde_json::json!({"rule": "login-account-ip", "key": long}).to_string();
    for expected in [200, 200, 200, 200, 200, 429] {
        let (status, _, body) = weir.admin("POST", "/v1/check", None, &check).await;
        assert_eq!(status, expected, "{body}");
    }
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("rule", "login-account-ip")
        .append_pair("key", &long)
        .finish();
    let state = weir.admin_json(&format!("/admin/api/key?{query}")).await;
    assert_eq!(state["remaining"], 0, "{state}");
    assert!(
        state["key"].as_str().unwrap().starts_with('#'),
        "kept as its hash"
    );
    let reset = serde_json::json!({"rule": "login-account-ip", "key": long}).to_string();
    let (status, _, _) = weir
        .admin("POST", "/admin/api/reset", Some(TOKEN), &reset)
        .await;
    assert_eq!(status, 200);
    let (status, _, body) = weir.admin("POST", "/v1/check", None, &check).await;
    assert_eq!(status, 200, "reset: {body}");
}
