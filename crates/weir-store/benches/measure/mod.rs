//! What the Redis benchmarks measure with: a process's CPU time, pinning to a CPU, the
//! median of rounds and the machine's load (shared by `redis_cpu`, `redis_tls` and
//! `redis_algorithms` through `#[path]`; a directory under benches/ is no bench).

#![allow(dead_code, reason = "each benchmark uses some of these")]

/// The CPU time, in nanoseconds, of every thread of `pid` so far
/// (`/proc/<pid>/task/*/schedstat`).
pub(crate) fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("/proc/<pid>/task")
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// The median of `values` (the upper one of an even count).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs `benchmark` on one thread (so the client stays on its CPU) beside the
/// redis-server of `pid`, pinned apart where the machine allows, saying so and the
/// machine's load before and after.
pub(crate) fn run_pinned(pid: u32, benchmark: impl std::future::Future<Output = ()>) {
    let pinned = pin_apart(pid);
    println!(
        "redis-server on CPU 0, this client on CPU 1: {}; load average before: {}",
        if pinned { "pinned" } else { "not pinned" },
        load_average()
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(benchmark);
    println!("load average after: {}", load_average());
}

/// Pins `redis` to CPU 0 and this process to CPU 1, on a machine of two CPUs or more;
/// says whether it could.
pub(crate) fn pin_apart(redis: u32) -> bool {
    let two = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    two && pin(redis, 0) && pin(std::process::id(), 1)
}

/// Pins `pid` (every thread: `-a`) to `cpu` with taskset; says whether it could.
fn pin(pid: u32, cpu: usize) -> bool {
    std::process::Command::new("taskset")
        .args(["-a", "-cp", &cpu.to_string(), &pid.to_string()])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The machine's load average, as `/proc/loadavg` says it.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_owned()
}
