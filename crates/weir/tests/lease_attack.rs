//! An outside review of the token leases (issue 21), through the engine: a plans file's
//! custom limit on a rule keyed on something the plans do not key on, leased. Kept as a
//! regression test of what the user guide promises (docs/guide/src/sharing/leases.md).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::routing::get;
use tower::{Layer, ServiceExt};
use weir::{Config, WeirLayer, WeirService};
use weir_testkit::RedisServer;

type Guarded = WeirService<Router<()>>;

async fn status(app: &Guarded, org: &str, key: &str) -> u16 {
    let peer = SocketAddr::from(([192, 0, 2, 7], 40000));
    let request = Request::get("/books")
        .header("host", "api.example")
        .header("x-org", org)
        .header("x-api-key", key)
        .extension(ConnectInfo(peer))
        .body(Body::empty())
        .unwrap();
    app.clone()
        .oneshot(request)
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// An organisation-wide limit (`key: [org]`), 100 an hour, with one API key of the
/// organisation throttled to 5 an hour by the plans file. Without `lease`, the
/// throttled key gets at most 5 after the other key's request; with `lease: { batch:
/// 50 }` it spends the 49 units the other key's request left in the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_key_spends_the_lease_its_organisation_took() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("keys.yaml"),
        "keys:\n  big: std\n  small: { plan: std, limit: 5 }\n",
    )
    .unwrap();
    let config_for = |lease: &str, rule: &str| {
        format!(
            "store: {{ type: redis, url: '{}', timeout: 500ms }}\n\
             identities:\n  api_key: {{ header: X-Api-Key }}\n  org: {{ header: X-Org }}\n\
             plans:\n  file: keys.yaml\n  identity: api_key\n  default: std\n\
             rules:\n  - name: {rule}\n    match: {{ path_prefix: /books }}\n    plans: [std]\n    key: [org]\n    algorithm: token_bucket\n    limit: 100\n    period: 1h\n{lease}",
            redis.url()
        )
    };
    let mut admitted = Vec::new();
    for (lease, rule) in [
        ("", "plain"),
        ("    lease: { batch: 50, hold: 10s }\n", "leased"),
    ] {
        let path = dir.path().join(format!("{rule}.yaml"));
        std::fs::write(&path, config_for(lease, rule)).unwrap();
        let config = Config::load(&path).unwrap();
        let service = weir::instance(&config).await.unwrap();
        let app = WeirLayer::new(&config, service.engine.clone())
            .layer(Router::new().route("/books", get(|| async { "books" })));
        assert_eq!(status(&app, "acme", "big").await, 200);
        let mut small = 0;
        for _ in 0..40 {
            small += u32::from(status(&app, "acme", "small").await == 200);
        }
        admitted.push(small);
    }
    println!(
        "the key throttled to 5/h: plain {}, leased {}",
        admitted[0], admitted[1]
    );
    assert!(
        admitted[1] <= 5,
        "the key throttled to 5 an hour got {} (without lease: {})",
        admitted[1],
        admitted[0]
    );
}
