//! Where weir keeps its counters: the [`Store`] trait and its implementations.
//!
//! A store applies an algorithm of `weir-core` to the state kept under a key,
//! atomically, with the time taken from its [`Clock`](weir_core::Clock). The
//! [`MemoryStore`] keeps state in this process: the embedded default, exact for one
//! instance. Stores shared by many instances (Redis) implement the same trait.

#![deny(missing_docs)]

mod clock;
mod error;
mod memory;
mod store;

pub use clock::SystemClock;
pub use error::StoreError;
pub use memory::{MemoryStore, MemoryStoreConfig};
pub use store::{Check, Key, Store, StoreFuture};
