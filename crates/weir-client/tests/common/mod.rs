//! What the end-to-end tests share with the measuring example.

pub mod fleet;
