//! Test support for weir: real `redis-server` processes (single and a local 3-master
//! cluster) on free loopback ports, stopped by PID on `Drop`, each reached as the
//! guide's minimal ACL user ([`acl`]), and the conformance suites (checks, and leases)
//! that every store must pass.
//!
//! Both programs are found on `PATH`, or in the directory named by `WEIR_REDIS_BIN_DIR`
//! when that is set (an absolute path; it must then hold both). A missing
//! `redis-server` or `redis-cli` fails the test loudly, saying how to install it (or to
//! run `scripts/test`, which does); nothing is skipped silently.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]
#![deny(missing_docs)]

pub mod acl;
mod conformance;
mod lease;
mod redis;
mod sentinel;
mod tls;

pub use acl::url_on;
pub use conformance::{
    Action, Step, UnevenCalendar, XorShift, calendar_sequences, conformance_sequences,
    decisions_in_micros,
};
pub use lease::{HOLDERS, Holders, LeaseOutcome, LeaseStep, lease_sequences};
pub use redis::{RedisCluster, RedisServer, ReservedPort, TlsSetup, redis_cli};
pub use sentinel::{MASTER, RedisSentinels, SentinelSetup};
pub use tls::{CertFiles, TestCerts};
