//! The engine as every door holds it: the one configured now, replaced whole by a
//! reload while requests in flight keep the one they started with.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::Engine;

/// A shared, replaceable [`Engine`]: what a front door is given. Cloning is cheap (one
/// `Arc`); every clone sees a replacement at once.
#[derive(Debug, Clone)]
pub struct EngineHandle(Arc<ArcSwap<Engine>>);

impl EngineHandle {
    /// A handle on `engine`.
    pub fn new(engine: Engine) -> Self {
        Self::from_arc(Arc::new(engine))
    }

    /// A handle on an engine already shared.
    pub fn from_arc(engine: Arc<Engine>) -> Self {
        Self(Arc::new(ArcSwap::new(engine)))
    }

    /// The engine configured now, for one request: a reload while it runs does not
    /// affect it.
    pub fn current(&self) -> Arc<Engine> {
        self.0.load_full()
    }

    /// Replaces the engine for every request from now on.
    pub fn replace(&self, engine: Arc<Engine>) {
        self.0.store(engine);
    }
}
