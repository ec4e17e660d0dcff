//! The private handshake on the local socket, before JSON-RPC lines flow.
//!
//! The first line a peer sends is a [`Hello`]; the Broker answers with a [`Welcome`] (or a
//! [`Refusal`]). These types cross a process boundary and are versioned by `IPC_VERSION`; they
//! are not part of the Host API and never reach a host.

use serde::{Deserialize, Serialize};

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
