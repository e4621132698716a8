//! The tower door on real sockets: hyper's client wrapped in `RetryLayer`, against
//! weir's real gateway (in process, on loopback), on the real clock: waiting out the
//! gateway's `Retry-After` is the point, so this test takes a second or two.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::fleet::{self, Limit};
use http::{Request, StatusCode};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{ServiceBuilder, ServiceExt};
use weir_client::{Policy, RetryLayer};

#[tokio::test]
async fn hyper_through_the_layer_waits_out_the_gateways_retry_after() {
    // 1 a second, in bursts of 2: the third request at once is refused for a second.
    let gateway = fleet::start_gateway(
        &Limit {
            per_second: 1,
            burst: 2,
        },
        None,
    )
    .await;
    let hyper = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let wire: Arc<Mutex<Vec<StatusCode>>> = Arc::default();
    let seen = Arc::clone(&wire);
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(Policy::default()))
        .map_response(move |response: http::Response<_>| {
            seen.lock().unwrap().push(response.status());
            response
        })
        .service(hyper);
    let start = Instant::now();
    for _ in 0..3 {
        let request = Request::get(format!("http://{}/jobs", gateway.addr))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = client.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let elapsed = start.elapsed();
    let wire = wire.lock().unwrap().clone();
    assert_eq!(
        wire,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::OK
        ],
        "one refusal, waited out, then the answer"
    );
    // Retry-After: 1, plus a jitter below it.
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
}
