//! The CDP side of the Broker: wire types, the client actor, and the typed commands and events.
//! It is transport-agnostic: it speaks NDJSON lines (one CDP message per line) over two
//! channels, and the janitor process turns those lines into WebSocket frames. Each command is a
//! type implementing `Command` (in one file per domain) sent with `CdpClient::execute`. It must
//! not touch the store, the agent protocol or any socket; raw CDP ids (`SessionId`, `TargetId`)
//! never leave the crate through the agent protocol.

mod client;
mod command;
mod commands;
mod ids;
pub mod input;
mod message;

pub use client::{
    CallObserver, CdpClient, CdpError, CdpEvent, EVENT_CHANNEL_CAPACITY, MAX_PENDING_CALLS,
};
pub use command::{Command, Empty};
pub use commands::{Evaluation, NavigateOutcome, NavigationEntry, NavigationHistory, TargetInfo};
pub use ids::{SessionId, TargetId};
