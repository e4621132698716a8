//! Test support for weir: real `redis-server` processes (single and a local 3-master
//! cluster) on free loopback ports, stopped by PID on `Drop`, and the conformance suite
//! that every store must pass.
//!
//! A missing `redis-server` or `redis-cli` fails the test loudly, saying how to install
//! it; nothing is skipped silently.

#![deny(missing_docs)]

mod conformance;
mod redis;

pub use conformance::{Step, conformance_sequences, decisions_in_micros};
pub use redis::{RedisCluster, RedisServer, redis_cli};
