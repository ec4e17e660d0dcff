//! The lifecycle methods: initialize, Workspaces, Leases, events/poll, shutdown, and the CLI's
//! private methods (status, daemon shutdown, debug SQL).
//!
//! Each handler validates its params, checks the capability and Principal ownership, calls the
//! store off the tokio workers and shapes the result. Tool execution is not here.

use serde_json::{Map, Value, json};

use super::connection::{ConnectionContext, Session};
use super::errors::{ended_workspace, from_store};
use super::sweep::workspace_idle_limit_ms;
use super::{artifacts, commands};
use crate::events::Emit;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::ids::{IdKind, format_cursor, new_id, parse_cursor};
use crate::protocol::internal::{PeerRole, RECEIVED_AT_MEMBER};
use crate::protocol::negotiate::{self, CAPABILITIES, SERVICE_LIMITS};
use crate::store::{
    ConnectionKind, CreateWorkspace, EventPoll, LeaseRow, NewConnection, NewLease, NewWorkspace,
    PrincipalKey, ReleaseReason, ReleaseWorkspace, SqlValue, StoreError, WorkspaceLookup,
    WorkspaceRow,
};
use crate::version::{EXECUTABLE_VERSION, SERVICE_VERSION, now_ms};

/// Default Lease TTL (contract: 30 seconds).
pub const DEFAULT_LEASE_TTL_MS: i64 = 30_000;
/// Shortest Lease (contract: 1 second).
pub const MIN_LEASE_TTL_MS: i64 = 1_000;
/// Longest Lease (contract: 5 minutes).
pub const MAX_LEASE_TTL_MS: i64 = 300_000;
/// Default and largest `events/poll` page.
pub const DEFAULT_POLL_LIMIT: u64 = 100;
pub const MAX_POLL_LIMIT: u64 = 1_000;
/// Largest Artifact the service stores (reported in `initialize`).
pub const MAX_ARTIFACT_BYTES: u64 = crate::artifacts::MAX_ARTIFACT_BYTES;
/// Longest accepted `clientKey`.
const MAX_CLIENT_KEY_CHARS: usize = 256;
/// The binding of a Workspace created while discovery finds no candidate at all (the managed
/// profile is always one, so this only happens when the home cannot be read).
const NO_BROWSER_ID: &str = "browser:none";

pub async fn dispatch(
    context: &ConnectionContext,
    method: &str,
    params: Map<String, Value>,
) -> Result<Reply, RpcError> {
    match method {
        "events/poll" => events_poll(context, context.session()?, &params)
            .await
            .map(Reply::Json),
        _ => dispatch_value(context, method, params)
            .await
            .map(Reply::Value),
    }
}

/// A method's successful result: a value, or JSON text already written (a page of events,
/// serialized straight from the journal's rows).
pub enum Reply {
    Value(Value),
    Json(String),
}

async fn dispatch_value(
    context: &ConnectionContext,
    method: &str,
    params: Map<String, Value>,
) -> Result<Value, RpcError> {
    match (context.role, method) {
        (_, "initialize") => initialize(context, &params).await,
        (PeerRole::Cli, "broker/status") => status(context).await,
        (PeerRole::Cli, "broker/shutdown") => broker_shutdown(context, &params).await,
        (PeerRole::Cli, "debug/sql") => debug_sql(context, &params).await,
        _ => {
            let session = context.session()?;
            match method {
                "shutdown" => {
                    close_connection(context).await;
                    Ok(json!({}))
                }
                "tools/call" => match commands::accept(context, session, &params).await? {
                    commands::Acceptance::Answered(answer) => answer,
                    commands::Acceptance::Accepted(accepted) => {
                        commands::run(context, *accepted).await
                    }
                },
                "commands/get" => commands::commands_get(context, session, &params).await,
                "commands/cancel" => commands::commands_cancel(context, session, &params).await,
                "workspaces/create" => workspaces_create(context, session, &params).await,
                "workspaces/get" => workspaces_get(context, session, &params).await,
                "workspaces/release" => workspaces_release(context, session, &params).await,
                "leases/create" => leases_create(context, session, &params).await,
                "leases/heartbeat" => leases_heartbeat(context, session, &params).await,
                "leases/release" => leases_release(context, session, &params).await,
                "artifacts/get" => artifacts::get(context, session, &params).await,
                "artifacts/export" => artifacts::export(context, session, &params).await,
                "artifacts/import" => artifacts::import(context, session, &params).await,
                "artifacts/retain" => artifacts::retain(context, session, &params).await,
                "artifacts/release" => artifacts::release(context, session, &params).await,
                _ => Err(RpcError::new(
                    ErrorCode::MethodNotFound,
                    format!("unknown method {method:?}"),
                )),
            }
        }
    }
}

/// The first call for a Connection marks it closed and stops its notifications; later calls
/// (and calls before `initialize`) get `None`.
fn end_session(context: &ConnectionContext) -> Option<&Session> {
    let session = context.session.get()?;
    if context
        .closed
        .swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        return None;
    }
    context
        .broker
        .events
        .hub()
        .unsubscribe(&session.principal, &session.connection_id);
    Some(session)
}

/// Releases the Connection's Leases and forgets its routes. Safe to call more than once.
pub async fn close_connection(context: &ConnectionContext) {
    let Some(session) = end_session(context) else {
        return;
    };
    let id = session.connection_id.clone();
    match context
        .broker
        .store
        .call(move |store| store.close_connection(&id, now_ms()))
        .await
    {
        Ok(released) => {
            tracing::debug!(leases = released.len(), "connection closed");
            for lease in &released {
                let browser = &context.broker.tools.browser;
                browser.lease_ended(&lease.workspace_id, &lease.id).await;
            }
        }
        Err(error) => tracing::error!(%error, "cannot close connection"),
    }
}

/// The peer's socket closed. Without a prior graceful close the Connection is marked lost: it
/// no longer counts as live, and its Leases expire by TTL (a killed bridge).
pub async fn lose_connection(context: &ConnectionContext) {
    let Some(session) = end_session(context) else {
        return;
    };
    let id = session.connection_id.clone();
    if let Err(error) = context
        .broker
        .store
        .call(move |store| store.mark_connection_lost(&id, now_ms()))
        .await
    {
        tracing::error!(%error, "cannot mark connection lost");
    }
}

async fn initialize(
    context: &ConnectionContext,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    if context.session.get().is_some() {
        return Err(RpcError::new(
            ErrorCode::AlreadyInitialized,
            "this Connection is already initialized",
        ));
    }
    let negotiated = negotiate::negotiate(params)?;
    let broker = &context.broker;
    let principal = PrincipalKey {
        client_id: negotiated.client.id.clone(),
        instance_id: negotiated.client.instance_id.clone(),
    };
    let connection_id = new_id(IdKind::Connection);
    let new_connection = NewConnection {
        id: connection_id.clone(),
        principal: principal.clone(),
        kind: match context.role {
            PeerRole::Bridge => ConnectionKind::Embedded,
            PeerRole::Cli => ConnectionKind::Cli,
        },
        protocol_minor: negotiated.protocol.minor,
        opened_at: now_ms(),
    };
    broker
        .store
        .call(move |store| store.open_connection(&new_connection))
        .await
        .map_err(from_store)?;
    let limits = negotiated.limits;
    let candidates = broker.tools.browser.candidates().await;
    let browsers: Vec<Value> = candidates
        .iter()
        .map(|c| broker.tools.browser.candidate_json(c))
        .collect();
    let result = json!({
        "protocol": negotiated.protocol.to_json(),
        "capabilities": {"supported": CAPABILITIES, "granted": negotiated.granted},
        "executable": {"version": context.hello.executable_version},
        "service": {"version": SERVICE_VERSION},
        "broker": {"id": broker.broker_id},
        "connectionId": connection_id,
        "browsers": browsers,
        "limits": {
            "connection": {"maxMessageBytes": limits.max_message_bytes, "maxResultBytes": limits.max_result_bytes},
            "service": {
                "maxMessageBytes": SERVICE_LIMITS.max_message_bytes,
                "maxResultBytes": SERVICE_LIMITS.max_result_bytes,
                "maxArtifactBytes": MAX_ARTIFACT_BYTES,
                "eventJournalSize": broker.store.limits().event_journal_size,
            },
        },
    });
    if negotiated.granted.iter().any(|c| c == "event.read") {
        broker.events.hub().subscribe_with(
            &principal,
            &connection_id,
            context.notifications.clone(),
            negotiated.granted.iter().any(|c| c == "network.read"),
        );
    }
    let session = Session {
        connection_id,
        principal,
        negotiated,
    };
    if context.session.set(session).is_err() {
        return Err(RpcError::new(
            ErrorCode::AlreadyInitialized,
            "this Connection is already initialized",
        ));
    }
    Ok(result)
}

async fn workspaces_create(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    session.require("workspace.manage")?;
    let client_key = client_key(session, params)?;
    // A retry that names the key but no browser is the same request as the first call, whatever
    // browser the Broker would pick now.
    let keyed_browser = match &client_key {
        Some(key) if optional_str(params, "browserId")?.is_none() => {
            let (principal, key) = (session.principal.clone(), key.clone());
            context
                .broker
                .store
                .call_read(move |store| store.client_key_browser(&principal, &key))
                .await
                .map_err(from_store)?
        }
        _ => None,
    };
    let browser_id = match optional_str(params, "browserId")? {
        Some(id) => id.to_owned(),
        None if keyed_browser.is_some() => keyed_browser.unwrap_or_default(),
        None => context
            .broker
            .tools
            .browser
            .default_browser_id(context.hello.browser_preference.as_deref())
            .await
            .unwrap_or_else(|| NO_BROWSER_ID.to_owned()),
    };
    let new_workspace = NewWorkspace {
        id: new_id(IdKind::Workspace),
        principal: session.principal.clone(),
        browser_id,
        client_key,
        now: now_ms(),
    };
    let created = context
        .broker
        .store
        .call(move |store| store.create_workspace(&new_workspace))
        .await
        .map_err(from_store)?;
    let (row, expired) = match created {
        CreateWorkspace::Created(row) | CreateWorkspace::Existing(row) => (row, None),
        CreateWorkspace::Replaced { row, expired } => (row, Some(expired)),
    };
    context
        .broker
        .events
        .hub()
        .add_workspace(&row.id, &session.principal);
    let mut result = workspace_json(&row);
    if let Some(expired) = expired {
        // Said once, to the first create after the reclaim: the clientKey's previous Workspace
        // did not simply vanish.
        result["previous"] = json!({
            "id": expired.workspace_id,
            "state": "expired",
            "reason": "idle",
            "releasedAt": expired.released_at,
            "idleLimitMs": workspace_idle_limit_ms(),
        });
    }
    Ok(result)
}

async fn workspaces_get(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    session.require("workspace.manage")?;
    let row = active_workspace(context, session, params).await?;
    Ok(workspace_json(&row))
}

async fn workspaces_release(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    session.require("workspace.manage")?;
    let workspace_id = required_str(params, "workspaceId")?.to_owned();
    let principal = session.principal.clone();
    let id = workspace_id.clone();
    let now = now_ms();
    let outcome = context
        .broker
        .store
        .call(move |store| store.release_workspace(&principal, &id, now, ReleaseReason::Released))
        .await
        .map_err(from_store)?;
    let released_at = match outcome {
        ReleaseWorkspace::Released { .. } => {
            context.broker.events.hub().remove_workspace(&workspace_id);
            context
                .broker
                .tools
                .browser
                .release_workspace(&workspace_id)
                .await;
            purge_artifacts(&context.broker, &workspace_id).await;
            now
        }
        ReleaseWorkspace::AlreadyReleased { released_at } => released_at,
        ReleaseWorkspace::NotFound => {
            return Err(from_store(crate::store::StoreError::WorkspaceNotFound));
        }
    };
    Ok(
        json!({"workspace": {"id": workspace_id, "state": "released", "releasedAt": released_at}, "released": true}),
    )
}

async fn leases_create(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    session.require("workspace.manage")?;
    let workspace_id = required_str(params, "workspaceId")?.to_owned();
    let ttl_ms = match params.get("ttlMs") {
        None | Some(Value::Null) => DEFAULT_LEASE_TTL_MS,
        Some(value) => match value.as_i64() {
            Some(ttl) if (MIN_LEASE_TTL_MS..=MAX_LEASE_TTL_MS).contains(&ttl) => ttl,
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "\"ttlMs\" must be an integer from {MIN_LEASE_TTL_MS} through {MAX_LEASE_TTL_MS}"
                ))
                .with_context("min", json!(MIN_LEASE_TTL_MS))
                .with_context("max", json!(MAX_LEASE_TTL_MS)));
            }
        },
    };
    let new_lease = NewLease {
        id: new_id(IdKind::Lease),
        workspace_id,
        connection_id: session.connection_id.clone(),
        principal: session.principal.clone(),
        ttl_ms,
        client_key: client_key(session, params)?,
        now: now_ms(),
    };
    let workspace_id = new_lease.workspace_id.clone();
    let row = match context
        .broker
        .store
        .call(move |store| store.create_lease(&new_lease))
        .await
    {
        Ok(row) => row,
        Err(error) => return Err(explain_missing(context, session, &workspace_id, error).await),
    };
    context
        .broker
        .events
        .hub()
        .add_workspace(&row.workspace_id, &session.principal);
    Ok(lease_json(&row))
}

async fn leases_heartbeat(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    session.require("workspace.manage")?;
    let (workspace_id, lease_id) = lease_params(params)?;
    let connection_id = session.connection_id.clone();
    let sent_at = sent_at(context, params);
    let renewed = context
        .broker
        .store
        .call(move |store| {
            store.heartbeat_lease(&connection_id, &workspace_id, &lease_id, sent_at, now_ms())
        })
        .await;
    let row = ended_lease(context, renewed).await?;
    Ok(lease_json(&row))
}

/// When the host's bridge read this line: its stamp (bridges only; the store bounds it by the
/// Broker's clock), else now.
fn sent_at(context: &ConnectionContext, params: &Map<String, Value>) -> i64 {
    let stamp = match context.role {
        PeerRole::Bridge => params.get(RECEIVED_AT_MEMBER).and_then(Value::as_i64),
        _ => None,
    };
    stamp.unwrap_or_else(now_ms)
}

/// Maps a heartbeat's or release's store answer, journaling `lease.expired` when the call found
/// the Lease expired and ended it (the sweep will not see it again).
async fn ended_lease(
    context: &ConnectionContext,
    answer: Result<LeaseRow, StoreError>,
) -> Result<LeaseRow, RpcError> {
    match answer {
        Ok(row) => Ok(row),
        Err(StoreError::LeaseEnded(row)) => {
            announce_expired(&context.broker, vec![*row]).await;
            Err(from_store(StoreError::LeaseExpired))
        }
        Err(error) => Err(from_store(error)),
    }
}

async fn leases_release(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    session.require("workspace.manage")?;
    let (workspace_id, lease_id) = lease_params(params)?;
    let connection_id = session.connection_id.clone();
    let sent_at = sent_at(context, params);
    let released = context
        .broker
        .store
        .call(move |store| {
            store.release_lease(&connection_id, &workspace_id, &lease_id, sent_at, now_ms())
        })
        .await;
    let row = ended_lease(context, released).await?;
    let browser = &context.broker.tools.browser;
    browser.lease_ended(&row.workspace_id, &row.id).await;
    Ok(json!({"lease": {"id": row.id, "workspaceId": row.workspace_id}, "released": true}))
}

async fn events_poll(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<String, RpcError> {
    session.require("event.read")?;
    let cursor_text = required_str(params, "cursor")?;
    let after = parse_cursor(cursor_text)
        .ok_or_else(|| RpcError::invalid_params("\"cursor\" must look like \"cursor:N\""))?;
    let limit = match params.get("limit") {
        None | Some(Value::Null) => DEFAULT_POLL_LIMIT,
        Some(value) => match value.as_u64() {
            Some(limit) if (1..=MAX_POLL_LIMIT).contains(&limit) => limit,
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "\"limit\" must be an integer from 1 through {MAX_POLL_LIMIT}"
                )));
            }
        },
    };
    let row = active_workspace(context, session, params).await?;
    let workspace_id = row.id;
    // Network events are journaled for everyone but delivered only with `network.read`; the
    // cursor still moves past them, and only events this Connection may see decide whether
    // its cursor expired.
    let hears_network = session
        .negotiated
        .granted
        .iter()
        .any(|c| c == "network.read");
    let poll = context
        .broker
        .store
        .call_read(move |store| {
            store.poll_events(&workspace_id, after, limit as u32, hears_network)
        })
        .await
        .map_err(from_store)?;
    match poll {
        EventPoll::Page { events, next_sequence, has_more } => crate::events::poll_page_json(
            &events,
            |row| hears_network || !crate::events::is_network_event(&row.event_type),
            &format_cursor(next_sequence),
            has_more,
        )
        .map_err(|_| RpcError::new(ErrorCode::InternalError, "the event page could not be written")),
        EventPoll::Expired { earliest, latest } => Err(RpcError::new(ErrorCode::CursorExpired, "the cursor predates the retained journal")
            .with_context("earliestCursor", json!(format_cursor(earliest)))
            .with_context("latestCursor", json!(format_cursor(latest)))
            .with_remediation(RemediationAction::RebuildState, "Rebuild tab and Observation state, then call workspaces/get for a new baseline cursor.")),
        EventPoll::Future { latest } => Err(RpcError::invalid_params("the cursor is ahead of the journal")
            .with_context("latestCursor", json!(format_cursor(latest)))),
    }
}

async fn status(context: &ConnectionContext) -> Result<Value, RpcError> {
    let broker = context.broker.clone();
    let embedded = broker
        .store
        .call_read(|store| store.count_connections(ConnectionKind::Embedded))
        .await
        .map_err(from_store)?;
    Ok(json!({
        "broker": {"id": broker.broker_id, "pid": std::process::id(), "startedAt": broker.started_at},
        "service": {"version": SERVICE_VERSION},
        "installationId": broker.installation_id,
        "embeddedConnections": embedded,
        "browserConnectionGeneration": broker.events.generation(),
        "executable": {"version": EXECUTABLE_VERSION},
    }))
}

/// `bp disconnect`: stop the daemon, but only for the same Broker and installation and only when
/// no embedded host is connected. An Agent product is never evicted.
async fn broker_shutdown(
    context: &ConnectionContext,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let broker = context.broker.clone();
    let broker_id = required_str(params, "brokerId")?;
    let installation_id = required_str(params, "installationId")?;
    if broker_id != broker.broker_id || installation_id != broker.installation_id {
        return Err(RpcError::new(ErrorCode::ProtocolIncompatible, "the running Broker is not the one this executable installation started")
            .with_remediation(RemediationAction::UseCompatibleExecutable, "Use the executable installation that started the running Broker, or wait until its hosts disconnect."));
    }
    // Every other live Connection counts, whatever role its peer claimed in the handshake: a
    // role grants nothing a bridge could not do.
    let own = context.session().ok().map(|s| s.connection_id.clone());
    let others = broker
        .store
        .call_read(move |store| store.count_other_connections(own.as_deref()))
        .await
        .map_err(from_store)?;
    if others > 0 {
        return Err(RpcError::new(
            ErrorCode::BrokerInUse,
            format!("{others} other host Connection(s) are still connected"),
        )
        .with_context("embeddedConnections", json!(others)));
    }
    broker.request_shutdown();
    Ok(json!({"shutdown": true}))
}

async fn debug_sql(
    context: &ConnectionContext,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let sql = required_str(params, "sql")?.to_owned();
    let rows = context
        .broker
        .store
        .call_read(move |store| store.query_readonly(&sql))
        .await
        .map_err(|error| match error {
            crate::store::StoreError::Sqlite(sqlite) => {
                RpcError::invalid_params(format!("query failed: {sqlite}"))
            }
            other => from_store(other),
        })?;
    let to_json = |value: &SqlValue| match value {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(i) => json!(i),
        SqlValue::Real(r) => json!(r),
        SqlValue::Text(t) => json!(t),
        SqlValue::Blob(b) => json!(crate::hex::encode(b)),
    };
    Ok(json!({
        "columns": rows.columns,
        "rows": rows.rows.iter().map(|r| r.iter().map(to_json).collect::<Vec<_>>()).collect::<Vec<_>>(),
    }))
}

/// The active Workspace named by `workspaceId`, owned by this Connection's Principal.
async fn active_workspace(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<WorkspaceRow, RpcError> {
    let id = required_str(params, "workspaceId")?.to_owned();
    let principal = session.principal.clone();
    let lookup = context
        .broker
        .store
        .call_read(move |store| store.get_workspace(&principal, &id))
        .await
        .map_err(from_store)?;
    let row = match lookup {
        WorkspaceLookup::Active(row) => row,
        WorkspaceLookup::Released(tombstone) => {
            return Err(ended_workspace(&tombstone, workspace_idle_limit_ms()));
        }
        WorkspaceLookup::NotFound => {
            return Err(from_store(crate::store::StoreError::WorkspaceNotFound));
        }
    };
    // A poll or a look counts as activity; it writes only when the clock is a second behind,
    // so polling in a loop costs no write per call.
    let now = now_ms();
    if now - row.last_active_at >= ACTIVITY_RESOLUTION_MS {
        let id = row.id.clone();
        if let Err(error) = context
            .broker
            .store
            .call(move |store| store.touch_workspace(&id, now))
            .await
        {
            tracing::debug!(%error, "workspace activity not recorded");
        }
    }
    Ok(row)
}

/// How stale a Workspace's idle clock may be before a read-only call (poll, get) writes it:
/// the idle limit is minutes (at least seconds), so a second is precise enough and keeps
/// polling write-free.
const ACTIVITY_RESOLUTION_MS: i64 = 1_000;

/// A store answer of "no such Workspace or Lease" on a call naming `workspace_id`, turned into
/// "it was released / it expired, and why" when the Workspace's tombstone is still there.
pub(super) async fn explain_missing(
    context: &ConnectionContext,
    session: &Session,
    workspace_id: &str,
    error: StoreError,
) -> RpcError {
    if !matches!(
        error,
        StoreError::WorkspaceNotFound | StoreError::LeaseNotFound
    ) {
        return from_store(error);
    }
    let principal = session.principal.clone();
    let id = workspace_id.to_owned();
    match context
        .broker
        .store
        .call_read(move |store| store.get_workspace(&principal, &id))
        .await
    {
        Ok(WorkspaceLookup::Released(tombstone)) => {
            ended_workspace(&tombstone, workspace_idle_limit_ms())
        }
        _ => from_store(error),
    }
}

fn workspace_json(row: &WorkspaceRow) -> Value {
    let tab_set = format!(
        "{}{}",
        IdKind::ManagedTabSet.prefix(),
        row.id.trim_start_matches(IdKind::Workspace.prefix())
    );
    json!({
        "workspace": {"id": row.id, "browserId": row.browser_id, "state": "active", "createdAt": row.created_at},
        "managedTabSet": {"id": tab_set},
        "eventCursor": format_cursor(row.latest_sequence),
    })
}

fn lease_json(row: &LeaseRow) -> Value {
    json!({"lease": {"id": row.id, "workspaceId": row.workspace_id, "expiresAt": row.expires_at, "ttlMs": row.ttl_ms}})
}

fn lease_params(params: &Map<String, Value>) -> Result<(String, String), RpcError> {
    Ok((
        required_str(params, "workspaceId")?.to_owned(),
        required_str(params, "leaseId")?.to_owned(),
    ))
}

fn client_key(session: &Session, params: &Map<String, Value>) -> Result<Option<String>, RpcError> {
    let Some(key) = optional_str(params, "clientKey")? else {
        return Ok(None);
    };
    if session.negotiated.protocol.minor < 1 {
        return Err(RpcError::invalid_params("\"clientKey\" needs protocol 1.1"));
    }
    if key.chars().count() > MAX_CLIENT_KEY_CHARS {
        return Err(RpcError::invalid_params(format!(
            "\"clientKey\" is longer than {MAX_CLIENT_KEY_CHARS} characters"
        )));
    }
    Ok(Some(key.to_owned()))
}

pub fn required_str<'a>(params: &'a Map<String, Value>, name: &str) -> Result<&'a str, RpcError> {
    match params.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(RpcError::invalid_params(format!(
            "\"{name}\" must be a non-empty string"
        ))),
    }
}

pub fn optional_str<'a>(
    params: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, RpcError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        _ => Err(RpcError::invalid_params(format!(
            "\"{name}\" must be a non-empty string"
        ))),
    }
}

/// Deletes a released Workspace's Artifact bytes (its metadata went with the Workspace).
pub async fn purge_artifacts(broker: &super::state::Broker, workspace_id: &str) {
    if let Err(error) = broker.tools.artifacts.purge_workspace(workspace_id).await {
        tracing::error!(%error, "cannot remove a released workspace's artifacts");
    }
}

/// Emits `lease.expired` for each Lease the sweep removed.
pub async fn announce_expired(
    context_broker: &std::sync::Arc<super::state::Broker>,
    expired: Vec<LeaseRow>,
) {
    for lease in &expired {
        let browser = &context_broker.tools.browser;
        browser.lease_ended(&lease.workspace_id, &lease.id).await;
    }
    // One store transaction for the whole sweep, however many Leases ended.
    let emits = expired
        .into_iter()
        .map(|lease| Emit {
            workspace_id: lease.workspace_id,
            event_type: "lease.expired",
            lease_id: Some(lease.id.clone()),
            target_id: None,
            sensitivity: "none",
            payload: json!({"leaseId": lease.id, "expiredAt": lease.expires_at}),
            generation: None,
        })
        .collect();
    match context_broker.events.emit_all(emits).await {
        Ok(rows) => {
            for error in rows.into_iter().filter_map(Result::err) {
                tracing::debug!(%error, "lease.expired not journaled (workspace gone)");
            }
        }
        Err(error) => tracing::error!(%error, "cannot journal lease.expired events"),
    }
}
