//! Test fixtures shared by the store's unit tests: a fresh Store, principals,
//! connections, workspaces and events with predictable ids. Test-only; never
//! compiled into the library.

use super::{
    ConnectionKind, CreateWorkspace, EventVisibility, NewConnection, NewEvent, NewWorkspace,
    PrincipalKey, Store, StoreLimits, WorkspaceRow,
};

pub(super) fn store() -> Store {
    store_with(StoreLimits::default())
}

pub(super) fn store_with(limits: StoreLimits) -> Store {
    match Store::open(limits) {
        Ok(store) => store,
        Err(error) => panic!("open store: {error}"),
    }
}

pub(super) fn principal(name: &str) -> PrincipalKey {
    PrincipalKey {
        client_id: format!("client-{name}"),
        instance_id: format!("instance-{name}"),
    }
}

pub(super) fn connect(store: &Store, id: &str, principal: &PrincipalKey) {
    store
        .open_connection(&NewConnection {
            id: id.to_owned(),
            principal: principal.clone(),
            kind: ConnectionKind::Embedded,
            protocol_minor: 1,
            opened_at: 1,
        })
        .expect("open connection");
}

pub(super) fn new_workspace(
    id: &str,
    principal: &PrincipalKey,
    client_key: Option<&str>,
) -> NewWorkspace {
    NewWorkspace {
        id: id.to_owned(),
        principal: principal.clone(),
        browser_id: "browser:a".to_owned(),
        client_key: client_key.map(str::to_owned),
        options: Default::default(),
        now: 10,
    }
}

pub(super) fn workspace(store: &Store, id: &str, principal: &PrincipalKey) -> WorkspaceRow {
    match store.create_workspace(&new_workspace(id, principal, None)) {
        Ok(CreateWorkspace::Created(row)) => row,
        other => panic!("create workspace {id}: {other:?}"),
    }
}

pub(super) fn event(workspace_id: &str, n: u64) -> NewEvent {
    NewEvent {
        id: format!("event:{n}"),
        workspace_id: workspace_id.to_owned(),
        timestamp: 100,
        generation: 3,
        lease_id: None,
        target_id: Some("target:1".to_owned()),
        event_type: "navigation".to_owned(),
        payload_version: 1,
        sensitivity: "browser_data".to_owned(),
        payload_json: format!("{{\"n\":{n}}}"),
        visibility: EventVisibility::EventRead,
    }
}

/// Renders an outcome compactly for table-driven checks: `Ok` values through
/// `render`, errors as their `Debug` form (e.g. `LeaseNotOwned`).
pub(super) fn outcome<T>(
    result: Result<T, super::StoreError>,
    render: impl FnOnce(T) -> String,
) -> String {
    match result {
        Ok(value) => render(value),
        Err(error) => format!("{error:?}"),
    }
}
