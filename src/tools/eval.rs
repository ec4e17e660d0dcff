//! `browser.eval` (capability `page.eval`, mutating): the caller's expression, or function with
//! JSON arguments, in the main world of a controlled tab's main frame, through the seam's one
//! explicit main-world path (`page::eval_in_main_world`). Owns the parameters and their
//! cross-field rules, the deadline the eval awaits within, the result shape and the
//! `eval_exception` error. The code may change anything, so the call is a browser mutation
//! from the moment it is sent: a failure after that is the Command pipeline's
//! `unknown_outcome`, never a retry (`broker::commands`).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{ControlledTab, base_result};
use crate::page::{self, EvalOutcome, EvalRequest, EvalSource};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// Longest `expression` or `function` source (100,000 characters: a bundled helper fits; a
/// script file does not belong in a tool call).
pub const MAX_SOURCE_CHARS: usize = 100_000;
/// Most arguments of a `function`.
pub const MAX_ARGUMENTS: usize = 32;
/// Left of the deadline for reading the result and answering once the awaited code settled.
const ANSWER_MARGIN: Duration = Duration::from_millis(250);
/// Shortest wait given to the code itself, however close the deadline.
const MIN_EVAL_WAIT: Duration = Duration::from_millis(50);

pub fn defs() -> Vec<ToolDef> {
    let sources = ["browser_data"];
    vec![ToolDef {
        name: "browser.eval",
        description: "Run JavaScript in the page's main world of the tab's main frame, where the page controls every global: an `expression` (top-level `await` allowed), or a `function` called with JSON `args` and the global object as `this`. A returned promise is awaited within the deadline. The result is serialized in the page with a bound (`maxChars` of JSON text, `maxDepth` levels) and truncation reasons, so a huge value never leaves the page whole. A throw or rejection is `eval_exception` with the exception text. Mutating: the code may change the page; an eval whose outcome is unknown is never replayed.",
        capability: "page.eval",
        mutating: true,
        input_schema: object(
            json!({
                "expression": {"type": "string", "minLength": 1, "maxLength": MAX_SOURCE_CHARS, "x-browser-pilot-sensitivity": sources, "description": "JavaScript expression to evaluate; or give function."},
                "function": {"type": "string", "minLength": 1, "maxLength": MAX_SOURCE_CHARS, "x-browser-pilot-sensitivity": sources, "description": "JavaScript function source called with args."},
                "args": {"type": "array", "maxItems": MAX_ARGUMENTS, "x-browser-pilot-sensitivity": sources, "description": "JSON arguments passed to the function."},
                "maxChars": {"type": "integer", "minimum": page::EVAL_MIN_MAX_CHARS, "maximum": page::EVAL_MAX_MAX_CHARS, "description": "Most characters of the serialized result."},
                "maxDepth": {"type": "integer", "minimum": 1, "maximum": page::EVAL_MAX_MAX_DEPTH, "description": "Deepest nesting of the serialized result."},
            }),
            &[],
        ),
        output_schema: open_object(
            json!({
                "workspaceId": {"type": "string"},
                "leaseId": {"type": "string"},
                "targetId": {"type": "string"},
                "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "title": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "type": {"enum": ["undefined", "null", "boolean", "number", "bigint", "string", "symbol", "function", "array", "object", "unknown"]},
                "value": {"x-browser-pilot-sensitivity": ["browser_data"]},
                "truncated": {"type": "boolean"},
                "truncationReasons": {"type": "array", "items": {"enum": ["max_chars", "max_depth", "cycle", "unserializable"]}},
            }),
            &[
                "targetId",
                "url",
                "title",
                "type",
                "value",
                "truncated",
                "truncationReasons",
            ],
        ),
        sensitivity_input: &["browser_data"],
        sensitivity_output: &["browser_data"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: eval),
    }]
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EvalParams {
    expression: Option<String>,
    function: Option<String>,
    args: Option<Vec<Value>>,
    max_chars: Option<u32>,
    max_depth: Option<u32>,
}

fn refuse(path: &str, message: &str) -> RpcError {
    RpcError::invalid_params(format!("{path}: {message}")).with_context("path", json!(path))
}

impl EvalParams {
    /// Exactly one of `expression` / `function`; `args` only with `function`.
    fn request(self) -> Result<EvalRequest, RpcError> {
        let source = match (self.expression, self.function, self.args) {
            (Some(_), Some(_), _) => {
                return Err(refuse(
                    "arguments.function",
                    "give either expression or function, not both",
                ));
            }
            (Some(_), None, Some(_)) => {
                return Err(refuse(
                    "arguments.args",
                    "args go with function, not with expression",
                ));
            }
            (Some(expression), None, None) => EvalSource::Expression(expression),
            (None, Some(source), arguments) => EvalSource::Function {
                source,
                arguments: arguments.unwrap_or_default(),
            },
            (None, None, _) => {
                return Err(refuse(
                    "arguments.expression",
                    "give an expression or a function",
                ));
            }
        };
        Ok(EvalRequest {
            source,
            max_chars: self.max_chars.unwrap_or(page::EVAL_DEFAULT_MAX_CHARS),
            max_depth: self.max_depth.unwrap_or(page::EVAL_DEFAULT_MAX_DEPTH),
        })
    }
}

/// The `eval_exception` error: what the code threw, labelled as page data.
fn exception_error(text: String) -> RpcError {
    RpcError::new(
        ErrorCode::EvalException,
        "the evaluated code threw, or its promise rejected",
    )
    .with_context(
        "exception",
        json!({"text": text, "sensitivity": "browser_data"}),
    )
    .with_remediation(
        RemediationAction::InspectState,
        "The code ran up to the exception; observe the page before running more.",
    )
}

async fn eval(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: EvalParams,
) -> Result<Value, ToolError> {
    let request = params.request()?;
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let session = tab.session().await?;
    let left = scope
        .deadline
        .saturating_duration_since(tokio::time::Instant::now());
    let wait = left.saturating_sub(ANSWER_MARGIN).max(MIN_EVAL_WAIT);
    let outcome = tab
        .calls()
        .eval_in_main_world(&session, &request, wait)
        .await?;
    let value = match outcome {
        EvalOutcome::Value(value) => value,
        EvalOutcome::Threw { text } => return Err(exception_error(text).into()),
    };
    // The code may have navigated or retitled the page: read both afterwards.
    let (url, title) = tab.page_info().await?;
    let mut result = base_result(scope, url, title);
    result.insert("type".into(), serde_json::to_value(value.value_type)?);
    result.insert("value".into(), value.value);
    result.insert("truncated".into(), json!(value.truncated));
    result.insert(
        "truncationReasons".into(),
        serde_json::to_value(&value.truncation_reasons)?,
    );
    Ok(Value::Object(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(arguments: Value, want: Result<EvalSource, &str>) {
        let params: EvalParams = serde_json::from_value(arguments.clone()).unwrap();
        match (params.request(), want) {
            (Ok(request), Ok(source)) => assert_eq!(request.source, source, "{arguments}"),
            (Err(error), Err(path)) => {
                assert_eq!(error.code, ErrorCode::InvalidParams, "{arguments}");
                assert_eq!(error.context.unwrap()["path"], path, "{arguments}");
            }
            (got, want) => panic!("{arguments}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn exactly_one_source_and_args_only_with_a_function() {
        check(
            json!({"expression": "1 + 1"}),
            Ok(EvalSource::Expression("1 + 1".into())),
        );
        check(
            json!({"function": "(a) => a", "args": [1, "x"]}),
            Ok(EvalSource::Function {
                source: "(a) => a".into(),
                arguments: vec![json!(1), json!("x")],
            }),
        );
        check(
            json!({"function": "() => 1"}),
            Ok(EvalSource::Function {
                source: "() => 1".into(),
                arguments: Vec::new(),
            }),
        );
        check(
            json!({"expression": "1", "function": "() => 1"}),
            Err("arguments.function"),
        );
        check(
            json!({"expression": "1", "args": []}),
            Err("arguments.args"),
        );
        check(json!({}), Err("arguments.expression"));
        check(json!({"args": [1]}), Err("arguments.expression"));
    }

    #[test]
    fn the_exception_is_labelled_page_data() {
        let error = exception_error("Error: boom".into());
        assert_eq!(error.code, ErrorCode::EvalException);
        assert!(!error.code.retryable());
        assert_eq!(
            error.context.unwrap()["exception"],
            json!({"text": "Error: boom", "sensitivity": "browser_data"})
        );
    }

    #[test]
    fn the_tool_is_mutating_and_behind_page_eval() {
        let def = &defs()[0];
        assert!(def.mutating);
        assert_eq!(def.capability, "page.eval");
    }
}
