//! One request, one identity: variants of a request (path spellings, host spellings,
//! body encodings, duplicate fields, mapped and rotating addresses) are counted where
//! the app acts on them, forwarded as decided, or refused. The gateway runs in
//! process in front of an upstream that echoes what it received.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::Value;
use weir::Config;
use weir::Gateway;
use weir::{Handler, Instance, Reloadable};
use weir_core::ManualClock;
use weir_store::{MemoryStore, MemoryStoreConfig};

/// 2026-11-30 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;

struct Weir {
    gateway: Reloadable<Gateway>,
}

/// What came back: the status, the RateLimit item, and what the upstream saw.
#[derive(Debug)]
struct Reply {
    status: u16,
    ratelimit: Option<String>,
    seen: Value,
}

impl Weir {
    /// The gateway with `config`; lines of it that start with two spaces continue the
    /// `upstream` section.
    async fn start(config: &str) -> Self {
        let upstream = common::echo::start().await;
        let text = format!("upstream:\n  url: http://{upstream}\n{config}");
        let config = Config::parse(&text, Path::new("reading.yaml")).unwrap();
        let clock = Arc::new(ManualClock::new(MIDNIGHT));
        let store = Arc::new(MemoryStore::new(
            MemoryStoreConfig::default(),
            clock.clone(),
        ));
        let service = Instance::with_store(&config, store, clock);
        Self {
            gateway: service.gateway.clone().unwrap(),
        }
    }

    async fn send(&self, peer: &str, request: Request<Body>) -> Reply {
        let peer = SocketAddr::new(peer.parse().unwrap(), 40000);
        let response = self.gateway.call(request, peer).await;
        let status = response.status().as_u16();
        let ratelimit = response
            .headers()
            .get("ratelimit")
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let seen = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            ratelimit,
            seen,
        }
    }

    async fn get(&self, peer: &str, method: &str, target: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = Request::builder().method(method).uri(target);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(peer, request.body(Body::empty()).unwrap()).await
    }

    async fn post(&self, peer: &str, target: &str, content_type: &str, body: &[u8]) -> Reply {
        self.post_with(peer, target, &[("content-type", content_type)], body)
            .await
    }

    async fn post_with(
        &self,
        peer: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let mut request = Request::post(target).header("host", "app.test");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = Body::from(body.to_vec());
        self.send(peer, request.body(body).unwrap()).await
    }
}

const PATHS: &str = "\
rules:
  - name: login
    match: { methods: [POST], path: /login }
    algorithm: gcra
    limit: 1
    period: 1h
  - name: admin
    match: { path: /Admin, case_insensitive: false, trailing_slash: false }
    algorithm: gcra
    limit: 1
    period: 1h
  - name: books
    match: { methods: [GET], path: \"/books/{id}\" }
    algorithm: gcra
    limit: 1
    period: 1h
  - name: api
    match: { path_prefix: /api/ }
    algorithm: gcra
    limit: 60
    period: 1m
    costs:
      - { match: { path_prefix: /api/exports/ }, cost: 50 }
";

#[tokio::test]
async fn path_spellings_are_counted_as_the_path_the_app_routes() {
    let weir = Weir::start(PATHS).await;
    let variants = [
        ("//login", "/login"),
        ("/%6Cogin", "/login"),
        ("/./login", "/login"),
        ("/x/../login", "/login"),
        ("/../login", "/login"),
        ("/login;jsessionid=1", "/login;jsessionid=1"),
        ("/%6c%6F%67%69%6e", "/login"),
    ];
    for (i, (variant, forwarded)) in variants.into_iter().enumerate() {
        let ip = format!("192.0.2.{}", i + 1);
        let first = weir.post(&ip, variant, "text/plain", b"").await;
        assert_eq!(first.status, 200, "{variant}");
        assert_eq!(
            first.seen["path"], forwarded,
            "{variant} is forwarded as decided"
        );
        assert_eq!(
            first.ratelimit.as_deref(),
            Some("\"login\";r=0;t=3600"),
            "{variant}"
        );
        let again = weir.post(&ip, "/login", "text/plain", b"").await;
        assert_eq!(again.status, 429, "{variant} was counted as /login");
    }
}

#[tokio::test]
async fn case_and_trailing_slashes_match_unless_the_rule_opts_out() {
    let weir = Weir::start(PATHS).await;
    // By default /LOGIN/ is /login, as Express and Spring route it.
    for (i, variant) in ["/LOGIN", "/login/", "/Login/"].into_iter().enumerate() {
        let ip = format!("192.0.2.{}", i + 1);
        assert_eq!(weir.post(&ip, variant, "text/plain", b"").await.status, 200);
        let again = weir.post(&ip, "/login", "text/plain", b"").await;
        assert_eq!(again.status, 429, "{variant} was counted as /login");
    }
    // /Admin opts out: only that spelling is it.
    let lower = weir.get("192.0.2.9", "GET", "/admin/", &[]).await;
    assert_eq!((lower.status, lower.ratelimit), (200, None));
    assert_eq!(
        weir.get("192.0.2.9", "GET", "/Admin", &[]).await.status,
        200
    );
    assert_eq!(
        weir.get("192.0.2.9", "GET", "/Admin", &[]).await.status,
        429
    );
    // Patterns read segments canonically too; HEAD is limited as GET.
    assert_eq!(
        weir.get("192.0.2.3", "GET", "/books/%37", &[]).await.status,
        200
    );
    assert_eq!(
        weir.get("192.0.2.3", "HEAD", "/books//7", &[]).await.status,
        429
    );
}

#[tokio::test]
async fn escaped_slashes_and_unreadable_paths_are_refused() {
    let weir = Weir::start(PATHS).await;
    for target in [
        "/api%2Fexports/1",
        "/api%5cx",
        "/a/..;/login",
        "/%00login",
        "/%zzlogin",
    ] {
        let reply = weir.get("192.0.2.1", "GET", target, &[]).await;
        assert_eq!(reply.status, 400, "{target}");
        assert_eq!(reply.seen["type"], "/problems/invalid-request", "{target}");
    }
}

#[tokio::test]
async fn a_doubled_slash_does_not_make_an_export_cheap() {
    let weir = Weir::start(PATHS).await;
    let export = weir.get("192.0.2.1", "GET", "/api//exports/1", &[]).await;
    assert_eq!(export.status, 200);
    assert_eq!(export.seen["path"], "/api/exports/1");
    assert_eq!(export.ratelimit.as_deref(), Some("\"api\";r=10;t=50"));
}

const HOSTS: &str = "\
rules:
  - name: api
    match: { host: api.example.com }
    algorithm: gcra
    limit: 1
    period: 1h
";

#[tokio::test]
async fn host_spellings_are_one_host_and_unknown_hosts_are_refused() {
    let weir = Weir::start(HOSTS).await;
    for (i, host) in ["api.example.com.", "API.Example.COM:8080"]
        .into_iter()
        .enumerate()
    {
        let ip = format!("192.0.2.{}", i + 1);
        let first = weir.get(&ip, "GET", "/", &[("host", host)]).await;
        assert_eq!(first.status, 200, "{host}");
        let again = weir
            .get(&ip, "GET", "/", &[("host", "api.example.com")])
            .await;
        assert_eq!(again.status, 429, "{host} was counted as api.example.com");
    }
    // The absolute form names the host, and the app is told it.
    let absolute = weir
        .get("192.0.2.3", "GET", "http://api.example.com/x", &[])
        .await;
    assert_eq!(
        (absolute.status, &absolute.seen["host"]),
        (200, &"api.example.com".into())
    );
    assert_eq!(
        weir.get("192.0.2.3", "GET", "/", &[("host", "api.example.com")])
            .await
            .status,
        429
    );
    // A host the rules do not name, none, or two: refused.
    let ip_literal = weir
        .get("192.0.2.4", "GET", "/", &[("host", "127.0.0.1")])
        .await;
    assert_eq!(
        (ip_literal.status, &ip_literal.seen["type"]),
        (421, &"/problems/unknown-host".into())
    );
    assert_eq!(weir.get("192.0.2.4", "GET", "/", &[]).await.status, 400);
    let two = [("host", "api.example.com"), ("host", "other.example.com")];
    assert_eq!(weir.get("192.0.2.4", "GET", "/", &two).await.status, 400);
    let disagreeing = [("host", "other.example.com")];
    let reply = weir
        .get("192.0.2.4", "GET", "http://api.example.com/", &disagreeing)
        .await;
    assert_eq!(reply.status, 400);
}

#[tokio::test]
async fn unknown_hosts_go_on_unlimited_when_configured() {
    let weir = Weir::start(&format!("requests:\n  unknown_hosts: forward\n{HOSTS}")).await;
    let other = weir
        .get("192.0.2.1", "GET", "/", &[("host", "127.0.0.1")])
        .await;
    assert_eq!((other.status, other.ratelimit), (200, None));
}

const LOGIN: &str = "\
identities:
  email: { body_field: email, normalize: email }
rules:
  - name: account
    match: { methods: [POST], path: /login }
    key: [email]
    algorithm: gcra
    limit: 1
    period: 1h
";

#[tokio::test]
async fn one_account_however_its_body_writes_it() {
    let weir = Weir::start(LOGIN).await;
    let variants: [(&str, &[u8]); 8] = [
        (
            "application/json",
            br#"{"email": "ana@x.io", "password": "p"}"#,
        ),
        (
            "application/json; charset=UTF-8",
            br#"{"email": "ANA@X.IO"}"#,
        ),
        ("text/json", br#"{"email": " ana@x.io "}"#),
        ("application/vnd.api+json", br#"{"email": "\u0061na@x.io"}"#),
        (
            "application/json",
            "{\"email\": \"\u{ff41}na@x.io\"}".as_bytes(),
        ),
        (
            "application/json",
            "{\"email\": \"\u{200b}ana@x.io\u{feff}\"}".as_bytes(),
        ),
        ("application/json", br#"{"email": "ana@x.io", "n": 1e3}"#),
        (
            "application/x-www-form-urlencoded",
            b"email=Ana%40x.io&password=p",
        ),
    ];
    let first = weir
        .post("192.0.2.1", "/login", variants[0].0, variants[0].1)
        .await;
    assert_eq!(first.status, 200);
    for (i, (content_type, body)) in variants.into_iter().enumerate().skip(1) {
        // From other IPs: the account is the key.
        let ip = format!("198.51.100.{i}");
        let reply = weir.post(&ip, "/login", content_type, body).await;
        assert_eq!(
            reply.status,
            429,
            "{content_type} {}",
            String::from_utf8_lossy(body)
        );
    }
}

#[tokio::test]
async fn bodies_that_cannot_be_read_one_way_are_refused() {
    let weir = Weir::start(LOGIN).await;
    let json = "application/json";
    let refused: [(&str, &str, &[u8], u16); 12] = [
        (
            "/login",
            json,
            br#"{"email": "decoy@x.io", "email": "ana@x.io"}"#,
            400,
        ),
        (
            "/login",
            json,
            br#"{"email": "decoy@x.io", "EMAIL": "ana@x.io"}"#,
            400,
        ),
        (
            "/login",
            "application/x-www-form-urlencoded",
            b"email=decoy&email=ana@x.io",
            400,
        ),
        (
            "/login?email=ana@x.io",
            json,
            br#"{"email": "decoy@x.io"}"#,
            400,
        ),
        (
            "/login",
            json,
            b"\xef\xbb\xbf{\"email\": \"ana@x.io\"}",
            400,
        ),
        ("/login", json, br#"{"email": "ana@x.io", "n": 1e999}"#, 400),
        ("/login", json, br#"{"email": "\ud800@x.io"}"#, 400),
        ("/login", json, br#"{"email": ["ana@x.io"]}"#, 400),
        (
            "/login",
            "application/json; charset=utf-16",
            br#"{"email": "ana@x.io"}"#,
            415,
        ),
        ("/login", "multipart/form-data; boundary=x", b"--x\r\n", 415),
        ("/login", "text/plain", br#"{"email": "ana@x.io"}"#, 415),
        ("/login", json, &[b'['; 200], 400),
    ];
    for (target, content_type, body, status) in refused {
        let reply = weir.post("192.0.2.1", target, content_type, body).await;
        assert_eq!(
            reply.status,
            status,
            "{target} {content_type} {}",
            String::from_utf8_lossy(body)
        );
    }
    let gzip = [("content-type", json), ("content-encoding", "gzip")];
    let reply = weir
        .post_with("192.0.2.1", "/login", &gzip, b"\x1f\x8b...")
        .await;
    assert_eq!(reply.status, 415);
    // None of them was counted, and none reached the app.
    let ok = weir
        .post("192.0.2.1", "/login", json, br#"{"email": "ana@x.io"}"#)
        .await;
    assert_eq!(ok.status, 200);
}

const CLIENTS: &str = "\
client_ip:
  trusted_proxies: [10.0.0.0/8]
identities:
  api_key: { header: X-Api-Key }
rules:
  - name: per-ip
    match: { path: /ip }
    algorithm: gcra
    limit: 1
    period: 1h
  - name: per-key
    match: { path: /key }
    key: [api_key]
    algorithm: gcra
    limit: 5
    period: 1h
";

#[tokio::test]
async fn one_client_however_its_address_is_written() {
    let weir = Weir::start(CLIENTS).await;
    assert_eq!(
        weir.get("::ffff:192.0.2.1", "GET", "/ip", &[]).await.status,
        200
    );
    assert_eq!(
        weir.get("192.0.2.1", "GET", "/ip", &[]).await.status,
        429,
        "IPv4-mapped is IPv4"
    );
    assert_eq!(
        weir.get("2001:db8:1:2::1", "GET", "/ip", &[]).await.status,
        200
    );
    assert_eq!(
        weir.get("2001:db8:1:2:ffff::9", "GET", "/ip", &[])
            .await
            .status,
        429,
        "an IPv6 client is its /64"
    );
    // Behind a trusted proxy (written as IPv4-mapped), the address it reports.
    let proxied = [("x-forwarded-for", "203.0.113.50")];
    assert_eq!(
        weir.get("::ffff:10.0.0.1", "GET", "/ip", &proxied)
            .await
            .status,
        200
    );
    assert_eq!(
        weir.get("203.0.113.50", "GET", "/ip", &[]).await.status,
        429
    );
}

#[tokio::test]
async fn what_an_untrusted_client_says_of_its_address_never_reaches_the_app() {
    let weir = Weir::start(CLIENTS).await;
    let spoofed = [("x-forwarded-for", "1.2.3.4"), ("x-real-ip", "1.2.3.4")];
    let reply = weir.get("192.0.2.9", "GET", "/other", &spoofed).await;
    assert_eq!(reply.seen["x-forwarded-for"], "192.0.2.9");
    assert_eq!(reply.seen["x-real-ip"], "192.0.2.9");
    let chain = [("x-forwarded-for", "6.6.6.6, 192.0.2.50")];
    let reply = weir.get("10.1.2.3", "GET", "/other", &chain).await;
    assert_eq!(reply.seen["x-forwarded-for"], "192.0.2.50, 10.1.2.3");
    assert_eq!(reply.seen["x-real-ip"], "192.0.2.50");
}

#[tokio::test]
async fn an_identity_header_sent_twice_is_refused() {
    let weir = Weir::start(CLIENTS).await;
    let twice = [("x-api-key", "victim"), ("x-api-key", "attacker")];
    let reply = weir.get("192.0.2.1", "GET", "/key", &twice).await;
    assert_eq!(reply.status, 400);
    let once = weir
        .get("192.0.2.1", "GET", "/key", &[("x-api-key", "victim")])
        .await;
    assert_eq!(once.ratelimit.as_deref(), Some("\"per-key\";r=4;t=720"));
}

/// Bodies being read are bounded across all requests: a flood of slow bodies on a
/// route keyed by a body field gets 503s, not the gateway's memory.
#[tokio::test]
async fn bodies_being_read_are_bounded_across_requests() {
    use http_body_util::channel::Channel;

    let config = format!("  max_body_bytes: 1024\n  max_buffered_bytes: 2048\n{LOGIN}");
    let weir = Arc::new(Weir::start(&config).await);
    let mut senders = Vec::new();
    let mut slow = Vec::new();
    for i in 0..2 {
        let (sender, body) = Channel::<bytes::Bytes>::new(1);
        senders.push(sender);
        let request = Request::post("/login")
            .header("host", "app.test")
            .header("content-type", "application/json")
            .body(Body::new(body))
            .unwrap();
        let weir = Arc::clone(&weir);
        slow.push(tokio::spawn(async move {
            weir.send(&format!("192.0.2.{}", i + 1), request).await
        }));
    }
    // Both slow bodies hold their room (once their tasks have run up to reading);
    // the next one is turned away at once.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    let refused = weir
        .post(
            "192.0.2.9",
            "/login",
            "application/json",
            br#"{"email": "a@x.io"}"#,
        )
        .await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.seen["type"], "/problems/busy");
    for (i, mut sender) in senders.into_iter().enumerate() {
        let body = format!(r#"{{"email": "slow-{i}@x.io"}}"#);
        sender.send_data(body.into()).await.unwrap();
    }
    for request in slow {
        assert_eq!(
            request.await.unwrap().status,
            200,
            "the slow bodies were read and decided"
        );
    }
}

const TOKENS: &str = "\
identities:
  user:
    jwt: { claim: sub, hs256_secret: a-secret-of-sixteen-bytes, audience: api, issuer: https://auth.example }
rules:
  - name: per-user
    match: { path: /me }
    key: [user]
    algorithm: gcra
    limit: 1
    period: 1h
";

/// A token is the caller's only when its signature, times, audience and issuer all
/// hold; any other is anonymous (counted by IP), never the user it names.
#[tokio::test]
async fn tokens_count_for_their_user_only_when_every_claim_holds() {
    use jsonwebtoken::{EncodingKey, Header, encode};

    let weir = Weir::start(TOKENS).await;
    // The engine's clock: tokens are judged by it.
    let now = MIDNIGHT / 1_000_000_000;
    let key = EncodingKey::from_secret(b"a-secret-of-sixteen-bytes").unwrap();
    let token = |claims: Value| {
        let token = encode(&Header::default(), &claims, &key).unwrap();
        format!("Bearer {token}")
    };
    let good = serde_json::json!({"sub": "u1", "exp": now + 600, "aud": "api", "iss": "https://auth.example"});
    let bad = [
        serde_json::json!({"sub": "u1", "exp": now + 600, "aud": "other", "iss": "https://auth.example"}),
        serde_json::json!({"sub": "u1", "exp": now + 600, "aud": "api", "iss": "https://evil.example"}),
        serde_json::json!({"sub": "u1", "exp": now + 600, "iss": "https://auth.example"}),
        serde_json::json!({"sub": "u1", "exp": now + 600, "nbf": now + 3600, "aud": "api", "iss": "https://auth.example"}),
    ];
    assert_eq!(me(&weir, "192.0.2.1", token(good.clone())).await, 200);
    assert_eq!(
        me(&weir, "192.0.2.2", token(good)).await,
        429,
        "u1 is counted as u1 from anywhere"
    );
    for (i, claims) in bad.into_iter().enumerate() {
        let ip: &'static str = [
            "198.51.100.1",
            "198.51.100.2",
            "198.51.100.3",
            "198.51.100.4",
        ][i];
        assert_eq!(
            me(&weir, ip, token(claims.clone())).await,
            200,
            "{claims}: anonymous, not u1"
        );
        assert_eq!(
            me(&weir, ip, token(claims.clone())).await,
            429,
            "{claims}: counted by its IP"
        );
    }
}

/// A token sent twice could be read as either by the app: refused, whichever of the
/// two is valid, never counted as the first one's user or as anonymous.
#[tokio::test]
async fn a_token_sent_twice_is_refused() {
    use jsonwebtoken::{EncodingKey, Header, encode};

    let weir = Weir::start(TOKENS).await;
    let now = MIDNIGHT / 1_000_000_000;
    let key = EncodingKey::from_secret(b"a-secret-of-sixteen-bytes").unwrap();
    let claims = serde_json::json!({"sub": "u1", "exp": now + 600, "aud": "api", "iss": "https://auth.example"});
    let token = format!(
        "Bearer {}",
        encode(&Header::default(), &claims, &key).unwrap()
    );
    for first in ["Bearer garbage", token.as_str()] {
        let headers = [("authorization", first), ("authorization", token.as_str())];
        let reply = weir.get("192.0.2.9", "GET", "/me", &headers).await;
        assert_eq!(reply.status, 400, "{first}");
    }
    // u1's budget was never touched by them.
    assert_eq!(me(&weir, "192.0.2.9", token).await, 200);
}

async fn me(weir: &Weir, ip: &str, authorization: String) -> u16 {
    let headers = [("authorization", authorization.as_str())];
    weir.get(ip, "GET", "/me", &headers).await.status
}

/// Methods and headers that make apps route a request otherwise are read as the app
/// reads them, or refused.
#[tokio::test]
async fn methods_and_rerouting_headers_are_read_one_way() {
    let weir = Weir::start(PATHS).await;
    // `post` is routed as POST by WSGI apps: it is counted as POST, and forwarded so.
    let lower = weir.get("192.0.2.1", "post", "/login", &[]).await;
    assert_eq!((lower.status, &lower.seen["method"]), (200, &"POST".into()));
    assert_eq!(
        weir.get("192.0.2.1", "POST", "/login", &[]).await.status,
        429
    );
    let refused: [&[(&str, &str)]; 4] = [
        &[("x-http-method-override", "POST")],
        &[("x-original-url", "/login")],
        &[("connection", "host"), ("host", "app.test")],
        &[("connection", "x-api-key"), ("x-api-key", "k")],
    ];
    for headers in refused {
        let reply = weir.get("192.0.2.2", "GET", "/books/1", headers).await;
        assert_eq!(reply.status, 400, "{headers:?}");
    }
}

#[tokio::test]
async fn identity_headers_spelled_with_underscores_are_refused() {
    let weir = Weir::start(CLIENTS).await;
    let both = [("x-api-key", "victim"), ("x_api_key", "attacker")];
    assert_eq!(
        weir.get("192.0.2.1", "GET", "/key", &both).await.status,
        400
    );
}

#[tokio::test]
async fn a_form_that_reads_as_json_is_refused() {
    let weir = Weir::start(LOGIN).await;
    let body = br#"{"email":"victim@x.io","password":"p"}&email=decoy@x.io"#;
    let form = "application/x-www-form-urlencoded";
    assert_eq!(
        weir.post("192.0.2.1", "/login", form, body).await.status,
        400
    );
}

#[tokio::test]
async fn long_identities_keep_their_own_keys() {
    let weir = Weir::start(LOGIN).await;
    let long = "a".repeat(900);
    for tail in ["1@x.io", "2@x.io"] {
        let body = format!(r#"{{"email": "{long}{tail}"}}"#);
        let reply = weir
            .post("192.0.2.1", "/login", "application/json", body.as_bytes())
            .await;
        assert_eq!(reply.status, 200, "{tail}: its own budget");
    }
    let body = format!(r#"{{"email": "{long}1@x.io"}}"#);
    let again = weir
        .post("192.0.2.1", "/login", "application/json", body.as_bytes())
        .await;
    assert_eq!(again.status, 429);
}

/// Behind proxies that write `Forwarded`, only `Forwarded` is read: a client's own
/// `X-Forwarded-For` picks no address.
#[tokio::test]
async fn only_the_header_the_proxies_write_names_the_client() {
    let config = CLIENTS.replace(
        "  trusted_proxies: [10.0.0.0/8]\n",
        "  trusted_proxies: [10.0.0.0/8]\n  header: forwarded\n",
    );
    let weir = Weir::start(&config).await;
    let spoofing = [
        ("forwarded", "for=192.0.2.60"),
        ("x-forwarded-for", "6.6.6.6"),
    ];
    let reply = weir.get("10.0.0.1", "GET", "/ip", &spoofing).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.seen["x-forwarded-for"], "192.0.2.60, 10.0.0.1");
    let again = [
        ("forwarded", "for=192.0.2.60"),
        ("x-forwarded-for", "7.7.7.7"),
    ];
    let reply = weir.get("10.0.0.1", "GET", "/ip", &again).await;
    assert_eq!(
        reply.status, 429,
        "still 192.0.2.60, whatever X-Forwarded-For says"
    );
}

/// A target with no path (CONNECT's authority form) is read as `/`: rules for every
/// path count it.
#[tokio::test]
async fn a_target_without_a_path_is_read_as_the_root() {
    let all = "rules:\n  - { name: all, match: { path_prefix: / }, algorithm: gcra, limit: 1, period: 1h }\n";
    let weir = Weir::start(all).await;
    let first = weir.get("192.0.2.1", "CONNECT", "api.test:443", &[]).await;
    assert_ne!(first.status, 429);
    let again = weir.get("192.0.2.1", "CONNECT", "api.test:443", &[]).await;
    assert_eq!(again.status, 429, "counted under the rule for /");
}
