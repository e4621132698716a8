//! Bans (`on_limited`) and allow and deny lists (`lists:`), in process on the memory
//! store and a manual clock: a key denied `after` times is refused until its ban ends
//! (429 or 403, `Retry-After` and RateLimit fields to the ban's end) at no store step
//! while its ban is cached, listed and lifted through the admin API, counted; deny
//! lists refuse (403 problem+json) whatever the spelling of the address, allow lists
//! skip the rules and still report their fields; and `check-config`'s errors for each
//! new field. Two instances on Redis and reloads
//! are in `bans_redis.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, header};
use serde_json::Value;
use weir::{Config, Handler, Instance};
use weir_core::{Clock, ManualClock};
use weir_store::{MemoryStore, MemoryStoreConfig};

/// 2026-12-01 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;
const TOKEN: &str = "test-admin-token-0123456789";

/// `/api`: 2 a minute per client, banned for 15 minutes after 3 denials in 10;
/// `/strict`: 1 a minute, banned for 1 minute with 403 after 1 denial. Global lists:
/// 203.0.113.0/24 denied, 10.0.0.0/8 and the key `internal-key` allowed; `/api`'s own
/// deny list holds 198.51.100.7.
const RULES: &str = "
identities:
  api_key: { header: x-api-key }
lists:
  allow: { client_ip: [10.0.0.0/8], api_keys_file: keys.txt }
  deny:  { client_ip: ['203.0.113.0/24'] }
rules:
  - name: api
    match: { path_prefix: /api }
    algorithm: gcra
    limit: 2
    period: 1m
    on_limited: { ban: 15m, after: 3, within: 10m }
    lists:
      deny: { client_ip: [198.51.100.7] }
  - name: strict
    match: { path_prefix: /strict }
    algorithm: fixed_window
    limit: 1
    period: 1m
    on_limited: { ban: 1m, after: 1, within: 1m, status: 403 }
";

struct Weir {
    service: Instance,
    admin: Router,
    clock: Arc<ManualClock>,
    _dir: tempfile::TempDir,
}

struct Reply {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }
}

impl Weir {
    async fn start() -> Self {
        let upstream = common::echo::start().await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        std::fs::write(dir.path().join("keys.txt"), "# internal\ninternal-key\n").unwrap();
        let text =
            format!("upstream:\n  url: http://{upstream}\n{RULES}admin:\n  token_file: token\n");
        let path = dir.path().join("weir.yaml");
        std::fs::write(&path, &text).unwrap();
        let config = Config::parse(&text, &path).unwrap();
        let clock = Arc::new(ManualClock::new(MIDNIGHT));
        let store = Arc::new(MemoryStore::new(
            MemoryStoreConfig { max_keys: 10_000 },
            clock.clone(),
        ));
        let service = Instance::with_store(&config, store, clock.clone() as Arc<dyn Clock>);
        let admin = weir::admin_router(&service);
        Self {
            service,
            admin,
            clock,
            _dir: dir,
        }
    }

    /// A request through the gateway from `client`, with `headers`.
    async fn get(&self, path: &str, client: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = Request::get(path).header(header::HOST, "app.test");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let peer = SocketAddr::new(client.parse::<IpAddr>().unwrap(), 40000);
        let gateway = self.service.gateway.clone().unwrap();
        reply(
            gateway
                .call(request.body(Body::empty()).unwrap(), peer)
                .await,
        )
        .await
    }

    /// An admin listener request, with the token.
    async fn admin(&self, method: &str, uri: &str, body: &str) -> Reply {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        let response = self
            .admin
            .call(request, "127.0.0.1:1".parse().unwrap())
            .await;
        reply(response).await
    }

    /// The value of the metrics series `series` (0 when absent).
    async fn metric(&self, series: &str) -> u64 {
        let text = self.admin("GET", "/metrics", "").await.body;
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0)
    }
}

async fn reply(response: axum::response::Response) -> Reply {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

const ANA: &str = "192.0.2.7";

/// The third denial within ten minutes bans the client for fifteen: refused whatever
/// its budget, with `Retry-After` and `RateLimit` counting down to the ban's end, until
/// the clock reaches it. Another client is not touched.
#[tokio::test]
async fn a_key_denied_after_times_is_banned_until_the_ban_ends() {
    let weir = Weir::start().await;
    for _ in 0..2 {
        assert_eq!(weir.get("/api/x", ANA, &[]).await.status, 200);
    }
    for _ in 0..3 {
        let denied = weir.get("/api/x", ANA, &[]).await;
        assert_eq!(denied.status, 429);
        assert_eq!(denied.json()["type"], "/problems/rate-limited");
    }
    assert_eq!(
        weir.metric("weir_bans_started_total{rule=\"api\"}").await,
        1
    );

    // A minute on, the budget is back; the ban is not over.
    weir.clock.advance(Duration::from_secs(60));
    let banned = weir.get("/api/x", ANA, &[]).await;
    assert_eq!(banned.status, 429, "{}", banned.body);
    assert_eq!(banned.json()["type"], "/problems/banned");
    assert_eq!(banned.json()["violated"], serde_json::json!(["api"]));
    assert_eq!(banned.header("retry-after"), "840");
    assert_eq!(banned.header("ratelimit"), "\"api\";r=0;t=840");
    assert_eq!(banned.header("ratelimit-policy"), "\"api\";q=2;w=60");
    // Another client is not banned.
    assert_eq!(weir.get("/api/x", "192.0.2.8", &[]).await.status, 200);

    // Past the cache's trust, the store is read again: still banned, a second left.
    weir.clock.advance(Duration::from_secs(839));
    let last = weir.get("/api/x", ANA, &[]).await;
    assert_eq!((last.status, last.header("retry-after")), (429, "1"));
    assert_eq!(
        weir.metric("weir_ban_refusals_total{rule=\"api\"}").await,
        2
    );

    weir.clock.advance(Duration::from_secs(1));
    let free = weir.get("/api/x", ANA, &[]).await;
    assert_eq!(free.status, 200, "the ban is over: {}", free.body);
    assert_eq!(free.header("ratelimit"), "\"api\";r=1;t=30");
}

/// The requests' store steps so far: `weir_store_latency_seconds_count` of the
/// memory store's `check` operation.
async fn store_checks(weir: &Weir) -> u64 {
    let text = weir.admin("GET", "/metrics", "").await.body;
    text.lines()
        .find(|line| {
            line.starts_with("weir_store_latency_seconds_count{")
                && line.contains("operation=\"check\"")
                && line.contains("store=\"memory\"")
        })
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no store check count in {text}"))
}

/// A banned key's requests take no store step while its cached ban is fresh (half a
/// second, on the engine's clock): the store is never asked to check its budget. Past
/// that, one step reads the ban again, and the next half second is free once more.
#[tokio::test]
async fn a_banned_key_costs_no_store_step_while_its_ban_is_cached() {
    let weir = Weir::start().await;
    for expected in [200, 200, 429, 429, 429] {
        assert_eq!(weir.get("/api/x", ANA, &[]).await.status, expected);
    }
    let banned = |reply: Reply| {
        assert_eq!(reply.status, 429, "{}", reply.body);
        assert_eq!(reply.json()["type"], "/problems/banned");
    };
    let before = store_checks(&weir).await;
    for _ in 0..50 {
        banned(weir.get("/api/x", ANA, &[]).await);
    }
    assert_eq!(store_checks(&weir).await, before);
    // Another client's request is one step: the count is the store's.
    assert_eq!(weir.get("/api/x", "192.0.2.8", &[]).await.status, 200);
    assert_eq!(store_checks(&weir).await, before + 1);

    // Half a second on, the ban is read again in one step, then trusted anew.
    weir.clock.advance(Duration::from_millis(499));
    banned(weir.get("/api/x", ANA, &[]).await);
    assert_eq!(store_checks(&weir).await, before + 1);
    weir.clock.advance(Duration::from_millis(1));
    banned(weir.get("/api/x", ANA, &[]).await);
    assert_eq!(store_checks(&weir).await, before + 2);
    weir.clock.advance(Duration::from_millis(499));
    for _ in 0..50 {
        banned(weir.get("/api/x", ANA, &[]).await);
    }
    assert_eq!(store_checks(&weir).await, before + 2);
    // No budget was spent meanwhile: a minute after the last allowed request, lifted,
    // the key has its whole budget of 2.
    weir.clock.advance(Duration::from_secs(60));
    let lifted = weir
        .admin("DELETE", "/admin/api/bans/api/client_ip%3D192.0.2.7", "")
        .await;
    assert_eq!(lifted.status, 200, "{}", lifted.body);
    let free = weir.get("/api/x", ANA, &[]).await;
    assert_eq!(free.status, 200, "{}", free.body);
    assert_eq!(free.header("ratelimit"), "\"api\";r=1;t=30");
}

/// `status: 403` answers a banned key's requests with 403 and the same fields.
#[tokio::test]
async fn a_ban_may_answer_403() {
    let weir = Weir::start().await;
    assert_eq!(weir.get("/strict", ANA, &[]).await.status, 200);
    // The first denial is a plain 429, and starts the ban.
    assert_eq!(weir.get("/strict", ANA, &[]).await.status, 429);
    let banned = weir.get("/strict", ANA, &[]).await;
    assert_eq!(banned.status, 403);
    assert_eq!(banned.json()["type"], "/problems/banned");
    assert_eq!(banned.header("retry-after"), "60");
    assert_eq!(banned.header("content-type"), "application/problem+json");
}

/// The admin API lists the bans in force (by rule) and lifts one: the key's next
/// request is decided by its budget again, its denials forgotten.
#[tokio::test]
async fn a_ban_is_listed_and_lifted_through_the_admin_api() {
    let weir = Weir::start().await;
    for _ in 0..5 {
        weir.get("/api/x", ANA, &[]).await;
    }
    let listed = weir.admin("GET", "/admin/api/bans?rule=api", "").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(
        listed.json(),
        serde_json::json!({"bans": [{"rule": "api", "key": "client_ip=192.0.2.7", "ends_in_ms": 900_000}], "total": 1, "truncated": false})
    );
    // Every door refuses the banned key: /v1/decide (the request's facts) and
    // /v1/check (the rule by name, with the key as stored).
    let decided = weir
        .admin(
            "POST",
            "/v1/decide",
            r#"{"method": "GET", "path": "/api/x", "client_ip": "192.0.2.7"}"#,
        )
        .await;
    assert_eq!(decided.status, 429, "{}", decided.body);
    assert_eq!(decided.json()["retry_after_ms"], 900_000);
    let checked = weir
        .admin(
            "POST",
            "/v1/check",
            r#"{"rule": "api", "key": "client_ip=192.0.2.7"}"#,
        )
        .await;
    assert_eq!(checked.status, 429, "{}", checked.body);
    assert_eq!(checked.json()["retry_after_ms"], 900_000);
    assert_eq!(checked.json()["remaining"], 0);
    let none = weir.admin("GET", "/admin/api/bans?rule=strict", "").await;
    assert_eq!(
        none.json(),
        serde_json::json!({"bans": [], "total": 0, "truncated": false})
    );
    let unknown = weir.admin("GET", "/admin/api/bans?rule=nope", "").await;
    assert_eq!(unknown.status, 404);

    // A key that is no key of the rule is refused, nothing lifted; one never banned
    // is lifted as nothing.
    for bad in ["192.0.2.7", "client_ip%3Dnot-an-address", "user%3Dana"] {
        let refused = weir
            .admin("DELETE", &format!("/admin/api/bans/api/{bad}"), "")
            .await;
        assert_eq!(refused.status, 400, "{bad}: {}", refused.body);
        assert!(
            refused.json()["detail"]
                .as_str()
                .unwrap()
                .starts_with("`key`")
        );
    }
    let never = weir
        .admin("DELETE", "/admin/api/bans/api/client_ip%3D10.9.9.9", "")
        .await;
    assert_eq!(never.status, 200, "{}", never.body);
    assert_eq!(never.json()["lifted"], false);
    // The ban is lifted however the address is spelt: as an IPv4-mapped IPv6 address.
    let lifted = weir
        .admin(
            "DELETE",
            "/admin/api/bans/api/client_ip%3D%3A%3Affff%3A192.0.2.7",
            "",
        )
        .await;
    assert_eq!(lifted.status, 200, "{}", lifted.body);
    assert_eq!(lifted.json()["lifted"], true);
    assert_eq!(lifted.json()["key"], "client_ip=192.0.2.7");
    let listed = weir.admin("GET", "/admin/api/bans", "").await;
    assert_eq!(
        listed.json(),
        serde_json::json!({"bans": [], "total": 0, "truncated": false})
    );
    // The budget was not reset: still empty, so denied, but not banned.
    let denied = weir.get("/api/x", ANA, &[]).await;
    assert_eq!(denied.json()["type"], "/problems/rate-limited");

    // No rule of that name: 404.
    let not = weir.admin("DELETE", "/admin/api/bans/nope/k", "").await;
    assert_eq!(not.status, 404);
    // Without the token: 401.
    let request = Request::delete("/admin/api/bans/api/k")
        .body(Body::empty())
        .unwrap();
    let response = weir
        .admin
        .call(request, "127.0.0.1:1".parse().unwrap())
        .await;
    assert_eq!(response.status().as_u16(), 401);
}

/// A deny list refuses with 403 problem+json, however the address is spelled (an
/// IPv4-mapped IPv6 peer, a forwarding header from an untrusted peer), and a rule's
/// own list refuses only its requests.
#[tokio::test]
async fn a_deny_list_refuses_every_spelling() {
    let weir = Weir::start().await;
    for client in ["203.0.113.9", "::ffff:203.0.113.9"] {
        let denied = weir.get("/other", client, &[]).await;
        assert_eq!(denied.status, 403, "{client}");
        assert_eq!(denied.json()["type"], "/problems/denied");
        assert_eq!(denied.header("content-type"), "application/problem+json");
    }
    // An untrusted peer's X-Forwarded-For is not believed: neither to escape the list...
    let spoofed = weir
        .get(
            "/api/x",
            "203.0.113.9",
            &[("x-forwarded-for", "192.0.2.99")],
        )
        .await;
    assert_eq!(spoofed.status, 403);
    // ...nor to reach the allow list.
    let claimed = weir
        .get("/other", "203.0.113.9", &[("x-forwarded-for", "10.1.2.3")])
        .await;
    assert_eq!(claimed.status, 403);
    // A rule's own deny list: only its requests.
    assert_eq!(weir.get("/api/x", "198.51.100.7", &[]).await.status, 403);
    assert_eq!(weir.get("/strict", "198.51.100.7", &[]).await.status, 200);
    assert_eq!(
        weir.metric("weir_list_matches_total{list=\"deny\",scope=\"global\"}")
            .await,
        4
    );
    assert_eq!(
        weir.metric("weir_list_matches_total{list=\"deny\",scope=\"api\"}")
            .await,
        1
    );
}

/// An allowed caller (by address, IPv4-mapped or not, or by API key) skips every
/// rule, and its answers still carry the RateLimit fields of what it would have cost;
/// a key sent twice is refused, never matched by either copy.
#[tokio::test]
async fn an_allow_list_skips_the_rules_and_reports_their_fields() {
    let weir = Weir::start().await;
    for i in 0..4 {
        let allowed = weir.get("/api/x", "::ffff:10.9.8.7", &[]).await;
        assert_eq!(allowed.status, 200, "{}", allowed.body);
        let remaining = 1u64.saturating_sub(i);
        assert_eq!(
            allowed.header("ratelimit"),
            format!("\"api\";r={remaining};t={}", 30 * (i + 1).min(2)),
            "request {i}"
        );
        assert!(allowed.headers.get("retry-after").is_none());
        if i >= 2 {
            assert_eq!(allowed.header("weir-shadow-limited"), "api");
        }
    }
    // Never banned, however often it would have been denied.
    assert_eq!(
        weir.admin("GET", "/admin/api/bans", "").await.json()["bans"],
        serde_json::json!([])
    );
    for _ in 0..3 {
        let by_key = weir
            .get("/strict", ANA, &[("x-api-key", "internal-key")])
            .await;
        assert_eq!(by_key.status, 200);
    }
    let twice = weir
        .get(
            "/strict",
            ANA,
            &[("x-api-key", "internal-key"), ("x-api-key", "other")],
        )
        .await;
    assert_eq!(twice.status, 400, "{}", twice.body);
    assert_eq!(
        weir.metric("weir_list_matches_total{list=\"allow\",scope=\"global\"}")
            .await,
        7
    );
}

/// `check-config`'s errors for the new fields, each naming the field at fault.
#[test]
fn bad_bans_and_lists_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    let error = |yaml: &str| {
        let text = format!(
            "identities:\n  api_key: {{ header: x-api-key }}\n  email: {{ body_field: email }}\n{yaml}"
        );
        Config::parse(&text, &path).unwrap_err().to_string()
    };
    let rule = |more: &str| {
        format!(
            "rules:\n  - name: login\n    match: {{ path: /login }}\n    algorithm: gcra\n    limit: 5\n    period: 1m\n{more}"
        )
    };
    let cases = [
        (
            rule("    key: [email]\n    on_limited: { ban: 15m, after: 3, within: 10m }\n"),
            "rules[0].on_limited",
            "add `client_ip` to the rule's `key`",
        ),
        (
            rule("    on_limited: { ban: 15m, after: 0, within: 10m }\n"),
            "rules[0].on_limited.after",
            "between 1 and 1000",
        ),
        (
            rule("    on_limited: { ban: 15m, after: 3, within: 10m, status: 418 }\n"),
            "rules[0].on_limited.status",
            "429 or 403",
        ),
        (
            rule("    on_limited: { ban: 500ms, after: 3, within: 10m }\n"),
            "rules[0].on_limited.ban",
            "between 1s and 366d",
        ),
        (
            format!(
                "lists:\n  deny: {{ client_ip: [10.0.0.0/33] }}\n{}",
                rule("")
            ),
            "lists.deny.client_ip[0]",
            "not an IP address or CIDR block",
        ),
        (
            format!(
                "lists:\n  allow: {{ client_ip: [10.0.0.0/8, '::ffff:10.0.0.0/104'] }}\n{}",
                rule("")
            ),
            "lists.allow.client_ip[1]",
            "given twice",
        ),
        (
            format!(
                "lists:\n  allow: {{ api_keys_file: missing.txt }}\n{}",
                rule("")
            ),
            "lists.allow.api_keys_file",
            "cannot read",
        ),
        (
            rule("    lists:\n      allow: { api_keys_file: keys.txt, identity: nobody }\n"),
            "rules[0].lists.allow.identity",
            "no identity is named `nobody`",
        ),
    ];
    std::fs::write(dir.path().join("keys.txt"), "k\n").unwrap();
    for (yaml, field, says) in cases {
        let error = error(&yaml);
        assert!(error.contains(field), "{field} not in: {error}");
        assert!(error.contains(says), "{says:?} not in: {error}");
    }
    // Keyed by the account and the client: accepted.
    let text = format!(
        "identities:\n  email: {{ body_field: email }}\n{}",
        rule("    key: [email, client_ip]\n    on_limited: { ban: 15m, after: 3, within: 10m }\n")
    );
    Config::parse(&text, Path::new(&path)).unwrap();
}
