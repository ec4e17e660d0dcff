//! What a tool runs with: the process-wide environment and the per-call scope, including the
//! Command's dispatch gate and its record of the browser mutations it sent. It decides no
//! outcome (the broker's Command pipeline does) and sends nothing to the browser itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::error::ToolError;
use crate::artifacts::Artifacts;
use crate::cdp::{CallObserver, CdpClient};
use crate::events::EventSink;
use crate::home::Home;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::session::{BrowserService, TabTicket};
use crate::store::{CommandStatus, LeaseId, PrincipalKey, Store, TargetRef, WorkspaceId};
use crate::version::now_ms;

// The session-wide types and helpers a tool names: with `tab.rs` (the per-tab ones) this is
// the only file of `tools/` that imports `session`.
pub use crate::session::background::{Conditions, Emulated, Position, Viewport};
pub use crate::session::bounds::bound;
pub use crate::session::contexts::{ContextError, MAX_CONTEXTS};
pub use crate::session::fetch::{
    self as fetch_rules, ControlLimit, Credential, MAX_AUTH_ORIGINS, MAX_MOCK_BODY_BYTES,
    MAX_PATTERN_CHARS, MAX_RULE_HEADERS, MAX_RULES_PER_WORKSPACE, Rule, RuleAction,
};
pub use crate::session::network::{NetFilter, NetRecord};
pub use crate::session::url_policy::Blocked;
pub use crate::session::view::{
    Handoff, MAX_RECORDING_FRAME_BYTES, MAX_RECORDING_FRAMES, RECORDING_INTERVAL, Recording,
    RecordingError, open_handoff,
};
pub use crate::session::{ConnectError, TargetError};

/// Process-wide services a tool may use. Cheap to clone.
#[derive(Clone)]
pub struct ToolEnv {
    pub home: Home,
    pub store: Store,
    pub events: EventSink,
    pub browser: BrowserService,
    /// Protected Artifact storage (captures, PDFs, imports).
    pub artifacts: Artifacts,
}

impl ToolEnv {
    /// `Disconnected` unless the Workspace is on a live browser connection. Tools never get
    /// the connection's own client: CDP calls go through a Command's watched handle
    /// (`tab::TabCalls`).
    pub fn connected(&self, workspace_id: &str) -> Result<(), ToolError> {
        self.browser
            .live_of(workspace_id)
            .map(|_| ())
            .ok_or(ToolError::Disconnected)
    }
}

/// Whether a CDP method changes the browser or the page when it arrives: one of the whole method
/// names of `cdp::MUTATING_METHODS` (a page script that writes announces itself instead:
/// `page::Script::writes_page`).
pub fn mutates_browser(method: &str) -> bool {
    crate::cdp::MUTATING_METHODS.contains(&method)
}

/// The browser mutations a Command sent: the first one and how many. Once there is one, a
/// failure of a mutating Command has an unknown outcome (see `broker::commands`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutationsSent {
    /// The first mutating CDP method, or `script:NAME` for a page script that writes.
    pub first: String,
    pub count: u32,
    /// When the first one was sent (ms since the epoch).
    pub first_at: i64,
}

impl MutationsSent {
    /// The `context.dispatched` value of an `unknown_outcome` error.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"first": self.first, "count": self.count, "firstAt": self.first_at})
    }
}

/// Records the mutations sent through the CDP handles of one Command. The one hook: tools get
/// their handle from [`DispatchGate::watch`], so every call they send is seen here.
#[derive(Default)]
struct MutationLog {
    sent: Mutex<Option<MutationsSent>>,
}

impl MutationLog {
    fn note(&self, what: String) {
        let mut sent = self.sent.lock().expect("mutation log lock");
        match sent.as_mut() {
            Some(sent) => sent.count = sent.count.saturating_add(1),
            None => {
                *sent = Some(MutationsSent {
                    first: what,
                    count: 1,
                    first_at: now_ms(),
                })
            }
        }
    }
}

impl CallObserver for MutationLog {
    fn on_sent(&self, method: &str) {
        if mutates_browser(method) {
            self.note(method.to_owned());
        }
    }

    fn on_page_write(&self, what: &str) {
        self.note(format!("script:{what}"));
    }
}

/// Marks the Command dispatched exactly once, at the moment it is about to touch the browser.
/// A Command cancelled while it waited is refused here, so cancellation before dispatch never
/// reaches the browser. It also hands out the Command's CDP handle ([`DispatchGate::watch`]),
/// which records every browser mutation the Command sends.
#[derive(Clone)]
pub struct DispatchGate {
    store: Store,
    events: EventSink,
    command_id: String,
    /// The Command's Workspace, whose connection's generation fences it.
    workspace_id: Option<String>,
    /// The browser connection generation the Command was accepted under.
    generation: u64,
    done: Arc<AtomicBool>,
    mutations: Arc<MutationLog>,
}

impl DispatchGate {
    pub fn new(
        store: Store,
        events: EventSink,
        command_id: String,
        (workspace_id, generation): (Option<String>, u64),
    ) -> DispatchGate {
        DispatchGate {
            store,
            events,
            command_id,
            workspace_id,
            generation,
            done: Arc::new(AtomicBool::new(false)),
            mutations: Arc::new(MutationLog::default()),
        }
    }

    /// Whether the Command passed the gate (it may have touched the browser).
    pub fn passed(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    /// The CDP handle a tool sends this Command's calls through: a clone of `client` whose
    /// mutating calls are recorded for [`DispatchGate::mutations_sent`].
    pub fn watch(&self, client: &CdpClient) -> CdpClient {
        client.observed(self.mutations.clone())
    }

    /// The browser mutations sent so far, if any.
    pub fn mutations_sent(&self) -> Option<MutationsSent> {
        self.mutations
            .sent
            .lock()
            .expect("mutation log lock")
            .clone()
    }

    pub async fn pass(&self) -> Result<(), RpcError> {
        self.pass_fenced(true).await
    }

    /// `pass` without the generation fence, for `browser.connect` only: it makes or joins the
    /// browser connection itself, so a connection made after it was accepted (by a concurrent
    /// `browser.connect` it shares the attempt with) is the one it asked for, not an older one.
    pub async fn pass_connecting(&self) -> Result<(), RpcError> {
        self.pass_fenced(false).await
    }

    async fn pass_fenced(&self, fence: bool) -> Result<(), RpcError> {
        if self.done.load(Ordering::SeqCst) {
            return Ok(());
        }
        // Fence: a Command accepted against an older browser connection never reaches the new one.
        let current = self.events.generation_of(self.workspace_id.as_deref());
        if fence && current != self.generation {
            return Err(RpcError::new(
                ErrorCode::BrowserDisconnected,
                "the browser connection changed after this Command was accepted",
            )
            .with_context("acceptedGeneration", serde_json::json!(self.generation))
            .with_context("currentGeneration", serde_json::json!(current))
            .with_remediation(
                RemediationAction::ListTabs,
                "Call browser.tabs.list to rebuild target state, then retry with a fresh call.",
            ));
        }
        let store = self.store.clone();
        let id = self.command_id.clone();
        let row = match store
            .call(move |store| store.mark_dispatched(&id, now_ms()))
            .await
        {
            Ok(row) => row,
            Err(error) => {
                tracing::error!(%error, "cannot mark a command dispatched");
                return Err(RpcError::new(
                    ErrorCode::InternalError,
                    "internal store error",
                ));
            }
        };
        match row.status {
            CommandStatus::Dispatched => {
                self.done.store(true, Ordering::SeqCst);
                Ok(())
            }
            _ => Err(RpcError::new(
                ErrorCode::Cancelled,
                "the Command was cancelled before it reached the browser",
            )),
        }
    }
}

/// The envelope ids of one call, as the tool's declared `Scope` guarantees them: the Broker
/// builds exactly the variant the tool's handler kind needs (see `broker::commands::accept`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeIds {
    Connection,
    /// A Workspace tool; `target_id` is the envelope's optional `targetId`.
    Workspace {
        workspace_id: WorkspaceId,
        lease_id: LeaseId,
        target_id: Option<TargetRef>,
    },
    Target {
        workspace_id: WorkspaceId,
        lease_id: LeaseId,
        target_id: TargetRef,
    },
}

/// Who is calling and on what, for one `tools/call`.
pub struct CallScope {
    pub principal: PrincipalKey,
    /// The capabilities the calling Connection was granted: a tool that needs a second one
    /// beyond its own (`profile.write` for a cookie write into the shared profile) asks
    /// [`CallScope::granted`].
    pub capabilities: Vec<String>,
    pub connection_id: String,
    /// The envelope ids; handlers read them through [`WorkspaceScope`] / [`TargetScope`].
    pub ids: ScopeIds,
    pub command_id: String,
    pub deadline: tokio::time::Instant,
    /// `bridge --browser` preference of the calling bridge.
    pub browser_preference: Option<String>,
    pub gate: DispatchGate,
    /// The tab-queue place taken at acceptance, for tools addressing `target_id`.
    pub ticket: std::sync::Mutex<Option<TabTicket>>,
}

impl ScopeIds {
    /// The Workspace, if the scope has one (the Broker's bookkeeping; handlers use the typed
    /// scopes).
    pub fn workspace_id(&self) -> Option<&WorkspaceId> {
        match self {
            ScopeIds::Connection => None,
            ScopeIds::Workspace { workspace_id, .. } | ScopeIds::Target { workspace_id, .. } => {
                Some(workspace_id)
            }
        }
    }

    /// The Lease, if the scope has one.
    pub fn lease_id(&self) -> Option<&LeaseId> {
        match self {
            ScopeIds::Connection => None,
            ScopeIds::Workspace { lease_id, .. } | ScopeIds::Target { lease_id, .. } => {
                Some(lease_id)
            }
        }
    }

    /// The envelope `targetId`, if any.
    pub fn target_id(&self) -> Option<&TargetRef> {
        match self {
            ScopeIds::Connection => None,
            ScopeIds::Workspace { target_id, .. } => target_id.as_ref(),
            ScopeIds::Target { target_id, .. } => Some(target_id),
        }
    }
}

impl CallScope {
    /// Whether the calling Connection was granted `capability`.
    pub fn granted(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// The typed scope of a Workspace (or Target) tool.
    pub fn workspace(&self) -> Option<WorkspaceScope<'_>> {
        match &self.ids {
            ScopeIds::Connection => None,
            ScopeIds::Workspace {
                workspace_id,
                lease_id,
                target_id,
            } => Some(WorkspaceScope {
                call: self,
                workspace_id,
                lease_id,
                target_id: target_id.as_ref(),
            }),
            ScopeIds::Target {
                workspace_id,
                lease_id,
                target_id,
            } => Some(WorkspaceScope {
                call: self,
                workspace_id,
                lease_id,
                target_id: Some(target_id),
            }),
        }
    }

    /// The typed scope of a Target tool (or of a Workspace tool given a `targetId`).
    pub fn target(&self) -> Option<TargetScope<'_>> {
        self.workspace().and_then(|workspace| workspace.target())
    }
}

/// What a `Scope::Workspace` handler runs with: the call plus the ids that scope guarantees.
/// Derefs to the [`CallScope`] for the gate, deadline and principal.
#[derive(Clone, Copy)]
pub struct WorkspaceScope<'a> {
    call: &'a CallScope,
    pub workspace_id: &'a WorkspaceId,
    pub lease_id: &'a LeaseId,
    target_id: Option<&'a TargetRef>,
}

impl<'a> WorkspaceScope<'a> {
    /// The target scope when the envelope also named a tab (`browser.open` into a tab).
    pub fn target(&self) -> Option<TargetScope<'a>> {
        self.target_id.map(|target_id| TargetScope {
            workspace: *self,
            target_id,
        })
    }

    /// The scope of one of the Workspace's own tabs that a Workspace tool visits in turn
    /// (`browser.storage.save` reading each tab's storage), by its opaque id.
    pub fn visiting<'t>(&self, target_id: &'t TargetRef) -> TargetScope<'t>
    where
        'a: 't,
    {
        TargetScope {
            workspace: WorkspaceScope {
                call: self.call,
                workspace_id: self.workspace_id,
                lease_id: self.lease_id,
                target_id: Some(target_id),
            },
            target_id,
        }
    }
}

impl std::ops::Deref for WorkspaceScope<'_> {
    type Target = CallScope;

    fn deref(&self) -> &CallScope {
        self.call
    }
}

/// What a `Scope::Target` handler runs with: a Workspace scope plus the tab's opaque
/// `targetId`. Derefs to the [`WorkspaceScope`].
#[derive(Clone, Copy)]
pub struct TargetScope<'a> {
    workspace: WorkspaceScope<'a>,
    pub target_id: &'a TargetRef,
}

impl<'a> std::ops::Deref for TargetScope<'a> {
    type Target = WorkspaceScope<'a>;

    fn deref(&self) -> &WorkspaceScope<'a> {
        &self.workspace
    }
}

/// Decodes a tool's `#[derive(Deserialize)]` params from its arguments, once, in the
/// `handler!` wrapper, after the manifest's schema validated them: unknown fields are the
/// schema's to refuse (`additionalProperties: false`; serde cannot combine `flatten` with
/// `deny_unknown_fields`), so a failure here is the schema and the struct out of step, a bug
/// (`internal_error`).
pub fn decode_params<P: serde::de::DeserializeOwned>(
    arguments: Map<String, Value>,
) -> Result<P, super::error::ToolError> {
    serde_json::from_value(Value::Object(arguments)).map_err(|error| {
        tracing::error!(%error, "arguments passed the tool's schema but not its params struct");
        RpcError::new(
            ErrorCode::InternalError,
            format!("the tool's params struct does not match its schema: {error}"),
        )
        .into()
    })
}

/// [`decode_params`] into the params type of `tool`'s third parameter: what `handler!` checks
/// the documented examples with.
pub fn decode_params_of<'a, S: ?Sized, P: serde::de::DeserializeOwned, F>(
    _tool: fn(&'a ToolEnv, &'a S, P) -> F,
    arguments: Map<String, Value>,
) -> Result<P, super::error::ToolError> {
    decode_params(arguments)
}

/// The params of a tool that takes no arguments.
#[derive(Debug, Default, serde::Deserialize)]
pub struct NoParams {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_cdp_methods_mutate_the_browser() {
        for method in [
            "Input.dispatchMouseEvent",
            "Input.dispatchKeyEvent",
            "Input.insertText",
            "Page.navigate",
            "Page.reload",
            "Page.navigateToHistoryEntry",
            "Page.handleJavaScriptDialog",
            "DOM.setFileInputFiles",
            "DOM.setAttributeValue",
            "DOM.removeNode",
            "Target.createTarget",
            "Target.closeTarget",
            "Network.setCookie",
        ] {
            assert!(mutates_browser(method), "{method}");
        }
        for method in [
            "Runtime.callFunctionOn",
            "Runtime.evaluate",
            "Page.getFrameTree",
            "Page.captureScreenshot",
            "Page.createIsolatedWorld",
            "Page.enable",
            "DOM.getBoxModel",
            "DOM.setInspectedNode",
            "Target.attachToTarget",
            "Target.getTargets",
            "Network.getCookies",
            "Emulation.setDeviceMetricsOverride",
            "Input",
            "",
        ] {
            assert!(!mutates_browser(method), "{method}");
        }
    }

    #[test]
    fn the_log_keeps_the_first_mutation_and_counts_the_rest() {
        let log = MutationLog::default();
        log.on_sent("Runtime.callFunctionOn");
        assert_eq!(*log.sent.lock().unwrap(), None);
        log.on_page_write("setNativeValue");
        log.on_sent("Input.dispatchKeyEvent");
        log.on_sent("Page.getFrameTree");
        let sent = log.sent.lock().unwrap().clone().unwrap();
        assert_eq!(sent.first, "script:setNativeValue");
        assert_eq!(sent.count, 2);
    }

    #[test]
    fn scope_ids_answer_only_what_their_scope_guarantees() {
        assert_eq!(ScopeIds::Connection.workspace_id(), None);
        assert_eq!(ScopeIds::Connection.target_id(), None);
        let workspace = ScopeIds::Workspace {
            workspace_id: "workspace:a".into(),
            lease_id: "lease:a".into(),
            target_id: None,
        };
        assert_eq!(workspace.workspace_id(), Some(&"workspace:a".into()));
        assert_eq!(workspace.lease_id(), Some(&"lease:a".into()));
        assert_eq!(workspace.target_id(), None);
        let target = ScopeIds::Target {
            workspace_id: "workspace:a".into(),
            lease_id: "lease:a".into(),
            target_id: "target:t".into(),
        };
        assert_eq!(target.target_id(), Some(&"target:t".into()));
    }
}
