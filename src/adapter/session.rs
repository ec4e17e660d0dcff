//! One bridge process seen from the host: launch, `initialize` (protocol 1.1 and limits),
//! runtime tool discovery from `tools/list`, Connection-scoped tool calls, and shutdown.
//!
//! Owns the host's view of one Connection: what was granted, which tools exist, and how a host
//! call id becomes a Command identity. It speaks only the public stdio protocol through
//! [`RpcClient`]; it never imports the Broker, store, session or tools modules, and it never
//! writes anything to disk.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc};

use super::launch::{LaunchSpec, launch};
use super::rpc::{CallError, Reply, RpcClient};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::negotiate::{DEFAULT_CAPABILITIES, SERVICE_LIMITS};

/// How long `shutdown` waits for the bridge to exit after its stdin closed.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Longest Command identity the Broker accepts is 256 characters; host call ids longer than
/// this (or with unusual characters) are hashed into the identity instead.
const MAX_PLAIN_CALL_ID: usize = 128;

/// Who the host is. The Principal is `id + instanceId`.
#[derive(Debug, Clone)]
pub struct ClientIdentity {
    pub id: String,
    pub name: String,
    pub version: String,
    pub instance_id: String,
}

impl ClientIdentity {
    /// A fresh random `instanceId` under `prefix` (one Principal per process).
    pub fn ephemeral(id: &str, name: &str, prefix: &str) -> ClientIdentity {
        ClientIdentity {
            id: id.to_owned(),
            name: name.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instance_id: format!("{prefix}:{}", random_hex(8)),
        }
    }

    /// The host's own stable `instanceId` (for example its installation id), the same in
    /// every process of that host instance.
    pub fn stable(id: &str, name: &str, instance_id: &str) -> ClientIdentity {
        ClientIdentity {
            id: id.to_owned(),
            name: name.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instance_id: instance_id.to_owned(),
        }
    }
}

/// What to ask for in `initialize`. The default requests the contract's six capabilities and
/// none of the extras (network data, network control, eval): a front end adds those only when
/// its user asks for them (docs/adapters.md).
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub capabilities: Vec<String>,
    pub max_message_bytes: u64,
    pub max_result_bytes: u64,
    pub command_ids: CommandIdScope,
}

/// What a host call id is unique within, and so what its Command identity is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommandIdScope {
    /// The host's call ids restart with each process (MCP request ids, `bp`): each session
    /// salts them with its own random value, so a new session never meets an old Command.
    #[default]
    Session,
    /// The host supplies call ids unique across restarts (tool-use ids) and a stable
    /// `instanceId`: identities come from the two alone, with no per-process salt, so a call
    /// repeated after a restart finds its recorded Command instead of running again.
    Instance,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            capabilities: DEFAULT_CAPABILITIES
                .iter()
                .map(|c| (*c).to_owned())
                .collect(),
            max_message_bytes: SERVICE_LIMITS.max_message_bytes,
            max_result_bytes: SERVICE_LIMITS.max_result_bytes,
            command_ids: CommandIdScope::Session,
        }
    }
}

/// Which envelope fields a tool needs, from its `tools/list` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolScope {
    Connection,
    Workspace,
    Target,
}

/// One tool as `tools/list` described it.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub capability: String,
    pub scope: ToolScope,
    pub mutating: bool,
    pub input_schema: Value,
    pub output_schema: Value,
    pub sensitivity_input: Vec<String>,
    pub sensitivity_output: Vec<String>,
}

impl ToolInfo {
    fn from_json(tool: &Value) -> Option<ToolInfo> {
        let strings = |value: &Value| -> Vec<String> {
            value
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let scope = match tool["scope"].as_str() {
            Some("connection") => ToolScope::Connection,
            Some("workspace") => ToolScope::Workspace,
            // An unknown scope is treated as the strictest one.
            _ => ToolScope::Target,
        };
        Some(ToolInfo {
            name: tool["name"].as_str()?.to_owned(),
            description: tool["description"].as_str().unwrap_or("").to_owned(),
            capability: tool["capability"].as_str().unwrap_or("").to_owned(),
            scope,
            // A tool that does not say is treated as mutating: its lost outcome is unknown.
            mutating: tool["mutating"].as_bool().unwrap_or(true),
            input_schema: tool["inputSchema"].clone(),
            output_schema: tool["outputSchema"].clone(),
            sensitivity_input: strings(&tool["sensitivity"]["input"]),
            sensitivity_output: strings(&tool["sensitivity"]["output"]),
        })
    }
}

/// What `initialize` returned that a host acts on.
#[derive(Debug, Clone)]
pub struct Initialized {
    pub protocol: Value,
    pub granted: Vec<String>,
    pub browsers: Vec<Value>,
    pub limits: Value,
    pub result: Value,
}

/// A tool call as the host sees it.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
    pub target_id: Option<String>,
    /// The host's own id for this call (an MCP request id, a tool-use id): it becomes the
    /// Command's `commandId` and `idempotencyKey`, so a retry of the same host call never runs
    /// the tool twice.
    pub host_call_id: String,
    pub deadline_ms: Option<u64>,
}

impl ToolCall {
    pub fn new(name: &str, arguments: Value, host_call_id: impl Into<String>) -> ToolCall {
        ToolCall {
            name: name.to_owned(),
            arguments,
            target_id: None,
            host_call_id: host_call_id.into(),
            deadline_ms: None,
        }
    }

    pub fn on_target(mut self, target_id: Option<String>) -> ToolCall {
        self.target_id = target_id;
        self
    }
}

/// A completed Command: its record and the tool's result.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    pub command: Value,
    pub result: Value,
}

/// A `tools/call` on its way: await [`PendingTool::outcome`].
pub struct PendingTool {
    reply: Reply,
    name: String,
    mutating: bool,
    command_id: String,
}

impl PendingTool {
    pub fn command_id(&self) -> &str {
        &self.command_id
    }

    /// The Command's outcome; transport loss after sending a mutating call is `unknown_outcome`.
    pub async fn outcome(self) -> Result<ToolOutcome, RpcError> {
        match self.reply.wait().await {
            Ok(outcome) => Ok(ToolOutcome {
                command: outcome["command"].clone(),
                result: outcome["result"].clone(),
            }),
            Err(error) => Err(lost(&self.name, error, self.mutating)
                .with_context("commandId", json!(self.command_id))),
        }
    }
}

struct Inner {
    rpc: RpcClient,
    child: Mutex<Option<tokio::process::Child>>,
    initialized: Initialized,
    tools: Vec<ToolInfo>,
    /// Prefixes this session's Command identities: a random salt, or the digest of the
    /// client's `instanceId` (`CommandIdScope`).
    nonce: String,
}

/// A launched and initialized bridge. Cheap to clone.
#[derive(Clone)]
pub struct BridgeSession {
    inner: Arc<Inner>,
}

/// Best-effort notifications of the bridge (`events/event`); never the recovery record.
pub type Notifications = mpsc::Receiver<Value>;

impl BridgeSession {
    /// Launches the bridge, negotiates protocol 1.1 and limits, and discovers the tools.
    pub async fn launch(
        spec: &LaunchSpec,
        client: &ClientIdentity,
        options: &SessionOptions,
    ) -> Result<(BridgeSession, Notifications), RpcError> {
        let launched = launch(spec)?;
        // The initialize response uses the bootstrap limits; later lines the negotiated ones,
        // which never exceed what is asked for here.
        let max_line = options
            .max_result_bytes
            .max(SERVICE_LIMITS.max_result_bytes) as usize;
        let (rpc, notifications) = RpcClient::spawn(
            launched.stdout,
            launched.stdin,
            max_line,
            SERVICE_LIMITS.max_message_bytes,
        );
        let params = json!({
            "client": {"id": client.id, "name": client.name, "version": client.version, "instanceId": client.instance_id},
            "protocol": {"min": {"major": 1, "minor": 1}, "max": {"major": 1, "minor": 1}},
            "requestedCapabilities": options.capabilities,
            "launchMode": "embedded",
            "limits": {"maxMessageBytes": options.max_message_bytes, "maxResultBytes": options.max_result_bytes},
        });
        let result = rpc
            .call("initialize", params)
            .await
            .map_err(|error| lost("initialize", error, false))?;
        let granted: Vec<String> = result["capabilities"]["granted"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(bytes) = result["limits"]["connection"]["maxMessageBytes"].as_u64() {
            rpc.set_max_message_bytes(bytes);
        }
        let initialized = Initialized {
            protocol: result["protocol"].clone(),
            granted,
            browsers: result["browsers"].as_array().cloned().unwrap_or_default(),
            limits: result["limits"].clone(),
            result: result.clone(),
        };
        let listed = rpc
            .call("tools/list", json!({}))
            .await
            .map_err(|error| lost("tools/list", error, false))?;
        let tools = listed["tools"]
            .as_array()
            .map(|tools| tools.iter().filter_map(ToolInfo::from_json).collect())
            .unwrap_or_default();
        let session = BridgeSession {
            inner: Arc::new(Inner {
                rpc,
                child: Mutex::new(Some(launched.child)),
                initialized,
                tools,
                nonce: match options.command_ids {
                    CommandIdScope::Session => random_hex(6),
                    CommandIdScope::Instance => instance_scope(&client.instance_id),
                },
            }),
        };
        Ok((session, notifications))
    }

    pub fn initialized(&self) -> &Initialized {
        &self.inner.initialized
    }

    /// The tools this Broker implements and granted, as discovered at launch.
    pub fn tools(&self) -> &[ToolInfo] {
        &self.inner.tools
    }

    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.inner.tools.iter().find(|tool| tool.name == name)
    }

    pub fn granted(&self, capability: &str) -> bool {
        self.inner
            .initialized
            .granted
            .iter()
            .any(|g| g == capability)
    }

    /// A lifecycle request. Transport loss is `broker_unavailable` (nothing here mutates the
    /// browser; mutating tool calls go through [`BridgeSession::call_tool`]).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.inner
            .rpc
            .call(method, params)
            .await
            .map_err(|error| lost(method, error, false))
    }

    /// A `tools/call` with the envelope fields the caller supplies (Workspace, Lease, target).
    pub async fn call_tool(
        &self,
        call: &ToolCall,
        envelope: serde_json::Map<String, Value>,
    ) -> Result<ToolOutcome, RpcError> {
        self.start_tool(call, envelope).await?.outcome().await
    }

    /// Sends a `tools/call` and returns once it is queued for the bridge (see
    /// [`RpcClient::start`]): a host that must keep its calls in order starts the next one only
    /// after this returned, and awaits the outcomes in any order.
    pub async fn start_tool(
        &self,
        call: &ToolCall,
        envelope: serde_json::Map<String, Value>,
    ) -> Result<PendingTool, RpcError> {
        let mutating = self.tool(&call.name).is_none_or(|tool| tool.mutating);
        let (command_id, idempotency_key) = self.command_identity(&call.host_call_id);
        let mut params = envelope;
        params.insert("name".into(), json!(call.name));
        params.insert("arguments".into(), call.arguments.clone());
        params.insert("commandId".into(), json!(command_id));
        params.insert("idempotencyKey".into(), json!(idempotency_key));
        if let Some(target_id) = &call.target_id {
            params.insert("targetId".into(), json!(target_id));
        }
        if let Some(deadline_ms) = call.deadline_ms {
            params.insert("deadlineMs".into(), json!(deadline_ms));
        }
        let reply = self
            .inner
            .rpc
            .start("tools/call", Value::Object(params))
            .await
            .map_err(|error| {
                lost(&call.name, error, mutating).with_context("commandId", json!(command_id))
            })?;
        Ok(PendingTool {
            reply,
            name: call.name.clone(),
            mutating,
            command_id,
        })
    }

    /// A Connection-scoped tool (`browser.discover`).
    pub async fn call_connection_tool(&self, call: &ToolCall) -> Result<ToolOutcome, RpcError> {
        self.call_tool(call, serde_json::Map::new()).await
    }

    /// `commands/cancel` for the Command a host call became. The cancel may overtake the call
    /// itself, so an unknown Command is retried briefly before giving up.
    pub async fn cancel(
        &self,
        host_call_id: &str,
        workspace_id: Option<&str>,
    ) -> Result<Value, RpcError> {
        let (command_id, _) = self.command_identity(host_call_id);
        let mut params = json!({"commandId": command_id});
        if let Some(workspace_id) = workspace_id {
            params["workspaceId"] = json!(workspace_id);
        }
        let mut attempts = 0;
        loop {
            match self.request("commands/cancel", params.clone()).await {
                Err(error) if error.code == ErrorCode::CommandNotFound && attempts < 20 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                other => return other,
            }
        }
    }

    /// The `commandId` and `idempotencyKey` of a host call id in this session.
    pub fn command_identity(&self, host_call_id: &str) -> (String, String) {
        command_identity(&self.inner.nonce, host_call_id)
    }

    /// `shutdown`, then close stdin and wait for the bridge to exit. EOF alone releases only
    /// this Connection's Leases; release Workspaces explicitly before calling this.
    pub async fn shutdown(&self) {
        let _ = tokio::time::timeout(EXIT_WAIT, self.request("shutdown", json!({}))).await;
        let child = self.inner.child.lock().await.take();
        if let Some(mut child) = child {
            match tokio::time::timeout(EXIT_WAIT, child.wait()).await {
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!("bridge did not exit after shutdown; killing it");
                    let _ = child.kill().await;
                }
            }
        }
    }

    /// The bridge's process id (tests kill it to simulate transport loss).
    pub async fn bridge_pid(&self) -> Option<u32> {
        self.inner.child.lock().await.as_ref().and_then(|c| c.id())
    }
}

/// Maps a transport failure to the code a host branches on: a mutating call whose line was
/// written may have run (`unknown_outcome`, never retried automatically); anything else is
/// retryable `broker_unavailable`.
fn lost(what: &str, error: CallError, mutating: bool) -> RpcError {
    match error {
        CallError::Rpc(error) => error,
        CallError::LostAfterSend if mutating => RpcError::new(
            ErrorCode::UnknownOutcome,
            format!("the bridge went away after {what} was sent; it may or may not have taken effect"),
        )
        .with_remediation(
            RemediationAction::InspectState,
            "Start a new session, observe the page and decide from its current state; do not replay the call.",
        ),
        CallError::LostAfterSend | CallError::NotSent => RpcError::new(
            ErrorCode::BrokerUnavailable,
            format!("the bridge is gone ({what} got no answer)"),
        )
        .with_remediation(RemediationAction::RestartSession, "Start a new bridge session and try again."),
    }
}

fn command_identity(nonce: &str, host_call_id: &str) -> (String, String) {
    let plain = host_call_id.len() <= MAX_PLAIN_CALL_ID
        && !host_call_id.is_empty()
        && host_call_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    let call = match plain {
        true => host_call_id.to_owned(),
        false => format!("h{}", sha256_hex(host_call_id.as_bytes())),
    };
    (
        format!("command:{nonce}-{call}"),
        format!("host:{nonce}:{call}"),
    )
}

/// The stable prefix of Command identities for an `instanceId`: short, and the same in every
/// process of that instance.
fn instance_scope(instance_id: &str) -> String {
    format!("i{}", &sha256_hex(instance_id.as_bytes())[..12])
}

/// The first 128 bits of the SHA-256 of `bytes`, in hex.
fn sha256_hex(bytes: &[u8]) -> String {
    crate::hex::sha256(bytes)[..32].to_owned()
}

/// Random hex from the system's secure generator (`ring`), for instance ids and nonces.
pub fn random_hex(bytes: usize) -> String {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buf)
        .expect("system random");
    crate::hex::encode(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The adapter and the MCP server see the Broker only through the public protocol.
    #[test]
    fn front_ends_never_import_broker_internals() {
        let sources = [
            include_str!("artifacts.rs"),
            include_str!("events.rs"),
            include_str!("launch.rs"),
            include_str!("lease.rs"),
            include_str!("mod.rs"),
            include_str!("rpc.rs"),
            include_str!("session.rs"),
            include_str!("workspace.rs"),
            include_str!("../mcp/content.rs"),
            include_str!("../mcp/host.rs"),
            include_str!("../mcp/mod.rs"),
            include_str!("../mcp/options.rs"),
            include_str!("../mcp/server.rs"),
            include_str!("../mcp/tools.rs"),
        ];
        for source in sources {
            for forbidden in ["broker", "store", "session", "tools"] {
                let edge = format!("crate::{forbidden}");
                assert!(!source.contains(&edge), "{edge} imported by a front end");
            }
        }
    }

    #[test]
    fn transport_loss_codes() {
        let check = |error: CallError, mutating: bool, expect: ErrorCode| {
            let mapped = lost("x", error, mutating);
            assert_eq!(mapped.code, expect);
            assert!(!mapped.code.retryable() || expect != ErrorCode::UnknownOutcome);
        };
        check(CallError::LostAfterSend, true, ErrorCode::UnknownOutcome);
        check(
            CallError::LostAfterSend,
            false,
            ErrorCode::BrokerUnavailable,
        );
        check(CallError::NotSent, true, ErrorCode::BrokerUnavailable);
        assert!(!ErrorCode::UnknownOutcome.retryable());
    }

    #[test]
    fn host_call_ids_become_bounded_command_identities() {
        assert_eq!(
            command_identity("ab12", "7"),
            ("command:ab12-7".to_owned(), "host:ab12:7".to_owned())
        );
        let (command, key) = command_identity("ab12", &"x y".repeat(200));
        assert!(command.len() < 80 && key.len() < 80, "{command} {key}");
        assert_ne!(
            command_identity("ab12", "a b").0,
            command_identity("ab12", "a c").0
        );
        assert_ne!(
            command_identity("ab12", "1").0,
            command_identity("cd34", "1").0
        );
    }

    #[test]
    fn tool_info_defaults_are_conservative() {
        let tool = ToolInfo::from_json(&json!({"name": "browser.future"})).unwrap();
        assert!(tool.mutating);
        assert_eq!(tool.scope, ToolScope::Target);
        let tool = ToolInfo::from_json(&json!({"name": "browser.discover", "scope": "connection", "mutating": false, "sensitivity": {"input": [], "output": ["browser_data"]}})).unwrap();
        assert!(!tool.mutating);
        assert_eq!(tool.sensitivity_output, vec!["browser_data"]);
    }

    #[test]
    fn instance_scoped_identities_need_no_salt() {
        let scope = instance_scope("install:01J");
        assert_eq!(
            scope,
            instance_scope("install:01J"),
            "stable across processes"
        );
        assert_ne!(scope, instance_scope("install:01K"));
        let (command, key) = command_identity(&scope, "toolu_01");
        assert_eq!(command, format!("command:{scope}-toolu_01"));
        assert_eq!(key, format!("host:{scope}:toolu_01"));
    }
}
