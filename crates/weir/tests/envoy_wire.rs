//! `ShouldRateLimit` on the wire: raw HTTP/2 requests over one connection to the
//! door's own HTTP/2 server (hyper's, calling tonic's generated service): a call that
//! is not an uncompressed message within 4 MiB gets a gRPC status (tonic's codes) and
//! counts nothing, an unknown method is `UNIMPLEMENTED`, a message split into many DATA
//! frames is read whole, the connection serves on after each refusal, answers carry
//! no `Date`, and a stop finishes the call in flight.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

#[path = "envoy/harness.rs"]
mod harness;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitResponse, rate_limit_response};
use harness::{Harness, config_dir, fixture, request};
use http_body_util::{BodyExt, Full, StreamBody};
use prost::Message;
use tonic::Code;
use tower::ServiceExt;

/// A malformed call: what it is, its path, its extra headers, its body, its status.
type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, Bytes, Code);

const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// `message` with gRPC's prefix: the compression flag and the length.
fn framed(flag: u8, message: &[u8]) -> Bytes {
    let mut body = BytesMut::new();
    body.put_u8(flag);
    body.put_u32(u32::try_from(message.len()).unwrap());
    body.put_slice(message);
    body.freeze()
}

/// A request for `key2` in `test-domain`, encoded.
fn encoded_request() -> Vec<u8> {
    request("test-domain", &[&[("key2", "x")]]).encode_to_vec()
}

/// Sends `body` to `path` with `headers` on the harness's connection; the call's
/// status (from the trailers, or the headers of a trailers-only answer) and message.
async fn raw_call(
    weir: &Harness,
    path: &str,
    headers: &[(&str, &str)],
    body: tonic::body::Body,
) -> (Code, Option<RateLimitResponse>) {
    let mut call = axum::http::Request::post(format!("http://weir{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        call = call.header(*name, *value);
    }
    let response = weir
        .channel
        .clone()
        .oneshot(call.body(body).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "gRPC answers in HTTP 200");
    assert!(
        response.headers().get("date").is_none(),
        "gRPC answers carry no Date"
    );
    let head = response.headers().clone();
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let status = tonic::Status::from_header_map(&trailers)
        .or_else(|| tonic::Status::from_header_map(&head))
        .expect("a grpc-status");
    let data = collected.to_bytes();
    let message = (data.len() >= 5).then(|| RateLimitResponse::decode(&data[5..]).unwrap());
    (status.code(), message)
}

fn whole(body: Bytes) -> tonic::body::Body {
    tonic::body::Body::new(Full::new(body))
}

/// Whether the door still answers a call on the harness's connection (within 10 s:
/// a door that hung fails the test rather than hanging it), after `what`.
async fn still_answers(weir: &Harness, what: &str) {
    let ok = tokio::time::timeout(
        Duration::from_secs(10),
        weir.ask("test-domain", &[&[("key2", "y")]]),
    )
    .await
    .unwrap_or_else(|_| panic!("the door still answers after {what}"));
    assert_eq!(ok.statuses.len(), 1, "after {what}");
}

async fn basic() -> Harness {
    Harness::memory(config_dir(&[fixture("basic_config.yaml")], "", "")).await
}

#[tokio::test]
async fn a_call_that_is_not_one_plain_message_gets_a_grpc_status_and_the_connection_serves_on() {
    let weir = basic().await;
    let message = encoded_request();
    let mut two = framed(0, &message).to_vec();
    two.extend_from_slice(&framed(0, &message));
    // Protobuf merges concatenated messages: bytes past the prefix's length must not
    // be read as more of the message.
    let mut longer = framed(0, &message).to_vec();
    longer.extend_from_slice(&message);
    let mut short = framed(0, &message).to_vec();
    short.truncate(short.len() - 3);
    let cases: Vec<Case> = vec![
        (
            "the compressed flag",
            PATH,
            vec![],
            framed(1, &message),
            Code::Internal,
        ),
        (
            "a grpc-encoding",
            PATH,
            vec![("grpc-encoding", "gzip")],
            framed(0, &message),
            Code::Unimplemented,
        ),
        (
            "bytes past the prefix's length",
            PATH,
            vec![],
            Bytes::from(longer),
            Code::Internal,
        ),
        (
            "a message cut short",
            PATH,
            vec![],
            Bytes::from(short),
            Code::Internal,
        ),
        (
            "three bytes",
            PATH,
            vec![],
            Bytes::from_static(&[0, 0, 0]),
            Code::Internal,
        ),
        ("no body", PATH, vec![], Bytes::new(), Code::Internal),
        (
            "not protobuf",
            PATH,
            vec![],
            framed(0, &[0xff; 16]),
            Code::Internal,
        ),
        (
            "another method",
            "/envoy.service.ratelimit.v3.RateLimitService/Other",
            vec![],
            framed(0, &message),
            Code::Unimplemented,
        ),
        (
            "another service",
            "/x.Y/Z",
            vec![],
            framed(0, &message),
            Code::Unimplemented,
        ),
    ];
    for (case, path, headers, body, expected) in cases {
        let (code, answer) = raw_call(&weir, path, &headers, whole(body)).await;
        assert_eq!(code, expected, "{case}");
        assert!(answer.is_none(), "{case}: no message with a refusal");
        // The same connection still answers, and the refused call counted nothing.
        still_answers(&weir, case).await;
    }
    // Two whole messages on one unary call: the first is answered (tonic reads one),
    // and counted once.
    let (code, answer) = raw_call(&weir, PATH, &[], whole(Bytes::from(two))).await;
    assert_eq!(code, Code::Ok);
    assert_eq!(answer.expect("a message").statuses[0].limit_remaining, 19);
    let counted = weir.ask("test-domain", &[&[("key2", "x")]]).await;
    assert_eq!(
        counted.statuses[0].limit_remaining, 18,
        "no refused call was counted (20 a minute)"
    );
}

#[tokio::test]
async fn a_message_over_four_mebibytes_is_refused_as_out_of_range() {
    let weir = basic().await;
    let big = vec![0u8; 4 * 1024 * 1024 + 1];
    let (code, _) = raw_call(&weir, PATH, &[], whole(framed(0, &big))).await;
    assert_eq!(code, Code::OutOfRange);
    still_answers(&weir, "a message over 4 MiB").await;
}

#[tokio::test]
async fn a_message_sent_a_byte_a_frame_is_read_whole() {
    let weir = basic().await;
    let body = framed(0, &encoded_request());
    let bytes: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> = body
        .iter()
        .map(|byte| Ok(http_body::Frame::data(Bytes::copy_from_slice(&[*byte]))))
        .collect();
    let stream = StreamBody::new(futures_util::stream::iter(bytes));
    let (code, answer) = raw_call(&weir, PATH, &[], tonic::body::Body::new(stream)).await;
    assert_eq!(code, Code::Ok);
    let answer = answer.expect("a message");
    assert_eq!(answer.statuses.len(), 1);
    assert_eq!(answer.statuses[0].limit_remaining, 19);
}

#[tokio::test]
async fn calls_at_once_on_one_connection_are_counted_exactly() {
    let weir = basic().await;
    // 64 calls in flight together on the harness's one connection, for a key of 20 a
    // minute: the connection's task runs them all, and exactly 20 pass.
    let calls = (0..64).map(|_| weir.ask("test-domain", &[&[("key2", "together")]]));
    let answers = futures_util::future::join_all(calls).await;
    let ok = answers
        .iter()
        .filter(|answer| answer.overall_code == rate_limit_response::Code::Ok as i32)
        .count();
    assert_eq!(ok, 20, "20 of 64 within the limit");
    assert_eq!(answers.len(), 64);
}

/// On two threads, with a timeout: a door that hung on the CONNECT fails the test
/// rather than hanging it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_other_than_post_is_refused_and_a_connect_opens_no_tunnel() {
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let weir = basic().await;
    let tcp = tokio::net::TcpStream::connect(weir.addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(connection);
    let empty = || http_body_util::Empty::<Bytes>::new();
    // A CONNECT answered 2xx would become a tunnel (and a task of hyper's); refused,
    // it stays a request, and the same connection serves on.
    let connect = axum::http::Request::connect("weir.test:443")
        .body(empty())
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), sender.send_request(connect))
        .await
        .expect("an answer to the CONNECT")
        .unwrap();
    assert_eq!(answer.status(), 405);
    let get = axum::http::Request::get(format!("http://{}{PATH}", weir.addr))
        .body(empty())
        .unwrap();
    assert_eq!(sender.send_request(get).await.unwrap().status(), 405);
    still_answers(&weir, "a CONNECT and a GET").await;
}

/// A door of its own for `weir`, on a free port, served until the sender is used: its
/// address, the stop, and the server's task.
async fn stoppable(
    weir: &Harness,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let door = weir::envoy_door(&weir.service).expect("an envoy section");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(weir::serve_grpc(
        listener,
        door,
        weir::ConnectionSlots::new("grpc", 64),
        async {
            let _ = stopped.await;
        },
    ));
    (addr, stop, served)
}

/// On a stop, the door takes no new connection but finishes a call in flight (its
/// body still arriving), then ends.
#[tokio::test]
async fn a_stop_finishes_the_call_in_flight_then_ends() {
    use http_body_util::channel::Channel;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let weir = basic().await;
    let (addr, stop, served) = stoppable(&weir).await;
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(connection);
    let (mut body, channel) = Channel::<Bytes, std::convert::Infallible>::new(2);
    let call = axum::http::Request::post(format!("http://{addr}{PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(channel)
        .unwrap();
    let message = framed(0, &encoded_request());
    body.send_data(message.slice(..4)).await.unwrap();
    let answer = tokio::spawn(sender.send_request(call));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    stop.send(()).unwrap();
    // The listener closes: a new connection is refused.
    let mut refused = false;
    for _ in 0..100 {
        tokio::task::yield_now().await;
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "the stopped door still takes connections");
    body.send_data(message.slice(4..)).await.unwrap();
    drop(body);
    let answer = tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("the call in flight is answered")
        .unwrap()
        .unwrap();
    assert_eq!(answer.status(), 200);
    let collected = answer.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap_or_default();
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    let data = collected.to_bytes();
    let response = RateLimitResponse::decode(&data[5..]).unwrap();
    assert_eq!(response.statuses[0].limit_remaining, 19);
    tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the door ends once its calls are answered")
        .unwrap()
        .unwrap();
}

/// A health `Watch` never ends by itself: on a stop its watcher is told NOT_SERVING,
/// the stream ends with `UNAVAILABLE`, and the door ends rather than waiting for it.
#[tokio::test]
async fn a_stop_ends_health_watches_with_not_serving() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let weir = basic().await;
    let (addr, stop, served) = stoppable(&weir).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    let service = "envoy.service.ratelimit.v3.RateLimitService";
    let mut watches = Vec::new();
    for name in ["", service] {
        let mut watch = health
            .watch(HealthCheckRequest {
                service: name.to_owned(),
            })
            .await
            .unwrap()
            .into_inner();
        let first = tokio::time::timeout(Duration::from_secs(10), watch.message())
            .await
            .expect("a first status")
            .unwrap()
            .unwrap();
        assert_eq!(first.status(), ServingStatus::Serving, "{name:?}");
        watches.push((name, watch));
    }
    stop.send(()).unwrap();
    for (name, mut watch) in watches {
        let next = tokio::time::timeout(Duration::from_secs(10), watch.message())
            .await
            .expect("a status at the stop")
            .unwrap()
            .unwrap();
        assert_eq!(next.status(), ServingStatus::NotServing, "{name:?}");
        let end = tokio::time::timeout(Duration::from_secs(10), watch.message())
            .await
            .expect("the watch ends");
        assert_eq!(end.unwrap_err().code(), Code::Unavailable, "{name:?}");
    }
    tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the door ends with watchers connected")
        .unwrap()
        .unwrap();
}
