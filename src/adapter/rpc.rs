//! The adapter's JSON-RPC client over a child bridge's stdin/stdout.
//!
//! Owns the pending-call table of one bridge process: every request gets an id, exactly one
//! resolution (its response, or a transport failure that says whether the line was written), and
//! notifications go to a bounded channel where they are best-effort, as the contract makes them.
//! One actor loop owns the table; a writer task owns stdin and a reader task owns stdout, so a
//! slow write never stops responses from being read. It knows no method semantics (no
//! Workspaces, Leases or tools) and never touches the Broker's internals.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::framing::{LineReader, write_line};
use crate::protocol::errors::{ErrorCode, RpcError};

/// Requests queued for the writer before `call` waits: bounded so a stalled bridge slows the
/// host instead of growing memory. The bridge itself accepts at most 256 ordinary calls.
const OUTGOING_QUEUE: usize = 256;

/// Notifications kept for the host before new ones are dropped (they are best-effort; the event
/// journal is the recovery record).
pub const NOTIFICATION_QUEUE: usize = 1024;

/// How a call ended without a JSON-RPC response.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The Broker answered with an error.
    Rpc(RpcError),
    /// The line never reached the bridge: nothing was dispatched.
    NotSent,
    /// The line was written, then the bridge went away before answering: the outcome is unknown.
    LostAfterSend,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Rpc(error) => write!(f, "{error}"),
            CallError::NotSent => f.write_str("the bridge is gone; the request was not sent"),
            CallError::LostAfterSend => {
                f.write_str("the bridge went away after the request was sent")
            }
        }
    }
}

/// Everything that can happen to the actor.
enum Event {
    /// A host wants to send a request.
    Call {
        id: u64,
        line: String,
        reply: oneshot::Sender<Result<Value, CallError>>,
    },
    /// The writer finished one line.
    Written { id: u64, ok: bool },
    /// The reader produced a line (`None`: end of output or a framing failure).
    Line(Option<Vec<u8>>),
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Call { id, .. } => write!(f, "call {id}"),
            Event::Written { id, ok } => write!(f, "written {id} ok={ok}"),
            Event::Line(Some(line)) => write!(f, "line of {} bytes", line.len()),
            Event::Line(None) => f.write_str("end of bridge output"),
        }
    }
}

struct Pending {
    sent: bool,
    reply: oneshot::Sender<Result<Value, CallError>>,
}

/// A cheap handle to the client actor.
#[derive(Clone)]
pub struct RpcClient {
    events: mpsc::Sender<Event>,
    next_id: Arc<AtomicU64>,
    /// The negotiated input limit of the bridge: a longer line would terminate the bridge, so
    /// it is refused here instead.
    max_message_bytes: Arc<AtomicU64>,
}

impl RpcClient {
    /// Starts the actor over a bridge's stdout (`reader`) and stdin (`writer`). Lines longer than
    /// `max_line_bytes` end the connection (the bridge never sends one within its limits).
    pub fn spawn<R, W>(
        reader: R,
        writer: W,
        max_line_bytes: usize,
        max_message_bytes: u64,
    ) -> (RpcClient, mpsc::Receiver<Value>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (events_tx, events_rx) = mpsc::channel(OUTGOING_QUEUE);
        let (notify_tx, notify_rx) = mpsc::channel(NOTIFICATION_QUEUE);
        // Unbounded so the actor never waits on a slow bridge stdin while responses queue up;
        // its length is bounded by the callers, each of which waits for its answer.
        let (write_tx, write_rx) = mpsc::unbounded_channel::<(u64, String)>();
        tokio::spawn(write_loop(writer, write_rx, events_tx.clone()));
        tokio::spawn(read_loop(reader, max_line_bytes, events_tx.clone()));
        tokio::spawn(actor(events_rx, write_tx, notify_tx));
        let client = RpcClient {
            events: events_tx,
            next_id: Arc::new(AtomicU64::new(1)),
            max_message_bytes: Arc::new(AtomicU64::new(max_message_bytes)),
        };
        (client, notify_rx)
    }

    /// Applies the limit `initialize` negotiated.
    pub fn set_max_message_bytes(&self, bytes: u64) {
        self.max_message_bytes.store(bytes, Ordering::Relaxed);
    }

    /// One request; resolves exactly once.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.start(method, params).await?.wait().await
    }

    /// Queues one request for the bridge and returns its pending reply. Requests are written in
    /// the order their `start` returned, so a host that starts calls one after another gets the
    /// bridge's input-order dispatch even while earlier replies are outstanding.
    pub async fn start(&self, method: &str, params: Value) -> Result<Reply, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let limit = self.max_message_bytes.load(Ordering::Relaxed);
        if line.len() as u64 > limit {
            return Err(CallError::Rpc(
                RpcError::new(
                    ErrorCode::MessageTooLarge,
                    format!("the request is larger than the bridge's {limit}-byte input limit"),
                )
                .with_context("maxMessageBytes", json!(limit)),
            ));
        }
        let (reply, answer) = oneshot::channel();
        if self
            .events
            .send(Event::Call { id, line, reply })
            .await
            .is_err()
        {
            return Err(CallError::NotSent);
        }
        Ok(Reply { answer })
    }
}

/// The pending answer of a started request.
pub struct Reply {
    answer: oneshot::Receiver<Result<Value, CallError>>,
}

impl Reply {
    pub async fn wait(self) -> Result<Value, CallError> {
        self.answer.await.unwrap_or(Err(CallError::LostAfterSend))
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut lines: mpsc::UnboundedReceiver<(u64, String)>,
    events: mpsc::Sender<Event>,
) {
    let mut broken = false;
    while let Some((id, line)) = lines.recv().await {
        let ok = !broken && write_line(&mut writer, &line).await.is_ok();
        broken |= !ok;
        if events.send(Event::Written { id, ok }).await.is_err() {
            return;
        }
    }
    // Dropping the writer closes the bridge's stdin: its EOF releases this Connection's Leases.
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: R,
    max_line_bytes: usize,
    events: mpsc::Sender<Event>,
) {
    let mut lines = LineReader::new(BufReader::new(reader), max_line_bytes);
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => Some(line),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "bridge output unreadable; closing");
                None
            }
        };
        let end = line.is_none();
        if events.send(Event::Line(line)).await.is_err() || end {
            return;
        }
    }
}

async fn actor(
    mut events: mpsc::Receiver<Event>,
    write: mpsc::UnboundedSender<(u64, String)>,
    notifications: mpsc::Sender<Value>,
) {
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut closed = false;
    let mut dropped_notifications = 0u64;
    while let Some(event) = events.recv().await {
        tracing::trace!(%event, "adapter rpc");
        match event {
            Event::Call { id, line, reply } => {
                if closed {
                    let _ = reply.send(Err(CallError::NotSent));
                    continue;
                }
                pending.insert(id, Pending { sent: false, reply });
                if write.send((id, line)).is_err()
                    && let Some(entry) = pending.remove(&id)
                {
                    let _ = entry.reply.send(Err(CallError::NotSent));
                }
            }
            Event::Written { id, ok } => match (ok, closed, pending.get_mut(&id)) {
                (true, false, Some(entry)) => entry.sent = true,
                // Written, but the bridge's output already ended: it may have run.
                (true, true, Some(_)) => resolve(&mut pending, id, CallError::LostAfterSend),
                (false, _, Some(_)) => resolve(&mut pending, id, CallError::NotSent),
                (_, _, None) => {}
            },
            Event::Line(Some(line)) => on_line(
                &line,
                &mut pending,
                &notifications,
                &mut dropped_notifications,
            ),
            // Calls known to be written are lost after sending; calls still at the writer are
            // resolved by its report (a write to a dead bridge fails, so "not sent" is only
            // ever claimed when it is certain).
            Event::Line(None) => {
                closed = true;
                let written: Vec<u64> = pending
                    .iter()
                    .filter(|(_, entry)| entry.sent)
                    .map(|(id, _)| *id)
                    .collect();
                for id in written {
                    resolve(&mut pending, id, CallError::LostAfterSend);
                }
            }
        }
    }
}

fn resolve(pending: &mut HashMap<u64, Pending>, id: u64, error: CallError) {
    if let Some(entry) = pending.remove(&id) {
        let _ = entry.reply.send(Err(error));
    }
}

fn on_line(
    line: &[u8],
    pending: &mut HashMap<u64, Pending>,
    notifications: &mpsc::Sender<Value>,
    dropped: &mut u64,
) {
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        tracing::warn!("bridge sent a line that is not JSON; ignored");
        return;
    };
    if message.get("method").is_some() {
        if notifications.try_send(message).is_err() {
            *dropped += 1;
            tracing::debug!(
                dropped = *dropped,
                "notification dropped (host not reading)"
            );
        }
        return;
    }
    let Some(id) = message.get("id").and_then(Value::as_u64) else {
        tracing::warn!(?message, "bridge response without a known id; ignored");
        return;
    };
    let Some(entry) = pending.remove(&id) else {
        tracing::warn!(id, "response for an unknown id; ignored");
        return;
    };
    let outcome = match (message.get("result"), message.get("error")) {
        (Some(result), None) => Ok(result.clone()),
        (_, Some(error)) => Err(CallError::Rpc(RpcError::from_json(error))),
        (None, None) => Err(CallError::Rpc(RpcError::new(
            ErrorCode::InternalError,
            "the bridge answered with neither result nor error",
        ))),
    };
    let _ = entry.reply.send(outcome);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    /// A fake bridge on a duplex pair: answers each request with its method name, or drops the
    /// connection after reading the request named "die".
    async fn fake_bridge(
        stream: tokio::io::DuplexStream,
        out: tokio::io::DuplexStream,
    ) -> std::io::Result<()> {
        let mut lines = BufReader::new(stream).lines();
        let mut out = out;
        while let Some(line) = lines.next_line().await? {
            let request: Value = serde_json::from_str(&line).unwrap();
            let method = request["method"].as_str().unwrap().to_owned();
            if method == "die" {
                return Ok(());
            }
            out.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"events/event\",\"params\":{}}\n")
                .await?;
            let reply = match method.as_str() {
                "fail" => {
                    json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32011, "message": "no", "data": {"code": "workspace_not_found", "retryable": false}}})
                }
                _ => json!({"jsonrpc": "2.0", "id": request["id"], "result": {"method": method}}),
            };
            out.write_all(format!("{reply}\n").as_bytes()).await?;
        }
        Ok(())
    }

    fn client() -> (RpcClient, mpsc::Receiver<Value>) {
        let (host_in, bridge_out) = tokio::io::duplex(4096);
        let (bridge_in, host_out) = tokio::io::duplex(4096);
        tokio::spawn(fake_bridge(bridge_in, bridge_out));
        RpcClient::spawn(host_in, host_out, 1 << 20, 1 << 20)
    }

    #[tokio::test]
    async fn responses_errors_and_notifications_are_routed() {
        let (client, mut notifications) = client();
        let (a, b) = tokio::join!(client.call("one", json!({})), client.call("two", json!({})));
        assert_eq!(a.unwrap()["method"], "one");
        assert_eq!(b.unwrap()["method"], "two");
        match client.call("fail", json!({})).await {
            Err(CallError::Rpc(error)) => assert_eq!(error.code, ErrorCode::WorkspaceNotFound),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            notifications.recv().await.unwrap()["method"],
            "events/event"
        );
    }

    #[tokio::test]
    async fn loss_after_send_and_after_close_are_told_apart() {
        let (client, _notifications) = client();
        assert_eq!(
            client.call("die", json!({})).await,
            Err(CallError::LostAfterSend)
        );
        assert_eq!(
            client.call("late", json!({})).await,
            Err(CallError::NotSent)
        );
    }

    #[tokio::test]
    async fn an_oversized_request_is_refused_before_sending() {
        let (client, _notifications) = client();
        client.set_max_message_bytes(64);
        match client.call("big", json!({"x": "y".repeat(100)})).await {
            Err(CallError::Rpc(error)) => assert_eq!(error.code, ErrorCode::MessageTooLarge),
            other => panic!("{other:?}"),
        }
        assert!(client.call("small", json!({})).await.is_ok());
    }
}
