//! Browser Pilot: a local Broker through which AI agent hosts drive a real
//! Chromium-family browser. The library holds every module; the binaries in
//! `src/main.rs` and `src/bin/` are thin entry points over it, so tests,
//! benches and the conformance runner reach the same code.
//!
//! Module map and the allowed edges between modules: `docs/architecture.md`.

pub mod browser;
pub mod cdp;
pub mod conformance;
pub mod janitor;
pub mod store;
