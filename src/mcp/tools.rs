//! Broker tools as MCP tools: names every major host accepts, input schemas with an optional
//! `targetId`, output schemas, and annotations.
//!
//! Owns the mapping only, from the `tools/list` the bridge answered at startup (itself generated
//! from the canonical manifest, so the list is fixed for the session and `listChanged` is
//! false). It calls nothing and converts no results.

use serde_json::{Value, json};

use crate::adapter::{ToolInfo, ToolScope};

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

/// The MCP `tools/list` entry of one Broker tool.
pub fn mcp_tool(tool: &ToolInfo) -> Value {
    let mut input_schema = match tool.input_schema.is_object() {
        true => tool.input_schema.clone(),
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
        "description": tool.description,
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
    fn target_tools_get_an_optional_target_and_annotations() {
        let observe = mcp_tool(&tool("browser.observe", ToolScope::Target, false));
        assert_eq!(observe["name"], "browser_observe");
        assert_eq!(
            observe["inputSchema"]["properties"]["targetId"]["type"],
            "string"
        );
        assert_eq!(observe["inputSchema"]["required"], json!([]));
        assert_eq!(observe["annotations"]["readOnlyHint"], true);
        assert_eq!(observe["annotations"]["openWorldHint"], true);
        assert!(observe["annotations"].get("destructiveHint").is_none());

        let close = mcp_tool(&tool("browser.tabs.close", ToolScope::Target, true));
        assert_eq!(close["annotations"]["readOnlyHint"], false);
        assert_eq!(close["annotations"]["destructiveHint"], true);
        let open = mcp_tool(&tool("browser.open", ToolScope::Workspace, true));
        assert_eq!(open["annotations"]["destructiveHint"], false);
        assert!(open["inputSchema"]["properties"].get("targetId").is_none());
        let list = mcp_tool(&tool("browser.tabs.list", ToolScope::Workspace, false));
        assert_eq!(list["annotations"]["openWorldHint"], false);
    }
}
