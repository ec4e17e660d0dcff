//! One local Connection: handshake, then JSON-RPC requests in, responses and notifications out.
//!
//! Ordinary requests run one after another in input order on a per-Connection worker;
//! out-of-band requests (`commands/get`, `commands/cancel`, dialog tools) run at once beside
//! them. Responses are never dropped; notifications go through a bounded queue. When the peer
//! closes its side, the Connection's Leases are released immediately.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::state::Broker;
use super::{artifacts, commands, lifecycle};
use crate::framing::{self, LineReader};
use crate::ipc::{IpcReader, IpcWriter};
use crate::protocol::envelope::{self, Inbound};
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::protocol::internal::{Hello, HelloReply, PeerRole, Refusal, Welcome};
use crate::protocol::methods::{self, Lane};
use crate::protocol::negotiate::Negotiated;
use crate::store::PrincipalKey;
use crate::version::{IPC_VERSION, SERVICE_VERSION};

/// A peer must send its handshake this quickly after connecting.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest line the Broker accepts from a peer: the largest negotiable message plus envelope.
const MAX_PEER_LINE_BYTES: usize = 1024 * 1024 * 1024 + 64 * 1024;

/// Notifications queued for one slow Connection before new ones are dropped.
const NOTIFICATION_QUEUE: usize = 1024;

/// What a Connection knows about itself after `initialize`.
pub struct Session {
    pub connection_id: String,
    pub principal: PrincipalKey,
    pub negotiated: Negotiated,
}

impl Session {
    pub fn require(&self, capability: &str) -> Result<(), RpcError> {
        match self.negotiated.granted.iter().any(|c| c == capability) {
            true => Ok(()),
            false => Err(RpcError::new(
                ErrorCode::CapabilityDenied,
                format!("this Connection was not granted {capability}"),
            )
            .with_context("capability", json!(capability))
            .with_remediation(
                "request_capability",
                format!("Request \"{capability}\" in initialize.requestedCapabilities."),
            )),
        }
    }
}

/// Per-Connection context handed to every handler.
pub struct ConnectionContext {
    pub broker: Arc<Broker>,
    pub role: PeerRole,
    pub hello: Hello,
    pub session: OnceLock<Session>,
    pub notifications: mpsc::Sender<String>,
    /// Set once the peer closed gracefully (input EOF notice or `shutdown`).
    pub closed: std::sync::atomic::AtomicBool,
}

impl ConnectionContext {
    pub fn session(&self) -> Result<&Session, RpcError> {
        self.session.get().ok_or_else(|| {
            RpcError::new(
                ErrorCode::NotInitialized,
                "call initialize first on this Connection",
            )
        })
    }
}

pub async fn serve(broker: Arc<Broker>, reader: IpcReader, mut writer: IpcWriter) {
    let mut reader = LineReader::new(reader, MAX_PEER_LINE_BYTES);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, reader.next_line()).await {
        Ok(Ok(Some(line))) => serde_json::from_slice::<Hello>(&line).ok(),
        _ => None,
    };
    let Some(hello) = hello else {
        tracing::debug!("peer sent no valid handshake; closing");
        return;
    };
    let reply = match hello.ipc == IPC_VERSION {
        true => HelloReply::Welcome(Welcome {
            ipc: IPC_VERSION,
            broker_id: broker.broker_id.clone(),
            pid: std::process::id(),
            service_version: SERVICE_VERSION.to_owned(),
            installation_id: broker.installation_id.clone(),
        }),
        false => HelloReply::Refused(Refusal {
            ipc: IPC_VERSION,
            error: RpcError::new(ErrorCode::ProtocolIncompatible, "unsupported private link version")
                .with_remediation("use_compatible_executable", "Launch an executable compatible with the running Broker, or isolate it with its own absolute BROWSER_PILOT_HOME.")
                .to_json(),
        }),
    };
    let accepted = matches!(reply, HelloReply::Welcome(_));
    let reply_line = serde_json::to_string(&reply).expect("reply serializes");
    if framing::write_line(&mut writer, &reply_line).await.is_err() || !accepted {
        return;
    }

    let (response_tx, response_rx) = mpsc::unbounded_channel::<String>();
    let (notification_tx, notification_rx) = mpsc::channel::<String>(NOTIFICATION_QUEUE);
    let writer_task = tokio::spawn(write_peer(writer, response_rx, notification_rx));
    let context = Arc::new(ConnectionContext {
        broker: broker.clone(),
        role: hello.role,
        hello,
        session: OnceLock::new(),
        notifications: notification_tx,
        closed: std::sync::atomic::AtomicBool::new(false),
    });
    let (ordinary_tx, mut ordinary_rx) =
        mpsc::unbounded_channel::<(Value, String, Map<String, Value>)>();
    let ordinary_worker = {
        let context = context.clone();
        let response_tx = response_tx.clone();
        tokio::spawn(async move {
            while let Some((id, method, params)) = ordinary_rx.recv().await {
                // tools/call: accept in input order here, run concurrently.
                if method == "tools/call"
                    && let Ok(session) = context.session()
                {
                    match commands::accept(&context, session, &params).await {
                        Ok(commands::Acceptance::Accepted(accepted)) => {
                            let context = context.clone();
                            let response_tx = response_tx.clone();
                            tokio::spawn(async move {
                                let outcome = commands::run(&context, *accepted).await;
                                let _ = response_tx.send(to_response(&id, outcome));
                            });
                        }
                        Ok(commands::Acceptance::Answered(answer)) => {
                            let _ = response_tx.send(to_response(&id, answer));
                        }
                        Err(error) => {
                            let _ = response_tx.send(error.response(&id));
                        }
                    }
                    continue;
                }
                // artifacts/import: checked in input order here, the copy runs beside later
                // calls, so a slow client file system holds up only this call.
                if method == "artifacts/import"
                    && let Ok(session) = context.session()
                {
                    match artifacts::accept_import(&context, session, &params).await {
                        Ok(accepted) => {
                            let context = context.clone();
                            let response_tx = response_tx.clone();
                            tokio::spawn(async move {
                                let outcome = accepted.run(&context).await;
                                let _ = response_tx.send(to_response(&id, outcome));
                            });
                        }
                        Err(error) => {
                            let _ = response_tx.send(error.response(&id));
                        }
                    }
                    continue;
                }
                let response = respond(&context, &id, &method, params).await;
                let _ = response_tx.send(response);
            }
        })
    };

    loop {
        let line = match reader.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                tracing::warn!(%error, "peer line rejected; closing the Connection");
                let _ = response_tx.send(
                    RpcError::new(ErrorCode::MessageTooLarge, error.to_string())
                        .response(&Value::Null),
                );
                break;
            }
        };
        let (id, method, params) = match envelope::classify(&line) {
            Ok(Inbound::Request { id, method, params }) => (id, method, params),
            Ok(Inbound::Notification { method, .. }) => {
                if method == methods::INPUT_CLOSED_NOTIFICATION {
                    lifecycle::close_connection(&context).await;
                }
                continue;
            }
            Err(error) => {
                // A bridge validates envelopes before forwarding; anything else here is a broken peer.
                let _ = response_tx.send(error.response(&Value::Null));
                break;
            }
        };
        match methods::lane(&method, &params) {
            Lane::Ordinary => {
                let _ = ordinary_tx.send((id, method, params));
            }
            Lane::OutOfBand => {
                let context = context.clone();
                let response_tx = response_tx.clone();
                tokio::spawn(async move {
                    let response = respond(&context, &id, &method, params).await;
                    let _ = response_tx.send(response);
                });
            }
        }
    }

    // Socket closed. After a graceful close this is a no-op; a peer that vanished (a killed
    // bridge) leaves its Leases to expire by TTL.
    lifecycle::lose_connection(&context).await;
    drop(ordinary_tx);
    let _ = ordinary_worker.await;
    drop(response_tx);
    drop(context);
    let _ = writer_task.await;
}

async fn respond(
    context: &ConnectionContext,
    id: &Value,
    method: &str,
    params: Map<String, Value>,
) -> String {
    to_response(id, lifecycle::dispatch(context, method, params).await)
}

fn to_response(id: &Value, outcome: Result<Value, RpcError>) -> String {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        Err(error) => error.response(id),
    }
}

async fn write_peer(
    mut writer: IpcWriter,
    mut responses: mpsc::UnboundedReceiver<String>,
    mut notifications: mpsc::Receiver<String>,
) {
    let mut notifications_open = true;
    loop {
        let line = tokio::select! {
            biased;
            response = responses.recv() => match response {
                Some(line) => line,
                None => return,
            },
            notification = notifications.recv(), if notifications_open => match notification {
                Some(line) => line,
                None => {
                    notifications_open = false;
                    continue;
                }
            },
        };
        if framing::write_line(&mut writer, &line).await.is_err() {
            return;
        }
    }
}
