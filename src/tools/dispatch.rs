//! Routing a validated call to its tool family.

use serde_json::{Map, Value};

use super::context::{CallScope, ToolEnv};
use super::discover;
use super::manifest::ToolDef;
use crate::protocol::errors::{ErrorCode, RpcError};

/// Runs one tool. Tools that touch a tab pass `scope.gate` themselves once they hold the tab;
/// every other tool passes it here first.
pub async fn execute(env: &ToolEnv, scope: &CallScope, def: &ToolDef, arguments: Map<String, Value>) -> Result<Value, RpcError> {
    match def.name {
        "browser.discover" => {
            scope.gate.pass().await?;
            discover::discover(env, scope, arguments).await
        }
        other => Err(RpcError::new(ErrorCode::InternalError, format!("tool {other} is declared but not wired"))),
    }
}
