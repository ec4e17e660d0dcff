//! Closing a browser the Broker owns (`browser-pilot browser stop`): one
//! blocking WebSocket, one `Browser.close`, then wait for Chromium to drop
//! the socket. Used only for the managed profile, where no approval prompt
//! exists. Lives in the janitor module because only the janitor module
//! opens WebSockets; it never closes anything but the browser it is given.

use std::io;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::{self, HandshakeError, Message, client::IntoClientRequest};

use super::endpoint::parse_ws_url;
use super::socket::{JanitorError, ws_config};
use crate::cdp::{browser, request_line};

/// The request id of the one `Browser.close` on the connection.
const CLOSE_ID: u64 = 1;

/// Sends `Browser.close` to the browser at `ws_url` and waits (at most
/// `timeout` overall) for its reply or for the socket to close. Blocking.
pub fn close_browser(ws_url: &str, timeout: Duration) -> Result<(), JanitorError> {
    let endpoint = parse_ws_url(ws_url)?;
    let started = Instant::now();
    let stream =
        TcpStream::connect_timeout(&endpoint.address, timeout).map_err(JanitorError::from_io)?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(JanitorError::from_io)?;
    let request = endpoint
        .url
        .as_str()
        .into_client_request()
        .map_err(JanitorError::from_ws)?;
    let mut ws = match tungstenite::client::client_with_config(request, stream, Some(ws_config())) {
        Ok((ws, _response)) => ws,
        Err(HandshakeError::Failure(error)) => return Err(JanitorError::from_ws(error)),
        // A blocking socket only "would block" when its timeout expired.
        Err(HandshakeError::Interrupted(_)) => return Err(JanitorError::Timeout),
    };
    ws.send(Message::text(request_line(CLOSE_ID, &browser::Close {})))
        .map_err(JanitorError::from_ws)?;
    loop {
        if started.elapsed() >= timeout {
            return Err(JanitorError::Timeout);
        }
        match ws.read() {
            Ok(Message::Text(text)) if is_reply_to_close(text.as_str()) => return Ok(()),
            Ok(_) => continue,
            Err(tungstenite::Error::Io(error))
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(JanitorError::Timeout);
            }
            // Chromium may drop the socket before answering: that is the
            // close we asked for.
            Err(_) => return Ok(()),
        }
    }
}

fn is_reply_to_close(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .map(|value| value.get("id").and_then(serde_json::Value::as_u64) == Some(CLOSE_ID))
        .unwrap_or(false)
}
