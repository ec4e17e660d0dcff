//! The `leases/*` methods, and `lease.expired` for Leases that ended by TTL (found by a call or
//! by the sweep).

use serde_json::{Value, json};

use super::connection::{ConnectionContext, Session};
use super::params::{LeaseCreate, LeaseRef};
use super::state::Broker;
use super::workspaces::{client_key, explain_missing};
use crate::events::Emit;
use crate::protocol::errors::RpcError;
use crate::protocol::ids::{IdKind, new_id};
use crate::protocol::internal::PeerRole;
use crate::store::{ConnectionId, LeaseId, LeaseRow, NewLease, StoreError, WorkspaceId};
use crate::version::now_ms;

/// Default Lease TTL (contract: 30 seconds).
pub const DEFAULT_LEASE_TTL_MS: i64 = 30_000;
/// Shortest Lease (contract: 1 second).
pub const MIN_LEASE_TTL_MS: i64 = 1_000;
/// Longest Lease (contract: 5 minutes).
pub const MAX_LEASE_TTL_MS: i64 = 300_000;

pub async fn create(
    context: &ConnectionContext,
    session: &Session,
    params: LeaseCreate,
) -> Result<Value, RpcError> {
    let ttl_ms = match params.ttl_ms {
        None => DEFAULT_LEASE_TTL_MS,
        Some(ttl) if (MIN_LEASE_TTL_MS..=MAX_LEASE_TTL_MS).contains(&ttl) => ttl,
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "\"ttlMs\" must be an integer from {MIN_LEASE_TTL_MS} through {MAX_LEASE_TTL_MS}"
            ))
            .with_context("min", json!(MIN_LEASE_TTL_MS))
            .with_context("max", json!(MAX_LEASE_TTL_MS)));
        }
    };
    let new_lease = NewLease {
        id: new_id(IdKind::Lease),
        workspace_id: params.workspace_id,
        connection_id: session.connection_id.clone(),
        principal: session.principal.clone(),
        ttl_ms,
        client_key: client_key(session, params.client_key)?,
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

pub async fn heartbeat(
    context: &ConnectionContext,
    session: &Session,
    params: LeaseRef,
) -> Result<Value, RpcError> {
    let connection_id = ConnectionId::from(session.connection_id.clone());
    let sent_at = sent_at(context, &params);
    let (workspace_id, lease_id) = (
        WorkspaceId::from(params.workspace_id),
        LeaseId::from(params.lease_id),
    );
    let renewed = context
        .broker
        .store
        .call(move |store| {
            store.heartbeat_lease(&connection_id, &workspace_id, &lease_id, sent_at, now_ms())
        })
        .await;
    let row = ended_lease(&context.broker, renewed).await?;
    Ok(lease_json(&row))
}

pub async fn release(
    context: &ConnectionContext,
    session: &Session,
    params: LeaseRef,
) -> Result<Value, RpcError> {
    let connection_id = ConnectionId::from(session.connection_id.clone());
    let sent_at = sent_at(context, &params);
    let (workspace_id, lease_id) = (
        WorkspaceId::from(params.workspace_id),
        LeaseId::from(params.lease_id),
    );
    let released = context
        .broker
        .store
        .call(move |store| {
            store.release_lease(&connection_id, &workspace_id, &lease_id, sent_at, now_ms())
        })
        .await;
    let row = ended_lease(&context.broker, released).await?;
    let browser = &context.broker.tools.browser;
    browser.lease_ended(&row.workspace_id, &row.id).await;
    Ok(json!({"lease": {"id": row.id, "workspaceId": row.workspace_id}, "released": true}))
}

/// When the host's bridge read this line: its stamp (bridges only; the store bounds it by the
/// Broker's clock), else now.
fn sent_at(context: &ConnectionContext, params: &LeaseRef) -> i64 {
    let stamp = match context.role {
        PeerRole::Bridge => params.received_at.as_ref().and_then(Value::as_i64),
        _ => None,
    };
    stamp.unwrap_or_else(now_ms)
}

/// Maps a heartbeat's or release's store answer, journaling `lease.expired` when the call found
/// the Lease expired and ended it (the sweep will not see it again).
async fn ended_lease(
    broker: &Broker,
    answer: Result<LeaseRow, StoreError>,
) -> Result<LeaseRow, RpcError> {
    match answer {
        Ok(row) => Ok(row),
        Err(StoreError::LeaseEnded(row)) => {
            announce_expired(broker, vec![*row]).await;
            Err(StoreError::LeaseExpired.into())
        }
        Err(error) => Err(error.into()),
    }
}

/// Emits `lease.expired` for each Lease that ended by TTL.
pub async fn announce_expired(broker: &Broker, expired: Vec<LeaseRow>) {
    for lease in &expired {
        broker
            .tools
            .browser
            .lease_ended(&lease.workspace_id, &lease.id)
            .await;
    }
    // One store transaction for the whole sweep, however many Leases ended.
    let emits = expired
        .into_iter()
        .map(|lease| Emit {
            workspace_id: lease.workspace_id.into(),
            event_type: "lease.expired",
            lease_id: Some(lease.id.to_string()),
            target_id: None,
            sensitivity: "none",
            payload: json!({"leaseId": lease.id, "expiredAt": lease.expires_at}),
            generation: None,
        })
        .collect();
    match broker.events.emit_all(emits).await {
        Ok(rows) => {
            for error in rows.into_iter().filter_map(Result::err) {
                tracing::debug!(%error, "lease.expired not journaled (workspace gone)");
            }
        }
        Err(error) => tracing::error!(%error, "cannot journal lease.expired events"),
    }
}

fn lease_json(row: &LeaseRow) -> Value {
    json!({"lease": {"id": row.id, "workspaceId": row.workspace_id, "expiresAt": row.expires_at, "ttlMs": row.ttl_ms}})
}
