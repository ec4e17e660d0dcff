//! The canonical tool definitions: the registry. Each `ToolDef` carries its schemas, its
//! handler, its lane (ordinary or out-of-band) and its dispatch-gate rule, so `tools/list`,
//! argument validation, result validation (debug builds), dispatch, the bridge's out-of-band
//! list (checked against it by a test) and `docs/tools.md` all come from here. A tool absent
//! from this list is not wired and is neither advertised nor callable.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

pub use crate::protocol::methods::Lane;

use super::context::{CallScope, TargetScope, ToolEnv, WorkspaceScope};
use super::error::ToolError;
use super::schema::{self, Violation};
use super::{
    capture, click, console, cookies, dialogs, discover, dropdowns, emulate, eval, frames, gesture,
    handoff, keys, network, observe, recording, scroll, storage, tabs, typing, upload, wait,
};

/// What a handler returns: the tool's result, or why it failed.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// A tool's entry point, by the scope it declares: the environment, the call's typed scope
/// (so a Target tool cannot run without its `targetId`) and the validated arguments, which the
/// `handler!` wrapper decodes once into the tool's params struct (`decode_params`). The second
/// function decodes only, so the documented examples can be checked against the params types.
#[derive(Clone, Copy)]
pub enum Handler {
    Connection(
        for<'a> fn(&'a ToolEnv, &'a CallScope, Map<String, Value>) -> ToolFuture<'a>,
        DecodeCheck,
    ),
    Workspace(
        for<'a> fn(&'a ToolEnv, &'a WorkspaceScope<'a>, Map<String, Value>) -> ToolFuture<'a>,
        DecodeCheck,
    ),
    Target(
        for<'a> fn(&'a ToolEnv, &'a TargetScope<'a>, Map<String, Value>) -> ToolFuture<'a>,
        DecodeCheck,
    ),
}

/// Decodes arguments into a tool's params type, and nothing else.
pub type DecodeCheck = fn(Map<String, Value>) -> Result<(), ToolError>;

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Handler::{}", self.scope().as_str())
    }
}

impl Handler {
    /// The scope this handler declares.
    pub fn scope(&self) -> Scope {
        match self {
            Handler::Connection(..) => Scope::Connection,
            Handler::Workspace(..) => Scope::Workspace,
            Handler::Target(..) => Scope::Target,
        }
    }

    /// Whether `arguments` decode into the tool's params type.
    pub fn decodes(&self, arguments: Map<String, Value>) -> Result<(), ToolError> {
        match self {
            Handler::Connection(_, check)
            | Handler::Workspace(_, check)
            | Handler::Target(_, check) => check(arguments),
        }
    }
}

/// Wraps `async fn tool(env, scope, params)` as a [`Handler`] of the named scope: the function's
/// scope parameter is `&CallScope`, `&WorkspaceScope` or `&TargetScope` to match, and its params
/// parameter is its `#[derive(Deserialize)]` params struct, decoded here once.
macro_rules! handler {
    (Connection: $tool:path) => {
        handler!(@wrap Connection, $crate::tools::CallScope, $tool)
    };
    (Workspace: $tool:path) => {
        handler!(@wrap Workspace, $crate::tools::WorkspaceScope<'a>, $tool)
    };
    (Target: $tool:path) => {
        handler!(@wrap Target, $crate::tools::TargetScope<'a>, $tool)
    };
    (@wrap $kind:ident, $scope:ty, $tool:path) => {{
        fn boxed<'a>(
            env: &'a $crate::tools::ToolEnv,
            scope: &'a $scope,
            arguments: ::serde_json::Map<String, ::serde_json::Value>,
        ) -> $crate::tools::ToolFuture<'a> {
            Box::pin(async move {
                let params = $crate::tools::context::decode_params(arguments)?;
                $tool(env, scope, params).await
            })
        }
        fn decodes(
            arguments: ::serde_json::Map<String, ::serde_json::Value>,
        ) -> Result<(), $crate::tools::ToolError> {
            $crate::tools::context::decode_params_of($tool, arguments).map(drop)
        }
        $crate::tools::Handler::$kind(boxed, decodes)
    }};
}

/// When a Command passes its dispatch gate (is marked dispatched; see `DispatchGate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Before the handler runs: tools that touch no tab queue.
    Dispatch,
    /// Inside the handler, once it holds its tab's turn (`ControlledTab`) or right before its
    /// first browser call: the wait in the tab queue is still the `accepted` phase.
    InTool,
}

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
    pub mutating: bool,
    pub input_schema: Value,
    pub output_schema: Value,
    /// Sensitivity classes that may occur anywhere in the arguments / the result.
    pub sensitivity_input: &'static [&'static str],
    pub sensitivity_output: &'static [&'static str],
    /// Ordinary tools run in input order; out-of-band ones may overtake a pending call.
    pub lane: Lane,
    pub gate: Gate,
    /// Its entry point; its kind is the tool's declared scope ([`ToolDef::scope`]).
    pub handler: Handler,
}

impl ToolDef {
    /// Which envelope fields the tool needs, as its handler declares.
    pub fn scope(&self) -> Scope {
        self.handler.scope()
    }

    /// Checks a call's `arguments` against the input schema, then against the argument groups
    /// of which the tool needs one ([`alternatives`]); the first violation is `invalid_params`.
    pub fn validate_arguments(&self, arguments: &Value) -> Result<(), Violation> {
        schema::validate(&self.input_schema, arguments, "arguments")?;
        schema::require_one_of(alternatives(self.name), arguments, "arguments")
    }

    /// The `tools/list` entry.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "capability": self.capability,
            "scope": self.scope().as_str(),
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
        tools.extend(click::defs());
        tools.extend(keys::defs());
        tools.extend(typing::defs());
        tools.extend(scroll::defs());
        tools.extend(dropdowns::defs());
        tools.extend(dialogs::defs());
        tools.extend(frames::defs());
        tools.extend(capture::defs());
        tools.extend(cookies::defs());
        tools.extend(storage::defs());
        tools.extend(eval::defs());
        tools.extend(emulate::defs());
        tools.extend(wait::defs());
        tools.extend(handoff::defs());
        tools.extend(recording::defs());
        tools.extend(gesture::defs());
        tools.extend(console::defs());
        tools.extend(upload::defs());
        tools.extend(network::defs());
        tools
    })
}

/// The argument groups of which a tool needs at least one in full, when its schema alone cannot
/// say so: strict hosts refuse `anyOf`/`oneOf`/`allOf` at the root of an input schema, so the
/// canonical schemas carry none and the alternatives are checked here (before the Command is
/// created) and named in the properties' descriptions. Empty for every other tool.
pub fn alternatives(tool: &str) -> &'static [&'static [&'static str]] {
    const TARGET: &[&[&str]] = &[&["observationId", "ref"], &["x", "y"]];
    match tool {
        "browser.click" | "browser.hover" | "browser.drag" => TARGET,
        "browser.wait" => &[
            &["text"],
            &["textGone"],
            &["selector"],
            &["url"],
            &["networkIdle"],
        ],
        "browser.frames.select" => &[&["frameId"], &["main"]],
        _ => &[],
    }
}

pub fn find(name: &str) -> Option<&'static ToolDef> {
    manifest().iter().find(|tool| tool.name == name)
}

/// An object schema with the given properties, none extra.
pub fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": properties, "required": required})
}

/// `schema` with a `description` (for a property built by a helper).
pub fn described(mut schema: Value, description: &str) -> Value {
    schema["description"] = json!(description);
    schema
}

/// An open object schema (results may gain fields; hosts ignore unknown ones).
pub fn open_object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::negotiate::CAPABILITIES;
    use crate::tools::schema::{ROOT_COMBINATORS, host_problems, unknown_keywords};

    #[test]
    fn the_bridge_knows_exactly_the_out_of_band_tools() {
        let mut out_of_band: Vec<&str> = manifest()
            .iter()
            .filter(|tool| tool.lane == Lane::OutOfBand)
            .map(|tool| tool.name)
            .collect();
        out_of_band.sort_unstable();
        let mut listed = crate::protocol::methods::OUT_OF_BAND_TOOLS.to_vec();
        listed.sort_unstable();
        assert_eq!(out_of_band, listed);
        for tool in manifest() {
            let params = json!({"name": tool.name});
            assert_eq!(
                crate::protocol::methods::lane("tools/call", params.as_object().unwrap()),
                tool.lane,
                "{}",
                tool.name
            );
        }
    }

    /// Strict hosts (Anthropic's, OpenAI's and Bedrock's tool APIs) refuse a combinator at the
    /// root of an input schema; every property carries a short description a model can read.
    #[test]
    fn every_schema_is_strict_host_safe() {
        for tool in manifest() {
            assert_eq!(
                host_problems(&tool.input_schema),
                Vec::<String>::new(),
                "{}",
                tool.name
            );
            for keyword in ROOT_COMBINATORS {
                assert!(
                    tool.output_schema.get(*keyword).is_none(),
                    "{}: {keyword}",
                    tool.name
                );
            }
            let properties = tool.input_schema["properties"].as_object().unwrap();
            for (name, property) in properties {
                let words = property["description"].as_str().unwrap().split_whitespace();
                assert!(words.count() <= 14, "{}.{name}: keep it short", tool.name);
            }
            for group in alternatives(tool.name) {
                for name in *group {
                    assert!(properties.contains_key(*name), "{}: {name}", tool.name);
                }
            }
        }
    }

    /// A tool's sensitivity lists name every class any of its fields carries, so a host that
    /// reads only the tool-level lists (`tools/list` `sensitivity`) misses none.
    #[test]
    fn tool_sensitivity_covers_every_field() {
        fn classes(schema: &Value, out: &mut Vec<String>) {
            match schema {
                Value::Object(object) => {
                    if let Some(Value::Array(found)) = object.get("x-browser-pilot-sensitivity") {
                        out.extend(found.iter().filter_map(Value::as_str).map(str::to_owned));
                    }
                    object.values().for_each(|v| classes(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| classes(v, out)),
                _ => {}
            }
        }
        for tool in manifest() {
            for (schema, listed, side) in [
                (&tool.input_schema, tool.sensitivity_input, "input"),
                (&tool.output_schema, tool.sensitivity_output, "output"),
            ] {
                let mut found = Vec::new();
                classes(schema, &mut found);
                for class in found {
                    assert!(
                        listed.contains(&class.as_str()),
                        "{} {side}: a field carries {class} but the tool does not list it",
                        tool.name
                    );
                }
            }
        }
        let upload = find("browser.upload").unwrap();
        assert_eq!(
            upload.input_schema["properties"]["artifactId"]["x-browser-pilot-sensitivity"],
            json!(["user_file"])
        );
    }

    #[test]
    fn alternatives_are_checked_in_code() {
        let click = find("browser.click").unwrap();
        assert!(click.validate_arguments(&json!({"x": 1, "y": 2})).is_ok());
        assert!(
            click
                .validate_arguments(&json!({"observationId": "o", "ref": 2}))
                .is_ok()
        );
        let missing = click
            .validate_arguments(&json!({"button": "left"}))
            .unwrap_err();
        assert_eq!(missing.path, "arguments");
        assert!(missing.message.contains("observationId + ref, or x + y"));
        let wait = find("browser.wait").unwrap();
        assert!(wait.validate_arguments(&json!({"idleMs": 10})).is_err());
        assert!(
            wait.validate_arguments(&json!({"networkIdle": true}))
                .is_ok()
        );
        let select = find("browser.frames.select").unwrap();
        assert!(select.validate_arguments(&json!({})).is_err());
        // The schema still comes first.
        let bad = click
            .validate_arguments(&json!({"x": -1, "y": 2}))
            .unwrap_err();
        assert_eq!(bad.path, "arguments.x");
    }

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

    /// Every documented example request decodes into its tool's params struct (the struct
    /// and the schema say the same thing; `handler!` decodes exactly so).
    #[test]
    fn every_documented_example_decodes_into_its_tools_params() {
        let examples: Map<String, Value> =
            serde_json::from_str(include_str!("../../docs/tool-examples.json")).unwrap();
        let mut decoded = 0;
        for def in manifest() {
            let example = examples
                .get(def.name)
                .unwrap_or_else(|| panic!("docs/tool-examples.json lacks {}", def.name));
            let arguments = example["request"]["arguments"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            if let Err(error) = def.handler.decodes(arguments) {
                let error = crate::protocol::errors::RpcError::from(error);
                panic!("{}: {}", def.name, error.message);
            }
            decoded += 1;
        }
        assert_eq!(decoded, examples.len(), "an example of no tool");
    }

    /// A decode failure after schema validation is the schema and the struct out of step.
    #[test]
    fn arguments_that_miss_the_params_struct_are_an_internal_error() {
        let click = find("browser.click").unwrap();
        let bad = json!({"x": "not a number"}).as_object().cloned().unwrap();
        let error =
            crate::protocol::errors::RpcError::from(click.handler.decodes(bad).unwrap_err());
        assert_eq!(
            error.code,
            crate::protocol::errors::ErrorCode::InternalError
        );
    }
}
