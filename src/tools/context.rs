//! What a tool runs with: the process-wide environment and the per-call scope.

use std::sync::Arc;

use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::artifacts::Artifacts;
use crate::events::EventSink;
use crate::home::Home;
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::session::BrowserService;
use crate::store::{CommandStatus, PrincipalKey, Store};
use crate::version::now_ms;

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

/// Marks the Command dispatched exactly once, at the moment it is about to touch the browser.
/// A Command cancelled while it waited is refused here, so cancellation before dispatch never
/// reaches the browser.
#[derive(Clone)]
pub struct DispatchGate {
    store: Store,
    events: EventSink,
    command_id: String,
    /// The browser connection generation the Command was accepted under.
    generation: u64,
    done: Arc<AtomicBool>,
}

impl DispatchGate {
    pub fn new(
        store: Store,
        events: EventSink,
        command_id: String,
        generation: u64,
    ) -> DispatchGate {
        DispatchGate {
            store,
            events,
            command_id,
            generation,
            done: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the Command passed the gate (it may have touched the browser).
    pub fn passed(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    pub async fn pass(&self) -> Result<(), RpcError> {
        if self.done.load(Ordering::SeqCst) {
            return Ok(());
        }
        // Fence: a Command accepted against an older browser connection never reaches the new one.
        let current = self.events.generation();
        if current != self.generation {
            return Err(RpcError::new(
                ErrorCode::BrowserDisconnected,
                "the browser connection changed after this Command was accepted",
            )
            .with_context("acceptedGeneration", serde_json::json!(self.generation))
            .with_context("currentGeneration", serde_json::json!(current))
            .with_remediation(
                "list_tabs",
                "Call browser.tabs.list to rebuild target state, then retry with a fresh call.",
            ));
        }
        let store = self.store.clone();
        let id = self.command_id.clone();
        let row =
            match tokio::task::spawn_blocking(move || store.mark_dispatched(&id, now_ms())).await {
                Ok(Ok(row)) => row,
                Ok(Err(error)) => {
                    tracing::error!(%error, "cannot mark a command dispatched");
                    return Err(RpcError::new(
                        ErrorCode::InternalError,
                        "internal store error",
                    ));
                }
                Err(join) => std::panic::resume_unwind(join.into_panic()),
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

/// Who is calling and on what, for one `tools/call`.
pub struct CallScope {
    pub principal: PrincipalKey,
    pub connection_id: String,
    pub workspace_id: Option<String>,
    pub lease_id: Option<String>,
    pub target_id: Option<String>,
    pub command_id: String,
    pub deadline: tokio::time::Instant,
    /// `bridge --browser` preference of the calling bridge.
    pub browser_preference: Option<String>,
    pub gate: DispatchGate,
    /// The tab-queue place taken at acceptance, for tools addressing `target_id`.
    pub ticket: std::sync::Mutex<Option<crate::session::TabTicket>>,
}

/// A string argument (the schema already checked its type).
pub fn str_arg<'a>(arguments: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    arguments.get(name).and_then(Value::as_str)
}

/// A boolean argument, or its default.
pub fn bool_arg(arguments: &Map<String, Value>, name: &str, default: bool) -> bool {
    arguments
        .get(name)
        .and_then(Value::as_bool)
        .unwrap_or(default)
}

/// A bounded integer argument (the schema already checked its range), or its default.
pub fn u32_arg(arguments: &Map<String, Value>, name: &str, default: u32) -> u32 {
    arguments
        .get(name)
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(default)
}
