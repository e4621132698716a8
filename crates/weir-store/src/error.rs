//! The one error type of the stores.

use std::time::Duration;

use crate::RedisPolicyError;

/// Why a store could not decide a check. Never a denial: a store that cannot decide says
/// so, and the caller applies its failure policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The memory store holds its configured maximum of keys, none of them expired, and
    /// the check needed a new one. Existing keys keep working; new keys are refused until
    /// entries expire, so that a flood of new keys can never evict (and so reset) the
    /// state of a key in use.
    #[error(
        "the memory store is full ({max_keys} keys, none expired); new keys are refused until some expire"
    )]
    Full {
        /// The configured bound.
        max_keys: usize,
    },
    /// The store did not answer within the configured timeout.
    #[error("the store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store cannot be reached, or the connection broke.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// The Redis Cluster primary that holds this hash slot did not answer the health
    /// loop's last probe, while the rest of the cluster did: refused at once, without
    /// waiting for a timeout, and not counted against the rest by the breaker.
    #[error("the store is unavailable: the Redis Cluster primary of slot {0} is unreachable")]
    SlotLost(u16),
    /// Redis refused weir: a server certificate that does not verify, a client
    /// certificate, password or user it does not accept, a command the ACL user may
    /// not run. Waiting does not mend it (unlike [`StoreError::Unavailable`]): at start
    /// the service refuses to run on it; later (a password rotated under it) each rule's
    /// failure policy applies.
    #[error("Redis refused weir: {0}")]
    Refused(String),
    /// The store answered something weir did not expect (a bug, or a misconfigured
    /// server).
    #[error("unexpected answer from the store: {0}")]
    Protocol(String),
    /// The policy cannot be decided exactly by this store.
    #[error(transparent)]
    Policy(#[from] RedisPolicyError),
    /// A lease was asked for under a policy whose algorithm cannot be leased.
    #[error(transparent)]
    Lease(#[from] weir_core::LeaseError),
    /// A regional share operation on a rule that is not global, or with bad regions.
    #[error(transparent)]
    Share(#[from] weir_core::ShareError),
    /// The store cannot charge past a limit (a wrapper that does not pass charges on).
    #[error("this store cannot charge past a limit")]
    NoCharges,
    /// The store keeps no slots of requests in flight (`algorithm: concurrency`).
    #[error("this store cannot count requests in flight")]
    NoSlots,
}

impl StoreError {
    /// Whether the error says the store is unreachable or too slow (as opposed to a
    /// problem with the request or the configuration).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            StoreError::Timeout(_)
                | StoreError::Unavailable(_)
                | StoreError::Refused(_)
                | StoreError::SlotLost(_)
                | StoreError::Full { .. }
        )
    }
}
