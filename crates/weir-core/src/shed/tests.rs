//! The shedder against a simulated upstream, in simulated milliseconds: the upstream
//! serves `capacity` requests at full speed and shares itself among more (each then
//! goes `capacity / n` as fast), so latency grows with what is in flight; a request
//! not answered within the timeout counts as overload.

use std::time::Duration;

use super::*;

const MS: u64 = 1_000_000;

/// One request in flight in the simulation.
struct Flight {
    ticket: Ticket,
    priority: Priority,
    started: u64,
    /// Work left, in nanoseconds at full speed.
    left: f64,
}

/// What one priority saw over a stretch of simulated time.
#[derive(Debug, Default, Clone)]
struct Seen {
    offered: u64,
    shed: u64,
    answered: u64,
    timed_out: u64,
    latencies: Vec<u64>,
}

impl Seen {
    fn success_rate(&self) -> f64 {
        self.answered as f64 / self.offered.max(1) as f64
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        Duration::from_nanos(sorted.get(i).copied().unwrap_or(0))
    }
}

struct Upstream {
    /// Requests served at full speed at once.
    capacity: f64,
    /// Work per request, ns.
    work: f64,
    timeout: u64,
    now: u64,
    flights: Vec<Flight>,
    /// Fractional arrivals carried between milliseconds, per priority.
    carry: [f64; 3],
}

fn index(priority: Priority) -> usize {
    match priority {
        Priority::Critical => 0,
        Priority::Default => 1,
        Priority::Sheddable => 2,
    }
}

impl Upstream {
    fn new(capacity: f64, work_ms: f64, timeout_ms: u64) -> Self {
        Self {
            capacity,
            work: work_ms * MS as f64,
            timeout: timeout_ms * MS,
            now: 0,
            flights: Vec::new(),
            carry: [0.0; 3],
        }
    }

    /// Runs `millis` of simulated time with `rates` (requests a second) per priority.
    fn run(&mut self, shedder: &mut Shedder, millis: u64, rates: &[(Priority, f64)]) -> [Seen; 3] {
        let mut seen: [Seen; 3] = Default::default();
        for _ in 0..millis {
            for &(priority, per_second) in rates {
                let i = index(priority);
                self.carry[i] += per_second / 1000.0;
                while self.carry[i] >= 1.0 {
                    self.carry[i] -= 1.0;
                    seen[i].offered += 1;
                    match shedder.admit(priority) {
                        Some(ticket) => self.flights.push(Flight {
                            ticket,
                            priority,
                            started: self.now,
                            left: self.work,
                        }),
                        None => seen[i].shed += 1,
                    }
                }
            }
            // One millisecond of service, shared.
            let n = self.flights.len() as f64;
            let speed = if n > self.capacity {
                self.capacity / n
            } else {
                1.0
            };
            self.now += MS;
            let mut still = Vec::with_capacity(self.flights.len());
            for mut flight in std::mem::take(&mut self.flights) {
                flight.left -= speed * MS as f64;
                let latency = self.now - flight.started;
                let i = index(flight.priority);
                if flight.left <= 0.0 {
                    seen[i].answered += 1;
                    seen[i].latencies.push(latency);
                    shedder.finish(
                        flight.ticket,
                        Duration::from_nanos(latency),
                        Outcome::Answered,
                    );
                } else if latency >= self.timeout {
                    seen[i].timed_out += 1;
                    shedder.finish(
                        flight.ticket,
                        Duration::from_nanos(latency),
                        Outcome::Overloaded,
                    );
                } else {
                    still.push(flight);
                }
            }
            self.flights = still;
        }
        seen
    }
}

#[test]
fn each_priority_fills_its_share_and_critical_keeps_a_tenth() {
    let config = ShedConfig {
        min_limit: 20,
        max_limit: 20,
        initial_limit: 20,
        tolerance: 2.0,
    };
    let mut shedder = Shedder::new(config);
    let mut tickets = Vec::new();
    while let Some(t) = shedder.admit(Priority::Sheddable) {
        tickets.push(t);
    }
    assert_eq!(shedder.in_flight(), 10, "sheddable: half the limit");
    while let Some(t) = shedder.admit(Priority::Default) {
        tickets.push(t);
    }
    assert_eq!(shedder.in_flight(), 18, "default: nine tenths");
    while let Some(t) = shedder.admit(Priority::Critical) {
        tickets.push(t);
    }
    assert_eq!(shedder.in_flight(), 20, "critical: the rest");
    assert!(shedder.admit(Priority::Sheddable).is_none());
    for ticket in tickets {
        shedder.finish(ticket, Duration::from_millis(1), Outcome::Cancelled);
    }
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn past_capacity_sheddable_goes_first_and_critical_keeps_its_success_and_latency() {
    let mut shedder = Shedder::new(ShedConfig::default());
    // 10 at once, 10 ms each: 1,000 a second. Offered: 300 critical, 1,200 sheddable.
    let mut upstream = Upstream::new(10.0, 10.0, 1000);
    upstream.run(
        &mut shedder,
        1000,
        &[(Priority::Critical, 300.0), (Priority::Sheddable, 300.0)],
    );
    let loaded = [(Priority::Critical, 300.0), (Priority::Sheddable, 1200.0)];
    upstream.run(&mut shedder, 5000, &loaded);
    let seen = upstream.run(&mut shedder, 20_000, &loaded);
    let (critical, sheddable) = (&seen[0], &seen[2]);
    assert!(critical.success_rate() > 0.99, "{critical:?}");
    assert_eq!(critical.timed_out, 0);
    assert!(
        critical.percentile(0.99) <= Duration::from_millis(40),
        "p99 {:?}",
        critical.percentile(0.99)
    );
    assert!(
        sheddable.shed as f64 > 0.25 * sheddable.offered as f64,
        "{:?}",
        (sheddable.offered, sheddable.shed)
    );
    assert_eq!(
        sheddable.timed_out, 0,
        "shed at the door, not timed out upstream"
    );
    // The upstream kept busy: at least 90% of its 1,000 a second answered.
    assert!(
        critical.answered + sheddable.answered >= 18_000,
        "{critical:?} {sheddable:?}"
    );
    // At most twice the latency alone (the tolerance), so about twice the upstream's
    // concurrency in flight.
    let limit = shedder.limit();
    assert!((10..=60).contains(&limit), "{limit}");

    // Load drops: within two seconds nothing is shed.
    let light = [(Priority::Critical, 300.0), (Priority::Sheddable, 300.0)];
    upstream.run(&mut shedder, 2000, &light);
    let seen = upstream.run(&mut shedder, 10_000, &light);
    assert_eq!(seen[0].shed + seen[2].shed, 0, "{seen:?}");
}

#[test]
fn a_steady_timeout_never_grows_the_limit() {
    let mut shedder = Shedder::new(ShedConfig::default());
    let mut last = shedder.limit();
    for _ in 0..500 {
        let Some(ticket) = shedder.admit(Priority::Critical) else {
            continue;
        };
        // Every answer is the timeout, the same latency every time.
        shedder.finish(ticket, Duration::from_secs(1), Outcome::Overloaded);
        assert!(shedder.limit() <= last);
        last = shedder.limit();
    }
    assert_eq!(shedder.limit(), 4, "down to the minimum");
    // A dead upstream in the simulation (work longer than the timeout): the same.
    let mut upstream = Upstream::new(10.0, 5000.0, 1000);
    upstream.run(&mut shedder, 30_000, &[(Priority::Critical, 500.0)]);
    assert_eq!(shedder.limit(), 4);
}

#[test]
fn the_baseline_does_not_drift_up_under_sustained_overload() {
    let mut shedder = Shedder::new(ShedConfig::default());
    let mut upstream = Upstream::new(10.0, 10.0, 1000);
    upstream.run(&mut shedder, 2000, &[(Priority::Default, 300.0)]);
    let learnt = shedder.baseline.unwrap();
    assert!(learnt < 12.0 * MS as f64, "{learnt}");
    let overload = [(Priority::Default, 3000.0)];
    upstream.run(&mut shedder, 10_000, &overload);
    let settled = shedder.limit();
    // Two minutes more of three times the capacity.
    let seen = upstream.run(&mut shedder, 120_000, &overload);
    let baseline = shedder.baseline.unwrap();
    assert!(
        baseline < 1.5 * learnt,
        "the baseline drifted from {learnt} to {baseline}"
    );
    assert!(
        shedder.limit() <= settled.max(10) * 2,
        "{settled} then {}",
        shedder.limit()
    );
    assert!(
        seen[1].percentile(0.5) <= Duration::from_millis(40),
        "{:?}",
        seen[1].percentile(0.5)
    );
}

#[test]
fn below_capacity_nothing_is_shed_and_the_limit_never_drops_to_measure() {
    let mut shedder = Shedder::new(ShedConfig::default());
    let mut upstream = Upstream::new(10.0, 10.0, 1000);
    let steady = [(Priority::Sheddable, 400.0), (Priority::Critical, 200.0)];
    upstream.run(&mut shedder, 2000, &steady);
    let mut lowest = shedder.limit();
    for _ in 0..60 {
        let seen = upstream.run(&mut shedder, 1000, &steady);
        assert_eq!(seen[0].shed + seen[2].shed, 0, "{seen:?}");
        lowest = lowest.min(shedder.limit());
    }
    assert!(
        lowest >= 10,
        "the limit fell to {lowest} with the upstream healthy"
    );
}

#[test]
fn odd_settings_are_put_in_order() {
    let shedder = Shedder::new(ShedConfig {
        min_limit: 0,
        max_limit: 0,
        initial_limit: 50,
        tolerance: f64::NAN,
    });
    assert_eq!(shedder.limit(), 1);
    let mut shedder = shedder;
    let ticket = shedder.admit(Priority::Sheddable).unwrap();
    assert!(shedder.admit(Priority::Critical).is_none());
    shedder.finish(ticket, Duration::ZERO, Outcome::Answered);
    shedder.finish(
        Ticket {
            light: false,
            busy: false,
        },
        Duration::MAX,
        Outcome::Answered,
    );
    assert_eq!(shedder.in_flight(), 0);
}
