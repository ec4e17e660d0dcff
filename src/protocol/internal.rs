//! The private handshake on the local socket, before JSON-RPC lines flow.
//!
//! The first line a peer sends is a [`Hello`]; the Broker answers with a [`Welcome`] (or a
//! [`Refusal`]). These types cross a process boundary and are versioned by `IPC_VERSION`; they
//! are not part of the Host API and never reach a host.

use serde::{Deserialize, Serialize};

/// The member a bridge adds to a forwarded Lease request (`leases/heartbeat`, `leases/release`):
/// epoch milliseconds at which it read the line from its host. The Broker judges Lease expiry
/// by it (bounded by its own clock), so a heartbeat sent on time keeps its Lease even when the
/// Broker itself was stalled. It travels at the top level of the envelope, beside `params`; the
/// Broker moves it into the params it hands to the Lease handlers after dropping any member of
/// that name a peer put into `params` itself.
pub const RECEIVED_AT_MEMBER: &str = "$receivedAtMs";

/// Methods whose forwarded lines carry [`RECEIVED_AT_MEMBER`].
pub fn stamped(method: &str) -> bool {
    matches!(method, "leases/heartbeat" | "leases/release")
}

/// What kind of peer is connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerRole {
    /// `browser-pilot bridge --stdio`: an embedded host Connection.
    Bridge,
    /// `bp` and `browser-pilot debug`: a human at a terminal.
    Cli,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    pub ipc: u32,
    pub role: PeerRole,
    pub executable_version: String,
    pub installation_id: String,
    pub pid: u32,
    /// `bridge --browser <id|product|channel>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_preference: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Welcome {
    pub ipc: u32,
    pub broker_id: String,
    pub pid: u32,
    pub service_version: String,
    pub installation_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub ipc: u32,
    /// A JSON-RPC error object (`{code, message, data}`).
    pub error: serde_json::Value,
}

/// The Broker's answer to a [`Hello`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HelloReply {
    Welcome(Welcome),
    Refused(Refusal),
}
