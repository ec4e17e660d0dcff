//! Running a validated call: the registry entry's gate rule, then its handler, then the one
//! conversion of a `ToolError` to the agent-visible `RpcError`. No tool is named here.

use serde_json::{Map, Value};

use super::context::{CallScope, ToolEnv};
use super::manifest::{Gate, ToolDef};
use crate::protocol::errors::RpcError;

/// Runs one tool. A `Gate::Dispatch` tool passes `scope.gate` here first; a `Gate::InTool` tool
/// passes it itself once it holds its tab.
pub async fn execute(
    env: &ToolEnv,
    scope: &CallScope,
    def: &ToolDef,
    arguments: Map<String, Value>,
) -> Result<Value, RpcError> {
    if def.gate == Gate::Dispatch {
        scope.gate.pass().await?;
    }
    (def.handler)(env, scope, arguments)
        .await
        .map_err(RpcError::from)
}
