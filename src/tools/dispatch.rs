//! Running a validated call: the registry entry's gate rule, then its handler, then the one
//! conversion of a `ToolError` to the agent-visible `RpcError`. No tool is named here.

use serde_json::{Map, Value};

use super::context::{CallScope, ToolEnv};
use super::manifest::{Gate, Handler, ToolDef};
use crate::protocol::errors::{ErrorCode, RpcError};

/// Runs one tool. A `Gate::Dispatch` tool passes `scope.gate` here first; a `Gate::InTool` tool
/// passes it itself once it holds its tab. The handler gets the typed scope its kind declares;
/// the Broker built `scope.ids` from that same declaration, so a mismatch is a bug.
pub async fn execute(
    env: &ToolEnv,
    scope: &CallScope,
    def: &ToolDef,
    arguments: Map<String, Value>,
) -> Result<Value, RpcError> {
    let started = std::time::Instant::now();
    tracing::debug!(tool = def.name, "tool start");
    if def.gate == Gate::Dispatch {
        scope.gate.pass().await?;
    }
    let outcome = match def.handler {
        Handler::Connection(handler, _) => handler(env, scope, arguments).await,
        Handler::Workspace(handler, _) => match scope.workspace() {
            Some(typed) => handler(env, &typed, arguments).await,
            None => return Err(scope_mismatch(def)),
        },
        Handler::Target(handler, _) => match scope.target() {
            Some(typed) => handler(env, &typed, arguments).await,
            None => return Err(scope_mismatch(def)),
        },
    };
    // Per-tool latency inside the Broker, for profiling (`BROWSER_PILOT_LOG=debug`).
    tracing::debug!(
        tool = def.name,
        us = started.elapsed().as_micros() as u64,
        "tool end"
    );
    outcome.map_err(RpcError::from)
}

fn scope_mismatch(def: &ToolDef) -> RpcError {
    tracing::error!(
        tool = def.name,
        "call scope does not match the tool's declared scope"
    );
    RpcError::new(ErrorCode::InternalError, "internal scope error")
}
