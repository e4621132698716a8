//! A load generator for Envoy's rate limit service: `ShouldRateLimit` calls from
//! concurrent tasks over a few HTTP/2 connections (4, or as many as asked), as Envoys
//! would send them: flat out, or paced (each task waiting `delay_ms` between its calls,
//! as `bench/check.lua` paces wrk's connections with `WRK_DELAY_MS`, so that both doors
//! can be compared at one rate).
//!
//! Run (from the repository's root, against a `weir serve` with an `envoy` section):
//!
//! ```sh
//! cargo run --profile dist -p weir --example rls_load -- 127.0.0.1:8081 10 1 64 0 4
//! #                                  address  seconds descriptors tasks delay_ms connections
//! ```
//!
//! Each call asks in domain `bench` for `descriptors` descriptors `(d<i>, user-<n>)`,
//! `n` cycling over 10,000 values. Prints the calls per second, the over-limit
//! answers, and the latency's p50, p90 and p99.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an example: it stops with its message"
)]

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

/// HTTP/2 connections the tasks share by default, as a few Envoys would open.
const CONNECTIONS: &str = "4";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_owned());
    let addr = arg(0, "127.0.0.1:8081");
    let secs: u64 = arg(1, "10").parse().expect("seconds");
    let descriptors: usize = arg(2, "1").parse().expect("descriptors");
    let tasks: usize = arg(3, "64").parse().expect("tasks");
    let delay = Duration::from_millis(arg(4, "0").parse().expect("delay in milliseconds"));
    let connections: usize = arg(5, CONNECTIONS).parse().expect("connections");
    // The generator's own runtime: one thread, so that weir keeps the other core.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(
        addr,
        secs,
        descriptors,
        tasks,
        delay,
        connections.max(1),
    ));
}

async fn run(
    addr: String,
    secs: u64,
    descriptors: usize,
    tasks: usize,
    delay: Duration,
    connections: usize,
) {
    let mut channels = Vec::new();
    for _ in 0..connections {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .expect("weir's gRPC listener");
        channels.push(channel);
    }
    let until = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let mut client = RateLimitServiceClient::new(channels[task % connections].clone());
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut over = 0u64;
            let mut n = task * 7_919;
            while Instant::now() < until {
                n += 1;
                let value = format!("user-{}", n % 10_000);
                let request = RateLimitRequest {
                    domain: "bench".to_owned(),
                    descriptors: (0..descriptors)
                        .map(|d| RateLimitDescriptor {
                            entries: vec![Entry {
                                key: format!("d{d}"),
                                value: value.clone(),
                            }],
                            ..RateLimitDescriptor::default()
                        })
                        .collect(),
                    hits_addend: 0,
                };
                let sent = Instant::now();
                let answer = client.should_rate_limit(request).await.expect("an answer");
                latencies.push(sent.elapsed());
                over += u64::from(answer.get_ref().overall_code == 2);
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
            }
            (latencies, over)
        }));
    }
    let mut latencies = Vec::new();
    let mut over = 0;
    for handle in handles {
        let (mine, their_over) = handle.await.unwrap();
        latencies.extend(mine);
        over += their_over;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let at = |q: f64| {
        let i = ((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1));
        latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "calls {} in {elapsed:.1} s: {:.0}/s, over limit {over}, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        latencies.len(),
        latencies.len() as f64 / elapsed,
        at(0.50),
        at(0.90),
        at(0.99),
    );
}
