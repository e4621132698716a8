//! The main listener at the edge, end to end on the `weir` binary: TLS (versions, SNI,
//! ALPN, a reload swapping certificates, a stalled handshake), HTTP/2 over TLS and as
//! h2c (one decision per stream), gRPC calls denied as gRPC, and HTTP/2's bounds
//! against hostile clients. Certificates are made by the test (rcgen); the clients are
//! rustls and hyper's, and raw frames where a client would refuse to misbehave.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use common::Server;
use http_body_util::BodyExt;
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{CertificateParams, CertifiedIssuer, IsCa, Issuer, KeyPair, date_time_ymd};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

// ------------------------------------------------------------------ certificates

/// A certificate authority the test's clients trust, and what it issues.
struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A server certificate: its chain (PEM, itself first) and key (PEM), and its DER.
struct Leaf {
    chain: String,
    key: String,
    der: CertificateDer<'static>,
}

impl Pki {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { ca }
    }

    /// A certificate for `name`, valid until the end of `until` (a year).
    fn leaf(&self, name: &str, until: i32) -> Leaf {
        self.leaf_between(name, 2001, until)
    }

    /// A certificate for `name`, valid from the start of `from` to the end of `until`.
    fn leaf_between(&self, name: &str, from: i32, until: i32) -> Leaf {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.not_before = date_time_ymd(from, 1, 1);
        params.not_after = date_time_ymd(until, 12, 31);
        let key = KeyPair::generate().unwrap();
        let issuer: &Issuer<'_, KeyPair> = &self.ca;
        let cert = params.signed_by(&key, issuer).unwrap();
        Leaf {
            chain: format!("{}{}", cert.pem(), self.ca.pem()),
            key: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// A TLS client trusting this authority, offering `versions` and `alpn`.
    fn client(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
        alpn: &[&[u8]],
    ) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

fn write(dir: &Path, name: &str, leaf: &Leaf) {
    std::fs::write(dir.join(format!("{name}.pem")), &leaf.chain).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), &leaf.key).unwrap();
}

const TLS: &str = "tls:\n  certificates:\n    - { cert_file: api.pem, key_file: api.key }\n    - { cert_file: www.pem, key_file: www.key, hosts: [www.example.com] }\n";

/// A gateway in front of the echo at `upstream`, `limit` requests a minute per
/// `x-api-key`, with `tls` before it (or not).
fn gateway(
    dir: &Path,
    tls: &str,
    upstream: std::net::SocketAddr,
    limit: u32,
) -> std::path::PathBuf {
    let config = format!(
        "{tls}upstream:\n  url: http://{upstream}\nidentities:\n  api_key: {{ header: x-api-key }}\nrules:\n  - name: per-key\n    match: {{ path_prefix: / }}\n    key: [api_key]\n    algorithm: fixed_window\n    limit: {limit}\n    period: 1m\n"
    );
    let path = dir.join("weir.yaml");
    std::fs::write(&path, config).unwrap();
    path
}

/// A TLS connection to `addr`, asking for `name`.
async fn connect(
    connector: &TlsConnector,
    addr: &str,
    name: &str,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    connector
        .connect(ServerName::try_from(name.to_owned()).unwrap(), tcp)
        .await
}

/// The certificate the server offered on `stream`.
fn offered(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    stream.get_ref().1.peer_certificates().unwrap()[0].clone()
}

/// An HTTP/2 client on `io`.
async fn h2<I>(io: I) -> SendRequest<Body>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(connection);
    send
}

/// A GET of `path` with `headers` on an HTTP/2 connection: the status and headers.
async fn get(
    send: &mut SendRequest<Body>,
    authority: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> hyper::Response<bytes::Bytes> {
    let mut request = Request::get(format!("https://{authority}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send.ready().await.unwrap();
    let response = send
        .send_request(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    hyper::Response::from_parts(parts, body)
}

// ------------------------------------------------------------------------- TLS

/// A minimal ClientHello of TLS 1.`minor - 1` (no supported_versions extension), with
/// the one suite, group and signature scheme the test's ECDSA P-256 certificates need.
fn client_hello(minor: u8) -> Vec<u8> {
    let mut body = vec![0x03, minor];
    body.extend([7u8; 32]); // random
    body.push(0); // no session id
    body.extend([0x00, 0x02, 0xc0, 0x2b]); // ECDHE-ECDSA-AES128-GCM-SHA256
    body.extend([0x01, 0x00]); // no compression
    let extensions: &[u8] = &[
        0x00, 0x0a, 0x00, 0x04, 0x00, 0x02, 0x00, 0x17, // supported_groups: secp256r1
        0x00, 0x0b, 0x00, 0x02, 0x01, 0x00, // ec_point_formats: uncompressed
        0x00, 0x0d, 0x00, 0x04, 0x00, 0x02, 0x04,
        0x03, // signature_algorithms: ecdsa_secp256r1_sha256
    ];
    body.extend(u16::try_from(extensions.len()).unwrap().to_be_bytes());
    body.extend(extensions);
    let mut handshake = vec![0x01, 0x00, 0x00, u8::try_from(body.len()).unwrap()];
    handshake.extend(body);
    let mut record = vec![
        0x16,
        0x03,
        minor,
        0x00,
        u8::try_from(handshake.len()).unwrap(),
    ];
    record.extend(handshake);
    record
}

/// Reads `stream` until it closes (or 5 s pass: a failure); what it sent.
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut got))
        .await
        .expect("the server kept the connection open")
        .ok();
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_2_and_1_3_with_alpn_and_sni_and_nothing_older() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    let (api, www) = (
        pki.leaf("api.example", 2099),
        pki.leaf("www.example.com", 2099),
    );
    write(dir.path(), "api", &api);
    write(dir.path(), "www", &www);
    let upstream = common::echo::start().await;
    let weir = Server::start(&gateway(dir.path(), TLS, upstream, 100));

    for (version, alpn, expect) in [
        (
            &rustls::version::TLS13,
            &[&b"h2"[..], b"http/1.1"][..],
            b"h2".as_slice(),
        ),
        (&rustls::version::TLS12, &[b"http/1.1"], b"http/1.1"),
    ] {
        let client = pki.client(&[version], alpn);
        let stream = connect(&client, &weir.addr, "www.example.com")
            .await
            .unwrap();
        let (_, session) = stream.get_ref();
        assert_eq!(session.protocol_version(), Some(version.version));
        assert_eq!(session.alpn_protocol(), Some(expect));
        assert_eq!(offered(&stream), www.der, "SNI www.example.com");
    }
    // A name no certificate lists gets the default.
    let client = pki.client(&[&rustls::version::TLS13], &[b"h2"]);
    let stream = connect(&client, &weir.addr, "api.example").await.unwrap();
    assert_eq!(offered(&stream), api.der);
    // HTTP/2 by ALPN: answered, with the RateLimit fields and https forwarded.
    let mut send = h2(stream).await;
    let answer = get(&mut send, "api.example", "/x", &[("x-api-key", "k")]).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.version(), hyper::Version::HTTP_2);
    assert!(answer.headers().contains_key("ratelimit"), "{answer:?}");
    let echoed: serde_json::Value = serde_json::from_slice(answer.body()).unwrap();
    assert_eq!(echoed["x-forwarded-proto"], "https");
    assert_eq!(echoed["host"], "api.example");

    // TLS 1.1 is refused with a protocol_version alert (70), then closed; the same
    // hello in TLS 1.2 gets a ServerHello.
    let mut old = TcpStream::connect(&weir.addr).await.unwrap();
    old.write_all(&client_hello(2)).await.unwrap();
    let answer = read_to_close(&mut old).await;
    assert_eq!(answer.first(), Some(&0x15), "an alert record: {answer:?}");
    assert_eq!(answer.get(6), Some(&70), "protocol_version: {answer:?}");
    let mut tls12 = TcpStream::connect(&weir.addr).await.unwrap();
    tls12.write_all(&client_hello(3)).await.unwrap();
    let mut hello = [0u8; 6];
    tls12.read_exact(&mut hello).await.unwrap();
    assert_eq!(
        (hello[0], hello[5]),
        (0x16, 0x02),
        "a ServerHello: {hello:?}"
    );
    // Garbage instead of a ClientHello is closed, and the server goes on.
    let mut garbage = TcpStream::connect(&weir.addr).await.unwrap();
    garbage
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    read_to_close(&mut garbage).await;
    assert!(connect(&client, &weir.addr, "api.example").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_handshake_is_closed_at_the_header_timeout_and_frees_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    write(dir.path(), "api", &pki.leaf("api.example", 2099));
    write(dir.path(), "www", &pki.leaf("www.example.com", 2099));
    let upstream = common::echo::start().await;
    // One connection at a time: the stalled one holds the only slot until it is closed.
    let weir = Server::start_with(
        &gateway(dir.path(), TLS, upstream, 100),
        &["--header-timeout-ms", "300", "--max-connections", "1"],
        Stdio::null(),
    );
    // Half a ClientHello, then nothing; held once weir counts it open.
    let mut stalled = TcpStream::connect(&weir.addr).await.unwrap();
    stalled.write_all(&client_hello(3)[..20]).await.unwrap();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(5);
    while !metrics(&weir).contains("weir_connections{listener=\"main\"} 1") {
        assert!(
            Instant::now() < deadline,
            "the stalled connection was never held"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let client = pki.client(&[&rustls::version::TLS13], &[b"h2"]);
    let waiting = tokio::spawn({
        let (client, addr) = (client.clone(), weir.addr.clone());
        async move {
            connect(&client, &addr, "api.example")
                .await
                .map(|_| Instant::now())
        }
    });
    read_to_close(&mut stalled).await;
    let closed = started.elapsed();
    assert!(
        closed >= Duration::from_millis(250) && closed < Duration::from_secs(3),
        "closed after {closed:?}"
    );
    // The waiting client got the slot once the stalled one gave it back.
    let served = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting client was never served")
        .unwrap()
        .unwrap();
    assert!(served.duration_since(started) >= Duration::from_millis(250));
}

/// What `weir`'s admin listener says on /metrics.
fn metrics(weir: &Server) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(weir.admin.as_ref().unwrap()).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

/// Sends SIGHUP to `weir` (it reloads its configuration).
fn hangup(weir: &Server) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &weir.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_is_reloaded_keeping_connections_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    let (old, new) = (pki.leaf("api.example", 2099), pki.leaf("api.example", 2098));
    write(dir.path(), "api", &old);
    write(dir.path(), "www", &pki.leaf("www.example.com", 2099));
    let upstream = common::echo::start().await;
    let log = dir.path().join("weir.log");
    let weir = Server::start_with(
        &gateway(dir.path(), TLS, upstream, 100),
        &[],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let client = pki.client(&[&rustls::version::TLS13], &[b"h2"]);
    let kept = connect(&client, &weir.addr, "api.example").await.unwrap();
    assert_eq!(offered(&kept), old.der);
    let mut kept = h2(kept).await;
    assert_eq!(
        get(&mut kept, "api.example", "/", &[]).await.status(),
        StatusCode::OK
    );

    // Renewed in place: seen by the file watch (every second), no signal needed.
    write(dir.path(), "api", &new);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stream = connect(&client, &weir.addr, "api.example").await.unwrap();
        if offered(&stream) == new.der {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was never offered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The connection opened before the reload still works.
    assert_eq!(
        get(&mut kept, "api.example", "/", &[]).await.status(),
        StatusCode::OK
    );

    // A key that is not the certificate's (a SIGHUP too): refused, the new
    // certificate kept.
    std::fs::write(
        dir.path().join("api.key"),
        pki.leaf("api.example", 2099).key,
    )
    .unwrap();
    hangup(&weir);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("tls.certificates[0].key_file")
    {
        assert!(Instant::now() < deadline, "the bad key was never refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stream = connect(&client, &weir.addr, "api.example").await.unwrap();
    assert_eq!(offered(&stream), new.der);
}

#[test]
fn check_config_names_the_certificate_field_at_fault() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    write(dir.path(), "api", &pki.leaf("api.example", 2099));
    write(dir.path(), "www", &pki.leaf("www.example.com", 2099));
    write(dir.path(), "old", &pki.leaf("old.example", 2020));
    write(
        dir.path(),
        "early",
        &pki.leaf_between("early.example", 2090, 2099),
    );
    std::fs::write(
        dir.path().join("other.key"),
        pki.leaf("x.example", 2099).key,
    )
    .unwrap();
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    let check = |tls: &str| {
        let path = dir.path().join("check.yaml");
        std::fs::write(
            &path,
            format!("{tls}rules:\n  - {{ name: a, algorithm: gcra, limit: 1, period: 1s }}\n"),
        )
        .unwrap();
        match weir::Config::load(&path) {
            Ok(_) => "ok".to_owned(),
            Err(error) => format!("{}: {}", error.field.unwrap_or_default(), error.message),
        }
    };
    let one = |cert: &str, key: &str, hosts: &str| {
        check(&format!(
            "tls:\n  certificates:\n    - {{ cert_file: {cert}, key_file: {key}{hosts} }}\n"
        ))
    };
    assert_eq!(check(TLS), "ok");
    let refused = [
        (
            one("old.pem", "old.key", ""),
            "tls.certificates[0].cert_file: the certificate in",
            "expired on 2020-12-31",
        ),
        (
            one("early.pem", "early.key", ""),
            "tls.certificates[0].cert_file: the certificate in",
            "is not valid before 2090-01-01",
        ),
        (
            one("api.pem", "other.key", ""),
            "tls.certificates[0].key_file: the key in",
            "is not the key of the certificate",
        ),
        (
            one("none.pem", "api.key", ""),
            "tls.certificates[0].cert_file: cannot read",
            "none.pem",
        ),
        (
            one("empty.pem", "api.key", ""),
            "tls.certificates[0].cert_file: no certificate in",
            "chain",
        ),
        (
            one("api.pem", "api.pem", ""),
            "tls.certificates[0].key_file: no private key in",
            "PEM",
        ),
        (
            one("api.pem", "api.key", ", hosts: [\"a b\"]"),
            "tls.certificates[0].hosts[0]: `a b` is not a host name",
            "",
        ),
        (
            check("tls:\n  certificates: []\n"),
            "tls.certificates: list at least one",
            "",
        ),
        (
            one("api.pem", "api.key", ", hosts: [www.example.com]"),
            "tls.certificates[0].hosts[0]: the certificate does not name `www.example.com`",
            "",
        ),
        (
            one("www.pem", "www.key", ", hosts: [\"*.example.com\"]"),
            "tls.certificates[0].hosts[0]: the certificate does not name `*.example.com`",
            "",
        ),
    ];
    for (said, start, part) in refused {
        assert!(said.starts_with(start) && said.contains(part), "{said}");
    }
}

// ---------------------------------------------------------------------- HTTP/2

/// `concurrent` requests of one key at once on `send`: how many were allowed, and
/// whether every answer had the RateLimit fields.
async fn burst(
    send: &SendRequest<Body>,
    concurrent: usize,
    headers: &[(&'static str, &'static str)],
) -> (usize, bool) {
    let calls = (0..concurrent).map(|_| {
        let mut send = send.clone();
        let headers = headers.to_vec();
        tokio::spawn(async move { get(&mut send, "api.example", "/", &headers).await })
    });
    let mut allowed = 0;
    let mut fields = true;
    for call in calls {
        let answer = call.await.unwrap();
        fields &= answer.headers().contains_key("ratelimit");
        match answer.status() {
            StatusCode::OK => allowed += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("{other}: {answer:?}"),
        }
    }
    (allowed, fields)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stream_is_decided_exactly_over_tls_and_h2c() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    write(dir.path(), "api", &pki.leaf("api.example", 2099));
    write(dir.path(), "www", &pki.leaf("www.example.com", 2099));
    let upstream = common::echo::start().await;
    let secure = Server::start(&gateway(dir.path(), TLS, upstream, 7));
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = Server::start(&gateway(plain_dir.path(), "", upstream, 7));

    let client = pki.client(&[&rustls::version::TLS13], &[b"h2"]);
    let tls = h2(connect(&client, &secure.addr, "api.example").await.unwrap()).await;
    let h2c = h2(TcpStream::connect(&plain.addr).await.unwrap()).await;
    for send in [tls, h2c] {
        // 30 streams at once on one connection: exactly the limit allowed.
        assert_eq!(burst(&send, 30, &[("x-api-key", "a")]).await, (7, true));
        // Another key on the same connection has its own limit.
        assert_eq!(burst(&send, 9, &[("x-api-key", "b")]).await, (7, true));
        // HTTP/2 keeps a value's edge whitespace, which an HTTP/1.1 hop strips: ` b`
        // would be a budget apart from `b` that the app reads as `b`. Refused.
        for padded in [" b", "b ", "\tb", "  b\t"] {
            let mut one = send.clone();
            let answer = get(&mut one, "api.example", "/", &[("x-api-key", padded)]).await;
            assert_eq!(
                answer.status(),
                StatusCode::BAD_REQUEST,
                "{padded:?}: {answer:?}"
            );
        }
        // :authority and a Host that disagree are refused, not decided on either.
        let mut one = send.clone();
        let answer = get(
            &mut one,
            "api.example",
            "/",
            &[("host", "www.example.com"), ("x-api-key", "c")],
        )
        .await;
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{answer:?}");
        // A gRPC call denied: HTTP 200, RESOURCE_EXHAUSTED, the wait as metadata.
        let grpc = [
            ("x-api-key", "a"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ];
        let answer = get(&mut one, "api.example", "/pkg.Svc/Call", &grpc).await;
        assert_eq!(answer.status(), StatusCode::OK);
        let headers = answer.headers();
        assert_eq!(headers["grpc-status"], "8", "{answer:?}");
        assert!(
            headers["grpc-message"]
                .to_str()
                .unwrap()
                .starts_with("Too many requests")
        );
        assert!(headers.contains_key("ratelimit") && headers.contains_key("retry-after"));
        assert!(answer.body().is_empty());
    }
    // HTTP/1.1 on the h2c listener still works.
    assert_eq!(plain.request("GET", "/", "").0, "HTTP/1.1 200 OK");
}

/// An upstream whose `/slow` answers only once `release` is notified, and anything
/// else at once.
async fn held_upstream(release: Arc<tokio::sync::Notify>) -> std::net::SocketAddr {
    let app = axum::Router::new()
        .route(
            "/slow",
            axum::routing::get(move || async move {
                release.notified().await;
                "slow"
            }),
        )
        .fallback(|| async { "fast" });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// An h2c client that pings every 50 ms even when idle, and its connection's task.
async fn pinging_h2c(addr: &str) -> (SendRequest<Body>, tokio::task::JoinHandle<()>) {
    let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
    let (send, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(Duration::from_millis(50))
        .keep_alive_while_idle(true)
        .handshake(io)
        .await
        .unwrap();
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    (send, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http2_connection_is_closed_but_not_one_with_a_request_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let release = Arc::new(tokio::sync::Notify::new());
    let upstream = held_upstream(release.clone()).await;
    let weir = Server::start_with(
        &gateway(dir.path(), "", upstream, 100),
        &["--idle-timeout-ms", "300", "--max-connections", "2"],
        Stdio::null(),
    );
    // B: a request held in flight at the upstream.
    let (mut busy, busy_connection) = pinging_h2c(&weir.addr).await;
    let held = tokio::spawn(async move { get(&mut busy, "api.example", "/slow", &[]).await });
    // A: one quick request, then nothing but PINGs.
    let (mut idle, idle_connection) = pinging_h2c(&weir.addr).await;
    let answered = get(&mut idle, "api.example", "/", &[]).await;
    assert_eq!(answered.status(), StatusCode::OK);
    let quiet = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), idle_connection)
        .await
        .expect("the idle connection was never closed")
        .unwrap();
    let after = quiet.elapsed();
    assert!(
        after >= Duration::from_millis(250) && after < Duration::from_secs(3),
        "closed after {after:?}: its PINGs do not keep it open"
    );
    // B's request has been in flight longer than the idle timeout: still served.
    assert!(
        !busy_connection.is_finished(),
        "closed with a request in flight"
    );
    release.notify_one();
    let answer = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.body().as_ref(), b"slow");
    // Its slot, and the idle one's, are free for others once B goes quiet too.
    tokio::time::timeout(Duration::from_secs(5), busy_connection)
        .await
        .expect("the connection was never closed once idle")
        .unwrap();
    let (mut third, _) = pinging_h2c(&weir.addr).await;
    assert_eq!(
        get(&mut third, "api.example", "/", &[]).await.status(),
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_opens_its_window_is_closed_at_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = common::echo::start().await;
    let weir = Server::start_with(
        &gateway(dir.path(), "", upstream, 100),
        &["--idle-timeout-ms", "300"],
        Stdio::null(),
    );
    // A window of 0 for every stream: the answer's headers go out, its body never can.
    let mut stream = TcpStream::connect(&weir.addr).await.unwrap();
    let mut frames = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frames.extend(frame(4, 0, 0, &[0, 4, 0, 0, 0, 0])); // SETTINGS_INITIAL_WINDOW_SIZE 0
    frames.extend(frame(1, 0x4 | 0x1, 1, GET_BLOCK));
    stream.write_all(&frames).await.unwrap();
    let started = Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(5), read_to_close(&mut stream))
        .await
        .expect("a stream held shut by flow control kept its connection open");
    let closed = started.elapsed();
    assert!(
        closed >= Duration::from_millis(250),
        "closed after {closed:?}, before the idle timeout"
    );
    // The answer's HEADERS (frame type 1) came before the close.
    assert!(
        read.windows(9)
            .any(|f| f[3] == 1 && f[5..9] == [0, 0, 0, 1])
    );
}

// --------------------------------------------------------- hostile HTTP/2 clients

/// An HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// A GET of `/` for `localhost` as an HPACK block (static table, no Huffman).
const GET_BLOCK: &[u8] = b"\x82\x86\x84\x01\x09localhost";

/// The h2c preface and an empty SETTINGS.
fn preface() -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(4, 0, 0, &[]));
    out
}

/// Reads frames from `stream` until a GOAWAY (its error code) or the end (`None`),
/// within 10 s.
async fn goaway(mut stream: impl tokio::io::AsyncRead + Unpin) -> Option<u32> {
    let read = async {
        let mut head = [0u8; 9];
        loop {
            stream.read_exact(&mut head).await.ok()?;
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            stream.read_exact(&mut payload).await.ok()?;
            if head[3] == 7 {
                return Some(u32::from_be_bytes(payload[4..8].try_into().unwrap()));
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the connection was neither ended nor told to go away")
}

/// Sends `flood` on a new connection to `addr` while reading its answers: the
/// GOAWAY's error code, or `None` if the connection just ended.
async fn flood(addr: &str, flood: Vec<u8>) -> Option<u32> {
    let (reader, mut writer) = TcpStream::connect(addr).await.unwrap().into_split();
    // Written until weir closes the connection (a write then fails).
    let writing = tokio::spawn(async move { writer.write_all(&flood).await });
    let code = goaway(reader).await;
    writing.abort();
    code
}

/// Sends `frames` on a new connection to `addr`: the error code of the first stream
/// reset (RST_STREAM) or GOAWAY weir sends, within 10 s.
async fn reset(addr: &str, frames: Vec<u8>) -> u32 {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&frames).await.unwrap();
    let read = async {
        let mut head = [0u8; 9];
        loop {
            stream.read_exact(&mut head).await.unwrap();
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            stream.read_exact(&mut payload).await.unwrap();
            match head[3] {
                3 => return u32::from_be_bytes(payload[..4].try_into().unwrap()),
                7 => return u32::from_be_bytes(payload[4..8].try_into().unwrap()),
                1 => panic!("answered: {payload:?}"),
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap()
}

/// Reads frames until the HEADERS of an answer: the PING and SETTINGS acknowledgements
/// before it (within 10 s).
async fn acks_then_answer(mut stream: impl tokio::io::AsyncRead + Unpin) -> (usize, usize) {
    let read = async {
        let (mut pings, mut settings) = (0, 0);
        let mut head = [0u8; 9];
        loop {
            stream.read_exact(&mut head).await.unwrap();
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            stream.read_exact(&mut payload).await.unwrap();
            match (head[3], head[4] & 1) {
                (6, 1) => pings += 1,
                (4, 1) => settings += 1,
                (1, _) => return (pings, settings),
                (7, _) => panic!("told to go away after {pings} PINGs: {payload:?}"),
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap()
}

/// Reads frames until a RST_STREAM: its stream and error code (within 10 s).
async fn first_reset(mut stream: impl tokio::io::AsyncRead + Unpin) -> (u32, u32) {
    let read = async {
        let mut head = [0u8; 9];
        loop {
            stream.read_exact(&mut head).await.unwrap();
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            stream.read_exact(&mut payload).await.unwrap();
            match head[3] {
                3 => {
                    let id = u32::from_be_bytes(head[5..9].try_into().unwrap());
                    return (id, u32::from_be_bytes(payload[..4].try_into().unwrap()));
                }
                7 => panic!("told to go away: {payload:?}"),
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap()
}

/// HTTP/2's REFUSED_STREAM.
const REFUSED_STREAM: u32 = 0x7;

/// HTTP/2's PROTOCOL_ERROR.
const PROTOCOL_ERROR: u32 = 0x1;

/// HTTP/2's ENHANCE_YOUR_CALM: what a server says to a client that abuses it.
const ENHANCE_YOUR_CALM: u32 = 0xb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_and_smuggled_framing_end_their_stream_or_connection_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = common::echo::start().await;
    let weir = Server::start(&gateway(dir.path(), "", upstream, 1_000_000));
    let mut bystander = h2(TcpStream::connect(&weir.addr).await.unwrap()).await;

    // Rapid reset: streams opened and cancelled at once, without end.
    let mut frames = preface();
    for i in 0..5_000u32 {
        let id = 2 * i + 1;
        frames.extend(frame(1, 0x4 | 0x1, id, GET_BLOCK)); // HEADERS, END_HEADERS|END_STREAM
        frames.extend(frame(3, 0, id, &8u32.to_be_bytes())); // RST_STREAM CANCEL
    }
    assert_eq!(flood(&weir.addr, frames).await, Some(ENHANCE_YOUR_CALM));

    // CONTINUATION flood: one header block that never ends, 100-byte fields.
    let mut field = b"\x00\x05x-pad\x64".to_vec();
    field.extend([b'a'; 100]);
    let mut frames = preface();
    frames.extend(frame(1, 0x1, 1, GET_BLOCK)); // HEADERS, END_STREAM, no END_HEADERS
    for _ in 0..300 {
        frames.extend(frame(9, 0, 1, &field.repeat(100))); // CONTINUATION, 10.7 kB each
    }
    let ended = flood(&weir.addr, frames).await;
    assert_eq!(ended, Some(ENHANCE_YOUR_CALM));

    // A request carrying Transfer-Encoding (which HTTP/2 has no use for, and which
    // would reframe it as HTTP/1.1): its stream is reset, nothing is forwarded.
    let mut frames = preface();
    let mut block = GET_BLOCK.to_vec();
    block.extend(b"\x00\x11transfer-encoding\x07chunked");
    frames.extend(frame(1, 0x4 | 0x1, 1, &block));
    assert_eq!(reset(&weir.addr, frames).await, PROTOCOL_ERROR);

    // Pseudo-headers read two ways: `:path` twice, or one after a regular field. Each
    // stream is reset, never decided on either reading.
    for extra in [&b"\x04\x06/admin"[..], b"\x40\x01a\x01b\x84"] {
        let mut frames = preface();
        let mut block = GET_BLOCK.to_vec();
        block.extend(extra);
        frames.extend(frame(1, 0x4 | 0x1, 1, &block));
        assert_eq!(reset(&weir.addr, frames).await, PROTOCOL_ERROR, "{extra:?}");
    }
    // An unknown pseudo-header ends the connection.
    let mut frames = preface();
    let mut block = GET_BLOCK.to_vec();
    block.extend(b"\x00\x05:evil\x01x");
    frames.extend(frame(1, 0x4 | 0x1, 1, &block));
    assert_eq!(flood(&weir.addr, frames).await, Some(PROTOCOL_ERROR));

    // Streams past the concurrent bound: refused, the ones open kept. (The bound holds
    // once the client has acknowledged weir's SETTINGS.)
    let mut stream = TcpStream::connect(&weir.addr).await.unwrap();
    stream.write_all(&preface()).await.unwrap();
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!((head[3], head[4]), (4, 0), "weir's SETTINGS first");
    let mut settings = vec![0u8; usize::from(head[2])];
    stream.read_exact(&mut settings).await.unwrap();
    let mut frames = frame(4, 1, 0, &[]); // SETTINGS ACK
    for i in 0..101u32 {
        // A POST whose body never comes: the stream stays open.
        let post = b"\x83\x86\x84\x01\x09localhost";
        frames.extend(frame(1, 0x4, 2 * i + 1, post));
    }
    let (reader, mut writer) = stream.into_split();
    writer.write_all(&frames).await.unwrap();
    assert_eq!(first_reset(reader).await, (201, REFUSED_STREAM));

    // PING and SETTINGS floods, read as they are answered: each acknowledged (one at a
    // time), the connection still serving after them.
    let (reader, mut writer) = TcpStream::connect(&weir.addr).await.unwrap().into_split();
    let mut frames = preface();
    for i in 0..10_000u64 {
        frames.extend(frame(6, 0, 0, &i.to_be_bytes())); // PING
        frames.extend(frame(4, 0, 0, &[0, 3, 0, 0, 0, 100])); // SETTINGS: 100 streams
    }
    frames.extend(frame(1, 0x4 | 0x1, 1, GET_BLOCK));
    let writing = tokio::spawn(async move {
        writer.write_all(&frames).await.unwrap();
        writer
    });
    assert_eq!(acks_then_answer(reader).await, (10_000, 10_001));
    drop(writing.await.unwrap());

    // The other connection was never touched.
    let answer = get(&mut bystander, "localhost", "/", &[("x-api-key", "k")]).await;
    assert_eq!(answer.status(), StatusCode::OK);
}

// ------------------------------------------------------------------ upstreams

/// An HTTPS upstream with `leaf`'s certificate, HTTP/1.1 and HTTP/2 by ALPN (or
/// HTTP/1.1 alone, when not `h2`): answers
/// like a gRPC server (a body, then `grpc-status` in trailers: 16 to `.../Login`, 0 to
/// the rest), saying in
/// `x-version` which HTTP version it was asked in.
async fn https_upstream(leaf: &Leaf) -> std::net::SocketAddr {
    https_upstream_offering(leaf, true).await
}

async fn https_upstream_offering(leaf: &Leaf, h2: bool) -> std::net::SocketAddr {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let chain = CertificateDer::pem_slice_iter(leaf.chain.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap();
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = if h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                // The name the client asked for by SNI (none for an address).
                let sni = tls.get_ref().1.server_name().unwrap_or("").to_owned();
                let answer =
                    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                        let sni = sni.clone();
                        async move {
                            // A login fails (UNAUTHENTICATED), in the trailers as gRPC
                            // servers send it; any other call succeeds.
                            let code = if request.uri().path().ends_with("/Login") {
                                "16"
                            } else {
                                "0"
                            };
                            let mut trailers = hyper::HeaderMap::new();
                            trailers.insert("grpc-status", code.parse().unwrap());
                            let body =
                                http_body_util::Full::new(bytes::Bytes::from_static(b"reply"))
                                    .with_trailers(async move { Some(Ok(trailers)) });
                            let response = hyper::Response::builder()
                                .header("content-type", "application/grpc")
                                .header("x-version", format!("{:?}", request.version()))
                                .header("x-sni", sni)
                                .body(body)
                                .unwrap();
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), answer)
                    .await;
            });
        }
    });
    addr
}

/// A gateway (h2c, no TLS of its own) in front of `upstream`, verified by `ca` (a
/// PEM file in `dir`), in HTTP/2 or not.
fn https_gateway(
    dir: &Path,
    upstream: std::net::SocketAddr,
    ca: &str,
    http2: bool,
) -> std::path::PathBuf {
    let config = format!(
        "upstream:\n  url: https://{upstream}\n  ca_file: {ca}\n  http2: {http2}\nrules:\n  - name: all\n    match: {{ path_prefix: / }}\n    key: [client_ip]\n    algorithm: fixed_window\n    limit: 1000\n    period: 1m\n"
    );
    let path = dir.join(format!("weir-{http2}-{ca}.yaml"));
    std::fs::write(&path, config).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstreams_are_verified_and_grpc_passes_with_its_trailers_over_http2() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, stranger) = (Pki::new(), Pki::new());
    let upstream = https_upstream(&pki.leaf("127.0.0.1", 2099)).await;
    std::fs::write(dir.path().join("ca.pem"), pki.ca.pem()).unwrap();
    std::fs::write(dir.path().join("other-ca.pem"), stranger.ca.pem()).unwrap();

    // HTTP/2 to the upstream: a gRPC call's trailers come back to the client.
    let weir = Server::start(&https_gateway(dir.path(), upstream, "ca.pem", true));
    let mut send = h2(TcpStream::connect(&weir.addr).await.unwrap()).await;
    let call = Request::post(format!("http://{}/pkg.Svc/Call", weir.addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Body::from(&b"\0\0\0\0\0"[..]))
        .unwrap();
    let answer = send.send_request(call).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()["x-version"], "HTTP/2.0");
    assert!(answer.headers().contains_key("ratelimit"));
    let body = answer.into_body().collect().await.unwrap();
    assert_eq!(body.trailers().unwrap()["grpc-status"], "0");
    assert_eq!(body.to_bytes(), "reply");

    // Without `http2: true`, the upstream chooses by ALPN: this one offers h2, so the
    // call goes on in HTTP/2, trailers and all; one that offers HTTP/1.1 alone gets it.
    let h1_only = https_upstream_offering(&pki.leaf("127.0.0.1", 2099), false).await;
    for (upstream, version) in [(upstream, "HTTP/2.0"), (h1_only, "HTTP/1.1")] {
        let weir = Server::start(&https_gateway(dir.path(), upstream, "ca.pem", false));
        let mut send = h2(TcpStream::connect(&weir.addr).await.unwrap()).await;
        for _ in 0..3 {
            let call = Request::post(format!("http://{}/pkg.Svc/Call", weir.addr))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(Body::from(&b"\0\0\0\0\0"[..]))
                .unwrap();
            let answer = send.send_request(call).await.unwrap();
            assert_eq!(answer.status(), StatusCode::OK);
            assert_eq!(answer.headers()["x-version"], version);
            let body = answer.into_body().collect().await.unwrap();
            if version == "HTTP/2.0" {
                assert_eq!(body.trailers().unwrap()["grpc-status"], "0");
            }
            assert_eq!(body.to_bytes(), "reply");
        }
        let (status, _) = weir.request("GET", "/", "");
        assert_eq!(status, "HTTP/1.1 200 OK");
    }

    // An upstream named by a DNS name: the name is sent by SNI, and its certificate
    // checked for it (one for another name is a 502).
    for (named, status) in [
        ("localhost", StatusCode::OK),
        ("other.example", StatusCode::BAD_GATEWAY),
    ] {
        let by_name = https_upstream(&pki.leaf(named, 2099)).await;
        let config = dir.path().join(format!("by-name-{named}.yaml"));
        std::fs::write(
            &config,
            format!(
                "upstream:\n  url: https://localhost:{}\n  ca_file: ca.pem\nrules:\n  - name: all\n    match: {{ path_prefix: / }}\n    key: [client_ip]\n    algorithm: fixed_window\n    limit: 1000\n    period: 1m\n",
                by_name.port()
            ),
        )
        .unwrap();
        let weir = Server::start(&config);
        let mut send = h2(TcpStream::connect(&weir.addr).await.unwrap()).await;
        let call = Request::get(format!("http://{}/", weir.addr))
            .body(Body::empty())
            .unwrap();
        let answer = send.send_request(call).await.unwrap();
        assert_eq!(answer.status(), status, "{named}: {answer:?}");
        if status == StatusCode::OK {
            assert_eq!(answer.headers()["x-sni"], "localhost");
        }
    }

    // Verified against another authority: a 502 problem, and the reason in the log.
    let log = dir.path().join("weir.log");
    let weir = Server::start_with(
        &https_gateway(dir.path(), upstream, "other-ca.pem", false),
        &[],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let (status, body) = weir.request("GET", "/", "");
    assert_eq!(status, "HTTP/1.1 502 Bad Gateway", "{body}");
    assert!(body.contains("/problems/"), "{body}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("failed: invalid peer certificate")
    {
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            Instant::now() < deadline,
            "no log line names the reason: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A gRPC call's HTTP status is 200 whether it failed or not: a rule counted by
/// outcome counts it by its `grpc-status` (from the trailers), so failed logins are
/// counted and the limit holds (they were all given back as 200s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_are_counted_by_their_grpc_status() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    let upstream = https_upstream(&pki.leaf("127.0.0.1", 2099)).await;
    std::fs::write(dir.path().join("ca.pem"), pki.ca.pem()).unwrap();
    let config = dir.path().join("weir.yaml");
    std::fs::write(
        &config,
        format!(
            "upstream:\n  url: https://{upstream}\n  ca_file: ca.pem\n  http2: true\nrules:\n  - name: logins\n    match: {{ path_prefix: /auth.Auth/ }}\n    key: [client_ip]\n    algorithm: sliding_log\n    limit: 2\n    period: 15m\n    count_statuses: [401]\n"
        ),
    )
    .unwrap();
    let weir = Server::start(&config);
    let mut send = h2(TcpStream::connect(&weir.addr).await.unwrap()).await;
    let mut call = |method: &str| {
        let request = Request::post(format!("http://{}/auth.Auth/{method}", weir.addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Body::from(&b"\0\0\0\0\0"[..]))
            .unwrap();
        let sent = send.send_request(request);
        async move {
            let answer = sent.await.unwrap();
            let denied = answer
                .headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap().to_owned());
            let body = answer.into_body().collect().await.unwrap();
            let status = body
                .trailers()
                .and_then(|t| t.get("grpc-status"))
                .map(|v| v.to_str().unwrap().to_owned());
            denied.or(status).unwrap()
        }
    };
    // Two failed logins pass and are counted (the reservation kept, whenever the
    // trailers are read); the third is RESOURCE_EXHAUSTED.
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(call("Login").await);
    }
    assert_eq!(seen, ["16", "16", "8", "8"]);
}

#[test]
fn check_config_names_the_upstream_field_at_fault() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    let check = |upstream: &str| {
        let path = dir.path().join("check.yaml");
        std::fs::write(
            &path,
            format!("upstream:\n{upstream}rules:\n  - {{ name: a, algorithm: gcra, limit: 1, period: 1s }}\n"),
        )
        .unwrap();
        match weir::Config::load(&path) {
            Ok(_) => "ok".to_owned(),
            Err(error) => format!("{}: {}", error.field.unwrap_or_default(), error.message),
        }
    };
    for (upstream, start) in [
        (
            "  url: https://api.internal:8443\n  ca_file: none.pem\n",
            "upstream.ca_file: cannot read",
        ),
        (
            "  url: https://api.internal:8443\n  ca_file: empty.pem\n",
            "upstream.ca_file: no certificate in",
        ),
        (
            "  url: http://api.internal:8080\n  ca_file: empty.pem\n",
            "upstream.ca_file: ca_file verifies an https:// upstream",
        ),
        (
            "  url: ftp://api.internal\n",
            "upstream.url: `ftp://api.internal` is not an upstream URL",
        ),
        (
            "  url: http://api.internal:0\n",
            "upstream.url: `http://api.internal:0` is not an upstream URL",
        ),
    ] {
        let said = check(upstream);
        assert!(said.starts_with(start), "{said}");
    }
}
