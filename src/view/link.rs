//! The view's reads from the Broker: one short CLI-peer connection per call on the owner-only
//! Broker socket (authenticated like `bp`'s), which first registers the view's origin (so the
//! view's tab is never an eligible tab, even for a Broker started after the view) and then makes
//! the call. A connection per call keeps a slow frame from holding up the Workspace list, and a
//! view holds no Broker Connection between calls (it never counts against `bp disconnect`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::framing;
use crate::home::Home;
use crate::ipc::{self, Patience};
use crate::protocol::internal::PeerRole;

/// Longest line the view reads from the Broker: a frame is a few hundred KiB.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How long one call may take, frames included.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call failed: shown to the person as it is.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("no Broker is running for this BROWSER_PILOT_HOME")]
    NoBroker,
    #[error("{0}")]
    Failed(String),
    /// The Broker answered with an error object.
    #[error("{}", .0["message"].as_str().unwrap_or("the Broker refused the call"))]
    Rpc(Value),
}

/// Calls `method` on the Broker of `home` after registering `origin` as the view's.
pub async fn call(
    home: &Home,
    origin: &str,
    method: &str,
    params: Value,
) -> Result<Value, LinkError> {
    tokio::time::timeout(CALL_TIMEOUT, call_now(home, origin, method, params))
        .await
        .map_err(|_| LinkError::Failed("the Broker did not answer in time".to_owned()))?
}

async fn call_now(
    home: &Home,
    origin: &str,
    method: &str,
    params: Value,
) -> Result<Value, LinkError> {
    home.verify()
        .map_err(|error| LinkError::Failed(format!("BROWSER_PILOT_HOME is not usable: {error}")))?;
    let hello = ipc::hello(PeerRole::Cli, None);
    let patience = Patience {
        busy_for: Duration::from_secs(1),
        answer_within: Some(Duration::from_secs(5)),
    };
    let mut linked =
        match ipc::handshake(&home.socket_path(), &hello, MAX_LINE_BYTES, patience).await {
            Ok(linked) => linked,
            Err(ipc::HandshakeError::Connect(ipc::ConnectError::NoEndpoint(_))) => {
                return Err(LinkError::NoBroker);
            }
            Err(error) => return Err(LinkError::Failed(error.to_string())),
        };
    let register =
        json!({"jsonrpc": "2.0", "id": 1, "method": "view/register", "params": {"origin": origin}});
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
    for line in [register, request] {
        framing::write_line(&mut linked.writer, &line.to_string())
            .await
            .map_err(|error| LinkError::Failed(error.to_string()))?;
    }
    loop {
        let line = linked
            .reader
            .next_line()
            .await
            .map_err(|error| LinkError::Failed(error.to_string()))?
            .ok_or_else(|| LinkError::Failed("the Broker closed the connection".to_owned()))?;
        let mut answer: Value =
            serde_json::from_slice(&line).map_err(|error| LinkError::Failed(error.to_string()))?;
        if answer["id"] == json!(1) {
            if let Some(error) = answer.get("error") {
                return Err(LinkError::Rpc(error.clone()));
            }
            continue;
        }
        if answer["id"] != json!(2) {
            continue;
        }
        if let Some(error) = answer.get_mut("error") {
            return Err(LinkError::Rpc(error.take()));
        }
        return Ok(answer
            .get_mut("result")
            .map(Value::take)
            .unwrap_or(Value::Null));
    }
}
