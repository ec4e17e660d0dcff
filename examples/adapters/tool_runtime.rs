//! Reference adapter: a tool-runtime host (in the spirit of a Pi-style agent runtime) where
//! each Broker tool becomes one host tool, built on `browser_pilot::adapter`.
//!
//! The host's work scope is one Workspace (found again by `clientKey`), its active invocation
//! one renewable Lease, and every host tool-call id becomes the Command's identity. The host's
//! tool-use ids are unique across its restarts, so identities derive from its stable
//! `instanceId` and the call id alone, with no per-process salt: a call repeated by a restarted
//! host returns its recorded outcome instead of running again. Images come
//! back as the host's native image content, other files are exported into a host-owned
//! directory; both are released from protected storage. Events are followed by cursor and
//! acknowledged only after processing. Nothing is written to disk but the exports.
//!
//! The model reads the lean text of `browser_pilot::adapter::lean` (as `browser-pilot mcp`
//! does): an Observation in compact lines with a page header, an action as its evidence and
//! what changed since the tab's previous Observation; `details` keeps the Command's result.
//!
//! Run: `cargo run --example tool_runtime_adapter -- --executable /abs/browser-pilot --url URL
//! --output-dir /abs/dir`. It performs one scripted agent turn on the page and prints what the
//! host's tools returned as one JSON line. The process tests run the same `run_turn`.

use std::path::PathBuf;

use browser_pilot::adapter::lean::{self, Notes};
use browser_pilot::adapter::{
    BridgeSession, ClientIdentity, CommandIdScope, LaunchSpec, Lease, LeaseOptions, SessionOptions,
    ToolCall, ToolInfo, ToolScope, Workspace, WorkspaceOptions, random_hex,
};
use browser_pilot::protocol::errors::{ErrorCode, RpcError};
use serde_json::{Value, json};

/// Content a host runtime gives back to its model.
#[derive(Debug, Clone)]
pub enum HostContent {
    Text(String),
    Image { mime_type: String, bytes: Vec<u8> },
    File { path: PathBuf, mime_type: String },
}

/// A host tool's result: content, structured details, and whether it is an error.
#[derive(Debug, Clone)]
pub struct HostToolResult {
    pub content: Vec<HostContent>,
    pub details: Value,
    pub is_error: bool,
}

/// One host tool: a Broker tool under a host-safe name.
pub struct HostTool {
    pub name: String,
    pub broker_tool: ToolInfo,
}

/// The host's runtime: its tools and the Broker scope they run in.
pub struct ToolRuntime {
    session: BridgeSession,
    workspace: Workspace,
    lease: Lease,
    tools: Vec<HostTool>,
    output_dir: PathBuf,
    target: std::sync::Mutex<Option<String>>,
    /// The latest Observation of each tab: the base of the next action's diff and the default
    /// `observationId` of a ref.
    observations: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl ToolRuntime {
    /// Launch, negotiate, discover tools, and map the work scope to a Workspace + Lease.
    /// `instance_id` is the host's stable instance (the same after a restart).
    pub async fn start(
        spec: &LaunchSpec,
        work_scope: &str,
        instance_id: &str,
        output_dir: PathBuf,
    ) -> Result<ToolRuntime, RpcError> {
        let identity = ClientIdentity::stable(
            "com.example.tool-runtime",
            "Tool runtime reference adapter",
            instance_id,
        );
        let options = SessionOptions {
            command_ids: CommandIdScope::Instance,
            ..SessionOptions::default()
        };
        let (session, _notifications) = BridgeSession::launch(spec, &identity, &options).await?;
        let tools = session
            .tools()
            .iter()
            .map(|tool| HostTool {
                name: tool.name.replace('.', "_"),
                broker_tool: tool.clone(),
            })
            .collect();
        let workspace = session
            .create_workspace(&WorkspaceOptions {
                client_key: Some(work_scope.to_owned()),
                browser_id: None,
                ..WorkspaceOptions::default()
            })
            .await?;
        let lease = workspace.create_lease(&LeaseOptions::default()).await?;
        Ok(ToolRuntime {
            session,
            workspace,
            lease,
            tools,
            output_dir,
            target: std::sync::Mutex::new(None),
            observations: Default::default(),
        })
    }

    pub fn tools(&self) -> &[HostTool] {
        &self.tools
    }

    /// The host calls one of its tools with its own tool-call id.
    pub async fn execute(&self, tool_call_id: &str, name: &str, params: Value) -> HostToolResult {
        match self.try_execute(tool_call_id, name, params).await {
            Ok(result) => result,
            Err(error) => HostToolResult {
                content: vec![HostContent::Text(format!(
                    "{}: {}",
                    error.code.as_str(),
                    error.message
                ))],
                details: error.to_json()["data"].clone(),
                is_error: true,
            },
        }
    }

    async fn try_execute(
        &self,
        tool_call_id: &str,
        name: &str,
        params: Value,
    ) -> Result<HostToolResult, RpcError> {
        let tool = self
            .tools
            .iter()
            .find(|tool| tool.name == name)
            .ok_or_else(|| {
                RpcError::new(ErrorCode::ToolNotFound, format!("no host tool {name}"))
            })?;
        let broker = &tool.broker_tool;
        let target = match broker.scope {
            ToolScope::Target => self.target.lock().unwrap().clone(),
            _ => None,
        };
        let mut params = match params {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        if let Some(target) = &target {
            let latest = self.observations.lock().unwrap().get(target).cloned();
            lean::arguments(broker, latest.as_deref(), &mut params);
        }
        let call = ToolCall::new(&broker.name, Value::Object(params), tool_call_id)
            .on_target(target.clone());
        let outcome = match broker.scope {
            ToolScope::Connection => self.session.call_connection_tool(&call).await?,
            ToolScope::Workspace | ToolScope::Target => {
                self.workspace.call(&self.lease, &call).await?
            }
        };
        if let Some(target) = outcome.result["targetId"].as_str() {
            *self.target.lock().unwrap() = Some(target.to_owned());
        }
        let tab = target.or_else(|| outcome.result["targetId"].as_str().map(str::to_owned));
        if let (Some(tab), Some(observation)) = (tab, outcome.result["observationId"].as_str()) {
            self.observations
                .lock()
                .unwrap()
                .insert(tab, observation.to_owned());
        }
        let text = lean::text(&broker.name, &outcome.result, &Notes::default());
        let mut content = vec![HostContent::Text(text)];
        if let Some(descriptor) = outcome.result.get("artifact") {
            let image = descriptor["mimeType"]
                .as_str()
                .is_some_and(|m| m.starts_with("image/"));
            content.push(match image {
                true => {
                    let image = self.workspace.read_image(&self.lease, descriptor).await?;
                    HostContent::Image {
                        mime_type: image.mime_type,
                        bytes: image.bytes,
                    }
                }
                false => {
                    let file = self
                        .workspace
                        .export_file(&self.lease, descriptor, &self.output_dir)
                        .await?;
                    HostContent::File {
                        path: file.path,
                        mime_type: file.mime_type,
                    }
                }
            });
        }
        self.process_events().await?;
        Ok(HostToolResult {
            content,
            details: outcome.result,
            is_error: false,
        })
    }

    /// Poll, process every event, then acknowledge. After `cursor_expired`: rebuild (forget the
    /// current tab), then reset the cursor from `workspaces/get`.
    async fn process_events(&self) -> Result<(), RpcError> {
        loop {
            let batch = match self.workspace.poll_events(100).await {
                Ok(batch) => batch,
                Err(error) if error.code == ErrorCode::CursorExpired => {
                    *self.target.lock().unwrap() = None;
                    self.workspace.reset_event_cursor().await?;
                    return Ok(());
                }
                Err(error) => return Err(error),
            };
            for event in &batch.events {
                if event["type"] == "connection.restored" {
                    *self.target.lock().unwrap() = None;
                }
            }
            self.workspace.acknowledge_events(&batch.next_cursor);
            if !batch.has_more {
                return Ok(());
            }
        }
    }

    /// Releases the Workspace explicitly and stops the bridge; local state is gone either way.
    pub async fn close(self) -> Result<(), RpcError> {
        *self.target.lock().unwrap() = None;
        let released = self.workspace.release().await;
        self.session.shutdown().await;
        released.map(|_| ())
    }
}

fn summarize(result: &HostToolResult) -> Value {
    let content: Vec<Value> = result
        .content
        .iter()
        .map(|c| match c {
            HostContent::Text(text) => json!({"type": "text", "length": text.len(), "text": text}),
            HostContent::Image { mime_type, bytes } => {
                json!({"type": "image", "mimeType": mime_type, "bytes": bytes.len(), "png": bytes.starts_with(b"\x89PNG")})
            }
            HostContent::File { path, mime_type } => {
                json!({"type": "file", "path": path, "mimeType": mime_type})
            }
        })
        .collect();
    json!({"isError": result.is_error, "content": content, "code": result.details["code"]})
}

/// One scripted agent turn: connect, open the page, observe, click the first checkbox, capture,
/// print to PDF, then a deliberate error. Returns what each host tool returned.
pub async fn run_turn(
    spec: &LaunchSpec,
    url: &str,
    output_dir: PathBuf,
) -> Result<Value, RpcError> {
    // This scripted turn numbers its calls from 1 in every run, so it is a new host instance
    // each time; a real host passes its persistent instanceId and its unique tool-use ids.
    let instance = format!("install:{}", random_hex(8));
    let runtime = ToolRuntime::start(spec, "reference-turn", &instance, output_dir).await?;
    let tool_names: Vec<String> = runtime.tools().iter().map(|t| t.name.clone()).collect();
    let mut steps = serde_json::Map::new();
    let connect = runtime
        .execute("call-1", "browser_connect", json!({}))
        .await;
    steps.insert("connect".into(), summarize(&connect));
    let open = runtime
        .execute("call-2", "browser_open", json!({"url": url}))
        .await;
    steps.insert("open".into(), summarize(&open));
    let observed = runtime
        .execute("call-3", "browser_observe", json!({}))
        .await;
    steps.insert("observe".into(), summarize(&observed));
    // The model's view: the first checkbox line of the lean text, `[12] checkbox "Agree" ...`.
    let checkbox = observed.content.iter().find_map(|c| match c {
        HostContent::Text(text) => text.lines().find_map(|line| {
            let (number, rest) = line.strip_prefix('[')?.split_once("] ")?;
            match rest.starts_with("checkbox ") {
                true => number.parse::<u64>().ok(),
                false => None,
            }
        }),
        _ => None,
    });
    if let Some(checkbox) = checkbox {
        let clicked = runtime
            .execute("call-4", "browser_click", json!({"ref": checkbox}))
            .await;
        let mut summary = summarize(&clicked);
        summary["evidence"] = clicked.details["evidence"]["status"].clone();
        steps.insert("click".into(), summary);
    }
    let captured = runtime
        .execute("call-5", "browser_capture", json!({}))
        .await;
    steps.insert("capture".into(), summarize(&captured));
    let printed = runtime.execute("call-6", "browser_pdf", json!({})).await;
    steps.insert("pdf".into(), summarize(&printed));
    let failed = runtime
        .execute(
            "call-7",
            "browser_click",
            json!({"observationId": "observation:none", "ref": 1}),
        )
        .await;
    steps.insert("error".into(), summarize(&failed));
    runtime.close().await?;
    Ok(json!({"tools": tool_names, "steps": steps}))
}

#[allow(
    dead_code,
    reason = "the process tests include this file and call run_turn directly"
)]
fn main() {
    let mut args = std::env::args().skip(1);
    let (mut executable, mut url, mut output_dir) = (None, None, None);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--executable" => executable = args.next().map(PathBuf::from),
            "--url" => url = args.next(),
            "--output-dir" => output_dir = args.next().map(PathBuf::from),
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let (Some(executable), Some(url), Some(output_dir)) = (executable, url, output_dir) else {
        eprintln!(
            "usage: tool_runtime_adapter --executable /abs/browser-pilot --url URL --output-dir /abs/dir"
        );
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(run_turn(&LaunchSpec::new(executable), &url, output_dir)) {
        Ok(report) => println!("{report}"),
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    }
}
