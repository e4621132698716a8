//! A value that requests read and a reload replaces whole: the engine, the gateway, the
//! admin API's settings, the Envoy door's descriptors, the forward-auth door. One word
//! for all of them, so that every reloadable thing is held, read and replaced alike.

use std::sync::Arc;

use arc_swap::ArcSwap;

/// A shared, replaceable value. Each request takes the value current when it starts
/// ([`Reloadable::current`]) and keeps it to its end, so a reload never changes a
/// request halfway; cloning is cheap (one `Arc`), and every clone sees a replacement
/// at once.
pub struct Reloadable<T>(Arc<ArcSwap<T>>);

impl<T> Reloadable<T> {
    /// `value`, reloadable.
    pub fn new(value: T) -> Self {
        Self::from_arc(Arc::new(value))
    }

    /// A value already shared, reloadable.
    pub fn from_arc(value: Arc<T>) -> Self {
        Self(Arc::new(ArcSwap::new(value)))
    }

    /// The value now, for one request: a reload while it runs does not affect it.
    pub fn current(&self) -> Arc<T> {
        self.0.load_full()
    }

    /// Replaces the value for every request from now on.
    pub fn replace(&self, value: Arc<T>) {
        self.0.store(value);
    }
}

impl<T> Clone for Reloadable<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Reloadable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Reloadable").field(&self.current()).finish()
    }
}
