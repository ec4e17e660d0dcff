//! The `artifacts/*` lifecycle methods: get, export, import, retain, release.
//!
//! Each needs the `artifact.read` capability and an active Lease of the calling Connection on
//! the named Workspace; Artifacts of another Workspace or client are `artifact_not_found`. The
//! bytes are handled by `artifacts/` (reached through the tool environment); this file only
//! checks, calls and shapes. `artifacts/get` is the only response that carries a protected path.
//! `artifacts/import` is checked in input order and copies beside later calls (`Reply::Later`),
//! so a slow client file system holds up only that call.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::connection::{ConnectionContext, Session};
use super::methods::Reply;
use super::params::{ArtifactExport, ArtifactImport, ArtifactRef};
use crate::protocol::errors::RpcError;
use crate::store::{ConnectionId, LeaseId, WorkspaceId};
use crate::tools::artifact_error;
use crate::version::now_ms;

/// Checks the caller's Lease on the Workspace (the capability is the method table's).
async fn authorize(
    context: &ConnectionContext,
    session: &Session,
    workspace_id: &str,
    lease_id: String,
) -> Result<(), RpcError> {
    let (connection_id, ws, lease_id) = (
        ConnectionId::from(session.connection_id.clone()),
        WorkspaceId::from(workspace_id),
        LeaseId::from(lease_id),
    );
    context
        .broker
        .store
        .call_read(move |store| store.check_lease(&connection_id, &ws, &lease_id, now_ms()))
        .await?;
    Ok(())
}

pub async fn get(
    context: &ConnectionContext,
    session: &Session,
    params: ArtifactRef,
) -> Result<Value, RpcError> {
    let workspace_id = params.workspace_id;
    authorize(context, session, &workspace_id, params.lease_id).await?;
    let (artifact, path) = context
        .broker
        .tools
        .artifacts
        .get(&workspace_id, &params.artifact_id, now_ms())
        .await
        .map_err(artifact_error)?;
    Ok(json!({"artifact": artifact.to_json(), "path": path.to_string_lossy()}))
}

pub async fn export(
    context: &ConnectionContext,
    session: &Session,
    params: ArtifactExport,
) -> Result<Value, RpcError> {
    let workspace_id = params.workspace_id;
    authorize(context, session, &workspace_id, params.lease_id).await?;
    let destination = PathBuf::from(params.path);
    let overwrite = params.overwrite.unwrap_or(false);
    let artifact = context
        .broker
        .tools
        .artifacts
        .export(
            &workspace_id,
            &params.artifact_id,
            destination.clone(),
            overwrite,
            now_ms(),
        )
        .await
        .map_err(artifact_error)?;
    Ok(json!({
        "artifact": artifact.to_json(),
        "path": destination.to_string_lossy(),
        "byteLength": artifact.byte_len,
    }))
}

/// Checks the Lease in input order; the copy (bounded in bytes and time by `artifacts/`) is
/// the `Reply::Later`.
pub async fn import(
    context: &std::sync::Arc<ConnectionContext>,
    session: &Session,
    params: ArtifactImport,
) -> Result<Reply, RpcError> {
    let workspace_id = params.workspace_id;
    authorize(context, session, &workspace_id, params.lease_id).await?;
    let (source, mime_type) = (PathBuf::from(params.path), params.mime_type);
    let context = context.clone();
    Ok(Reply::Later(Box::pin(async move {
        let artifact = context
            .broker
            .tools
            .artifacts
            .import(&workspace_id, source, mime_type, now_ms())
            .await
            .map_err(artifact_error)?;
        Ok(json!({"artifact": artifact.to_json()}))
    })))
}

pub async fn retain(
    context: &ConnectionContext,
    session: &Session,
    params: ArtifactRef,
) -> Result<Value, RpcError> {
    let workspace_id = params.workspace_id;
    authorize(context, session, &workspace_id, params.lease_id).await?;
    let artifact = context
        .broker
        .tools
        .artifacts
        .retain(&workspace_id, &params.artifact_id, now_ms())
        .await
        .map_err(artifact_error)?;
    Ok(json!({"artifact": artifact.to_json()}))
}

pub async fn release(
    context: &ConnectionContext,
    session: &Session,
    params: ArtifactRef,
) -> Result<Value, RpcError> {
    let workspace_id = params.workspace_id;
    authorize(context, session, &workspace_id, params.lease_id).await?;
    let artifact = context
        .broker
        .tools
        .artifacts
        .release(&workspace_id, &params.artifact_id)
        .await
        .map_err(artifact_error)?;
    Ok(
        json!({"artifact": {"id": artifact.id, "workspaceId": artifact.workspace_id}, "released": true}),
    )
}
