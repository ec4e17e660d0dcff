//! The stdio MCP server loop: newline-delimited JSON-RPC on stdin/stdout, as MCP's stdio
//! transport defines it, on the crate's own framing.
//!
//! Owns the MCP side of the wire: protocol-version and capability negotiation in `initialize`,
//! `ping`, `tools/list`, `tools/call` (each call in its own task, answered in any order),
//! `notifications/cancelled` (the Command is cancelled and the request gets no response),
//! progress notifications while a call runs, and the end of the session on EOF or a termination
//! signal. What a call does is `host.rs`; result shapes are `content.rs`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::sync::{mpsc, watch};

use super::host::{Host, Sequencer};
use super::options::McpOptions;
use crate::framing::{LineReader, write_line};

/// MCP revisions this server speaks, newest first. The newest is what the pinned official
/// TypeScript SDK client asks for; older ones are answered in their own revision.
pub const MCP_PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// Longest MCP input line: a tool call's arguments are bounded by the bridge's 1 MiB input
/// limit; the rest is envelope.
const MAX_INPUT_LINE: usize = 2 * 1024 * 1024;

/// Output lines queued for stdout (responses and progress) before producers wait.
const OUTPUT_QUEUE: usize = 256;

/// How often a running call reports progress when the client asked for it.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Everything that can happen to the server loop.
enum Event {
    Line(Option<Vec<u8>>),
    Finished {
        key: String,
        id: Value,
        result: Value,
    },
    Terminate,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Line(Some(line)) => write!(f, "line of {} bytes", line.len()),
            Event::Line(None) => f.write_str("end of input"),
            Event::Finished { key, .. } => write!(f, "call {key} finished"),
            Event::Terminate => f.write_str("termination signal"),
        }
    }
}

/// A `tools/call` still running.
struct Running {
    host_call_id: String,
    cancelled: watch::Sender<bool>,
}

/// Runs the server until stdin closes; returns the exit code.
pub async fn run_mcp(options: McpOptions) -> i32 {
    let (out_tx, out_rx) = mpsc::channel::<String>(OUTPUT_QUEUE);
    let writer = tokio::spawn(write_output(out_rx));
    let (events_tx, mut events) = mpsc::channel::<Event>(OUTPUT_QUEUE);
    tokio::spawn(read_input(events_tx.clone()));
    let mut signals = crate::os::termination_signals();
    {
        let events_tx = events_tx.clone();
        tokio::spawn(async move {
            if signals.recv().await.is_some() {
                let _ = events_tx.send(Event::Terminate).await;
            }
        });
    }
    let mut server = Server {
        options,
        host: None,
        running: HashMap::new(),
        order: Sequencer::default(),
        out: out_tx,
        finished: events_tx,
    };
    while let Some(event) = events.recv().await {
        tracing::trace!(%event, "mcp");
        match event {
            Event::Line(Some(line)) => server.on_line(&line).await,
            Event::Line(None) | Event::Terminate => break,
            Event::Finished { key, id, result } => server.on_finished(&key, id, result).await,
        }
    }
    if let Some(host) = server.host.take() {
        host.close().await;
    }
    drop(server);
    let _ = writer.await;
    0
}

struct Server {
    options: McpOptions,
    host: Option<Arc<Host>>,
    running: HashMap<String, Running>,
    order: Sequencer,
    out: mpsc::Sender<String>,
    finished: mpsc::Sender<Event>,
}

impl Server {
    async fn send(&self, message: Value) {
        let _ = self.out.send(message.to_string()).await;
    }

    async fn reply(&self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    async fn reply_error(&self, id: &Value, code: i64, message: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
            .await;
    }

    async fn on_line(&mut self, line: &[u8]) {
        let message: Value = match serde_json::from_slice(line) {
            Ok(message @ Value::Object(_)) => message,
            Ok(_) => {
                return self
                    .reply_error(&Value::Null, -32600, "a message must be a JSON object")
                    .await;
            }
            Err(_) => return self.reply_error(&Value::Null, -32700, "parse error").await,
        };
        let method = message["method"].as_str().map(str::to_owned);
        let id = message.get("id").cloned().filter(|id| !id.is_null());
        let params = message.get("params").cloned().unwrap_or(json!({}));
        match (method, id) {
            (Some(method), Some(id)) => self.on_request(&method, id, params).await,
            (Some(method), None) => self.on_notification(&method, &params),
            // A response to a request this server never sends: ignored.
            (None, _) => {}
        }
    }

    async fn on_request(&mut self, method: &str, id: Value, params: Value) {
        match (method, &self.host) {
            ("ping", _) => self.reply(&id, json!({})).await,
            ("initialize", None) => self.on_initialize(id, &params).await,
            ("initialize", Some(_)) => {
                self.reply_error(&id, -32600, "the session is already initialized")
                    .await
            }
            (_, None) => {
                self.reply_error(&id, -32002, "the session is not initialized")
                    .await
            }
            ("tools/list", Some(host)) => {
                let tools = host.tool_list();
                self.reply(&id, json!({"tools": tools})).await
            }
            ("tools/call", Some(host)) => {
                let host = host.clone();
                self.on_call(host, id, params).await
            }
            _ => {
                self.reply_error(&id, -32601, &format!("method {method:?} not found"))
                    .await
            }
        }
    }

    async fn on_initialize(&mut self, id: Value, params: &Value) {
        let requested = params["protocolVersion"].as_str().unwrap_or("");
        let version = MCP_PROTOCOL_VERSIONS
            .iter()
            .find(|v| **v == requested)
            .copied()
            .unwrap_or(MCP_PROTOCOL_VERSIONS[0]);
        let client_name = params["clientInfo"]["name"].as_str().unwrap_or("");
        match Host::start(self.options.clone(), client_name).await {
            Ok(host) => {
                self.host = Some(Arc::new(host));
                self.reply(
                    &id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": false}},
                        "serverInfo": {"name": "browser-pilot", "title": "Browser Pilot", "version": env!("CARGO_PKG_VERSION")},
                        "instructions": "Drives a real Chromium. Start with browser_open (it shows the page) or browser_tabs_list. Pages are shown one line per element: ref, role, \"name\", value and states, @x,y. Act with browser_click / browser_type and the ref; a result's first line is the evidence (verified: the page proves it; unavailable: no conclusive effect seen), then what changed: +added, ~changed (current state), removed refs; a navigation, dialog or popup is always stated and a new page is shown whole. targetId defaults to the current tab. Never repeat a call whose error is unknown_outcome: observe first.",
                    }),
                )
                .await
            }
            Err(error) => {
                self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": error.to_string(), "data": error.to_json()["data"]}}))
                    .await
            }
        }
    }

    async fn on_call(&mut self, host: Arc<Host>, id: Value, params: Value) {
        let key = id.to_string();
        if self.running.contains_key(&key) {
            return self
                .reply_error(&id, -32600, "a request with this id is still running")
                .await;
        }
        let name = params["name"].as_str().unwrap_or("").to_owned();
        if !host.knows_tool(&name) {
            return self
                .reply_error(&id, -32602, &format!("unknown tool {name:?}"))
                .await;
        }
        let host_call_id = match &id {
            Value::String(s) => format!("s{s}"),
            other => format!("n{other}"),
        };
        let (cancelled, cancelled_rx) = watch::channel(false);
        self.running.insert(
            key.clone(),
            Running {
                host_call_id: host_call_id.clone(),
                cancelled,
            },
        );
        let progress_token = params["_meta"]["progressToken"].clone();
        let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
        let out = self.out.clone();
        let finished = self.finished.clone();
        let turn = self.order.next();
        tokio::spawn(async move {
            let ticker = match progress_token.is_null() {
                true => None,
                false => Some(tokio::spawn(report_progress(
                    out,
                    progress_token,
                    name.clone(),
                    cancelled_rx.clone(),
                ))),
            };
            let result = host
                .call(&name, arguments, &host_call_id, turn, cancelled_rx)
                .await;
            if let Some(ticker) = ticker {
                ticker.abort();
            }
            let _ = finished.send(Event::Finished { key, id, result }).await;
        });
    }

    async fn on_finished(&mut self, key: &str, id: Value, result: Value) {
        let Some(running) = self.running.remove(key) else {
            return;
        };
        // A cancelled request gets no response (MCP cancellation).
        if *running.cancelled.borrow() {
            return;
        }
        self.reply(&id, result).await
    }

    /// `notifications/cancelled` cancels the Command; `notifications/initialized`,
    /// `notifications/progress`, roots and anything newer need nothing from a tools-only
    /// server.
    fn on_notification(&mut self, method: &str, params: &Value) {
        if method != "notifications/cancelled" {
            return;
        }
        let key = params["requestId"].to_string();
        let (Some(running), Some(host)) = (self.running.get(&key), self.host.clone()) else {
            return;
        };
        if running.cancelled.send_replace(true) {
            return;
        }
        let host_call_id = running.host_call_id.clone();
        tokio::spawn(async move { host.cancel(&host_call_id).await });
    }
}

/// Progress for one running call: at once, then every second, until it ends or is cancelled.
async fn report_progress(
    out: mpsc::Sender<String>,
    token: Value,
    tool: String,
    mut cancelled: watch::Receiver<bool>,
) {
    let mut progress = 0u64;
    loop {
        let message = match progress {
            0 => format!("{tool} started"),
            n => format!("{tool} still running ({n} s)"),
        };
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": progress, "message": message}});
        if out.send(notification.to_string()).await.is_err() {
            return;
        }
        progress += 1;
        tokio::select! {
            _ = tokio::time::sleep(PROGRESS_EVERY) => {}
            _ = cancelled.wait_for(|c| *c) => return,
        }
    }
}

async fn read_input(events: mpsc::Sender<Event>) {
    let mut lines = LineReader::new(BufReader::new(tokio::io::stdin()), MAX_INPUT_LINE);
    loop {
        let line = match lines.next_line().await {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "mcp input unreadable; ending the session");
                None
            }
        };
        let end = line.is_none();
        if events.send(Event::Line(line)).await.is_err() || end {
            return;
        }
    }
}

async fn write_output(mut lines: mpsc::Receiver<String>) {
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.recv().await {
        if write_line(&mut stdout, &line).await.is_err() {
            return;
        }
    }
}
