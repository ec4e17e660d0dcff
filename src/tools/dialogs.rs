//! The out-of-band dialog tools `browser.dialogs.list` and `browser.dialogs.respond`. A dialog
//! is answered only when asked; nothing here accepts or dismisses one by itself.
//!
//! Also the one answer of a reading tool on a tab a dialog holds (`dialog_open`, see
//! [`unless_dialog`]): while a JavaScript dialog is pending, the page runs no script and paints
//! no frame, so observe, read, search, find, capture and pdf would wait out their deadline.

use serde::Deserialize;
use serde_json::{Value, json};

use super::actions::*;
use super::context::NoParams;
use super::context::{TargetScope, ToolEnv, WorkspaceScope};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::TabCalls;
use crate::cdp::page::HandleJavaScriptDialog;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

pub fn defs() -> Vec<ToolDef> {
    let _observe = observe_property();
    vec![
        ToolDef {
            name: "browser.dialogs.list",
            description: "JavaScript dialogs (alert, confirm, prompt, beforeunload) open on tabs this Workspace knows. Out-of-band: answers even while the command that opened the dialog is still pending.",
            capability: "observation.read",
            mutating: false,
            input_schema: object(json!({}), &[]),
            output_schema: open_object(
                json!({"dialogs": {"type": "array", "items": open_object(json!({
                "dialogId": {"type": "string"},
                "targetId": {"type": "string"},
                "type": {"type": "string"},
                "message": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "defaultPrompt": {"type": ["string", "null"], "x-browser-pilot-sensitivity": ["browser_data"]},
                "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "openedAt": {"type": "integer"},
            }), &["dialogId", "targetId", "type", "message"])}}),
                &["dialogs"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::OutOfBand,
            gate: Gate::Dispatch,
            handler: handler!(Workspace: dialogs_list),
        },
        ToolDef {
            name: "browser.dialogs.respond",
            description: "Answer a dialog explicitly: `action` accept or dismiss, `promptText` for prompts. Out-of-band. Browser Pilot never answers a dialog by itself.",
            capability: "action.input",
            mutating: true,
            input_schema: object(
                json!({
                    "dialogId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Pending dialog id from browser.dialogs.list."},
                    "action": {"enum": ["accept", "dismiss"], "description": "Accept (OK) or dismiss (Cancel) the dialog."},
                    "promptText": {"type": "string", "maxLength": 10000, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Text to answer a prompt dialog with."},
                }),
                &["dialogId", "action"],
            ),
            output_schema: open_object(
                json!({"dialogId": {"type": "string"}, "action": {"type": "string"}, "closed": {"type": "boolean"}}),
                &["dialogId", "action", "closed"],
            ),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &[],
            lane: Lane::OutOfBand,
            gate: Gate::Dispatch,
            handler: handler!(Workspace: dialogs_respond),
        },
    ]
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RespondParams {
    dialog_id: String,
    /// `accept` or `dismiss` (the schema's enum).
    action: String,
    prompt_text: Option<String>,
}

async fn dialogs_list(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    _params: NoParams,
) -> Result<Value, ToolError> {
    env.connected(scope.workspace_id)?;
    let workspace_id = scope.workspace_id;
    let dialogs: Vec<Value> = env
        .browser
        .dialogs_for(workspace_id)
        .into_iter()
        .map(|(target_id, d)| json!({"dialogId": d.id, "targetId": target_id, "type": d.dialog_type, "message": d.message, "defaultPrompt": d.default_prompt, "url": d.url, "openedAt": d.opened_at}))
        .collect();
    Ok(json!({"dialogs": dialogs}))
}

async fn dialogs_respond(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    asked: RespondParams,
) -> Result<Value, ToolError> {
    let calls = TabCalls::watched(env, scope)?;
    let (workspace_id, lease_id) = (scope.workspace_id, scope.lease_id);
    let dialog_id = asked.dialog_id.as_str();
    let action = asked.action;
    let Some((opaque, dialog)) = env.browser.dialog(workspace_id, dialog_id) else {
        return Err(ToolError::from(
            RpcError::new(
                ErrorCode::TargetNotFound,
                "no open dialog with this id on a tab of this Workspace",
            )
            .with_context("reason", json!("dialog_not_found"))
            .with_remediation(RemediationAction::ListDialogs, "Call browser.dialogs.list."),
        ));
    };
    // Answering needs control of the tab; a live other controller keeps it.
    env.browser.control(workspace_id, lease_id, &opaque).await?;
    let answer = HandleJavaScriptDialog {
        accept: action == "accept",
        prompt_text: asked.prompt_text.clone(),
    };
    calls
        .execute(&dialog.session, &answer, INPUT_TIMEOUT)
        .await?;
    Ok(json!({"dialogId": dialog_id, "action": action, "closed": true}))
}

/// `dialog_open` for the dialog pending on the scope's tab, if one is.
fn dialog_holding(env: &ToolEnv, scope: &TargetScope<'_>) -> Option<ToolError> {
    let (_, dialog) = env
        .browser
        .dialogs_for(scope.workspace_id)
        .into_iter()
        .find(|(opaque, _)| opaque == scope.target_id)?;
    Some(ToolError::from(
        RpcError::new(
            ErrorCode::DialogOpen,
            format!(
                "a {} dialog holds the page; nothing can be read until it is answered",
                dialog.dialog_type
            ),
        )
        .with_context("dialogOpen", json!(true))
        .with_context("dialogId", json!(dialog.id))
        .with_context("dialogType", json!(dialog.dialog_type))
        .with_context("targetId", json!(scope.target_id))
        .with_remediation(
            RemediationAction::ListDialogs,
            "Call browser.dialogs.list, answer the dialog with browser.dialogs.respond, then call again.",
        ),
    ))
}

/// Runs a reading tool's `work` on the scope's tab unless a JavaScript dialog holds it: a dialog
/// already pending answers `dialog_open` at once, one that opens meanwhile ends the work with
/// it (the page would answer nothing until the dialog is answered).
pub(super) async fn unless_dialog<T, F>(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    work: F,
) -> Result<T, ToolError>
where
    F: std::future::Future<Output = Result<T, ToolError>>,
{
    // Subscribed before the first look, so a dialog opening in between is still signalled.
    let mut signals = env.browser.dialog_signals();
    if let Some(error) = dialog_holding(env, scope) {
        return Err(error);
    }
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return done,
            signal = signals.recv() => match signal {
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    if let Some(error) = dialog_holding(env, scope) {
                        return Err(error);
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return work.await,
            },
        }
    }
}
