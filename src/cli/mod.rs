//! Human-facing commands on the same Broker: `bp status`, `bp disconnect`, and
//! `browser-pilot debug sql`. They talk to the Broker over the owner-only socket as a CLI peer;
//! they never touch the store, CDP or Broker internals directly.

mod client;
mod commands;
mod table;

pub use commands::{debug_sql, disconnect, status};
