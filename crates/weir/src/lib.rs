//! weir, the service: configuration, the engine, and the HTTP front doors.
//!
//! The binary (`weir serve`, `weir check-config`, and `weir simulate` from the `weir-simulate`
//! crate behind the default `simulate` feature) is a thin layer over this library,
//! which tests use directly ([`api::router`] serves requests without a socket).

#![deny(missing_docs)]

pub mod admin;
pub mod api;
pub mod config;
pub mod edge;
pub mod engine;
pub mod gateway;
pub mod metrics;
pub mod request;
pub mod server;
