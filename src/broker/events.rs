//! Emitting events: commit to the Workspace journal first, then offer the notification.
//! Also the one place an `EventRow` becomes its wire JSON.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::state::Broker;
use crate::protocol::ids::{IdKind, new_id};
use crate::store::{EventRow, NewEvent, StoreError};
use crate::version::now_ms;

/// An event about to be journaled.
pub struct Emit {
    pub workspace_id: String,
    pub event_type: &'static str,
    pub lease_id: Option<String>,
    pub target_id: Option<String>,
    pub sensitivity: &'static str,
    pub payload: Value,
}

impl Broker {
    /// Journals the event, then offers it to the Workspace's Connections.
    pub async fn emit(&self, emit: Emit) -> Result<EventRow, StoreError> {
        let event = NewEvent {
            id: new_id(IdKind::Event),
            workspace_id: emit.workspace_id,
            timestamp: now_ms(),
            generation: self.generation.load(Ordering::SeqCst),
            lease_id: emit.lease_id,
            target_id: emit.target_id,
            event_type: emit.event_type.to_owned(),
            payload_version: 1,
            sensitivity: emit.sensitivity.to_owned(),
            payload_json: emit.payload.to_string(),
        };
        let row = self.db(move |store| store.append_event(&event)).await?;
        let line = json!({"jsonrpc": "2.0", "method": "events/event", "params": {"event": event_json(&row)}}).to_string();
        self.hub.offer(&row.workspace_id, &line);
        Ok(row)
    }
}

/// The wire shape of one journaled event.
pub fn event_json(row: &EventRow) -> Value {
    let payload: Value = serde_json::from_str(&row.payload_json).unwrap_or(Value::Null);
    let mut event = json!({
        "id": row.id,
        "sequence": row.sequence,
        "timestamp": row.timestamp,
        "workspaceId": row.workspace_id,
        "browserConnectionGeneration": row.generation,
        "type": row.event_type,
        "payloadVersion": row.payload_version,
        "sensitivity": row.sensitivity,
        "payload": payload,
    });
    if let Some(lease_id) = &row.lease_id {
        event["leaseId"] = json!(lease_id);
    }
    if let Some(target_id) = &row.target_id {
        event["targetId"] = json!(target_id);
    }
    event
}
