//! The CDP side of the Broker: wire types, the client actor, and the typed commands and events.
//! It is transport-agnostic: it speaks NDJSON lines (one CDP message per line) over two
//! channels, and the janitor process turns those lines into WebSocket frames. Each command is a
//! type implementing `Command` in its domain's file (`target`, `page`, `input`, `runtime`,
//! `dom`, `io`, `browser`, `storage`, `network`, `fetch`), sent with `CdpClient::execute`; each event the Broker reads is a
//! variant of `Event`, decoded in `event.rs`; the janitor pipe's own lines are `pipe`'s. It must
//! not touch the store, the agent protocol or any socket; raw CDP ids (`SessionId`, `TargetId`)
//! never leave the crate through the agent protocol.

pub mod browser;
mod client;
mod command;
pub mod dom;
pub mod dom_storage;
pub mod emulation;
mod event;
pub mod fetch;
mod ids;
pub mod input;
pub mod inspector;
pub mod io;
mod message;
pub mod network;
pub mod page;
pub mod pipe;
pub mod runtime;
pub mod storage;
pub mod target;

pub use client::{
    CallObserver, CdpClient, CdpError, CdpEvent, EVENT_CHANNEL_CAPACITY, MAX_PENDING_CALLS,
};
pub use command::{Command, Empty, MUTATING_METHODS, request_line};
pub use event::{Event, EventError, EventParams};
pub use ids::{BrowserContextId, SessionId, TargetId};
pub use page::{NavigateOutcome, NavigationEntry, NavigationHistory};
pub use runtime::Evaluation;
pub use target::TargetInfo;
