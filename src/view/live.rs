//! The view's live channel (docs/view.md "A live tab"): a WebSocket on the view's own server
//! (`GET /api/live`) that pushes the screencast frames of one watched tab to the page as they
//! come. The page's first message carries its token and the tab (`{token, workspaceId,
//! targetId}`), never a cookie or the URL; a channel whose first message is late or carries no
//! valid token is closed before anything is read from the Broker. Frames come from the
//! Broker's `view/screencast`, one short call per frame, each waiting for a frame newer than
//! the last one sent, so a static page costs one call per few seconds; when the page closes the
//! channel the calls stop and the Broker stops the tab's screencast soon after.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::http::Server;
use super::link::{self, LinkError};

/// How long the page has to send its first message.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest message the page may send (its hello).
const MAX_INCOMING_BYTES: usize = 4 * 1024;

/// Pause after a call that brought no frame and a reason (no session yet, no Broker), so a tab
/// without frames costs one call a second.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Live channels open at once (a page keeps one, for the tab it watches).
pub const MAX_CHANNELS: usize = 16;

/// The channels' places: one is held for each open channel.
pub static CHANNELS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_CHANNELS);

/// Serves one upgraded connection until the page closes it or the view stops.
pub async fn serve(server: Arc<Server>, upgraded: Upgraded) {
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(MAX_INCOMING_BYTES);
    config.max_frame_size = Some(MAX_INCOMING_BYTES);
    let mut socket =
        WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, socket.next()).await {
        Ok(Some(Ok(Message::Text(text)))) => serde_json::from_str::<Value>(&text).ok(),
        _ => None,
    };
    let watched = hello.and_then(|hello| {
        let token_ok = hello["token"]
            .as_str()
            .is_some_and(|token| server.gate.token_ok(token));
        let (workspace, target) = (hello["workspaceId"].as_str(), hello["targetId"].as_str());
        match (token_ok, workspace, target) {
            (true, Some(workspace), Some(target)) => {
                Some((workspace.to_owned(), target.to_owned()))
            }
            _ => None,
        }
    });
    let Some((workspace_id, target_id)) = watched else {
        let _ = socket
            .send(Message::text(
                json!({"error": "no valid token"}).to_string(),
            ))
            .await;
        let _ = socket.close(None).await;
        return;
    };
    let origin = server.gate.origin();
    let mut after = 0u64;
    loop {
        let params = json!({"workspaceId": workspace_id, "targetId": target_id, "after": after});
        let answer = tokio::select! {
            incoming = socket.next() => match incoming {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => continue,
            },
            answer = link::call(&server.home, &origin, "view/screencast", params) => answer,
        };
        let (message, pause) = match answer {
            Ok(frame) if frame["data"].is_string() => {
                after = frame["frame"].as_u64().unwrap_or(after);
                (Some(frame), false)
            }
            Ok(frame) => match frame.get("reason") {
                Some(reason) => (Some(json!({"data": null, "reason": reason})), true),
                None => (None, false),
            },
            Err(LinkError::NoBroker) => (
                Some(json!({"data": null, "reason": "no Broker is running"})),
                true,
            ),
            Err(error) => (
                Some(json!({"data": null, "reason": error.to_string()})),
                true,
            ),
        };
        if let Some(message) = message
            && socket
                .send(Message::text(message.to_string()))
                .await
                .is_err()
        {
            return;
        }
        if pause {
            tokio::select! {
                incoming = socket.next() => if matches!(incoming, Some(Ok(Message::Close(_))) | Some(Err(_)) | None) {
                    return;
                },
                () = tokio::time::sleep(RETRY_AFTER) => {}
            }
        }
    }
}
