//! The keeper socket's own lines: the client's hello (`attach` or `close`) and the keeper's
//! answers, as one typed enum. A line is the keeper's when it is a JSON object with a top-level
//! `keeper` key; after `attached` every line is one CDP message. No I/O here.

use serde::{Deserialize, Serialize};

/// A keeper socket message that is not CDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "keeper", rename_all = "snake_case")]
pub enum KeeperLine {
    /// Client -> keeper, first line: become the CDP client.
    Attach,
    /// Keeper -> client: the client's browser session is ready; CDP lines follow.
    Attached,
    /// Keeper -> client: another client is attached; the connection closes.
    Busy,
    /// Client -> keeper, first line: close the browser (`browser stop`).
    Close,
    /// Keeper -> client: the browser exited; the keeper exits too.
    Closed,
}

impl KeeperLine {
    /// The message as one line (no trailing newline).
    pub fn to_line(self) -> String {
        serde_json::to_string(&self).unwrap_or_default()
    }

    /// Decodes a line; `None` when it is not one of the keeper's lines.
    pub fn from_line(line: &[u8]) -> Option<KeeperLine> {
        serde_json::from_slice(line).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeper_lines_round_trip() {
        for (line, wire) in [
            (KeeperLine::Attach, r#"{"keeper":"attach"}"#),
            (KeeperLine::Attached, r#"{"keeper":"attached"}"#),
            (KeeperLine::Busy, r#"{"keeper":"busy"}"#),
            (KeeperLine::Close, r#"{"keeper":"close"}"#),
            (KeeperLine::Closed, r#"{"keeper":"closed"}"#),
        ] {
            assert_eq!(line.to_line(), wire);
            assert_eq!(KeeperLine::from_line(wire.as_bytes()), Some(line));
        }
        assert_eq!(KeeperLine::from_line(br#"{"id":1,"method":"x"}"#), None);
        assert_eq!(KeeperLine::from_line(br#"{"keeper":"other"}"#), None);
    }
}
