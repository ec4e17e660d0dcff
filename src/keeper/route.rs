//! Session rewriting between the pipe and the keeper's client. Each client speaks as if it had
//! the browser connection to itself; the keeper gives it a browser session `S` of its own: a
//! client line without a top-level `sessionId` gets `"sessionId":S`, and a browser message on
//! `S` loses it again. Messages on other sessions (the client's children) pass untouched; a
//! message on no session is the keeper's own. Chromium appends a session message's
//! `"sessionId"` as its last member (verified on 156, docs/cdp.md), so the common case is
//! decided from the message's tail without parsing it; anything else is parsed. No I/O here.

use serde::Deserialize;
use serde::de::IgnoredAny;

/// The tail Chromium appends to a message on a session.
const SESSION_TAIL: &str = ",\"sessionId\":\"";

/// Where a browser message belongs.
#[derive(Debug)]
pub(super) enum Inbound {
    /// On a session. `tail` is where `,"sessionId":..}` starts when it is the last member.
    Session {
        session: String,
        tail: Option<usize>,
    },
    /// On the pipe's own (root) connection: the keeper's.
    Root(Root),
    /// Not a JSON object.
    Unparsable,
}

/// The parts of a root message the keeper reads.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Root {
    #[serde(default)]
    pub(super) id: Option<u64>,
    #[serde(default)]
    pub(super) method: Option<String>,
    #[serde(default)]
    pub(super) params: Option<SessionField>,
    #[serde(default)]
    pub(super) result: Option<SessionField>,
    #[serde(default)]
    pub(super) error: Option<IgnoredAny>,
}

/// A `sessionId` inside `params` or `result`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SessionField {
    #[serde(default, rename = "sessionId")]
    pub(super) session_id: Option<String>,
}

#[derive(Deserialize)]
struct Peek {
    #[serde(default, rename = "sessionId")]
    session_id: Option<String>,
}

#[derive(Deserialize)]
struct HasSession {
    #[serde(default, rename = "sessionId")]
    session_id: Option<IgnoredAny>,
}

/// Classifies one browser message.
pub(super) fn classify(message: &str) -> Inbound {
    if let Some((tail, session)) = tail_session(message) {
        return Inbound::Session {
            session: session.to_owned(),
            tail: Some(tail),
        };
    }
    match serde_json::from_str::<Peek>(message) {
        Ok(Peek {
            session_id: Some(session),
        }) => Inbound::Session {
            session,
            tail: None,
        },
        Ok(Peek { session_id: None }) => match serde_json::from_str::<Root>(message) {
            Ok(root) => Inbound::Root(root),
            Err(_) => Inbound::Unparsable,
        },
        Err(_) => Inbound::Unparsable,
    }
}

/// `(start of the tail, session id)` when the message ends with `,"sessionId":"<id>"}` and the
/// id is a plain token. The comma before the key's quote cannot be inside a string (a quote in a
/// string is escaped), so the member is structural; ending the message, it is the top-level
/// object's last member.
fn tail_session(message: &str) -> Option<(usize, &str)> {
    let body = message.strip_suffix("\"}")?;
    let start = body.rfind(SESSION_TAIL)?;
    let id = &body[start + SESSION_TAIL.len()..];
    let plain = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    plain.then_some((start, id))
}

/// The message without its top-level `sessionId` (the client's browser session).
pub(super) fn strip_session(message: &str, tail: Option<usize>) -> Option<String> {
    if let Some(tail) = tail {
        let mut stripped = String::with_capacity(tail + 1);
        stripped.push_str(&message[..tail]);
        stripped.push('}');
        return Some(stripped);
    }
    let mut value: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(message).ok()?;
    value.remove("sessionId");
    serde_json::to_string(&value).ok()
}

/// A client line for the pipe: a line with a top-level `sessionId` as it is, else the line with
/// `"sessionId":<session>` added. `None` when the line is not a JSON object.
pub(super) fn inject_session(line: &str, session: &str) -> Option<String> {
    // serde reads a struct from an array too: only an object is a CDP message.
    if !line.trim_start().starts_with('{') {
        return None;
    }
    let peek: HasSession = serde_json::from_str(line).ok()?;
    if peek.session_id.is_some() {
        return Some(line.to_owned());
    }
    let trimmed = line.trim_end();
    let body = trimmed.strip_suffix('}')?;
    let open = body.find('{')?;
    let separator = match body[open + 1..].trim().is_empty() {
        true => "",
        false => ",",
    };
    let quoted = serde_json::to_string(session).ok()?;
    Some(format!("{body}{separator}\"sessionId\":{quoted}}}"))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn session_messages_are_read_from_their_tail() {
        let event =
            r#"{"method":"Page.loadEventFired","params":{"timestamp":1},"sessionId":"AB12"}"#;
        let Inbound::Session { session, tail } = classify(event) else {
            panic!("a session message");
        };
        assert_eq!(session, "AB12");
        assert_eq!(
            parsed(&strip_session(event, tail).unwrap()),
            json!({"method":"Page.loadEventFired","params":{"timestamp":1}})
        );
        // Not last: found by parsing, stripped by re-serializing.
        let early = r#"{"sessionId":"AB12","id":4,"result":{}}"#;
        let Inbound::Session { session, tail } = classify(early) else {
            panic!("a session message");
        };
        assert_eq!((session.as_str(), tail), ("AB12", None));
        assert_eq!(
            parsed(&strip_session(early, tail).unwrap()),
            json!({"id":4,"result":{}})
        );
    }

    #[test]
    fn nested_or_quoted_session_ids_are_not_the_message_session() {
        // The reply to attachToBrowserTarget names a session inside `result`: a root message.
        let reply = r#"{"id":1,"result":{"sessionId":"S1"}}"#;
        let Inbound::Root(root) = classify(reply) else {
            panic!("root");
        };
        assert_eq!(root.id, Some(1));
        assert_eq!(root.result.unwrap().session_id.as_deref(), Some("S1"));
        // A string that merely ends like a session tail.
        let text = r#"{"id":2,"value":"x\",\"sessionId\":\"S9"}"#;
        assert!(matches!(classify(text), Inbound::Root(_)));
        let event =
            r#"{"method":"Target.detachedFromTarget","params":{"sessionId":"S1","targetId":"T"}}"#;
        let Inbound::Root(root) = classify(event) else {
            panic!("root");
        };
        assert_eq!(root.method.as_deref(), Some("Target.detachedFromTarget"));
        assert_eq!(root.params.unwrap().session_id.as_deref(), Some("S1"));
        assert!(matches!(classify("not json"), Inbound::Unparsable));
    }

    #[test]
    fn client_lines_get_the_client_session_unless_they_name_one() {
        assert_eq!(
            parsed(
                &inject_session(r#"{"id":1,"method":"Target.getTargets","params":{}}"#, "S")
                    .unwrap()
            ),
            json!({"id":1,"method":"Target.getTargets","params":{},"sessionId":"S"})
        );
        assert_eq!(
            parsed(&inject_session("{ }", "S").unwrap()),
            json!({"sessionId":"S"})
        );
        let child = r#"{"id":2,"method":"Page.enable","params":{},"sessionId":"C"}"#;
        assert_eq!(inject_session(child, "S").as_deref(), Some(child));
        assert_eq!(inject_session("[1]", "S"), None);
        assert_eq!(inject_session("nope", "S"), None);
    }
}
