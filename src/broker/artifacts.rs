//! The `artifacts/*` lifecycle methods: get, export, import, retain, release.
//!
//! Each needs the `artifact.read` capability and an active Lease of the calling Connection on
//! the named Workspace; Artifacts of another Workspace or client are `artifact_not_found`. The
//! bytes are handled by `artifacts/` (reached through the tool environment); this file only
//! checks, calls and shapes. `artifacts/get` is the only response that carries a protected path.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::connection::{ConnectionContext, Session};
use super::errors::from_store;
use super::lifecycle::{optional_str, required_str};
use crate::protocol::errors::RpcError;
use crate::tools::artifact_error;
use crate::version::now_ms;

/// `{workspaceId, leaseId}` after checking the capability and the caller's Lease.
async fn authorize(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<String, RpcError> {
    session.require("artifact.read")?;
    let workspace_id = required_str(params, "workspaceId")?.to_owned();
    let lease_id = required_str(params, "leaseId")?.to_owned();
    let (connection_id, ws) = (session.connection_id.clone(), workspace_id.clone());
    context
        .broker
        .store
        .call_read(move |store| store.check_lease(&connection_id, &ws, &lease_id, now_ms()))
        .await
        .map_err(from_store)?;
    Ok(workspace_id)
}

fn client_path(params: &Map<String, Value>) -> Result<PathBuf, RpcError> {
    Ok(PathBuf::from(required_str(params, "path")?))
}

pub async fn get(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let workspace_id = authorize(context, session, params).await?;
    let id = required_str(params, "artifactId")?;
    let (artifact, path) = context
        .broker
        .tools
        .artifacts
        .get(&workspace_id, id, now_ms())
        .await
        .map_err(artifact_error)?;
    Ok(json!({"artifact": artifact.to_json(), "path": path.to_string_lossy()}))
}

pub async fn export(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let workspace_id = authorize(context, session, params).await?;
    let id = required_str(params, "artifactId")?;
    let destination = client_path(params)?;
    let overwrite = match params.get("overwrite") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(overwrite)) => *overwrite,
        Some(_) => return Err(RpcError::invalid_params("\"overwrite\" must be a boolean")),
    };
    let artifact = context
        .broker
        .tools
        .artifacts
        .export(&workspace_id, id, destination.clone(), overwrite, now_ms())
        .await
        .map_err(artifact_error)?;
    Ok(json!({
        "artifact": artifact.to_json(),
        "path": destination.to_string_lossy(),
        "byteLength": artifact.byte_len,
    }))
}

pub async fn import(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    accept_import(context, session, params)
        .await?
        .run(context)
        .await
}

/// An `artifacts/import` whose capability, Lease and parameters were checked in input order.
/// Its copy may then run beside the Connection's later calls (`run`), so a slow or stuck
/// client file holds up only this call.
pub struct AcceptedImport {
    workspace_id: String,
    source: PathBuf,
    mime_type: Option<String>,
}

pub async fn accept_import(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<AcceptedImport, RpcError> {
    let workspace_id = authorize(context, session, params).await?;
    let source = client_path(params)?;
    let mime_type = optional_str(params, "mimeType")?.map(str::to_owned);
    Ok(AcceptedImport {
        workspace_id,
        source,
        mime_type,
    })
}

impl AcceptedImport {
    /// Copies the file in (bounded in bytes and time by `artifacts/`).
    pub async fn run(self, context: &ConnectionContext) -> Result<Value, RpcError> {
        let artifact = context
            .broker
            .tools
            .artifacts
            .import(&self.workspace_id, self.source, self.mime_type, now_ms())
            .await
            .map_err(artifact_error)?;
        Ok(json!({"artifact": artifact.to_json()}))
    }
}

pub async fn retain(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let workspace_id = authorize(context, session, params).await?;
    let id = required_str(params, "artifactId")?;
    let artifact = context
        .broker
        .tools
        .artifacts
        .retain(&workspace_id, id, now_ms())
        .await
        .map_err(artifact_error)?;
    Ok(json!({"artifact": artifact.to_json()}))
}

pub async fn release(
    context: &ConnectionContext,
    session: &Session,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let workspace_id = authorize(context, session, params).await?;
    let id = required_str(params, "artifactId")?;
    let artifact = context
        .broker
        .tools
        .artifacts
        .release(&workspace_id, id)
        .await
        .map_err(artifact_error)?;
    Ok(
        json!({"artifact": {"id": artifact.id, "workspaceId": artifact.workspace_id}, "released": true}),
    )
}
