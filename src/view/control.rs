//! The view's control socket, `view.sock` in the home: owner-only like the Broker's, its peers
//! checked to be this user (`ipc::listen`, `ipc::connect`). A second `browser-pilot view` finds
//! the running view here and asks it for a fresh one-time URL (`{"view":"url"}`), so neither the
//! URL nor a secret is ever written to disk; `{"view":"stop"}` ends the view.
//!
//! One line each way, bounded in size and time.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::auth::Gate;
use crate::framing::{self, LineReader};
use crate::ipc::{self, ConnectError, IpcListener};

/// Longest request or answer line.
const MAX_LINE_BYTES: usize = 4096;

/// How long a peer may take to say what it wants, and a client to get its answer.
const LINE_TIMEOUT: Duration = Duration::from_secs(5);

/// What asking the running view gave.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// No view listens for this home.
    #[error("no view is running")]
    NotRunning,
    #[error("{0}")]
    Failed(String),
}

/// Answers requests on `listener` until `stop` is set (by a `stop` request too); `on_url` runs
/// each time a URL is handed out.
pub async fn serve(
    listener: IpcListener,
    gate: Arc<Gate>,
    stop: watch::Sender<bool>,
    on_url: Arc<dyn Fn() + Send + Sync>,
) {
    let mut stopped = stop.subscribe();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|s| *s) => return,
        };
        let Ok((reader, mut writer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let gate = gate.clone();
        let stop = stop.clone();
        let on_url = on_url.clone();
        tokio::spawn(async move {
            let mut reader = LineReader::new(reader, MAX_LINE_BYTES);
            let Ok(Ok(Some(line))) = tokio::time::timeout(LINE_TIMEOUT, reader.next_line()).await
            else {
                return;
            };
            let request: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            let answer = match request["view"].as_str() {
                Some("url") => {
                    on_url();
                    let secret = gate.issue_secret();
                    json!({"url": format!("{}/#{}{secret}", gate.origin(), crate::protocol::redact::VIEW_SECRET_MARKER)})
                }
                Some("stop") => {
                    let _ = stop.send(true);
                    json!({"stopped": true})
                }
                _ => json!({"error": "unknown request"}),
            };
            let _ = framing::write_line(&mut writer, &answer.to_string()).await;
        });
    }
}

/// Sends one request to the view of the socket at `path` and returns its answer.
pub async fn ask(path: &Path, what: &str) -> Result<Value, AskError> {
    let (reader, mut writer) = match ipc::connect(path).await {
        Ok(pair) => pair,
        Err(ConnectError::NoEndpoint(_)) => return Err(AskError::NotRunning),
        Err(error) => return Err(AskError::Failed(error.to_string())),
    };
    let exchange = async {
        framing::write_line(&mut writer, &json!({"view": what}).to_string())
            .await
            .map_err(|error| AskError::Failed(error.to_string()))?;
        let mut reader = LineReader::new(reader, MAX_LINE_BYTES);
        let line = reader
            .next_line()
            .await
            .map_err(|error| AskError::Failed(error.to_string()))?
            .ok_or(AskError::NotRunning)?;
        serde_json::from_slice(&line).map_err(|error| AskError::Failed(error.to_string()))
    };
    tokio::time::timeout(LINE_TIMEOUT, exchange)
        .await
        .map_err(|_| AskError::Failed("the view did not answer in time".to_owned()))?
}
