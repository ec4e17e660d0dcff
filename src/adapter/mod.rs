//! The host-side adapter library: the contract's Reference Consumer Adapter pattern, once, for
//! every front end that is a client (`browser-pilot mcp`, the reference adapters in
//! `examples/adapters/`, and `bp`).
//!
//! It speaks only the public stdio protocol to a child `browser-pilot bridge --stdio` launched
//! from an absolute path without a shell. It may use `framing` and the wire types of
//! `protocol`, and must never import the Broker's internals (`broker`, `store`, `session`,
//! `tools`): it sees the Broker exactly as an outside host does. It never writes a tab, frame,
//! Observation, ref, credential, rule, Artifact or event cursor to disk; the only files it
//! creates are exports the host asked for, in the host's own directory.
//!
//! Files: `launch` (process), `rpc` (pending calls over the pipes), `session` (initialize,
//! tools, Command identities, shutdown), `workspace` (Workspace and tool calls, cleanup),
//! `lease` (renewal task), `events` (cursor recovery), `artifacts` (images and exports), `exports`
//! (the rules for saving a page's downloads), `lean` (the lean arguments and the text a model
//! reads from a result).

mod artifacts;
mod events;
pub mod exports;
mod launch;
pub mod lean;
mod lease;
mod rpc;
mod session;
mod workspace;

pub use artifacts::{ExportedFile, ImageData, file_name_parts};
pub use events::{EventBatch, advance};
pub use launch::LaunchSpec;
pub use lease::{Lease, LeaseOptions, LeaseStatus, renew_every};
pub use rpc::{CallError, NOTIFICATION_QUEUE, Reply, RpcClient};
pub use session::{
    BridgeSession, ClientIdentity, CommandIdScope, Initialized, Notifications, PendingTool,
    SessionOptions, ToolCall, ToolInfo, ToolOutcome, ToolScope, random_hex,
};
pub use workspace::{Workspace, WorkspaceOptions};
