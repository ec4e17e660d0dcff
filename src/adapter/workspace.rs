//! A host work scope mapped to a Workspace: creation by `clientKey`, Leases, Workspace and
//! Target tool calls, and cleanup.
//!
//! Owns the local validity of one Workspace: after [`Workspace::release`] every handle refuses
//! further calls and every Lease stops renewing, even when the Broker's release failed (Lease
//! expiry is then the bounded fallback). Event cursors live in `events.rs`, Artifact conversion
//! in `artifacts.rs`. Nothing here is written to disk.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::lease::{Lease, LeaseOptions};
use super::session::{BridgeSession, PendingTool, ToolCall, ToolOutcome};
use crate::protocol::errors::{ErrorCode, RpcError};

/// Options for `workspaces/create`.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceOptions {
    /// Makes creation idempotent within the Principal: the same key returns the same Workspace.
    pub client_key: Option<String>,
    pub browser_id: Option<String>,
    /// Protocol 1.1 `urlPolicy` `{allow, block}` (docs/network.md, "URL policy"), sent as is.
    pub url_policy: Option<Value>,
}

/// One active Workspace of a [`BridgeSession`].
pub struct Workspace {
    pub(super) session: BridgeSession,
    id: String,
    browser_id: Option<String>,
    closed: AtomicBool,
    closing: watch::Sender<bool>,
    /// The last fully processed event cursor (see `events.rs`). Memory only.
    pub(super) cursor: std::sync::Mutex<String>,
    /// `previous` of the create answer: the Workspace this `clientKey` named before the Broker
    /// reclaimed it as idle (told once, to the first create after the reclaim).
    previous: Option<Value>,
}

impl BridgeSession {
    /// `workspaces/create` (idempotent by `clientKey`).
    pub async fn create_workspace(
        &self,
        options: &WorkspaceOptions,
    ) -> Result<Workspace, RpcError> {
        let mut params = json!({});
        if let Some(key) = &options.client_key {
            params["clientKey"] = json!(key);
        }
        if let Some(browser_id) = &options.browser_id {
            params["browserId"] = json!(browser_id);
        }
        if let Some(policy) = &options.url_policy {
            params["urlPolicy"] = policy.clone();
        }
        let created = self.request("workspaces/create", params).await?;
        let (closing, _) = watch::channel(false);
        Ok(Workspace {
            session: self.clone(),
            id: created["workspace"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            browser_id: created["workspace"]["browserId"]
                .as_str()
                .map(str::to_owned),
            closed: AtomicBool::new(false),
            closing,
            cursor: std::sync::Mutex::new(
                created["eventCursor"]
                    .as_str()
                    .unwrap_or("cursor:0")
                    .to_owned(),
            ),
            previous: created.get("previous").filter(|p| p.is_object()).cloned(),
        })
    }
}

impl Workspace {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The reclaimed Workspace this one replaced under its `clientKey`, as the Broker described
    /// it (`id`, `state: "expired"`, `reason`, `releasedAt`, `idleLimitMs`).
    pub fn previous(&self) -> Option<&Value> {
        self.previous.as_ref()
    }

    pub fn browser_id(&self) -> Option<&str> {
        self.browser_id.as_deref()
    }

    pub fn session(&self) -> &BridgeSession {
        &self.session
    }

    pub fn is_released(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The local refusal once this Workspace was released (or its release was attempted).
    pub(super) fn check_open(&self) -> Result<(), RpcError> {
        match self.is_released() {
            false => Ok(()),
            true => Err(RpcError::new(
                ErrorCode::WorkspaceNotFound,
                "this Workspace was released by the host",
            )
            .with_context("state", json!("released"))),
        }
    }

    /// A Lease for the host's active invocation, renewed by its own task.
    pub async fn create_lease(&self, options: &LeaseOptions) -> Result<Lease, RpcError> {
        self.check_open()?;
        Lease::create(&self.session, &self.id, options, self.closing.subscribe()).await
    }

    /// A Workspace or Target tool call under `lease`.
    pub async fn call(&self, lease: &Lease, call: &ToolCall) -> Result<ToolOutcome, RpcError> {
        self.start_call(lease, call).await?.outcome().await
    }

    /// Sends the call and returns once it is queued (see [`BridgeSession::start_tool`]).
    pub async fn start_call(
        &self,
        lease: &Lease,
        call: &ToolCall,
    ) -> Result<PendingTool, RpcError> {
        self.check_open()?;
        if let Some(error) = lease.unusable() {
            return Err(error);
        }
        let mut envelope = Map::new();
        envelope.insert("workspaceId".into(), json!(self.id));
        envelope.insert("leaseId".into(), json!(lease.id()));
        self.session.start_tool(call, envelope).await
    }

    /// `commands/cancel` for a host call on this Workspace.
    pub async fn cancel(&self, host_call_id: &str) -> Result<Value, RpcError> {
        self.session.cancel(host_call_id, Some(&self.id)).await
    }

    /// `workspaces/get`.
    pub async fn get(&self) -> Result<Value, RpcError> {
        self.check_open()?;
        self.session
            .request("workspaces/get", json!({"workspaceId": self.id}))
            .await
    }

    /// Releases the Workspace explicitly (EOF alone releases only Leases). Local state is
    /// invalidated first, so no stale call can follow, whatever the Broker answers.
    pub async fn release(&self) -> Result<Value, RpcError> {
        self.closed.store(true, Ordering::SeqCst);
        self.closing.send_replace(true);
        self.cursor.lock().expect("cursor lock").clear();
        self.session
            .request("workspaces/release", json!({"workspaceId": self.id}))
            .await
    }
}
