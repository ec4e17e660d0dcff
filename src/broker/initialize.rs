//! Opening and closing a Connection's session: `initialize` (negotiation, the Connection
//! record, event subscription) and `shutdown`, the graceful close on the bridge's input-closed
//! notice, and the loss of a peer that vanished.

use serde_json::{Value, json};

use super::connection::{ConnectionContext, Session};
use super::params::Raw;
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::protocol::ids::{IdKind, new_id};
use crate::protocol::internal::PeerRole;
use crate::protocol::negotiate::{self, CAPABILITIES, SERVICE_LIMITS};
use crate::store::{ConnectionKind, NewConnection, PrincipalKey};
use crate::version::{SERVICE_VERSION, now_ms};

/// Largest Artifact the service stores (reported in `initialize`).
pub const MAX_ARTIFACT_BYTES: u64 = crate::artifacts::MAX_ARTIFACT_BYTES;

/// `shutdown`: the Connection's Leases are released; later requests are `not_initialized`.
pub async fn shutdown(context: &ConnectionContext, _: &Session, _: Raw) -> Result<Value, RpcError> {
    close_connection(context).await;
    Ok(json!({}))
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

pub async fn initialize(context: &ConnectionContext, params: Raw) -> Result<Value, RpcError> {
    if context.session.get().is_some() {
        return Err(RpcError::new(
            ErrorCode::AlreadyInitialized,
            "this Connection is already initialized",
        ));
    }
    let negotiated = negotiate::negotiate(&params)?;
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
        .await?;
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
