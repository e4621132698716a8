//! Calendar quotas through the decision API, on an injected clock: a month crossing its
//! end (31 days, then a leap February), a day across a daylight-saving change (23 hours
//! in Berlin in March, 25 in New York in November), a month in New York across March's
//! 23-hour day and its end (31 days less an hour), a month starting on the 15th at
//! 06:00, ISO weeks; the exact `reset_after_ms`, `Retry-After` and `RateLimit` `t` at
//! each, the same on the memory store and on Redis.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;
use weir::{Config, Engine, Reloadable, api_router};
use weir_core::{Clock, ManualClock};
use weir_store::{
    MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, Store,
};
use weir_testkit::RedisServer;

const CONFIG: &str = r#"
rules:
  - name: monthly
    algorithm: fixed_window
    limit: 2
    period: calendar_month
  - name: berlin-daily
    algorithm: fixed_window
    limit: 1
    period: calendar_day
    time_zone: Europe/Berlin
  - name: new-york-daily
    algorithm: fixed_window
    limit: 1
    period: calendar_day
    time_zone: America/New_York
  - name: billing
    algorithm: fixed_window
    limit: 1
    period: calendar_month
    starts: { day: 15, at: "06:00" }
  - name: weekly
    algorithm: fixed_window
    limit: 1
    period: calendar_week
  - name: month-end
    algorithm: fixed_window
    limit: 1
    period: calendar_month
    time_zone: Asia/Tokyo
    starts: { day: 31 }
  - name: new-york-monthly
    algorithm: fixed_window
    limit: 2
    period: calendar_month
    time_zone: America/New_York
"#;

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

/// Nanoseconds since the epoch of an RFC 3339 instant.
fn at(instant: &str) -> u64 {
    let t: jiff::Timestamp = instant.parse().unwrap();
    u64::try_from(t.as_nanosecond()).unwrap()
}

/// The decision API on a store, both on `clock`.
fn app(store: Arc<dyn Store>, clock: Arc<ManualClock>) -> Router {
    let config = Config::parse(CONFIG, Path::new("calendar.yaml")).unwrap();
    api_router(Reloadable::new(Engine::new(&config.engine, store, clock)))
}

/// What one check answered: status, body, and the headers a client reads.
#[derive(Debug, PartialEq)]
struct Answer {
    status: StatusCode,
    reset_after_ms: u64,
    retry_after_ms: Option<u64>,
    retry_after: Option<String>,
    ratelimit: String,
}

async fn check(app: &Router, rule: &str, key: &str) -> Answer {
    let body = json!({ "rule": rule, "key": key }).to_string();
    let request = Request::post("/v1/check")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (retry_after, ratelimit) = (header("retry-after"), header("ratelimit").unwrap());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    Answer {
        status,
        reset_after_ms: body["reset_after_ms"].as_u64().unwrap(),
        retry_after_ms: body["retry_after_ms"].as_u64(),
        retry_after,
        ratelimit,
    }
}

fn allowed(rule: &str, remaining: u64, reset_ms: u64) -> Answer {
    Answer {
        status: StatusCode::OK,
        reset_after_ms: reset_ms,
        retry_after_ms: None,
        retry_after: None,
        ratelimit: format!("\"{rule}\";r={remaining};t={}", reset_ms.div_ceil(1_000)),
    }
}

fn denied(rule: &str, wait_ms: u64) -> Answer {
    let secs = wait_ms.div_ceil(1_000);
    Answer {
        status: StatusCode::TOO_MANY_REQUESTS,
        reset_after_ms: wait_ms,
        retry_after_ms: Some(wait_ms),
        retry_after: Some(secs.to_string()),
        ratelimit: format!("\"{rule}\";r=0;t={secs}"),
    }
}

/// Every scenario on one store: the answers are exact, so memory and Redis agree.
async fn scenarios(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let app = app(store, clock.clone());
    let set = |instant: &str| clock.set(at(instant));

    // A month in UTC: 31 days of January, then a leap February of 29.
    set("2028-01-31T23:00:00Z");
    assert_eq!(
        check(&app, "monthly", "m").await,
        allowed("monthly", 1, HOUR_MS)
    );
    assert_eq!(
        check(&app, "monthly", "m").await,
        allowed("monthly", 0, HOUR_MS)
    );
    assert_eq!(
        check(&app, "monthly", "m").await,
        denied("monthly", HOUR_MS)
    );
    clock.advance(Duration::from_millis(HOUR_MS - 1));
    assert_eq!(check(&app, "monthly", "m").await, denied("monthly", 1));
    set("2028-02-01T00:00:00Z");
    assert_eq!(
        check(&app, "monthly", "m").await,
        allowed("monthly", 1, 29 * DAY_MS)
    );
    set("2028-02-29T12:00:00Z");
    assert_eq!(
        check(&app, "monthly", "m").await,
        allowed("monthly", 0, 12 * HOUR_MS)
    );
    assert_eq!(
        check(&app, "monthly", "m").await,
        denied("monthly", 12 * HOUR_MS)
    );
    set("2028-03-01T00:00:00Z");
    assert_eq!(
        check(&app, "monthly", "m").await,
        allowed("monthly", 1, 31 * DAY_MS)
    );

    // Berlin's last Sunday of March 2027: midnight CET to midnight CEST is 23 hours.
    set("2027-03-27T23:00:00Z");
    let day = "berlin-daily";
    assert_eq!(check(&app, day, "b").await, allowed(day, 0, 23 * HOUR_MS));
    set("2027-03-28T01:30:00Z"); // 03:30 CEST: the clocks went from 02:00 to 03:00
    assert_eq!(
        check(&app, day, "b").await,
        denied(day, 20 * HOUR_MS + 30 * 60_000)
    );
    set("2027-03-28T22:00:00Z"); // midnight CEST: the next day, 24 hours again
    assert_eq!(check(&app, day, "b").await, allowed(day, 0, 24 * HOUR_MS));

    // New York's first Sunday of November 2027: midnight EDT to midnight EST, 25 hours.
    set("2027-11-07T04:00:00Z");
    let day = "new-york-daily";
    assert_eq!(check(&app, day, "n").await, allowed(day, 0, 25 * HOUR_MS));
    set("2027-11-07T06:30:00Z"); // 01:30 EDT, the first of two
    assert_eq!(
        check(&app, day, "n").await,
        denied(day, 22 * HOUR_MS + 30 * 60_000)
    );
    set("2027-11-08T04:59:59Z"); // 23:59:59 EST, a second before the boundary
    assert_eq!(check(&app, day, "n").await, denied(day, 1_000));
    set("2027-11-08T05:00:00Z");
    assert_eq!(check(&app, day, "n").await, allowed(day, 0, 24 * HOUR_MS));

    // March 2026 in New York: from midnight EST (05:00 UTC) to midnight EDT on April 1
    // (04:00 UTC), across March 8, a day of 23 hours: 31 days less an hour.
    let month = "new-york-monthly";
    set("2026-03-01T04:59:59Z"); // 23:59:59 EST on February 28: February's window
    assert_eq!(check(&app, month, "nm").await, allowed(month, 1, 1_000));
    set("2026-03-01T05:00:00Z");
    assert_eq!(
        check(&app, month, "nm").await,
        allowed(month, 1, 31 * DAY_MS - HOUR_MS)
    );
    // Noon EST on March 7: 24 days and 12 hours of local time, 11 hours of them lost.
    set("2026-03-07T17:00:00Z");
    let to_april = 24 * DAY_MS + 11 * HOUR_MS;
    assert_eq!(check(&app, month, "nm").await, allowed(month, 0, to_april));
    assert_eq!(check(&app, month, "nm").await, denied(month, to_april));
    // 03:00 EDT on March 8, just after the clocks went from 02:00 to 03:00.
    set("2026-03-08T07:00:00Z");
    assert_eq!(
        check(&app, month, "nm").await,
        denied(month, 23 * DAY_MS + 21 * HOUR_MS)
    );
    set("2026-04-01T03:59:59Z"); // 23:59:59 EDT on March 31
    assert_eq!(check(&app, month, "nm").await, denied(month, 1_000));
    set("2026-04-01T04:00:00Z"); // April: 30 days, no change of offset
    assert_eq!(
        check(&app, month, "nm").await,
        allowed(month, 1, 30 * DAY_MS)
    );

    // A month from the 15th at 06:00: one minute before, the window from February's
    // 15th; at 06:00, March's, to April 15 06:00 (31 days).
    set("2027-03-15T05:59:00Z");
    assert_eq!(
        check(&app, "billing", "c").await,
        allowed("billing", 0, 60_000)
    );
    assert_eq!(check(&app, "billing", "c").await, denied("billing", 60_000));
    set("2027-03-15T06:00:00Z");
    assert_eq!(
        check(&app, "billing", "c").await,
        allowed("billing", 0, 31 * DAY_MS)
    );

    // ISO weeks from Monday: Thursday 2026-12-31 noon to Monday 2027-01-04.
    set("2026-12-31T12:00:00Z");
    let week = "weekly";
    assert_eq!(
        check(&app, week, "w").await,
        allowed(week, 0, 3 * DAY_MS + 12 * HOUR_MS)
    );
    set("2027-01-04T00:00:00Z");
    assert_eq!(check(&app, week, "w").await, allowed(week, 0, 7 * DAY_MS));

    // Day 31 in Tokyo: February's window starts on its last day (the 28th in 2027)
    // and lasts to March 31.
    set("2027-02-27T15:00:00Z"); // 2027-02-28 00:00 JST
    let end = "month-end";
    assert_eq!(check(&app, end, "e").await, allowed(end, 0, 31 * DAY_MS));
    set("2027-03-30T14:59:59Z"); // 23:59:59 JST on the 30th: a second to go
    assert_eq!(check(&app, end, "e").await, denied(end, 1_000));
}

#[tokio::test]
async fn calendar_windows_on_the_memory_store() {
    let clock = Arc::new(ManualClock::new(0));
    let store = Arc::new(MemoryStore::new(
        MemoryStoreConfig::default(),
        clock.clone(),
    ));
    scenarios(store, clock).await;
}

#[tokio::test]
async fn calendar_windows_on_redis() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(0));
    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: "weir:calendar".into(),
        timeout: Duration::from_secs(2),
        clock: RedisClock::Local,
        window_counters: false,
        access: Default::default(),
    };
    let store = RedisStore::connect(&config, clock.clone() as Arc<dyn Clock>)
        .await
        .unwrap();
    scenarios(Arc::new(store), clock.clone()).await;
    // Each window is its own key, expiring a second after the window's end by the
    // instances' clocks: New York's 2027-11-08 window ends at 2027-11-09 05:00 UTC.
    let start_us = at("2027-11-08T05:00:00Z") / 1_000;
    let name = format!("weir:calendar:{{n}}c{start_us}:new-york-daily");
    let ttl: u64 = server.cli(&["PTTL", &name]).trim().parse().unwrap();
    assert!(
        (DAY_MS..=DAY_MS + 1_000).contains(&ttl),
        "{name}: PTTL {ttl}"
    );
}

/// The error a rule of `fields` (after name, algorithm and limit) is refused with, as
/// `weir check-config` prints it.
fn refusal(algorithm: &str, fields: &[&str]) -> String {
    let text = format!(
        "rules:\n  - name: quota\n    algorithm: {algorithm}\n    limit: 100\n{}\n",
        fields
            .iter()
            .map(|f| format!("    {f}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    match Config::parse(&text, Path::new("weir.yaml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn check_config_names_the_field_at_fault() {
    let cal = "a calendar period (calendar_day, calendar_week, calendar_month, calendar_year), not to a duration";
    let month_day =
        "`starts.day` must be a day of the month from 1 to 31 (in a shorter month, its last day)";
    let hh_mm = "`starts.at` must be a time of day as HH:MM (00:00 to 23:59)";
    let not_fixed = "a calendar quota resets at the calendar's boundaries, which only a fixed window has (a sliding window's trailing month has no calendar meaning; the buckets refill at a rate)";
    let fixed = "fixed_window";
    let cases: &[(&str, &[&str], String)] = &[
        (fixed, &["period: calendar_month", "time_zone: Europe/Berln"],
         "weir.yaml:6:16: rules[0].time_zone: unknown time zone `Europe/Berln`: give an IANA name such as UTC, Europe/Berlin or America/New_York".into()),
        (fixed, &["period: calendar_month", "time_zone: Etc/Unknown"],
         "weir.yaml:6:16: rules[0].time_zone: unknown time zone `Etc/Unknown`: give an IANA name such as UTC, Europe/Berlin or America/New_York".into()),
        (fixed, &["period: calendar_fortnight"],
         "weir.yaml:5:13: rules[0].period: invalid period `calendar_fortnight`: the calendar periods are calendar_day, calendar_week, calendar_month and calendar_year".into()),
        (fixed, &["period: calendar_month", "starts: { day: 32 }"],
         format!("weir.yaml:6:20: rules[0].starts.day: {month_day}, got 32")),
        (fixed, &["period: calendar_month", "starts: { day: 0 }"],
         format!("weir.yaml:6:20: rules[0].starts.day: {month_day}, got 0")),
        (fixed, &["period: calendar_week", "starts: { day: 8 }"],
         "weir.yaml:6:20: rules[0].starts.day: `starts.day` must be an ISO weekday, 1 (Monday) to 7 (Sunday), got 8".into()),
        (fixed, &["period: calendar_day", "starts: { day: 2 }"],
         "weir.yaml:6:20: rules[0].starts.day: `starts.day` does not apply to calendar_day: give `starts.at`".into()),
        (fixed, &["period: calendar_month", "starts: { month: 4 }"],
         "weir.yaml:6:22: rules[0].starts.month: `starts.month` applies to calendar_year only".into()),
        (fixed, &["period: calendar_year", "starts: { month: 13 }"],
         "weir.yaml:6:22: rules[0].starts.month: `starts.month` must be from 1 to 12, got 13".into()),
        (fixed, &["period: calendar_month", "starts: { at: \"24:00\" }"],
         format!("weir.yaml:6:19: rules[0].starts.at: {hh_mm}, got `24:00`")),
        (fixed, &["period: calendar_month", "starts: { at: \"6:00\" }"],
         format!("weir.yaml:6:19: rules[0].starts.at: {hh_mm}, got `6:00`")),
        (fixed, &["period: calendar_month", "starts: { hour: 6 }"],
         "weir.yaml:6:15: rules[0].starts.hour: unknown field `hour`, expected one of month, day, at".into()),
        (fixed, &["period: 30d", "time_zone: UTC"],
         format!("weir.yaml:6:16: rules[0].time_zone: `time_zone` applies to {cal}")),
        (fixed, &["period: 1d", "starts: { at: \"06:00\" }"],
         format!("weir.yaml:6:13: rules[0].starts: `starts` applies to {cal}")),
        ("sliding_window", &["period: calendar_month"],
         format!("weir.yaml:5:13: rules[0].period: a calendar period applies to fixed_window, not to sliding_window: {not_fixed}")),
        ("token_bucket", &["period: calendar_day"],
         format!("weir.yaml:5:13: rules[0].period: a calendar period applies to fixed_window, not to token_bucket: {not_fixed}")),
        (fixed, &["period: calendar_month", "lease: auto"],
         "weir.yaml:6:12: rules[0].lease: leases are for token_bucket and gcra, not fixed_window: a window forgets its counts as it passes, so units leased in one window and spent in the next would not be counted".into()),
    ];
    for (algorithm, fields, expected) in cases {
        assert_eq!(&refusal(algorithm, fields), expected, "{fields:?}");
    }
}

#[test]
fn time_zone_names_are_read_without_regard_to_case() {
    let text = "rules:\n  - name: q\n    algorithm: fixed_window\n    limit: 5\n    period: calendar_year\n    time_zone: europe/london\n    starts: { month: 4, day: 6 }\n";
    Config::parse(text, Path::new("weir.yaml")).unwrap();
}

/// Two instances on one Redis whose clocks disagree by a second at a month's end: for
/// that second the one behind counts in January's key and the one ahead in February's,
/// and neither window ever admits more than the limit (the bound DESIGN.md states).
#[tokio::test]
async fn two_instances_a_second_apart_at_a_boundary_count_each_window_once() {
    let server = RedisServer::start();
    let instance = |clock: Arc<ManualClock>| {
        let config = RedisStoreConfig {
            target: RedisTarget::Single(server.url()),
            key_prefix: "weir:two".into(),
            timeout: Duration::from_secs(2),
            clock: RedisClock::Local,
            window_counters: false,
            access: Default::default(),
        };
        async move {
            let store = RedisStore::connect(&config, clock.clone() as Arc<dyn Clock>)
                .await
                .unwrap();
            app(Arc::new(store), clock)
        }
    };
    let behind = Arc::new(ManualClock::new(at("2028-01-31T23:59:59.500Z")));
    let ahead = Arc::new(ManualClock::new(at("2028-02-01T00:00:00.500Z")));
    let (a, b) = (
        instance(behind.clone()).await,
        instance(ahead.clone()).await,
    );
    let feb = 29 * DAY_MS - 500;
    assert_eq!(check(&a, "monthly", "k").await, allowed("monthly", 1, 500));
    assert_eq!(check(&b, "monthly", "k").await, allowed("monthly", 1, feb));
    assert_eq!(check(&a, "monthly", "k").await, allowed("monthly", 0, 500));
    assert_eq!(check(&a, "monthly", "k").await, denied("monthly", 500));
    assert_eq!(check(&b, "monthly", "k").await, allowed("monthly", 0, feb));
    assert_eq!(check(&b, "monthly", "k").await, denied("monthly", feb));
    // A second later the one behind is in February too, and finds it spent.
    behind.advance(Duration::from_secs(1));
    assert_eq!(check(&a, "monthly", "k").await, denied("monthly", feb));
}
