//! Shadow rules: counted on the store the request was decided on, never enforced; the
//! answer reports those that would have denied.

use weir_core::Decision;
use weir_store::Check;

use super::Engine;
use super::applied::Applied;
use super::settlement::StoreUsed;
use crate::metrics::{Outcome, StoreOp};
use crate::request::Facts;

impl Engine {
    /// Counts the shadow rules on the store the request was decided on; returns the
    /// names of those that would have denied (and logs them, rate-limited), and each
    /// one's decision (none when the store could not check them).
    pub(super) async fn shadow<'e>(
        &'e self,
        used: StoreUsed,
        shadow: &[Applied<'e>],
        plan: Option<&str>,
        facts: &Facts<'_>,
    ) -> (Vec<&'e str>, Vec<Decision>) {
        if shadow.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let checks: Vec<Check<'_>> = shadow.iter().map(Applied::check).collect();
        let timer = self
            .metrics
            .store_timer(StoreOp::Shadow, used == StoreUsed::Fallback);
        let decided = self.store_used(used).check_all(&checks).await;
        timer.finish(decided.as_ref().err());
        match decided {
            Ok(decisions) => {
                let now = self.clock.now();
                let mut denied = Vec::new();
                for (a, d) in shadow.iter().zip(&decisions) {
                    let outcome = if d.allowed {
                        Outcome::ShadowAllowed
                    } else {
                        self.log_applied(a, plan, facts, "a shadow rule would have denied");
                        denied.push(a.rule.name.as_str());
                        Outcome::ShadowDenied
                    };
                    let series = self.series[a.index];
                    self.metrics
                        .decided(series, plan, outcome, &a.identity, Some(d), now);
                }
                (denied, decisions)
            }
            Err(error) => {
                tracing::warn!(%error, "shadow rules could not be checked");
                (Vec::new(), Vec::new())
            }
        }
    }
}
