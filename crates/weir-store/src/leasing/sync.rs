//! The atomics and lock the local lease state is built on: the standard library's, or
//! loom's when the `loom` feature is on, so that `cargo test -p weir-store --features
//! loom --lib leasing::slot::interleavings` explores every interleaving of the spend path.

#[cfg(feature = "loom")]
pub(super) use loom::sync::Mutex;
#[cfg(feature = "loom")]
pub(super) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(not(feature = "loom"))]
pub(super) use std::sync::Mutex;
#[cfg(not(feature = "loom"))]
pub(super) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
