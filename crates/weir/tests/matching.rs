//! Rules that match on headers, query parameters and cookies, and keys read from a
//! query parameter or a cookie, on the real binary: every spelling of one parameter or
//! cookie is one budget, a value sent two ways is refused, and two instances on one
//! Redis share the budget whichever spelling each is sent.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::path::{Path, PathBuf};

use common::Server;
use serde_json::{Value, json};
use weir_testkit::RedisServer;

/// CSV exports: two an hour per tenant (a query parameter), on `/reports` with
/// `format=csv`; beta users: two an hour per session cookie, for `x-tier: beta`.
const RULES: &str = "\
identities:
  tenant: { query_param: tenant }
  session: { cookie: sid }
rules:
  - name: csv-exports
    match:
      path_prefix: /reports
      query: { format: { regex: \"csv|tsv\" } }
    key: [tenant]
    algorithm: fixed_window
    limit: 2
    period: 1h
  - name: beta
    match:
      path_prefix: /beta
      headers: { x-tier: beta }
      cookies: { sid: { present: true } }
    key: [session]
    algorithm: fixed_window
    limit: 2
    period: 1h
";

fn config(dir: &Path, store: &str) -> PathBuf {
    let path = dir.join("weir.yaml");
    std::fs::write(&path, format!("{store}{RULES}")).unwrap();
    path
}

/// The status `/v1/decide` answers for a GET of `target` with `headers`, and the
/// rules that limited it.
fn decide(server: &Server, target: &str, headers: Value) -> (u16, Value) {
    let facts = json!({
        "method": "GET",
        "path": target,
        "headers": headers,
        "client_ip": "203.0.113.9",
    });
    let (status, body) = server.request("POST", "/v1/decide", &facts.to_string());
    let code = status.split(' ').nth(1).unwrap().parse().unwrap();
    let verdict: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    (code, verdict)
}

/// Each target's status, in order.
fn statuses(server: &Server, targets: &[&str]) -> Vec<u16> {
    targets
        .iter()
        .map(|target| decide(server, target, json!({})).0)
        .collect()
}

#[test]
fn every_spelling_of_a_query_parameter_is_one_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path(), ""));
    assert_eq!(
        statuses(
            &server,
            &[
                "/reports?tenant=acme&format=csv",
                // Its name in capitals, percent-escaped, its value escaped: one tenant.
                "/reports?TENANT=acme&format=tsv",
                "/reports?ten%61nt=ac%6De&format=c%73v",
                "/reports?format=csv&tenant=ACME",
            ]
        ),
        [200, 200, 429, 200],
        "`ACME` is another tenant: values are compared as sent"
    );
    // A parameter sent two ways: refused, never read as either.
    for target in [
        "/reports?tenant=other&format=csv&tenant=acme",
        "/reports?tenant=other&Tenant=acme&format=csv",
        "/reports?tenant[]=other&format=csv",
        "/reports?tenant=other;tenant=acme&format=csv",
        "/reports?tenant=%zz&format=csv",
        "/reports?tenant=acme&format=csv&format=json",
    ] {
        let (status, verdict) = decide(&server, target, json!({}));
        assert_eq!(status, 400, "{target}: {verdict}");
    }
    // Other formats and other paths are not this rule's.
    assert_eq!(
        statuses(
            &server,
            &[
                "/reports?tenant=acme&format=json",
                "/other?tenant=acme&format=csv"
            ]
        ),
        [200, 200]
    );
    // A caller naming no tenant is counted by address, like any anonymous caller.
    assert_eq!(
        statuses(
            &server,
            &[
                "/reports?format=csv",
                "/reports?format=csv",
                "/reports?format=csv"
            ]
        ),
        [200, 200, 429]
    );
}

#[test]
fn every_spelling_of_a_cookie_is_one_budget_and_headers_narrow_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path(), ""));
    let beta = |cookie: Value| {
        decide(
            &server,
            "/beta/x",
            json!({"x-tier": "beta", "cookie": cookie}),
        )
        .0
    };
    assert_eq!(beta(json!("sid=s-1")), 200);
    // Quoted, escaped, on a second Cookie line (as HTTP/2 sends cookies): one session.
    assert_eq!(beta(json!(["theme=dark", "sid=\"s-%31\""])), 200);
    assert_eq!(beta(json!("theme=dark; sid=s-1")), 429);
    // A cookie sent twice, or under two spellings, is refused.
    for cookie in [
        json!("sid=s-2; sid=s-1"),
        json!(["sid=s-2", "SID=s-1"]),
        json!("sid=s-%zz"),
    ] {
        assert_eq!(beta(cookie.clone()), 400, "{cookie}");
    }
    // The rule applies to `x-tier: beta` only, and refuses a tier sent two ways.
    let other_tier = decide(
        &server,
        "/beta/x",
        json!({"x-tier": "pro", "cookie": "sid=s-1"}),
    );
    assert_eq!(other_tier.0, 200);
    let twice = decide(
        &server,
        "/beta/x",
        json!({"x-tier": ["pro", "beta"], "cookie": "sid=s-1"}),
    );
    assert_eq!(twice.0, 400, "{}", twice.1);
    let underscored = decide(
        &server,
        "/beta/x",
        json!({"x-tier": "pro", "x_tier": "beta", "cookie": "sid=s-1"}),
    );
    assert_eq!(underscored.0, 400, "{}", underscored.1);
    // Without the session cookie the rule does not apply (`present: true`).
    assert_eq!(decide(&server, "/beta/x", json!({"x-tier": "beta"})).0, 200);
}

#[test]
fn two_instances_on_redis_share_one_budget_across_spellings() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("store:\n  type: redis\n  url: {}\n", redis.url());
    let path = config(dir.path(), &store);
    let (a, b) = (Server::start(&path), Server::start(&path));
    assert_eq!(
        decide(&a, "/reports?tenant=acme&format=csv", json!({})).0,
        200
    );
    assert_eq!(
        decide(&b, "/reports?Tenant=ac%6De&format=csv", json!({})).0,
        200
    );
    assert_eq!(
        decide(&a, "/reports?TENANT=acme&format=tsv", json!({})).0,
        429
    );
    let cookie = |server: &Server, sid: &str| {
        decide(server, "/beta", json!({"x-tier": "beta", "cookie": sid})).0
    };
    assert_eq!(cookie(&a, "sid=s-9"), 200);
    assert_eq!(cookie(&b, "sid=\"s-9\""), 200);
    assert_eq!(cookie(&b, "Sid=s%2D9"), 429);
}

#[test]
fn check_config_names_the_bad_match_or_identity() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "identities:\n  t: { query_param: \"a=b\" }\nrules:\n  - { name: r, algorithm: gcra, limit: 1, period: 1s }\n",
            "identities.t.query_param: `a=b` is not a parameter or cookie name",
        ),
        (
            "identities:\n  t: { query_param: t, cookie: t }\nrules:\n  - { name: r, algorithm: gcra, limit: 1, period: 1s }\n",
            "give exactly one of `header`, `jwt`, `body_field`, `query_param`, `cookie`, `client_ip`",
        ),
        (
            "rules:\n  - name: r\n    match: { query: { v: { regex: \"(\" } } }\n    algorithm: gcra\n    limit: 1\n    period: 1s\n",
            "rules[0].match: query.v: invalid regular expression",
        ),
        (
            "rules:\n  - name: r\n    match: { headers: { x-a: { exact: a, prefix: b } } }\n    algorithm: gcra\n    limit: 1\n    period: 1s\n",
            "rules[0].match: headers.x-a: give exactly one of `exact`, `prefix`, `regex`, `present`",
        ),
        (
            "rules:\n  - name: r\n    match: { headers: { x-a: 5 } }\n    algorithm: gcra\n    limit: 1\n    period: 1s\n",
            "rules[0].match.headers.x-a: invalid type: integer `5`, expected a text to equal",
        ),
        (
            "rules:\n  - name: r\n    match: { headers: { X-A: a, x-a: b } }\n    algorithm: gcra\n    limit: 1\n    period: 1s\n",
            "headers: `x-a` is given twice",
        ),
        (
            "rules:\n  - name: r\n    match: { path: /a }\n    costs: [{ match: { cookies: { c: x } }, cost: 2 }]\n    algorithm: gcra\n    limit: 1\n    period: 1s\n",
            "rules[0].costs[0].match: `headers`, `query` and `cookies` belong on the rule's own `match`",
        ),
    ];
    for (yaml, want) in cases {
        let path = dir.path().join("weir.yaml");
        std::fs::write(&path, yaml).unwrap();
        let out = common::weir()
            .arg("check-config")
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{yaml}");
        assert!(stderr.contains(want), "{yaml}\nwant {want}\ngot {stderr}");
    }
}
