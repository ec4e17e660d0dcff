//! The CDP side of the Broker: wire types, the client actor and a typed
//! subset of commands. It is transport-agnostic: it speaks NDJSON lines (one
//! CDP message per line) over two channels, and the janitor process turns
//! those lines into WebSocket frames. It must not touch the store, the agent
//! protocol or any socket; raw CDP ids (`SessionId`, `TargetId`) never leave
//! the crate through the agent protocol.

mod client;
mod commands;
mod ids;
mod message;

pub use client::{
    CallObserver, CdpClient, CdpError, CdpEvent, EVENT_CHANNEL_CAPACITY, MAX_PENDING_CALLS,
};
pub use commands::{Evaluation, NavigateOutcome, NavigationEntry, NavigationHistory, TargetInfo};
pub use ids::{SessionId, TargetId};
