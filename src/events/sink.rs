//! Emitting events: journal first, then offer; and the one place an `EventRow` becomes JSON.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::Value;
use serde_json::value::RawValue;

use super::hub::Hub;
use crate::protocol::ids::{IdKind, new_id};
use crate::store::{EventRow, EventVisibility, NewEvent, Store, StoreError};
use crate::version::now_ms;

/// An event about to be journaled.
pub struct Emit {
    pub workspace_id: String,
    pub event_type: &'static str,
    pub lease_id: Option<String>,
    pub target_id: Option<String>,
    pub sensitivity: &'static str,
    pub payload: Value,
    /// The generation the event belongs to; `None` means its Workspace's current one.
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

/// Browser connection generations. The Broker may hold several connections at once, each with
/// its own generation, minted from one counter so that every new connection's is newer than
/// any before it; a Workspace's events and Commands carry the generation of the connection it
/// is on (kept after that connection is lost, 0 before it was ever on one). The browser
/// session (`session::service`) mints them and moves Workspaces between them.
#[derive(Default)]
pub struct Generations {
    minted: AtomicU64,
    workspaces: RwLock<HashMap<String, u64>>,
}

impl Generations {
    /// A new connection's generation.
    pub fn mint(&self) -> u64 {
        self.minted.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The newest generation minted (0 before the first connection).
    pub fn latest(&self) -> u64 {
        self.minted.load(Ordering::SeqCst)
    }

    /// The generation of the connection the Workspace is on.
    pub fn of(&self, workspace_id: &str) -> u64 {
        (self.workspaces.read().expect("generations lock"))
            .get(workspace_id)
            .copied()
            .unwrap_or(0)
    }

    /// The Workspace is on a connection of `generation` now.
    pub fn set(&self, workspace_id: &str, generation: u64) {
        (self.workspaces.write().expect("generations lock"))
            .insert(workspace_id.to_owned(), generation);
    }

    /// The Workspace was released.
    pub fn forget(&self, workspace_id: &str) {
        (self.workspaces.write().expect("generations lock")).remove(workspace_id);
    }
}

/// Cheap to clone; shared by the Broker, the sweeps and the tools.
#[derive(Clone)]
pub struct EventSink {
    store: Store,
    hub: Arc<Hub>,
    generations: Arc<Generations>,
}

impl EventSink {
    pub fn new(store: Store, hub: Arc<Hub>, generations: Arc<Generations>) -> EventSink {
        EventSink {
            store,
            hub,
            generations,
        }
    }

    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The newest browser connection generation (0 before the first connect).
    pub fn generation(&self) -> u64 {
        self.generations.latest()
    }

    /// The generation of the connection a Workspace is on; without a Workspace, the newest.
    pub fn generation_of(&self, workspace_id: Option<&str>) -> u64 {
        match workspace_id {
            Some(workspace_id) => self.generations.of(workspace_id),
            None => self.generations.latest(),
        }
    }

    /// Journals the event through the store's async API, then offers it to the Workspace's Connections.
    pub async fn emit(&self, emit: Emit) -> Result<EventRow, StoreError> {
        let (event, payload) = new_event(&self.generations, emit);
        let row = self
            .store
            .call(move |store| store.append_event(&event))
            .await?;
        self.offer_payload(&row, &payload);
        Ok(row)
    }

    /// Runs `unit` on the store's writer and journals the event it asks for in the same unit of
    /// work (one writer round trip instead of two, the event committed with what `unit` wrote),
    /// then offers the event. A failed `unit` journals nothing; the journal's own failure (the
    /// Workspace gone) leaves `unit`'s writes and comes back beside its value.
    pub async fn call_then_emit<T, F>(
        &self,
        unit: F,
    ) -> Result<(T, Option<Result<EventRow, StoreError>>), StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<(T, Option<Emit>), StoreError> + Send + 'static,
    {
        let generations = self.generations.clone();
        let (value, journaled) = self
            .store
            .call(move |store| {
                let (value, emit) = unit(store)?;
                let journaled = emit.map(|emit| {
                    let (event, payload) = new_event(&generations, emit);
                    (store.append_event(&event), payload)
                });
                Ok((value, journaled))
            })
            .await?;
        let row = journaled.map(|(row, payload)| {
            if let Ok(row) = &row {
                self.offer_payload(row, &payload);
            }
            row
        });
        Ok((value, row))
    }

    /// Journals a burst of events in one store transaction (each event on its own: one whose
    /// Workspace is gone fails alone), then offers every journaled one. One result per event,
    /// in order; the outer error means nothing was journaled.
    pub async fn emit_all(
        &self,
        emits: Vec<Emit>,
    ) -> Result<Vec<Result<EventRow, StoreError>>, StoreError> {
        let (events, payloads): (Vec<NewEvent>, Vec<Value>) = emits
            .into_iter()
            .map(|emit| new_event(&self.generations, emit))
            .unzip();
        let rows = self
            .store
            .call(move |store| store.append_each(&events))
            .await?;
        for (row, payload) in rows.iter().zip(&payloads) {
            if let Ok(row) = row {
                self.offer_payload(row, payload);
            }
        }
        Ok(rows)
    }

    /// Offers an already-journaled event as a best-effort notification.
    pub fn offer(&self, row: &EventRow) -> usize {
        self.offer_payload(row, stored_payload(row))
    }

    /// `offer` with the payload still at hand (no re-parse); the line is built only when a
    /// Connection listens.
    fn offer_payload<P: serde::Serialize + ?Sized>(&self, row: &EventRow, payload: &P) -> usize {
        self.hub.offer_with(&row.workspace_id, &row.event_type, || {
            notification_line(row, payload)
        })
    }
}

/// The row to journal for `emit` (when it names no generation, its Workspace's), and the
/// payload kept as a value for the notification.
fn new_event(generations: &Generations, emit: Emit) -> (NewEvent, Value) {
    let current = emit
        .generation
        .unwrap_or_else(|| generations.of(&emit.workspace_id));
    let event = NewEvent {
        id: new_id(IdKind::Event),
        workspace_id: emit.workspace_id,
        timestamp: now_ms(),
        generation: current,
        lease_id: emit.lease_id,
        target_id: emit.target_id,
        event_type: emit.event_type.to_owned(),
        payload_version: 1,
        sensitivity: emit.sensitivity.to_owned(),
        payload_json: emit.payload.to_string(),
        visibility: match super::hub::is_network_event(emit.event_type) {
            true => EventVisibility::NetworkRead,
            false => EventVisibility::EventRead,
        },
    };
    (event, emit.payload)
}

/// One journaled event in its wire shape, serialized straight from its row: the members in the
/// order serde_json's sorted maps give them, so the bytes are those of the same event built as
/// a `Value` (the tests hold the two together). `P` is the payload: the value an emitter still
/// holds, or the stored text as raw JSON.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct WireEvent<'a, P> {
    browser_connection_generation: u64,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_id: Option<&'a str>,
    payload: P,
    payload_version: u32,
    sensitivity: &'a str,
    sequence: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_id: Option<&'a str>,
    timestamp: i64,
    #[serde(rename = "type")]
    event_type: &'a str,
    workspace_id: &'a str,
}

impl<'a, P: serde::Serialize> WireEvent<'a, P> {
    fn new(row: &'a EventRow, payload: P) -> WireEvent<'a, P> {
        WireEvent {
            browser_connection_generation: row.generation,
            id: &row.id,
            lease_id: row.lease_id.as_deref(),
            payload,
            payload_version: row.payload_version,
            sensitivity: &row.sensitivity,
            sequence: row.sequence,
            target_id: row.target_id.as_deref(),
            timestamp: row.timestamp,
            event_type: &row.event_type,
            workspace_id: &row.workspace_id,
        }
    }
}

/// A row's stored payload as raw JSON text, not parsed into a value. Every payload is
/// journaled as serialized JSON (`new_event`); text that is not JSON reads as `null`.
fn stored_payload(row: &EventRow) -> &RawValue {
    serde_json::from_str(&row.payload_json).unwrap_or(RawValue::NULL)
}

/// The `events/event` notification line for a journaled event.
fn notification_line<P: serde::Serialize + ?Sized>(row: &EventRow, payload: &P) -> String {
    #[derive(serde::Serialize)]
    struct Line<'a, P> {
        jsonrpc: &'static str,
        method: &'static str,
        params: Params<'a, P>,
    }
    #[derive(serde::Serialize)]
    struct Params<'a, P> {
        event: WireEvent<'a, P>,
    }
    let line = Line {
        jsonrpc: "2.0",
        method: "events/event",
        params: Params {
            event: WireEvent::new(row, payload),
        },
    };
    serde_json::to_string(&line).unwrap_or_default()
}

/// The result of an `events/poll` page as JSON text: the rows that pass `delivered` in their
/// wire shape, the next cursor and whether more follow, written from the rows with each payload
/// copied as stored (no value built per event).
pub fn poll_page_json(
    rows: &[EventRow],
    delivered: impl Fn(&EventRow) -> bool,
    next_cursor: &str,
    has_more: bool,
) -> Result<String, serde_json::Error> {
    struct Events<'a, F>(&'a [EventRow], F);
    impl<F: Fn(&EventRow) -> bool> serde::Serialize for Events<'_, F> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_seq(
                self.0
                    .iter()
                    .filter(|row| (self.1)(row))
                    .map(|row| WireEvent::new(row, stored_payload(row))),
            )
        }
    }
    #[derive(serde::Serialize)]
    #[serde(
        rename_all = "camelCase",
        bound(serialize = "F: Fn(&EventRow) -> bool")
    )]
    struct Page<'a, F> {
        events: Events<'a, F>,
        has_more: bool,
        next_cursor: &'a str,
    }
    let page = Page {
        events: Events(rows, delivered),
        has_more,
        next_cursor,
    };
    serde_json::to_string(&page)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The wire shape of one journaled event, built as a value: what the contract describes,
    /// and what the rows serialized straight (`WireEvent`) must equal byte for byte.
    fn event_json(row: &EventRow) -> Value {
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

    fn row(lease_id: Option<&str>, target_id: Option<&str>) -> EventRow {
        EventRow {
            sequence: 7,
            id: "event:1".into(),
            workspace_id: "workspace:1".into(),
            timestamp: 1_700_000_000_000,
            generation: 2,
            lease_id: lease_id.map(str::to_owned),
            target_id: target_id.map(str::to_owned),
            event_type: "lease.expired".into(),
            payload_version: 1,
            sensitivity: "none".into(),
            payload_json: r#"{"z":1,"a":{"quote":"\"x\"","list":[1,2]}}"#.into(),
        }
    }

    #[tokio::test]
    async fn a_unit_and_the_event_it_asks_for_are_journaled_together() {
        use crate::store::{EventPoll, NewWorkspace, PrincipalKey, StoreLimits};
        let store = Store::open(StoreLimits::default()).expect("open store");
        let principal = PrincipalKey {
            client_id: "com.example.test".into(),
            instance_id: "i1".into(),
        };
        store
            .create_workspace(&NewWorkspace {
                id: "workspace:one".into(),
                principal: principal.clone(),
                browser_id: "browser:test".into(),
                client_key: None,
                options: Default::default(),
                now: 0,
            })
            .expect("create workspace");
        let generations = Arc::new(Generations::default());
        generations.set("workspace:one", 4);
        let sink = EventSink::new(store.clone(), Arc::new(Hub::default()), generations);
        let asked = |workspace_id: &str| Emit::new(workspace_id, "command.status", json!({"n": 1}));

        // The unit's value comes back with the journaled row (the current generation filled in).
        let one = asked("workspace:one");
        let (value, row) = sink
            .call_then_emit(move |_| Ok((7, Some(one))))
            .await
            .unwrap();
        let row = row.expect("an event was asked for").expect("journaled");
        assert_eq!((value, row.sequence, row.generation), (7, 1, 4));
        // No event asked for: nothing journaled.
        let (_, row) = sink.call_then_emit(|_| Ok(((), None))).await.unwrap();
        assert!(row.is_none());
        // A failed unit journals nothing and fails the call.
        let one = asked("workspace:one");
        let failed = sink
            .call_then_emit(move |_| -> Result<((), Option<Emit>), StoreError> {
                let _asked = one;
                Err(StoreError::WorkspaceNotFound)
            })
            .await;
        assert!(failed.is_err());
        // A gone Workspace fails the journal alone; the unit's value still comes back.
        let gone = asked("workspace:gone");
        let (value, row) = sink
            .call_then_emit(move |_| Ok(("kept", Some(gone))))
            .await
            .unwrap();
        assert_eq!(value, "kept");
        assert!(matches!(row, Some(Err(StoreError::WorkspaceNotFound))));
        match store.poll_events("workspace:one", 0, 10, true).unwrap() {
            EventPoll::Page { events, .. } => assert_eq!(events.len(), 1),
            other => panic!("{other:?}"),
        }
    }

    /// Rows as the journal holds them: the payload as `new_event` serializes it (sorted keys),
    /// with and without Lease and target, escapes and non-ASCII text.
    fn journaled_rows() -> Vec<EventRow> {
        let payload =
            json!({"z": 1, "a": {"quote": "\"x\"", "list": [1, 2.5, null]}, "emoji": "\u{1f600}"});
        let mut rows = vec![
            row(None, None),
            row(Some("lease:1"), None),
            row(None, Some("target:\u{e9}")),
            row(Some("lease:\"q\""), Some("target:1")),
        ];
        for (n, row) in rows.iter_mut().enumerate() {
            row.sequence = n as u64 + 1;
            row.payload_json = payload.to_string();
        }
        rows
    }

    #[test]
    fn the_notification_line_is_the_event_json_envelope_byte_for_byte() {
        for row in journaled_rows() {
            let payload: Value = serde_json::from_str(&row.payload_json).unwrap();
            let expected = json!({"jsonrpc": "2.0", "method": "events/event", "params": {"event": event_json(&row)}}).to_string();
            // From the emitter's value, and from the stored text (a journaled event offered).
            assert_eq!(notification_line(&row, &payload), expected);
            assert_eq!(notification_line(&row, stored_payload(&row)), expected);
        }
    }

    #[test]
    fn a_poll_page_is_its_events_in_wire_shape_with_the_cursor() {
        let mut rows = journaled_rows();
        rows[1].event_type = "network.request".into();
        let delivered = |row: &EventRow| row.event_type != "network.request";
        let page = poll_page_json(&rows, delivered, "cursor:4", true).unwrap();
        let events: Vec<Value> = rows
            .iter()
            .filter(|row| delivered(row))
            .map(event_json)
            .collect();
        assert_eq!(events.len(), 3);
        let expected = json!({"events": events, "nextCursor": "cursor:4", "hasMore": false});
        assert_ne!(
            page,
            expected.to_string(),
            "hasMore must come from the argument"
        );
        let expected = json!({"events": events, "nextCursor": "cursor:4", "hasMore": true});
        assert_eq!(page, expected.to_string());
        // Nothing delivered, and no rows at all.
        assert_eq!(
            poll_page_json(&rows, |_| false, "cursor:4", false).unwrap(),
            r#"{"events":[],"hasMore":false,"nextCursor":"cursor:4"}"#
        );
        assert_eq!(
            poll_page_json(&[], |_| true, "cursor:0", false).unwrap(),
            r#"{"events":[],"hasMore":false,"nextCursor":"cursor:0"}"#
        );
        // Stored text that is not JSON (never journaled so) reads as a null payload, and
        // stored text is copied as it is, not re-ordered.
        let mut odd = row(None, None);
        odd.payload_json = "{not json".into();
        let mut unsorted = row(None, None);
        unsorted.payload_json = r#"{"z":1,"a":2}"#.into();
        let page = poll_page_json(&[odd, unsorted], |_| true, "cursor:7", false).unwrap();
        let page: Value = serde_json::from_str(&page).unwrap();
        assert_eq!(page["events"][0]["payload"], Value::Null);
        assert_eq!(page["events"][1]["payload"], json!({"z": 1, "a": 2}));
        let mut unsorted = row(None, None);
        unsorted.payload_json = r#"{"z":1,"a":2}"#.into();
        assert!(
            poll_page_json(&[unsorted], |_| true, "cursor:7", false)
                .unwrap()
                .contains(r#""payload":{"z":1,"a":2},"#)
        );
    }
}
