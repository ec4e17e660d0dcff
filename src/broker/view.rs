//! The live view's private methods (docs/view.md), served only to a CLI peer (the view role
//! connects as one, like `bp`; a bridge's host never reaches them): `view/register` (the view's
//! origin, never an eligible tab), `view/state` (every active Workspace, its Leases, tabs and
//! newest Commands, and the hand-offs waiting), `view/events` (a Workspace's newest journal
//! rows), `view/frame` (one JPEG of a tab), `view/screencast` (the newest frame of a tab's
//! screencast, waited for), `handoff/done` (the person pressed Done in the
//! view, or ran `bp handoff done`), and the take-over: `view/takeover`, `view/input` (the
//! person's mouse, wheel and keys) and `view/handback`; and recordings: `recording/start` and
//! `recording/stop`, which stores one self-contained HTML player (`tools::store_recording`,
//! as `browser.recording.stop` does) as an Artifact of the Workspace.
//!
//! The reads take the store's reader threads and the session's in-memory registry, never the
//! writer or a tab's turn, so a view open beside the agents does not slow their requests. What
//! they return was already masked and redacted where it entered the Broker. A take-over is the
//! one write: it holds the tab for the person (`session::view`) and tells every Workspace
//! managing or controlling the tab (`target_control.human`, then `target_control.returned`
//! with what changed), so control is never taken silently.

use serde_json::{Value, json};

use super::connection::ConnectionContext;
use super::params::{
    HandoffDoneParams, Raw, ViewEvents, ViewFrame, ViewInputParams, ViewRegister, ViewScreencast,
    ViewTab,
};
use crate::events::Emit;
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::protocol::redact::redact_url;
use crate::session::view::{
    FinishError, FrameError, HandoffDone, Interested, MAX_RECORDING_FRAME_BYTES,
    MAX_RECORDING_FRAMES, RECORDING_INTERVAL, TakeoverError, ViewInput, finish_handoff,
    pending_handoffs, register_view_origin,
};
use crate::store::{ViewCommand, ViewWorkspace};
use crate::tools::{recording_error, store_recording};

pub async fn register(
    context: &ConnectionContext,
    params: ViewRegister,
) -> Result<Value, RpcError> {
    let origin = params.origin;
    let valid = origin
        .strip_prefix("http://127.0.0.1:")
        .is_some_and(|port| !port.is_empty() && port.parse::<u16>().is_ok());
    if !valid {
        return Err(RpcError::invalid_params(
            "params.origin must be http://127.0.0.1:PORT",
        ));
    }
    register_view_origin(&origin);
    let _ = context;
    Ok(json!({"registered": true}))
}

pub async fn state(context: &ConnectionContext, _: Raw) -> Result<Value, RpcError> {
    let broker = context.broker.clone();
    let workspaces = broker
        .store
        .call_read(|store| store.view_workspaces())
        .await?;
    let tabs = broker.tools.browser.view_tabs();
    // The oldest live connection (a Broker may hold several; the view shows one).
    let connected = (broker.tools.browser.lives().into_iter().next()).map(|live| live.browser_id);
    let workspaces: Vec<Value> = workspaces
        .iter()
        .map(|workspace| {
            let tabs: Vec<Value> = (tabs.iter())
                .filter(|tab| tab.workspace_id == workspace.workspace_id)
                .map(|tab| {
                    let (requests, downloads) = tab.activity_counts();
                    json!({
                        "targetId": tab.target_id,
                        "url": redact_url(&tab.url),
                        "title": tab.title,
                        "managed": tab.managed,
                        "controlledBy": tab.controlled_by,
                        "dialog": tab.dialog.as_ref().map(|d| json!({"type": d.dialog_type, "message": d.message})),
                        "requests": requests,
                        "downloads": downloads,
                        "human": tab.human,
                    })
                })
                .collect();
            workspace_json(workspace, tabs)
        })
        .collect();
    Ok(json!({
        "browser": {"connected": connected.is_some(), "browserId": connected},
        "workspaces": workspaces,
        "handoffs": handoffs_json(),
    }))
}

fn handoffs_json() -> Vec<Value> {
    (pending_handoffs().iter())
        .map(|h| {
            json!({
                "handoffId": h.handoff_id,
                "workspaceId": h.workspace_id,
                "targetId": h.target_id,
                "reason": h.reason,
                "requestedAt": h.requested_at,
            })
        })
        .collect()
}

/// The person is done: the waiting `browser.handoff` reads its evidence and completes.
pub async fn handoff_done(
    _: &ConnectionContext,
    params: HandoffDoneParams,
) -> Result<Value, RpcError> {
    let done = HandoffDone { note: params.note };
    match finish_handoff(params.handoff_id.as_deref(), done) {
        Ok(handoff) => Ok(json!({"done": true, "handoffId": handoff.handoff_id})),
        Err(error @ FinishError::NotFound) => Err(RpcError::invalid_params(error.to_string())
            .with_context("handoffs", json!(handoffs_json()))),
        Err(error @ FinishError::Ambiguous(_)) => Err(RpcError::invalid_params(error.to_string())
            .with_context("handoffs", json!(handoffs_json()))),
    }
}

fn workspace_json(workspace: &ViewWorkspace, tabs: Vec<Value>) -> Value {
    let leases: Vec<Value> = (workspace.leases.iter())
        .map(|lease| json!({"leaseId": lease.lease_id, "expiresAt": lease.expires_at}))
        .collect();
    let commands: Vec<Value> = workspace.commands.iter().map(command_json).collect();
    json!({
        "workspaceId": workspace.workspace_id,
        "client": {"id": workspace.client_id, "instanceId": workspace.instance_id},
        "browserId": workspace.browser_id,
        "createdAt": workspace.created_at,
        "leases": leases,
        "tabs": tabs,
        "commands": commands,
    })
}

/// A Command's row: its tool, status, and the evidence or error it answered with (the result
/// as the agent got it, typed values already masked).
fn command_json(command: &ViewCommand) -> Value {
    let parse = |text: &Option<String>| {
        text.as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
    };
    let result = parse(&command.result_json);
    let evidence = result
        .as_ref()
        .and_then(|r| r.get("evidence"))
        .cloned()
        .unwrap_or(Value::Null);
    let error = parse(&command.error_json).map(|e| {
        json!({
            "code": e.pointer("/data/code").cloned().unwrap_or(Value::Null),
            "message": e.get("message").cloned().unwrap_or(Value::Null),
        })
    });
    json!({
        "commandId": command.command_id,
        "method": command.method,
        "status": command.status,
        "acceptedAt": command.accepted_at,
        "evidence": evidence,
        "error": error,
    })
}

pub async fn events(context: &ConnectionContext, params: ViewEvents) -> Result<Value, RpcError> {
    let ViewEvents {
        workspace_id,
        target_id,
    } = params;
    let rows = context
        .broker
        .store
        .call_read(move |store| store.view_events(&workspace_id, target_id.as_deref()))
        .await?;
    let events: Vec<Value> = rows
        .iter()
        .map(|row| {
            json!({
                "sequence": row.sequence,
                "timestamp": row.timestamp,
                "type": row.event_type,
                "targetId": row.target_id,
                "payload": serde_json::from_str::<Value>(&row.payload_json).unwrap_or(Value::Null),
            })
        })
        .collect();
    Ok(json!({"events": events}))
}

pub async fn frame(context: &ConnectionContext, params: ViewFrame) -> Result<Value, RpcError> {
    let browser = &context.broker.tools.browser;
    match browser
        .view_frame(&params.workspace_id, &params.target_id)
        .await
    {
        Ok(data) => Ok(json!({"mimeType": "image/jpeg", "data": data})),
        Err(FrameError::NotFound) => Err(RpcError::new(
            ErrorCode::TargetNotFound,
            "no such tab in this Workspace",
        )),
        Err(error) => Ok(json!({"data": null, "reason": error.to_string()})),
    }
}

/// The newest screencast frame of a tab after `after` (waits a few seconds for one):
/// `{frame, mimeType, data}`, `data` null when none came in time.
pub async fn screencast(
    context: &ConnectionContext,
    params: ViewScreencast,
) -> Result<Value, RpcError> {
    let browser = &context.broker.tools.browser;
    let after = params.after.unwrap_or(0);
    match browser
        .view_screencast(&params.workspace_id, &params.target_id, after)
        .await
    {
        Ok((frame, data)) => Ok(json!({"frame": frame, "mimeType": "image/jpeg", "data": data})),
        Err(FrameError::NotFound) => Err(RpcError::new(
            ErrorCode::TargetNotFound,
            "no such tab in this Workspace",
        )),
        Err(error) => Ok(json!({"frame": after, "data": null, "reason": error.to_string()})),
    }
}

fn takeover_error(error: TakeoverError) -> RpcError {
    match error {
        TakeoverError::NotFound => {
            RpcError::new(ErrorCode::TargetNotFound, "no such tab in this Workspace")
        }
        TakeoverError::Invalid(message) => RpcError::invalid_params(message),
        other => RpcError::new(ErrorCode::InternalError, other.to_string()),
    }
}

/// Journals `event_type` with `payload` (plus each Workspace's own `targetId`) to every
/// Workspace interested in the tab.
async fn tell(
    context: &ConnectionContext,
    interested: &Interested,
    event_type: &'static str,
    payload: Value,
) {
    for (workspace_id, opaque) in interested {
        let mut body = payload.clone();
        body["targetId"] = json!(opaque);
        let mut emit = Emit::new(workspace_id, event_type, body);
        emit.target_id = Some(opaque.to_string());
        emit.sensitivity = "browser_data";
        if let Err(error) = context.broker.events.emit(emit).await {
            tracing::debug!(%error, event_type, "take-over event not journaled");
        }
    }
}

/// The person takes the tab: no Lease uses it until the hand-back.
pub async fn take_over(context: &ConnectionContext, params: ViewTab) -> Result<Value, RpcError> {
    let handoff = pending_handoffs()
        .iter()
        .any(|h| h.workspace_id == params.workspace_id && h.target_id == params.target_id);
    let browser = &context.broker.tools.browser;
    let taken = browser
        .take_over(&params.workspace_id, &params.target_id, handoff)
        .await
        .map_err(takeover_error)?;
    tell(
        context,
        &taken.interested,
        "target_control.human",
        json!({"by": "live_view", "url": redact_url(&taken.url), "title": taken.title}),
    )
    .await;
    Ok(json!({"human": true, "targetId": params.target_id}))
}

/// One step of the person's input on a tab they hold.
pub async fn input(
    context: &ConnectionContext,
    params: ViewInputParams,
) -> Result<Value, RpcError> {
    let point = |name: &str, value: Option<f64>| {
        value.ok_or_else(|| RpcError::invalid_params(format!("params.{name} is required")))
    };
    let step = match params.kind.as_str() {
        "click" => ViewInput::Click {
            x: point("x", params.x)?,
            y: point("y", params.y)?,
            button: params.button.unwrap_or_else(|| "left".to_owned()),
        },
        "wheel" => ViewInput::Wheel {
            x: point("x", params.x)?,
            y: point("y", params.y)?,
            dx: params.dx.unwrap_or(0.0),
            dy: params.dy.unwrap_or(0.0),
        },
        _ => ViewInput::Key {
            key: params
                .key
                .ok_or_else(|| RpcError::invalid_params("params.key is required"))?,
        },
    };
    let browser = &context.broker.tools.browser;
    match browser
        .view_input(&params.workspace_id, &params.target_id, step)
        .await
    {
        Ok(()) => Ok(json!({"sent": true})),
        Err(TakeoverError::NotHeld) => {
            Err(RpcError::invalid_params(TakeoverError::NotHeld.to_string()))
        }
        Err(error) => Err(takeover_error(error)),
    }
}

/// The person hands the tab back, with what they changed.
pub async fn hand_back(context: &ConnectionContext, params: ViewTab) -> Result<Value, RpcError> {
    let browser = &context.broker.tools.browser;
    let back = match browser
        .hand_back(&params.workspace_id, &params.target_id)
        .await
    {
        Ok(back) => back,
        Err(TakeoverError::NotHeld) => {
            return Err(RpcError::invalid_params(TakeoverError::NotHeld.to_string()));
        }
        Err(error) => return Err(takeover_error(error)),
    };
    let evidence = json!({
        "action": "hand_back",
        "status": "verified",
        "urlChanged": back.url_changed,
        "titleChanged": back.title_changed,
        "documentChanged": back.document_changed,
        "heldMs": back.held_ms,
    });
    tell(
        context,
        &back.interested,
        "target_control.returned",
        json!({"by": "live_view", "url": redact_url(&back.url), "title": back.title, "evidence": evidence}),
    )
    .await;
    Ok(json!({"human": false, "targetId": params.target_id, "evidence": evidence}))
}

/// Starts recording a Workspace's tab.
pub async fn recording_start(
    context: &ConnectionContext,
    params: ViewTab,
) -> Result<Value, RpcError> {
    let browser = &context.broker.tools.browser;
    let started_at = browser
        .start_recording(&params.workspace_id, &params.target_id)
        .map_err(recording_error)?;
    Ok(json!({
        "recording": true,
        "targetId": params.target_id,
        "startedAt": started_at,
        "framesPerSecond": 1000 / RECORDING_INTERVAL.as_millis() as u64,
        "maxFrames": MAX_RECORDING_FRAMES,
        "maxFrameBytes": MAX_RECORDING_FRAME_BYTES,
    }))
}

/// Stops recording a Workspace's tab and stores the player as an Artifact of the Workspace
/// (`tools::store_recording`, as `browser.recording.stop` does).
pub async fn recording_stop(
    context: &ConnectionContext,
    params: ViewTab,
) -> Result<Value, RpcError> {
    let tools = &context.broker.tools;
    let recording = tools
        .browser
        .stop_recording(&params.workspace_id, &params.target_id)
        .await
        .map_err(recording_error)?;
    let stored = store_recording(
        &context.broker.store,
        &tools.artifacts,
        &params.workspace_id,
        &params.target_id,
        &recording,
    )
    .await?;
    Ok(stored)
}
