//! Envoy's rate limit service on Redis (a `redis-server` of the test's own): two
//! weir instances share the descriptors' counts, and a Redis that is down or hangs is
//! `UNAVAILABLE` within the store's timeout (never Envoy's 10 s wait), so that Envoy's
//! own failure mode decides; the health service says NOT_SERVING meanwhile. weir
//! starts while Redis is down, and answers once it is back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

#[path = "envoy/harness.rs"]
mod harness;

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use harness::{Harness, T0, config_dir, fixture, request};
use weir::Config;
use weir_core::ManualClock;
use weir_testkit::RedisServer;

/// A weir serving `basic_config.yaml` on `redis` (100 ms timeout), in process.
async fn on_redis(redis: &RedisServer) -> Harness {
    on_redis_with(redis, "", "").await
}

/// [`on_redis`] with more of the `envoy` and `store` sections.
async fn on_redis_with(redis: &RedisServer, envoy: &str, store: &str) -> Harness {
    serving_with(redis, &[fixture("basic_config.yaml")], envoy, store).await
}

/// A weir serving the ratelimit `files` on `redis` (100 ms timeout), with more of the
/// `envoy` and `store` sections, in process.
async fn serving_with(
    redis: &RedisServer,
    files: &[(&str, String)],
    envoy: &str,
    store: &str,
) -> Harness {
    let store = format!(
        "store:\n  type: redis\n  url: {}\n  timeout: 100ms\n{store}",
        redis.url()
    );
    let dir = config_dir(files, envoy, &store);
    let config = Config::load(&dir.path().join("weir.yaml")).unwrap();
    let service = weir::instance(&config).await.unwrap();
    // The service reads Redis' clock; the harness's manual clock goes unused.
    Harness::serve(service, Arc::new(ManualClock::new(T0)), dir).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_the_counts_on_redis() {
    let redis = RedisServer::start();
    let (a, b) = (on_redis(&redis).await, on_redis(&redis).await);
    // key4: 1 a day (windows end at midnight UTC, on Redis' clock).
    let entries: &[(&str, &str)] = &[("key4", "shared")];
    let first = a.ask("test-domain", &[entries]).await;
    assert_eq!(first.overall_code, Code::Ok as i32);
    let second = b.ask("test-domain", &[entries]).await;
    assert_eq!(second.overall_code, Code::OverLimit as i32);
    let reset = second.statuses[0].duration_until_reset.unwrap();
    assert!((0..=86_400).contains(&reset.seconds), "{reset:?}");
    // Another value is another counter.
    let other = b.ask("test-domain", &[&[("key4", "other")]]).await;
    assert_eq!(other.overall_code, Code::Ok as i32);
    // One descriptor twice in a request: both hits on one counter, as upstream.
    let twice: &[(&str, &str)] = &[("key3", "twice")];
    let both = a.ask("test-domain", &[twice, twice]).await;
    assert_eq!(both.overall_code, Code::OverLimit as i32, "{both:?}");
    // The counters are Redis keys of weir's prefix, rule `envoy`.
    let keys = redis.cli(&["KEYS", "*"]);
    assert!(keys.contains("{test-domain%7Ckey4=shared}:envoy"), "{keys}");
}

async fn unavailable_within_the_timeout(weir: &Harness) {
    for _ in 0..5 {
        let started = Instant::now();
        let answer = weir.send(request("test-domain", &[&[("key3", "x")]])).await;
        let status = answer.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_is_unavailable_within_the_timeout() {
    let mut redis = RedisServer::start();
    let weir = on_redis(&redis).await;
    let allowed = weir.ask("test-domain", &[&[("key3", "x")]]).await;
    assert_eq!(allowed.overall_code, Code::Ok as i32);
    redis.kill();
    unavailable_within_the_timeout(&weir).await;
    let text = weir.service.metrics.encode();
    let unavailable = "weir_envoy_descriptors_total{outcome=\"unavailable\"} 5";
    assert!(text.contains(unavailable), "{text}");
    // The health service follows the store.
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let mut health = HealthClient::new(weir.channel.clone());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = health
            .check(HealthCheckRequest {
                service: "envoy.service.ratelimit.v3.RateLimitService".to_owned(),
            })
            .await
            .unwrap();
        if answer.get_ref().status == ServingStatus::NotServing as i32 {
            break;
        }
        assert!(Instant::now() < deadline, "still {:?}", answer.get_ref());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_redis_is_unavailable_within_the_timeout() {
    let redis = RedisServer::start();
    let weir = on_redis(&redis).await;
    weir.ask("test-domain", &[&[("key3", "x")]]).await;
    redis.pause();
    unavailable_within_the_timeout(&weir).await;
    redis.resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_open_decides_on_this_instances_share_while_redis_is_down() {
    let mut redis = RedisServer::start();
    let weir = on_redis_with(&redis, "  failure: open\n", "  fallback_instances: 2\n").await;
    // 15 a day: 8 each (rounded up). A day, not key2's minute: the fallback's window is
    // on this machine's clock, and a minute's end within the loop gave a second share.
    let entries: &[(&str, &str)] = &[("key5", "value5")];
    assert_eq!(
        weir.ask("test-domain", &[entries]).await.overall_code,
        Code::Ok as i32
    );
    redis.kill();
    // Count the answers until the first over-limit one (the fallback's window holds
    // the one request before the kill only if it was decided there: it was not).
    let mut allowed = 0;
    loop {
        let started = Instant::now();
        let response = weir.ask("test-domain", &[entries]).await;
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            response.statuses[0]
                .current_limit
                .as_ref()
                .unwrap()
                .requests_per_unit,
            15
        );
        if response.overall_code == Code::OverLimit as i32 {
            break;
        }
        allowed += 1;
        assert!(allowed <= 15, "no limit on the fallback");
    }
    assert_eq!(allowed, 8, "allowed on a share of 8");
    let text = weir.service.metrics.encode();
    let fallback = format!("weir_envoy_descriptors_total{{outcome=\"fallback\"}} {allowed}");
    assert!(text.contains(&fallback), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weir_starts_while_redis_is_down_and_answers_once_it_is_back() {
    // Held (connections refused) until the server takes it, so nothing else can.
    let reserved = RedisServer::reserve_port();
    let store = format!(
        "store:\n  type: redis\n  url: {}\n  timeout: 100ms\n",
        reserved.url()
    );
    let dir = config_dir(&[fixture("basic_config.yaml")], "", &store);
    let config = Config::load(&dir.path().join("weir.yaml")).unwrap();
    let service = weir::instance(&config).await.unwrap();
    let weir = Harness::serve(service, Arc::new(ManualClock::new(T0)), dir).await;
    unavailable_within_the_timeout(&weir).await;
    let _redis = RedisServer::start_on(reserved);
    // The store's health loop reconnects by itself: poll, bounded.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match weir
            .send(request("test-domain", &[&[("key3", "back")]]))
            .await
        {
            Ok(answer) => {
                assert_eq!(answer.overall_code, Code::Ok as i32);
                break;
            }
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable);
                assert!(Instant::now() < deadline, "not back after 10 s");
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// On a Redis Cluster (3 masters of the test's own), two instances share the counts
/// whatever node a descriptor's counter lives on, and one request's descriptors on
/// several nodes are each counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_the_counts_on_a_redis_cluster() {
    let cluster = weir_testkit::RedisCluster::start();
    let nodes: Vec<String> = cluster.urls();
    let on_cluster = || async {
        let store = format!(
            "store:\n  type: redis_cluster\n  nodes: [{}]\n  timeout: 500ms\n",
            nodes.join(", ")
        );
        let dir = config_dir(&[fixture("basic_config.yaml")], "", &store);
        let config = Config::load(&dir.path().join("weir.yaml")).unwrap();
        let service = weir::instance(&config).await.unwrap();
        Harness::serve(service, Arc::new(ManualClock::new(T0)), dir).await
    };
    let (a, b) = (on_cluster().await, on_cluster().await);
    // key4: 1 a day per value; 12 values, spread over the cluster's slots.
    let values: Vec<String> = (0..12).map(|i| format!("v{i}")).collect();
    let owners: std::collections::BTreeSet<usize> = values
        .iter()
        .map(|v| cluster.owner_of(&format!("{{test-domain%7Ckey4={v}}}")))
        .collect();
    assert!(
        owners.len() > 1,
        "the values' counters live on several nodes"
    );
    for value in &values {
        let entries: &[(&str, &str)] = &[("key4", value)];
        let first = a.ask("test-domain", &[entries]).await;
        assert_eq!(first.overall_code, Code::Ok as i32, "{value}");
        let second = b.ask("test-domain", &[entries]).await;
        assert_eq!(second.overall_code, Code::OverLimit as i32, "{value}");
    }
    // One request, two fresh counters on different nodes: both counted.
    let owner = |v: &str| cluster.owner_of(&format!("{{test-domain%7Ckey4={v}}}"));
    let fresh: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
    let first = fresh[0].as_str();
    let apart = fresh[1..]
        .iter()
        .find(|v| owner(v) != owner(first))
        .unwrap();
    let (x, y) = (&[("key4", first)][..], &[("key4", apart.as_str())][..]);
    let both = a.ask("test-domain", &[x, y]).await;
    assert_eq!(both.overall_code, Code::Ok as i32, "{both:?}");
    let again = b.ask("test-domain", &[x, y]).await;
    let codes: Vec<i32> = again.statuses.iter().map(|s| s.code).collect();
    assert_eq!(codes, [Code::OverLimit as i32, Code::OverLimit as i32]);
}

/// With all_or_nothing, a zero limit denies without charging the others, on the
/// fail-open fallback (Redis down) as on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_limit_charges_nothing_on_the_fallback_either() {
    let file = "domain: z
descriptors:
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: counted
    rate_limit: {unit: minute, requests_per_unit: 10}
";
    let weir = serving_redis_killed(
        ("z.yaml", file),
        "  failure: open\n  all_or_nothing: true\n",
    )
    .await;
    let both: [&[(&str, &str)]; 2] = [&[("blocked", "x")], &[("counted", "x")]];
    for _ in 0..5 {
        let denied = weir.ask("z", &both).await;
        assert_eq!(denied.overall_code, Code::OverLimit as i32);
    }
    let alone = weir.ask("z", &[&[("counted", "x")]]).await;
    // 10 on the fallback (one instance), 1 spent by this request alone.
    assert_eq!(alone.statuses[0].limit_remaining, 9, "{alone:?}");
}

/// A store timeout longer than 10 s (they may be up to 60 s): with a hung Redis and
/// `failure: open`, a call from a client with no deadline waits for the store's
/// timeout and is decided on the fallback, never cut by the server (11 s to run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_timeout_past_ten_seconds_still_falls_back() {
    let redis = RedisServer::start();
    let store = format!(
        "store:\n  type: redis\n  url: {}\n  timeout: 11s\n",
        redis.url()
    );
    let dir = config_dir(&[fixture("basic_config.yaml")], "  failure: open\n", &store);
    let config = Config::load(&dir.path().join("weir.yaml")).unwrap();
    let service = weir::instance(&config).await.unwrap();
    let weir = Harness::serve(service, Arc::new(ManualClock::new(T0)), dir).await;
    weir.ask("test-domain", &[&[("key2", "value2")]]).await;
    redis.pause();
    let answer = weir
        .send(request("test-domain", &[&[("key2", "value2")]]))
        .await;
    redis.resume();
    let answer = answer.unwrap();
    assert_eq!(answer.overall_code, Code::Ok as i32, "the fallback decides");
}

/// A descriptor's own failure policy (`x-weir: { failure: open }`): with Redis down, a
/// call of only such descriptors is decided on the local fallback, while one with a
/// descriptor that fails as the section says (`unavailable`) is `UNAVAILABLE`. A day's
/// limit, not a minute's: the fallback's windows are on this machine's clock, and a CI
/// run once had a minute end between the second and third calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_may_fail_open_on_its_own() {
    let file = "domain: f
descriptors:
  - key: open
    rate_limit: {unit: day, requests_per_unit: 2}
    x-weir: {failure: open}
  - key: strict
    rate_limit: {unit: day, requests_per_unit: 2}
";
    let weir = serving_redis_killed(("f.yaml", file), "").await;
    let open: &[(&str, &str)] = &[("open", "x")];
    let strict: &[(&str, &str)] = &[("strict", "x")];
    // The fallback enforces the limit (2 a day, one instance).
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(weir.ask("f", &[open]).await.overall_code);
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    assert_eq!(answers, [ok, ok, over]);
    for asked in [&[strict][..], &[open, strict][..]] {
        let status = weir.send(request("f", asked)).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    }
}

/// A weir serving one ratelimit `file` (its name and text), with more of the `envoy`
/// section, on a Redis killed once it serves: one instance, deciding on its local
/// fallback from then on.
async fn serving_redis_killed((name, file): (&str, &str), envoy: &str) -> Harness {
    let mut redis = RedisServer::start();
    let weir = serving_with(
        &redis,
        &[(name, file.to_owned())],
        envoy,
        "  fallback_instances: 1\n",
    )
    .await;
    redis.kill();
    weir
}

/// A weir serving the ratelimit `files` on `redis` (100 ms timeout), in process.
async fn serving(redis: &RedisServer, files: &[(&str, String)]) -> Harness {
    serving_with(redis, files, "", "").await
}

/// Script calls Redis ran (each check, take or give-back is one).
fn script_calls(redis: &RedisServer) -> u64 {
    ["fcall", "evalsha", "eval"]
        .map(|c| redis.calls(c))
        .iter()
        .sum()
}

/// Several limits on one descriptor, on Redis, shared by two instances: 10 a minute
/// (a token bucket) and 3 a day (GCRA), each on a counter of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_limits_on_one_descriptor_are_shared_on_redis() {
    let file = "domain: r
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
    x-weir:
      algorithm: token_bucket
      also:
        - {requests_per_unit: 3, unit: day, algorithm: gcra, name: daily}
";
    let redis = RedisServer::start();
    let files = [("r.yaml", file.to_owned())];
    let (a, b) = (serving(&redis, &files).await, serving(&redis, &files).await);
    let user: &[(&str, &str)] = &[("user", "x")];
    let mut seen = Vec::new();
    for weir in [&a, &b, &a, &b] {
        let answer = weir.ask("r", &[user]).await;
        let status = &answer.statuses[0];
        let limit = status.current_limit.as_ref().unwrap();
        seen.push((
            answer.overall_code,
            status.limit_remaining,
            limit.requests_per_unit,
            limit.name.clone(),
        ));
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    let daily = |code, remaining| (code, remaining, 3, "daily".to_owned());
    // The day's limit has the least left, and binds the fourth.
    assert_eq!(
        seen,
        [daily(ok, 2), daily(ok, 1), daily(ok, 0), daily(over, 0)]
    );
    let keys = redis.cli(&["KEYS", "*"]);
    for key in ["{r%7Cuser=x}:envoy\n", "{r%7Cuser=x}:envoy.1\n"] {
        assert!(keys.contains(key), "{keys}");
    }
}

/// `x-weir: { lease }`: a hot descriptor's units are taken in batches of 20 and
/// spent locally, so 100 checks cost about 5 Redis calls where the same descriptor
/// unleased costs 100; and the limit holds (a bucket of 100, 10 a second refilled),
/// two instances leasing: no more admitted than the bucket alone would admit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_descriptor_costs_far_fewer_redis_calls_and_holds_its_limit() {
    let file = "domain: hot
descriptors:
  - key: leased
    rate_limit: {unit: minute, requests_per_unit: 600}
    x-weir: {algorithm: token_bucket, burst: 100, lease: {batch: 20, hold: 2s}}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 600}
    x-weir: {algorithm: token_bucket, burst: 100}
";
    let redis = RedisServer::start();
    let weir = serving(&redis, &[("hot.yaml", file.to_owned())]).await;
    let ok = Code::Ok as i32;
    let mut calls = Vec::new();
    let mut started = Instant::now();
    for key in ["plain", "leased"] {
        started = Instant::now();
        let before = script_calls(&redis);
        for _ in 0..100 {
            let answer = weir.ask("hot", &[&[(key, "t")]]).await;
            assert_eq!(answer.overall_code, ok, "{key}");
        }
        calls.push(script_calls(&redis) - before);
    }
    assert_eq!(calls[0], 100, "unleased: a call per check");
    assert!(calls[1] <= 10, "leased: {} calls for 100 checks", calls[1]);
    // The bucket's bound, with a second instance leasing too: 100 held at first, and
    // 10 a second since its first check.
    let other = serving(&redis, &[("hot.yaml", file.to_owned())]).await;
    let mut admitted = 100;
    for i in 0..300 {
        let instance = if i % 2 == 0 { &weir } else { &other };
        let answer = instance.ask("hot", &[&[("leased", "t")]]).await;
        admitted += u64::from(answer.overall_code == ok);
    }
    let refilled = (started.elapsed().as_secs_f64() * 10.0).ceil() as u64;
    assert!(
        admitted <= 100 + refilled,
        "{admitted} admitted, {refilled} refilled"
    );
    assert!(admitted >= 100, "{admitted} admitted");
    let keys = redis.cli(&["KEYS", "*"]);
    assert!(keys.contains("{hot%7Cleased=t}:envoy.l"), "{keys}");
}

/// `share_threshold` on Redis: the values a shared wildcard matches count on one key,
/// across instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_wildcard_counts_on_one_redis_key() {
    let file = "domain: s
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: day, requests_per_unit: 2}
";
    let redis = RedisServer::start();
    let files = [("s.yaml", file.to_owned())];
    let (a, b) = (serving(&redis, &files).await, serving(&redis, &files).await);
    let mut codes = Vec::new();
    for (weir, value) in [(&a, "files/a"), (&b, "files/b"), (&a, "files/c")] {
        codes.push(weir.ask("s", &[&[("files", value)]]).await.overall_code);
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    assert_eq!(codes, [ok, ok, over]);
    let keys = redis.cli(&["KEYS", "*"]);
    assert_eq!(keys.lines().count(), 1, "{keys}");
}

/// A descriptor's several limits failing open: with Redis down, each is decided on
/// the local fallback (one instance: the whole limit), the tighter binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_limits_fail_open_together_on_the_fallback() {
    let file = "domain: f
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10}
    x-weir:
      failure: open
      also:
        - {requests_per_unit: 2, unit: day, name: daily}
";
    let weir = serving_redis_killed(("f.yaml", file), "").await;
    let user: &[(&str, &str)] = &[("user", "x")];
    let mut seen = Vec::new();
    for _ in 0..3 {
        let answer = weir.ask("f", &[user]).await;
        let limit = answer.statuses[0].current_limit.clone().unwrap();
        seen.push((answer.overall_code, limit.name));
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    let daily = |code| (code, "daily".to_owned());
    assert_eq!(seen, [daily(ok), daily(ok), daily(over)]);
}
