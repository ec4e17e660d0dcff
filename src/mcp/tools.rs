//! Broker tools as MCP tools: names every major host accepts, input schemas with an optional
//! `targetId`, output schemas, and annotations.
//!
//! Owns the mapping only, from the `tools/list` the bridge answered at startup (itself generated
//! from the canonical manifest, so the list is fixed for the session and `listChanged` is
//! false). It calls nothing and converts no results.

use serde_json::{Value, json};

use crate::adapter::{ToolInfo, ToolScope};
use crate::protocol::errors::RpcError;

/// Mutating tools that only add to the browser's state (a new tab; giving up control of one)
/// and so cannot lose user data. Every other mutating tool is `destructiveHint: true`: a click,
/// key press, typed text, selection, navigation, dialog answer or tab close on a real site can
/// submit, overwrite or discard the user's data. The manifest has no such flag yet.
const ADDITIVE_TOOLS: &[&str] = &["browser.open", "browser.tabs.release"];

/// Tools that touch only the Broker's own view (candidates, inventory, frame selection, pending
/// dialogs), not page content from the open web: `openWorldHint: false`.
const CLOSED_WORLD_TOOLS: &[&str] = &[
    "browser.discover",
    "browser.connect",
    "browser.tabs.list",
    "browser.tabs.release",
    "browser.frames.list",
    "browser.frames.select",
    "browser.dialogs.list",
];

/// The MCP name of a Broker tool: letters, digits, `_` and `-` only (`browser.tabs.list` ->
/// `browser_tabs_list`).
pub fn mcp_name(broker_name: &str) -> String {
    broker_name
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .collect()
}

/// `text` with every Broker tool name of `tools` (and every `browser.dialogs.*` family) spelled
/// as the MCP tool a host can call (`browser.observe` -> `browser_observe`); other dotted words
/// (capability names such as `browser.control`) stay as they are.
pub fn mcp_text(text: &str, tools: &[ToolInfo]) -> String {
    rename_tools(text, |name| {
        let family = name.strip_suffix(".*");
        let known = tools.iter().any(|tool| match family {
            Some(prefix) => tool
                .name
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('.')),
            None => tool.name == name,
        });
        known.then(|| match family {
            Some(prefix) => format!("{}_*", mcp_name(prefix)),
            None => mcp_name(name),
        })
    })
}

/// `error` with its message and remediation in MCP tool names.
pub fn mcp_error(mut error: RpcError, tools: &[ToolInfo]) -> RpcError {
    error.message = mcp_text(&error.message, tools);
    if let Some(Value::String(message)) = error
        .remediation
        .as_mut()
        .and_then(|remediation| remediation.get_mut("message"))
    {
        *message = mcp_text(message, tools);
    }
    error
}

/// Replaces each `browser.`-word of `text` (letters, digits, `.`, `_`, `-`, `*`; a final `.` is
/// punctuation) by what `rename` answers for it, if anything.
fn rename_tools(text: &str, rename: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("browser.") {
        let boundary = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'));
        out.push_str(&rest[..at]);
        let word_len = rest[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "._-*".contains(c)))
            .unwrap_or(rest.len() - at);
        let word = rest[at..at + word_len].trim_end_matches('.');
        match rename(word).filter(|_| boundary) {
            Some(renamed) => out.push_str(&renamed),
            None => out.push_str(word),
        }
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

/// The schema with its property descriptions in MCP tool names.
fn mcp_schema(schema: &Value, tools: &[ToolInfo]) -> Value {
    match schema {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        ("description", Value::String(text)) => json!(mcp_text(text, tools)),
                        _ => mcp_schema(value, tools),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| mcp_schema(v, tools)).collect()),
        other => other.clone(),
    }
}

/// The MCP `tools/list` entry of one Broker tool; `tools` is the whole list, so descriptions
/// name the MCP tools a host can call.
pub fn mcp_tool(tool: &ToolInfo, tools: &[ToolInfo]) -> Value {
    let mut input_schema = match tool.input_schema.is_object() {
        true => mcp_schema(&tool.input_schema, tools),
        false => json!({"type": "object"}),
    };
    if tool.scope == ToolScope::Target
        && let Some(properties) = input_schema.as_object_mut().and_then(|schema| {
            schema
                .entry("properties")
                .or_insert_with(|| json!({}))
                .as_object_mut()
        })
        && !properties.contains_key("targetId")
    {
        properties.insert(
            "targetId".into(),
            json!({"type": "string", "minLength": 1, "description": "Opaque tab id from browser_open or browser_tabs_list. Optional: defaults to the tab this session last opened or selected."}),
        );
    }
    let read_only = !tool.mutating;
    let mut annotations = json!({
        "title": tool.name,
        "readOnlyHint": read_only,
        "openWorldHint": !CLOSED_WORLD_TOOLS.contains(&tool.name.as_str()),
    });
    if !read_only {
        annotations["destructiveHint"] = json!(!ADDITIVE_TOOLS.contains(&tool.name.as_str()));
        annotations["idempotentHint"] = json!(false);
    }
    let mut entry = json!({
        "name": mcp_name(&tool.name),
        "title": tool.name,
        "description": mcp_text(&tool.description, tools),
        "inputSchema": input_schema,
        "annotations": annotations,
        "_meta": {"browser-pilot/tool": tool.name, "browser-pilot/sensitivity": {"input": tool.sensitivity_input, "output": tool.sensitivity_output}},
    });
    if tool.output_schema.is_object() {
        entry["outputSchema"] = tool.output_schema.clone();
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, scope: ToolScope, mutating: bool) -> ToolInfo {
        ToolInfo {
            name: name.to_owned(),
            description: "d".to_owned(),
            capability: "observation.read".to_owned(),
            scope,
            mutating,
            input_schema: json!({"type": "object", "additionalProperties": false, "properties": {"limit": {"type": "integer"}}, "required": []}),
            output_schema: json!({"type": "object", "properties": {}}),
            sensitivity_input: vec![],
            sensitivity_output: vec!["browser_data".to_owned()],
        }
    }

    #[test]
    fn names_are_host_safe() {
        assert_eq!(mcp_name("browser.tabs.list"), "browser_tabs_list");
        assert_eq!(mcp_name("browser.dropdown-x.y z"), "browser_dropdown-x_y_z");
    }

    #[test]
    fn texts_name_mcp_tools() {
        let tools = [
            tool("browser.observe", ToolScope::Target, false),
            tool("browser.dialogs.list", ToolScope::Target, false),
        ];
        assert_eq!(
            mcp_text(
                "Call browser.observe, then browser.dialogs.* (browser.dialogs.list.) with browser.control; xbrowser.observe",
                &tools
            ),
            "Call browser_observe, then browser_dialogs_* (browser_dialogs_list.) with browser.control; xbrowser.observe"
        );
        assert_eq!(mcp_text("browser.", &tools), "browser.");
    }

    #[test]
    fn target_tools_get_an_optional_target_and_annotations() {
        let all = [];
        let observe = mcp_tool(&tool("browser.observe", ToolScope::Target, false), &all);
        assert_eq!(observe["name"], "browser_observe");
        assert_eq!(
            observe["inputSchema"]["properties"]["targetId"]["type"],
            "string"
        );
        assert_eq!(observe["inputSchema"]["required"], json!([]));
        assert_eq!(observe["annotations"]["readOnlyHint"], true);
        assert_eq!(observe["annotations"]["openWorldHint"], true);
        assert!(observe["annotations"].get("destructiveHint").is_none());

        let close = mcp_tool(&tool("browser.tabs.close", ToolScope::Target, true), &all);
        assert_eq!(close["annotations"]["readOnlyHint"], false);
        assert_eq!(close["annotations"]["destructiveHint"], true);
        let open = mcp_tool(&tool("browser.open", ToolScope::Workspace, true), &all);
        assert_eq!(open["annotations"]["destructiveHint"], false);
        assert!(open["inputSchema"]["properties"].get("targetId").is_none());
        let list = mcp_tool(
            &tool("browser.tabs.list", ToolScope::Workspace, false),
            &all,
        );
        assert_eq!(list["annotations"]["openWorldHint"], false);
    }
}
