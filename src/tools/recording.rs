//! `browser.recording.start` / `browser.recording.stop`: an agent records a tab it controls,
//! and the recording becomes an Artifact of its Workspace: one self-contained HTML player
//! (`recording.html`) with the frames and the timeline of the Workspace's Commands and the
//! tab's events, masked as the live view shows them (docs/view.md "Recordings"). The live
//! view's *Record* (`recording/start|stop`, `broker::view`) stores its recordings through the
//! same [`store_recording`].
//!
//! Sampling runs beside the agents' Commands (`session::view`): it takes no turn and sends the
//! page nothing but `Page.captureScreenshot`. Neither tool sends the page anything itself.

use serde_json::{Value, json};

use super::context::{
    MAX_RECORDING_FRAME_BYTES, MAX_RECORDING_FRAMES, NoParams, RECORDING_INTERVAL, Recording,
    RecordingError, TargetScope, ToolEnv,
};
use super::error::ToolError;
use super::manifest::{Gate, Handler, Lane, ToolDef, object, open_object};
use super::tab::ControlledTab;
use crate::artifacts::{ArtifactKind, Artifacts, NewArtifact};
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::protocol::redact::redact_url;
use crate::store::{Store, ViewCommand, ViewEvent};
use crate::version::now_ms;

/// The player a recording is stored in: `__RECORDING_JSON__` becomes the recording's data.
const RECORDING_PLAYER: &str = include_str!("recording.html");

pub fn defs() -> Vec<ToolDef> {
    vec![
        recording_def(
            "browser.recording.start",
            "Start recording the tab: frames twice a second (changed ones only; at most 1,200 frames and 32 MiB) and the timeline of this Workspace's Commands and the tab's events, until browser.recording.stop. At most 4 recordings run at once per Broker.",
            json!({
                "recording": {"const": true},
                "startedAt": {"type": "integer"},
                "framesPerSecond": {"type": "integer", "minimum": 1},
                "maxFrames": {"type": "integer", "minimum": 1},
                "maxFrameBytes": {"type": "integer", "minimum": 1},
            }),
            &["targetId", "recording", "startedAt"],
            &[],
            handler!(Target: start),
        ),
        recording_def(
            "browser.recording.stop",
            "Stop recording the tab and store the recording as an Artifact of the Workspace (kind recording): one self-contained HTML file that plays the frames with the timeline, offline in any browser. No typed value is in it. Returns the descriptor.",
            json!({
                "artifact": super::capture::descriptor_schema(),
                "frames": {"type": "integer", "minimum": 0},
                "timeline": {"type": "integer", "minimum": 0},
                "truncated": {"type": "boolean"},
            }),
            &["artifact", "frames", "timeline", "truncated"],
            &["browser_data", "user_file"],
            handler!(Target: stop),
        ),
    ]
}

/// One of the two tools: no input, an output of the Workspace, Lease and tab with `fields`.
fn recording_def(
    name: &'static str,
    description: &'static str,
    fields: Value,
    required: &[&str],
    sensitivity_output: &'static [&'static str],
    handler: Handler,
) -> ToolDef {
    let mut properties = json!({
        "workspaceId": {"type": "string"},
        "leaseId": {"type": "string"},
        "targetId": {"type": "string"},
    });
    if let (Some(all), Value::Object(fields)) = (properties.as_object_mut(), fields) {
        all.extend(fields);
    }
    ToolDef {
        name,
        description,
        capability: "observation.read",
        mutating: false,
        input_schema: object(json!({}), &[]),
        output_schema: open_object(properties, required),
        sensitivity_input: &[],
        sensitivity_output,
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler,
    }
}

/// The agent-visible error of a recording that did not start or stop.
pub fn recording_error(error: RecordingError) -> RpcError {
    match error {
        RecordingError::NotFound => RpcError::new(ErrorCode::TargetNotFound, "no such tab"),
        RecordingError::TooMany => RpcError::new(ErrorCode::LimitExceeded, error.to_string()),
        other => RpcError::invalid_params(other.to_string()),
    }
}

/// What every answer about a recording carries: the Workspace, Lease and tab.
fn scope_fields(scope: &TargetScope<'_>) -> Value {
    json!({
        "workspaceId": scope.workspace_id,
        "leaseId": scope.lease_id,
        "targetId": scope.target_id,
    })
}

async fn start(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    _params: NoParams,
) -> Result<Value, ToolError> {
    // Control of the tab is checked, and the tools' session of it (the one frames are taken on)
    // set up, before the first frame.
    let mut tab = ControlledTab::acquire(env, scope).await?;
    tab.session().await?;
    let started_at = env
        .browser
        .start_recording(scope.workspace_id, scope.target_id)
        .map_err(recording_error)?;
    let mut result = scope_fields(scope);
    result["recording"] = json!(true);
    result["startedAt"] = json!(started_at);
    result["framesPerSecond"] = json!(1000 / RECORDING_INTERVAL.as_millis() as u64);
    result["maxFrames"] = json!(MAX_RECORDING_FRAMES);
    result["maxFrameBytes"] = json!(MAX_RECORDING_FRAME_BYTES);
    Ok(result)
}

async fn stop(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    _params: NoParams,
) -> Result<Value, ToolError> {
    let tab = ControlledTab::acquire(env, scope).await?;
    let recording = env
        .browser
        .stop_recording(scope.workspace_id, scope.target_id)
        .await
        .map_err(recording_error)?;
    drop(tab);
    let stored = store_recording(
        &env.store,
        &env.artifacts,
        scope.workspace_id,
        scope.target_id,
        &recording,
    )
    .await?;
    let mut result = scope_fields(scope);
    for (key, value) in stored.as_object().into_iter().flatten() {
        result[key] = value.clone();
    }
    Ok(result)
}

/// Stores a stopped recording of a Workspace's tab (`target_id`: the Workspace's opaque id) as
/// an Artifact of the Workspace: `{artifact, frames, timeline, truncated}`.
pub async fn store_recording(
    store: &Store,
    artifacts: &Artifacts,
    workspace_id: &str,
    target_id: &str,
    recording: &Recording,
) -> Result<Value, ToolError> {
    let (workspace, target, since) = (
        workspace_id.to_owned(),
        target_id.to_owned(),
        recording.started_at,
    );
    let (commands, events) = store
        .call_read(move |store| {
            Ok((
                store.view_commands_since(&workspace, since)?,
                store.view_events_since(&workspace, &target, since)?,
            ))
        })
        .await
        .map_err(|error| {
            tracing::error!(%error, "cannot read a recording's timeline");
            RpcError::new(ErrorCode::InternalError, "internal store error")
        })?;
    let timeline = timeline(&commands, &events, recording.stopped_at);
    let html = recording_html(workspace_id, target_id, recording, &timeline);
    let new = NewArtifact::new(
        workspace_id,
        ArtifactKind::Recording,
        "text/html",
        "browser_data",
    );
    let artifact = artifacts.create(new, html.into_bytes(), now_ms()).await?;
    Ok(json!({
        "artifact": artifact.to_json(),
        "frames": recording.frames.len(),
        "timeline": timeline.len(),
        "truncated": recording.truncated,
    }))
}

/// The recording's timeline, oldest first: each Command as the view lists it (tool, status,
/// the evidence's status and action or the error's code) and each event of the tab by its type
/// (with the URL, redacted, of a navigation). No arguments and no result values: what an agent
/// typed appears nowhere.
fn timeline(commands: &[ViewCommand], events: &[ViewEvent], until: i64) -> Vec<Value> {
    let parse = |text: &Option<String>| {
        text.as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .unwrap_or(Value::Null)
    };
    let mut entries: Vec<(i64, Value)> = Vec::new();
    for command in commands {
        let (result, error) = (parse(&command.result_json), parse(&command.error_json));
        let mut text = vec![command.method.clone(), command.status.clone()];
        for key in ["status", "action"] {
            if let Some(word) = result["evidence"][key].as_str() {
                text.push(word.to_owned());
            }
        }
        if let Some(code) = error.pointer("/data/code").and_then(Value::as_str) {
            text.push(code.to_owned());
        }
        entries.push((
            command.accepted_at,
            json!({"at": command.accepted_at, "kind": "command", "text": text.join(" ")}),
        ));
    }
    for event in events.iter().filter(|e| e.timestamp <= until) {
        let payload: Value = serde_json::from_str(&event.payload_json).unwrap_or(Value::Null);
        let mut text = event.event_type.clone();
        if let Some(url) = payload["url"].as_str()
            && matches!(event.event_type.as_str(), "navigation" | "document.changed")
        {
            text.push(' ');
            text.push_str(&redact_url(url));
        }
        entries.push((
            event.timestamp,
            json!({"at": event.timestamp, "kind": "event", "text": text}),
        ));
    }
    entries.sort_by_key(|(at, _)| *at);
    entries.into_iter().map(|(_, entry)| entry).collect()
}

/// The self-contained player: the data goes into a JSON script element, with `<`, `>` and `&`
/// escaped so no value can close the element or open markup.
fn recording_html(
    workspace_id: &str,
    target_id: &str,
    recording: &Recording,
    timeline: &[Value],
) -> String {
    let frames: Vec<Value> = (recording.frames.iter())
        .map(|frame| json!({"at": frame.at, "data": frame.data}))
        .collect();
    let data = json!({
        "workspaceId": workspace_id,
        "targetId": target_id,
        "startedAt": recording.started_at,
        "stoppedAt": recording.stopped_at,
        "truncated": recording.truncated,
        "frames": frames,
        "timeline": timeline,
    })
    .to_string()
    .replace('<', "\\u003c")
    .replace('>', "\\u003e")
    .replace('&', "\\u0026");
    RECORDING_PLAYER.replacen("__RECORDING_JSON__", &data, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_player_escapes_markup_in_its_data() {
        let recording = Recording {
            started_at: 1,
            stopped_at: 2,
            frames: Vec::new(),
            truncated: false,
        };
        let timeline = [json!({"at": 1, "kind": "event", "text": "</script><b>&"})];
        let html = recording_html("workspace:a", "target:b", &recording, &timeline);
        assert!(!html.contains("</script><b>"), "markup escaped");
        assert!(html.contains("\\u003c/script\\u003e\\u003cb\\u003e\\u0026"));
        assert!(!html.contains("__RECORDING_JSON__"));
    }
}
