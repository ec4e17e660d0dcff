//! Routing a validated call to its tool family.

use serde_json::{Map, Value};

use super::context::{CallScope, ToolEnv};
use super::manifest::ToolDef;
use super::{discover, tabs};
use crate::protocol::errors::{ErrorCode, RpcError};

/// Runs one tool. Tools that touch a tab pass `scope.gate` themselves once they hold the tab;
/// every other tool passes it here first.
pub async fn execute(
    env: &ToolEnv,
    scope: &CallScope,
    def: &ToolDef,
    arguments: Map<String, Value>,
) -> Result<Value, RpcError> {
    match def.name {
        "browser.discover" => {
            scope.gate.pass().await?;
            discover::discover(env, scope, arguments).await
        }
        "browser.connect" => tabs::connect(env, scope, arguments).await,
        "browser.open" => tabs::open(env, scope, arguments).await,
        "browser.navigate" => tabs::navigate(env, scope, arguments).await,
        "browser.tabs.list" => {
            scope.gate.pass().await?;
            tabs::tabs_list(env, scope, arguments).await
        }
        "browser.tabs.release" => {
            scope.gate.pass().await?;
            tabs::tabs_release(env, scope, arguments).await
        }
        "browser.tabs.close" => tabs::tabs_close(env, scope, arguments).await,
        other => Err(RpcError::new(
            ErrorCode::InternalError,
            format!("tool {other} is declared but not wired"),
        )),
    }
}
