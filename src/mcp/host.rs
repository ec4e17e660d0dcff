//! One MCP session on the adapter library: one bridge, one Workspace and one renewable Lease,
//! the session's default tab, and each MCP tool call turned into a Broker Command.
//!
//! Owns the session's in-memory state (Workspace, Lease, default `targetId`, event cursor via
//! the adapter, the completed downloads) and what to do with Artifacts and events: images
//! become image content, PDFs and full-size originals are exported, downloads are only
//! announced and stay Artifacts until the host exports one by name (`files.rs`). It speaks to
//! the Broker only through `crate::adapter`; it knows nothing of MCP framing (that is
//! `server.rs`) and writes no state to disk, only the exports the user's `--output-dir`
//! receives.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::{Mutex, OnceCell, watch};

use super::content::{self, Extras};
use super::files::{self, Downloads, EXPORT_TOOL, IMPORT_TOOL};
use super::options::McpOptions;
use super::tools::{mcp_error, mcp_name, mcp_tool};

use crate::adapter::lean::{self, Notes};
use crate::adapter::{
    BridgeSession, ClientIdentity, LaunchSpec, Lease, LeaseOptions, SessionOptions, ToolCall,
    ToolInfo, ToolScope, Workspace, WorkspaceOptions,
};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// Events read per page when the session follows its journal after a call.
const EVENT_PAGE: u32 = 200;

/// Tools after which the server observes the tab itself, since a new document is shown whole.
const OBSERVED_AFTER: &[&str] = &["browser.open", "browser.navigate"];

/// Hands out [`Turn`]s in the order MCP requests arrive.
pub struct Sequencer {
    next_ticket: u64,
    serving: Arc<watch::Sender<u64>>,
}

impl Default for Sequencer {
    fn default() -> Sequencer {
        Sequencer {
            next_ticket: 0,
            serving: Arc::new(watch::channel(0).0),
        }
    }
}

impl Sequencer {
    pub fn next(&mut self) -> Turn {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        Turn {
            ticket,
            serving: self.serving.clone(),
        }
    }
}

/// A call's place in line: it prepares and sends its bridge request only when every earlier
/// call has sent (or failed before sending), so the Broker accepts the calls in the order the
/// client wrote them even though each runs in its own task. Dropping it lets the next one go.
pub struct Turn {
    ticket: u64,
    serving: Arc<watch::Sender<u64>>,
}

impl Turn {
    async fn wait(&self) {
        let mut serving = self.serving.subscribe();
        let _ = serving.wait_for(|now| *now >= self.ticket).await;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let next = self.ticket + 1;
        self.serving.send_modify(|now| *now = (*now).max(next));
    }
}

/// The Workspace and Lease of the session, created on the first Workspace or Target tool.
struct Scope {
    workspace: Workspace,
    /// Replaced when the Broker lets it lapse (for example after the machine slept).
    lease: Mutex<Arc<Lease>>,
}

/// The session's one Lease, found again by this key on the same Connection.
const LEASE_KEY: &str = "mcp-session";

/// Errors after which a new Lease is taken: the call was refused before it was recorded, so
/// running it under a new Lease cannot run it twice.
fn lease_gone(error: &RpcError) -> bool {
    matches!(
        error.code,
        ErrorCode::LeaseExpired | ErrorCode::LeaseNotFound | ErrorCode::LeaseNotOwned
    )
}

/// The state of one MCP session.
pub struct Host {
    session: BridgeSession,
    options: McpOptions,
    /// The managed browser's candidate id when `--headless` launched it.
    browser_id: Option<String>,
    scope: OnceCell<Scope>,
    /// The tab the session last opened or selected.
    current_target: std::sync::Mutex<Option<String>>,
    /// One event follower at a time, so events are processed once and in order.
    events: Mutex<()>,
    /// Completed downloads the host may export, and the export budget spent.
    downloads: std::sync::Mutex<Downloads>,
    /// The latest Observation of each tab in this session: the default `observationId` of a
    /// ref and the base of the next action's diff.
    observations: std::sync::Mutex<HashMap<String, String>>,
}

impl Host {
    /// Launches this executable's bridge and negotiates; with `--headless`, starts the managed
    /// Chromium when no candidate is ready.
    pub async fn start(options: McpOptions, client_name: &str) -> Result<Host, RpcError> {
        let mut spec = LaunchSpec::current_executable()?;
        spec.browser = options.browser.clone();
        let mut identity =
            ClientIdentity::ephemeral("browser-pilot-mcp", "Browser Pilot MCP", "mcp-session");
        if !client_name.is_empty() {
            identity.name = format!("Browser Pilot MCP for {client_name}")
                .chars()
                .take(200)
                .collect();
        }
        let session_options = SessionOptions {
            capabilities: options.capabilities.clone(),
            ..SessionOptions::default()
        };
        let (session, mut notifications) =
            BridgeSession::launch(&spec, &identity, &session_options).await?;
        // Notifications are only a low-latency hint; the journal is followed by cursor.
        tokio::spawn(async move { while notifications.recv().await.is_some() {} });
        let ready = session
            .initialized()
            .browsers
            .iter()
            .any(|candidate| candidate["state"] == "ready");
        let browser_id = match (options.headless, ready) {
            (true, false) => Some(launch_managed_browser(&spec).await?),
            _ => None,
        };
        Ok(Host {
            session,
            options,
            browser_id,
            scope: OnceCell::new(),
            current_target: std::sync::Mutex::new(None),
            events: Mutex::new(()),
            downloads: std::sync::Mutex::new(Downloads::default()),
            observations: std::sync::Mutex::new(HashMap::new()),
        })
    }

    pub fn tools(&self) -> &[ToolInfo] {
        self.session.tools()
    }

    fn tool_by_mcp_name(&self, name: &str) -> Option<&ToolInfo> {
        self.session
            .tools()
            .iter()
            .find(|tool| mcp_name(&tool.name) == name)
    }

    pub fn knows_tool(&self, name: &str) -> bool {
        self.tool_by_mcp_name(name).is_some() || self.file_tools().contains(&name)
    }

    /// The server's own file tools this session offers: the import only with `--upload-dir`
    /// and `browser.upload` granted; the download export when downloads can be seen (events)
    /// and exported (Artifacts).
    fn file_tools(&self) -> Vec<&'static str> {
        let artifacts = self.session.granted("artifact.read");
        let mut names = Vec::new();
        let upload = self
            .tools()
            .iter()
            .any(|tool| tool.name == "browser.upload");
        if artifacts && upload && !self.options.upload_dirs.is_empty() {
            names.push(IMPORT_TOOL);
        }
        if artifacts && self.session.granted("event.read") {
            names.push(EXPORT_TOOL);
        }
        names
    }

    /// The MCP `tools/list`: every Broker tool, then the server's own file tools.
    pub fn tool_list(&self) -> Vec<Value> {
        let mut list: Vec<Value> = self
            .tools()
            .iter()
            .map(|tool| mcp_tool(tool, self.tools(), self.options.structured))
            .collect();
        for name in self.file_tools() {
            let mut entry = match name {
                IMPORT_TOOL => files::import_tool(),
                _ => files::export_tool(),
            };
            if !self.options.structured
                && let Some(entry) = entry.as_object_mut()
            {
                entry.remove("outputSchema");
            }
            list.push(entry);
        }
        list
    }

    /// The Workspace and Lease, created once; the session's browser connection is requested
    /// with the first of them (unless that call is `browser.connect` itself).
    async fn scope(&self, connecting: bool) -> Result<&Scope, RpcError> {
        self.scope
            .get_or_try_init(|| async {
                let workspace = self
                    .session
                    .create_workspace(&WorkspaceOptions {
                        client_key: Some("mcp-session".to_owned()),
                        browser_id: self.browser_id.clone(),
                        url_policy: self.options.url_policy.clone(),
                    })
                    .await?;
                let lease = workspace.create_lease(&lease_options()).await?;
                if !connecting {
                    let mut arguments = json!({});
                    if let Some(browser_id) = &self.browser_id {
                        arguments["browserId"] = json!(browser_id);
                    }
                    let connect = ToolCall::new(
                        "browser.connect",
                        arguments,
                        format!("connect-{}", crate::adapter::random_hex(4)),
                    );
                    workspace.call(&lease, &connect).await?;
                }
                Ok(Scope {
                    workspace,
                    lease: Mutex::new(Arc::new(lease)),
                })
            })
            .await
    }

    /// One MCP `tools/call`; always a tool result (errors have `isError`). `turn` keeps calls
    /// in the order the client sent them until each is queued for the bridge.
    pub async fn call(
        &self,
        name: &str,
        arguments: Value,
        host_call_id: &str,
        turn: Turn,
        cancelled: watch::Receiver<bool>,
    ) -> Value {
        if self.file_tools().contains(&name) {
            turn.wait().await;
            let outcome = match name {
                IMPORT_TOOL => self.import_file(arguments).await,
                _ => self.export_download(arguments).await,
            };
            drop(turn);
            return match outcome {
                Ok((result, extras)) => {
                    let text = lean::text(name, &result, &Notes::default());
                    content::success(
                        None,
                        &Value::Null,
                        &result,
                        extras,
                        text,
                        self.options.structured,
                    )
                }
                Err(error) => content::error(None, &mcp_error(error, self.tools())),
            };
        }
        let Some(tool) = self.tool_by_mcp_name(name) else {
            let error = RpcError::new(ErrorCode::ToolNotFound, format!("no tool named {name:?}"));
            return content::error(None, &error);
        };
        match self
            .run(tool, arguments, host_call_id, turn, cancelled)
            .await
        {
            Ok(result) => result,
            Err(error) => content::error(Some(tool), &mcp_error(error, self.tools())),
        }
    }

    async fn run(
        &self,
        tool: &ToolInfo,
        arguments: Value,
        host_call_id: &str,
        turn: Turn,
        cancelled: watch::Receiver<bool>,
    ) -> Result<Value, RpcError> {
        turn.wait().await;
        // A call the client cancelled while it waited for its turn is never sent.
        let not_sent = || {
            RpcError::new(
                ErrorCode::Cancelled,
                "cancelled by the client before it was sent to the Broker",
            )
        };
        if *cancelled.borrow() {
            return Err(not_sent());
        }
        let mut arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => return Err(RpcError::invalid_params("\"arguments\" must be an object")),
        };
        let explicit_target = match tool.scope {
            ToolScope::Target => match arguments.remove("targetId") {
                Some(Value::String(id)) => Some(id),
                None | Some(Value::Null) => None,
                Some(_) => return Err(RpcError::invalid_params("\"targetId\" must be a string")),
            },
            _ => None,
        };
        if tool.scope == ToolScope::Connection {
            let call = ToolCall::new(&tool.name, Value::Object(arguments), host_call_id);
            let pending = self.session.start_tool(&call, Map::new()).await?;
            drop(turn);
            let outcome = pending.outcome().await?;
            let text = lean::text(&tool.name, &outcome.result, &Notes::default());
            return Ok(content::success(
                Some(tool),
                &outcome.command,
                &outcome.result,
                Extras::default(),
                text,
                self.options.structured,
            ));
        }
        let scope = self.scope(tool.name == "browser.connect").await?;
        let mut target_id = None;
        if tool.scope == ToolScope::Target {
            let target = explicit_target.or_else(|| self.current_target());
            let Some(target) = target else {
                return Err(RpcError::invalid_params(
                    "this tool needs a tab: none was opened or selected in this session yet",
                )
                .with_remediation(
                    RemediationAction::OpenTab,
                    "Call browser_open with a URL, or pass a targetId from browser_tabs_list.",
                ));
            };
            self.lean_arguments(tool, &target, &mut arguments);
            target_id = Some(target);
        }
        let call =
            ToolCall::new(&tool.name, Value::Object(arguments), host_call_id).on_target(target_id);
        let mut lease = self.lease(scope, None).await?;
        if *cancelled.borrow() {
            return Err(not_sent());
        }
        let pending = scope.workspace.start_call(&lease, &call).await;
        drop(turn);
        let outcome = match async { pending?.outcome().await }.await {
            Err(error) if lease_gone(&error) => {
                lease = self.lease(scope, Some(&lease)).await?;
                scope.workspace.call(&lease, &call).await?
            }
            other => other?,
        };
        self.remember_target(tool, &call, &outcome.result);
        let mut extras = Extras::default();
        self.convert_artifacts(scope, &lease, tool, &outcome.result, &mut extras)
            .await?;
        let tab = call
            .target_id
            .clone()
            .or_else(|| outcome.result["targetId"].as_str().map(str::to_owned));
        let mut notes = Notes::default();
        let mut result = outcome.result.clone();
        if let Some(tab) = &tab {
            self.remember_observation(tab, &result);
            self.state_what_left(scope, &lease, tab, &result, host_call_id, &mut notes)
                .await;
            if OBSERVED_AFTER.contains(&tool.name.as_str()) {
                result = self
                    .observe_after(scope, &lease, tool, tab, result, host_call_id, &mut notes)
                    .await;
            }
        }
        self.follow_events(scope, &mut extras).await;
        let text = lean::text(&tool.name, &result, &notes);
        Ok(content::success(
            Some(tool),
            &outcome.command,
            &outcome.result,
            extras,
            text,
            self.options.structured,
        ))
    }

    /// The lean shape of a tab tool's arguments against the tab's latest Observation in this
    /// session (`lean::arguments`).
    fn lean_arguments(&self, tool: &ToolInfo, target: &str, arguments: &mut Map<String, Value>) {
        let latest = self
            .observations
            .lock()
            .expect("observations lock")
            .get(target)
            .cloned();
        lean::arguments(tool, latest.as_deref(), arguments);
    }

    fn remember_observation(&self, tab: &str, result: &Value) {
        if let Some(id) = result["observationId"].as_str() {
            self.observations
                .lock()
                .expect("observations lock")
                .insert(tab.to_owned(), id.to_owned());
        }
    }

    /// A dialog the action left open and a popup it opened are stated with what to do next.
    async fn state_what_left(
        &self,
        scope: &Scope,
        lease: &Lease,
        tab: &str,
        result: &Value,
        host_call_id: &str,
        notes: &mut Notes,
    ) {
        let effects = |name: &str| {
            result["evidence"]["effects"]
                .as_array()
                .is_some_and(|list| list.iter().any(|e| e == name))
        };
        if result["dialogOpen"] == true || effects("dialog_opened") {
            let listed = self
                .side_call(scope, lease, "browser.dialogs.list", None, host_call_id)
                .await;
            let mut stated = false;
            for dialog in listed["dialogs"].as_array().into_iter().flatten() {
                if dialog["targetId"] != tab {
                    continue;
                }
                stated = true;
                notes.lines.push(format!(
                    "dialog {} {} is waiting: answer with browser_dialogs_respond dialogId {}",
                    dialog["type"].as_str().unwrap_or("dialog"),
                    dialog["message"],
                    dialog["dialogId"].as_str().unwrap_or(""),
                ));
            }
            if !stated && result["dialogOpen"] == true {
                notes.lines.push(
                    "a dialog is open: browser_dialogs_list, then browser_dialogs_respond"
                        .to_owned(),
                );
            }
        }
        if effects("popup_opened") {
            let listed = self
                .side_call(scope, lease, "browser.tabs.list", None, host_call_id)
                .await;
            let popups: Vec<String> = listed["tabs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["openerTargetId"] == tab)
                .map(|t| {
                    format!(
                        "popup {} {} {} (pass it as targetId)",
                        t["targetId"].as_str().unwrap_or(""),
                        t["title"],
                        t["url"].as_str().unwrap_or("")
                    )
                })
                .collect();
            match popups.is_empty() {
                true => notes
                    .lines
                    .push("a popup opened: browser_tabs_list shows it".to_owned()),
                false => notes.lines.extend(popups),
            }
        }
    }

    /// After `browser.open` / `browser.navigate`: the new document's full compact Observation
    /// (what the model would ask for next), recorded as the tab's latest. The tool's own result
    /// is kept when the Observation fails.
    #[allow(clippy::too_many_arguments)]
    async fn observe_after(
        &self,
        scope: &Scope,
        lease: &Lease,
        tool: &ToolInfo,
        tab: &str,
        result: Value,
        host_call_id: &str,
        notes: &mut Notes,
    ) -> Value {
        let arguments = lean::observe_arguments();
        let observed = self
            .side_call(
                scope,
                lease,
                "browser.observe",
                Some((tab, arguments)),
                host_call_id,
            )
            .await;
        if !observed["observationId"].is_string() {
            return result;
        }
        self.remember_observation(tab, &observed);
        if tool.name == "browser.open" {
            notes
                .lines
                .push(format!("opened tab {tab} (the default from now on)"));
        }
        observed
    }

    /// A call the server makes for the model's sake; its failure is only logged (`Null`).
    async fn side_call(
        &self,
        scope: &Scope,
        lease: &Lease,
        name: &str,
        target: Option<(&str, Value)>,
        host_call_id: &str,
    ) -> Value {
        let (target, arguments) = match target {
            Some((tab, arguments)) => (Some(tab.to_owned()), arguments),
            None => (None, json!({})),
        };
        let suffix = name.rsplit('.').next().unwrap_or("side");
        let call =
            ToolCall::new(name, arguments, format!("{host_call_id}-{suffix}")).on_target(target);
        match scope.workspace.call(lease, &call).await {
            Ok(outcome) => outcome.result,
            Err(error) => {
                tracing::debug!(%error, tool = name, "side call");
                Value::Null
            }
        }
    }

    /// `browser_file_import`: a regular file under an upload directory, symlinks resolved,
    /// copied into protected storage by `artifacts/import`.
    async fn import_file(&self, arguments: Value) -> Result<(Value, Extras), RpcError> {
        let path = arguments["path"]
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("\"path\" must be a string"))?;
        let resolved = files::importable(path, &self.options.upload_dirs)?;
        let scope = self.scope(false).await?;
        let lease = self.lease(scope, None).await?;
        let mut params = json!({
            "workspaceId": scope.workspace.id(),
            "leaseId": lease.id(),
            "path": resolved.to_string_lossy(),
        });
        if let Some(mime) = arguments["mimeType"].as_str() {
            params["mimeType"] = json!(mime);
        }
        let imported = self.session.request("artifacts/import", params).await?;
        let extras = Extras {
            artifact_sensitivity: vec!["user_file".to_owned()],
            ..Extras::default()
        };
        Ok((json!({"artifact": imported["artifact"]}), extras))
    }

    /// `browser_download_export`: one completed download of this session, named by the host,
    /// into `--output-dir` under its safe name, within the session's budget.
    async fn export_download(&self, arguments: Value) -> Result<(Value, Extras), RpcError> {
        let artifact_id = arguments["artifactId"]
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("\"artifactId\" must be a string"))?;
        let scope = self.scope(false).await?;
        let lease = self.lease(scope, None).await?;
        let file = scope
            .workspace
            .export_download(
                &lease,
                &self.downloads,
                artifact_id,
                &self.options.output_dir,
                files::OUTPUT_DIR_REMEDIATION,
            )
            .await?;
        let name = file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let result =
            json!({"artifactId": artifact_id, "fileName": name, "byteLength": file.byte_length});
        let mut extras = Extras::default();
        if let Some(class) = file.descriptor["sensitivity"].as_str() {
            extras.artifact_sensitivity.push(class.to_owned());
        }
        extras.files.push(file);
        Ok((result, extras))
    }

    /// The session's usable Lease: the current one, or a new one when it lapsed (or when the
    /// Broker just refused `stale`).
    async fn lease(
        &self,
        scope: &Scope,
        stale: Option<&Arc<Lease>>,
    ) -> Result<Arc<Lease>, RpcError> {
        let mut current = scope.lease.lock().await;
        let refused = stale.is_some_and(|stale| Arc::ptr_eq(stale, &current));
        match (current.unusable(), refused) {
            (None, false) => return Ok(current.clone()),
            (Some(error), _) if !lease_gone(&error) => return Err(error),
            _ => {}
        }
        let renewed = Arc::new(scope.workspace.create_lease(&lease_options()).await?);
        *current = renewed.clone();
        Ok(renewed)
    }

    fn current_target(&self) -> Option<String> {
        self.current_target.lock().expect("target lock").clone()
    }

    fn set_current_target(&self, target: Option<String>) {
        *self.current_target.lock().expect("target lock") = target;
    }

    /// A tab the session opened or named becomes the default; a closed default is forgotten.
    fn remember_target(&self, tool: &ToolInfo, call: &ToolCall, result: &Value) {
        match tool.name.as_str() {
            "browser.tabs.close" | "browser.tabs.release" => {
                if call.target_id.is_some() && call.target_id == self.current_target() {
                    self.set_current_target(None);
                }
            }
            "browser.open" => {
                if let Some(target) = result["targetId"].as_str() {
                    self.set_current_target(Some(target.to_owned()));
                }
            }
            _ => {
                if tool.scope == ToolScope::Target && call.target_id.is_some() {
                    self.set_current_target(call.target_id.clone());
                }
            }
        }
    }

    /// Images become image content, other files are exported to `--output-dir`; both are then
    /// released from protected storage.
    async fn convert_artifacts(
        &self,
        scope: &Scope,
        lease: &Lease,
        tool: &ToolInfo,
        result: &Value,
        extras: &mut Extras,
    ) -> Result<(), RpcError> {
        let Some(descriptor) = result.get("artifact").filter(|d| d.is_object()) else {
            return Ok(());
        };
        if let Some(class) = descriptor["sensitivity"].as_str() {
            extras.artifact_sensitivity.push(class.to_owned());
        }
        let is_image = descriptor["mimeType"]
            .as_str()
            .is_some_and(|mime| mime.starts_with("image/"));
        match is_image {
            true => {
                let image = scope.workspace.read_image(lease, descriptor).await?;
                extras.images.push(image);
            }
            false => {
                files::prepare_output_dir(&self.options.output_dir)?;
                let file = scope
                    .workspace
                    .export_file(lease, descriptor, &self.options.output_dir)
                    .await?;
                extras.files.push(file);
            }
        }
        // The full-size original of a preview is exported as a file, not sent to the model.
        if tool.name == "browser.capture"
            && let Some(original) = result.get("original").filter(|d| d.is_object())
        {
            files::prepare_output_dir(&self.options.output_dir)?;
            let file = scope
                .workspace
                .export_file(lease, original, &self.options.output_dir)
                .await?;
            extras.files.push(file);
        }
        Ok(())
    }

    /// Polls the journal, processes every event, then acknowledges: completed downloads are
    /// remembered and announced (never exported unasked), a reconnect or a detached default tab forgets the default tab. After
    /// `cursor_expired` the default tab is forgotten (rebuild) and the cursor reset.
    async fn follow_events(&self, scope: &Scope, extras: &mut Extras) {
        if !self.session.granted("event.read") {
            return;
        }
        let _one_at_a_time = self.events.lock().await;
        loop {
            let batch = match scope.workspace.poll_events(EVENT_PAGE).await {
                Ok(batch) => batch,
                Err(error) if error.code == ErrorCode::CursorExpired => {
                    self.set_current_target(None);
                    if let Err(error) = scope.workspace.reset_event_cursor().await {
                        tracing::warn!(%error, "event cursor reset failed");
                    }
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "events/poll failed");
                    return;
                }
            };
            for event in &batch.events {
                self.on_event(event, extras);
            }
            scope.workspace.acknowledge_events(&batch.next_cursor);
            if !batch.has_more {
                return;
            }
        }
    }

    fn on_event(&self, event: &Value, extras: &mut Extras) {
        let payload = &event["payload"];
        match event["type"].as_str().unwrap_or("") {
            "connection.restored" | "connection.lost" => self.set_current_target(None),
            "target.detached"
                if event["targetId"].as_str().is_some()
                    && event["targetId"].as_str().map(str::to_owned) == self.current_target() =>
            {
                self.set_current_target(None);
            }
            "download" if payload["state"] == "completed" => {
                let descriptor = payload
                    .get("artifact")
                    .or_else(|| payload.get("descriptor"))
                    .filter(|d| d.is_object());
                let notice = descriptor.and_then(|descriptor| {
                    self.downloads
                        .lock()
                        .expect("downloads lock")
                        .record(descriptor)
                });
                extras.downloads.extend(notice);
            }
            _ => {}
        }
    }

    /// `notifications/cancelled` for a pending call.
    pub async fn cancel(&self, host_call_id: &str) {
        let workspace_id = self
            .scope
            .get()
            .map(|scope| scope.workspace.id().to_owned());
        if let Err(error) = self
            .session
            .cancel(host_call_id, workspace_id.as_deref())
            .await
        {
            tracing::debug!(%error, "commands/cancel");
        }
    }

    /// End of the MCP session: release the Lease and the Workspace explicitly, then shut the
    /// bridge down. Local state is invalid afterwards whatever the Broker answered.
    pub async fn close(&self) {
        if let Some(scope) = self.scope.get() {
            let lease = scope.lease.lock().await.clone();
            if let Err(error) = lease.release().await {
                tracing::debug!(%error, "lease release at close");
            }
            if let Err(error) = scope.workspace.release().await {
                tracing::warn!(%error, "workspace release at close failed; the Lease expires instead");
            }
        }
        self.set_current_target(None);
        self.session.shutdown().await;
    }
}

fn lease_options() -> LeaseOptions {
    LeaseOptions {
        ttl_ms: None,
        client_key: Some(LEASE_KEY.to_owned()),
    }
}

/// `browser-pilot browser launch --headless` with this executable; returns the candidate id.
async fn launch_managed_browser(spec: &LaunchSpec) -> Result<String, RpcError> {
    let output = tokio::process::Command::new(&spec.executable)
        .args(["browser", "launch", "--headless"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|error| {
            RpcError::new(
                ErrorCode::BrowserNotReady,
                format!("cannot start the managed browser: {error}"),
            )
        })?;
    let candidate: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    match (output.status.success(), candidate["id"].as_str()) {
        (true, Some(id)) => Ok(id.to_owned()),
        _ => Err(RpcError::new(
            ErrorCode::BrowserNotReady,
            format!(
                "the managed browser did not start: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        )
        .with_remediation(
            RemediationAction::InstallChromium,
            "Install Chromium (Debian: apt-get install -y chromium) or set BROWSER_PILOT_CHROMIUM.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_go_in_arrival_order_whatever_the_scheduling() {
        let mut order = Sequencer::default();
        let turns: Vec<Turn> = (0..4).map(|_| order.next()).collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // Spawned in reverse, so a scheduler that ran them as spawned would invert the order.
        for (n, turn) in turns.into_iter().enumerate().rev() {
            let tx = tx.clone();
            tokio::spawn(async move {
                turn.wait().await;
                tx.send(n).unwrap();
                drop(turn);
            });
        }
        drop(tx);
        let mut seen = Vec::new();
        while let Some(n) = rx.recv().await {
            seen.push(n);
        }
        assert_eq!(seen, vec![0, 1, 2, 3]);
    }

    #[tokio::test]
    async fn a_turn_dropped_without_sending_lets_the_next_go() {
        let mut order = Sequencer::default();
        let first = order.next();
        let second = order.next();
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(5), second.wait())
            .await
            .expect("second turn served");
    }
}
