//! The bridge's main loop: stdin lines in, Broker link, stdout lines out.
//!
//! One task reads stdin and forwards; one task reads the Broker link and routes responses and
//! notifications; one task owns stdout. Lines queued at once go out in one write on both the
//! socket and stdout: the stdin loop batches forwarded lines while stdin holds another complete
//! line, and the stdout task drains its queues into one write. Responses are never dropped (they are bounded by the
//! pending caps); notifications go through a small bounded queue and are dropped when the host
//! reads slowly, as the contract allows (they stay recoverable through `events/poll`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::startup::{BrokerLink, connect_or_start};
use super::stdio;
use crate::framing::{self, FramingError, LineReader};
use crate::home::Home;
use crate::protocol::envelope::{self, Inbound};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::internal::{self, PeerRole};
use crate::protocol::methods::{self, Lane, MAX_PENDING_ORDINARY, MAX_PENDING_OUT_OF_BAND};
use crate::protocol::negotiate::SERVICE_LIMITS;
use crate::version::now_ms;

/// Notifications waiting for a slow host reader; beyond this they are dropped.
const NOTIFICATION_QUEUE: usize = 256;

/// After stdin EOF, how long in-flight responses may take before the bridge exits anyway.
const EOF_DRAIN: Duration = Duration::from_secs(5);

/// After a write to the Broker failed, how long its reader may take to see the link end.
const LINK_END_WAIT: Duration = Duration::from_secs(2);

/// What the stdin loop learns when the `initialize` response has been written.
struct InitializeAnswer {
    /// The response carried a result (the Connection is initialized).
    succeeded: bool,
    /// The negotiated per-Connection limits (`maxMessageBytes`, `maxResultBytes`).
    limits: Option<(u64, u64)>,
}

struct Pending {
    lane: Lane,
    kind: PendingKind,
    /// A `tools/call` of a tool the connected Broker lists as mutating, or one it does not list
    /// (a tool the bridge cannot classify counts as mutating).
    mutating: bool,
    /// Set before the line is handed to the socket: from then on the Broker may have read it.
    written: bool,
    /// The `tools/call` facts a lost call's error names.
    tool: Option<ToolFacts>,
}

struct ToolFacts {
    name: String,
    command_id: Option<Value>,
}

impl Pending {
    fn new(lane: Lane, kind: PendingKind) -> Pending {
        Pending {
            lane,
            kind,
            mutating: false,
            written: false,
            tool: None,
        }
    }
}

enum PendingKind {
    Plain,
    /// Tells the stdin loop the negotiated limits once the response has been written.
    Initialize(oneshot::Sender<InitializeAnswer>),
    /// The bridge's own `tools/list` (never forwarded to the host): its response line.
    ToolTable(oneshot::Sender<String>),
    /// Tells the stdin loop the response has been written, so the bridge can exit.
    Shutdown(oneshot::Sender<()>),
}

#[derive(Default)]
struct PendingTable {
    by_id: HashMap<String, Pending>,
    ordinary: usize,
    out_of_band: usize,
}

impl PendingTable {
    fn count(&self, lane: Lane) -> usize {
        match lane {
            Lane::Ordinary => self.ordinary,
            Lane::OutOfBand => self.out_of_band,
        }
    }

    fn insert(&mut self, key: String, pending: Pending) {
        match pending.lane {
            Lane::Ordinary => self.ordinary += 1,
            Lane::OutOfBand => self.out_of_band += 1,
        }
        self.by_id.insert(key, pending);
    }

    /// Marks these calls as handed to the socket.
    fn mark_written<'a>(&mut self, keys: impl IntoIterator<Item = &'a String>) {
        for key in keys {
            if let Some(pending) = self.by_id.get_mut(key) {
                pending.written = true;
            }
        }
    }

    fn remove(&mut self, key: &str) -> Option<Pending> {
        let pending = self.by_id.remove(key)?;
        match pending.lane {
            Lane::Ordinary => self.ordinary -= 1,
            Lane::OutOfBand => self.out_of_band -= 1,
        }
        Some(pending)
    }
}

/// One line on its way to stdout; `written` fires after it reached the pipe.
struct Outgoing {
    line: String,
    written: Option<oneshot::Sender<()>>,
}

/// Shared between the stdin loop and the Broker reader.
struct Shared {
    pending: Mutex<PendingTable>,
    max_result_bytes: AtomicU64,
}

/// Runs the bridge until EOF, `shutdown` or a framing error. Returns the process exit code.
pub async fn run_bridge(home: Home, browser_preference: Option<String>) -> i32 {
    let hello = crate::ipc::hello(PeerRole::Bridge, browser_preference);
    let (response_tx, response_rx) = mpsc::unbounded_channel::<Outgoing>();
    let (notification_tx, notification_rx) = mpsc::channel::<String>(NOTIFICATION_QUEUE);
    let writer = tokio::spawn(write_stdout(response_rx, notification_rx));
    let shared = Arc::new(Shared {
        pending: Mutex::new(PendingTable::default()),
        max_result_bytes: AtomicU64::new(SERVICE_LIMITS.max_result_bytes),
    });
    let mut stdin = LineReader::new(
        BufReader::new(stdio::input()),
        SERVICE_LIMITS.max_message_bytes as usize,
    );
    let mut broker = BrokerState::NotConnected(None);
    let (link_closed_tx, mut link_closed_rx) = mpsc::channel::<()>(1);
    // Which tools the connected Broker lists as mutating (learnt after `initialize`).
    let mut tool_table: Option<HashMap<String, bool>> = None;
    // Set when the loop ends because the Broker link failed: pending calls are then answered
    // by the Broker-loss rule, not dropped.
    let mut broker_lost = false;

    let code = loop {
        // Lines forwarded to the Broker are batched while stdin already holds the next one;
        // before waiting for more input, what is queued goes out in one write.
        if let BrokerState::Connected(link, _) = &mut broker
            && link.has_queued()
            && !stdin.has_buffered_line()
            && let Err(error) = link.flush().await
        {
            tracing::error!(%error, "cannot write to the Broker");
            broker_lost = true;
            break 1;
        }
        let line = tokio::select! {
            biased;
            _ = link_closed_rx.recv() => {
                tracing::error!("the Broker connection closed; exiting");
                broker_lost = true;
                break 1;
            }
            line = stdin.next_line() => line,
        };
        let read_at = now_ms();
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => break on_stdin_eof(&mut broker, &shared, &response_tx).await,
            Err(FramingError::TooLong { limit }) => {
                let error = RpcError::new(
                    ErrorCode::MessageTooLarge,
                    format!("input line exceeds {limit} bytes"),
                )
                .with_context("maxMessageBytes", json!(limit));
                break fatal(&response_tx, error).await;
            }
            Err(FramingError::Io(error)) => {
                tracing::error!(%error, "cannot read stdin");
                break 1;
            }
        };
        let inbound = match envelope::classify(&line) {
            Ok(inbound) => inbound,
            Err(error) => break fatal(&response_tx, error).await,
        };
        let (id, method, params) = match inbound {
            Inbound::Notification { method, .. } => {
                // The Broker defines no host notifications; they are accepted and ignored.
                tracing::debug!(%method, "ignoring a host notification");
                continue;
            }
            Inbound::Request { id, method, params } => (id, method, params),
        };
        let lane = methods::lane(&method, &params);
        let key = id.to_string();
        {
            let table = shared.pending.lock().expect("pending table lock");
            let limit = match lane {
                Lane::Ordinary => MAX_PENDING_ORDINARY,
                Lane::OutOfBand => MAX_PENDING_OUT_OF_BAND,
            };
            if table.count(lane) >= limit {
                let error = RpcError::new(
                    ErrorCode::ResultTooLarge,
                    "too many pending calls on this bridge; retry after responses arrive",
                )
                .with_context("pendingLimit", json!(limit));
                let _ = response_tx.send(Outgoing {
                    line: error.response(&id),
                    written: None,
                });
                continue;
            }
            if table.by_id.contains_key(&key) {
                let error = RpcError::new(
                    ErrorCode::InvalidRequest,
                    "a request with this id is still pending",
                );
                let _ = response_tx.send(Outgoing {
                    line: error.response(&id),
                    written: None,
                });
                continue;
            }
        }

        // Connect (or reconnect) lazily; initialize retries a failed startup.
        if let BrokerState::NotConnected(previous) = &broker {
            let retry = previous.is_none() || method == "initialize";
            let error = match retry {
                true => match connect_or_start(&home, &hello).await {
                    Ok(link) => {
                        let (writer, reader_task) = start_link(
                            link,
                            shared.clone(),
                            response_tx.clone(),
                            notification_tx.clone(),
                            link_closed_tx.clone(),
                        );
                        broker =
                            BrokerState::Connected(Link::new(writer, shared.clone()), reader_task);
                        None
                    }
                    Err(error) => Some(error),
                },
                false => previous.clone(),
            };
            if let Some(error) = error {
                let _ = response_tx.send(Outgoing {
                    line: error.response(&id),
                    written: None,
                });
                broker = BrokerState::NotConnected(Some(error));
                continue;
            }
        }
        let BrokerState::Connected(link, _) = &mut broker else {
            unreachable!("connected above")
        };

        let (kind, waiter) = match method.as_str() {
            "initialize" => {
                let (tx, rx) = oneshot::channel();
                (PendingKind::Initialize(tx), Waiter::Initialize(rx))
            }
            "shutdown" => {
                let (tx, rx) = oneshot::channel();
                (PendingKind::Shutdown(tx), Waiter::Shutdown(rx))
            }
            _ => (PendingKind::Plain, Waiter::None),
        };
        let mut pending = Pending::new(lane, kind);
        if method == "tools/call" {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            pending.mutating = tool_table
                .as_ref()
                .and_then(|table| table.get(name).copied())
                .unwrap_or(true);
            pending.tool = Some(ToolFacts {
                name: name.to_owned(),
                command_id: params.get("commandId").cloned(),
            });
        }
        shared
            .pending
            .lock()
            .expect("pending table lock")
            .insert(key.clone(), pending);
        let bytes = match internal::stamped(&method) {
            // Lease requests carry when this bridge read them, rebuilt from the classified
            // parts so a host cannot supply the stamp itself.
            true => {
                let mut stamped =
                    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                stamped[internal::RECEIVED_AT_MEMBER] = json!(read_at);
                serde_json::to_vec(&stamped).expect("a JSON value serializes")
            }
            false => line,
        };
        if let Err(error) = link.queue(key, &bytes).await {
            tracing::error!(%error, "cannot write to the Broker");
            broker_lost = true;
            break 1;
        }
        drop(bytes);
        if !matches!(waiter, Waiter::None)
            && let Err(error) = link.flush().await
        {
            tracing::error!(%error, "cannot write to the Broker");
            broker_lost = true;
            break 1;
        }
        match waiter {
            Waiter::None => {}
            Waiter::Initialize(rx) => {
                // The switch happens after the response is written and before the next line is parsed.
                let Ok(answer) = rx.await else { continue };
                if let Some((max_message, max_result)) = answer.limits {
                    stdin.set_max_line_bytes(max_message as usize);
                    shared.max_result_bytes.store(max_result, Ordering::SeqCst);
                }
                // The Connection is initialized: learn which of its tools mutate before the
                // next line is read, so every later call is classified.
                if answer.succeeded {
                    tool_table = request_tool_table(link, &shared).await;
                }
            }
            Waiter::Shutdown(rx) => {
                let _ = rx.await;
                // Calls still in flight are answered (or, past the bound, told so) before exit.
                drain_pending(&shared, &response_tx).await;
                let _ = link.writer.get_mut().shutdown().await;
                break 0;
            }
        }
    };
    // Lines read before the one that ended the loop are still forwarded.
    if let BrokerState::Connected(link, _) = &mut broker
        && link.has_queued()
        && link.flush().await.is_err()
    {
        broker_lost = true;
    }
    if let BrokerState::Connected(_, reader_task) = &mut broker {
        if broker_lost {
            // The reader answers every pending call when the link ends; a link that failed
            // on write ends on read soon after. Whatever is still pending then is answered here.
            if tokio::time::timeout(LINK_END_WAIT, &mut *reader_task)
                .await
                .is_err()
            {
                reader_task.abort();
            }
            fail_all_pending(&shared, &response_tx);
        } else {
            // Everything owed to the host has been routed; stop listening so stdout can close.
            reader_task.abort();
        }
    }
    drop(broker);
    drop(response_tx);
    drop(notification_tx);
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    code
}

enum Waiter {
    None,
    Initialize(oneshot::Receiver<InitializeAnswer>),
    Shutdown(oneshot::Receiver<()>),
}

enum BrokerState {
    /// Not connected yet, or the last attempt failed with this error.
    NotConnected(Option<RpcError>),
    Connected(Link, tokio::task::JoinHandle<()>),
}

/// The writing half of the Broker link. Lines are batched; each pending call is marked
/// `written` just before the write that carries its line starts, so a call whose line never
/// left the bridge is known to be unsent when the Broker is lost.
struct Link {
    writer: framing::LineWriter<crate::ipc::IpcWriter>,
    shared: Arc<Shared>,
    /// Pending calls whose lines sit in the batch, not yet handed to the socket.
    unwritten: Vec<String>,
}

impl Link {
    fn new(writer: crate::ipc::IpcWriter, shared: Arc<Shared>) -> Link {
        Link {
            writer: framing::LineWriter::new(writer),
            shared,
            unwritten: Vec::new(),
        }
    }

    fn has_queued(&self) -> bool {
        self.writer.has_queued()
    }

    /// Queues the line of the pending call `key`.
    async fn queue(&mut self, key: String, line: &[u8]) -> std::io::Result<()> {
        let (batch, this_line) = self.writer.writes_on_queue(line.len());
        if batch || this_line {
            let mut table = self.shared.pending.lock().expect("pending table lock");
            if batch {
                table.mark_written(&self.unwritten);
            }
            if this_line {
                table.mark_written([&key]);
            }
        }
        if batch {
            self.unwritten.clear();
        }
        if !this_line {
            self.unwritten.push(key);
        }
        self.writer.queue(line).await
    }

    /// Writes every queued line.
    async fn flush(&mut self) -> std::io::Result<()> {
        if !self.unwritten.is_empty() {
            self.shared
                .pending
                .lock()
                .expect("pending table lock")
                .mark_written(&self.unwritten);
            self.unwritten.clear();
        }
        self.writer.flush().await
    }
}

/// The id of the bridge's own `tools/list`. Its response never reaches the host: it is sent
/// only while no host line is being read, and not at all while a host call of this id is
/// still pending, so it cannot collide with a host id.
const TOOL_TABLE_ID: &str = "$/bridge/toolTable";

/// Asks the Broker which tools mutate (`tools/list`, answered only for an initialized
/// Connection). `None` when the Broker did not answer with a listing: every tool then counts
/// as mutating.
async fn request_tool_table(link: &mut Link, shared: &Shared) -> Option<HashMap<String, bool>> {
    let id = json!(TOOL_TABLE_ID);
    let (tx, rx) = oneshot::channel();
    {
        let mut table = shared.pending.lock().expect("pending table lock");
        if table.by_id.contains_key(&id.to_string()) {
            return None;
        }
        table.insert(
            id.to_string(),
            Pending::new(Lane::Ordinary, PendingKind::ToolTable(tx)),
        );
    }
    let line = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}});
    link.writer
        .write_line(line.to_string().as_bytes())
        .await
        .ok()?;
    let text = rx.await.ok()?;
    let listing: ToolListing = serde_json::from_str(&text)
        .inspect_err(|error| tracing::warn!(%error, "the Broker's tool listing is unreadable"))
        .ok()?;
    Some(
        listing
            .result
            .tools
            .into_iter()
            // A tool that does not say is treated as mutating.
            .map(|tool| (tool.name, tool.mutating.unwrap_or(true)))
            .collect(),
    )
}

#[derive(Deserialize)]
struct ToolListing {
    result: ToolListingResult,
}

#[derive(Deserialize)]
struct ToolListingResult {
    tools: Vec<ToolListingEntry>,
}

#[derive(Deserialize)]
struct ToolListingEntry {
    name: String,
    #[serde(default)]
    mutating: Option<bool>,
}

fn start_link(
    link: BrokerLink,
    shared: Arc<Shared>,
    response_tx: mpsc::UnboundedSender<Outgoing>,
    notification_tx: mpsc::Sender<String>,
    closed_tx: mpsc::Sender<()>,
) -> (crate::ipc::IpcWriter, tokio::task::JoinHandle<()>) {
    let BrokerLink { reader, writer, .. } = link;
    let reader_task = tokio::spawn(async move {
        read_broker(reader, &shared, &response_tx, &notification_tx).await;
        fail_all_pending(&shared, &response_tx);
        let _ = closed_tx.send(()).await;
    });
    (writer, reader_task)
}

/// The parts of a Broker line the bridge needs to route it.
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<IgnoredAny>,
    #[serde(default)]
    result: Option<InitializePeek>,
}

#[derive(Deserialize)]
struct InitializePeek {
    #[serde(default)]
    limits: Option<Value>,
}

async fn read_broker(
    mut reader: LineReader<crate::ipc::IpcReader>,
    shared: &Shared,
    response_tx: &mpsc::UnboundedSender<Outgoing>,
    notification_tx: &mpsc::Sender<String>,
) {
    loop {
        let line = match reader.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(%error, "Broker link read failed");
                return;
            }
        };
        let Ok(text) = String::from_utf8(line) else {
            tracing::warn!("dropping a non-UTF-8 line from the Broker");
            continue;
        };
        let peek: Peek = match serde_json::from_str(&text) {
            Ok(peek) => peek,
            Err(error) => {
                tracing::warn!(%error, "dropping a malformed line from the Broker");
                continue;
            }
        };
        let max_result = shared.max_result_bytes.load(Ordering::SeqCst) as usize;
        if peek.method.is_some() {
            if text.len() > max_result {
                tracing::debug!(
                    bytes = text.len(),
                    "dropping an oversized notification; it stays in the journal"
                );
            } else if notification_tx.try_send(text).is_err() {
                tracing::debug!("host reads slowly; dropping a notification");
            }
            continue;
        }
        let Some(id) = peek.id else {
            tracing::warn!("dropping a Broker line without id or method");
            continue;
        };
        let Some(pending) = shared
            .pending
            .lock()
            .expect("pending table lock")
            .remove(&id.to_string())
        else {
            tracing::warn!(%id, "dropping a response for an unknown id");
            continue;
        };
        let kind = match pending.kind {
            PendingKind::ToolTable(done) => {
                let _ = done.send(text);
                continue;
            }
            kind => kind,
        };
        let line = match text.len() > max_result {
            true => RpcError::new(ErrorCode::ResultTooLarge, "the response exceeds this Connection's maxResultBytes")
                .with_context("maxResultBytes", json!(max_result))
                .with_context("responseBytes", json!(text.len()))
                .with_remediation(RemediationAction::NarrowRequest, "Ask for less (a smaller limit, a region or a page), or negotiate a larger maxResultBytes.")
                .response(&id),
            false => text,
        };
        match kind {
            PendingKind::Plain => {
                let _ = response_tx.send(Outgoing {
                    line,
                    written: None,
                });
            }
            PendingKind::ToolTable(_) => unreachable!("answered above"),
            PendingKind::Initialize(done) => {
                let succeeded = peek.result.is_some();
                let limits = peek.result.and_then(|r| r.limits).and_then(|l| {
                    let connection = l.get("connection")?;
                    Some((
                        connection.get("maxMessageBytes")?.as_u64()?,
                        connection.get("maxResultBytes")?.as_u64()?,
                    ))
                });
                let (written_tx, written_rx) = oneshot::channel();
                let _ = response_tx.send(Outgoing {
                    line,
                    written: Some(written_tx),
                });
                let _ = written_rx.await;
                let _ = done.send(InitializeAnswer { succeeded, limits });
            }
            PendingKind::Shutdown(done) => {
                let (written_tx, written_rx) = oneshot::channel();
                let _ = response_tx.send(Outgoing {
                    line,
                    written: Some(written_tx),
                });
                let _ = written_rx.await;
                let _ = done.send(());
            }
        }
    }
}

/// The Broker went away. A mutating `tools/call` whose line was written may have reached the
/// browser, and a new Broker has no record of it: non-retryable `unknown_outcome`. Every other
/// pending call (non-mutating, a lifecycle method, or a line that never left the bridge) gets
/// retryable `broker_unavailable`.
fn fail_all_pending(shared: &Shared, response_tx: &mpsc::UnboundedSender<Outgoing>) {
    answer_all_pending(shared, response_tx, broker_lost_error);
}

fn broker_lost_error(pending: &Pending) -> RpcError {
    match (&pending.tool, pending.mutating && pending.written) {
        (Some(tool), true) => {
            let mut error = RpcError::new(
                ErrorCode::UnknownOutcome,
                format!(
                    "the Broker was lost after {} was sent to it; it may or may not have taken effect",
                    tool.name
                ),
            )
            .with_context("reason", json!("broker_lost"))
            .with_context("tool", json!(tool.name));
            if let Some(command_id) = &tool.command_id {
                error = error.with_context("commandId", command_id.clone());
            }
            error.with_remediation(
                RemediationAction::InspectState,
                "Start a new bridge, observe the page and decide from its current state. A new Broker has no record of this call; do not repeat it blindly.",
            )
        }
        _ => RpcError::new(
            ErrorCode::BrokerUnavailable,
            "the Broker connection closed before this call completed",
        )
        .with_context("reason", json!("broker_lost"))
        .with_context("sent", json!(pending.written))
        .with_remediation(
            RemediationAction::RestartSession,
            "Start a new bridge and repeat the call.",
        ),
    }
}

/// Takes every pending call out of the table (so a late Broker response for it is dropped, and
/// each call is resolved exactly once) and answers it with `error(call)`. The bridge's own
/// requests are dropped unanswered (their waiters see the sender go).
fn answer_all_pending(
    shared: &Shared,
    response_tx: &mpsc::UnboundedSender<Outgoing>,
    error: impl Fn(&Pending) -> RpcError,
) {
    let drained: Vec<(String, Pending)> = {
        let mut table = shared.pending.lock().expect("pending table lock");
        table.ordinary = 0;
        table.out_of_band = 0;
        table.by_id.drain().collect()
    };
    for (key, pending) in drained {
        if matches!(pending.kind, PendingKind::ToolTable(_)) {
            continue;
        }
        let id: Value = serde_json::from_str(&key).unwrap_or(Value::Null);
        let _ = response_tx.send(Outgoing {
            line: error(&pending).response(&id),
            written: None,
        });
    }
}

/// Before the bridge exits (stdin EOF or `shutdown`): waits at most `EOF_DRAIN` for in-flight
/// responses, then answers every call still pending instead of dropping it silently. The
/// Broker keeps running those calls; a `tools/call`'s outcome is recorded on its Command.
async fn drain_pending(shared: &Shared, response_tx: &mpsc::UnboundedSender<Outgoing>) {
    let deadline = tokio::time::Instant::now() + EOF_DRAIN;
    while !shared
        .pending
        .lock()
        .expect("pending table lock")
        .by_id
        .is_empty()
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    answer_all_pending(shared, response_tx, |_| {
        RpcError::new(
            ErrorCode::UnknownOutcome,
            "the bridge exited before the Broker answered this call; it may or may not have taken effect",
        )
        .with_context("reason", json!("bridge_exiting"))
        .with_remediation(
            RemediationAction::GetCommand,
            "From a new bridge of the same client, call commands/get with the call's commandId (or repeat it with the same idempotencyKey) to read its recorded outcome.",
        )
    });
}

async fn on_stdin_eof(
    broker: &mut BrokerState,
    shared: &Shared,
    response_tx: &mpsc::UnboundedSender<Outgoing>,
) -> i32 {
    if let BrokerState::Connected(link, _) = broker {
        // Tell the Broker in-band (local sockets have no portable half-close): it releases this
        // Connection's Leases at once and still finishes in-flight calls.
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"{}\"}}",
            methods::INPUT_CLOSED_NOTIFICATION
        );
        let _ = link.flush().await;
        let _ = link.writer.write_line(line.as_bytes()).await;
        drain_pending(shared, response_tx).await;
    }
    0
}

/// Answers a framing or envelope error with `id: null`, waits until it is written, and returns
/// the non-zero exit code.
async fn fatal(response_tx: &mpsc::UnboundedSender<Outgoing>, error: RpcError) -> i32 {
    tracing::error!(%error, "fatal input error; exiting");
    let (tx, rx) = oneshot::channel();
    let _ = response_tx.send(Outgoing {
        line: error.response(&Value::Null),
        written: Some(tx),
    });
    let _ = rx.await;
    2
}

/// Lines taken off the queues for one batched stdout write at most.
const MAX_LINES_PER_WRITE: usize = 256;

async fn write_stdout(
    mut responses: mpsc::UnboundedReceiver<Outgoing>,
    mut notifications: mpsc::Receiver<String>,
) {
    let mut stdout = framing::LineWriter::new(stdio::output());
    let mut notifications_open = true;
    // Fired once their line (and everything batched with it) reached the pipe.
    let mut written: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        let first = tokio::select! {
            biased;
            response = responses.recv() => match response {
                Some(response) => response,
                None => return,
            },
            notification = notifications.recv(), if notifications_open => match notification {
                Some(line) => Outgoing { line, written: None },
                None => {
                    notifications_open = false;
                    continue;
                }
            },
        };
        // What else is queued already goes out in the same write: responses first, then
        // notifications, as the select above prefers them.
        let mut next = Some(first);
        let mut taken = 0;
        let mut large = false;
        while let Some(outgoing) = next.take() {
            large |= outgoing.line.len() >= crate::os::TRIM_AFTER_BYTES;
            if let Err(error) = stdout.queue(outgoing.line.as_bytes()).await {
                tracing::error!(%error, "stdout closed");
                return;
            }
            written.extend(outgoing.written);
            taken += 1;
            if taken < MAX_LINES_PER_WRITE {
                next = match responses.try_recv() {
                    Ok(response) => Some(response),
                    Err(_) => match notifications_open.then(|| notifications.try_recv()) {
                        Some(Ok(line)) => Some(Outgoing {
                            line,
                            written: None,
                        }),
                        _ => None,
                    },
                };
            }
        }
        if let Err(error) = stdout.flush().await {
            tracing::error!(%error, "stdout closed");
            return;
        }
        for written in written.drain(..) {
            let _ = written.send(());
        }
        // A large result passed through: hand its freed buffers back to the OS.
        if large {
            crate::os::return_freed_memory();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(mutating: bool, written: bool) -> Pending {
        let mut pending = Pending::new(Lane::Ordinary, PendingKind::Plain);
        pending.mutating = mutating;
        pending.written = written;
        pending.tool = Some(ToolFacts {
            name: "browser.click".into(),
            command_id: Some(json!("command:1")),
        });
        pending
    }

    #[test]
    fn only_a_written_mutating_call_is_unknown_outcome_when_the_broker_is_lost() {
        let error = broker_lost_error(&call(true, true));
        assert_eq!(error.code, ErrorCode::UnknownOutcome);
        assert!(!error.code.retryable());
        let context = error.context.as_ref().unwrap();
        assert_eq!(context["reason"], "broker_lost");
        assert_eq!(context["commandId"], "command:1");
        for (mutating, written) in [(true, false), (false, true), (false, false)] {
            let error = broker_lost_error(&call(mutating, written));
            assert_eq!(
                error.code,
                ErrorCode::BrokerUnavailable,
                "{mutating} {written}"
            );
            assert!(error.code.retryable());
        }
        // A lifecycle method is never a mutation of the browser.
        let mut lifecycle = Pending::new(Lane::Ordinary, PendingKind::Plain);
        lifecycle.written = true;
        assert_eq!(
            broker_lost_error(&lifecycle).code,
            ErrorCode::BrokerUnavailable
        );
    }
}
