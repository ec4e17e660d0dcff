//! Routing a validated call to its tool family.

use serde_json::{Map, Value};

use super::context::{CallScope, ToolEnv};
use super::manifest::ToolDef;
use super::{actions, capture, discover, frames, keys, observe, tabs};
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
        "browser.observe" => observe::observe(env, scope, arguments).await,
        "browser.read" => observe::read(env, scope, arguments).await,
        "browser.search" => observe::search(env, scope, arguments).await,
        "browser.elements.find" => observe::find(env, scope, arguments).await,
        "browser.click" => actions::click(env, scope, arguments).await,
        "browser.press" => keys::press(env, scope, arguments).await,
        "browser.type" => keys::type_text(env, scope, arguments).await,
        "browser.keyboard" => keys::keyboard(env, scope, arguments).await,
        "browser.scroll" => actions::scroll(env, scope, arguments).await,
        "browser.dropdown.options" => actions::dropdown_options(env, scope, arguments).await,
        "browser.dropdown.select" => actions::dropdown_select(env, scope, arguments).await,
        "browser.frames.list" => frames::list(env, scope, arguments).await,
        "browser.frames.select" => frames::select(env, scope, arguments).await,
        "browser.dialogs.list" => {
            scope.gate.pass().await?;
            actions::dialogs_list(env, scope, arguments).await
        }
        "browser.dialogs.respond" => {
            scope.gate.pass().await?;
            actions::dialogs_respond(env, scope, arguments).await
        }
        "browser.capture" => capture::capture(env, scope, arguments).await,
        "browser.pdf" => capture::pdf(env, scope, arguments).await,
        other => Err(RpcError::new(
            ErrorCode::InternalError,
            format!("tool {other} is declared but not wired"),
        )),
    }
}
