//! The CLI's private methods, accepted only from a `bp` peer (the method table's peer kind):
//! `broker/status`, `broker/shutdown` (`bp disconnect`) and `debug/sql`.

use serde_json::{Value, json};

use super::connection::ConnectionContext;
use super::params::{BrokerShutdown, DebugSql, Raw};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::store::{ConnectionKind, SqlValue, StoreError};
use crate::version::{EXECUTABLE_VERSION, SERVICE_VERSION};

pub async fn status(context: &ConnectionContext, _: Raw) -> Result<Value, RpcError> {
    let broker = context.broker.clone();
    let embedded = broker
        .store
        .call_read(|store| store.count_connections(ConnectionKind::Embedded))
        .await?;
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
pub async fn shutdown(
    context: &ConnectionContext,
    params: BrokerShutdown,
) -> Result<Value, RpcError> {
    let broker = context.broker.clone();
    if params.broker_id != broker.broker_id || params.installation_id != broker.installation_id {
        return Err(RpcError::new(ErrorCode::ProtocolIncompatible, "the running Broker is not the one this executable installation started")
            .with_remediation(RemediationAction::UseCompatibleExecutable, "Use the executable installation that started the running Broker, or wait until its hosts disconnect."));
    }
    // Every other live Connection counts, whatever role its peer claimed in the handshake: a
    // role grants nothing a bridge could not do.
    let own = context.session().ok().map(|s| s.connection_id.clone());
    let others = broker
        .store
        .call_read(move |store| store.count_other_connections(own.as_deref()))
        .await?;
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

pub async fn debug_sql(context: &ConnectionContext, params: DebugSql) -> Result<Value, RpcError> {
    let sql = params.sql;
    let rows = context
        .broker
        .store
        .call_read(move |store| store.query_readonly(&sql))
        .await
        .map_err(|error| match error {
            StoreError::Sqlite(sqlite) => {
                RpcError::invalid_params(format!("query failed: {sqlite}"))
            }
            other => other.into(),
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
