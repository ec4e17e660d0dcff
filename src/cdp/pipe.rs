//! The janitor pipe's own messages: the status lines the janitor prints on its stdout
//! (`connected`, `failed`, `disconnected`) and the control line the Broker writes to its stdin
//! (`adopt`, `disown`, `close`), as ONE typed enum both ends serialize and decode, and the bound on a pipe line.
//! Every other line on the pipe is one CDP message. A line is a `JanitorLine` when it is a JSON
//! object with a top-level `janitor` key (CDP messages never have one); it is never
//! recognised by its text. No I/O here.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::command;
use super::ids::TargetId;

/// Longest line either end of the pipe accepts. Chromium sends every message as one
/// unfragmented frame and a 5,000-element AX tree is already 16.5 MB (docs/cdp.md, "one frame");
/// 256 MiB still stops a runaway peer. The janitor accepts WebSocket messages up to this size
/// and re-serializing one onto a single line never lengthens it, so a longer line is a broken
/// peer.
pub const MAX_LINE_BYTES: usize = 256 << 20;

/// The key that marks a pipe line as the janitor's own.
const KEY: &str = "janitor";

/// A janitor pipe message that is not CDP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "janitor", rename_all = "snake_case")]
pub enum JanitorLine {
    /// Janitor -> Broker, first line: the WebSocket is open.
    Connected,
    /// Janitor -> Broker, first and only line: connecting failed, with a stable `reason` word
    /// and a human-readable `message`.
    Failed { reason: FailReason, message: String },
    /// Janitor -> Broker, last line: the WebSocket closed.
    Disconnected,
    /// Broker -> janitor: close this target too when the Broker goes away (a tab the Broker
    /// created under an earlier janitor that died, or the launched browser's start tab a
    /// Workspace adopted). With `start`, it is that start tab: the janitor opens a blank tab
    /// before closing it, so a headed browser never loses its last window to the clean-up.
    /// Never forwarded to Chromium.
    Adopt {
        #[serde(rename = "targetId", serialize_with = "command::target_id")]
        target_id: TargetId,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        start: bool,
    },
    /// Broker -> janitor: leave this target open when the Broker goes away (the blank tab the
    /// Broker put in place of an adopted start tab). Never forwarded to Chromium.
    Disown {
        #[serde(rename = "targetId", serialize_with = "command::target_id")]
        target_id: TargetId,
    },
    /// Broker -> janitor: this connection is done (a `per_workspace` remote session whose
    /// Workspace was released); clean up as if the Broker went away, then close the socket.
    /// Never forwarded to Chromium.
    Close,
}

/// Why the janitor could not connect, on the wire as one stable word: `invalid_url`,
/// `refused`, `timeout`, `closed`, `http_<status>`, `io` or `protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum FailReason {
    /// Not a loopback `ws://` URL; nothing was connected.
    InvalidUrl,
    Refused,
    /// The handshake did not finish in time (an approval prompt nobody answered).
    Timeout,
    /// The browser closed the connection during the handshake.
    Closed,
    /// The browser answered the upgrade with this HTTP status (403: the user refused).
    Http(u16),
    Io,
    Protocol,
    /// The TLS handshake with a `wss://` endpoint failed (e.g. its certificate is not trusted).
    Tls,
}

impl std::fmt::Display for FailReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailReason::InvalidUrl => f.write_str("invalid_url"),
            FailReason::Refused => f.write_str("refused"),
            FailReason::Timeout => f.write_str("timeout"),
            FailReason::Closed => f.write_str("closed"),
            FailReason::Http(status) => write!(f, "http_{status}"),
            FailReason::Io => f.write_str("io"),
            FailReason::Protocol => f.write_str("protocol"),
            FailReason::Tls => f.write_str("tls"),
        }
    }
}

impl From<FailReason> for String {
    fn from(reason: FailReason) -> String {
        reason.to_string()
    }
}

impl TryFrom<String> for FailReason {
    type Error = String;

    fn try_from(word: String) -> Result<FailReason, String> {
        Ok(match word.as_str() {
            "invalid_url" => FailReason::InvalidUrl,
            "refused" => FailReason::Refused,
            "timeout" => FailReason::Timeout,
            "closed" => FailReason::Closed,
            "io" => FailReason::Io,
            "protocol" => FailReason::Protocol,
            "tls" => FailReason::Tls,
            other => match other.strip_prefix("http_").map(str::parse) {
                Some(Ok(status)) => FailReason::Http(status),
                _ => return Err(format!("unknown failure reason {other:?}")),
            },
        })
    }
}

/// A line marked as the janitor's whose kind this version does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown janitor line: {0}")]
pub struct UnknownLine(#[from] serde_json::Error);

impl JanitorLine {
    /// The message as one line (no trailing newline).
    pub fn to_line(&self) -> String {
        // An enum of strings always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether a parsed pipe message is marked as the janitor's (has the top-level key).
    pub fn marks(object: &Map<String, Value>) -> bool {
        object.contains_key(KEY)
    }

    /// Decodes a pipe message that [`JanitorLine::marks`] accepted.
    pub fn decode(value: Value) -> Result<JanitorLine, UnknownLine> {
        serde_json::from_value(value).map_err(UnknownLine)
    }

    /// Decodes one pipe line: `None` when it is not the janitor's (a CDP message), `Some(Err)`
    /// when it is marked as the janitor's but unknown. The line is parsed only when it can be
    /// the janitor's (it names the key at all).
    pub fn from_line(line: &str) -> Option<Result<JanitorLine, UnknownLine>> {
        if !line.contains(KEY) {
            return None;
        }
        match serde_json::from_str::<Value>(line).ok()? {
            Value::Object(object) if JanitorLine::marks(&object) => {
                Some(JanitorLine::decode(Value::Object(object)))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn janitor_lines_round_trip() {
        let lines = [
            (JanitorLine::Connected, json!({"janitor": "connected"})),
            (
                JanitorLine::Failed {
                    reason: FailReason::Http(403),
                    message: "handshake refused".to_owned(),
                },
                json!({"janitor": "failed", "reason": "http_403", "message": "handshake refused"}),
            ),
            (
                JanitorLine::Disconnected,
                json!({"janitor": "disconnected"}),
            ),
            (
                JanitorLine::Adopt {
                    target_id: TargetId::new("R1"),
                    start: false,
                },
                json!({"janitor": "adopt", "targetId": "R1"}),
            ),
            (
                JanitorLine::Adopt {
                    target_id: TargetId::new("S1"),
                    start: true,
                },
                json!({"janitor": "adopt", "targetId": "S1", "start": true}),
            ),
            (
                JanitorLine::Disown {
                    target_id: TargetId::new("B1"),
                },
                json!({"janitor": "disown", "targetId": "B1"}),
            ),
            (JanitorLine::Close, json!({"janitor": "close"})),
        ];
        for (line, wire) in lines {
            let text = line.to_line();
            assert!(!text.contains('\n'));
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), wire);
            assert_eq!(JanitorLine::from_line(&text).unwrap().unwrap(), line);
            assert_eq!(JanitorLine::decode(wire).unwrap(), line);
        }
    }

    #[test]
    fn failure_reasons_are_stable_words() {
        for reason in [
            FailReason::InvalidUrl,
            FailReason::Refused,
            FailReason::Timeout,
            FailReason::Closed,
            FailReason::Http(403),
            FailReason::Io,
            FailReason::Protocol,
        ] {
            let word = String::from(reason);
            assert_eq!(FailReason::try_from(word), Ok(reason));
        }
        assert_eq!(FailReason::Http(500).to_string(), "http_500");
        assert!(FailReason::try_from("http_x".to_owned()).is_err());
        assert!(FailReason::try_from("gone".to_owned()).is_err());
    }

    #[test]
    fn cdp_messages_are_not_janitor_lines() {
        // A CDP message that mentions the word is still CDP.
        let navigate = r#"{"id":3,"method":"Page.navigate","params":{"url":"http://a/janitor"},"sessionId":"S"}"#;
        assert!(JanitorLine::from_line(navigate).is_none());
        assert!(
            JanitorLine::from_line(r#"{"method":"Page.loadEventFired","params":{}}"#).is_none()
        );
        assert!(JanitorLine::from_line(r#"{"params":{"janitor":"adopt"}}"#).is_none());
        assert!(JanitorLine::from_line(r#"["janitor"]"#).is_none());
        // Marked as the janitor's, but unknown or incomplete: an error, never CDP.
        assert!(
            JanitorLine::from_line(r#"{"janitor":"something-else"}"#)
                .unwrap()
                .is_err()
        );
        assert!(
            JanitorLine::from_line(r#"{"janitor":"adopt"}"#)
                .unwrap()
                .is_err()
        );
        assert!(
            JanitorLine::from_line(r#"{"janitor":"failed"}"#)
                .unwrap()
                .is_err()
        );
    }
}
