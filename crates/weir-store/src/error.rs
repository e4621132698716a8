//! The one error type of the stores.

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
}
