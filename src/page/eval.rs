//! `browser.eval`'s page side, pure: the caller's expression or function put into its wrapper
//! (`js/eval_expression.js`, `js/eval_function.js`), which awaits the result and boxes it so it
//! stays in the page as an object handle; the bounded serializer (`js/eval_serialize.js`) run
//! on that handle; and the decoding of the serializer's answer, re-checked here because it was
//! written in the page's main world. Running it is `run::eval_in_main_world`'s job; this file
//! does no I/O and decides no error code.

use serde::Deserialize;
use serde_json::{Value, json};

const EXPRESSION_JS: &str = include_str!("js/eval_expression.js");
const FUNCTION_JS: &str = include_str!("js/eval_function.js");
const SERIALIZE_JS: &str = include_str!("js/eval_serialize.js");

/// Where the wrappers take the caller's source and the function's JSON arguments.
const SOURCE_MARKER: &str = "/*BP_EVAL_SOURCE*/";
const ARGUMENTS_MARKER: &str = "/*BP_EVAL_ARGUMENTS*/";

/// Object group of the boxed result; released after every eval.
pub const EVAL_OBJECT_GROUP: &str = "browser-pilot-eval";

/// Bounds of `maxChars`, the JSON text of the serialized value: at least enough for a short
/// answer, at most 1 MiB so a result stays well inside the 4 MiB result limit even when every
/// character takes three UTF-8 bytes. Default 64 KiB.
pub const EVAL_MIN_MAX_CHARS: u32 = 1024;
pub const EVAL_MAX_MAX_CHARS: u32 = 1024 * 1024;
pub const EVAL_DEFAULT_MAX_CHARS: u32 = 64 * 1024;
/// Bounds of `maxDepth`, the nesting the serializer follows before it writes `"[Object]"`.
pub const EVAL_MAX_MAX_DEPTH: u32 = 64;
pub const EVAL_DEFAULT_MAX_DEPTH: u32 = 20;
/// Longest exception text returned.
pub const MAX_EXCEPTION_CHARS: usize = 2000;
/// Room beyond `maxChars` for the answer's own fields (`type`, the flags, the reasons).
const ENVELOPE_SLACK: usize = 512;

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalSource {
    /// One JavaScript expression, evaluated with top-level `await` allowed.
    Expression(String),
    /// A function expression or declaration, called with the global object as `this` and
    /// these JSON arguments.
    Function {
        source: String,
        arguments: Vec<Value>,
    },
}

/// One `browser.eval` call, its options already within their bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalRequest {
    pub source: EvalSource,
    pub max_chars: u32,
    pub max_depth: u32,
}

/// `template` with `marker` replaced once by `text` (a marker inside `text` stays text).
fn fill(template: &str, marker: &str, text: &str) -> String {
    match template.split_once(marker) {
        Some((before, after)) => format!("{before}{text}{after}"),
        None => template.to_owned(),
    }
}

impl EvalRequest {
    /// The `Runtime.evaluate` expression: the wrapper with the caller's source (and arguments).
    pub fn wrapped(&self) -> String {
        match &self.source {
            EvalSource::Expression(source) => fill(EXPRESSION_JS, SOURCE_MARKER, source),
            EvalSource::Function { source, arguments } => {
                // The arguments go in first: the template's own marker is then still unique,
                // and the caller's source is inserted last, verbatim.
                let arguments = serde_json::to_string(arguments).unwrap_or_else(|_| "[]".into());
                let with_arguments = fill(FUNCTION_JS, ARGUMENTS_MARKER, &arguments);
                let (before, after) = with_arguments
                    .split_once(SOURCE_MARKER)
                    .unwrap_or((with_arguments.as_str(), ""));
                format!("{before}{source}{after}")
            }
        }
    }

    /// The serializer's one argument.
    pub fn serializer_options(&self) -> Value {
        json!({"maxChars": self.max_chars, "maxDepth": self.max_depth, "maxExceptionChars": MAX_EXCEPTION_CHARS})
    }
}

/// The serializer's function declaration (called on the boxed result): the file after its
/// leading `//` comment lines.
pub fn eval_serializer() -> &'static str {
    let mut rest = SERIALIZE_JS;
    while rest.starts_with("//") {
        rest = rest.split_once('\n').map_or("", |(_, after)| after);
    }
    rest
}

/// Why a serialized value is not the whole value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalTruncation {
    /// The JSON text reached `maxChars`; strings and containers were cut.
    MaxChars,
    /// Nesting reached `maxDepth`; deeper containers became `"[Object]"` / `"[Array]"`.
    MaxDepth,
    /// A container held itself; the repeat became `"[Circular]"`.
    Cycle,
    /// A value JSON has no form for (function, symbol, undefined in an array, NaN, BigInt, a
    /// throwing getter) was dropped, nulled or written as a string.
    Unserializable,
}

/// The JavaScript type of the result, as the serializer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalType {
    Undefined,
    Null,
    Boolean,
    Number,
    Bigint,
    String,
    Symbol,
    Function,
    Array,
    Object,
    /// The answer could not be read (the page broke the builtins the serializer uses).
    Unknown,
}

/// A bounded result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalValue {
    #[serde(rename = "type")]
    pub value_type: EvalType,
    pub value: Value,
    pub truncated: bool,
    pub truncation_reasons: Vec<EvalTruncation>,
}

impl EvalValue {
    /// The eval ran, but its serialized answer was unreadable: no value, said so.
    pub fn unreadable() -> EvalValue {
        EvalValue {
            value_type: EvalType::Unknown,
            value: Value::Null,
            truncated: true,
            truncation_reasons: vec![EvalTruncation::Unserializable],
        }
    }

    /// Decodes the serializer's answer. Anything longer than the bound allows, or of another
    /// shape, is [`EvalValue::unreadable`]: the text came from the page's main world.
    pub fn parse(text: &str, max_chars: u32) -> EvalValue {
        let limit = (max_chars as usize).saturating_mul(3) + ENVELOPE_SLACK;
        if text.len() > limit {
            return EvalValue::unreadable();
        }
        let mut value: EvalValue = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(_) => return EvalValue::unreadable(),
        };
        value.truncation_reasons.dedup();
        value.truncated = value.truncated || !value.truncation_reasons.is_empty();
        value
    }
}

/// The serializer's answer for a boxed throw.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThrownAnswer {
    #[expect(dead_code, reason = "the key that classifies the answer; always true")]
    threw: bool,
    text: String,
}

/// What an eval produced.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalOutcome {
    Value(EvalValue),
    /// The code threw or its promise rejected: the exception text, bounded.
    Threw {
        text: String,
    },
}

impl EvalOutcome {
    /// Decodes the serializer's answer, classified by its keys: `threw` marks a boxed throw,
    /// anything else is a value ([`EvalValue::parse`]).
    pub fn parse(text: &str, max_chars: u32) -> EvalOutcome {
        let is_throw = text.starts_with(r#"{"threw":"#);
        match is_throw {
            true if text.len() > MAX_EXCEPTION_CHARS * 3 + ENVELOPE_SLACK => EvalOutcome::Threw {
                text: "exception (its text was longer than the bound)".to_owned(),
            },
            true => match serde_json::from_str::<ThrownAnswer>(text) {
                Ok(thrown) => EvalOutcome::Threw {
                    text: bound_exception(&thrown.text),
                },
                Err(_) => EvalOutcome::Threw {
                    text: "exception (its text was unreadable)".to_owned(),
                },
            },
            false => EvalOutcome::Value(EvalValue::parse(text, max_chars)),
        }
    }
}

/// An exception text cut to [`MAX_EXCEPTION_CHARS`].
pub fn bound_exception(text: &str) -> String {
    text.chars().take(MAX_EXCEPTION_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(source: EvalSource) -> EvalRequest {
        EvalRequest {
            source,
            max_chars: EVAL_DEFAULT_MAX_CHARS,
            max_depth: EVAL_DEFAULT_MAX_DEPTH,
        }
    }

    #[test]
    fn wrappers_carry_the_source_and_arguments_verbatim() {
        let wrapped = request(EvalSource::Expression("document.title".into())).wrapped();
        assert!(wrapped.contains("\ndocument.title\n"));
        assert!(wrapped.contains("await ("));
        assert!(!wrapped.contains(SOURCE_MARKER));
        let wrapped = request(EvalSource::Function {
            source: "(a, b) => a + b + '/*BP_EVAL_ARGUMENTS*/'".into(),
            arguments: vec![json!(1), json!({"k": "/*BP_EVAL_SOURCE*/"})],
        })
        .wrapped();
        assert!(wrapped.contains("\n(a, b) => a + b + '/*BP_EVAL_ARGUMENTS*/'\n"));
        assert!(wrapped.contains(r#"})([1,{"k":"/*BP_EVAL_SOURCE*/"}])"#));
        assert!(wrapped.contains(".apply(globalThis, bpArguments)"));
        assert_eq!(wrapped.matches("(a, b) =>").count(), 1);
    }

    #[test]
    fn the_serializer_is_one_function_declaration() {
        let serializer = eval_serializer();
        assert!(serializer.starts_with("function (options) {"));
        assert!(serializer.trim_end().ends_with('}'));
        assert_eq!(
            request(EvalSource::Expression("1".into())).serializer_options(),
            json!({"maxChars": 65536, "maxDepth": 20, "maxExceptionChars": 2000})
        );
    }

    #[test]
    fn answers_are_decoded_and_rechecked() {
        let ok = EvalValue::parse(
            r#"{"type":"string","value":"xx","truncated":true,"truncationReasons":["max_chars"]}"#,
            1024,
        );
        assert_eq!(ok.value_type, EvalType::String);
        assert_eq!(ok.value, json!("xx"));
        assert_eq!(ok.truncation_reasons, vec![EvalTruncation::MaxChars]);
        // A reason without the flag still marks the value truncated.
        let flagged = EvalValue::parse(
            r#"{"type":"object","value":{},"truncated":false,"truncationReasons":["cycle"]}"#,
            1024,
        );
        assert!(flagged.truncated);
        // Too long for the bound, another shape, unknown reasons: unreadable, never trusted.
        let long = format!(
            r#"{{"type":"string","value":"{}","truncated":false,"truncationReasons":[]}}"#,
            "x".repeat(4000)
        );
        assert_eq!(EvalValue::parse(&long, 1024), EvalValue::unreadable());
        assert_eq!(EvalValue::parse("not json", 1024), EvalValue::unreadable());
        assert_eq!(
            EvalValue::parse(
                r#"{"type":"string","value":"x","truncated":false,"truncationReasons":["because"]}"#,
                1024
            ),
            EvalValue::unreadable()
        );
        assert_eq!(
            EvalValue::parse(
                r#"{"type":"string","value":"x","truncated":false,"truncationReasons":[],"extra":1}"#,
                1024
            ),
            EvalValue::unreadable()
        );
        assert_eq!(bound_exception(&"é".repeat(3000)).chars().count(), 2000);
        // A boxed throw is classified by its first key.
        assert_eq!(
            EvalOutcome::parse(r#"{"threw":true,"text":"Error: boom\n    at x"}"#, 1024),
            EvalOutcome::Threw {
                text: "Error: boom\n    at x".to_owned()
            }
        );
        assert_eq!(
            EvalOutcome::parse(
                r#"{"type":"string","value":"threw","truncated":false,"truncationReasons":[]}"#,
                1024
            ),
            EvalOutcome::Value(EvalValue {
                value_type: EvalType::String,
                value: json!("threw"),
                truncated: false,
                truncation_reasons: Vec::new(),
            })
        );
    }
}
