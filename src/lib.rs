//! Browser Pilot: a local Broker through which AI agent hosts drive a real Chromium-family
//! browser. The library holds every module; the binaries in `src/main.rs` and `src/bin/` are
//! thin entry points over it, so tests, benches and the conformance runner reach the same code.
//!
//! Module map and the allowed edges between modules: `docs/architecture.md`.

pub mod adapter;
pub mod artifacts;
pub mod bridge;
pub mod broker;
pub mod browser;
pub mod cdp;
pub mod cli;
pub mod conformance;
pub mod events;
pub mod framing;
pub mod hex;
pub mod home;
pub mod ipc;
pub mod janitor;
pub mod keeper;
pub mod knobs;
pub mod mcp;
pub mod os;
pub mod page;
pub mod protocol;
pub mod session;
pub mod store;
pub mod tools;
pub mod version;
pub mod view;
