//! A minimal JSON-RPC client for CLI peers of the Broker.
//!
//! Before sending anything it checks the home (not another user's, not shared) and lets `ipc`
//! authenticate the endpoint (file and listening peer of this user); the handshake itself is
//! `ipc::handshake`, shared with the bridge, and this file keeps bp's own error mapping. It never
//! creates the home or starts a Broker.

use serde_json::{Map, Value, json};

use crate::framing::{self, LineReader};
use crate::home::Home;
use crate::ipc::{self, ConnectError, HandshakeError, IpcReader, IpcWriter, Patience};
use crate::protocol::internal::{PeerRole, Welcome};

/// Lines from the Broker to a CLI peer are at most this long (debug results are row-capped).
const CLI_MAX_LINE_BYTES: usize = 256 * 1024 * 1024;

pub struct CliClient {
    reader: LineReader<IpcReader>,
    writer: IpcWriter,
    next_id: u64,
    pub welcome: Welcome,
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("no Broker is running for this BROWSER_PILOT_HOME")]
    NotRunning,
    #[error("the Broker refused the connection: {0}")]
    Refused(String),
    /// The home or the endpoint is not this user's; nothing was sent.
    #[error("refusing to talk to this Broker: {0}")]
    Untrusted(String),
    #[error("{message} ({code})")]
    Rpc {
        code: String,
        message: String,
        data: Value,
    },
    #[error("broker link failed: {0}")]
    Link(String),
}

impl CliClient {
    pub async fn connect(home: &Home) -> Result<CliClient, CliError> {
        home.verify().map_err(|error| {
            CliError::Untrusted(format!(
                "BROWSER_PILOT_HOME is not usable: {error}; set it to a directory of your own"
            ))
        })?;
        let hello = ipc::hello(PeerRole::Cli, None);
        let linked = ipc::handshake(
            &home.socket_path(),
            &hello,
            CLI_MAX_LINE_BYTES,
            Patience::default(),
        )
        .await;
        match linked {
            Ok(linked) => Ok(CliClient {
                reader: linked.reader,
                writer: linked.writer,
                next_id: 1,
                welcome: linked.welcome,
            }),
            Err(HandshakeError::Connect(ConnectError::NoEndpoint(_)) | HandshakeError::Closed) => {
                Err(CliError::NotRunning)
            }
            Err(HandshakeError::Connect(ConnectError::Exhausted(error))) => {
                Err(CliError::Link(format!(
                    "cannot reach the Broker: this process is out of resources ({error}); raise the open-file limit or free memory/disk, the Broker is not at fault"
                )))
            }
            Err(HandshakeError::Connect(ConnectError::Busy(error))) => Err(CliError::Link(
                format!("the Broker is not accepting connections right now ({error}); try again"),
            )),
            Err(HandshakeError::Connect(ConnectError::Untrusted(why))) => {
                Err(CliError::Untrusted(format!(
                    "{why}; the endpoint (broker.sock in BROWSER_PILOT_HOME) is not this user's, remove it after finding out who created it"
                )))
            }
            Err(HandshakeError::Refused(refusal)) => {
                Err(CliError::Refused(refusal.error["message"].to_string()))
            }
            Err(
                error @ (HandshakeError::Io(_)
                | HandshakeError::Silent
                | HandshakeError::Garbled(_)),
            ) => Err(CliError::Link(error.to_string())),
        }
    }

    pub async fn call(
        &mut self,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<Value, CliError> {
        let id = self.next_id;
        self.next_id += 1;
        let request =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        framing::write_line(&mut self.writer, &request)
            .await
            .map_err(|e| CliError::Link(e.to_string()))?;
        loop {
            let line = self
                .reader
                .next_line()
                .await
                .map_err(|e| CliError::Link(e.to_string()))?;
            let line =
                line.ok_or_else(|| CliError::Link("the Broker closed the connection".into()))?;
            let value: Value =
                serde_json::from_slice(&line).map_err(|e| CliError::Link(e.to_string()))?;
            if value.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = value.get("error") {
                return Err(CliError::Rpc {
                    code: error["data"]["code"]
                        .as_str()
                        .unwrap_or("unknown")
                        .to_owned(),
                    message: error["message"].as_str().unwrap_or("").to_owned(),
                    data: error["data"].clone(),
                });
            }
            return Ok(value.get("result").cloned().unwrap_or(Value::Null));
        }
    }
}
