//! CDP message framing above the line: classifies one inbound line into a
//! response, an event or the janitor's own status line by its keys, and
//! serializes one outbound request into one line. It knows no method
//! semantics, no pending calls and no channels.

use serde::Serialize;
use serde_json::{Map, Value};

use super::ids::SessionId;
use super::pipe::JanitorLine;

/// One classified inbound CDP message.
#[derive(Debug, PartialEq)]
pub enum Inbound {
    /// A reply to a request we sent: `{"id":N,"result":{...}}` or
    /// `{"id":N,"error":{"code":..,"message":..}}`.
    Response {
        id: u64,
        session: Option<SessionId>,
        outcome: Result<Value, RemoteError>,
    },
    /// A notification: `{"method":"Domain.event","params":{...}}`.
    Event {
        session: Option<SessionId>,
        method: String,
        params: Value,
    },
    /// The janitor's own status line (`{"janitor":..}`), not CDP; `None` when this version
    /// does not know its kind.
    Janitor(Option<JanitorLine>),
}

/// The `error` member of a CDP response, as Chromium sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    pub code: i64,
    pub message: String,
}

/// Why an inbound line is not a CDP message. The client logs and skips it.
#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    #[error("line is not json: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("message is not a json object")]
    NotAnObject,
    #[error("message id is not a non-negative integer")]
    BadId,
    #[error("message has neither an id nor a method")]
    NeitherIdNorMethod,
    #[error("sessionId is not a string")]
    BadSessionId,
}

/// Classifies one line by its keys: `id` makes it a response, otherwise a
/// string `method` makes it an event.
pub fn classify_line(line: &str) -> Result<Inbound, InboundError> {
    let value: Value = serde_json::from_str(line)?;
    let mut object = match value {
        Value::Object(object) => object,
        _ => return Err(InboundError::NotAnObject),
    };
    if JanitorLine::marks(&object) {
        return Ok(Inbound::Janitor(
            JanitorLine::decode(Value::Object(object)).ok(),
        ));
    }
    let session = take_session(&mut object)?;
    match object.remove("id") {
        Some(id) => {
            let id = id.as_u64().ok_or(InboundError::BadId)?;
            let outcome = match object.remove("error") {
                Some(error) => Err(remote_error(&error)),
                None => Ok(object.remove("result").unwrap_or(Value::Object(Map::new()))),
            };
            Ok(Inbound::Response {
                id,
                session,
                outcome,
            })
        }
        None => match object.remove("method") {
            Some(Value::String(method)) => Ok(Inbound::Event {
                session,
                method,
                params: object.remove("params").unwrap_or(Value::Object(Map::new())),
            }),
            _ => Err(InboundError::NeitherIdNorMethod),
        },
    }
}

fn take_session(object: &mut Map<String, Value>) -> Result<Option<SessionId>, InboundError> {
    match object.remove("sessionId") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(raw)) => Ok(Some(SessionId::new(raw))),
        Some(_) => Err(InboundError::BadSessionId),
    }
}

fn remote_error(error: &Value) -> RemoteError {
    RemoteError {
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    }
}

#[derive(Serialize)]
struct OutboundRequest<'a> {
    id: u64,
    method: &'a str,
    params: &'a Value,
    #[serde(rename = "sessionId", skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
}

/// Serializes one request as one compact line (no trailing newline). A
/// `null` params becomes `{}` because Chromium rejects non-object params.
pub fn request_line(id: u64, session: Option<&SessionId>, method: &str, params: &Value) -> String {
    let empty = Value::Object(Map::new());
    let params = match params {
        Value::Null => &empty,
        other => other,
    };
    let request = OutboundRequest {
        id,
        method,
        params,
        session_id: session.map(SessionId::as_str),
    };
    // Serializing a struct of strings and a `Value` cannot fail.
    serde_json::to_string(&request).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(line: &str, expect: Result<Inbound, &str>) {
        let got = classify_line(line).map_err(|e| e.to_string());
        match (got, expect) {
            (Ok(got), Ok(expect)) => assert_eq!(got, expect, "line {line}"),
            (Err(got), Err(expect)) => assert!(got.contains(expect), "line {line}: {got}"),
            (got, expect) => panic!("line {line}: got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn classifies_by_keys() {
        check(
            r#"{"id":3,"result":{"targetId":"T"}}"#,
            Ok(Inbound::Response {
                id: 3,
                session: None,
                outcome: Ok(json!({"targetId":"T"})),
            }),
        );
        check(
            r#"{"id":4,"error":{"code":-32001,"message":"Session with given id not found."},"sessionId":"S"}"#,
            Ok(Inbound::Response {
                id: 4,
                session: Some(SessionId::new("S")),
                outcome: Err(RemoteError {
                    code: -32001,
                    message: "Session with given id not found.".to_owned(),
                }),
            }),
        );
        check(
            r#"{"id":5}"#,
            Ok(Inbound::Response {
                id: 5,
                session: None,
                outcome: Ok(json!({})),
            }),
        );
        check(
            r#"{"method":"Page.loadEventFired","params":{"timestamp":1.5},"sessionId":"S"}"#,
            Ok(Inbound::Event {
                session: Some(SessionId::new("S")),
                method: "Page.loadEventFired".to_owned(),
                params: json!({"timestamp":1.5}),
            }),
        );
        check(
            r#"{"janitor":"disconnected"}"#,
            Ok(Inbound::Janitor(Some(JanitorLine::Disconnected))),
        );
        check(r#"{"janitor":"later"}"#, Ok(Inbound::Janitor(None)));
        check("not json", Err("not json"));
        check("[1,2]", Err("not a json object"));
        check(r#"{"id":-1,"result":{}}"#, Err("non-negative integer"));
        check(r#"{"params":{}}"#, Err("neither an id nor a method"));
        check(
            r#"{"method":"X","sessionId":7}"#,
            Err("sessionId is not a string"),
        );
    }

    #[test]
    fn request_line_is_compact_and_carries_the_session() {
        let line = request_line(
            7,
            Some(&SessionId::new("S1")),
            "Runtime.evaluate",
            &json!({"expression":"1\n+1"}),
        );
        assert!(!line.contains('\n'));
        let back: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            back,
            json!({"id":7,"method":"Runtime.evaluate","params":{"expression":"1\n+1"},"sessionId":"S1"})
        );
        let line = request_line(8, None, "Target.getTargets", &Value::Null);
        assert_eq!(line, r#"{"id":8,"method":"Target.getTargets","params":{}}"#);
    }
}
