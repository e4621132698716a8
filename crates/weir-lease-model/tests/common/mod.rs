//! What the checker runs share: exploring a model exhaustively, saying how much.

use std::hash::Hash;
use std::time::Instant;

use stateright::{Checker, Model, Representative};

/// Explores every state of `model` within its bounds, saying how many. Depth first:
/// stateright 0.31 applies symmetry reduction (the participants are interchangeable)
/// in its depth-first checker only.
pub(crate) fn explore<M>(name: &str, model: M) -> impl Checker<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Hash + Send + Sync + Clone + PartialEq + Representative + 'static,
    M::Action: Clone + PartialEq,
{
    let start = Instant::now();
    let checker = model.checker().symmetry().spawn_dfs().join();
    eprintln!(
        "{name}: {} states ({} unique), depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        start.elapsed()
    );
    assert!(checker.is_done(), "{name}: the checker stopped early");
    checker
}
