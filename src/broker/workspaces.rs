//! The `workspaces/*` methods, and the Workspace checks other methods share: the active
//! Workspace of a call (touching its idle clock), and "it was released / it expired" in place
//! of a bare not-found.

use serde_json::{Value, json};

use super::connection::{ConnectionContext, Session};
use super::errors::ended_workspace;
use super::params::{WorkspaceCreate, WorkspaceRef};
use super::state::Broker;
use super::sweep::workspace_idle_limit_ms;
use crate::protocol::errors::RpcError;
use crate::protocol::ids::{IdKind, format_cursor, new_id};
use crate::session::url_policy::UrlPolicy;
use crate::store::{
    CreateWorkspace, NewWorkspace, ReleaseReason, ReleaseWorkspace, StoreError, WorkspaceLookup,
    WorkspaceOptions, WorkspaceRow,
};
use crate::version::now_ms;

/// Longest accepted `clientKey`.
const MAX_CLIENT_KEY_CHARS: usize = 256;
/// The binding of a Workspace created while discovery finds no candidate at all (the managed
/// profile is always one, so this only happens when the home cannot be read).
const NO_BROWSER_ID: &str = "browser:none";

/// How stale a Workspace's idle clock may be before a read-only call (poll, get) writes it:
/// the idle limit is minutes (at least seconds), so a second is precise enough and keeps
/// polling write-free.
const ACTIVITY_RESOLUTION_MS: i64 = 1_000;

pub async fn create(
    context: &ConnectionContext,
    session: &Session,
    params: WorkspaceCreate,
) -> Result<Value, RpcError> {
    let client_key = client_key(session, params.client_key)?;
    let url_policy = url_policy(session, params.url_policy.as_ref())?;
    let isolated = isolated(session, params.isolation.as_deref())?;
    // A retry that names the key but no browser is the same request as the first call, whatever
    // browser the Broker would pick now.
    let keyed_browser = match &client_key {
        Some(key) if params.browser_id.is_none() => {
            let (principal, key) = (session.principal.clone(), key.clone());
            context
                .broker
                .store
                .call_read(move |store| store.client_key_browser(&principal, &key))
                .await?
        }
        _ => None,
    };
    let browser_id = match params.browser_id {
        Some(id) => id,
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
        options: WorkspaceOptions {
            url_policy: url_policy.as_ref().map(UrlPolicy::to_canonical),
            isolated,
        },
        now: now_ms(),
    };
    let created = context
        .broker
        .store
        .call(move |store| store.create_workspace(&new_workspace))
        .await?;
    let (row, expired) = match created {
        CreateWorkspace::Created(row) | CreateWorkspace::Existing(row) => (row, None),
        CreateWorkspace::Replaced { row, expired } => (row, Some(expired)),
    };
    context
        .broker
        .events
        .hub()
        .add_workspace(&row.id, &session.principal);
    // On the live shared connection to its browser, if there is one.
    (context.broker.tools.browser).note_workspace(&row.id, &row.browser_id);
    // The stored policy, so a repeated clientKey installs exactly what the Workspace has.
    if let Some(policy) = row
        .options
        .url_policy
        .as_deref()
        .and_then(UrlPolicy::from_canonical)
    {
        context
            .broker
            .tools
            .browser
            .net()
            .set_policy(&row.id, policy);
    }
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

pub async fn get(
    context: &ConnectionContext,
    session: &Session,
    params: WorkspaceRef,
) -> Result<Value, RpcError> {
    let row = active_workspace(context, session, params.workspace_id).await?;
    Ok(workspace_json(&row))
}

pub async fn release(
    context: &ConnectionContext,
    session: &Session,
    params: WorkspaceRef,
) -> Result<Value, RpcError> {
    let workspace_id = params.workspace_id;
    let principal = session.principal.clone();
    let id = workspace_id.clone();
    let now = now_ms();
    let outcome = context
        .broker
        .store
        .call(move |store| store.release_workspace(&principal, &id, now, ReleaseReason::Released))
        .await?;
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
        ReleaseWorkspace::NotFound => return Err(StoreError::WorkspaceNotFound.into()),
    };
    Ok(
        json!({"workspace": {"id": workspace_id, "state": "released", "releasedAt": released_at}, "released": true}),
    )
}

/// The active Workspace `id`, owned by this Connection's Principal.
pub async fn active_workspace(
    context: &ConnectionContext,
    session: &Session,
    id: String,
) -> Result<WorkspaceRow, RpcError> {
    let principal = session.principal.clone();
    let lookup = context
        .broker
        .store
        .call_read(move |store| store.get_workspace(&principal, &id))
        .await?;
    let row = match lookup {
        WorkspaceLookup::Active(row) => row,
        WorkspaceLookup::Released(tombstone) => {
            return Err(ended_workspace(&tombstone, workspace_idle_limit_ms()));
        }
        WorkspaceLookup::NotFound => return Err(StoreError::WorkspaceNotFound.into()),
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

/// A store answer of "no such Workspace or Lease" on a call naming `workspace_id`, turned into
/// "it was released / it expired, and why" when the Workspace's tombstone is still there.
pub async fn explain_missing(
    context: &ConnectionContext,
    session: &Session,
    workspace_id: &str,
    error: StoreError,
) -> RpcError {
    if !matches!(
        error,
        StoreError::WorkspaceNotFound | StoreError::LeaseNotFound
    ) {
        return error.into();
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
        _ => error.into(),
    }
}

/// Deletes a released Workspace's Artifact bytes (its metadata went with the Workspace).
pub async fn purge_artifacts(broker: &Broker, workspace_id: &str) {
    if let Err(error) = broker.tools.artifacts.purge_workspace(workspace_id).await {
        tracing::error!(%error, "cannot remove a released workspace's artifacts");
    }
}

/// A `clientKey` as the call may send it: only on protocol 1.1, and not too long.
pub fn client_key(session: &Session, key: Option<String>) -> Result<Option<String>, RpcError> {
    let Some(key) = key else {
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
    Ok(Some(key))
}

/// A `urlPolicy` as the call may send it: only on protocol 1.1; each entry a pattern of the
/// grammar in docs/network.md ("URL policy"), a bad one named in `context.path`.
fn url_policy(session: &Session, policy: Option<&Value>) -> Result<Option<UrlPolicy>, RpcError> {
    let Some(policy) = policy.filter(|policy| !policy.is_null()) else {
        return Ok(None);
    };
    if session.negotiated.protocol.minor < 1 {
        return Err(RpcError::invalid_params("\"urlPolicy\" needs protocol 1.1")
            .with_context("path", json!("params.urlPolicy")));
    }
    UrlPolicy::from_json(policy, "params.urlPolicy").map_err(|error| {
        RpcError::invalid_params(format!("{} {}", error.path, error.message))
            .with_context("path", json!(error.path))
    })
}

/// `isolation` as the call may send it: `"context"` (a browser context of the Workspace's own,
/// protocol 1.1 only) or `"profile"` (the default shared profile, which any version may name).
fn isolated(session: &Session, isolation: Option<&str>) -> Result<bool, RpcError> {
    match isolation {
        Some("context") if session.negotiated.protocol.minor < 1 => {
            Err(RpcError::invalid_params("\"isolation\" needs protocol 1.1")
                .with_context("path", json!("params.isolation")))
        }
        Some("context") => Ok(true),
        _ => Ok(false),
    }
}

fn workspace_json(row: &WorkspaceRow) -> Value {
    let tab_set = format!(
        "{}{}",
        IdKind::ManagedTabSet.prefix(),
        row.id.trim_start_matches(IdKind::Workspace.prefix())
    );
    let mut workspace = json!({"id": row.id, "browserId": row.browser_id, "state": "active", "createdAt": row.created_at});
    if let Some(policy) = row
        .options
        .url_policy
        .as_deref()
        .and_then(UrlPolicy::from_canonical)
    {
        workspace["urlPolicy"] = policy.to_json();
    }
    if row.options.isolated {
        workspace["isolation"] = json!("context");
    }
    json!({
        "workspace": workspace,
        "managedTabSet": {"id": tab_set},
        "eventCursor": format_cursor(row.latest_sequence),
    })
}
