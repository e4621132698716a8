//! How many connections a listener holds at once.
//!
//! Every connection weir holds costs a file descriptor, and the process has a fixed
//! number of them: a client that opens connections without end would leave none for
//! the store's and the upstream's connections, and every request would then fail. A
//! listener serves a connection it accepted once it has a slot, and gives the slot
//! back when the connection ends. With every slot taken, each thread's accept loop
//! holds the one connection it accepted and accepts no more: new connections wait in
//! the kernel's listen queue (as nginx's do past `worker_connections`), while the
//! connections held are served as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The connection slots of one listener (cheap to clone: clones share the slots, as
/// the threads serving one address do).
#[derive(Clone, Debug)]
pub struct ConnectionSlots {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    free: Arc<Semaphore>,
    max: usize,
    /// What the listener is, for the warning.
    name: &'static str,
    /// Whether the last wait found every slot taken (the warning is written once for
    /// each time the listener fills up, not once for each connection after).
    full: AtomicBool,
}

/// A connection's slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    _held: OwnedSemaphorePermit,
}

impl ConnectionSlots {
    /// At most `max` connections at once (at least 1) on the listener named `name`.
    pub fn new(name: &'static str, max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            inner: Arc::new(Inner {
                free: Arc::new(Semaphore::new(max)),
                max,
                name,
                full: AtomicBool::new(false),
            }),
        }
    }

    /// The most connections held at once.
    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// What the listener is (`main`, `admin`, `grpc`).
    pub fn name(&self) -> &'static str {
        self.inner.name
    }

    /// How many connections hold a slot now.
    pub fn open(&self) -> usize {
        self.inner.max - self.inner.free.available_permits()
    }

    /// A free slot, waiting for one if every slot is taken.
    pub(crate) async fn take(&self) -> Slot {
        let inner = &self.inner;
        if let Ok(slot) = Arc::clone(&inner.free).try_acquire_owned() {
            inner.full.store(false, Ordering::Relaxed);
            return Slot { _held: slot };
        }
        if !inner.full.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                listener = inner.name,
                max = inner.max,
                "every connection slot is taken: new connections wait until one closes \
                 (--max-connections)"
            );
        }
        match Arc::clone(&inner.free).acquire_owned().await {
            Ok(slot) => Slot { _held: slot },
            // The semaphore is never closed.
            Err(_) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_slot_is_free_again_when_its_connection_ends() {
        let slots = ConnectionSlots::new("test", 2);
        let (a, _b) = (slots.take().await, slots.take().await);
        let third = tokio::spawn({
            let slots = slots.clone();
            async move { slots.take().await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            !third.is_finished(),
            "a third connection while two are held"
        );
        drop(a);
        tokio::time::timeout(Duration::from_secs(1), third)
            .await
            .expect("the slot given back is taken")
            .unwrap();
    }

    #[test]
    fn at_least_one_slot() {
        assert_eq!(ConnectionSlots::new("test", 0).max(), 1);
    }
}
