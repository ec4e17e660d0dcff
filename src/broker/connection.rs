//! One local Connection: handshake, then JSON-RPC requests in, responses and notifications out.
//!
//! Every line is *accepted* in input order before any later line is handled: a `tools/call`
//! (ordinary or out-of-band) has its Command recorded before the next line may look for it, so
//! a `commands/get` or `commands/cancel` written after a call always finds that call's Command.
//! Ordinary requests then run one after another in input order on a per-Connection worker
//! (an accepted `tools/call` runs concurrently, so a slow tool holds up nothing);
//! out-of-band requests (`commands/get`, `commands/cancel`, dialog tools) run beside them once
//! the lines before them are accepted, so only their execution and response overtake.
//! Responses are never dropped; notifications go through a bounded queue. When the peer closes
//! its side, the Connection's Leases are released immediately. A peer that does not initialize
//! within `INITIALIZE_TIMEOUT` of its handshake is closed, and requests after `shutdown` are
//! answered `not_initialized`. This file knows no tool or
//! store semantics beyond which lines create Commands.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

use super::initialize::{close_connection, lose_connection};
use super::methods::{self, Reply};
use super::responses::{self, Admission, Responses};
use super::state::Broker;
use crate::framing::{self, LineReader};
use crate::ipc::{IpcReader, IpcWriter};
use crate::protocol::envelope::{self, Inbound};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::internal::{self, Hello, HelloReply, PeerRole, Refusal, Welcome};
use crate::protocol::methods::{INPUT_CLOSED_NOTIFICATION, Lane};
use crate::protocol::negotiate::{Negotiated, SERVICE_LIMITS};
use crate::store::PrincipalKey;
use crate::version::{IPC_VERSION, SERVICE_VERSION};

/// A peer must send its handshake this quickly after connecting.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// A peer that completed the handshake must have an initialized Connection this soon, or it is
/// closed: idle peers cannot hold the live-Connection slots.
pub const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(10);

/// Test knob lowering (or raising) `INITIALIZE_TIMEOUT`, in milliseconds.
const INITIALIZE_TIMEOUT_ENV: &str = "BROWSER_PILOT_INITIALIZE_TIMEOUT_MS";

/// Bounds of `BROWSER_PILOT_INITIALIZE_TIMEOUT_MS`.
const INITIALIZE_TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 100..=600_000;

/// `INITIALIZE_TIMEOUT`, or `BROWSER_PILOT_INITIALIZE_TIMEOUT_MS` clamped to its range; read once
/// per Broker.
fn initialize_timeout() -> Duration {
    static TIMEOUT: OnceLock<Duration> = OnceLock::new();
    *TIMEOUT.get_or_init(|| {
        crate::knobs::millis_or(
            INITIALIZE_TIMEOUT_ENV,
            INITIALIZE_TIMEOUT_RANGE_MS,
            INITIALIZE_TIMEOUT,
        )
    })
}

/// Largest handshake line: a `Hello` is a few hundred bytes; 16 KiB leaves room for long
/// version strings without letting a raw peer make the Broker buffer more.
const MAX_HELLO_BYTES: usize = 16 * 1024;

/// Largest line the Broker accepts from a peer: the largest message a Connection can negotiate
/// (a bridge never forwards a longer line) plus room for the envelope.
const MAX_PEER_LINE_BYTES: usize = SERVICE_LIMITS.max_message_bytes as usize + 64 * 1024;

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
                RemediationAction::RequestCapability,
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

/// The input-order acceptance rule of one Connection: the input positions of lines whose
/// Command is not recorded yet. A line is handled only once no earlier line is left here.
#[derive(Clone)]
struct AcceptanceOrder {
    unaccepted: watch::Sender<BTreeSet<u64>>,
}

impl AcceptanceOrder {
    fn new() -> AcceptanceOrder {
        AcceptanceOrder {
            unaccepted: watch::Sender::new(BTreeSet::new()),
        }
    }

    /// Registers the line at `position` as not yet accepted, until the returned mark is dropped.
    /// Called by the reader before it reads the next line.
    fn hold(&self, position: u64) -> Unaccepted {
        self.unaccepted.send_modify(|set| {
            set.insert(position);
        });
        Unaccepted {
            order: self.clone(),
            position,
        }
    }

    /// Waits until every line before `position` is accepted.
    async fn earlier_accepted(&self, position: u64) {
        let mut unaccepted = self.unaccepted.subscribe();
        // The sender lives in `self`, so the wait cannot end with an error.
        let _ = unaccepted
            .wait_for(|set| set.first().is_none_or(|first| *first >= position))
            .await;
    }
}

/// A line whose Command is not recorded yet; dropping it (after acceptance, whatever its
/// outcome) lets later lines through.
struct Unaccepted {
    order: AcceptanceOrder,
    position: u64,
}

impl Drop for Unaccepted {
    fn drop(&mut self) {
        let position = self.position;
        self.order.unaccepted.send_modify(|set| {
            set.remove(&position);
        });
    }
}

/// What the ordinary worker handles, in input order.
enum Ordinary {
    Request(Request),
    /// The bridge's input-closed notice at this input position: the Connection closes (its
    /// Leases are released) only after every earlier line was handled.
    InputClosed(u64),
}

/// One request line on its way to be handled.
struct Request {
    /// Input position on this Connection.
    position: u64,
    /// The lane it was admitted on: its response settles that lane's owed count.
    lane: Lane,
    id: Value,
    method: String,
    params: Map<String, Value>,
    /// Set for a line that records a Command (`tools/call`) until it is accepted.
    unaccepted: Option<Unaccepted>,
}

/// Reads a peer's handshake: one small line within `HELLO_TIMEOUT`.
async fn read_hello(reader: &mut LineReader<IpcReader>) -> Option<Hello> {
    match tokio::time::timeout(HELLO_TIMEOUT, reader.next_line()).await {
        Ok(Ok(Some(line))) => serde_json::from_slice::<Hello>(&line).ok(),
        _ => None,
    }
}

/// Answers a peer the Broker will not serve (beyond the live-Connection cap): its handshake is
/// read as usual and answered with a refusal carrying `error`, then the socket closes.
pub async fn refuse(reader: IpcReader, mut writer: IpcWriter, error: RpcError) {
    let mut reader = LineReader::new(reader, MAX_HELLO_BYTES);
    if read_hello(&mut reader).await.is_none() {
        return;
    }
    let refusal = HelloReply::Refused(Refusal {
        ipc: IPC_VERSION,
        error: error.to_json(),
    });
    let line = serde_json::to_string(&refusal).expect("refusal serializes");
    let _ = framing::write_line(&mut writer, &line).await;
}

pub async fn serve(broker: Arc<Broker>, reader: IpcReader, mut writer: IpcWriter) {
    let mut reader = LineReader::new(reader, MAX_HELLO_BYTES);
    let Some(hello) = read_hello(&mut reader).await else {
        tracing::debug!("peer sent no valid handshake; closing");
        return;
    };
    reader.set_max_line_bytes(MAX_PEER_LINE_BYTES);
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
                .with_remediation(RemediationAction::UseCompatibleExecutable, "Launch an executable compatible with the running Broker, or isolate it with its own absolute BROWSER_PILOT_HOME.")
                .to_json(),
        }),
    };
    let accepted = matches!(reply, HelloReply::Welcome(_));
    let reply_line = serde_json::to_string(&reply).expect("reply serializes");
    if framing::write_line(&mut writer, &reply_line).await.is_err() || !accepted {
        return;
    }

    let (notification_tx, notification_rx) = mpsc::channel::<String>(NOTIFICATION_QUEUE);
    let (responses, writer_task) = responses::start_writer(writer, notification_rx);
    let context = Arc::new(ConnectionContext {
        broker: broker.clone(),
        role: hello.role,
        hello,
        session: OnceLock::new(),
        notifications: notification_tx,
        closed: std::sync::atomic::AtomicBool::new(false),
    });
    let order = AcceptanceOrder::new();
    let (ordinary_tx, mut ordinary_rx) = mpsc::unbounded_channel::<Ordinary>();
    let ordinary_worker = {
        let context = context.clone();
        let responses = responses.clone();
        let order = order.clone();
        tokio::spawn(async move {
            while let Some(work) = ordinary_rx.recv().await {
                match work {
                    Ordinary::Request(request) => {
                        order.earlier_accepted(request.position).await;
                        if let Some(response) = handle(&context, &responses, request).await {
                            responses.answer(Lane::Ordinary, response);
                        }
                    }
                    Ordinary::InputClosed(position) => {
                        order.earlier_accepted(position).await;
                        close_connection(&context).await;
                    }
                }
            }
        })
    };

    let mut position: u64 = 0;
    // Set once the bridge announced the end of its input (a graceful close, done in order by
    // the worker).
    let mut input_closed = false;
    let initialize_by = tokio::time::Instant::now() + initialize_timeout();
    let mut awaiting_initialize = true;
    loop {
        let next = match awaiting_initialize {
            // `next_line` is cancel-safe: a line in progress when the timer fires is kept.
            true => tokio::select! {
                line = reader.next_line() => line,
                _ = tokio::time::sleep_until(initialize_by) => {
                    if context.session.get().is_some() {
                        awaiting_initialize = false;
                        continue;
                    }
                    tracing::debug!("the peer did not initialize in time; closing");
                    break;
                }
            },
            false => reader.next_line().await,
        };
        let line = match next {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                tracing::warn!(%error, "peer line rejected; closing the Connection");
                responses.unadmitted(
                    RpcError::new(ErrorCode::MessageTooLarge, error.to_string())
                        .response(&Value::Null),
                );
                break;
            }
        };
        let (id, method, params) = match envelope::classify(&line) {
            Ok(Inbound::Request {
                id,
                method,
                mut params,
            }) => {
                if internal::stamped(&method) {
                    take_stamp(&line, &mut params);
                }
                (id, method, params)
            }
            Ok(Inbound::Notification { method, .. }) => {
                if method == INPUT_CLOSED_NOTIFICATION {
                    input_closed = true;
                    position += 1;
                    let _ = ordinary_tx.send(Ordinary::InputClosed(position));
                }
                continue;
            }
            Err(error) => {
                // A bridge validates envelopes before forwarding; anything else here is a broken peer.
                responses.unadmitted(error.response(&Value::Null));
                break;
            }
        };
        let lane = methods::lane(&method, &params);
        match responses.admit(lane, &id) {
            Admission::Admitted => {}
            Admission::Refused => continue,
            Admission::Overrun => {
                tracing::warn!("the peer does not read its responses; closing the Connection");
                break;
            }
        }
        position += 1;
        let unaccepted = (method == "tools/call").then(|| order.hold(position));
        let request = Request {
            position,
            lane,
            id,
            method,
            params,
            unaccepted,
        };
        match lane {
            Lane::Ordinary => {
                let _ = ordinary_tx.send(Ordinary::Request(request));
            }
            Lane::OutOfBand => {
                let context = context.clone();
                let responses = responses.clone();
                let order = order.clone();
                tokio::spawn(async move {
                    order.earlier_accepted(request.position).await;
                    if let Some(response) = handle(&context, &responses, request).await {
                        responses.answer(Lane::OutOfBand, response);
                    }
                });
            }
        }
    }

    // Socket closed. A graceful close is still queued behind the lines before it (or done); a
    // peer that vanished (a killed bridge) leaves its Leases to expire by TTL.
    if !input_closed {
        lose_connection(&context).await;
    }
    drop(ordinary_tx);
    let _ = ordinary_worker.await;
    drop(responses);
    drop(context);
    let _ = writer_task.await;
}

/// Moves the bridge's read stamp from the envelope into the params the Lease handlers read,
/// after dropping any member of that name the peer put into `params` itself.
fn take_stamp(line: &[u8], params: &mut Map<String, Value>) {
    params.remove(internal::RECEIVED_AT_MEMBER);
    // Lease lines are small; parsing one twice costs microseconds.
    let stamp = serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|line| line.get(internal::RECEIVED_AT_MEMBER)?.as_i64());
    if let Some(stamp) = stamp {
        params.insert(internal::RECEIVED_AT_MEMBER.to_owned(), json!(stamp));
    }
}

/// Handles one request whose earlier lines are all accepted, through the method table. A
/// `tools/call` is accepted here (its Command recorded, then its mark dropped) and run on its
/// own task, like an `artifacts/import`'s copy (`Reply::Later`), which sends the response
/// itself: `None`. Anything else is answered here, in the caller's order.
async fn handle(
    context: &Arc<ConnectionContext>,
    responses: &Responses,
    request: Request,
) -> Option<String> {
    let Request {
        lane,
        id,
        method,
        params,
        unaccepted,
        ..
    } = request;
    // After `shutdown` (or the input-closed notice) the Connection has no session: a direct
    // socket peer that goes on is told so.
    if context.closed.load(std::sync::atomic::Ordering::SeqCst) {
        drop(unaccepted);
        return Some(
            RpcError::new(
                ErrorCode::NotInitialized,
                "this Connection was shut down; open a new Connection and initialize it",
            )
            .with_context("reason", json!("connection_shut_down"))
            .response(&id),
        );
    }
    let outcome = methods::dispatch(context, &method, params).await;
    drop(unaccepted);
    match outcome {
        Ok(Reply::Value(result)) => Some(to_response(&id, Ok(result))),
        Ok(Reply::Json(result)) => Some(serialized_response(&id, &result)),
        Ok(Reply::Later(rest)) => {
            let responses = responses.clone();
            tokio::spawn(async move {
                let response = to_response(&id, rest.await);
                // A large result (a 20,000-element Observation) leaves megabytes of freed heap
                // behind: handed back to the OS once it is answered.
                let large = response.len() >= crate::os::TRIM_AFTER_BYTES;
                responses.answer(lane, response);
                if large {
                    crate::os::return_freed_memory();
                }
            });
            None
        }
        Err(error) => Some(error.response(&id)),
    }
}

/// The response line around a result that is already JSON text (the members in the order
/// `to_response`'s sorted map writes them).
fn serialized_response(id: &Value, result: &str) -> String {
    format!(r#"{{"id":{id},"jsonrpc":"2.0","result":{result}}}"#)
}

fn to_response(id: &Value, outcome: Result<Value, RpcError>) -> String {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        Err(error) => error.response(id),
    }
}
