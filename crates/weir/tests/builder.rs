//! `ConfigBuilder` against the file: what a built rule matches, and inputs no file
//! would hold (control characters, quotes, braces, unicode) built or refused, never a
//! panic.
#![allow(clippy::unwrap_used, reason = "test")]

use std::time::Duration;

use weir::{ConfigBuilder, RuleBuilder};
use weir_core::{Algorithm, Policy};

fn gcra() -> Policy {
    Policy::new(Algorithm::Gcra, 10, Duration::from_secs(60), None).unwrap()
}

/// Odd inputs are built or refused, and the refusals that a file makes are made.
#[test]
fn odd_inputs_never_panic_the_builder() {
    let cases: Vec<(&str, ConfigBuilder)> = vec![
        (
            "name newline",
            ConfigBuilder::new().rule(RuleBuilder::new("a\nb", gcra())),
        ),
        (
            "path quote",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a\"b")),
        ),
        (
            "path DEL",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a\u{7f}")),
        ),
        (
            "path C1",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a\u{85}b")),
        ),
        (
            "path BOM",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a\u{feff}")),
        ),
        (
            "path unicode",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/é")),
        ),
        (
            "path brace",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/{id}")),
        ),
        (
            "host unicode",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).host("bücher.example")),
        ),
        (
            "host upper",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).host("API.Example.")),
        ),
        (
            "header quote",
            ConfigBuilder::new()
                .identity_from_header("u", "x-\"a")
                .rule(RuleBuilder::new("a", gcra()).key(["u"])),
        ),
        (
            "identity name weird",
            ConfigBuilder::new()
                .identity_from_header("u: {x", "x-a")
                .rule(RuleBuilder::new("a", gcra()).key(["u: {x"])),
        ),
        (
            "identity long",
            ConfigBuilder::new()
                .identity_from_header("u".repeat(2000), "x-a")
                .rule(RuleBuilder::new("a", gcra())),
        ),
        (
            "methods empty",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).methods([])),
        ),
        (
            "methods bad",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).methods(["G ET"])),
        ),
        (
            "path and prefix",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a").path_prefix("/b")),
        ),
        (
            "cost 0",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).cost(0)),
        ),
        (
            "cost huge",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).cost(u64::MAX)),
        ),
        (
            "key empty",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).key([])),
        ),
        (
            "dup identity",
            ConfigBuilder::new()
                .identity_from_header("u", "x-a")
                .identity_from_header("u", "x-b")
                .rule(RuleBuilder::new("a", gcra()).key(["u"])),
        ),
        (
            "dup rule",
            ConfigBuilder::new()
                .rule(RuleBuilder::new("a", gcra()))
                .rule(RuleBuilder::new("a", gcra())),
        ),
        (
            "redis bad",
            ConfigBuilder::new()
                .redis("http://x\n  type: memory")
                .rule(RuleBuilder::new("a", gcra())),
        ),
        ("no rules", ConfigBuilder::new()),
        (
            "year",
            ConfigBuilder::new().rule(RuleBuilder::new(
                "a",
                Policy::new(
                    Algorithm::FixedWindow,
                    10,
                    Duration::from_secs(366 * 86400),
                    None,
                )
                .unwrap(),
            )),
        ),
        (
            "sliding_log big",
            ConfigBuilder::new().rule(RuleBuilder::new(
                "a",
                Policy::new(Algorithm::SlidingLog, 10_000, Duration::from_secs(1), None).unwrap(),
            )),
        ),
        (
            "leaky",
            ConfigBuilder::new().rule(RuleBuilder::new(
                "a",
                Policy::new(Algorithm::LeakyBucket, 10, Duration::from_secs(1), Some(3)).unwrap(),
            )),
        ),
    ];
    let refused = [
        "name newline",
        "methods bad",
        "path and prefix",
        "key empty",
        "dup identity",
        "dup rule",
        "no rules",
    ];
    for (what, builder) in cases {
        let built = builder.build();
        if refused.contains(&what) {
            assert!(built.is_err(), "{what} should be refused");
        }
    }
}

/// Nanoseconds since the epoch of an RFC 3339 instant.
fn at(instant: &str) -> u64 {
    let t: jiff::Timestamp = instant.parse().unwrap();
    u64::try_from(t.as_nanosecond()).unwrap()
}

/// A calendar quota built in code decides as the file's: windows in the time zone,
/// the wait to the next boundary exact across a month's end and a daylight-saving day.
#[tokio::test]
async fn a_calendar_quota_built_in_code_resets_at_the_calendars_boundaries() {
    use std::sync::Arc;
    use weir::{CalendarPeriod, Engine};
    use weir_core::ManualClock;
    use weir_store::{MemoryStore, MemoryStoreConfig};

    let new_york = || CalendarPeriod::month().time_zone("America/New_York");
    let config = ConfigBuilder::new()
        .rule(RuleBuilder::per_calendar("monthly", 2, new_york()))
        .rule(RuleBuilder::per_calendar(
            "daily",
            1,
            CalendarPeriod::day()
                .time_zone("America/New_York")
                .starts_at("06:00"),
        ))
        .build()
        .unwrap();
    // 2027-03-31 23:00 in New York (EDT, UTC-4): an hour before April.
    let clock = Arc::new(ManualClock::new(at("2027-04-01T03:00:00Z")));
    let store = Arc::new(MemoryStore::new(
        MemoryStoreConfig::default(),
        clock.clone(),
    ));
    let engine = Engine::new(&config.engine, store, clock.clone());
    let [monthly, daily] = &config.engine.rules[..] else {
        panic!("two rules")
    };
    for _ in 0..2 {
        assert!(engine.check(monthly, "k", 1).await.unwrap().allowed);
    }
    let denied = engine.check(monthly, "k", 1).await.unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after, Some(Duration::from_secs(3_600)));
    clock.advance(Duration::from_secs(3_600));
    assert!(engine.check(monthly, "k", 1).await.unwrap().allowed);

    // New York springs forward at 02:00 on 2027-03-14: the day from 06:00 EST on the
    // 13th (11:00Z) to 06:00 EDT on the 14th (10:00Z) lasts 23 hours; the next, 24.
    clock.set(at("2027-03-13T11:00:00Z"));
    assert!(engine.check(daily, "k", 1).await.unwrap().allowed);
    let denied = engine.check(daily, "k", 1).await.unwrap();
    assert_eq!(denied.retry_after, Some(Duration::from_secs(23 * 3_600)));
    clock.set(at("2027-03-14T09:59:59Z"));
    assert!(!engine.check(daily, "k", 1).await.unwrap().allowed);
    clock.set(at("2027-03-14T10:00:00Z"));
    assert!(engine.check(daily, "k", 1).await.unwrap().allowed);
    let denied = engine.check(daily, "k", 1).await.unwrap();
    assert_eq!(denied.retry_after, Some(Duration::from_secs(24 * 3_600)));
}

/// What a file would be refused, a built calendar is: an error naming the field.
#[test]
fn a_calendar_built_in_code_is_checked_as_a_files() {
    use weir::CalendarPeriod;
    let refused = |rule: RuleBuilder| {
        ConfigBuilder::new()
            .rule(rule)
            .build()
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    for (rule, expected) in [
        (
            RuleBuilder::per_calendar("q", 0, CalendarPeriod::month()),
            "rules[0].limit",
        ),
        (
            RuleBuilder::per_calendar("q", 5, CalendarPeriod::day().time_zone("Mars/Olympus")),
            "rules[0].time_zone: unknown time zone `Mars/Olympus`",
        ),
        (
            RuleBuilder::per_calendar("q", 5, CalendarPeriod::month().starts_in(4)),
            "rules[0].starts.month: `starts.month` applies to calendar_year only",
        ),
        (
            RuleBuilder::per_calendar("q", 5, CalendarPeriod::week().starts_on(8)),
            "rules[0].starts.day: `starts.day` must be an ISO weekday",
        ),
        (
            RuleBuilder::per_calendar("q", 5, CalendarPeriod::day().starts_on(1)),
            "rules[0].starts.day: `starts.day` does not apply to calendar_day",
        ),
        (
            RuleBuilder::per_calendar("q", 5, CalendarPeriod::year().starts_at("24:00")),
            "rules[0].starts.at: `starts.at` must be a time of day",
        ),
        (
            RuleBuilder::per_calendar("q", 5, CalendarPeriod::year().starts_at("7:00\n")),
            "rules[0].starts.at",
        ),
    ] {
        let message = refused(rule);
        assert!(message.contains(expected), "{expected}: {message}");
    }
}
