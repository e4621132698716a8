//! `weir simulate` against cases computed by hand: the numbers of the table (admitted,
//! denied, retry waste, the worst trailing window) and trace errors that name the line.
//! No test sleeps: time is virtual. The `weir` binary end to end (its SVG plot, a
//! configuration's rules) is tested in `crates/weir/tests/simulate_cli.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::path::Path;
use std::time::Duration;

use weir_simulate::{Outcome, Params, Pattern, Progress, RuleReport, Series, Trace, Traffic};

const S: u64 = 1_000_000_000;

fn rules(specs: &[&str]) -> Vec<weir_simulate::Rule> {
    specs
        .iter()
        .map(|s| weir_simulate::from_spec(s).unwrap())
        .collect()
}

fn run(specs: &[&str], traffic: &Traffic) -> Outcome {
    weir_simulate::simulate(&rules(specs), traffic, &Progress::hidden())
}

/// (admitted, denied, retry waste, worst window's cost, when it ended in ns).
fn numbers(report: &RuleReport) -> (u64, u64, u64, u64, u64) {
    let worst = report.worst.as_ref().expect("something admitted");
    (
        report.admitted,
        report.denied,
        report.retry_waste,
        worst.admitted,
        worst.at,
    )
}

/// 10 requests at 59.9 s and 10 at 60.0 s, one key, against 10 a minute.
fn boundary_burst() -> Traffic {
    let mut requests = vec![(59_900, "a", 1); 10];
    requests.extend(vec![(60_000, "a", 1); 10]);
    Trace::from_requests(requests).into()
}

#[test]
fn a_fixed_window_lets_twice_its_limit_through_at_a_boundary() {
    let outcome = run(
        &[
            "fixed_window:10/1m",
            "sliding_log:10/1m",
            "sliding_window:10/1m",
        ],
        &boundary_burst(),
    );
    let [fixed, log, sliding] = &outcome.rules[..] else {
        panic!("three rules")
    };
    // Windows [0, 60 s) and [60 s, 120 s): 10 in each, all within 0.1 s.
    assert_eq!(numbers(fixed), (20, 0, 0, 20, 60 * S));
    assert_eq!(fixed.overshoot(), 2.0);
    // Exact: the 10 at 59.9 s fill the trailing minute until 119.9 s. The first denial
    // at 60 s asks to wait; the 9 sent at the same instant are waste.
    assert_eq!(numbers(log), (10, 10, 9, 10, 59_900_000_000));
    assert_eq!(log.overshoot(), 1.0);
    // At 60.0 s the previous window weighs in whole: 10 + 1 > 10.
    assert_eq!(numbers(sliding), (10, 10, 9, 10, 59_900_000_000));
    assert_eq!(outcome.rules[0].worst.as_ref().unwrap().key, "a");
}

#[test]
fn the_plot_zooms_to_the_burst_and_counts_each_trailing_minute_against_the_limit() {
    let outcome = run(
        &["fixed_window:10/1m", "sliding_log:10/1m"],
        &boundary_burst(),
    );
    let [fixed, log] = &outcome.rules[..] else {
        panic!("two rules")
    };
    // The buckets cover the traffic, 59.9 s to 60 s in 200 buckets of 0.5 ms, not the
    // quiet minute before it.
    assert_eq!(
        (fixed.series.start, fixed.series.width),
        (59_900_000_000, 500_000)
    );
    // (when the bucket starts, the most admitted to one key in a minute ending there)
    let trailing = |series: &Series| -> Vec<(u64, u64)> {
        let at = |i: usize| series.start + i as u64 * series.width;
        let counted = series.trailing.iter().enumerate().filter(|(_, n)| **n > 0);
        counted.map(|(i, &n)| (at(i), n)).collect()
    };
    // The fixed window: the limit at 59.9 s, twice the limit at 60 s.
    assert_eq!(
        trailing(&fixed.series),
        [(59_900_000_000, 10), (60_000_000_000, 20)]
    );
    // The exact log admits nothing at 60 s: its minute never holds more than the limit.
    assert_eq!(trailing(&log.series), [(59_900_000_000, 10)]);
    for report in [fixed, log] {
        let most = report.series.trailing.iter().max().copied();
        assert_eq!(most, report.worst.as_ref().map(|w| w.admitted));
    }
}

#[test]
fn a_sliding_window_can_admit_up_to_nineteen_tenths_of_its_limit_in_a_trailing_minute() {
    // 10 at 59.9 s, then one a second from 60 s to 119 s. At 60 + e seconds the
    // estimate is 10 x (1 - e/60) + current, so the k-th of the new window is admitted
    // at e = 6k: at 66, 72, ..., 114 s (9 requests). The minute ending at 114 s holds
    // the 10 of 59.9 s and those 9: 19, where the exact log admits none of them.
    let mut requests = vec![(59_900, "a", 1); 10];
    requests.extend((60..120).map(|s| (s * 1000, "a", 1)));
    let traffic = Trace::from_requests(requests).into();
    let outcome = run(&["sliding_window:10/1m", "sliding_log:10/1m"], &traffic);
    // Denied: 60..=65 s (6), then 5 after each of the 9 admissions. Each run of
    // denials starts with one that asks to wait until the next admission (6 s after
    // the last): the rest of the run is waste, 5 in the first run and 4 in the others.
    assert_eq!(numbers(&outcome.rules[0]), (19, 51, 41, 19, 114 * S));
    assert_eq!(outcome.rules[0].overshoot(), 1.9);
    // The log: nothing after 59.9 s fits until 119.9 s. The first denial (60 s) says
    // wait 59.9 s, so the next 59 are waste.
    assert_eq!(numbers(&outcome.rules[1]), (10, 60, 59, 10, 59_900_000_000));
}

#[test]
fn steady_traffic_under_the_limit_is_all_admitted() {
    let params = Params {
        rate: 1.0,
        duration: Duration::from_secs(600),
        ..Params::default()
    };
    let specs = [
        "gcra:100/1m",
        "fixed_window:100/1m",
        "sliding_window:100/1m",
    ];
    let traffic = Pattern::Steady.traffic(&params, &rules(&specs)).unwrap();
    let outcome = run(&specs, &traffic);
    for report in &outcome.rules {
        // One a second from 0 to 599 s: every trailing minute holds 60 of them; the
        // first full one ends at 59 s.
        assert_eq!(numbers(report), (600, 0, 0, 60, 59 * S), "{}", report.name);
        assert_eq!(report.overshoot(), 0.6);
    }
}

#[test]
fn a_bot_on_one_account_gets_the_limit_and_wastes_the_rest() {
    let params = Params {
        rate: 10.0,
        duration: Duration::from_secs(60),
        ..Params::default()
    };
    let specs = ["sliding_log:5/15m"];
    let traffic = Pattern::Bot.traffic(&params, &rules(&specs)).unwrap();
    let outcome = run(&specs, &traffic);
    // 600 attempts; 5 admitted at 0, 0.1, ..., 0.4 s; the first denial (0.5 s) says
    // wait until 15 min, so all 594 after it are waste.
    assert_eq!(numbers(&outcome.rules[0]), (5, 595, 594, 5, 400_000_000));
}

/// Two clients of one account, a request due every second each (client 0 at 0 s, 1 s;
/// client 1 at 0.5 s, 1.5 s), against one request a second, for two seconds.
fn two_clients(pattern: Pattern) -> Outcome {
    let params = Params {
        rate: 2.0,
        clients: 2,
        duration: Duration::from_secs(2),
        retry_delay: Duration::from_millis(300),
        ..Params::default()
    };
    let specs = ["fixed_window:1/1s"];
    let traffic = pattern.traffic(&params, &rules(&specs)).unwrap();
    run(&specs, &traffic)
}

#[test]
fn a_retry_storm_wastes_the_retries_sent_before_retry_after() {
    let outcome = two_clients(Pattern::RetryStorm);
    assert_eq!(outcome.demand, Some(4));
    // 0 s: client 0 admitted. 0.5 s: client 1 denied, told to wait until 1 s; it
    // retries every 0.3 s: 0.8 s denied (waste). 1 s: client 0 admitted. 1.1 s:
    // client 1 denied (its wait was over; told to wait until 2 s); 1.4 s and 1.7 s
    // denied (waste); 2 s is the end.
    let report = &outcome.rules[0];
    assert_eq!(report.attempts, 7);
    assert_eq!(numbers(report), (2, 5, 3, 1, 0));
}

#[test]
fn jittered_backoff_honouring_retry_after_wastes_nothing() {
    let outcome = two_clients(Pattern::JitteredBackoff);
    // 0 s: client 0 admitted. 0.5 s: client 1 denied, waits 0.5 s plus up to 0.3 s:
    // at 1 s client 0 takes the second window (it goes first at a tie), client 1's
    // retry after it is denied but honoured the wait, and its next retry (after
    // waiting until 2 s) is past the end.
    let report = &outcome.rules[0];
    assert_eq!(
        (report.attempts, report.admitted, report.retry_waste),
        (4, 2, 0)
    );
}

#[test]
fn patterns_refuse_parameters_out_of_range() {
    let specs = rules(&["gcra:1/1s"]);
    for params in [
        Params {
            rate: 0.0,
            ..Params::default()
        },
        Params {
            clients: 0,
            ..Params::default()
        },
        Params {
            duration: Duration::ZERO,
            ..Params::default()
        },
    ] {
        assert!(
            Pattern::Steady.traffic(&params, &specs).is_err(),
            "{params:?}"
        );
    }
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn trace_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    for (text, line, message) in [
        ("timestamp_ms,key\n1000,a\n\n1000,b,0\n", 4, "cost `0`"),
        ("1000,a\n2000\n", 2, "expected `timestamp_ms,key[,cost]`"),
        ("1000,a\n# a comment\n1s,b\n", 3, "timestamp `1s`"),
        (
            "1000,a,1,x\n",
            1,
            "expected `timestamp_ms,key[,cost]`, found 4 fields",
        ),
    ] {
        let path = write(dir.path(), "trace.csv", text);
        let error = Trace::from_csv(&path, &Progress::hidden())
            .unwrap_err()
            .to_string();
        let expected = format!("{}:{line}: {message}", path.display());
        assert!(error.starts_with(&expected), "{error}");
    }
    let path = write(
        dir.path(),
        "access.log",
        "1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 1\nnonsense\n",
    );
    let error = Trace::from_access_log(&path, &Progress::hidden())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!(
            "{}:2: not a common log format line",
            path.display()
        )),
        "{error}"
    );
}

#[test]
fn access_logs_are_keyed_by_client_address() {
    let dir = tempfile::tempdir().unwrap();
    let log = "\
10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 1 \"-\" \"curl\"
10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 1 \"-\" \"curl\"
10.0.0.2 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 1 \"-\" \"curl\"
10.0.0.1 - - [10/Oct/2000:13:55:35 -0700] \"GET / HTTP/1.1\" 200 1 \"-\" \"curl\"
";
    let path = write(dir.path(), "access.log", log);
    let trace = Trace::from_access_log(&path, &Progress::hidden()).unwrap();
    assert_eq!(trace.len(), 4);
    let disorder = trace.out_of_order().unwrap();
    assert_eq!((disorder.count, disorder.first_line), (1, 4));
    let outcome = run(&["fixed_window:2/1m"], &trace.into());
    // 10.0.0.1 sends 3 within one minute (one of them a second earlier): 2 admitted;
    // 10.0.0.2 sends 1.
    assert_eq!((outcome.rules[0].admitted, outcome.rules[0].denied), (3, 1));
}
