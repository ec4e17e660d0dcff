//! The `Runtime` domain: calling a function on an object or in an execution context
//! (`CallFunctionOn`), evaluating an expression (`Evaluate`), releasing remote objects
//! (`ReleaseObjectGroup`), resuming a target paused at its start (`RunIfWaitingForDebugger`),
//! and the remote-object and exception shapes their replies share; also enabling the domain
//! (`Enable`) and the two events it reports that the Broker reads (`ConsoleApiCalled`,
//! `ExceptionThrown`).
//! Wire shapes only: which world a script runs in, and which scripts exist, is `page/`'s.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::{CdpClient, CdpError};
use super::command::{Command, Empty};
use super::event::EventParams;
use super::ids::SessionId;

/// One argument of `Runtime.callFunctionOn`: a JSON value passed by value, or a remote object
/// of the same context passed by its id (`CallArgument::object`).
#[derive(Debug, Clone, PartialEq)]
pub struct CallArgument {
    pub value: Value,
    pub object_id: Option<String>,
}

impl CallArgument {
    /// A JSON value passed by value.
    pub fn value(value: Value) -> CallArgument {
        CallArgument {
            value,
            object_id: None,
        }
    }

    /// A remote object passed by its id.
    pub fn object(object_id: String) -> CallArgument {
        CallArgument {
            value: Value::Null,
            object_id: Some(object_id),
        }
    }
}

impl Serialize for CallArgument {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(1))?;
        match &self.object_id {
            Some(id) => map.serialize_entry("objectId", id)?,
            None => map.serialize_entry("value", &self.value)?,
        }
        map.end()
    }
}

/// `Runtime.callFunctionOn`: calls `function_declaration` with `arguments`, either in an
/// execution context (`execution_context_id`) or with an object as `this` (`object_id`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallFunctionOn {
    pub function_declaration: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_context_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_id: Option<String>,
    pub arguments: Vec<CallArgument>,
    pub return_by_value: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub await_promise: Option<bool>,
    pub silent: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_group: Option<String>,
}

impl Command for CallFunctionOn {
    const METHOD: &'static str = "Runtime.callFunctionOn";
    type Reply = EvaluationReply;
}

/// `Runtime.evaluate`. Without `context_id` it runs in the session's **main world**, where the
/// page controls every global; the Broker's own scripts never do (docs/security.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evaluate {
    pub expression: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_id: Option<i64>,
    pub return_by_value: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub await_promise: Option<bool>,
    /// The group a returned remote object joins (release it with `ReleaseObjectGroup`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_group: Option<String>,
    /// Whether exceptions skip pause-on-exception and console reporting (`exceptionDetails`
    /// still comes back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silent: Option<bool>,
}

impl Command for Evaluate {
    const METHOD: &'static str = "Runtime.evaluate";
    type Reply = EvaluationReply;
}

/// The reply of `Runtime.evaluate` and `Runtime.callFunctionOn`: the result, or the exception
/// the script threw (then `result` describes the thrown value).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationReply {
    pub result: RemoteObject,
    #[serde(default)]
    pub exception_details: Option<ExceptionDetails>,
}

/// A `Runtime.RemoteObject`: `value` with `returnByValue`, `object_id` otherwise (absent for
/// primitives, `null` and `undefined`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteObject {
    #[serde(rename = "type")]
    pub object_type: String,
    #[serde(default)]
    pub subtype: Option<String>,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub object_id: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

/// A `Runtime.ExceptionDetails`, reduced to its text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ExceptionDetails {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub exception: Option<RemoteObject>,
}

impl ExceptionDetails {
    /// The thrown value's description (`Error: boom` with its stack), else the summary text.
    pub fn message(&self) -> &str {
        match self
            .exception
            .as_ref()
            .and_then(|e| e.description.as_deref())
        {
            Some(description) => description,
            None if self.text.is_empty() => "exception",
            None => &self.text,
        }
    }
}

/// `Runtime.releaseObjectGroup`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseObjectGroup {
    pub object_group: String,
}

impl Command for ReleaseObjectGroup {
    const METHOD: &'static str = "Runtime.releaseObjectGroup";
    type Reply = Empty;
}

/// `Runtime.enable`: execution-context and console events for this session from now on. It also
/// replays the console messages the page logged before (with their own timestamps).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Enable {}

impl Command for Enable {
    const METHOD: &'static str = "Runtime.enable";
    type Reply = Empty;
}

/// `Runtime.consoleAPICalled`: one `console.*` call of the page. `timestamp` is epoch
/// milliseconds (fractional).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ConsoleApiCalled {
    #[serde(rename = "type")]
    pub call_type: String,
    #[serde(default)]
    pub args: Vec<RemoteObject>,
    #[serde(default)]
    pub timestamp: f64,
}

impl EventParams for ConsoleApiCalled {
    const METHOD: &'static str = "Runtime.consoleAPICalled";
}

/// `Runtime.exceptionThrown`: an uncaught exception or an unhandled promise rejection.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExceptionThrown {
    #[serde(default)]
    pub timestamp: f64,
    pub exception_details: ExceptionDetails,
}

impl EventParams for ExceptionThrown {
    const METHOD: &'static str = "Runtime.exceptionThrown";
}

/// `Runtime.runIfWaitingForDebugger`: resumes a target that auto-attach paused at its start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunIfWaitingForDebugger {}

impl Command for RunIfWaitingForDebugger {
    const METHOD: &'static str = "Runtime.runIfWaitingForDebugger";
    type Reply = Empty;
}

/// The outcome of `Runtime.evaluate` with `returnByValue`: the page either
/// produced a value or threw. Transport failures are `CdpError`s instead.
#[derive(Debug, Clone, PartialEq)]
pub enum Evaluation {
    Value(Value),
    Exception { text: String },
}

impl From<EvaluationReply> for Evaluation {
    fn from(reply: EvaluationReply) -> Evaluation {
        match reply.exception_details {
            Some(details) => Evaluation::Exception {
                text: details.message().to_owned(),
            },
            None => Evaluation::Value(reply.result.value.unwrap_or(Value::Null)),
        }
    }
}

impl CdpClient {
    /// `Runtime.evaluate` with `returnByValue` and `awaitPromise`, in the
    /// page's **main world**: the page controls every global the expression
    /// touches. The Broker's tools never use it (`browser.eval` goes through
    /// `page::eval_in_main_world`, which bounds its result in the page); it is
    /// kept for the test harness (docs/security.md, "Hostile pages"). Wrap page
    /// scripts in a function: top-level `let`/`const` leak into the page's
    /// global scope (docs/cdp.md, "lexical leak").
    pub async fn evaluate(
        &self,
        session: &SessionId,
        expression: &str,
        timeout: Duration,
    ) -> Result<Evaluation, CdpError> {
        let command = Evaluate {
            expression: expression.to_owned(),
            context_id: None,
            return_by_value: true,
            await_promise: Some(true),
            object_group: None,
            silent: None,
        };
        Ok(self.execute(session, &command, timeout).await?.into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    #[test]
    fn commands_have_the_wire_shape() {
        let call = CallFunctionOn {
            function_declaration: "function (a) { return a; }".to_owned(),
            execution_context_id: Some(7),
            object_id: None,
            arguments: vec![
                CallArgument::value(json!({"maxChars": 10})),
                CallArgument::object("O1".to_owned()),
            ],
            return_by_value: true,
            await_promise: Some(false),
            silent: true,
            object_group: None,
        };
        assert_eq!(
            params(&call),
            json!({"functionDeclaration": "function (a) { return a; }", "executionContextId": 7,
                "arguments": [{"value": {"maxChars": 10}}, {"objectId": "O1"}], "returnByValue": true,
                "awaitPromise": false, "silent": true})
        );
        let on_object = CallFunctionOn {
            object_id: Some("O".to_owned()),
            execution_context_id: None,
            object_group: Some("g".to_owned()),
            await_promise: None,
            ..call
        };
        let wire = params(&on_object);
        assert_eq!(wire["objectId"], "O");
        assert_eq!(wire["objectGroup"], "g");
        assert!(wire.get("executionContextId").is_none());
        assert!(wire.get("awaitPromise").is_none());
        let evaluate = Evaluate {
            expression: "document.title".to_owned(),
            context_id: Some(3),
            return_by_value: true,
            await_promise: None,
            object_group: None,
            silent: None,
        };
        assert_eq!(
            params(&evaluate),
            json!({"expression": "document.title", "contextId": 3, "returnByValue": true})
        );
        let to_handle = Evaluate {
            object_group: Some("g".to_owned()),
            silent: Some(true),
            return_by_value: false,
            context_id: None,
            ..evaluate
        };
        assert_eq!(
            params(&to_handle),
            json!({"expression": "document.title", "returnByValue": false, "objectGroup": "g", "silent": true})
        );
        assert_eq!(
            params(&ReleaseObjectGroup {
                object_group: "g".to_owned()
            }),
            json!({"objectGroup": "g"})
        );
    }

    /// Events recorded from Chromium 156 (`console.log('n', {a: 1})`, an unhandled rejection).
    #[test]
    fn console_and_exception_events_decode() {
        assert_eq!(params(&Enable {}), json!({}));
        let logged = crate::cdp::Event::decode(
            "Runtime.consoleAPICalled",
            json!({"type":"log","args":[{"type":"string","value":"n"},{"type":"object","className":"Object","description":"Object","objectId":"1.2.1"}],"executionContextId":2,"timestamp":1796127250515.665}),
        )
        .unwrap();
        let crate::cdp::Event::ConsoleApiCalled(logged) = logged else {
            panic!("{logged:?}")
        };
        assert_eq!(logged.call_type, "log");
        assert_eq!(logged.args.len(), 2);
        assert_eq!(logged.args[1].description.as_deref(), Some("Object"));
        let thrown = crate::cdp::Event::decode(
            "Runtime.exceptionThrown",
            json!({"timestamp":1796127250600.1,"exceptionDetails":{"exceptionId":3,"text":"Uncaught (in promise)","lineNumber":0,"columnNumber":0,"exception":{"type":"object","subtype":"error","description":"Error: nope\n    at x"}}}),
        )
        .unwrap();
        let crate::cdp::Event::ExceptionThrown(thrown) = thrown else {
            panic!("{thrown:?}")
        };
        assert_eq!(thrown.exception_details.text, "Uncaught (in promise)");
        assert!(
            thrown
                .exception_details
                .message()
                .starts_with("Error: nope")
        );
    }

    /// Replies recorded from Chromium 156, and a bare exception without a thrown value.
    #[test]
    fn evaluation_distinguishes_value_and_exception() {
        let value =
            reply::<Evaluate>(json!({"result":{"description":"2","type":"number","value":2}}));
        assert_eq!(Evaluation::from(value), Evaluation::Value(json!(2)));
        let size = reply::<Evaluate>(json!({"result":{"type":"object","value":[780,493]}}));
        assert_eq!(Evaluation::from(size), Evaluation::Value(json!([780, 493])));
        let undefined = reply::<Evaluate>(json!({"result": {"type": "undefined"}}));
        assert_eq!(Evaluation::from(undefined), Evaluation::Value(Value::Null));
        let thrown = reply::<CallFunctionOn>(
            json!({"exceptionDetails":{"columnNumber":15,"exception":{"className":"Error","description":"Error: boom\n    at <anonymous>:1:22","objectId":"8553435088452544872.3.2","subtype":"error","type":"object"},"exceptionId":1,"lineNumber":0,"scriptId":"6","text":"Uncaught"},"result":{"className":"Error","description":"Error: boom\n    at <anonymous>:1:22","objectId":"8553435088452544872.3.1","subtype":"error","type":"object"}}),
        );
        assert_eq!(
            Evaluation::from(thrown),
            Evaluation::Exception {
                text: "Error: boom\n    at <anonymous>:1:22".to_owned()
            }
        );
        let bare = reply::<Evaluate>(
            json!({"result": {"type": "object"}, "exceptionDetails": {"text": "Uncaught"}}),
        );
        assert_eq!(
            Evaluation::from(bare),
            Evaluation::Exception {
                text: "Uncaught".to_owned()
            }
        );
        let object = reply::<CallFunctionOn>(
            json!({"result":{"className":"HTMLIFrameElement","description":"iframe#inner","objectId":"8553435088452544872.3.3","subtype":"node","type":"object"}}),
        );
        assert_eq!(
            object.result.object_id.as_deref(),
            Some("8553435088452544872.3.3")
        );
        reply::<ReleaseObjectGroup>(json!({}));
    }
}
