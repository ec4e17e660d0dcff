//! Emitting events: journal first, then offer; and the one place an `EventRow` becomes JSON.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::hub::Hub;
use crate::protocol::ids::{IdKind, new_id};
use crate::store::{EventRow, NewEvent, Store, StoreError};
use crate::version::now_ms;

/// An event about to be journaled.
pub struct Emit {
    pub workspace_id: String,
    pub event_type: &'static str,
    pub lease_id: Option<String>,
    pub target_id: Option<String>,
    pub sensitivity: &'static str,
    pub payload: Value,
    /// The generation the event belongs to; `None` means the current one.
    pub generation: Option<u64>,
}

impl Emit {
    pub fn new(workspace_id: &str, event_type: &'static str, payload: Value) -> Emit {
        Emit {
            workspace_id: workspace_id.to_owned(),
            event_type,
            lease_id: None,
            target_id: None,
            sensitivity: "none",
            payload,
            generation: None,
        }
    }
}

/// Cheap to clone; shared by the Broker, the sweeps and the tools.
#[derive(Clone)]
pub struct EventSink {
    store: Store,
    hub: Arc<Hub>,
    generation: Arc<AtomicU64>,
}

impl EventSink {
    pub fn new(store: Store, hub: Arc<Hub>, generation: Arc<AtomicU64>) -> EventSink {
        EventSink {
            store,
            hub,
            generation,
        }
    }

    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The current browser connection generation (0 before the first connect).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Journals the event through the store's async API, then offers it to the Workspace's Connections.
    pub async fn emit(&self, emit: Emit) -> Result<EventRow, StoreError> {
        let event = self.new_event(emit);
        let row = self
            .store
            .call(move |store| store.append_event(&event))
            .await?;
        self.offer(&row);
        Ok(row)
    }

    /// Journals a burst of events in one store transaction (each event on its own: one whose
    /// Workspace is gone fails alone), then offers every journaled one. One result per event,
    /// in order; the outer error means nothing was journaled.
    pub async fn emit_all(
        &self,
        emits: Vec<Emit>,
    ) -> Result<Vec<Result<EventRow, StoreError>>, StoreError> {
        let events: Vec<NewEvent> = emits.into_iter().map(|emit| self.new_event(emit)).collect();
        let rows = self
            .store
            .call(move |store| store.append_each(&events))
            .await?;
        for row in rows.iter().flatten() {
            self.offer(row);
        }
        Ok(rows)
    }

    fn new_event(&self, emit: Emit) -> NewEvent {
        NewEvent {
            id: new_id(IdKind::Event),
            workspace_id: emit.workspace_id,
            timestamp: now_ms(),
            generation: emit.generation.unwrap_or_else(|| self.generation()),
            lease_id: emit.lease_id,
            target_id: emit.target_id,
            event_type: emit.event_type.to_owned(),
            payload_version: 1,
            sensitivity: emit.sensitivity.to_owned(),
            payload_json: emit.payload.to_string(),
        }
    }

    /// Offers an already-journaled event as a best-effort notification.
    pub fn offer(&self, row: &EventRow) -> usize {
        let line = json!({"jsonrpc": "2.0", "method": "events/event", "params": {"event": event_json(row)}}).to_string();
        self.hub.offer(&row.workspace_id, &line)
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
