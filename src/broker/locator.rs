//! The two owner-only files the contract allows: `broker-locator.json` (how to recognize the
//! running Broker) and `broker-versions.json` (current and previous installation only).
//!
//! Neither file ever holds browser selection, tabs, target ids, Workspaces, Leases, refs,
//! Artifacts, credentials, network rules or command results.

use serde_json::{Value, json};

use crate::home::{Home, write_private_file};
use crate::protocol::negotiate::SUPPORTED_PROTOCOLS;
use crate::version::{EXECUTABLE_VERSION, IPC_VERSION};

pub fn write_locator(
    home: &Home,
    broker_id: &str,
    installation_id: &str,
    started_at: i64,
) -> std::io::Result<()> {
    let min = SUPPORTED_PROTOCOLS.first().expect("at least one protocol");
    let max = SUPPORTED_PROTOCOLS.last().expect("at least one protocol");
    let locator = json!({
        "brokerId": broker_id,
        "pid": std::process::id(),
        "ipc": IPC_VERSION,
        "executable": {"version": EXECUTABLE_VERSION, "installationId": installation_id},
        "protocol": {"min": min.to_json(), "max": max.to_json()},
        "startedAt": started_at,
    });
    write_private_file(&home.locator_path(), locator.to_string().as_bytes())
}

/// Removes the locator only if it still names this Broker.
pub fn remove_locator(home: &Home, broker_id: &str) {
    let path = home.locator_path();
    let ours = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .is_some_and(|v| v["brokerId"] == broker_id);
    if ours {
        let _ = std::fs::remove_file(path);
    }
}

/// Records this installation as current, keeping at most the one before it as previous.
pub fn record_version(home: &Home, installation_id: &str, now: i64) -> std::io::Result<()> {
    let path = home.versions_path();
    let existing: Vec<Value> = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|v| v["installations"].as_array().cloned())
        .unwrap_or_default();
    let current = json!({"version": EXECUTABLE_VERSION, "installationId": installation_id, "firstSeenAt": now});
    let installations = match existing.first() {
        Some(first) if first["installationId"] == installation_id => {
            let mut kept = vec![first.clone()];
            kept.extend(existing.get(1).cloned());
            kept
        }
        Some(first) => vec![current, first.clone()],
        None => vec![current],
    };
    write_private_file(
        &path,
        json!({"installations": installations})
            .to_string()
            .as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_keep_current_and_previous_only() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::at(tmp.path().to_owned());
        for (id, now) in [("a", 1), ("a", 2), ("b", 3), ("c", 4), ("c", 5)] {
            record_version(&home, id, now).unwrap();
        }
        let v: Value =
            serde_json::from_slice(&std::fs::read(home.versions_path()).unwrap()).unwrap();
        let ids: Vec<&str> = v["installations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["installationId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, vec!["c", "b"]);
        assert_eq!(v["installations"][0]["firstSeenAt"], 4);
    }
}
