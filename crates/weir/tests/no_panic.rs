//! Bad input never panics: the configuration loader, forwarding headers, identities,
//! and the decision API's body, on arbitrary input.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Request};
use proptest::prelude::*;
use tower::ServiceExt;
use weir::Config;
use weir::Reloadable;
use weir::client_ip;
use weir_core::ManualClock;
use weir_store::{MemoryStore, MemoryStoreConfig};

/// Pieces of YAML that reach deep into the loader, mixed with noise.
fn yamlish() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("rules:\n".to_owned()),
        Just("  - name: a\n".to_owned()),
        Just("    algorithm: gcra\n".to_owned()),
        Just("    limit: 5\n".to_owned()),
        Just("    period: 1s\n".to_owned()),
        Just("    burst: 0\n".to_owned()),
        Just("    match: { path: \"/b/{id}\" }\n".to_owned()),
        Just("upstream:\n  url: http://127.0.0.1:1\n".to_owned()),
        Just("store:\n  type: redis\n  url: redis://x\n".to_owned()),
        Just("identities:\n  u: { header: X-U }\n".to_owned()),
        Just("    key: [u]\n".to_owned()),
        Just("    lockout: { growth: 2, max: 1s }\n".to_owned()),
        Just("    count_statuses: [401]\n".to_owned()),
        "[ -~\\n]{0,40}",
        any::<String>(),
    ];
    proptest::collection::vec(pieces, 0..12).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_config_loader_never_panics(text in yamlish()) {
        let _ = Config::parse(&text, Path::new("fuzz.yaml"));
    }

    #[test]
    fn forwarding_headers_never_panic(
        xff in proptest::collection::vec(any::<Vec<u8>>(), 0..4),
        forwarded in proptest::collection::vec("[ -~]{0,60}", 0..3),
    ) {
        let mut headers = HeaderMap::new();
        for value in xff.iter().filter_map(|v| HeaderValue::from_bytes(v).ok()) {
            headers.append("x-forwarded-for", value);
        }
        for value in forwarded.iter().filter_map(|v| HeaderValue::from_str(v).ok()) {
            headers.append("forwarded", value);
        }
        let trusted = vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()];
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        let _ = client_ip(peer, &headers, &trusted);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_decision_api_answers_any_body_with_json_and_a_4xx_or_a_decision(body in any::<Vec<u8>>()) {
        let config = Config::parse("rules:\n  - name: api\n    algorithm: gcra\n    limit: 5\n    period: 1s\n", Path::new("t.yaml")).unwrap();
        let clock = Arc::new(ManualClock::new(0));
        let store = Arc::new(MemoryStore::new(MemoryStoreConfig::default(), clock.clone()));
        let app = weir::api_router(Reloadable::new(weir::Engine::new(&config.engine, store, clock)));
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let status = runtime.block_on(async {
            let request = Request::post("/v1/check").body(Body::from(body)).unwrap();
            app.oneshot(request).await.unwrap().status().as_u16()
        });
        prop_assert!(matches!(status, 200 | 400 | 404 | 429), "{}", status);
    }
}
