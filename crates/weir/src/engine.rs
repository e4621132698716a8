//! The engine: rules by name over one store. Every front door asks it.

use std::collections::HashMap;
use std::sync::Arc;

use weir_core::Decision;
use weir_store::{Key, Store, StoreError};

use crate::config::{Config, RuleConfig};

/// Decides checks against the configured rules, on one store.
///
/// Cheap to share (`Arc<Engine>`); holds no per-request state.
pub struct Engine {
    rules: HashMap<String, RuleConfig>,
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine for the configuration's rules, keeping state in `store`.
    pub fn new(config: &Config, store: Arc<dyn Store>) -> Self {
        let rules = config
            .rules
            .iter()
            .map(|rule| (rule.name.clone(), rule.clone()))
            .collect();
        Self { rules, store }
    }

    /// The store the engine decides on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The rule with this name.
    pub fn rule(&self, name: &str) -> Option<&RuleConfig> {
        self.rules.get(name)
    }

    /// Checks `cost` units for `identity` under `rule`.
    ///
    /// State is kept per (rule, identity); rule names cannot contain `:`, so no
    /// identity can reach another rule's state.
    pub async fn check(
        &self,
        rule: &RuleConfig,
        identity: &str,
        cost: u64,
    ) -> Result<Decision, StoreError> {
        let key = Key {
            rule: &rule.name,
            identity,
        };
        self.store.check(key, &rule.policy, cost).await
    }
}
