//! Token leases on real processes: four `weir serve` instances on one Redis (and on a
//! 3-master Redis Cluster) hammered on one hot key of a `lease: auto` rule, offered
//! twice its limit for several periods. What is measured: every window within the
//! bucket's bound, at least 97% of the limit admitted once the first burst is spent,
//! Redis calls (Redis's own `INFO commandstats`) at least 50 times fewer than the same
//! load without `lease`, an instance killed holding a lease (the others go on, nothing
//! over-admitted), and Redis stopped (each request answered, as the failure policy
//! says).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::Server;
use weir_testkit::{RedisCluster, RedisServer};

/// The rule: 20,000 a minute's rate, over a 6 s period (2,000 per 6 s) so that a run
/// of several periods fits in a test; the bucket holds a period's worth.
const LIMIT: u64 = 2_000;
const PERIOD: Duration = Duration::from_secs(6);
/// Client threads; each keeps one connection to one instance.
const CLIENTS: usize = 8;

/// The tests here run one at a time: each runs four `weir serve` on the real clock and
/// measures what they admit, and two of them at once on the machine's two cores starve
/// each other's instances of CPU (a CI run measured 96.8% of the limit admitted so).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

fn config(dir: &Path, store: &str, lease: bool, burst: Option<u64>) -> PathBuf {
    let lease = if lease { "    lease: auto\n" } else { "" };
    let burst = burst.map_or(String::new(), |b| format!("    burst: {b}\n"));
    let yaml = format!(
        "store:\n{store}  timeout: 1s\nrules:\n  - name: hot\n    algorithm: token_bucket\n    limit: {LIMIT}\n    period: {}s\n{burst}{lease}",
        PERIOD.as_secs()
    );
    let path = dir.join(if lease.is_empty() {
        "plain.yaml"
    } else {
        "leased.yaml"
    });
    std::fs::write(&path, yaml).unwrap();
    path
}

/// One keep-alive connection to an instance's decision API.
struct Client {
    stream: BufReader<TcpStream>,
}

impl Client {
    fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Self {
            stream: BufReader::new(stream),
        }
    }

    /// Checks one unit of the hot key; the status, or `None` when the connection
    /// broke (the instance was killed).
    fn check(&mut self) -> Option<u16> {
        let body = r#"{"rule": "hot", "key": "partner-7"}"#;
        let request = format!(
            "POST /v1/check HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).ok()?;
        let mut line = String::new();
        if self.stream.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let status = line.split(' ').nth(1)?.parse().ok()?;
        let mut length = 0;
        loop {
            line.clear();
            self.stream.read_line(&mut line).ok()?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().ok()?;
            }
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).ok()?;
        Some(status)
    }
}

/// When each request was answered, and how.
#[derive(Default)]
struct Answers {
    /// Seconds since the run started, of each 200.
    admitted: Vec<f64>,
    denied: u64,
    /// 503s, and requests whose instance was gone.
    unavailable: u64,
}

/// Offers `rate` checks a second for `length`, spread over the instances (each
/// client thread paced, keeping one connection); `during` runs once, half-way.
fn offer(addrs: &[String], rate: u64, length: Duration, during: impl FnOnce() + Send) -> Answers {
    let start = Instant::now();
    let every = Duration::from_secs_f64(CLIENTS as f64 / rate as f64);
    let answers = std::thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let addr = addrs[c % addrs.len()].clone();
                s.spawn(move || {
                    let mut client = Some(Client::connect(&addr));
                    let mut answers = Answers::default();
                    // Staggered, so that the clients' requests interleave.
                    let mut next = start + every.mul_f64(c as f64 / CLIENTS as f64);
                    while next < start + length {
                        if let Some(wait) = next.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        next += every;
                        match client.as_mut().and_then(Client::check) {
                            Some(200) => answers.admitted.push(start.elapsed().as_secs_f64()),
                            Some(429) => answers.denied += 1,
                            Some(503) | None => {
                                client = None;
                                answers.unavailable += 1;
                            }
                            Some(other) => panic!("status {other}"),
                        }
                    }
                    answers
                })
            })
            .collect();
        s.spawn(|| {
            std::thread::sleep(length / 2);
            during();
        });
        clients
            .into_iter()
            .map(|c| c.join().unwrap())
            .collect::<Vec<_>>()
    });
    let mut all = Answers::default();
    for a in answers {
        all.admitted.extend(a.admitted);
        all.denied += a.denied;
        all.unavailable += a.unavailable;
    }
    all.admitted.sort_by(f64::total_cmp);
    all
}

/// The most admitted in any window of `window` seconds.
fn worst_window(admitted: &[f64], window: f64) -> u64 {
    let mut first = 0;
    let mut worst = 0;
    for (i, &t) in admitted.iter().enumerate() {
        while admitted[first] + window <= t {
            first += 1;
        }
        worst = worst.max((i + 1 - first) as u64);
    }
    worst
}

/// The bucket's bound for a window: what it holds, plus its refill over the window and
/// the answers' spread (a request admitted at the window's edge is answered up to
/// `slack` seconds later).
fn bound(window: f64, slack: f64, burst: Option<u64>) -> u64 {
    let rate = LIMIT as f64 / PERIOD.as_secs_f64();
    burst.unwrap_or(LIMIT) + (rate * (window + slack)).ceil() as u64
}

fn assert_within_the_bucket(answers: &Answers, burst: Option<u64>) {
    for window in [1.0, PERIOD.as_secs_f64(), 2.0 * PERIOD.as_secs_f64()] {
        let worst = worst_window(&answers.admitted, window);
        let bound = bound(window, 0.25, burst);
        assert!(
            worst <= bound,
            "{worst} admitted in {window} s, over the bucket's {bound}"
        );
    }
}

/// Admitted from the end of the first period (the bucket's own burst spent) to the end
/// of the run, against the refill over that time.
fn steady_share(answers: &Answers, length: Duration) -> f64 {
    let from = PERIOD.as_secs_f64();
    let admitted = answers.admitted.iter().filter(|&&t| t >= from).count();
    let rate = LIMIT as f64 / PERIOD.as_secs_f64();
    admitted as f64 / (rate * (length.as_secs_f64() - from))
}

fn script_calls(servers: &[&RedisServer]) -> u64 {
    servers
        .iter()
        .flat_map(|s| ["fcall", "evalsha", "eval"].map(|c| s.calls(c)))
        .sum()
}

/// Four instances on `store`, offered twice the limit for `periods` periods with
/// leases and one period without, the bucket holding `burst` (by default the limit);
/// asserts at least `fewer` times fewer Redis calls per request with leases, and
/// returns them with and without.
fn hammered(
    store: &str,
    redis: &[&RedisServer],
    periods: u32,
    burst: Option<u64>,
    fewer: f64,
) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let rate = 2 * LIMIT / PERIOD.as_secs();
    let leased = config(dir.path(), store, true, burst);
    let instances: Vec<Server> = (0..4).map(|_| Server::start(&leased)).collect();
    let addrs: Vec<String> = instances.iter().map(|i| i.addr.clone()).collect();
    let before = script_calls(redis);
    let length = PERIOD * periods;
    let answers = offer(&addrs, rate, length, || {});
    let leased_calls = script_calls(redis) - before;
    assert_eq!(answers.unavailable, 0);
    assert_within_the_bucket(&answers, burst);
    let share = steady_share(&answers, length);
    eprintln!("{:.2}% of the limit admitted", share * 100.0);
    assert!(share >= 0.97, "{:.1}% of the limit admitted", share * 100.0);
    drop(instances);

    let plain = config(dir.path(), store, false, burst);
    let instances: Vec<Server> = (0..4).map(|_| Server::start(&plain)).collect();
    let addrs: Vec<String> = instances.iter().map(|i| i.addr.clone()).collect();
    let before = script_calls(redis);
    let unleased = offer(&addrs, rate, PERIOD, || {});
    let plain_calls = script_calls(redis) - before;
    let requests = |a: &Answers| a.admitted.len() as u64 + a.denied;
    let with = leased_calls as f64 / requests(&answers) as f64;
    let without = plain_calls as f64 / requests(&unleased) as f64;
    assert!(
        without >= fewer * with,
        "Redis calls per request: {with:.4} leased, {without:.4} without"
    );
    (with, without)
}

/// Four periods, the first the bucket's own burst, as on the Cluster below: over two
/// (a run of three periods) the share admitted moved between 97.05% and 99.85% from
/// run to run on an idle machine, each instance holding up to a batch (about 250
/// units of the 4,000 refilled) when the run ends.
#[test]
fn four_instances_on_one_redis_lease_a_hot_key_within_the_bucket() {
    let _serial = one_at_a_time();
    let redis = RedisServer::start();
    let store = format!("  type: redis\n  url: {}\n", redis.url());
    let (with, without) = hammered(&store, &[&redis], 4, None, 50.0);
    eprintln!("Redis calls per request: {with:.4} leased, {without:.4} without");
}

/// The same rate with a burst of 200, a tenth of the period's limit (20,000 a minute,
/// burst 200): batches sized from the key's take rate, and denied takes coming back
/// in turns, still make at least 30 times fewer calls (issue 41).
#[test]
fn four_instances_lease_a_hot_key_with_a_small_burst_within_the_bucket() {
    let _serial = one_at_a_time();
    let redis = RedisServer::start();
    let store = format!("  type: redis\n  url: {}\n", redis.url());
    let (with, without) = hammered(&store, &[&redis], 3, Some(200), 30.0);
    eprintln!("burst 200: Redis calls per request: {with:.4} leased, {without:.4} without");
}

/// Four periods, the first the bucket's own burst: the share admitted is measured over
/// the other three. Over one (a run of two periods) it moved between 95.5% and 103.6%
/// from run to run on an idle machine: the burst is not quite spent when the period
/// ends, and each instance holds up to a batch at any instant, so a window's count is
/// off by that much; over 24 s of a 5-period run it was 99.5% and 100.7%.
#[test]
fn four_instances_on_a_redis_cluster_lease_a_hot_key_within_the_bucket() {
    let _serial = one_at_a_time();
    let cluster = RedisCluster::start();
    let nodes = cluster.urls().join(", ");
    let store = format!("  type: redis_cluster\n  nodes: [{nodes}]\n");
    let servers: Vec<&RedisServer> = cluster.nodes().iter().collect();
    let (with, without) = hammered(&store, &servers, 4, None, 50.0);
    eprintln!("Redis Cluster calls per request: {with:.4} leased, {without:.4} without");
}

/// One instance killed half-way (holding a lease: it was being asked): the others go on
/// answering, and no window admits more than the bucket. Then Redis stopped: every
/// request is still answered (the units held, then 503s, as `/v1/check` fails
/// closed), none hangs.
#[test]
fn a_killed_instance_or_a_stopped_redis_never_over_admits() {
    let _serial = one_at_a_time();
    let mut redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("  type: redis\n  url: {}\n", redis.url());
    let leased = config(dir.path(), &store, true, None);
    let mut instances: Vec<Server> = (0..4).map(|_| Server::start(&leased)).collect();
    let addrs: Vec<String> = instances.iter().map(|i| i.addr.clone()).collect();
    let mut victim = instances.remove(0);
    let rate = 2 * LIMIT / PERIOD.as_secs();
    // Killed half-way (`offer` runs `during` then), so 7 s are measured after the
    // victim's hold: the survivors hold up to a batch each when the run ends (`auto`:
    // 1.5 s of their demand), which over the 4 s of a run of two periods was 10.5% of
    // the refill in one CI run.
    let length = PERIOD * 3;
    let answers = offer(&addrs, rate, length, move || {
        victim.child.kill().unwrap();
        victim.child.wait().unwrap();
    });
    assert_within_the_bucket(&answers, None);
    // The killed instance's clients stop; the others' still get the refill, less what
    // the victim held for at most its hold (2 s).
    let from = length.as_secs_f64() / 2.0 + 2.0;
    let after_the_hold = answers.admitted.iter().filter(|&&t| t >= from).count() as f64;
    let rate_per_s = LIMIT as f64 / PERIOD.as_secs_f64();
    let expected = rate_per_s * (length.as_secs_f64() - from);
    eprintln!("{after_the_hold} admitted after the kill's hold, of {expected}");
    assert!(
        after_the_hold >= 0.9 * expected,
        "{after_the_hold} admitted after the kill, of {expected}"
    );

    redis.kill();
    let addrs: Vec<String> = instances.iter().map(|i| i.addr.clone()).collect();
    let after = offer(&addrs, 100, Duration::from_secs(2), || {});
    assert!(after.unavailable > 0, "a stopped Redis fails the checks");
    assert!(
        (after.admitted.len() as u64) <= LIMIT / 8,
        "only units already held are spent: {}",
        after.admitted.len()
    );
}

/// Every door spends the same leases: a `/v1/check` of the key and `/v1/decide` of a
/// request keyed on it draw on one lease (one take), and `/metrics` counts the lease,
/// the units given back by a reload and the denials answered locally.
#[test]
fn the_doors_share_one_lease_and_the_metrics_count_it() {
    let _serial = one_at_a_time();
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    let yaml = |batch: u64| {
        format!(
            "store:\n  type: redis\n  url: {}\n  timeout: 1s\nidentities:\n  api_key:\n    header: X-Api-Key\nrules:\n  - name: partner\n    algorithm: gcra\n    limit: 10\n    period: 1h\n    match: {{ path_prefix: /api }}\n    key: [api_key]\n    lease: {{ batch: {batch}, hold: 10m }}\n",
            redis.url()
        )
    };
    std::fs::write(&path, yaml(6)).unwrap();
    let weir = Server::start(&path);
    let calls = || script_calls(&[&redis]);
    let check = r#"{"rule": "partner", "key": "api_key=k1"}"#;
    let decide = r#"{"method": "GET", "path": "/api/x", "client_ip": "203.0.113.7", "headers": {"x-api-key": "k1"}}"#;
    let before = calls();
    assert_eq!(
        weir.request("POST", "/v1/check", check).0,
        "HTTP/1.1 200 OK"
    );
    for _ in 0..5 {
        assert_eq!(
            weir.request("POST", "/v1/decide", decide).0,
            "HTTP/1.1 200 OK"
        );
    }
    assert_eq!(calls() - before, 1, "six requests, two doors, one take");
    // The next four come from a second lease, and then nothing is left for an hour.
    for _ in 0..4 {
        assert_eq!(
            weir.request("POST", "/v1/check", check).0,
            "HTTP/1.1 200 OK"
        );
    }
    for _ in 0..3 {
        let (status, _) = weir.request("POST", "/v1/decide", decide);
        assert_eq!(status, "HTTP/1.1 429 Too Many Requests");
    }
    assert_eq!(
        calls() - before,
        3,
        "two takes and one denied; two denials answered here"
    );
    let (_, metrics) = weir.request("GET", "/metrics", "");
    for line in [
        "weir_lease_grants_total{rule=\"partner\"} 2",
        "weir_lease_units_total{rule=\"partner\",fate=\"leased\"} 10",
        "weir_lease_local_denials_total{rule=\"partner\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
}

/// A reload gives back the units the replaced engine held: the new one takes them
/// again.
#[test]
fn a_reload_gives_the_leases_back() {
    let _serial = one_at_a_time();
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    let yaml = |batch: u64| {
        format!(
            "store:\n  type: redis\n  url: {}\n  timeout: 1s\nrules:\n  - name: partner\n    algorithm: token_bucket\n    limit: 10\n    period: 1h\n    lease: {{ batch: {batch}, hold: 10m }}\n",
            redis.url()
        )
    };
    std::fs::write(&path, yaml(8)).unwrap();
    let weir = Server::start(&path);
    let check = r#"{"rule": "partner", "key": "k"}"#;
    assert_eq!(
        weir.request("POST", "/v1/check", check).0,
        "HTTP/1.1 200 OK"
    );
    std::fs::write(&path, yaml(2)).unwrap();
    let returned = "weir_lease_units_total{rule=\"partner\",fate=\"returned\"} 7";
    let deadline = Instant::now() + Duration::from_secs(10);
    while !weir.request("GET", "/metrics", "").1.contains(returned) {
        assert!(Instant::now() < deadline, "the reload gave nothing back");
        std::thread::sleep(Duration::from_millis(50));
    }
    // All nine units left are there for the new engine.
    for _ in 0..9 {
        assert_eq!(
            weir.request("POST", "/v1/check", check).0,
            "HTTP/1.1 200 OK"
        );
    }
    let (status, _) = weir.request("POST", "/v1/check", check);
    assert_eq!(status, "HTTP/1.1 429 Too Many Requests");
}
