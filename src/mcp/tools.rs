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

/// What each Broker tool does and when to use it, written for a model: one or two short
/// sentences. A tool not listed gets the first sentence of its manifest description.
const MODEL_DESCRIPTIONS: &[(&str, &str)] = &[
    (
        "browser.discover",
        "List the browsers this computer can connect to.",
    ),
    (
        "browser.connect",
        "Connect this session to a browser (default: the one already chosen); other tools connect on first use.",
    ),
    (
        "browser.open",
        "Open a URL in a new tab and show its page. The new tab becomes the default for later calls.",
    ),
    (
        "browser.navigate",
        "Go to a URL, back, forward or reload in the tab, then show the new page.",
    ),
    (
        "browser.tabs.list",
        "List the open tabs (targetId, URL, title).",
    ),
    (
        "browser.tabs.release",
        "Give a tab back to the user; it stays open.",
    ),
    ("browser.tabs.close", "Close a tab."),
    (
        "browser.observe",
        "List the page's controls, headings and dialogs: one line each with its ref, under `##` section lines. Call it to see the page; action results already show what changed.",
    ),
    (
        "browser.read",
        "Read the page's visible text, or one element's (CSS selector or ref).",
    ),
    (
        "browser.search",
        "Find visible text on the page (or a regex) with its context.",
    ),
    (
        "browser.elements.find",
        "Find elements by CSS selector and get refs for them.",
    ),
    (
        "browser.click",
        "Click an element by ref (or at x,y); the result says if it worked and what changed.",
    ),
    (
        "browser.press",
        "Press a key or shortcut, on an element by ref or on the focused one.",
    ),
    (
        "browser.type",
        "Type text into a field by ref; mode \"fill\" replaces the value at once. The result says what changed.",
    ),
    (
        "browser.keyboard",
        "Type text as keystrokes into whatever has focus.",
    ),
    (
        "browser.scroll",
        "Scroll the page, a container, a ref or a text into view; then observe to see what came into view.",
    ),
    (
        "browser.dropdown.options",
        "List the options of a select or listbox by ref.",
    ),
    (
        "browser.dropdown.select",
        "Choose options of a select or listbox by label or value.",
    ),
    (
        "browser.dialogs.list",
        "List the JavaScript dialogs (alert, confirm, prompt) waiting for an answer.",
    ),
    (
        "browser.dialogs.respond",
        "Accept or dismiss a waiting JavaScript dialog, with text for a prompt.",
    ),
    ("browser.frames.list", "List the frames of the tab."),
    (
        "browser.frames.select",
        "Make observe and actions work inside one frame (or the main frame again).",
    ),
    (
        "browser.capture",
        "Take a screenshot of the viewport, the whole page or one element; refs can be drawn on it.",
    ),
    (
        "browser.pdf",
        "Print the page to a PDF file in the output directory.",
    ),
    (
        "browser.cookies.list",
        "List the cookies the tab's pages can see.",
    ),
    (
        "browser.eval",
        "Run JavaScript in the page and return its JSON result.",
    ),
    (
        "browser.wait",
        "Wait until text, a selector, a URL or network quiet appears (or text goes away).",
    ),
    (
        "browser.hover",
        "Move the pointer over an element by ref (or x,y).",
    ),
    (
        "browser.drag",
        "Drag from an element or point to another element or point.",
    ),
    (
        "browser.handoff",
        "Let the user act on the tab (captcha, 2FA) in the live view; ends at their Done.",
    ),
    (
        "browser.recording.start",
        "Record the tab (frames, tool calls, events) until browser.recording.stop.",
    ),
    (
        "browser.recording.stop",
        "Stop recording the tab; saves an HTML file that plays it offline.",
    ),
    (
        "browser.console.list",
        "Read the page's console messages and errors.",
    ),
    (
        "browser.upload",
        "Put an imported file into a file input by ref.",
    ),
    ("browser.network.list", "List the tab's network requests."),
    (
        "browser.network.get",
        "Get one network request's details and, optionally, its response body.",
    ),
    (
        "browser.network.rules.add",
        "Block or answer requests whose URL matches a pattern.",
    ),
    (
        "browser.network.rules.list",
        "List this session's network rules.",
    ),
    ("browser.network.rules.remove", "Remove a network rule."),
    (
        "browser.auth.set",
        "Set HTTP authentication credentials for an origin.",
    ),
    (
        "browser.auth.clear",
        "Remove HTTP authentication credentials for an origin.",
    ),
];

/// The model-facing description of a Broker tool.
fn model_description(tool: &ToolInfo, tools: &[ToolInfo]) -> String {
    match MODEL_DESCRIPTIONS
        .iter()
        .find(|(name, _)| *name == tool.name)
    {
        Some((_, text)) => mcp_text(text, tools),
        None => {
            let text = mcp_text(&tool.description, tools);
            match text.find(". ") {
                Some(end) => text[..=end].to_owned(),
                None => text,
            }
        }
    }
}

/// Input properties the server fills itself and so does not offer the model: `observe`, the
/// shape of an action's closing Observation (a diff against the tab's previous Observation, in
/// compact lines), and `observationId`, the tab's latest Observation (refs stay the same for an
/// element for the life of its document, and every result shows the refs it changed).
const SERVER_FILLED: &[&str] = &["observe", "observationId"];

/// Schema keywords left out of the model's view: length and item-count bounds (the Broker
/// checks them and names the bound when it refuses).
const UNSHOWN_KEYWORDS: &[&str] = &["minLength", "maxLength", "minItems", "maxItems"];

/// Options of `browser.observe` left to the server: `maxBytes` (the server bounds the result
/// by `maxTokens`).
const OBSERVE_SERVER_FILLED: &[&str] = &["maxBytes"];

/// The Broker's per-field sensitivity mark, left out of the lean form's input schemas: the
/// entry's `_meta["browser-pilot/sensitivity"].input` carries the tool's classes, and a model
/// has no use for the mark.
const SENSITIVITY_KEYWORD: &str = "x-browser-pilot-sensitivity";

/// `schema` without [`UNSHOWN_KEYWORDS`] (and `also`), at every depth.
fn without_bounds(schema: &mut Value, also: Option<&str>) {
    match schema {
        Value::Object(object) => {
            for keyword in UNSHOWN_KEYWORDS.iter().chain(also.as_slice()) {
                object.remove(*keyword);
            }
            object
                .values_mut()
                .for_each(|value| without_bounds(value, also));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|value| without_bounds(value, also)),
        _ => {}
    }
}

/// A ref argument: from the latest result of the tab (the server adds its `observationId`).
const REF_DESCRIPTION: &str = "Ref of the latest result.";

/// The `targetId` every tab tool accepts.
const TARGET_ID_DESCRIPTION: &str = "Tab; default: current.";

/// The MCP `tools/list` entry of one Broker tool; `tools` is the whole list, so descriptions
/// name the MCP tools a host can call. `structured` adds the output schema.
pub fn mcp_tool(tool: &ToolInfo, tools: &[ToolInfo], structured: bool) -> Value {
    let mut input_schema = match tool.input_schema.is_object() {
        true => mcp_schema(&tool.input_schema, tools),
        false => json!({"type": "object"}),
    };
    if let Some(properties) = input_schema.as_object_mut().and_then(|schema| {
        schema
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    }) {
        for name in SERVER_FILLED {
            properties.remove(*name);
        }
        if tool.name == "browser.observe" {
            for name in OBSERVE_SERVER_FILLED {
                properties.remove(*name);
            }
        }
        // `browser.capture`'s annotations name their Observation the same way a ref does.
        if let Some(Value::Object(annotations)) = properties.get_mut("annotations") {
            if let Some(Value::Object(inner)) = annotations.get_mut("properties") {
                inner.remove("observationId");
            }
            if let Some(Value::Array(required)) = annotations.get_mut("required") {
                required.retain(|name| name != "observationId");
            }
        }
        if let Some(Value::Object(property)) = properties.get_mut("ref") {
            property.insert("description".into(), json!(REF_DESCRIPTION));
        }
        if tool.scope == ToolScope::Target {
            match properties.get_mut("targetId") {
                Some(Value::Object(property)) => {
                    property.insert("description".into(), json!(TARGET_ID_DESCRIPTION));
                }
                _ => {
                    properties.insert(
                        "targetId".into(),
                        json!({"type": "string", "description": TARGET_ID_DESCRIPTION}),
                    );
                }
            }
        }
    }
    let lean_only = (!structured).then_some(SENSITIVITY_KEYWORD);
    without_bounds(&mut input_schema, lean_only);
    if let Some(schema) = input_schema.as_object_mut() {
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            required.retain(|name| !SERVER_FILLED.iter().any(|filled| name == filled));
        }
        if schema.get("required").is_some_and(|r| r == &json!([])) {
            schema.remove("required");
        }
    }
    let read_only = !tool.mutating;
    let mut annotations = json!({
        "readOnlyHint": read_only,
        "openWorldHint": !CLOSED_WORLD_TOOLS.contains(&tool.name.as_str()),
    });
    if !read_only {
        annotations["destructiveHint"] = json!(!ADDITIVE_TOOLS.contains(&tool.name.as_str()));
        annotations["idempotentHint"] = json!(false);
    }
    let mut entry = json!({
        "name": mcp_name(&tool.name),
        "description": model_description(tool, tools),
        "inputSchema": input_schema,
        "annotations": annotations,
        "_meta": {"browser-pilot/tool": tool.name, "browser-pilot/sensitivity": {"input": tool.sensitivity_input, "output": tool.sensitivity_output}},
    });
    if structured && tool.output_schema.is_object() {
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
        let observe = mcp_tool(
            &tool("browser.observe", ToolScope::Target, false),
            &all,
            false,
        );
        assert_eq!(observe["name"], "browser_observe");
        assert!(observe.get("outputSchema").is_none());
        let description = observe["description"].as_str().unwrap();
        assert!(description.len() < 200, "{description}");
        assert_eq!(
            observe["inputSchema"]["properties"]["targetId"]["type"],
            "string"
        );
        assert!(observe["inputSchema"].get("required").is_none());
        assert_eq!(observe["annotations"]["readOnlyHint"], true);
        assert_eq!(observe["annotations"]["openWorldHint"], true);
        assert!(observe["annotations"].get("destructiveHint").is_none());

        let close = mcp_tool(
            &tool("browser.tabs.close", ToolScope::Target, true),
            &all,
            true,
        );
        assert_eq!(close["outputSchema"]["type"], "object");
        assert_eq!(close["annotations"]["readOnlyHint"], false);
        assert_eq!(close["annotations"]["destructiveHint"], true);
        let open = mcp_tool(
            &tool("browser.open", ToolScope::Workspace, true),
            &all,
            false,
        );
        assert_eq!(open["annotations"]["destructiveHint"], false);
        assert!(open["inputSchema"]["properties"].get("targetId").is_none());
        let list = mcp_tool(
            &tool("browser.tabs.list", ToolScope::Workspace, false),
            &all,
            false,
        );
        assert_eq!(list["annotations"]["openWorldHint"], false);
    }

    #[test]
    fn actions_leave_the_closing_observation_to_the_server() {
        let mut click = tool("browser.click", ToolScope::Target, true);
        click.input_schema = json!({"type": "object", "properties": {
            "observationId": {"type": "string", "description": "long"},
            "ref": {"type": "integer"},
            "observe": {"type": "object"},
        }, "required": ["observe", "observationId"]});
        let entry = mcp_tool(&click, &[], false);
        let properties = &entry["inputSchema"]["properties"];
        assert!(properties.get("observe").is_none(), "{entry}");
        assert!(entry["inputSchema"].get("required").is_none(), "{entry}");
        assert!(properties.get("observationId").is_none(), "{entry}");
        assert_eq!(properties["ref"]["description"], REF_DESCRIPTION);
    }

    #[test]
    fn only_the_structured_form_keeps_the_fields_sensitivity_marks() {
        let mut wait = tool("browser.wait", ToolScope::Target, false);
        wait.input_schema = json!({"type": "object", "properties": {
            "text": {"type": "string", "description": "t", "x-browser-pilot-sensitivity": ["browser_data"]},
        }});
        let lean = mcp_tool(&wait, &[], false);
        assert!(
            lean["inputSchema"]["properties"]["text"]
                .get(SENSITIVITY_KEYWORD)
                .is_none(),
            "{lean}"
        );
        assert_eq!(
            lean["_meta"]["browser-pilot/sensitivity"]["output"],
            json!(["browser_data"])
        );
        let structured = mcp_tool(&wait, &[], true);
        assert_eq!(
            structured["inputSchema"]["properties"]["text"][SENSITIVITY_KEYWORD],
            json!(["browser_data"])
        );
    }
}
