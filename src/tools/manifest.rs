//! The canonical tool definitions. `tools/list`, argument validation, result validation (debug
//! builds) and `docs/tools.md` all come from here; a tool absent from this list is not wired and
//! is neither advertised nor callable.

use std::sync::OnceLock;

use serde_json::{Value, json};

use super::{actions, capture, discover, frames, keys, observe, tabs};

/// Which envelope fields a tool needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// No Workspace fields: browser discovery and connection.
    Connection,
    /// `workspaceId + leaseId`.
    Workspace,
    /// `workspaceId + leaseId + targetId`.
    Target,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Connection => "connection",
            Scope::Workspace => "workspace",
            Scope::Target => "target",
        }
    }
}

/// One tool, declared once.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    pub capability: &'static str,
    pub scope: Scope,
    pub mutating: bool,
    pub input_schema: Value,
    pub output_schema: Value,
    /// Sensitivity classes that may occur anywhere in the arguments / the result.
    pub sensitivity_input: &'static [&'static str],
    pub sensitivity_output: &'static [&'static str],
}

impl ToolDef {
    /// The `tools/list` entry.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "capability": self.capability,
            "scope": self.scope.as_str(),
            "mutating": self.mutating,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "sensitivity": {"input": self.sensitivity_input, "output": self.sensitivity_output},
        })
    }
}

/// Every wired tool, in a stable order.
pub fn manifest() -> &'static [ToolDef] {
    static MANIFEST: OnceLock<Vec<ToolDef>> = OnceLock::new();
    MANIFEST.get_or_init(|| {
        let mut tools = Vec::new();
        tools.extend(discover::defs());
        tools.extend(tabs::defs());
        tools.extend(observe::defs());
        // The keyboard tools follow browser.click, as they did when one file held both.
        let mut action_defs = actions::defs();
        let after_click = action_defs
            .iter()
            .position(|tool| tool.name == "browser.click")
            .map_or(0, |at| at + 1);
        action_defs.splice(after_click..after_click, keys::defs());
        tools.extend(action_defs);
        tools.extend(frames::defs());
        tools.extend(capture::defs());
        tools
    })
}

pub fn find(name: &str) -> Option<&'static ToolDef> {
    manifest().iter().find(|tool| tool.name == name)
}

/// An object schema with the given properties, none extra.
pub fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": properties, "required": required})
}

/// An open object schema (results may gain fields; hosts ignore unknown ones).
pub fn open_object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::negotiate::CAPABILITIES;
    use crate::tools::schema::unknown_keywords;

    #[test]
    fn manifest_is_well_formed() {
        let mut names = std::collections::HashSet::new();
        for tool in manifest() {
            assert!(names.insert(tool.name), "duplicate tool {}", tool.name);
            assert!(
                CAPABILITIES.contains(&tool.capability),
                "{}: unknown capability {}",
                tool.name,
                tool.capability
            );
            for schema in [&tool.input_schema, &tool.output_schema] {
                assert_eq!(
                    unknown_keywords(schema),
                    Vec::<String>::new(),
                    "{}",
                    tool.name
                );
                assert_eq!(schema["type"], "object", "{}", tool.name);
            }
        }
    }
}
