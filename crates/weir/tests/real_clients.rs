//! The main listener at the edge driven by real clients, not ones the tests write:
//! `curl` (HTTP/2 over TLS by ALPN, and h2c with prior knowledge), `openssl s_client`
//! (TLS versions, SNI, ALPN), `h2load` (many streams on one connection), headless
//! Chromium (a page loaded through weir over TLS), and a tonic gRPC client calling a
//! tonic gRPC server through weir. Each is held to exact answers: a
//! limit of 7 per key lets exactly 7 through, and denies the rest with 429 (a gRPC
//! call: grpc-status 8), the RateLimit fields on every answer. `scripts/test` installs
//! every client used here.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::Server;
use rcgen::{CertificateParams, CertifiedIssuer, IsCa, Issuer, KeyPair};

/// The limit per key of every gateway here.
const LIMIT: usize = 7;

/// Writes a certificate authority (`ca.pem`) and what it issued for `api.example`
/// (the default) and `www.example.com` (by SNI) into `dir`; returns weir's `tls`
/// section for them.
fn certificates(dir: &Path) -> &'static str {
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    // Named apart from what it issues, which OpenSSL would take for self-signed.
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "weir test CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    for (file, name) in [("api", "api.example"), ("www", "www.example.com")] {
        let key = KeyPair::generate().unwrap();
        let issuer: &Issuer<'_, KeyPair> = &ca;
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.signed_by(&key, issuer).unwrap();
        std::fs::write(dir.join(format!("{file}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{file}.key")), key.serialize_pem()).unwrap();
    }
    "tls:\n  certificates:\n    - { cert_file: api.pem, key_file: api.key }\n    - { cert_file: www.pem, key_file: www.key, hosts: [www.example.com] }\n"
}

/// weir in front of the echo at `upstream`, `LIMIT` requests an hour per `?key=` (a sliding log: no
/// window ends during a test),
/// with `tls` before it (or not).
fn gateway(dir: &Path, tls: &str, upstream: std::net::SocketAddr) -> Server {
    let config = format!(
        "{tls}upstream:\n  url: http://{upstream}\nidentities:\n  api_key: {{ query_param: key }}\nrules:\n  - name: per-key\n    match: {{ path_prefix: / }}\n    key: [api_key]\n    algorithm: sliding_log\n    limit: {LIMIT}\n    period: 1h\n"
    );
    let path = dir.join("weir.yaml");
    std::fs::write(&path, config).unwrap();
    Server::start(&path)
}

/// The port of `addr` (`127.0.0.1:PORT`).
fn port(addr: &str) -> &str {
    addr.rsplit_once(':').unwrap().1
}

/// Runs `program` with `args` (off the runtime's threads) and returns what it did.
fn run(program: &str, args: &[&str]) -> Output {
    tokio::task::block_in_place(|| {
        Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program} (scripts/test installs it): {e}"))
    })
}

/// Runs `program` with `args`, which must succeed; its standard output.
fn run_ok(program: &str, args: &[&str]) -> String {
    let output = run(program, args);
    assert!(
        output.status.success(),
        "{program} {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// What curl writes for each URL it fetched: the HTTP version and status, then
/// fields, each in brackets (empty when absent); read by [`fields`].
const CURL_OUT: &str = "%{http_version} %{response_code} [%header{ratelimit-policy}] [%header{ratelimit}] [%header{retry-after}] [%header{grpc-status}]\\n";

/// One line of [`CURL_OUT`]: the version and status, RateLimit-Policy, RateLimit,
/// Retry-After (as seconds, 0 when absent) and grpc-status.
fn fields(line: &str) -> (&str, &str, &str, u32, &str) {
    let parts: Vec<&str> = line.split(" [").map(|f| f.trim_end_matches(']')).collect();
    let [status, policy, ratelimit, retry, grpc] = parts[..] else {
        panic!("not a line of CURL_OUT: {line:?}")
    };
    let retry = if retry.is_empty() {
        0
    } else {
        retry.parse().unwrap()
    };
    (status, policy, ratelimit, retry, grpc)
}

/// Asserts the seconds `t` of a RateLimit field `"per-key";r=0;t=T` of a denial told to wait
/// `retry` s: the time until all seven are back, from the last of them (`retry` is
/// until the first), so at least `retry` and at most the hour.
fn assert_full_after(ratelimit: &str, retry: u32, out: &str) {
    let t: u32 = ratelimit
        .strip_prefix("\"per-key\";r=0;t=")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{ratelimit}: {out}"));
    assert!((retry..=3600).contains(&t), "t={t}, retry={retry}: {out}");
}

/// The RateLimit-Policy of every gateway here.
const POLICY: &str = "\"per-key\";q=7;w=3600";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_gets_http2_over_tls_and_h2c_and_exactly_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let upstream = common::echo::start().await;
    let secure = gateway(dir.path(), tls, upstream);
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = gateway(plain_dir.path(), "", upstream);

    let ca = dir.path().join("ca.pem");
    let resolve = format!("api.example:{}:127.0.0.1", port(&secure.addr));
    let over_tls = [
        "--http2",
        "--cacert",
        ca.to_str().unwrap(),
        "--resolve",
        &resolve,
    ];
    let base_tls = format!("https://api.example:{}", port(&secure.addr));
    let base_h2c = format!("http://{}", plain.addr);
    for (options, base) in [
        (&over_tls[..], base_tls.as_str()),
        (&["--http2-prior-knowledge"][..], base_h2c.as_str()),
    ] {
        // Nine requests of one key: seven allowed, counting down, then two denied
        // with the wait. One curl each: curl 7.88 (Debian 12's) cannot reuse an h2c
        // connection (curl#10634); h2load below has many streams on one.
        let url = format!("{base}/v1/items?key=curl");
        let mut out = String::new();
        for _ in 0..LIMIT + 2 {
            let args = [
                &[
                    "--silent",
                    "--show-error",
                    "-o",
                    "/dev/null",
                    "-w",
                    CURL_OUT,
                ][..],
                options,
                &[&url],
            ]
            .concat();
            out += &run_ok("curl", &args);
        }
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), LIMIT + 2, "{out}");
        for (n, line) in lines.iter().enumerate() {
            let (status, policy, ratelimit, retry, grpc) = fields(line);
            assert_eq!((policy, grpc), (POLICY, ""), "{out}");
            if n < LIMIT {
                assert_eq!(status, "2 200", "HTTP/2, allowed: {out}");
                let remaining = format!("\"per-key\";r={};t=", LIMIT - 1 - n);
                assert!(ratelimit.starts_with(&remaining), "{remaining}: {out}");
                assert_eq!(retry, 0, "no Retry-After: {out}");
            } else {
                assert_eq!(status, "2 429", "HTTP/2, denied: {out}");
                // The wait: until the first of the seven leaves the hour's log.
                assert!((3590..=3600).contains(&retry), "{out}");
                assert_full_after(ratelimit, retry, &out);
            }
        }
        // The upstream saw the request as it was sent, and how it came.
        let echoed = run_ok(
            "curl",
            &[
                &["--silent", "--show-error"][..],
                options,
                &[&format!("{base}/x?key=other")],
            ]
            .concat(),
        );
        let echoed: serde_json::Value = serde_json::from_str(&echoed).unwrap();
        let proto = if base.starts_with("https") {
            "https"
        } else {
            "http"
        };
        assert_eq!(echoed["x-forwarded-proto"], proto, "{echoed}");
        assert_eq!(echoed["path"], "/x", "{echoed}");

        // A gRPC call of the spent key: denied as gRPC, HTTP 200 with grpc-status 8.
        let grpc = format!("{base}/pkg.Svc/Call?key=curl");
        let args = [
            &[
                "--silent",
                "--show-error",
                "-o",
                "/dev/null",
                "-w",
                CURL_OUT,
            ][..],
            options,
            &[
                "-H",
                "content-type: application/grpc",
                "-H",
                "te: trailers",
                "--data-binary",
                "",
                &grpc,
            ],
        ]
        .concat();
        let out = run_ok("curl", &args);
        let (status, policy, ratelimit, retry, grpc) = fields(out.trim_end());
        assert_eq!((status, policy, grpc), ("2 200", POLICY, "8"), "{out}");
        assert!((3590..=3600).contains(&retry), "{out}");
        assert_full_after(ratelimit, retry, &out);
    }
}

/// `openssl s_client` to `weir` asking for `name`, with `options`: its exit status
/// and all it printed (standard output, then error).
fn s_client(weir: &Server, dir: &Path, name: &str, options: &[&str]) -> (bool, String) {
    let ca = dir.join("ca.pem");
    let args = [
        &[
            "s_client",
            "-connect",
            &weir.addr,
            "-servername",
            name,
            "-CAfile",
            ca.to_str().unwrap(),
            "-verify_return_error",
            "-verify_hostname",
            name,
        ][..],
        options,
    ]
    .concat();
    let output = run("openssl", &args);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openssl_gets_tls_1_2_and_1_3_by_sni_and_alpn_and_not_tls_1_1() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let upstream = common::echo::start().await;
    let weir = gateway(dir.path(), tls, upstream);

    for (version, alpn, protocol, chosen) in [
        ("-tls1_3", "h2,http/1.1", "TLSv1.3", "h2"),
        ("-tls1_2", "h2,http/1.1", "TLSv1.2", "h2"),
        ("-tls1_3", "http/1.1", "TLSv1.3", "http/1.1"),
        ("-tls1_2", "http/1.1", "TLSv1.2", "http/1.1"),
    ] {
        // Each name gets its own certificate (verified against the name asked for).
        for name in ["api.example", "www.example.com"] {
            let (ok, said) = s_client(&weir, dir.path(), name, &[version, "-alpn", alpn]);
            assert!(ok, "{name} {version} {alpn}: {said}");
            for expected in [
                format!("New, {protocol}, Cipher is "),
                format!("ALPN protocol: {chosen}\n"),
                format!("subject=CN = {name}\n"),
                "Verify return code: 0 (ok)".to_owned(),
            ] {
                assert!(
                    said.contains(&expected),
                    "{name} {version} {alpn}: no {expected:?} in {said}"
                );
            }
        }
    }
    // A name no certificate lists gets the default, which does not name it.
    let (ok, said) = s_client(&weir, dir.path(), "other.example", &["-tls1_3"]);
    assert!(!ok && said.contains("hostname mismatch"), "{said}");

    // TLS 1.1 and 1.0 are refused in the handshake: OpenSSL's hello for them offers
    // only their CBC suites, none of which weir has, so the alert is
    // handshake_failure (40), and no certificate is sent.
    for old in ["-tls1_1", "-tls1"] {
        let (ok, said) = s_client(&weir, dir.path(), "api.example", &[old]);
        assert!(!ok, "{old}: {said}");
        for expected in [
            "alert handshake failure",
            "SSL alert number 40",
            "no peer certificate available",
            "Cipher is (NONE)",
        ] {
            assert!(said.contains(expected), "{old}: no {expected:?} in {said}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2load_gets_exactly_the_limit_of_30_streams_on_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let upstream = common::echo::start().await;
    let secure = gateway(dir.path(), tls, upstream);
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = gateway(plain_dir.path(), "", upstream);

    let over_tls = format!(
        "https://api.example:{}/v1/items?key=h2load",
        port(&secure.addr)
    );
    let h2c = format!("http://{}/v1/items?key=h2load", plain.addr);
    for (weir, url, expected) in [
        (&secure, over_tls.as_str(), "Application protocol: h2\n"),
        (&plain, h2c.as_str(), "Application protocol: h2c\n"),
    ] {
        let connect_to = format!("--connect-to={}", weir.addr);
        // 30 requests of one key, all at once on one connection.
        let said = run_ok(
            "h2load",
            &["-n", "30", "-c", "1", "-m", "30", &connect_to, url],
        );
        for expected in [
            expected,
            "requests: 30 total, 30 started, 30 done, 7 succeeded, 23 failed, 0 errored, 0 timeout\n",
            "status codes: 7 2xx, 0 3xx, 23 4xx, 0 5xx\n",
        ] {
            assert!(said.contains(expected), "no {expected:?} in {said}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_loads_a_page_through_weir_over_tls_until_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let upstream = common::echo::start().await;
    let weir = gateway(dir.path(), tls, upstream);

    let chromium = std::env::var("WEIR_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let authority = format!("api.example:{}", port(&weir.addr));
    let page = format!("https://{authority}/page?key=chromium");
    let profile = dir.path().join("chromium");
    let browse = || {
        run_ok(
            &chromium,
            &[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--ignore-certificate-errors",
                "--host-resolver-rules=MAP api.example 127.0.0.1",
                &format!("--user-data-dir={}", profile.display()),
                "--dump-dom",
                &page,
            ],
        )
    };
    // The page the upstream gave, as the browser shows it: the request as it came.
    let dom = browse();
    for shown in [
        r#""path":"/page""#.to_owned(),
        r#""query":"key=chromium""#.to_owned(),
        format!(r#""host":"{authority}""#),
        r#""x-forwarded-proto":"https""#.to_owned(),
    ] {
        assert!(dom.contains(&shown), "the page lacks {shown}:\n{dom}");
    }
    // Six more of the key (seven in all), then the browser is shown the denial.
    let ca = dir.path().join("ca.pem");
    let resolve = format!("{authority}:127.0.0.1");
    for _ in 1..LIMIT {
        let status = run_ok(
            "curl",
            &[
                "--silent",
                "--cacert",
                ca.to_str().unwrap(),
                "--resolve",
                &resolve,
                "-o",
                "/dev/null",
                "-w",
                "%{response_code}",
                &page,
            ],
        );
        assert_eq!(status, "200");
    }
    let dom = browse();
    assert!(
        dom.contains(r#""title":"Too many requests","status":429"#),
        "{dom}"
    );
}

/// A tonic gRPC client calls a tonic gRPC server (the standard health service) through
/// weir, HTTP/2 on both sides (h2c to the client, prior knowledge to the upstream):
/// the calls within the limit are answered by the server with their trailers, and the
/// next is `RESOURCE_EXHAUSTED` with the wait and the RateLimit fields as metadata, as
/// a gRPC client reads them.
#[tokio::test]
async fn a_tonic_client_is_limited_by_grpc_status_through_weir_to_a_tonic_server() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("books", tonic_health::ServingStatus::Serving)
        .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "upstream:\n  url: http://{upstream}\n  http2: true\nidentities:\n  api_key: {{ header: x-api-key }}\nrules:\n  - name: per-key\n    match: {{ path_prefix: / }}\n    key: [api_key]\n    algorithm: sliding_log\n    limit: 2\n    period: 1h\n"
    );
    let path = dir.path().join("weir.yaml");
    std::fs::write(&path, config).unwrap();
    let weir = Server::start(&path);
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", weir.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    let call = |key: &'static str| {
        let mut request = tonic::Request::new(HealthCheckRequest {
            service: "books".into(),
        });
        request
            .metadata_mut()
            .insert("x-api-key", key.parse().unwrap());
        request
    };
    for _ in 0..2 {
        let answer = client.check(call("k")).await.unwrap();
        assert_eq!(answer.get_ref().status, ServingStatus::Serving as i32);
        let metadata = answer.metadata();
        assert_eq!(
            metadata.get("ratelimit-policy").unwrap(),
            "\"per-key\";q=2;w=3600"
        );
    }
    let denied = client.check(call("k")).await.unwrap_err();
    assert_eq!(denied.code(), tonic::Code::ResourceExhausted, "{denied:?}");
    assert!(
        denied
            .message()
            .starts_with("Too many requests; try again in"),
        "{denied:?}"
    );
    let metadata = denied.metadata();
    let retry: u64 = metadata
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((3590..=3600).contains(&retry), "{denied:?}");
    let pushback: u64 = metadata
        .get("grpc-retry-pushback-ms")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((3_590_000..=3_600_000).contains(&pushback), "{denied:?}");
    assert!(
        metadata
            .get("ratelimit")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("\"per-key\";r=0;t=")
    );
    // Another key on the same connection has its own limit.
    let other = client.check(call("other")).await.unwrap();
    assert_eq!(other.get_ref().status, ServingStatus::Serving as i32);
}
