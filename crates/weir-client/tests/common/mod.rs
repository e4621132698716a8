//! What the end-to-end tests share with the measuring example.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

pub(crate) mod fleet;
