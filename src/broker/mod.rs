//! The Broker role (`--browser-pilot-internal=broker`): one per `BROWSER_PILOT_HOME`.
//!
//! Accepts local Connections, routes every method through one table (`methods.rs`: lane, peer
//! kind, capability, handler with typed params), owns the sweeps and maps store errors to the
//! agent-visible code table in one place (`errors.rs`). It holds no SQL text (that is
//! `store/`), no CDP wire types and no framing rules.

mod artifacts;
mod cli;
mod commands;
mod connection;
mod errors;
mod events;
mod initialize;
mod leases;
mod locator;
mod methods;
mod params;
mod responses;
mod server;
mod state;
mod sweep;
mod view;
mod workspaces;

pub use commands::DEFAULT_DEADLINE_MS;
pub use server::{MAX_LIVE_CONNECTIONS, run_broker};
