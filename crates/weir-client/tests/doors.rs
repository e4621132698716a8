//! Both doors on a manual clock: the tower layer over a service in the test (no
//! socket), and the reqwest middleware against a server on loopback. No test sleeps:
//! the client's waits move the clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, Method, Request, Response, StatusCode};
use reqwest_middleware::ClientBuilder;
use tower::{BoxError, Layer, ServiceExt, service_fn};
use weir_client::{
    Error, FastRandom, Idempotent, ManualClock, Policy, RetryLayer, RetryMiddleware,
};

fn policy() -> (Policy, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
    let policy = Policy::default()
        .clock(clock.clone())
        .random(Arc::new(FastRandom::seeded(24)));
    (policy, clock)
}

/// A service that answers `statuses` in turn (then 200), each refusal with
/// `Retry-After: 1`, and counts its calls.
fn server(
    statuses: Vec<u16>,
) -> (
    impl tower::Service<
        Request<String>,
        Response = Response<String>,
        Error = Infallible,
        Future = impl Send,
    > + Clone
    + Send
    + 'static,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let statuses = Arc::new(statuses);
    let service = service_fn(move |_request: Request<String>| {
        let n = counted.fetch_add(1, Ordering::SeqCst) as usize;
        let status = statuses.get(n).copied().unwrap_or(200);
        async move {
            let mut response = Response::new(String::new());
            *response.status_mut() = StatusCode::from_u16(status).unwrap();
            response
                .headers_mut()
                .insert("retry-after", "1".parse().unwrap());
            Ok::<_, Infallible>(response)
        }
    });
    (service, calls)
}

fn request(method: Method) -> Request<String> {
    Request::builder()
        .method(method)
        .uri("http://api.test/books")
        .body(String::new())
        .unwrap()
}

#[tokio::test]
async fn the_layer_waits_out_each_refusal_and_returns_the_answer() {
    let (policy, clock) = policy();
    let (service, calls) = server(vec![429, 503]);
    let client = RetryLayer::new(policy).layer(service);
    let response = client.oneshot(request(Method::GET)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let slept = clock.slept();
    assert_eq!(slept.len(), 2, "{slept:?}");
    // Retry-After (1 s) plus jitter below it (the steps, 100 and 200 ms, are shorter).
    for wait in slept {
        assert!(
            wait >= Duration::from_secs(1) && wait < Duration::from_secs(2),
            "{wait:?}"
        );
    }
}

#[tokio::test]
async fn the_layer_gives_up_after_max_retries_with_the_last_refusal() {
    let (policy, clock) = policy();
    let (service, calls) = server(vec![429; 10]);
    let client = RetryLayer::new(policy.max_retries(2)).layer(service);
    let response = client.oneshot(request(Method::GET)).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(clock.slept().len(), 2);
}

#[tokio::test]
async fn a_post_is_sent_once_unless_marked() {
    let (policy, _) = policy();
    let (service, calls) = server(vec![503; 10]);
    let layer = RetryLayer::new(policy);
    let response = layer
        .layer(service.clone())
        .oneshot(request(Method::POST))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let mut marked = request(Method::POST);
    marked.extensions_mut().insert(Idempotent);
    let response = layer.layer(service).oneshot(marked).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 1 + 4, "marked: three retries");
}

#[tokio::test]
async fn errors_of_the_inner_service_are_retried_then_returned() {
    let (policy, clock) = policy();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let failing = service_fn(move |_request: Request<String>| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Err::<Response<String>, BoxError>("connection refused".into()) }
    });
    let error = RetryLayer::new(policy)
        .layer(failing)
        .oneshot(request(Method::GET))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "connection refused");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // Full jitter below 100, 200, 400 ms.
    let slept = clock.slept();
    assert!(
        slept
            .iter()
            .zip([100, 200, 400])
            .all(|(s, step)| *s < Duration::from_millis(step)),
        "{slept:?}"
    );
}

#[tokio::test]
async fn the_throttle_refusal_is_a_typed_error() {
    let (policy, _) = policy();
    let policy = policy
        .adaptive_throttle(1.0, Duration::from_secs(60))
        .unwrap()
        .max_retries(0);
    let (service, _) = server(vec![429; 1000]);
    let layer = RetryLayer::new(policy);
    let mut throttled = 0;
    for _ in 0..50 {
        match layer
            .layer(service.clone())
            .oneshot(request(Method::GET))
            .await
        {
            Ok(response) => assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS),
            Err(error) => {
                assert!(
                    matches!(error.downcast_ref::<Error>(), Some(Error::Throttled { .. })),
                    "{error}"
                );
                throttled += 1;
            }
        }
    }
    // p climbs to n / (n + 1) with every request refused: most are refused locally.
    assert!(throttled > 35, "{throttled} of 50 throttled");
}

// ------------------------------------------------------------- reqwest, on loopback

async fn start_axum(statuses: Vec<u16>) -> (std::net::SocketAddr, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let statuses = Arc::new(statuses);
    let app = axum::Router::new().fallback(move || {
        let n = counted.fetch_add(1, Ordering::SeqCst) as usize;
        let status = statuses.get(n).copied().unwrap_or(200);
        async move {
            let mut headers = HeaderMap::new();
            headers.insert(
                "retry-after",
                "Thu, 01 Jan 1970 00:00:03 GMT".parse().unwrap(),
            );
            (StatusCode::from_u16(status).unwrap(), headers, "done")
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, calls)
}

#[tokio::test]
async fn the_middleware_waits_out_an_http_date_and_gets_the_answer() {
    let (addr, calls) = start_axum(vec![429, 429]).await;
    let (policy, clock) = policy();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryMiddleware::new(policy))
        .build();
    let response = client
        .get(format!("http://{addr}/books"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "done");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let slept = clock.slept();
    // The date is 3 s past the epoch, where the manual wall clock starts; the second
    // refusal comes after the first wait, so less is left of it.
    assert!(
        slept[0] >= Duration::from_secs(3) && slept[0] < Duration::from_secs(6),
        "{slept:?}"
    );
    assert!(slept[1] < Duration::from_millis(200), "{slept:?}");
}

#[tokio::test]
async fn the_middleware_sends_a_post_once_and_a_keyed_post_again() {
    let (addr, calls) = start_axum(vec![503; 10]).await;
    let (policy, _) = policy();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryMiddleware::new(policy))
        .build();
    let url = format!("http://{addr}/orders");
    let response = client.post(&url).body("{}").send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let response = client
        .post(&url)
        .header("idempotency-key", "k-1")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 1 + 4);
    let response = client
        .post(&url)
        .with_extension(Idempotent)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 1 + 4 + 4);
}

#[tokio::test]
async fn the_middlewares_throttle_refusal_is_a_typed_error_inside_reqwest_middlewares() {
    let (addr, calls) = start_axum(vec![429; 1000]).await;
    let (policy, _) = policy();
    let policy = policy
        .adaptive_throttle(1.0, Duration::from_secs(60))
        .unwrap()
        .max_retries(0);
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryMiddleware::new(policy))
        .build();
    let mut throttled = 0;
    for _ in 0..50 {
        match client.get(format!("http://{addr}/books")).send().await {
            Ok(response) => assert_eq!(response.status(), 429),
            Err(reqwest_middleware::Error::Middleware(error)) => {
                assert!(
                    matches!(error.downcast_ref::<Error>(), Some(Error::Throttled { .. })),
                    "{error}"
                );
                throttled += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(throttled > 35, "{throttled} of 50 throttled");
    assert_eq!(
        u64::from(calls.load(Ordering::SeqCst)) + throttled,
        50,
        "a throttled request is never sent"
    );
}
