//! Envoy's rate limit service over gRPC, in process on a loopback port with a manual
//! clock: envoyproxy/ratelimit's own configuration test files (`tests/envoy/upstream`)
//! through `ShouldRateLimit` (the lookups of its `config_test.go`), and the answers'
//! semantics: counting per value, `hits_addend`, `overall_code`, the statuses,
//! shadow mode, `replaces`, the charging of the other descriptors, health.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

#[path = "envoy/harness.rs"]
mod harness;

use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::google::protobuf::UInt64Value;
use harness::{Harness, config_dir, fixture, request};

/// A descriptor's entries, `(key, value)`.
type Entries<'a> = &'a [(&'a str, &'a str)];

/// A limit as `(requests_per_unit, unit, name)`.
type Limit<'a> = (u32, Unit, &'a str);

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

/// A status's limit as `(requests_per_unit, unit, name)`.
fn limit_of(status: &DescriptorStatus) -> Option<(u32, Unit, String)> {
    status.current_limit.as_ref().map(|l| {
        (
            l.requests_per_unit,
            Unit::try_from(l.unit).unwrap(),
            l.name.clone(),
        )
    })
}

fn codes(response: &RateLimitResponse) -> (i32, Vec<i32>) {
    (
        response.overall_code,
        response.statuses.iter().map(|s| s.code).collect(),
    )
}

async fn basic() -> Harness {
    Harness::memory(config_dir(&[fixture("basic_config.yaml")], "", "")).await
}

/// `TestBasicConfig` of envoyproxy/ratelimit's config tests, asked through the service.
#[tokio::test]
async fn basic_config_finds_the_limits_its_own_tests_expect() {
    let weir = basic().await;
    let cases: &[(Entries, Option<Limit>)] = &[
        (&[("key1", "something")], None),
        (&[("key1", "value1")], None),
        (&[("key2", "value2"), ("subkey", "subvalue")], None),
        (&[("key5", "value5"), ("subkey5", "subvalue")], None),
        (
            &[("key1", "value1"), ("subkey1", "something")],
            Some((5, Unit::Second, "")),
        ),
        (
            &[("key1", "value1"), ("subkey1", "subvalue1")],
            Some((10, Unit::Second, "")),
        ),
        (&[("key2", "something")], Some((20, Unit::Minute, ""))),
        (&[("key2", "value2")], Some((30, Unit::Minute, ""))),
        (&[("key2", "value3")], None),
        (&[("key3", "foo")], Some((1, Unit::Hour, ""))),
        (&[("key4", "foo")], Some((1, Unit::Day, "key4_rate_limit"))),
        (
            &[("key7", "unspecified_value")],
            Some((70, Unit::Minute, "")),
        ),
        (
            &[("key5", "value5"), ("subkey5", "subvalue5")],
            Some((25, Unit::Day, "")),
        ),
    ];
    for (entries, want) in cases {
        let response = weir.ask("test-domain", &[entries]).await;
        assert_eq!(response.overall_code, OK, "{entries:?}");
        let got = limit_of(&response.statuses[0]);
        let want = want.map(|(n, unit, name)| (n, unit, name.to_owned()));
        assert_eq!(got, want, "{entries:?}");
        if want.is_none() {
            assert_eq!(response.statuses[0].limit_remaining, 0, "{entries:?}");
        }
    }
    // Unlimited: OK, no limit, everything remaining.
    let response = weir.ask("test-domain", &[&[("key6", "foo")]]).await;
    assert_eq!(codes(&response), (OK, vec![OK]));
    assert_eq!(response.statuses[0].current_limit, None);
    assert_eq!(response.statuses[0].limit_remaining, u32::MAX);
    // An unknown domain is OK.
    let response = weir.ask("foo_domain", &[&[("key2", "value2")]]).await;
    assert_eq!(codes(&response), (OK, vec![OK]));
    assert_eq!(response.statuses[0].current_limit, None);
}

#[tokio::test]
async fn past_the_limit_is_over_until_the_window_ends() {
    let weir = basic().await;
    let key3 = [("key3", "foo")];
    let first = weir.ask("test-domain", &[&key3]).await;
    assert_eq!(codes(&first), (OK, vec![OK]));
    assert_eq!(first.statuses[0].limit_remaining, 0);
    // 10 s into the hour: 3,590 s until its window ends.
    let reset = first.statuses[0].duration_until_reset.unwrap();
    assert_eq!((reset.seconds, reset.nanos), (3_590, 0));
    let second = weir.ask("test-domain", &[&key3]).await;
    assert_eq!(codes(&second), (OVER, vec![OVER]));
    assert_eq!(second.statuses[0].limit_remaining, 0);
    assert_eq!(limit_of(&second.statuses[0]).unwrap().0, 1);
    weir.clock.advance(Duration::from_secs(3_589));
    let still = weir.ask("test-domain", &[&key3]).await;
    assert_eq!(still.overall_code, OVER);
    assert_eq!(still.statuses[0].duration_until_reset.unwrap().seconds, 1);
    weir.clock.advance(Duration::from_secs(1));
    let next = weir.ask("test-domain", &[&key3]).await;
    assert_eq!(codes(&next), (OK, vec![OK]));
}

#[tokio::test]
async fn a_value_less_descriptor_counts_each_value_apart() {
    let weir = basic().await;
    // key2: 20 a minute per value.
    for _ in 0..20 {
        assert_eq!(
            weir.ask("test-domain", &[&[("key2", "a")]])
                .await
                .overall_code,
            OK
        );
    }
    assert_eq!(
        weir.ask("test-domain", &[&[("key2", "a")]])
            .await
            .overall_code,
        OVER
    );
    let b = weir.ask("test-domain", &[&[("key2", "b")]]).await;
    assert_eq!(codes(&b), (OK, vec![OK]));
    assert_eq!(b.statuses[0].limit_remaining, 19);
    // The same entries in another domain are another counter (unknown domain: OK).
    assert_eq!(
        weir.ask("other", &[&[("key2", "a")]]).await.overall_code,
        OK
    );
}

#[tokio::test]
async fn hits_addend_on_the_request_and_per_descriptor() {
    let weir = basic().await;
    let entries: &[(&str, &str)] = &[("key2", "value2")]; // 30 a minute
    let mut ask = request("test-domain", &[entries]);
    ask.hits_addend = 5;
    let response = weir.send(ask.clone()).await.unwrap();
    assert_eq!(response.statuses[0].limit_remaining, 25);
    // A descriptor's own hits_addend wins over the request's; 0 only looks.
    ask.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
    let looked = weir.send(ask.clone()).await.unwrap();
    assert_eq!(codes(&looked), (OK, vec![OK]));
    assert_eq!(looked.statuses[0].limit_remaining, 25);
    ask.descriptors[0].hits_addend = Some(UInt64Value { value: 26 });
    let over = weir.send(ask.clone()).await.unwrap();
    assert_eq!(codes(&over), (OVER, vec![OVER]));
    // As in envoyproxy/ratelimit (which counts the 26 past the limit), every hit is
    // over until the window ends: the window was filled.
    ask.descriptors[0].hits_addend = Some(UInt64Value { value: 1 });
    let rest = weir.send(ask.clone()).await.unwrap();
    assert_eq!(codes(&rest), (OVER, vec![OVER]));
    weir.clock.advance(Duration::from_secs(50));
    assert_eq!(weir.send(ask).await.unwrap().overall_code, OK);
}

#[tokio::test]
async fn all_or_nothing_spends_nothing_on_a_denial() {
    let weir = Harness::memory(config_dir(
        &[fixture("basic_config.yaml")],
        "  all_or_nothing: true\n",
        "",
    ))
    .await;
    let mut ask = request("test-domain", &[&[("key2", "value2")]]); // 30 a minute
    ask.hits_addend = 26;
    assert_eq!(weir.send(ask.clone()).await.unwrap().overall_code, OK);
    assert_eq!(weir.send(ask.clone()).await.unwrap().overall_code, OVER);
    // weir's way: the denied 26 took nothing; the 4 left are there.
    ask.hits_addend = 4;
    let rest = weir.send(ask).await.unwrap();
    assert_eq!(codes(&rest), (OK, vec![OK]));
    assert_eq!(rest.statuses[0].limit_remaining, 0);
}

/// Two descriptors, the first (key3: 1 an hour) spent: is the second charged?
async fn second_remaining_after_a_denial(options: &str) -> u32 {
    let weir = Harness::memory(config_dir(&[fixture("basic_config.yaml")], options, "")).await;
    let spent: &[(&str, &str)] = &[("key3", "x")];
    let other: &[(&str, &str)] = &[("key2", "value2")];
    weir.ask("test-domain", &[spent]).await;
    let response = weir.ask("test-domain", &[spent, other]).await;
    assert_eq!(codes(&response), (OVER, vec![OVER, OK]));
    let after = weir.ask("test-domain", &[other]).await;
    after.statuses[0].limit_remaining
}

#[tokio::test]
async fn a_denied_request_charges_the_others_unless_all_or_nothing() {
    // As envoyproxy/ratelimit: the descriptor within its limit is charged (30 - 2).
    assert_eq!(second_remaining_after_a_denial("").await, 28);
    // weir's way: nothing consumed elsewhere (30 - 1).
    assert_eq!(
        second_remaining_after_a_denial("  all_or_nothing: true\n").await,
        29
    );
}

#[tokio::test]
async fn with_all_or_nothing_a_zero_limit_charges_nothing_elsewhere() {
    let file = "domain: z
descriptors:
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: counted
    rate_limit: {unit: minute, requests_per_unit: 10}
";
    let remaining_after = |options: &'static str| async move {
        let weir = Harness::memory(config_dir(&[("z.yaml", file.to_owned())], options, "")).await;
        let both: [&[(&str, &str)]; 2] = [&[("blocked", "x")], &[("counted", "x")]];
        let denied = weir.ask("z", &both).await;
        assert_eq!(codes(&denied), (OVER, vec![OVER, OK]));
        weir.ask("z", &[&[("counted", "x")]]).await.statuses[0].limit_remaining
    };
    // As envoyproxy/ratelimit: the other descriptor is charged (10 - 2).
    assert_eq!(remaining_after("").await, 8);
    // All-or-nothing: the zero limit denies, nothing is charged (10 - 1).
    assert_eq!(remaining_after("  all_or_nothing: true\n").await, 9);
}

#[tokio::test]
async fn shadow_mode_per_descriptor_and_global() {
    let weir = Harness::memory(config_dir(&[fixture("shadowmode_config.yaml")], "", "")).await;
    // key2: 20 a minute, in shadow mode: never over, though counted.
    for _ in 0..21 {
        let response = weir.ask("test-domain", &[&[("key2", "x")]]).await;
        assert_eq!(codes(&response), (OK, vec![OK]));
    }
    let response = weir.ask("test-domain", &[&[("key2", "x")]]).await;
    assert_eq!(response.statuses[0].limit_remaining, 0);
    // Global shadow mode: the status says over, the request is OK.
    let weir = Harness::memory(config_dir(
        &[fixture("basic_config.yaml")],
        "  shadow_mode: true\n",
        "",
    ))
    .await;
    weir.ask("test-domain", &[&[("key3", "x")]]).await;
    let response = weir.ask("test-domain", &[&[("key3", "x")]]).await;
    assert_eq!(codes(&response), (OK, vec![OVER]));
}

#[tokio::test]
async fn wildcards_match_as_upstream_documents() {
    let weir = Harness::memory(config_dir(&[fixture("wildcard.yaml")], "", "")).await;
    let cases: &[(Entries, Option<u32>)] = &[
        (&[("wild", "foo1")], Some(20)),
        (&[("wild", "foo")], Some(20)),
        (&[("wild", "bar")], None),
        (&[("noWild", "foo1")], None),
        (&[("noWild", "foo")], Some(20)),
        (&[("noVal", "anything")], Some(20)),
        (&[("midWild", "barab")], Some(20)),
        (&[("midWild", "barb")], Some(20)),
        (&[("midWild", "barba")], None),
        (&[("multiWild", "foo1bar2baz")], Some(10)),
        (&[("multiWild", "foobarbaz")], Some(10)),
        (&[("multiWild", "foo1baz")], None),
        (&[("nestedWild", "val1"), ("wild", "goo2")], Some(20)),
        (&[("nestedWild", "val1"), ("wild", "foo")], None),
    ];
    for (entries, want) in cases {
        let response = weir.ask("test-domain", &[entries]).await;
        let got = limit_of(&response.statuses[0]).map(|l| l.0);
        assert_eq!(got, *want, "{entries:?}");
    }
}

#[tokio::test]
async fn a_limit_that_another_replaces_is_not_applied() {
    let file = "domain: d
descriptors:
  - key: general
    rate_limit: {name: general, unit: hour, requests_per_unit: 1}
  - key: vip
    rate_limit: {unit: hour, requests_per_unit: 100, replaces: [{name: general}]}
";
    let weir = Harness::memory(config_dir(&[("d.yaml", file.to_owned())], "", "")).await;
    let general: &[(&str, &str)] = &[("general", "x")];
    let vip: &[(&str, &str)] = &[("vip", "x")];
    weir.ask("d", &[general]).await;
    assert_eq!(weir.ask("d", &[general]).await.overall_code, OVER);
    // With vip beside it, general's limit is replaced: no limit, OK.
    let response = weir.ask("d", &[general, vip]).await;
    assert_eq!(codes(&response), (OK, vec![OK, OK]));
    assert_eq!(response.statuses[0].current_limit, None);
    assert_eq!(limit_of(&response.statuses[1]).unwrap().0, 100);
}

#[tokio::test]
async fn a_limit_sent_with_the_descriptor_is_used() {
    let weir = basic().await;
    let mut ask = request("test-domain", &[&[("anything", "x")]]);
    ask.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 2,
        unit: Unit::Minute as i32,
    });
    for code in [OK, OK, OVER] {
        let response = weir.send(ask.clone()).await.unwrap();
        assert_eq!(response.overall_code, code);
        assert_eq!(limit_of(&response.statuses[0]).unwrap().0, 2);
    }
    // An unknown domain has no limit, whatever was sent with it (as upstream).
    let mut elsewhere = ask.clone();
    elsewhere.domain = "unknown-domain".to_owned();
    for _ in 0..3 {
        let response = weir.send(elsewhere.clone()).await.unwrap();
        assert_eq!(codes(&response), (OK, vec![OK]));
        assert_eq!(response.statuses[0].current_limit, None);
    }
    ask.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 2,
        unit: Unit::Unknown as i32,
    });
    let refused = weir.send(ask).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn a_request_without_a_domain_or_descriptors_is_an_invalid_argument() {
    let weir = basic().await;
    let no_domain = weir
        .send(request("", &[&[("key2", "x")]]))
        .await
        .unwrap_err();
    assert_eq!(no_domain.code(), tonic::Code::InvalidArgument);
    let none = weir.send(request("test-domain", &[])).await.unwrap_err();
    assert_eq!(none.code(), tonic::Code::InvalidArgument);
    // Bounded: 256 descriptors of 64 entries at most.
    let entries: Vec<(&str, &str)> = vec![("key2", "x"); 64];
    let many: Vec<&[(&str, &str)]> = vec![&entries[..]; 256];
    assert!(weir.send(request("test-domain", &many)).await.is_ok());
    let more: Vec<&[(&str, &str)]> = vec![&entries[..1]; 257];
    let refused = weir.send(request("test-domain", &more)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let long: Vec<(&str, &str)> = vec![("key2", "x"); 65];
    let refused = weir
        .send(request("test-domain", &[&long]))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn rate_limit_headers_for_the_descriptor_closest_to_its_limit() {
    let weir = Harness::memory(config_dir(
        &[fixture("basic_config.yaml")],
        "  response_headers: true\n",
        "",
    ))
    .await;
    let response = weir
        .ask("test-domain", &[&[("key2", "value2")], &[("key2", "x")]])
        .await;
    let headers: Vec<(&str, &str)> = response
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    // key2 (20 a minute, 19 left) is closer than key2_value2 (30, 29 left); 50 s left.
    assert_eq!(
        headers,
        [
            ("RateLimit-Limit", "20"),
            ("RateLimit-Remaining", "19"),
            ("RateLimit-Reset", "50")
        ]
    );
    // Off by default.
    let plain = basic().await.ask("test-domain", &[&[("key2", "x")]]).await;
    assert!(plain.response_headers_to_add.is_empty());
}

#[tokio::test]
async fn health_is_served_for_the_server_and_the_rate_limit_service() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let weir = basic().await;
    let mut health = HealthClient::new(weir.channel.clone());
    for service in ["", "envoy.service.ratelimit.v3.RateLimitService"] {
        // The rate limit service is reported once the first look at the store is made.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let answer = health
                .check(HealthCheckRequest {
                    service: service.to_owned(),
                })
                .await;
            match answer {
                Ok(answer) if answer.get_ref().status == ServingStatus::Serving as i32 => break,
                other => assert!(
                    tokio::time::Instant::now() < deadline,
                    "{service:?}: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn the_same_descriptor_twice_in_a_request_counts_twice() {
    let weir = basic().await;
    // key3: 1 an hour. envoyproxy/ratelimit adds both hits to one counter.
    let twice: &[(&str, &str)] = &[("key3", "x")];
    let response = weir.ask("test-domain", &[twice, twice]).await;
    assert_eq!(response.overall_code, OVER, "{response:?}");
    let key2: &[(&str, &str)] = &[("key2", "value2")]; // 30 a minute
    let response = weir.ask("test-domain", &[key2, key2]).await;
    assert_eq!(codes(&response), (OK, vec![OK, OK]));
    let after = weir.ask("test-domain", &[key2]).await;
    assert_eq!(after.statuses[0].limit_remaining, 27);
}

#[tokio::test]
async fn descriptors_are_counted_in_the_metrics_by_outcome() {
    let weir = basic().await;
    let key3: &[(&str, &str)] = &[("key3", "m")];
    weir.ask("test-domain", &[key3]).await;
    weir.ask(
        "test-domain",
        &[key3, &[("key6", "x")], &[("nothing", "x")]],
    )
    .await;
    let text = weir.service.metrics.encode();
    let count = |outcome: &str| {
        let series = format!("weir_envoy_descriptors_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
            .to_owned()
    };
    assert_eq!(count("ok"), "1");
    assert_eq!(count("over_limit"), "1");
    assert_eq!(count("unlimited"), "1");
    assert_eq!(count("no_limit"), "1");
    assert_eq!(count("unavailable"), "0");
    // ... and the calls as the door's answers: one OK, one over the limit.
    for (status, calls) in [("2xx", "1"), ("4xx", "1"), ("5xx", "0")] {
        let series = format!("weir_door_answers_total{{door=\"envoy\",status=\"{status}\"}} ");
        let found = text.lines().find_map(|line| line.strip_prefix(&series));
        assert_eq!(found, Some(calls), "{series} in\n{text}");
    }
}

/// weir's additions (`x-weir`): any algorithm, any period, a burst.
const WEIR_FILE: &str = "domain: w
descriptors:
  - key: half_minute
    rate_limit: {unit: minute, requests_per_unit: 2}
    x-weir: {period: 30s}
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 10}
    x-weir: {algorithm: token_bucket, burst: 1}
";

#[tokio::test]
async fn x_weir_decides_a_rate_limit_by_any_algorithm_and_period() {
    let weir = Harness::memory(config_dir(&[("w.yaml", WEIR_FILE.to_owned())], "", "")).await;
    // 2 per 30 s, fixed windows aligned to the epoch: T0 is 10 s into one.
    let half: &[(&str, &str)] = &[("half_minute", "a")];
    // A look (a descriptor's hits_addend 0) at an empty window: the 30 s window's
    // end, not the unit's minute.
    let mut peek = request("w", &[half]);
    peek.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
    let empty = weir.send(peek).await.unwrap();
    assert_eq!(empty.statuses[0].duration_until_reset.unwrap().seconds, 20);
    let first = weir.ask("w", &[half]).await;
    assert_eq!(codes(&first), (OK, vec![OK]));
    assert_eq!(first.statuses[0].duration_until_reset.unwrap().seconds, 20);
    // The configured limit is what is reported.
    assert_eq!(limit_of(&first.statuses[0]).unwrap().0, 2);
    assert_eq!(weir.ask("w", &[half]).await.overall_code, OK);
    assert_eq!(weir.ask("w", &[half]).await.overall_code, OVER);
    weir.clock.advance(Duration::from_secs(20));
    assert_eq!(weir.ask("w", &[half]).await.overall_code, OK);
    // A token bucket of 10 a minute holding 1: one now, the next 6 s later.
    let bucket: &[(&str, &str)] = &[("bucket", "a")];
    assert_eq!(weir.ask("w", &[bucket]).await.overall_code, OK);
    assert_eq!(weir.ask("w", &[bucket]).await.overall_code, OVER);
    weir.clock.advance(Duration::from_secs(6));
    assert_eq!(weir.ask("w", &[bucket]).await.overall_code, OK);
}

/// A `requests_per_unit` above weir's largest limit (a billion), as files write
/// "unlimited" (4294967295): counted as a billion, never as a zero denying everything.
#[tokio::test]
async fn a_limit_past_a_billion_counts_as_a_billion() {
    let file = "domain: big\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 4294967295\n";
    let weir = Harness::memory(config_dir(&[("big.yaml", file.to_owned())], "", "")).await;
    for _ in 0..3 {
        let response = weir.ask("big", &[&[("k", "v")]]).await;
        assert_eq!(codes(&response), (OK, vec![OK]));
    }
}

/// Several limits on one descriptor (`x-weir: { also }`): 3 a second and 5 a minute.
const ALSO_FILE: &str = "domain: m
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 3, name: per_second}
    x-weir:
      also:
        - {requests_per_unit: 5, unit: minute, name: per_minute}
";

/// A status's `(code, limit_remaining, requests_per_unit, unit, name, seconds until reset)`.
fn status_of(status: &DescriptorStatus) -> (i32, u32, u32, Unit, String, i64) {
    let (requests, unit, name) = limit_of(status).unwrap();
    let until = status.duration_until_reset.unwrap();
    let seconds = until.seconds + i64::from(until.nanos > 0);
    (
        status.code,
        status.limit_remaining,
        requests,
        unit,
        name,
        seconds,
    )
}

#[tokio::test]
async fn a_descriptor_with_several_limits_is_over_when_any_is() {
    let weir = Harness::memory(config_dir(&[("m.yaml", ALSO_FILE.to_owned())], "", "")).await;
    let user: Entries = &[("user", "a")];
    let second =
        |remaining: u32, code: i32| (code, remaining, 3, Unit::Second, "per_second".to_owned(), 1);
    // The limit with the least remaining is reported: the second's (2, 1, 0 left of 3,
    // against 4, 3, 2 of 5 a minute).
    for left in [2, 1, 0] {
        let answer = weir.ask("m", &[user]).await;
        assert_eq!(status_of(&answer.statuses[0]), second(left, OK));
    }
    // Over the second's limit; the minute's is charged all the same (as every limit
    // within its own is, by default): 1 left of it.
    let answer = weir.ask("m", &[user]).await;
    assert_eq!(answer.overall_code, OVER);
    assert_eq!(status_of(&answer.statuses[0]), second(0, OVER));
    weir.clock.advance(Duration::from_secs(1));
    // A new second: the minute's limit now has the least left (0 of 5), and binds.
    let answer = weir.ask("m", &[user]).await;
    let minute = |code: i32| (code, 0, 5, Unit::Minute, "per_minute".to_owned(), 49);
    assert_eq!(status_of(&answer.statuses[0]), minute(OK));
    let answer = weir.ask("m", &[user]).await;
    assert_eq!(answer.overall_code, OVER);
    assert_eq!(status_of(&answer.statuses[0]), minute(OVER));
    // Another value, counted apart.
    let answer = weir.ask("m", &[&[("user", "b")]]).await;
    assert_eq!(status_of(&answer.statuses[0]), second(2, OK));
}

#[tokio::test]
async fn with_all_or_nothing_a_limit_over_charges_none_of_the_others() {
    let dir = config_dir(
        &[("m.yaml", ALSO_FILE.to_owned())],
        "  all_or_nothing: true\n",
        "",
    );
    let weir = Harness::memory(dir).await;
    let user: Entries = &[("user", "a")];
    let codes_of = |answers: &[RateLimitResponse]| -> Vec<i32> {
        answers.iter().map(|a| a.overall_code).collect()
    };
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(weir.ask("m", &[user]).await);
    }
    // Two over the second's limit consumed nothing of the minute's...
    assert_eq!(codes_of(&answers), [OK, OK, OK, OVER, OVER]);
    weir.clock.advance(Duration::from_secs(1));
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(weir.ask("m", &[user]).await);
    }
    // ...so two more pass the next second, and the minute's limit binds the third.
    assert_eq!(codes_of(&answers), [OK, OK, OVER]);
    let minute = (OVER, 0, 5, Unit::Minute, "per_minute".to_owned(), 49);
    assert_eq!(status_of(&answers[2].statuses[0]), minute);
}

/// envoyproxy/ratelimit's `quota_mode` (its example configuration's services): a quota
/// descriptor over its limit fails the request only when every quota descriptor of the
/// request is over; its status says over all the same.
const QUOTA_FILE: &str = "domain: q
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
";

#[tokio::test]
async fn quota_descriptors_fail_a_request_only_when_all_are_over() {
    let weir = Harness::memory(config_dir(&[("q.yaml", QUOTA_FILE.to_owned())], "", "")).await;
    let s1: Entries = &[("service", "service_1")];
    let s2: Entries = &[("service", "service_2")];
    let user: Entries = &[("user", "u")];
    // A descriptor not in quota mode fails the request on its own, as ever.
    for _ in 0..10 {
        assert_eq!(weir.ask("q", &[user]).await.overall_code, OK);
    }
    assert_eq!(
        codes(&weir.ask("q", &[user, s2]).await),
        (OVER, vec![OVER, OK])
    );
    // service_2 has 1 left of 2: service_1 over alone does not fail the request.
    assert_eq!(codes(&weir.ask("q", &[s1, s2]).await), (OK, vec![OK, OK]));
    assert_eq!(
        codes(&weir.ask("q", &[s1, s2]).await),
        (OVER, vec![OVER, OVER])
    );
    // One quota descriptor, over: all of them are.
    let other: Entries = &[("user", "o")];
    assert_eq!(
        codes(&weir.ask("q", &[other, s1]).await),
        (OVER, vec![OK, OVER])
    );
}

#[tokio::test]
async fn quota_mode_for_every_descriptor_from_the_section() {
    let dir = config_dir(&[fixture("basic_config.yaml")], "  quota_mode: true\n", "");
    let weir = Harness::memory(dir).await;
    // key4: 1 a day; key3: 1 an hour.
    let (a, b): (Entries, Entries) = (&[("key4", "a")], &[("key3", "b")]);
    assert_eq!(codes(&weir.ask("test-domain", &[a]).await), (OK, vec![OK]));
    assert_eq!(
        codes(&weir.ask("test-domain", &[a, b]).await),
        (OK, vec![OVER, OK])
    );
    assert_eq!(
        codes(&weir.ask("test-domain", &[a, b]).await),
        (OVER, vec![OVER, OVER])
    );
    // A descriptor no limit applies to is a quota descriptor never over (as there).
    let none: Entries = &[("nothing", "x")];
    assert_eq!(
        codes(&weir.ask("test-domain", &[a, none]).await),
        (OK, vec![OVER, OK])
    );
}

#[tokio::test]
async fn with_all_or_nothing_quota_descriptors_all_over_charge_nothing_else() {
    let dir = config_dir(
        &[("q.yaml", QUOTA_FILE.to_owned())],
        "  all_or_nothing: true\n",
        "",
    );
    let weir = Harness::memory(dir).await;
    let s1: Entries = &[("service", "service_1")];
    let s2: Entries = &[("service", "service_2")];
    let user: Entries = &[("user", "u")];
    let asked: &[Entries] = &[user, s1, s2];
    assert_eq!(codes(&weir.ask("q", asked).await), (OK, vec![OK, OK, OK]));
    // service_1 over, service_2 not: the request passes, and the user is charged...
    assert_eq!(codes(&weir.ask("q", asked).await), (OK, vec![OK, OVER, OK]));
    // ...every quota descriptor over: denied, the user only looked at.
    assert_eq!(codes(&weir.ask("q", asked).await).0, OVER);
    let alone = weir.ask("q", &[user]).await;
    assert_eq!(
        alone.statuses[0].limit_remaining, 7,
        "charged 3 times in all"
    );
}

/// A request of `hits` hits for one descriptor.
async fn hit(weir: &Harness, domain: &str, entries: Entries<'_>, hits: u64) -> (i32, u32) {
    let mut ask = request(domain, &[entries]);
    ask.descriptors[0].hits_addend = Some(UInt64Value { value: hits });
    let answer = weir.send(ask).await.unwrap();
    (answer.overall_code, answer.statuses[0].limit_remaining)
}

/// `share_threshold` (upstream's `share_threshold.yaml`, as its `TestShareThreshold`
/// reads it): every value a shared wildcard matches counts on one counter; an exact
/// value apart; nested shared wildcards share at each level.
#[tokio::test]
async fn share_threshold_shares_one_counter_among_a_wildcards_values() {
    let weir = Harness::memory(config_dir(&[fixture("share_threshold.yaml")], "", "")).await;
    let d = "test-domain";
    // files/*: 100 a minute for all of files/a, files/b, ...
    assert_eq!(hit(&weir, d, &[("files", "files/a")], 60).await, (OK, 40));
    assert_eq!(hit(&weir, d, &[("files", "files/b")], 40).await, (OK, 0));
    assert_eq!(hit(&weir, d, &[("files", "files/c")], 1).await, (OVER, 0));
    // test1 is its own (50); test* shares 100 among the rest.
    assert_eq!(hit(&weir, d, &[("file", "test1")], 10).await, (OK, 40));
    assert_eq!(hit(&weir, d, &[("file", "test2")], 30).await, (OK, 70));
    assert_eq!(hit(&weir, d, &[("file", "test3")], 30).await, (OK, 40));
    // user/* and res/* shared, the action by value (150).
    let entries =
        |user, resource, action| [("user", user), ("resource", resource), ("action", action)];
    assert_eq!(
        hit(&weir, d, &entries("user/1", "res/1", "get"), 100).await,
        (OK, 50)
    );
    assert_eq!(
        hit(&weir, d, &entries("user/2", "res/2", "get"), 50).await,
        (OK, 0)
    );
    assert_eq!(
        hit(&weir, d, &entries("user/3", "res/3", "put"), 50).await,
        (OK, 100)
    );
    // path/* shared, file/* not (share_threshold: false): each file its own 120.
    let path = |file| [("path", "path/a"), ("file", file), ("type", "t")];
    assert_eq!(hit(&weir, d, &path("file/1"), 120).await, (OK, 0));
    assert_eq!(
        hit(
            &weir,
            d,
            &[("path", "path/b"), ("file", "file/2"), ("type", "t")],
            1
        )
        .await,
        (OK, 119)
    );
    assert_eq!(
        hit(
            &weir,
            d,
            &[("path", "path/b"), ("file", "file/1"), ("type", "t")],
            1
        )
        .await,
        (OVER, 0)
    );
}

/// `merge_domains: true`: one domain from two files, each file's descriptors found.
#[tokio::test]
async fn merged_domains_find_the_descriptors_of_every_file() {
    let files = [
        fixture("merge_domain_key1.yaml"),
        fixture("merge_domain_key2.yaml"),
    ];
    let weir = Harness::memory(config_dir(&files, "  merge_domains: true\n", "")).await;
    let d = "test-domain";
    assert_eq!(hit(&weir, d, &[("key1", "value1")], 1).await, (OK, 9));
    assert_eq!(hit(&weir, d, &[("key2", "value2")], 1).await, (OK, 19));
}
