//! A running `weir serve` reloads Envoy's descriptors when their directory changes,
//! and keeps its last good files when a new one is refused.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

#[path = "envoy/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use harness::{WeirProcess, config_dir, request};

fn limited(per_hour: u32) -> String {
    format!(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: {per_hour}}}\n"
    )
}

#[tokio::test]
async fn a_changed_directory_reloads_and_a_bad_file_keeps_the_last_good_ones() {
    let dir = config_dir(&[("d.yaml", limited(1))], "", "");
    let log = dir.path().join("weir.log");
    let weir = WeirProcess::start_logging(&dir.path().join("weir.yaml"), Some(&log));
    let mut client = weir.client().await;
    let mut limit = async || {
        let response = client
            .should_rate_limit(request("d", &[&[("k", "v")]]))
            .await
            .unwrap()
            .into_inner();
        response.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| l.requests_per_unit)
    };
    assert_eq!(limit().await, Some(1));
    // The directory is looked at every second: wait (bounded) for the new limit.
    std::fs::write(dir.path().join("rl/d.yaml"), limited(100)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while limit().await != Some(100) {
        assert!(Instant::now() < deadline, "not reloaded after 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A new file that is refused (a bad unit) leaves the last good ones serving; a
    // good file after it is taken.
    std::fs::write(
        dir.path().join("rl/e.yaml"),
        "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("rl/f.yaml"),
        limited(7).replace("domain: d", "domain: f"),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.contains("new configuration refused") {
            assert!(
                text.contains("rl/e.yaml:4:24: descriptors[0].rate_limit.unit"),
                "{text}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no refusal logged after 10 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(limit().await, Some(100), "the last good files serve");
    std::fs::remove_file(dir.path().join("rl/e.yaml")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = client
            .should_rate_limit(request("f", &[&[("k", "v")]]))
            .await
            .unwrap()
            .into_inner();
        let limit = response.statuses[0].current_limit.as_ref();
        if limit.map(|l| l.requests_per_unit) == Some(7) {
            break;
        }
        assert!(Instant::now() < deadline, "f.yaml not loaded after 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
