//! Operators' runtime controls at the Envoy door. Bans (`x-weir: { on_limited }` on a
//! named descriptor limit): a client's descriptor denied `after` times within `within`
//! is `OVER_LIMIT` until the ban's end, whatever its budget, and charges nothing;
//! shared by two `weir serve` on one Redis, listed and lifted through
//! `/admin/api/bans` by the limit's name; `check-config` refuses a ban without a
//! name, or on entries without the client's address. Overrides on a named descriptor
//! limit, set on one instance and applied by the other, one budget however the key is
//! spelt, and bad input refused with the field, nothing stored.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

#[path = "envoy/harness.rs"]
mod harness;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Server, weir};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use harness::{Harness, config_dir, request};
use serde_json::Value;
use weir_testkit::RedisServer;

/// 2 a minute per client address; 3 denials within 10 minutes ban it for 15.
const BANNING: &str = "domain: edge
descriptors:
  - key: remote_address
    rate_limit: { name: per_client, requests_per_unit: 2, unit: minute }
    x-weir:
      on_limited: { ban: 15m, after: 3, within: 10m }
  - key: path
    rate_limit: { requests_per_unit: 100, unit: minute }
";

const CLIENT: &[(&str, &str)] = &[("remote_address", "203.0.113.7")];
const PATH: &[(&str, &str)] = &[("path", "/a")];

fn code(answer: &RateLimitResponse) -> Code {
    Code::try_from(answer.overall_code).unwrap()
}

fn reset_secs(answer: &RateLimitResponse, i: usize) -> i64 {
    answer.statuses[i].duration_until_reset.unwrap().seconds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_denied_again_and_again_is_banned_until_the_ban_ends() {
    let dir = config_dir(&[("edge.yaml", BANNING.to_owned())], "", "");
    let weir = Harness::memory(dir).await;
    for _ in 0..2 {
        assert_eq!(code(&weir.ask("edge", &[CLIENT]).await), Code::Ok);
    }
    // Three denials (each a window's plain denial: 50 s to the minute's end)...
    for _ in 0..3 {
        let denied = weir.ask("edge", &[CLIENT]).await;
        assert_eq!(code(&denied), Code::OverLimit);
        assert_eq!(reset_secs(&denied, 0), 50);
    }
    // ...and the client is banned: past the window, its budget back, still over, the
    // retry time the ban's end (15 minutes from the third denial).
    weir.clock.advance(Duration::from_secs(60));
    let banned = weir.ask("edge", &[CLIENT]).await;
    assert_eq!(code(&banned), Code::OverLimit);
    assert_eq!(reset_secs(&banned, 0), 15 * 60 - 60);
    let status = &banned.statuses[0];
    assert_eq!(status.limit_remaining, 0);
    assert_eq!(status.current_limit.as_ref().unwrap().name, "per_client");
    // Another client is not; nor another descriptor of the banned client's.
    let other = weir
        .ask("edge", &[&[("remote_address", "203.0.113.8")]])
        .await;
    assert_eq!(code(&other), Code::Ok);
    assert_eq!(code(&weir.ask("edge", &[PATH]).await), Code::Ok);
    // A ban charges nothing: its budget is whole when the ban ends.
    for _ in 0..5 {
        assert_eq!(code(&weir.ask("edge", &[CLIENT]).await), Code::OverLimit);
    }
    weir.clock.advance(Duration::from_secs(14 * 60));
    let back = weir.ask("edge", &[CLIENT]).await;
    assert_eq!(code(&back), Code::Ok, "{back:?}");
    assert_eq!(back.statuses[0].limit_remaining, 1);
    let text = weir.service.metrics.encode();
    assert!(
        text.contains("weir_bans_started_total{rule=\"per_client\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("weir_ban_refusals_total{rule=\"per_client\"} 6"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_a_banned_descriptor_denies_and_charges_no_other() {
    let dir = config_dir(
        &[("edge.yaml", BANNING.to_owned())],
        "  all_or_nothing: true\n",
        "",
    );
    let weir = Harness::memory(dir).await;
    for _ in 0..5 {
        weir.ask("edge", &[CLIENT]).await;
    }
    // Banned: the request is over, the path descriptor only looked at (what it
    // would leave, 99, each time: never charged).
    for _ in 0..3 {
        let both = weir.ask("edge", &[CLIENT, PATH]).await;
        assert_eq!(code(&both), Code::OverLimit);
        assert_eq!(both.statuses[0].code, Code::OverLimit as i32, "{both:?}");
        assert_eq!(reset_secs(&both, 0), 15 * 60, "{both:?}");
        assert_eq!(both.statuses[1].limit_remaining, 99, "{both:?}");
    }
    let path = weir.ask("edge", &[PATH]).await;
    assert_eq!(path.statuses[0].limit_remaining, 99, "{path:?}");
}

/// One request to the admin listener of `server` with the token (and a JSON `body`).
fn admin_with(server: &Server, method: &str, path: &str, body: &str) -> (u16, Value) {
    let addr = server.admin.as_deref().unwrap();
    let (status, body) = common::call_with_token(addr, method, path, body, Some(TOKEN));
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

/// [`admin_with`] without a body.
fn admin(server: &Server, method: &str, path: &str) -> (u16, Value) {
    admin_with(server, method, path, "")
}

const TOKEN: &str = "test-admin-token-0123456789";

/// `ShouldRateLimit` on the gRPC door of `server` for the client's descriptor.
async fn ask(server: &Server) -> Code {
    code(&ask_for(server, "edge", CLIENT).await)
}

/// `ShouldRateLimit` on the gRPC door of `server` for one descriptor.
async fn ask_for(server: &Server, domain: &str, entries: &[(&str, &str)]) -> RateLimitResponse {
    let addr = server.grpc.as_deref().unwrap();
    let mut client = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    client
        .should_rate_limit(request(domain, &[entries]))
        .await
        .unwrap()
        .into_inner()
}

/// Two `weir serve` on one Redis with an admin API, serving `files`.
fn two_on_redis(
    redis: &RedisServer,
    files: &[(&str, String)],
) -> (Server, Server, tempfile::TempDir) {
    let store = format!(
        "store:\n  type: redis\n  url: {}\nadmin:\n  token_file: token\n",
        redis.url()
    );
    let dir = config_dir(files, "", &store);
    std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("weir.yaml");
    let start = || Server::start_with(&config, &["--grpc-listen", "127.0.0.1:0"], Stdio::null());
    (start(), start(), dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_is_shared_on_redis_listed_and_lifted_by_the_limits_name() {
    let redis = RedisServer::start();
    redis.grant_bans_and_concurrency();
    let (a, b, _dir) = two_on_redis(&redis, &[("edge.yaml", BANNING.to_owned())]);
    assert_eq!(ask(&a).await, Code::Ok);
    assert_eq!(ask(&b).await, Code::Ok);
    // Denied on A, B, A: the third denial bans the client on both.
    for server in [&a, &b, &a] {
        assert_eq!(ask(server).await, Code::OverLimit);
    }
    for server in [&a, &b] {
        assert_eq!(ask(server).await, Code::OverLimit);
        let (status, listed) = admin(server, "GET", "/admin/api/bans?rule=per_client");
        assert_eq!(status, 200, "{listed}");
        let ban = &listed["bans"][0];
        assert_eq!(ban["rule"], "per_client", "{listed}");
        assert_eq!(ban["key"], "edge|remote_address=203.0.113.7", "{listed}");
        let ends = ban["ends_in_ms"].as_u64().unwrap();
        assert!((890_000..=900_000).contains(&ends), "{ends}");
    }
    let keys = redis.cli(&["KEYS", "*"]);
    assert!(keys.contains("envoy/per_client/ban"), "{keys}");
    // Unknown names are 404; the lift is by the name and the listed key.
    assert_eq!(admin(&a, "GET", "/admin/api/bans?rule=nobody").0, 404);
    assert_eq!(
        admin(&a, "DELETE", "/admin/api/bans/nobody/edge%7Cx=1").0,
        404
    );
    let (status, lifted) = admin(
        &b,
        "DELETE",
        "/admin/api/bans/per_client/edge%7Cremote_address%3D203.0.113.7",
    );
    assert_eq!((status, &lifted["lifted"]), (200, &Value::Bool(true)));
    // B decides by the budget at once (still spent: a plain denial, no new ban as the
    // denials are forgotten)...
    assert_eq!(ask(&b).await, Code::OverLimit);
    // ...and A stops banning within its cache's half second.
    let lifted_at = Instant::now();
    loop {
        let (_, listed) = admin(&a, "GET", "/admin/api/bans");
        ask(&a).await;
        if listed["bans"] == serde_json::json!([]) {
            break;
        }
        assert!(lifted_at.elapsed() < Duration::from_millis(900), "{listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `check-config` on `descriptors` (one file), with `envoy` lines and `more` after the
/// `envoy` section.
fn check_config(descriptors: &str, envoy: &str, more: &str) -> std::process::Output {
    let dir = config_dir(&[("edge.yaml", descriptors.to_owned())], envoy, more);
    weir()
        .arg("check-config")
        .arg("weir.yaml")
        .current_dir(dir.path())
        .output()
        .unwrap()
}

/// [`check_config`] with `more`, which must fail: its standard error.
fn refused(descriptors: &str, more: &str) -> String {
    let out = check_config(descriptors, "", more);
    assert!(!out.status.success(), "accepted: {descriptors}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// [`check_config`] with `envoy` lines, which must pass.
fn accepted(descriptors: &str, envoy: &str) {
    let out = check_config(descriptors, envoy, "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn check_config_refuses_a_ban_that_cannot_be_addressed_or_is_a_weapon() {
    // Keyed on what a caller writes (a user header), without the address.
    let weapon = BANNING.replace("key: remote_address", "key: user");
    let twice = format!(
        "{BANNING}  - key: remote_address\n    value: 10.0.0.1\n    rate_limit: {{ name: per_client, requests_per_unit: 1, unit: second }}\n    x-weir:\n      on_limited: {{ ban: 1m, after: 1, within: 1m }}\n"
    );
    let clash = "rules:\n  - name: per_client\n    match: { path_prefix: / }\n    algorithm: gcra\n    limit: 1\n    period: 1s\n";
    for (descriptors, more, expected) in [
        (
            BANNING.replace("name: per_client, ", ""),
            "",
            "descriptors[0].rate_limit.name: a descriptor limit with `on_limited` needs a `name`",
        ),
        (
            weapon.clone(),
            "",
            "descriptors[0].x-weir.on_limited: a ban on the entries `user` alone",
        ),
        (
            BANNING.replace("within: 10m", "within: 10m, status: 403"),
            "",
            "descriptors[0].x-weir.on_limited.status:",
        ),
        (
            BANNING.replace("after: 3", "after: 0"),
            "",
            "descriptors[0].x-weir.on_limited.after: `after` must be between 1 and",
        ),
        (
            BANNING.replace("within: 10m }", "within: 10m }\n      lease: auto"),
            "",
            "descriptors[0].x-weir.lease: a descriptor with `on_limited` is never leased",
        ),
        (
            twice,
            "",
            "descriptors[2].rate_limit.name: two descriptor limits with `on_limited` are named `per_client`",
        ),
        (
            BANNING.to_owned(),
            clash,
            "named `per_client`, as a rule is",
        ),
    ] {
        let error = refused(&descriptors, more);
        assert!(error.contains(expected), "{error}");
    }
    // Under an address entry, a ban on a user's calls is one client's.
    let nested = "domain: edge
descriptors:
  - key: remote_address
    descriptors:
      - key: user
        rate_limit: { name: per_user, requests_per_unit: 2, unit: minute }
        x-weir:
          on_limited: { ban: 15m, after: 3, within: 10m }
";
    accepted(nested, "");
    // The address under another key, said in `caller`.
    accepted(&weapon, "  caller:\n    address: user\n");
}

/// Named limits to override: per client and path (2 an hour), per tenant (a shared
/// wildcard: one budget for every `t-*`), and a name two limits share.
const OVERRIDDEN: &str = "domain: api
descriptors:
  - key: remote_address
    descriptors:
      - key: path
        rate_limit: { name: per_path, requests_per_unit: 2, unit: hour }
  - key: tenant
    value: t-*
    share_threshold: true
    rate_limit: { name: tenants, requests_per_unit: 3, unit: hour }
    x-weir: { algorithm: sliding_log }
  - key: one
    rate_limit: { name: twice, requests_per_unit: 3, unit: hour }
  - key: two
    rate_limit: { name: twice, requests_per_unit: 3, unit: hour }
";

/// How many of `server`'s answers for `entries` are OK before the first over.
async fn passes(server: &Server, entries: &[(&str, &str)]) -> u32 {
    let mut passed = 0;
    while code(&ask_for(server, "api", entries).await) == Code::Ok {
        passed += 1;
        assert!(passed < 100, "never over");
    }
    passed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_on_a_named_descriptor_limit_applies_on_every_instance() {
    let redis = RedisServer::start();
    let (a, b, _dir) = two_on_redis(&redis, &[("api.yaml", OVERRIDDEN.to_owned())]);
    let key = "api|remote_address=203.0.113.9|path=/a";
    let set = weir()
        .args(["override", "set", "per_path", key, "--limit", "5"])
        .args(["--reason", "partner", "--admin"])
        .arg(format!("http://{}", a.admin.as_deref().unwrap()))
        .env("WEIR_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    // B reads it within a second (its poll), then both count 5 for that key.
    let set_at = Instant::now();
    loop {
        let (_, listed) = admin(&b, "GET", "/admin/api/overrides?rule=per_path");
        if listed.as_array().is_some_and(|l| l.len() == 1) {
            assert_eq!(listed[0]["key"], key, "{listed}");
            break;
        }
        assert!(set_at.elapsed() < Duration::from_secs(2), "{listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let entries: &[(&str, &str)] = &[("remote_address", "203.0.113.9"), ("path", "/a")];
    for server in [&a, &b, &a] {
        assert_eq!(code(&ask_for(server, "api", entries).await), Code::Ok);
    }
    let status = ask_for(&b, "api", entries).await.statuses[0].clone();
    assert_eq!(status.current_limit.unwrap().requests_per_unit, 5);
    assert_eq!(status.limit_remaining, 1);
    assert_eq!(passes(&a, entries).await, 1);
    // Another path keeps the limit's own 2.
    let other: &[(&str, &str)] = &[("remote_address", "203.0.113.9"), ("path", "/b")];
    assert_eq!(passes(&b, other).await, 2);

    // A shared wildcard: any value it matches names its one budget.
    let put = |key: &str| format!("/admin/api/overrides/tenants/{}", key.replace('|', "%7C"));
    let body = r#"{"limit": 6, "reason": "big tenant"}"#;
    let (status, first) = admin_with(&a, "PUT", &put("api|tenant=t-1"), body);
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["key"], "api|tenant==t-*", "{first}");
    let (status, second) = admin_with(&a, "PUT", &put("api|tenant=t-2"), body);
    assert_eq!(status, 200, "{second}");
    assert!(
        !second["before"].is_null(),
        "one override, replaced: {second}"
    );
    assert_eq!(passes(&a, &[("tenant", "t-9")]).await, 6);

    // Bad input: the field named, nothing stored.
    let refused = |path: &str, body: &str| {
        let (status, answer) = admin_with(&a, "PUT", path, body);
        (
            status,
            answer["detail"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let limit = r#"{"limit": 4, "reason": "x"}"#;
    assert_eq!(
        refused("/admin/api/overrides/nobody/api%7Cone=1", limit).0,
        404
    );
    let (status, detail) = refused("/admin/api/overrides/twice/api%7Cone=1", limit);
    assert_eq!(status, 400);
    assert!(
        detail.starts_with("`rule`: 2 Envoy descriptor limits are named `twice`"),
        "{detail}"
    );
    let (status, detail) = refused("/admin/api/overrides/per_path/api%7Cpath=%2Fa", limit);
    assert_eq!(status, 400);
    assert!(
        detail.starts_with("`key`: `api|path=/a` does not reach the descriptor limit `per_path`"),
        "{detail}"
    );
    let (status, detail) = refused(
        "/admin/api/overrides/per_path/api%7Cremote_address=%5Cx%7Cpath=%2Fa",
        limit,
    );
    assert_eq!(status, 400);
    assert!(detail.starts_with("`key`:"), "{detail}");
    let (status, detail) = refused(
        &put("api|tenant=t-1"),
        r#"{"limit": 20000, "reason": "more than a log holds"}"#,
    );
    assert_eq!(status, 400);
    assert!(detail.starts_with("`limit`:"), "{detail}");
    let (_, listed) = admin(&a, "GET", "/admin/api/overrides");
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(listed[1]["limit"], 6, "{listed}");
    // Deleted: the limit's own again.
    let (status, _) = admin(&a, "DELETE", &put("api|tenant=t-3"));
    assert_eq!(status, 200);
    let (_, listed) = admin(&a, "GET", "/admin/api/overrides?rule=tenants");
    assert_eq!(listed, serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lists_apply_to_descriptor_calls_by_address_and_api_key() {
    let dir = config_dir(
        &[("edge.yaml", BANNING.to_owned())],
        "  caller:\n    api_key: api_key\n",
        "identities:\n  api_key: { header: x-api-key }\nlists:\n  allow: { client_ip: [10.0.0.0/8], api_keys_file: keys.txt }\n  deny: { client_ip: [198.51.100.0/24] }\n",
    );
    std::fs::write(dir.path().join("keys.txt"), "internal-key\n").unwrap();
    let weir = Harness::memory(dir).await;
    // Allowed by address: never over, its statuses still counted (as shadow).
    let inside: &[(&str, &str)] = &[("remote_address", "10.1.2.3")];
    for remaining in [1, 0, 0, 0] {
        let answer = weir.ask("edge", &[inside]).await;
        assert_eq!(code(&answer), Code::Ok, "{answer:?}");
        assert_eq!(answer.statuses[0].code, Code::Ok as i32);
        assert_eq!(answer.statuses[0].limit_remaining, remaining);
    }
    // The same address IPv4-mapped is the same caller.
    let mapped: &[(&str, &str)] = &[("remote_address", "::ffff:10.1.2.3")];
    assert_eq!(code(&weir.ask("edge", &[mapped]).await), Code::Ok);
    // Denied by address (mapped too): over, nothing counted, in any descriptor.
    for address in ["198.51.100.7", "::ffff:198.51.100.7"] {
        let denied = weir
            .ask("edge", &[PATH, &[("remote_address", address)]])
            .await;
        assert_eq!(code(&denied), Code::OverLimit, "{address}");
        assert_eq!(denied.statuses[0].code, Code::OverLimit as i32);
    }
    assert_eq!(
        weir.ask("edge", &[PATH]).await.statuses[0].limit_remaining,
        99
    );
    // A listed second address never moves a caller onto the allow list...
    let outside: &[(&str, &str)] = &[("remote_address", "203.0.113.5")];
    for _ in 0..2 {
        weir.ask("edge", &[outside]).await;
    }
    let both = weir.ask("edge", &[outside, inside]).await;
    assert_eq!(code(&both), Code::OverLimit, "{both:?}");
    // ...nor off the deny list.
    let deny: &[(&str, &str)] = &[("remote_address", "198.51.100.7")];
    assert_eq!(
        code(&weir.ask("edge", &[inside, deny]).await),
        Code::OverLimit
    );
    // Allowed by API key.
    let keyed: &[(&str, &str)] = &[("api_key", "internal-key")];
    let answer = weir.ask("edge", &[outside, keyed]).await;
    assert_eq!(code(&answer), Code::Ok, "{answer:?}");
    let text = weir.service.metrics.encode();
    assert!(
        text.contains("weir_list_matches_total{list=\"deny\",scope=\"global\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("weir_list_matches_total{list=\"allow\",scope=\"global\"} 6"),
        "{text}"
    );
}

/// A weir serving `files` on `redis` (100 ms timeout), in process.
async fn in_process_on_redis(redis: &RedisServer, files: &[(&str, String)]) -> Harness {
    let store = format!(
        "store:\n  type: redis\n  url: {}\n  timeout: 100ms\n  fallback_instances: 1\n",
        redis.url()
    );
    let dir = config_dir(files, "", &store);
    let config = weir::Config::load(&dir.path().join("weir.yaml")).unwrap();
    let service = weir::instance(&config).await.unwrap();
    // The service reads Redis' clock (and the machine's for its fallback).
    let clock = std::sync::Arc::new(weir_core::ManualClock::new(harness::T0));
    Harness::serve(service, clock, dir).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_answer_follows_the_descriptors_failure_policy() {
    // An hour's window: the fallback's is on this machine's clock, and a minute's end
    // within the loop would give a second budget.
    let open = BANNING.replace("unit: minute", "unit: hour").replace(
        "on_limited: { ban: 15m, after: 3, within: 10m }",
        "on_limited: { ban: 15m, after: 3, within: 10m }\n      failure: open",
    );
    let mut redis = RedisServer::start();
    redis.grant_bans_and_concurrency();
    let closed = in_process_on_redis(&redis, &[("edge.yaml", BANNING.to_owned())]).await;
    let opened = in_process_on_redis(&redis, &[("edge.yaml", open)]).await;
    assert_eq!(code(&closed.ask("edge", &[CLIENT]).await), Code::Ok);
    redis.kill();
    // Failing `unavailable`: the ban cannot be read, the call is UNAVAILABLE.
    let status = closed.send(request("edge", &[CLIENT])).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    // Failing open: decided on the local fallback, bans included (2 an hour, then
    // three denials ban the client here until the store answers again).
    let another: &[(&str, &str)] = &[("remote_address", "203.0.113.99")];
    let mut codes = Vec::new();
    for _ in 0..6 {
        codes.push(code(&opened.ask("edge", &[another]).await));
    }
    assert_eq!(codes[..2], [Code::Ok, Code::Ok], "{codes:?}");
    assert!(
        codes[2..].iter().all(|c| *c == Code::OverLimit),
        "{codes:?}"
    );
    let banned = opened.ask("edge", &[another]).await;
    let left = reset_secs(&banned, 0);
    assert!((14 * 60..=15 * 60).contains(&left), "{banned:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_of_an_address_nor_a_neighbour_in_its_network_dodges_a_ban() {
    let dir = config_dir(&[("edge.yaml", BANNING.to_owned())], "", "");
    let weir = Harness::memory(dir).await;
    let from = |address: &'static str| [("remote_address", address)];
    // Each address has its own budget (as upstream counts), but denials add up per
    // /64: the third bans the network.
    for (address, expected) in [
        ("2001:db8:1:2::1", Code::Ok),
        ("2001:db8:1:2::1", Code::Ok),
        ("2001:db8:1:2::1", Code::OverLimit),
        ("2001:db8:1:2::1", Code::OverLimit),
        ("2001:db8:1:2::5", Code::Ok),
        ("2001:db8:1:2::5", Code::Ok),
        ("2001:db8:1:2::5", Code::OverLimit),
    ] {
        assert_eq!(code(&weir.ask("edge", &[&from(address)]).await), expected);
    }
    let neighbour = weir.ask("edge", &[&from("2001:db8:1:2:ffff::9")]).await;
    assert_eq!(code(&neighbour), Code::OverLimit);
    assert_eq!(reset_secs(&neighbour, 0), 15 * 60, "{neighbour:?}");
    let elsewhere = weir.ask("edge", &[&from("2001:db8:1:3::1")]).await;
    assert_eq!(code(&elsewhere), Code::Ok);
    // An IPv4 client banned is banned IPv4-mapped too.
    for _ in 0..5 {
        weir.ask("edge", &[&from("198.51.100.4")]).await;
    }
    let mapped = weir.ask("edge", &[&from("::ffff:198.51.100.4")]).await;
    assert_eq!(code(&mapped), Code::OverLimit);
    assert_eq!(reset_secs(&mapped, 0), 15 * 60, "{mapped:?}");
}

/// A monthly quota in Berlin on a descriptor (`x-weir: { period: calendar_month }`):
/// the window ends at the month's end in Berlin, told to the second, and the next
/// month's window is the month's length.
const MONTHLY: &str = "domain: edge
descriptors:
  - key: remote_address
    rate_limit: { requests_per_unit: 2, unit: month }
    x-weir: { period: calendar_month, time_zone: Europe/Berlin }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_counts_per_calendar_month_in_its_time_zone() {
    let dir = config_dir(&[("edge.yaml", MONTHLY.to_owned())], "", "");
    let weir = Harness::memory(dir).await;
    // T0 is 2023-11-14 22:00:10 UTC; November ends in Berlin at 2023-11-30 23:00 UTC.
    let to_december = 16 * 86_400 + 3_600 - 10;
    for _ in 0..2 {
        let allowed = weir.ask("edge", &[CLIENT]).await;
        assert_eq!(code(&allowed), Code::Ok);
        assert_eq!(reset_secs(&allowed, 0), to_december);
    }
    let denied = weir.ask("edge", &[CLIENT]).await;
    assert_eq!(code(&denied), Code::OverLimit);
    assert_eq!(reset_secs(&denied, 0), to_december);
    // A second before the boundary: still November's; at it, December's, 31 days.
    weir.clock
        .advance(Duration::from_secs(u64::try_from(to_december).unwrap() - 1));
    let last = weir.ask("edge", &[CLIENT]).await;
    assert_eq!((code(&last), reset_secs(&last, 0)), (Code::OverLimit, 1));
    weir.clock.advance(Duration::from_secs(1));
    let next = weir.ask("edge", &[CLIENT]).await;
    assert_eq!(code(&next), Code::Ok);
    assert_eq!(reset_secs(&next, 0), 31 * 86_400);
}

#[test]
fn check_config_refuses_a_calendar_it_cannot_count() {
    let error = refused(&MONTHLY.replace("calendar_month", "30d"), "");
    assert!(
        error.contains("descriptors[0].x-weir.time_zone: `time_zone` applies to a calendar period"),
        "{error}"
    );
    let error = refused(
        &MONTHLY.replace(
            "{ period: calendar_month,",
            "{ algorithm: gcra, period: calendar_month,",
        ),
        "",
    );
    assert!(
        error.contains("descriptors[0].x-weir.period: a calendar period applies to fixed_window"),
        "{error}"
    );
    let error = refused(&MONTHLY.replace("Europe/Berlin", "Mars/Olympus"), "");
    assert!(
        error.contains("descriptors[0].x-weir.time_zone:"),
        "{error}"
    );
}
