//! `browser.handoff`: the agent asks for a person (a captcha, a second factor, a consent
//! screen). It holds the tab's turn, so nothing else the agents queued runs on the tab while the
//! person works on it, emits `handoff.requested` (the reason and how to open the live view,
//! never a view secret), and completes only when the person presses Done in the view (or runs
//! `bp handoff done`): with evidence of what changed (URL, title, whether the document changed,
//! whether the cookie count changed, the person's note). Without Done before `timeoutMs` (bounded
//! by the Command's deadline) it answers `handoff_timeout`; it never completes on a timer alone.
//! It sends the browser only reads (`Storage.getCookies`), no input.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::{Handoff, TargetScope, ToolEnv, open_handoff};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{ControlledTab, base_result};
use crate::cdp::storage::GetCookies;
use crate::events::Emit;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::ids::{IdKind, new_id};
use crate::version::now_ms;

/// Part of the Command's remaining time kept to read the evidence and answer.
const ANSWER_RESERVE: Duration = Duration::from_secs(2);

/// How long reading the cookie count may take.
const COOKIE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest reason an agent may give, in bytes.
const MAX_REASON_BYTES: u64 = 500;

/// The range of `timeoutMs`, checked by the handler (the schema stays lean for MCP hosts).
const TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 1_000..=3_600_000;

/// Longest note a person may leave, in characters; a longer one is cut.
pub const MAX_NOTE_CHARS: usize = 500;

pub fn defs() -> Vec<ToolDef> {
    vec![ToolDef {
        name: "browser.handoff",
        description: "Ask the person at the live view (`browser-pilot view`) to act on the tab (a captcha, a second factor); completes when they press Done, with what changed, or handoff_timeout.",
        capability: "action.input",
        mutating: true,
        input_schema: object(
            json!({
                "reason": {"type": "string", "minLength": 1, "maxLength": MAX_REASON_BYTES, "description": "What to do."},
                "timeoutMs": {"type": "integer", "description": "1000..3600000."},
            }),
            &["reason"],
        ),
        output_schema: open_object(
            json!({
                "workspaceId": {"type": "string"},
                "leaseId": {"type": "string"},
                "targetId": {"type": "string"},
                "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "title": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "handoffId": {"type": "string"},
                "evidence": open_object(
                    json!({
                        "action": {"const": "handoff"},
                        "status": {"const": "verified"},
                        "urlChanged": {"type": "boolean"},
                        "titleChanged": {"type": "boolean"},
                        "documentChanged": {"type": "boolean"},
                        "cookieCountChanged": {"type": ["boolean", "null"]},
                        "note": {"type": ["string", "null"], "x-browser-pilot-sensitivity": ["browser_data"]},
                        "waitedMs": {"type": "integer", "minimum": 0},
                    }),
                    &["action", "status", "urlChanged", "titleChanged", "documentChanged"],
                ),
            }),
            &["targetId", "handoffId", "evidence"],
        ),
        sensitivity_input: &[],
        sensitivity_output: &["browser_data"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: handoff),
    }]
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HandoffParams {
    reason: String,
    /// Checked against `TIMEOUT_RANGE_MS` (a negative number fails the decode as out of range).
    timeout_ms: Option<u64>,
}

/// The tab's cookie count, `None` when the browser would not say.
async fn cookie_count(tab: &mut ControlledTab) -> Option<usize> {
    let session = tab.session().await.ok()?;
    let list = tab.execute(&session, &GetCookies {}, COOKIE_TIMEOUT).await;
    list.ok().map(|list| list.cookies.len())
}

async fn handoff(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: HandoffParams,
) -> Result<Value, ToolError> {
    if let Some(ms) = params.timeout_ms
        && !TIMEOUT_RANGE_MS.contains(&ms)
    {
        return Err(RpcError::invalid_params(format!(
            "arguments.timeoutMs must be from {} to {}",
            TIMEOUT_RANGE_MS.start(),
            TIMEOUT_RANGE_MS.end()
        ))
        .with_context("path", json!("arguments.timeoutMs"))
        .into());
    }
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let started = tokio::time::Instant::now();
    let until_deadline = scope.deadline.saturating_duration_since(started);
    let wait = match params.timeout_ms {
        Some(ms) => Duration::from_millis(ms).min(until_deadline),
        None => until_deadline,
    }
    .min(until_deadline.saturating_sub(ANSWER_RESERVE));
    let (url_before, title_before) = tab.page_info().await?;
    let mark = tab.load_mark();
    let cookies_before = cookie_count(&mut tab).await;

    let handoff_id = new_id(IdKind::Handoff);
    let (workspace_id, target_id) = (scope.workspace_id.to_string(), scope.target_id.to_string());
    let (_listed, done) = open_handoff(Handoff {
        handoff_id: handoff_id.clone(),
        workspace_id: workspace_id.clone(),
        target_id: target_id.clone(),
        reason: params.reason.clone(),
        requested_at: now_ms(),
    });
    let mut emit = Emit::new(
        &workspace_id,
        "handoff.requested",
        json!({
            "handoffId": handoff_id,
            "targetId": target_id,
            "reason": params.reason,
            "timeoutMs": wait.as_millis() as u64,
            "view": {"path": "/", "open": "browser-pilot view"},
        }),
    );
    emit.lease_id = Some(scope.lease_id.to_string());
    emit.target_id = Some(target_id.clone());
    if let Err(error) = env.events.emit(emit).await {
        tracing::debug!(%error, "handoff.requested not journaled");
    }

    let Ok(Ok(done)) = tokio::time::timeout(wait, done).await else {
        return Err(RpcError::new(
            ErrorCode::HandoffTimeout,
            "nobody pressed Done in the live view before the hand-off's time ran out",
        )
        .with_context("handoffId", json!(handoff_id))
        .with_remediation(
            RemediationAction::OpenView,
            "Ask the user to run `browser-pilot view` (or `bp view`), act on the tab and press Done, then ask again.",
        )
        .into());
    };
    let waited = tokio::time::Instant::now().saturating_duration_since(started);
    let (url, title) = tab.page_info().await?;
    let cookies_after = cookie_count(&mut tab).await;
    let cookie_count_changed = match (cookies_before, cookies_after) {
        (Some(before), Some(after)) => json!(before != after),
        _ => Value::Null,
    };
    let note: Option<String> = done.note.map(|n| n.chars().take(MAX_NOTE_CHARS).collect());
    let evidence = json!({
        "action": "handoff",
        "status": "verified",
        "urlChanged": url != url_before,
        "titleChanged": title != title_before,
        "documentChanged": tab.handle().navigated_since(&mark),
        "cookieCountChanged": cookie_count_changed,
        "note": note,
        "waitedMs": waited.as_millis() as u64,
    });
    let mut completed = Emit::new(
        &workspace_id,
        "handoff.completed",
        json!({"handoffId": handoff_id, "targetId": target_id, "evidence": evidence}),
    );
    completed.lease_id = Some(scope.lease_id.to_string());
    completed.target_id = Some(target_id);
    completed.sensitivity = "browser_data";
    if let Err(error) = env.events.emit(completed).await {
        tracing::debug!(%error, "handoff.completed not journaled");
    }
    let mut result = base_result(scope, url, title);
    result.insert("handoffId".into(), json!(handoff_id));
    result.insert("evidence".into(), evidence);
    Ok(Value::Object(result))
}
