//! envoyproxy/ratelimit's `/json` endpoint on a real `weir serve`'s HTTP port: the same
//! request and answer (proto3 JSON: lowerCamelCase, enum names as strings, defaults
//! left out), 200 when OK, 429 over the limit, 400 for what cannot be read.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

#[path = "envoy/harness.rs"]
mod harness;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use harness::{WeirProcess, config_dir, fixture};
use serde_json::{Value, json};

fn post(addr: SocketAddr, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /json HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

#[test]
fn json_answers_as_envoyproxy_ratelimit_does() {
    let dir = config_dir(&[fixture("basic_config.yaml")], "", "");
    let weir = WeirProcess::start(&dir.path().join("weir.yaml"));
    // key4: 1 a day, named.
    let ask = r#"{"domain": "test-domain", "descriptors": [
        {"entries": [{"key": "key4", "value": "x"}]},
        {"entries": [{"key": "key2", "value": "value2"}]}
    ]}"#;
    let (status, body) = post(weir.http, ask);
    assert_eq!(status, 200, "{body}");
    let mut answer: Value = serde_json::from_str(&body).unwrap();
    // The windows' ends depend on the wall clock: checked apart.
    for status in answer["statuses"].as_array_mut().unwrap() {
        let reset = status.as_object_mut().unwrap().remove("durationUntilReset");
        let reset = reset.unwrap();
        let reset = reset.as_str().unwrap();
        assert!(reset.ends_with('s'), "{reset}");
        reset.trim_end_matches('s').parse::<f64>().unwrap();
    }
    assert_eq!(
        answer,
        json!({
            "overallCode": "OK",
            "statuses": [
                {"code": "OK", "currentLimit": {"name": "key4_rate_limit", "requestsPerUnit": 1, "unit": "DAY"}},
                {"code": "OK", "currentLimit": {"requestsPerUnit": 30, "unit": "MINUTE"}, "limitRemaining": 29}
            ]
        })
    );
    let (status, body) = post(weir.http, ask);
    assert_eq!(status, 429, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["overallCode"], "OVER_LIMIT");
    assert_eq!(answer["statuses"][0]["code"], "OVER_LIMIT");
    // The proto's own field names, and 64-bit numbers as strings, are read too.
    let snake = r#"{"domain": "test-domain", "hits_addend": 2, "descriptors": [
        {"entries": [{"key": "key2", "value": "value2"}], "hits_addend": "0"}
    ]}"#;
    let (status, body) = post(weir.http, snake);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["statuses"][0]["limitRemaining"], 28);
    // No match: OK, with nothing but the code.
    let (status, body) = post(
        weir.http,
        r#"{"domain": "nowhere", "descriptors": [{"entries": [{"key": "a", "value": "b"}]}]}"#,
    );
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"overallCode":"OK","statuses":[{"code":"OK"}]}"#)
    );
    // What cannot be read, or is refused, is a 400.
    for bad in [
        "{",
        r#"{"domain": "d", "descriptors": [{"entries": [{"key": "a"}]}], "extra": 1}"#,
        r#"{"domain": "", "descriptors": [{"entries": [{"key": "a", "value": "b"}]}]}"#,
        r#"{"domain": "d", "descriptors": []}"#,
    ] {
        assert_eq!(post(weir.http, bad).0, 400, "{bad}");
    }
}
