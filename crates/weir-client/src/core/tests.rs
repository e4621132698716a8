//! The core's decisions, on a manual clock and a fixed coin.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};

use super::{Call, Core, Target};
use crate::clock::ManualClock;
use crate::error::Error;
use crate::policy::Policy;
use crate::random::fixed::Fixed;

const MS: fn(u64) -> Duration = Duration::from_millis;
const S: fn(u64) -> Duration = Duration::from_secs;

/// Sun, 06 Nov 1994 08:49:37 GMT.
fn epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH + S(784_111_777)
}

/// A core on a manual clock whose jitter draws are half their bound.
fn core(policy: Policy) -> (Arc<Core>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(epoch()));
    let policy = policy.clock(clock.clone()).random(Arc::new(Fixed(0.5)));
    (Arc::new(Core::new(policy)), clock)
}

fn get(core: &Arc<Core>) -> Call {
    let mut call = core
        .start(Target {
            server: "api.test:80".into(),
            repeatable: true,
        })
        .unwrap();
    assert_eq!(call.before_attempt(), Duration::ZERO);
    call
}

fn headers(fields: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in fields {
        headers.append(*name, HeaderValue::from_str(value).unwrap());
    }
    headers
}

const TOO_MANY: StatusCode = StatusCode::TOO_MANY_REQUESTS;

/// A wait in whole milliseconds, rounded (backon's steps are computed in f32).
fn ms(wait: Option<Duration>) -> Option<u128> {
    wait.map(|w| (w.as_micros() + 500) / 1000)
}

#[test]
fn a_refusal_waits_retry_after_plus_jitter_below_it() {
    let (core, _) = core(Policy::default());
    let mut call = get(&core);
    let refusal = headers(&[("retry-after", "2")]);
    // The jitter is drawn (at half, here) below the server's wait, which is longer
    // than the steps of 100, 200, 400 ms.
    assert_eq!(ms(call.answered(TOO_MANY, &refusal)), Some(3000));
    let unavailable = StatusCode::SERVICE_UNAVAILABLE;
    assert_eq!(ms(call.answered(unavailable, &refusal)), Some(3000));
    assert_eq!(ms(call.answered(TOO_MANY, &refusal)), Some(3000));
    assert_eq!(
        call.answered(TOO_MANY, &refusal),
        None,
        "three retries, then the answer"
    );
    // A wait shorter than the step: the jitter is drawn below the step.
    let mut call = get(&core);
    let at_once = headers(&[("retry-after", "0")]);
    assert_eq!(ms(call.answered(TOO_MANY, &at_once)), Some(50));
    // A wait longer than the cap (10 s): the jitter is drawn below the cap.
    let long = headers(&[("retry-after", "40")]);
    assert_eq!(ms(call.answered(TOO_MANY, &long)), Some(45_000));
}

#[test]
fn an_http_date_is_read_against_the_wall_clock() {
    let (core, clock) = core(Policy::default());
    clock.advance(S(10));
    let mut call = get(&core);
    let refusal = headers(&[("retry-after", "Sun, 06 Nov 1994 08:50:37 GMT")]);
    assert_eq!(ms(call.answered(TOO_MANY, &refusal)), Some(55_000));
}

#[test]
fn without_retry_after_the_empty_quotas_t_is_waited() {
    let (core, _) = core(Policy::default());
    let mut call = get(&core);
    let refusal = headers(&[
        ("ratelimit-policy", r#""api";q=100;w=60, "burst";q=10;w=1"#),
        ("ratelimit", r#""api";r=0;t=7, "burst";r=3;t=1"#),
    ]);
    assert_eq!(ms(call.answered(TOO_MANY, &refusal)), Some(10_500));
    // Garbage in Retry-After: the fields still answer.
    let mut garbage = refusal.clone();
    garbage.insert("retry-after", HeaderValue::from_static("soon"));
    assert_eq!(ms(call.answered(TOO_MANY, &garbage)), Some(10_500));
}

#[test]
fn with_nothing_to_go_on_the_backoff_is_full_jitter() {
    let (core, _) = core(
        Policy::default()
            .backoff(MS(100), MS(300))
            .unwrap()
            .max_retries(5),
    );
    let mut call = get(&core);
    let none = HeaderMap::new();
    let waits: Vec<_> =
        std::iter::from_fn(|| ms(call.answered(StatusCode::SERVICE_UNAVAILABLE, &none))).collect();
    // Steps 100, 200, 300 (the cap), 300, 300; drawn at half.
    assert_eq!(waits, [50, 100, 150, 150, 150]);
    let mut call = get(&core);
    assert_eq!(
        ms(call.failed()),
        Some(50),
        "a transport error backs off alike"
    );
    assert_eq!(ms(call.answered(StatusCode::BAD_GATEWAY, &none)), Some(100));
    assert_eq!(
        ms(call.answered(StatusCode::GATEWAY_TIMEOUT, &none)),
        Some(150)
    );
}

#[test]
fn a_wait_past_max_wait_returns_the_answer_at_once() {
    let (core, _) = core(Policy::default().max_wait(S(30)).unwrap());
    let mut call = get(&core);
    for huge in [
        "31",
        "900",
        "99999999999999999999999",
        "Fri, 31 Dec 9999 23:59:59 GMT",
    ] {
        assert_eq!(
            call.answered(TOO_MANY, &headers(&[("retry-after", huge)])),
            None,
            "{huge}"
        );
    }
    let lockout = headers(&[("ratelimit", r#""login";r=0;t=900"#)]);
    assert_eq!(call.answered(TOO_MANY, &lockout), None);
    assert_eq!(
        ms(call.answered(TOO_MANY, &headers(&[("retry-after", "30")]))),
        Some(35_000),
        "the limit itself is waited"
    );
}

#[test]
fn other_answers_are_returned() {
    let (core, _) = core(Policy::default());
    let mut call = get(&core);
    let any = headers(&[("retry-after", "1")]);
    for status in [
        StatusCode::OK,
        StatusCode::INTERNAL_SERVER_ERROR,
        StatusCode::BAD_REQUEST,
        StatusCode::UNAUTHORIZED,
    ] {
        assert_eq!(call.answered(status, &any), None, "{status}");
    }
}

#[test]
fn a_request_that_may_not_be_repeated_is_not() {
    let (core, _) = core(Policy::default());
    let mut call = core
        .start(Target {
            server: "api.test:80".into(),
            repeatable: false,
        })
        .unwrap();
    assert_eq!(
        call.answered(TOO_MANY, &headers(&[("retry-after", "1")])),
        None
    );
    assert_eq!(call.failed(), None);
}

#[test]
fn the_budget_caps_retries_across_requests() {
    let (core, _) = core(Policy::default().retry_budget(10, 2, S(10)).unwrap());
    let none = HeaderMap::new();
    let mut retried = 0;
    for _ in 0..100 {
        let mut call = get(&core);
        retried += usize::from(
            call.answered(StatusCode::SERVICE_UNAVAILABLE, &none)
                .is_some(),
        );
    }
    // Of 100 refused requests: 10% of those sent so far plus 2 (the reserve covers
    // the first two, then one more per ten requests).
    assert_eq!(retried, 12);
}

#[test]
fn the_throttle_refuses_locally_once_the_server_refuses_most() {
    let policy = Policy::default()
        .adaptive_throttle(2.0, S(120))
        .unwrap()
        .max_retries(0);
    let (core, clock) = core(policy);
    let target = || Target {
        server: "api.test:80".into(),
        repeatable: true,
    };
    // Every request refused by the server: p = n / (n + 1) after n of them, against
    // a coin of 0.5: the first two go (p = 0, then 1/2), the third is refused.
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        match core.start(target()) {
            Ok(mut call) => {
                call.before_attempt();
                call.answered(TOO_MANY, &HeaderMap::new());
                outcomes.push(None);
            }
            Err(Error::Throttled { probability }) => outcomes.push(Some(probability)),
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(outcomes[..2], [None, None]);
    assert!(
        (outcomes[2].unwrap() - 2.0 / 3.0).abs() < 1e-12,
        "{outcomes:?}"
    );
    // The window forgets.
    clock.advance(S(120));
    assert!(core.start(target()).is_ok());
}

#[test]
fn the_throttle_lets_everything_through_while_half_is_accepted() {
    let policy = Policy::default()
        .adaptive_throttle(2.0, S(120))
        .unwrap()
        .max_retries(0);
    let (core, _) = core(policy);
    // `get` fails the test on a local refusal.
    for i in 0..100 {
        let mut call = get(&core);
        let status = if i % 2 == 0 { TOO_MANY } else { StatusCode::OK };
        call.answered(status, &HeaderMap::new());
    }
}

#[test]
fn a_low_quota_spaces_the_next_requests_at_its_rate_until_the_reset() {
    let (core, clock) = core(Policy::default());
    let mut call = get(&core);
    let low = headers(&[
        ("ratelimit-policy", r#""api";q=10;w=1"#),
        ("ratelimit", r#""api";r=0;t=1"#),
    ]);
    assert_eq!(call.answered(StatusCode::OK, &low), None);
    // 10 a second: 100 ms apart, in the order requests start.
    let next = || {
        core.start(Target {
            server: "api.test:80".into(),
            repeatable: true,
        })
        .unwrap()
        .before_attempt()
    };
    assert_eq!(next(), MS(0));
    assert_eq!(next(), MS(100));
    assert_eq!(next(), MS(200));
    clock.advance(S(1));
    assert_eq!(next(), MS(0), "the quota is full again");
    assert_eq!(next(), MS(0));
    // Room left: no pacing.
    let mut call = get(&core);
    let room = headers(&[
        ("ratelimit-policy", r#""api";q=10;w=1"#),
        ("ratelimit", r#""api";r=5;t=1"#),
    ]);
    call.answered(StatusCode::OK, &room);
    assert_eq!(next(), MS(0));
    assert_eq!(next(), MS(0));
}

#[test]
fn pacing_can_be_turned_off() {
    let (core, _) = core(Policy::default().slow_down_below(None).unwrap());
    let mut call = get(&core);
    call.answered(
        StatusCode::OK,
        &headers(&[("ratelimit", r#""api";r=0;t=5"#)]),
    );
    assert_eq!(get(&core).before_attempt(), Duration::ZERO);
}

mod bounds {
    //! Whatever the server asks for, a wait never exceeds `max_wait` plus the cap.

    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn a_wait_is_never_past_max_wait_plus_the_cap(
            retry_after in "[0-9]{0,30}|[A-Z][a-z]{2}, [0-9]{2} Nov [0-9]{4} 08:49:37 GMT|-?[a-z0-9.]{0,8}",
            r in 0u64..3,
            t in "[0-9]{1,18}",
            status in prop::sample::select(vec![429u16, 503, 502, 504]),
            advance in 0u64..1_000_000_000_000,
        ) {
            let policy = Policy::default().max_wait(S(30)).unwrap();
            let (core, clock) = core(policy);
            clock.advance(S(advance));
            let mut call = get(&core);
            let refusal = headers(&[
                ("retry-after", &retry_after),
                ("ratelimit", &format!(r#""a";r={r};t={t}"#)),
            ]);
            let status = StatusCode::from_u16(status).unwrap();
            while let Some(wait) = call.answered(status, &refusal) {
                prop_assert!(wait <= S(30) + S(10), "{wait:?}");
            }
        }
    }
}
