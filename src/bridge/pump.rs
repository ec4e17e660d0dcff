//! The bridge's main loop: stdin lines in, Broker link, stdout lines out.
//!
//! One loop owns the pending table and waits in one `select!` on what can happen next: a
//! Broker line (a response is routed by id, a notification passed on), a host line (checked,
//! then forwarded), the write of a response it waits for (`initialize`'s limit switch,
//! `shutdown`'s exit), or the end of its wait for in-flight responses before it exits. A task
//! of its own owns stdout, so a slow host reader never holds up routing. Lines queued at once
//! go out in one write on both sides: forwarded lines are batched while stdin holds another
//! complete line, and the stdout task drains its queues into one write. Responses are never
//! dropped (they are bounded by the pending caps); notifications go through a small bounded
//! queue and are dropped when the host reads slowly, as the contract allows (they stay
//! recoverable through `events/poll`).

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::startup::{BrokerLink, connect_or_start};
use super::stdio;
use crate::framing::{self, FramingError, LineReader};
use crate::home::Home;
use crate::protocol::envelope::{self, Inbound};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::internal::{self, PeerRole};
use crate::protocol::methods::{
    self, Lane, MAX_PENDING_ORDINARY, MAX_PENDING_OUT_OF_BAND, TOOL_FLAGS_METHOD,
};
use crate::protocol::negotiate::SERVICE_LIMITS;
use crate::version::now_ms;

/// Notifications waiting for a slow host reader; beyond this they are dropped.
const NOTIFICATION_QUEUE: usize = 256;

/// After stdin EOF or `shutdown`, how long in-flight responses may take before the bridge
/// exits anyway.
const EOF_DRAIN: Duration = Duration::from_secs(5);

/// After a write to the Broker failed, how long its reads may take to see the link end.
const LINK_END_WAIT: Duration = Duration::from_secs(2);

/// How long the stdout task may take to write what is owed once the loop ended.
const STDOUT_FINISH: Duration = Duration::from_secs(2);

/// Runs the bridge until EOF, `shutdown` or a framing error. Returns the process exit code.
pub async fn run_bridge(home: Home, browser_preference: Option<String>) -> i32 {
    let hello = crate::ipc::hello(PeerRole::Bridge, browser_preference);
    let connect = move || {
        let (home, hello) = (home.clone(), hello.clone());
        async move {
            let BrokerLink { reader, writer, .. } = connect_or_start(&home, &hello).await?;
            Ok((reader, writer))
        }
    };
    pump(stdio::input(), stdio::output(), connect).await
}

/// The loop over any host pipes and any Broker link `connect` opens (tests use in-memory pipes).
async fn pump<I, O, R, W, C, F>(stdin: I, stdout: O, connect: C) -> i32
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Send + Unpin + 'static,
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
    C: FnMut() -> F,
    F: Future<Output = Result<(LineReader<R>, W), RpcError>>,
{
    let (response_tx, response_rx) = mpsc::unbounded_channel::<Outgoing>();
    let (notification_tx, notification_rx) = mpsc::channel::<String>(NOTIFICATION_QUEUE);
    let writer = tokio::spawn(write_stdout(stdout, response_rx, notification_rx));
    let stdin = LineReader::new(
        BufReader::new(stdin),
        SERVICE_LIMITS.max_message_bytes as usize,
    );
    let mut bridge = Bridge {
        stdin,
        connect,
        broker: BrokerState::NotConnected(None),
        pending: PendingTable::default(),
        tool_flags: None,
        max_result_bytes: SERVICE_LIMITS.max_result_bytes as usize,
        responses: response_tx,
        notifications: notification_tx,
        hold: Hold::None,
        ending: None,
        shutdown_link: false,
    };
    let code = bridge.run().await;
    drop(bridge);
    let _ = tokio::time::timeout(STDOUT_FINISH, writer).await;
    code
}

/// What one pending call is.
struct Pending {
    lane: Lane,
    kind: PendingKind,
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
            written: false,
            tool: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PendingKind {
    Plain,
    /// Its response switches the limits once written.
    Initialize,
    /// Its response, once written, starts the exit.
    Shutdown,
    /// The bridge's own request for the Broker's tool flags (never forwarded to the host).
    ToolFlags,
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

    /// The count a call is held against: a host call's lane (the bridge's own request counts
    /// against no cap).
    fn counter(&mut self, pending: &Pending) -> Option<&mut usize> {
        match (pending.kind, pending.lane) {
            (PendingKind::ToolFlags, _) => None,
            (_, Lane::Ordinary) => Some(&mut self.ordinary),
            (_, Lane::OutOfBand) => Some(&mut self.out_of_band),
        }
    }

    fn insert(&mut self, key: String, pending: Pending) {
        if let Some(count) = self.counter(&pending) {
            *count += 1;
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
        if let Some(count) = self.counter(&pending) {
            *count -= 1;
        }
        Some(pending)
    }

    /// Whether a call of the host is still pending (the bridge's own request does not count).
    fn host_calls(&self) -> bool {
        self.by_id
            .values()
            .any(|pending| pending.kind != PendingKind::ToolFlags)
    }

    /// Takes every call out (so a late response for one is dropped, and each is resolved once).
    fn take_all(&mut self) -> Vec<(String, Pending)> {
        self.ordinary = 0;
        self.out_of_band = 0;
        self.by_id.drain().collect()
    }
}

/// One line on its way to stdout; `written` fires after it reached the pipe.
struct Outgoing {
    line: String,
    written: Option<oneshot::Sender<()>>,
}

enum BrokerState<R, W> {
    /// Not connected yet, or the last attempt failed with this error.
    NotConnected(Option<RpcError>),
    Connected(Link<R, W>),
}

/// The Broker link. Forwarded lines are batched; each pending call is marked `written` just
/// before the write that carries its line starts, so a call whose line never left the bridge
/// is known to be unsent when the Broker is lost.
struct Link<R, W> {
    reader: LineReader<R>,
    writer: framing::LineWriter<W>,
    /// Pending calls whose lines sit in the batch, not yet handed to the socket.
    unwritten: Vec<String>,
}

impl<R: AsyncBufRead + Unpin, W: AsyncWrite + Unpin> Link<R, W> {
    /// Queues the line of the pending call `key`.
    async fn queue(
        &mut self,
        pending: &mut PendingTable,
        key: String,
        line: &[u8],
    ) -> std::io::Result<()> {
        let (batch, this_line) = self.writer.writes_on_queue(line.len());
        if batch {
            pending.mark_written(&self.unwritten);
            self.unwritten.clear();
        }
        match this_line {
            true => pending.mark_written([&key]),
            false => self.unwritten.push(key),
        }
        self.writer.queue(line).await
    }

    /// Writes every queued line.
    async fn flush(&mut self, pending: &mut PendingTable) -> std::io::Result<()> {
        pending.mark_written(&self.unwritten);
        self.unwritten.clear();
        self.writer.flush().await
    }
}

/// Reads the next Broker line; never resolves without a link.
async fn next_broker_line<R: AsyncBufRead + Unpin, W>(
    broker: &mut BrokerState<R, W>,
) -> Result<Option<Vec<u8>>, FramingError> {
    match broker {
        BrokerState::Connected(link) => link.reader.next_line().await,
        BrokerState::NotConnected(_) => std::future::pending().await,
    }
}

/// What keeps the loop from reading the next host line.
enum Hold {
    None,
    /// `initialize` or `shutdown` was forwarded: its response decides how the next line is read.
    Response,
    /// The `initialize` response is on its way to stdout; once written, these limits apply.
    Limits(oneshot::Receiver<()>, Option<(u64, u64)>),
    /// The `shutdown` response is on its way to stdout; once written, the bridge exits.
    Exit(oneshot::Receiver<()>),
}

impl Hold {
    fn reads_stdin(&self) -> bool {
        matches!(self, Hold::None)
    }

    /// Resolves when the held response was written (or its writer went away).
    async fn written(&mut self) {
        match self {
            Hold::Limits(written, _) | Hold::Exit(written) => {
                let _ = written.await;
            }
            Hold::None | Hold::Response => std::future::pending().await,
        }
    }
}

/// The bridge is on its way out: it reads no more host lines and waits (until `deadline`) for
/// the responses it owes.
struct Ending {
    deadline: Instant,
    code: i32,
    cause: EndCause,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EndCause {
    /// stdin EOF or `shutdown`: calls still pending at the deadline are answered
    /// `bridge_exiting`.
    Exiting,
    /// A write to the Broker failed: what it already sent is routed until its link ends; the
    /// rest is answered by the Broker-loss rule.
    LinkFailed,
}

/// What woke the loop.
enum Wake {
    Written,
    Broker(Result<Option<Vec<u8>>, FramingError>),
    Host(Result<Option<Vec<u8>>, FramingError>),
    Deadline,
}

struct Bridge<I, C, R, W> {
    stdin: LineReader<BufReader<I>>,
    connect: C,
    broker: BrokerState<R, W>,
    pending: PendingTable,
    /// Which tools the connected Broker says mutate (asked right after connecting).
    tool_flags: Option<HashMap<String, bool>>,
    max_result_bytes: usize,
    responses: mpsc::UnboundedSender<Outgoing>,
    notifications: mpsc::Sender<String>,
    hold: Hold,
    ending: Option<Ending>,
    /// Set after `shutdown` was answered: the link is shut down on exit.
    shutdown_link: bool,
}

impl<I, C, F, R, W> Bridge<I, C, R, W>
where
    I: AsyncRead + Unpin,
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
    C: FnMut() -> F,
    F: Future<Output = Result<(LineReader<R>, W), RpcError>>,
{
    async fn run(&mut self) -> i32 {
        let code = loop {
            if let Some(code) = self.ended() {
                break code;
            }
            // Lines forwarded to the Broker are batched while stdin already holds the next one;
            // before waiting for more input, what is queued goes out in one write.
            let link_failed = self
                .ending
                .as_ref()
                .is_some_and(|ending| ending.cause == EndCause::LinkFailed);
            if let BrokerState::Connected(link) = &mut self.broker
                && !link_failed
                && link.writer.has_queued()
                && !(self.hold.reads_stdin() && self.stdin.has_buffered_line())
                && let Err(error) = link.flush(&mut self.pending).await
            {
                self.link_failed(error);
                continue;
            }
            let reads_stdin = self.hold.reads_stdin() && self.ending.is_none();
            let deadline = self.ending.as_ref().map(|ending| ending.deadline);
            let wake = tokio::select! {
                biased;
                () = self.hold.written() => Wake::Written,
                line = next_broker_line(&mut self.broker) => Wake::Broker(line),
                line = self.stdin.next_line(), if reads_stdin => Wake::Host(line),
                () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => Wake::Deadline,
            };
            match wake {
                Wake::Written => self.on_written().await,
                Wake::Broker(Ok(Some(line))) => self.route(line),
                Wake::Broker(Ok(None)) => {
                    tracing::error!("the Broker connection closed");
                    if let Some(code) = self.on_link_end() {
                        break code;
                    }
                }
                Wake::Broker(Err(error)) => {
                    tracing::error!(%error, "Broker link read failed");
                    if let Some(code) = self.on_link_end() {
                        break code;
                    }
                }
                Wake::Host(line) => {
                    let read_at = now_ms();
                    if let Some(code) = self.on_host_line(line, read_at).await {
                        break code;
                    }
                }
                Wake::Deadline => break self.on_deadline(),
            }
        };
        // Lines read before the one that ended the loop are still forwarded.
        if let BrokerState::Connected(link) = &mut self.broker {
            if link.writer.has_queued() {
                let _ = link.flush(&mut self.pending).await;
            }
            if self.shutdown_link {
                let _ = link.writer.get_mut().shutdown().await;
            }
        }
        code
    }

    /// The exit code once an ending has nothing more to wait for.
    fn ended(&self) -> Option<i32> {
        let ending = self.ending.as_ref()?;
        (!self.pending.host_calls()).then_some(ending.code)
    }

    fn end(&mut self, code: i32, cause: EndCause) {
        let wait = match cause {
            EndCause::Exiting => EOF_DRAIN,
            EndCause::LinkFailed => LINK_END_WAIT,
        };
        self.ending = Some(Ending {
            deadline: Instant::now() + wait,
            code,
            cause,
        });
    }

    /// A write to the Broker failed: its reads will see the link end soon after.
    fn link_failed(&mut self, error: std::io::Error) {
        tracing::error!(%error, "cannot write to the Broker");
        if !self
            .ending
            .as_ref()
            .is_some_and(|ending| ending.cause == EndCause::LinkFailed)
        {
            self.end(1, EndCause::LinkFailed);
        }
    }

    /// The Broker link ended: every pending call is answered by the Broker-loss rule. An
    /// ending in progress finishes with its code; otherwise the bridge exits 1.
    fn on_link_end(&mut self) -> Option<i32> {
        self.fail_all_pending();
        self.broker = BrokerState::NotConnected(None);
        Some(self.ending.as_ref().map_or(1, |ending| ending.code))
    }

    fn on_deadline(&mut self) -> i32 {
        let Some(ending) = self.ending.take() else {
            return 1;
        };
        match ending.cause {
            EndCause::Exiting => self.answer_all_pending(|_| {
                RpcError::new(
                    ErrorCode::UnknownOutcome,
                    "the bridge exited before the Broker answered this call; it may or may not have taken effect",
                )
                .with_context("reason", json!("bridge_exiting"))
                .with_remediation(
                    RemediationAction::GetCommand,
                    "From a new bridge of the same client, call commands/get with the call's commandId (or repeat it with the same idempotencyKey) to read its recorded outcome.",
                )
            }),
            EndCause::LinkFailed => self.fail_all_pending(),
        }
        ending.code
    }

    /// A held response reached stdout.
    async fn on_written(&mut self) {
        match std::mem::replace(&mut self.hold, Hold::None) {
            Hold::Limits(_, limits) => {
                // The switch happens after the response is written and before the next line is
                // parsed.
                if let Some((max_message, max_result)) = limits {
                    self.stdin.set_max_line_bytes(max_message as usize);
                    self.max_result_bytes = max_result as usize;
                }
            }
            Hold::Exit(_) => {
                // Calls still in flight are answered (or, past the wait, told so) before exit.
                self.end(0, EndCause::Exiting);
                self.shutdown_link = true;
            }
            Hold::None | Hold::Response => {}
        }
    }

    async fn on_host_line(
        &mut self,
        line: Result<Option<Vec<u8>>, FramingError>,
        read_at: i64,
    ) -> Option<i32> {
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => return self.on_stdin_eof().await,
            Err(FramingError::TooLong { limit }) => {
                let error = RpcError::new(
                    ErrorCode::MessageTooLarge,
                    format!("input line exceeds {limit} bytes"),
                )
                .with_context("maxMessageBytes", json!(limit));
                return Some(self.fatal(error).await);
            }
            Err(FramingError::Io(error)) => {
                tracing::error!(%error, "cannot read stdin");
                return Some(1);
            }
        };
        let inbound = match envelope::classify(&line) {
            Ok(inbound) => inbound,
            Err(error) => return Some(self.fatal(error).await),
        };
        let (id, method, params) = match inbound {
            Inbound::Notification { method, .. } => {
                // The Broker defines no host notifications; they are accepted and ignored.
                tracing::debug!(%method, "ignoring a host notification");
                return None;
            }
            Inbound::Request { id, method, params } => (id, method, params),
        };
        let lane = methods::lane(&method, &params);
        let key = id.to_string();
        let limit = match lane {
            Lane::Ordinary => MAX_PENDING_ORDINARY,
            Lane::OutOfBand => MAX_PENDING_OUT_OF_BAND,
        };
        if self.pending.count(lane) >= limit {
            let error = RpcError::new(
                ErrorCode::ResultTooLarge,
                "too many pending calls on this bridge; retry after responses arrive",
            )
            .with_context("pendingLimit", json!(limit));
            self.answer(error.response(&id));
            return None;
        }
        if self.pending.by_id.contains_key(&key) {
            let error = RpcError::new(
                ErrorCode::InvalidRequest,
                "a request with this id is still pending",
            );
            self.answer(error.response(&id));
            return None;
        }
        // Connect (or reconnect) lazily; initialize retries a failed startup.
        if let BrokerState::NotConnected(previous) = &self.broker {
            let retry = previous.is_none() || method == "initialize";
            let error = match retry {
                true => match (self.connect)().await {
                    Ok((reader, writer)) => {
                        self.broker = BrokerState::Connected(Link {
                            reader,
                            writer: framing::LineWriter::new(writer),
                            unwritten: Vec::new(),
                        });
                        self.ask_tool_flags().await;
                        None
                    }
                    Err(error) => Some(error),
                },
                false => previous.clone(),
            };
            if let Some(error) = error {
                self.answer(error.response(&id));
                self.broker = BrokerState::NotConnected(Some(error));
                return None;
            }
        }
        let kind = match method.as_str() {
            "initialize" => PendingKind::Initialize,
            "shutdown" => PendingKind::Shutdown,
            _ => PendingKind::Plain,
        };
        let mut pending = Pending::new(lane, kind);
        if method == "tools/call" {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            pending.tool = Some(ToolFacts {
                name: name.to_owned(),
                command_id: params.get("commandId").cloned(),
            });
        }
        self.pending.insert(key.clone(), pending);
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
        let BrokerState::Connected(link) = &mut self.broker else {
            unreachable!("connected above")
        };
        let mut sent = link.queue(&mut self.pending, key, &bytes).await;
        if kind != PendingKind::Plain && sent.is_ok() {
            // Its response decides how the next line is read: it goes out now.
            sent = link.flush(&mut self.pending).await;
            self.hold = Hold::Response;
        }
        if let Err(error) = sent {
            self.link_failed(error);
        }
        None
    }

    /// Asks the connected Broker which tools mutate, ahead of the host's first line. A Broker
    /// that does not answer with flags leaves every tool counted as mutating.
    async fn ask_tool_flags(&mut self) {
        let BrokerState::Connected(link) = &mut self.broker else {
            return;
        };
        let key = json!(TOOL_FLAGS_METHOD).to_string();
        self.pending.insert(
            key.clone(),
            Pending::new(Lane::Ordinary, PendingKind::ToolFlags),
        );
        let line = json!({"jsonrpc": "2.0", "id": TOOL_FLAGS_METHOD, "method": TOOL_FLAGS_METHOD});
        if let Err(error) = link
            .queue(&mut self.pending, key, line.to_string().as_bytes())
            .await
        {
            self.link_failed(error);
        }
    }

    /// stdin ended: tell the Broker in-band (local sockets have no portable half-close), so it
    /// releases this Connection's Leases at once and still finishes in-flight calls; then wait
    /// for what is pending.
    async fn on_stdin_eof(&mut self) -> Option<i32> {
        let BrokerState::Connected(link) = &mut self.broker else {
            return Some(0);
        };
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"{}\"}}",
            methods::INPUT_CLOSED_NOTIFICATION
        );
        let _ = link.flush(&mut self.pending).await;
        let _ = link.writer.write_line(line.as_bytes()).await;
        self.end(0, EndCause::Exiting);
        None
    }

    /// Answers a framing or envelope error with `id: null`, waits until it is written, and
    /// returns the non-zero exit code.
    async fn fatal(&mut self, error: RpcError) -> i32 {
        tracing::error!(%error, "fatal input error; exiting");
        let (tx, rx) = oneshot::channel();
        let _ = self.responses.send(Outgoing {
            line: error.response(&Value::Null),
            written: Some(tx),
        });
        let _ = rx.await;
        2
    }

    fn answer(&self, line: String) {
        let _ = self.responses.send(Outgoing {
            line,
            written: None,
        });
    }

    /// Routes one Broker line: a notification to the host's bounded queue, a response to its
    /// pending call.
    fn route(&mut self, line: Vec<u8>) {
        let Ok(text) = String::from_utf8(line) else {
            tracing::warn!("dropping a non-UTF-8 line from the Broker");
            return;
        };
        let peek: Peek = match serde_json::from_str(&text) {
            Ok(peek) => peek,
            Err(error) => {
                tracing::warn!(%error, "dropping a malformed line from the Broker");
                return;
            }
        };
        let max_result = self.max_result_bytes;
        if peek.method.is_some() {
            if text.len() > max_result {
                tracing::debug!(
                    bytes = text.len(),
                    "dropping an oversized notification; it stays in the journal"
                );
            } else if self.notifications.try_send(text).is_err() {
                tracing::debug!("host reads slowly; dropping a notification");
            }
            return;
        }
        let Some(id) = peek.id else {
            tracing::warn!("dropping a Broker line without id or method");
            return;
        };
        let Some(pending) = self.pending.remove(&id.to_string()) else {
            tracing::warn!(%id, "dropping a response for an unknown id");
            return;
        };
        if pending.kind == PendingKind::ToolFlags {
            self.tool_flags = tool_flags(&text);
            return;
        }
        let line = match text.len() > max_result {
            true => RpcError::new(ErrorCode::ResultTooLarge, "the response exceeds this Connection's maxResultBytes")
                .with_context("maxResultBytes", json!(max_result))
                .with_context("responseBytes", json!(text.len()))
                .with_remediation(RemediationAction::NarrowRequest, "Ask for less (a smaller limit, a region or a page), or negotiate a larger maxResultBytes.")
                .response(&id),
            false => text,
        };
        match pending.kind {
            PendingKind::Plain | PendingKind::ToolFlags => self.answer(line),
            PendingKind::Initialize => {
                let limits = peek.result.and_then(|r| r.limits).and_then(|l| {
                    let connection = l.get("connection")?;
                    Some((
                        connection.get("maxMessageBytes")?.as_u64()?,
                        connection.get("maxResultBytes")?.as_u64()?,
                    ))
                });
                self.hold = Hold::Limits(self.answer_written(line), limits);
            }
            PendingKind::Shutdown => self.hold = Hold::Exit(self.answer_written(line)),
        }
    }

    /// Sends a response and returns what fires once it reached stdout.
    fn answer_written(&self, line: String) -> oneshot::Receiver<()> {
        let (written_tx, written_rx) = oneshot::channel();
        let _ = self.responses.send(Outgoing {
            line,
            written: Some(written_tx),
        });
        written_rx
    }

    /// The Broker went away. A mutating `tools/call` whose line was written may have reached
    /// the browser, and a new Broker has no record of it: non-retryable `unknown_outcome`.
    /// Every other pending call (non-mutating, a lifecycle method, or a line that never left
    /// the bridge) gets retryable `broker_unavailable`.
    fn fail_all_pending(&mut self) {
        let flags = self.tool_flags.take();
        self.answer_all_pending(|pending| broker_lost_error(pending, mutating(&flags, pending)));
    }

    /// Takes every pending call out of the table and answers it with `error(call)`. The
    /// bridge's own request is dropped unanswered.
    fn answer_all_pending(&mut self, error: impl Fn(&Pending) -> RpcError) {
        for (key, pending) in self.pending.take_all() {
            if pending.kind == PendingKind::ToolFlags {
                continue;
            }
            let id: Value = serde_json::from_str(&key).unwrap_or(Value::Null);
            self.answer(error(&pending).response(&id));
        }
    }
}

/// Whether a pending `tools/call` counts as mutating: as the Broker's flags say; a tool they do
/// not name, or every tool when the Broker gave none, counts as mutating.
fn mutating(flags: &Option<HashMap<String, bool>>, pending: &Pending) -> bool {
    let Some(tool) = &pending.tool else {
        return false;
    };
    flags
        .as_ref()
        .and_then(|flags| flags.get(&tool.name).copied())
        .unwrap_or(true)
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

/// The tool flags in a response to the bridge's own request: `{"tools": {name: mutating}}`.
fn tool_flags(text: &str) -> Option<HashMap<String, bool>> {
    #[derive(Deserialize)]
    struct Response {
        result: Flags,
    }
    #[derive(Deserialize)]
    struct Flags {
        tools: HashMap<String, bool>,
    }
    match serde_json::from_str::<Response>(text) {
        Ok(response) => Some(response.result.tools),
        Err(error) => {
            tracing::warn!(%error, "the Broker gave no tool flags; every tool counts as mutating");
            None
        }
    }
}

fn broker_lost_error(pending: &Pending, mutating: bool) -> RpcError {
    match (&pending.tool, mutating && pending.written) {
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

/// Lines taken off the queues for one batched stdout write at most.
const MAX_LINES_PER_WRITE: usize = 256;

async fn write_stdout<O: AsyncWrite + Unpin>(
    stdout: O,
    mut responses: mpsc::UnboundedReceiver<Outgoing>,
    mut notifications: mpsc::Receiver<String>,
) {
    let mut stdout = framing::LineWriter::new(stdout);
    let mut notifications_open = true;
    // Fired once their line (and everything batched with it) reached the pipe.
    let mut written: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        let first = tokio::select! {
            biased;
            response = responses.recv() => match response {
                Some(response) => response,
                None => break,
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
    use tokio::io::{AsyncBufReadExt, DuplexStream, Lines, ReadHalf, WriteHalf, duplex, split};

    fn call(written: bool) -> Pending {
        let mut pending = Pending::new(Lane::Ordinary, PendingKind::Plain);
        pending.written = written;
        pending.tool = Some(ToolFacts {
            name: "browser.click".into(),
            command_id: Some(json!("command:1")),
        });
        pending
    }

    #[test]
    fn only_a_written_mutating_call_is_unknown_outcome_when_the_broker_is_lost() {
        let error = broker_lost_error(&call(true), true);
        assert_eq!(error.code, ErrorCode::UnknownOutcome);
        assert!(!error.code.retryable());
        let context = error.context.as_ref().unwrap();
        assert_eq!(context["reason"], "broker_lost");
        assert_eq!(context["commandId"], "command:1");
        for (mutating, written) in [(true, false), (false, true), (false, false)] {
            let error = broker_lost_error(&call(written), mutating);
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
        let flags = None;
        assert_eq!(
            broker_lost_error(&lifecycle, mutating(&flags, &lifecycle)).code,
            ErrorCode::BrokerUnavailable
        );
    }

    /// A bridge on in-memory pipes: the host's ends of stdin and stdout, and the Broker's end of
    /// the link (which `connect` hands out once).
    struct Rig {
        host_in: Option<DuplexStream>,
        host_out: Lines<BufReader<DuplexStream>>,
        broker_in: Lines<BufReader<ReadHalf<DuplexStream>>>,
        broker_out: WriteHalf<DuplexStream>,
        bridge: tokio::task::JoinHandle<i32>,
    }

    const PIPE: usize = 1 << 20;

    fn rig() -> Rig {
        let (host_in, stdin) = duplex(PIPE);
        let (stdout, host_out) = duplex(PIPE);
        let (bridge_end, broker_end) = duplex(PIPE);
        let (link_read, link_write) = split(bridge_end);
        let mut link = Some((LineReader::new(BufReader::new(link_read), PIPE), link_write));
        let connect = move || {
            let link = link.take();
            async move {
                link.ok_or_else(|| RpcError::new(ErrorCode::BrokerUnavailable, "connected once"))
            }
        };
        let (broker_read, broker_out) = split(broker_end);
        Rig {
            host_in: Some(host_in),
            host_out: BufReader::new(host_out).lines(),
            broker_in: BufReader::new(broker_read).lines(),
            broker_out,
            bridge: tokio::spawn(pump(stdin, stdout, connect)),
        }
    }

    async fn write_line(to: &mut (impl AsyncWrite + Unpin), message: &Value) {
        let line = format!("{message}\n");
        to.write_all(line.as_bytes()).await.unwrap();
    }

    fn request(id: Value, method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    fn tool_call(id: u64, tool: &str) -> Value {
        request(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": {}}),
        )
    }

    impl Rig {
        async fn host_sends(&mut self, message: Value) {
            write_line(self.host_in.as_mut().unwrap(), &message).await;
        }

        async fn host_reads(&mut self) -> Value {
            let line = self
                .host_out
                .next_line()
                .await
                .unwrap()
                .expect("a line for the host");
            serde_json::from_str(&line).unwrap()
        }

        async fn broker_reads(&mut self) -> Option<Value> {
            let line = self.broker_in.next_line().await.unwrap()?;
            Some(serde_json::from_str(&line).unwrap())
        }

        async fn broker_answers(&mut self, id: &Value, result: Value) {
            let message = json!({"jsonrpc": "2.0", "id": id, "result": result});
            write_line(&mut self.broker_out, &message).await;
        }

        /// The bridge's own first request; answered with these flags (or an error).
        async fn flags_asked(&mut self, flags: Option<Value>) {
            let asked = self.broker_reads().await.unwrap();
            assert_eq!(asked["method"], TOOL_FLAGS_METHOD, "{asked}");
            match flags {
                Some(flags) => {
                    self.broker_answers(&asked["id"], json!({"tools": flags}))
                        .await
                }
                None => {
                    let error = RpcError::new(ErrorCode::MethodNotFound, "unknown method");
                    let line = format!("{}\n", error.response(&asked["id"]));
                    self.broker_out.write_all(line.as_bytes()).await.unwrap();
                }
            }
        }

        async fn exit_code(self) -> i32 {
            self.bridge.await.unwrap()
        }
    }

    fn code(message: &Value) -> &str {
        message["error"]["data"]["code"].as_str().unwrap_or("")
    }

    #[tokio::test]
    async fn calls_lost_with_the_broker_are_answered_by_the_flags_it_gave() {
        let mut rig = rig();
        rig.host_sends(tool_call(1, "browser.click")).await;
        rig.host_sends(tool_call(2, "browser.observe")).await;
        rig.flags_asked(Some(
            json!({"browser.click": true, "browser.observe": false}),
        ))
        .await;
        for id in [1, 2] {
            assert_eq!(rig.broker_reads().await.unwrap()["id"], id);
        }
        let Rig {
            host_in: _host_in,
            mut host_out,
            broker_in,
            broker_out,
            bridge,
        } = rig;
        drop((broker_in, broker_out));
        let mut answers = HashMap::new();
        for _ in 0..2 {
            let line = host_out.next_line().await.unwrap().unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            answers.insert(message["id"].as_u64().unwrap(), message);
        }
        assert_eq!(code(&answers[&1]), "unknown_outcome", "{}", answers[&1]);
        assert_eq!(
            answers[&1]["error"]["data"]["context"]["reason"],
            "broker_lost"
        );
        assert_eq!(code(&answers[&2]), "broker_unavailable", "{}", answers[&2]);
        assert_eq!(bridge.await.unwrap(), 1);
    }

    #[tokio::test]
    async fn without_flags_from_its_broker_every_tool_counts_as_mutating() {
        let mut rig = rig();
        rig.host_sends(tool_call(3, "browser.observe")).await;
        rig.flags_asked(None).await;
        assert_eq!(rig.broker_reads().await.unwrap()["id"], 3);
        let Rig {
            host_in: _host_in,
            mut host_out,
            broker_in,
            broker_out,
            bridge,
        } = rig;
        drop((broker_in, broker_out));
        let line = host_out.next_line().await.unwrap().unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(code(&message), "unknown_outcome", "{message}");
        assert_eq!(bridge.await.unwrap(), 1);
    }

    #[tokio::test]
    async fn the_limit_switch_applies_after_the_initialize_response_and_before_the_next_line() {
        let mut rig = rig();
        // initialize and, pipelined behind it in one write, a line above the limit it
        // negotiates (but within the service limit it is read under).
        let long = request(json!(5), "tools/list", json!({"pad": "x".repeat(70_000)}));
        let both = format!("{}\n{long}\n", request(json!(4), "initialize", json!({})));
        rig.host_in
            .as_mut()
            .unwrap()
            .write_all(both.as_bytes())
            .await
            .unwrap();
        rig.flags_asked(Some(json!({}))).await;
        let initialize = rig.broker_reads().await.unwrap();
        assert_eq!(initialize["method"], "initialize");
        let limits =
            json!({"connection": {"maxMessageBytes": 65_536, "maxResultBytes": 4_194_304}});
        rig.broker_answers(&initialize["id"], json!({"limits": limits}))
            .await;
        assert_eq!(rig.host_reads().await["id"], 4);
        let refused = rig.host_reads().await;
        assert_eq!(code(&refused), "message_too_large", "{refused}");
        assert_eq!(refused["id"], Value::Null);
        // The long line never reached the Broker.
        assert_eq!(rig.broker_reads().await, None);
        assert_eq!(rig.exit_code().await, 2);
    }

    #[tokio::test]
    async fn at_stdin_eof_the_broker_is_told_and_a_pending_call_is_still_answered() {
        let mut rig = rig();
        rig.host_sends(tool_call(7, "browser.observe")).await;
        rig.host_in = None;
        rig.flags_asked(Some(json!({"browser.observe": false})))
            .await;
        let call = rig.broker_reads().await.unwrap();
        assert_eq!(call["id"], 7);
        let closed = rig.broker_reads().await.unwrap();
        assert_eq!(closed["method"], methods::INPUT_CLOSED_NOTIFICATION);
        rig.broker_answers(&call["id"], json!({"done": true})).await;
        assert_eq!(rig.host_reads().await["result"]["done"], true);
        assert_eq!(rig.exit_code().await, 0);
    }

    #[tokio::test]
    async fn after_shutdown_is_answered_the_bridge_exits_and_closes_its_link() {
        let mut rig = rig();
        rig.host_sends(request(json!("s"), "shutdown", json!({})))
            .await;
        rig.flags_asked(Some(json!({}))).await;
        let shutdown = rig.broker_reads().await.unwrap();
        assert_eq!(shutdown["method"], "shutdown");
        rig.broker_answers(&shutdown["id"], json!({})).await;
        assert_eq!(rig.host_reads().await["id"], "s");
        assert_eq!(rig.broker_reads().await, None);
        assert_eq!(rig.exit_code().await, 0);
    }

    #[tokio::test]
    async fn pending_caps_count_host_calls_only() {
        let mut rig = rig();
        // The Broker never answers: 256 ordinary calls are pending, the next is refused at
        // once, and the bridge's own request took no slot.
        let mut batch = String::new();
        for n in 0..=MAX_PENDING_ORDINARY as u64 {
            batch.push_str(&format!(
                "{}\n",
                request(json!(n), "workspaces/get", json!({}))
            ));
        }
        rig.host_in
            .as_mut()
            .unwrap()
            .write_all(batch.as_bytes())
            .await
            .unwrap();
        let refused = rig.host_reads().await;
        assert_eq!(refused["id"], MAX_PENDING_ORDINARY as u64, "{refused}");
        assert_eq!(code(&refused), "result_too_large");
        assert_eq!(
            refused["error"]["data"]["context"]["pendingLimit"],
            MAX_PENDING_ORDINARY as u64
        );
        rig.bridge.abort();
    }
}
