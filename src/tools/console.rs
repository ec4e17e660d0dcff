//! `browser.console.list`: the console messages and uncaught exceptions (unhandled promise
//! rejections included) a controlled tab produced since the Broker first attached to it, read
//! from the tab's `session::activity` book: oldest first, after a sequence cursor, filtered by
//! level, bounded. The texts are page data (`browser_data`); nothing is journaled as an event.

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::ControlledTab;
use super::tab::{ConsoleLevel, MAX_CONSOLE_ENTRIES, MAX_ENTRY_CHARS};

/// Entries returned when the call gives no `limit`.
const DEFAULT_LIMIT: u64 = 100;

pub fn defs() -> Vec<ToolDef> {
    let levels: Vec<&str> = ConsoleLevel::ALL.iter().map(|l| l.as_str()).collect();
    vec![ToolDef {
        name: "browser.console.list",
        description: "List the target's recent console messages (log, debug, info, warning, error) and uncaught exceptions and unhandled promise rejections (level `exception`), collected from the tab's own session since the Broker first attached to it (out-of-process iframes are not included), oldest first. `after` is the `sequence` of the last entry already read (from `latest`); `levels` filters; at most `limit` entries (default 100). The Broker keeps the newest 500 entries per tab (`dropped` counts older ones) and 2,000 characters per text. Texts are page data; no console events are emitted.",
        capability: "observation.read",
        mutating: false,
        input_schema: object(
            json!({
                "after": {"type": "integer", "minimum": 0, "description": "Sequence of the last entry already read."},
                "levels": {"type": "array", "items": {"enum": levels}, "minItems": 1, "maxItems": 6, "description": "Only messages of these levels."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_CONSOLE_ENTRIES, "description": "Most entries to return; default 100."},
            }),
            &[],
        ),
        output_schema: open_object(
            json!({
                "workspaceId": {"type": "string"},
                "leaseId": {"type": "string"},
                "targetId": {"type": "string"},
                "entries": {"type": "array", "items": open_object(json!({
                    "sequence": {"type": "integer", "minimum": 1},
                    "level": {"enum": levels},
                    "text": {"type": "string", "maxLength": MAX_ENTRY_CHARS, "x-browser-pilot-sensitivity": ["browser_data"]},
                    "truncated": {"type": "boolean"},
                    "timestamp": {"type": "integer"},
                }), &["sequence", "level", "text", "timestamp"])},
                "hasMore": {"type": "boolean"},
                "latest": {"type": "integer", "minimum": 0},
                "dropped": {"type": "integer", "minimum": 0},
            }),
            &["targetId", "entries", "hasMore", "latest", "dropped"],
        ),
        sensitivity_input: &[],
        sensitivity_output: &["browser_data"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: list),
    }]
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListParams {
    after: Option<u64>,
    levels: Option<Vec<String>>,
    limit: Option<u64>,
}

async fn list(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: ListParams,
) -> Result<Value, ToolError> {
    let levels: Vec<ConsoleLevel> = params
        .levels
        .unwrap_or_default()
        .iter()
        .filter_map(|name| ConsoleLevel::ALL.into_iter().find(|l| l.as_str() == name))
        .collect();
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT) as usize;
    let mut tab = ControlledTab::acquire(env, scope).await?;
    // Collection starts with the tab's session; a tab never attached before starts now.
    tab.session().await?;
    let (entries, has_more, dropped, latest) = {
        let book = tab.activity();
        let (entries, has_more) = book.entries(params.after.unwrap_or(0), &levels, limit);
        let (dropped, latest) = book.dropped_and_latest();
        (entries, has_more, dropped, latest)
    };
    let entries: Vec<Value> = entries
        .into_iter()
        .map(|entry| {
            let mut item = json!({
                "sequence": entry.sequence,
                "level": entry.level.as_str(),
                "text": entry.text,
                "timestamp": entry.timestamp_ms,
            });
            if entry.truncated {
                item["truncated"] = json!(true);
            }
            item
        })
        .collect();
    Ok(json!({
        "workspaceId": scope.workspace_id,
        "leaseId": scope.lease_id,
        "targetId": scope.target_id,
        "entries": entries,
        "hasMore": has_more,
        "latest": latest,
        "dropped": dropped,
    }))
}
