//! The `IO` domain: reading and closing a stream handle (the PDF of `Page.printToPDF` with
//! `ReturnAsStream`). Wire shapes only: how many bytes may be read is the caller's bound.

use serde::{Deserialize, Serialize};

use super::command::{Command, Empty};

/// `IO.read` of up to `size` bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Read {
    pub handle: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// One chunk; `eof` once the stream is exhausted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadReply {
    #[serde(default)]
    pub base64_encoded: bool,
    pub data: String,
    pub eof: bool,
}

impl Command for Read {
    const METHOD: &'static str = "IO.read";
    type Reply = ReadReply;
}

/// `IO.close` of a stream handle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Close {
    pub handle: String,
}

impl Command for Close {
    const METHOD: &'static str = "IO.close";
    type Reply = Empty;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    /// The read reply is recorded from Chromium 156 (the first 16 bytes of a printed PDF).
    #[test]
    fn stream_commands_round_trip() {
        assert_eq!(
            params(&Read {
                handle: "1".to_owned(),
                size: Some(1 << 20)
            }),
            json!({"handle": "1", "size": 1048576})
        );
        assert_eq!(
            params(&Close {
                handle: "1".to_owned()
            }),
            json!({"handle": "1"})
        );
        let chunk = reply::<Read>(
            json!({"base64Encoded":true,"data":"JVBERi0xLjQKJdPr6eEKMQ==","eof":false}),
        );
        assert!(chunk.base64_encoded && !chunk.eof);
        assert_eq!(chunk.data, "JVBERi0xLjQKJdPr6eEKMQ==");
        let last = reply::<Read>(json!({"data": "", "eof": true}));
        assert!(last.eof && !last.base64_encoded);
        reply::<Close>(json!({}));
    }
}
