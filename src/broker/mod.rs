//! The Broker role (`--browser-pilot-internal=broker`): one per `BROWSER_PILOT_HOME`.
//!
//! Accepts local Connections, runs the lifecycle methods, owns the sweeps and maps every module
//! error to the agent-visible code table in one place (`errors.rs`). It holds no SQL text (that
//! is `store/`), no CDP wire types and no framing rules.

mod artifacts;
mod commands;
mod connection;
mod errors;
mod lifecycle;
mod locator;
mod responses;
mod server;
mod state;
mod sweep;

pub use server::{MAX_LIVE_CONNECTIONS, run_broker};
