//! The lifecycle method names of the Host API and which of them are out-of-band.
//!
//! Shared by the bridge (pending-call accounting, overtaking) and the Broker (dispatch). Owns
//! names only; what a method does lives in the Broker.

use serde_json::{Map, Value};

/// Exactly the lifecycle surface of the contract.
pub const LIFECYCLE_METHODS: &[&str] = &[
    "initialize",
    "tools/list",
    "tools/call",
    "commands/get",
    "commands/cancel",
    "workspaces/create",
    "workspaces/get",
    "workspaces/release",
    "leases/create",
    "leases/heartbeat",
    "leases/release",
    "events/poll",
    "artifacts/get",
    "artifacts/export",
    "artifacts/import",
    "artifacts/retain",
    "artifacts/release",
    "shutdown",
];

/// Tools that must be able to overtake a pending `tools/call`: a dialog can pause the command
/// that opened it.
pub const OUT_OF_BAND_TOOLS: &[&str] = &["browser.dialogs.list", "browser.dialogs.respond"];

/// Sent by the bridge itself (never forwarded from a host) when the host closed stdin: the
/// Broker releases the Connection's Leases immediately.
pub const INPUT_CLOSED_NOTIFICATION: &str = "$/bridge/inputClosed";

/// The bridge's own request, sent (with this id) right after it connects and never forwarded
/// from a host: which tools mutate, as `{"tools": {name: mutating}}`. A Broker that does not
/// know it answers an error, and every tool then counts as mutating.
pub const TOOL_FLAGS_METHOD: &str = "$/bridge/toolFlags";

/// At most this many ordinary calls may be pending per bridge (contract), and per Connection
/// in the Broker.
pub const MAX_PENDING_ORDINARY: usize = 256;

/// At most this many out-of-band calls may be pending per bridge (contract), and per
/// Connection in the Broker.
pub const MAX_PENDING_OUT_OF_BAND: usize = 16;

/// How a request is scheduled on its Connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Dispatched in input order.
    Ordinary,
    /// May overtake pending ordinary calls; has its own, smaller pending cap.
    OutOfBand,
}

pub fn lane(method: &str, params: &Map<String, Value>) -> Lane {
    match method {
        "commands/get" | "commands/cancel" => Lane::OutOfBand,
        "tools/call" => match params.get("name").and_then(Value::as_str) {
            Some(name) if OUT_OF_BAND_TOOLS.contains(&name) => Lane::OutOfBand,
            _ => Lane::Ordinary,
        },
        _ => Lane::Ordinary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lanes() {
        let none = Map::new();
        assert_eq!(lane("commands/get", &none), Lane::OutOfBand);
        assert_eq!(lane("leases/heartbeat", &none), Lane::Ordinary);
        let dialog = json!({"name": "browser.dialogs.respond"})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(lane("tools/call", &dialog), Lane::OutOfBand);
        let observe = json!({"name": "browser.observe"})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(lane("tools/call", &observe), Lane::Ordinary);
    }
}
