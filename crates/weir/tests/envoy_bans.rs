//! Bans at the Envoy door (`x-weir: { on_limited }` on a named descriptor limit): a
//! client's descriptor denied `after` times within `within` is `OVER_LIMIT` until the
//! ban's end, whatever its budget, and charges nothing; shared by two `weir serve`
//! on one Redis, listed and lifted through `/admin/api/bans` by the limit's name; and
//! `check-config` refuses a ban without a name, or on entries without the client's
//! address.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

#[path = "envoy/harness.rs"]
mod harness;

use std::io::{Read, Write};
use std::net::TcpStream;
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

/// One HTTP/1.1 request to the admin listener of `server` with the token.
fn admin(server: &Server, method: &str, path: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(server.admin.as_deref().unwrap()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

const TOKEN: &str = "test-admin-token-0123456789";

/// `ShouldRateLimit` on the gRPC door of `server` for the client's descriptor.
async fn ask(server: &Server) -> Code {
    let mut client =
        RateLimitServiceClient::connect(format!("http://{}", server.grpc.as_deref().unwrap()))
            .await
            .unwrap();
    let answer = client
        .should_rate_limit(request("edge", &[CLIENT]))
        .await
        .unwrap()
        .into_inner();
    code(&answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_is_shared_on_redis_listed_and_lifted_by_the_limits_name() {
    let redis = RedisServer::start();
    let dir = config_dir(
        &[("edge.yaml", BANNING.to_owned())],
        "",
        &format!(
            "store:\n  type: redis\n  url: {}\nadmin:\n  token_file: token\n",
            redis.url()
        ),
    );
    std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("weir.yaml");
    let start = || Server::start_with(&config, &["--grpc-listen", "127.0.0.1:0"], Stdio::null());
    let (a, b) = (start(), start());
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

/// `check-config` on `descriptors` (one file) with `more` after the `envoy` section:
/// its standard error when it fails.
fn refused(descriptors: &str, more: &str) -> String {
    let dir = config_dir(&[("edge.yaml", descriptors.to_owned())], "", more);
    let out = weir()
        .arg("check-config")
        .arg("weir.yaml")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "accepted: {descriptors}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn check_config_refuses_a_ban_that_cannot_be_addressed_or_is_a_weapon() {
    let unnamed = BANNING.replace("name: per_client, ", "");
    let error = refused(&unnamed, "");
    assert!(
        error.contains(
            "descriptors[0].rate_limit.name: a descriptor limit with `on_limited` needs a `name`"
        ),
        "{error}"
    );
    // Keyed on what a caller writes (a user header), without the address.
    let weapon = BANNING.replace("key: remote_address", "key: user");
    let error = refused(&weapon, "");
    assert!(
        error.contains("descriptors[0].x-weir.on_limited: a ban on the entries `user` alone"),
        "{error}"
    );
    let status = BANNING.replace("within: 10m", "within: 10m, status: 403");
    let error = refused(&status, "");
    assert!(
        error.contains("descriptors[0].x-weir.on_limited.status:"),
        "{error}"
    );
    let after = BANNING.replace("after: 3", "after: 0");
    let error = refused(&after, "");
    assert!(
        error.contains("descriptors[0].x-weir.on_limited.after: `after` must be between 1 and"),
        "{error}"
    );
    let twice = format!(
        "{BANNING}  - key: remote_address\n    value: 10.0.0.1\n    rate_limit: {{ name: per_client, requests_per_unit: 1, unit: second }}\n    x-weir:\n      on_limited: {{ ban: 1m, after: 1, within: 1m }}\n"
    );
    let error = refused(&twice, "");
    assert!(
        error.contains("descriptors[2].rate_limit.name: two descriptor limits with `on_limited` are named `per_client`"),
        "{error}"
    );
    let clash = "rules:\n  - name: per_client\n    match: { path_prefix: / }\n    algorithm: gcra\n    limit: 1\n    period: 1s\n";
    let error = refused(BANNING, clash);
    assert!(
        error.contains("named `per_client`, as a rule is"),
        "{error}"
    );
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
    let dir = config_dir(&[("edge.yaml", nested.to_owned())], "", "");
    let out = weir()
        .arg("check-config")
        .arg("weir.yaml")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The address under another key, said in `caller`.
    let dir = config_dir(
        &[("edge.yaml", weapon.clone())],
        "  caller:\n    address: user\n",
        "",
    );
    let out = weir()
        .arg("check-config")
        .arg("weir.yaml")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
