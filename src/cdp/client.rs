//! The CDP client actor: one tokio task owns the pending-call table, the
//! session map and the deadline index; `CdpClient` handles are cheap clones
//! over an mpsc and each call waits on a oneshot. The actor reads and writes
//! NDJSON lines through two channels, so it never sees a socket; it knows no
//! method semantics beyond the lifecycle events that end sessions. Every call
//! has an id, a deadline and exactly one resolution. A handle may carry a
//! `CallObserver` that is told the method of every call it sent; what a
//! method means is the observer's business, not the client's.
//!
//! Backpressure: the actor never blocks on a peer. Outgoing lines wait in a
//! local queue until the outgoing channel has room, and events are offered
//! with `try_send`; while the event channel is full, lifecycle events
//! (`Target.*`, `Inspector.*`, the page load events) wait in a bounded overflow queue and all other
//! events are dropped and logged. This keeps inbound replies flowing even
//! when a consumer is slow, which is what prevents a pipe deadlock with the
//! janitor.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::event::{Event, EventParams};
use super::ids::{SessionId, TargetId};
use super::inspector;
use super::message::{Inbound, classify_line, request_line};
use super::pipe::JanitorLine;
use super::target::{AttachedToTarget, DetachedFromTarget, TargetCrashed, TargetDestroyed};

/// Upper bound on calls waiting for a reply. A call beyond it fails at once
/// with `TooManyPending`; 4096 is far above what the Broker issues (one
/// command queue per tab, a few calls each) and small enough to scan.
pub const MAX_PENDING_CALLS: usize = 4096;

/// Capacity of the event channel handed to the consumer. Generous, because
/// CDP emits bursts (network events of a page load, a `setDiscoverTargets`
/// replay of every existing target).
pub const EVENT_CHANNEL_CAPACITY: usize = 4096;

/// Lifecycle events kept while the event channel is full. Beyond this a
/// lifecycle event is dropped too (and logged); a consumer that far behind
/// must resynchronise with `Target.getTargets`.
const MAX_LIFECYCLE_OVERFLOW: usize = 4096;

/// Capacity of the handle-to-actor command channel. Calls are small and the
/// actor never blocks, so this only smooths bursts.
const COMMAND_CHANNEL_CAPACITY: usize = 256;

/// How often (in dropped events) a drop is logged after the first one.
const DROP_LOG_EVERY: u64 = 1000;

/// Errors of one CDP call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CdpError {
    #[error("cdp call {method} timed out")]
    Timeout { method: String },
    #[error("cdp session closed before {method} was answered")]
    SessionClosed { method: String },
    #[error("cdp connection closed")]
    Disconnected,
    #[error("chromium rejected {method}: {message} ({code})")]
    Remote {
        method: String,
        code: i64,
        message: String,
    },
    #[error("too many outstanding cdp calls (limit {limit})")]
    TooManyPending { limit: usize },
    #[error("unexpected result for {method}: {detail}")]
    UnexpectedResult { method: String, detail: String },
}

/// One CDP event as received. `session` is `None` for events of the browser
/// connection itself.
#[derive(Debug, Clone, PartialEq)]
pub struct CdpEvent {
    pub session: Option<SessionId>,
    pub method: String,
    pub params: Value,
}

/// A cheap, cloneable handle to the client actor. Dropping every handle
/// stops the actor, which drops its outgoing sender (the janitor then sees
/// EOF and cleans up).
#[derive(Clone)]
pub struct CdpClient {
    calls: mpsc::Sender<Call>,
    /// Told about every call this handle (and its clones) sends; see [`CdpClient::observed`].
    observer: Option<Arc<dyn CallObserver>>,
}

/// Learns which calls a handle sent, so a caller can tell afterwards what may have reached the
/// browser. The client itself gives methods no meaning; the observer decides which matter.
pub trait CallObserver: Send + Sync {
    /// `method` was handed to the actor: from now on it may reach the browser.
    fn on_sent(&self, method: &str);
    /// The caller announced that a call it is about to send writes to the page (`what` names
    /// the write, e.g. a page script), which the method alone does not show.
    fn on_page_write(&self, what: &str);
}

struct Call {
    session: Option<SessionId>,
    method: String,
    params: Value,
    deadline: Instant,
    reply: oneshot::Sender<Result<Value, CdpError>>,
}

struct Pending {
    session: Option<SessionId>,
    method: String,
    deadline: Instant,
    reply: oneshot::Sender<Result<Value, CdpError>>,
}

impl CdpClient {
    /// Starts the actor on the current tokio runtime. `outgoing` receives one
    /// CDP request per line; `incoming` yields one CDP message per line. The
    /// returned receiver carries events (capacity `EVENT_CHANNEL_CAPACITY`)
    /// and ends when `incoming` ends.
    pub fn spawn(
        outgoing: mpsc::Sender<String>,
        incoming: mpsc::Receiver<String>,
    ) -> (CdpClient, mpsc::Receiver<CdpEvent>) {
        CdpClient::spawn_with_capacity(outgoing, incoming, EVENT_CHANNEL_CAPACITY)
    }

    fn spawn_with_capacity(
        outgoing: mpsc::Sender<String>,
        incoming: mpsc::Receiver<String>,
        event_capacity: usize,
    ) -> (CdpClient, mpsc::Receiver<CdpEvent>) {
        let (calls_tx, calls_rx) = mpsc::channel(COMMAND_CHANNEL_CAPACITY);
        let (events_tx, events_rx) = mpsc::channel(event_capacity);
        let actor = Actor::default();
        tokio::spawn(actor.run(calls_rx, incoming, outgoing, events_tx));
        (
            CdpClient {
                calls: calls_tx,
                observer: None,
            },
            events_rx,
        )
    }

    /// A handle on the same connection whose calls (and those of its clones) are reported to
    /// `observer`, replacing any observer this handle had.
    pub fn observed(&self, observer: Arc<dyn CallObserver>) -> CdpClient {
        CdpClient {
            calls: self.calls.clone(),
            observer: Some(observer),
        }
    }

    /// Tells the observer (if any) that the next call writes to the page; `what` names it.
    pub fn note_page_write(&self, what: &str) {
        if let Some(observer) = &self.observer {
            observer.on_page_write(what);
        }
    }

    /// Sends one CDP command and waits for its reply. `session` addresses a
    /// flattened target session; `None` is the browser connection. The call
    /// resolves exactly once: with the `result`, with Chromium's `error`, or
    /// with a local failure (deadline, session closed, disconnect). This is
    /// the untyped primitive under `execute`; code outside `cdp/` sends typed
    /// commands with `execute` (the tools still calling this directly are
    /// moving over).
    pub async fn call(
        &self,
        session: Option<&SessionId>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CdpError> {
        let (reply, answer) = oneshot::channel();
        let call = Call {
            session: session.cloned(),
            method: method.to_owned(),
            params,
            deadline: Instant::now() + timeout,
            reply,
        };
        self.calls
            .send(call)
            .await
            .map_err(|_| CdpError::Disconnected)?;
        // Queued for the wire: it may reach the browser even if no reply ever comes.
        if let Some(observer) = &self.observer {
            observer.on_sent(method);
        }
        let sent = std::time::Instant::now();
        let outcome = answer.await.map_err(|_| CdpError::Disconnected)?;
        // Per-call latency for profiling (`BROWSER_PILOT_LOG=debug` on the Broker).
        tracing::debug!(method, us = sent.elapsed().as_micros() as u64, "cdp call");
        outcome
    }
}

/// Whether the input goes on after one line.
enum LineOutcome {
    Continue,
    /// The janitor said the browser connection is gone.
    Ended,
}

/// Everything that can happen to the actor, one `select!` away.
enum ActorEvent {
    Call(Call),
    HandlesDropped,
    Line(String),
    IncomingEnded,
    OutgoingReady(mpsc::OwnedPermit<String>),
    OutgoingClosed,
    EventsReady(mpsc::OwnedPermit<CdpEvent>),
    EventsClosed,
    DeadlineReached,
}

impl fmt::Display for ActorEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActorEvent::Call(call) => write!(f, "call {}", call.method),
            ActorEvent::HandlesDropped => f.write_str("handles dropped"),
            ActorEvent::Line(_) => f.write_str("inbound line"),
            ActorEvent::IncomingEnded => f.write_str("incoming ended"),
            ActorEvent::OutgoingReady(_) => f.write_str("outgoing ready"),
            ActorEvent::OutgoingClosed => f.write_str("outgoing closed"),
            ActorEvent::EventsReady(_) => f.write_str("events ready"),
            ActorEvent::EventsClosed => f.write_str("events closed"),
            ActorEvent::DeadlineReached => f.write_str("deadline reached"),
        }
    }
}

#[derive(Default)]
struct Actor {
    next_id: u64,
    pending: HashMap<u64, Pending>,
    deadlines: BTreeSet<(Instant, u64)>,
    unsent: VecDeque<(u64, String)>,
    session_targets: HashMap<SessionId, TargetId>,
    overflow: VecDeque<CdpEvent>,
    events_closed: bool,
    n_dropped_events: u64,
}

impl Actor {
    async fn run(
        mut self,
        mut calls: mpsc::Receiver<Call>,
        mut incoming: mpsc::Receiver<String>,
        outgoing: mpsc::Sender<String>,
        events: mpsc::Sender<CdpEvent>,
    ) {
        loop {
            let next_deadline = self.deadlines.first().map(|(at, _)| *at);
            let event = tokio::select! {
                call = calls.recv() => match call {
                    Some(call) => ActorEvent::Call(call),
                    None => ActorEvent::HandlesDropped,
                },
                line = incoming.recv() => match line {
                    Some(line) => ActorEvent::Line(line),
                    None => ActorEvent::IncomingEnded,
                },
                permit = outgoing.clone().reserve_owned(), if !self.unsent.is_empty() => match permit {
                    Ok(permit) => ActorEvent::OutgoingReady(permit),
                    Err(_) => ActorEvent::OutgoingClosed,
                },
                permit = events.clone().reserve_owned(), if !self.overflow.is_empty() => match permit {
                    Ok(permit) => ActorEvent::EventsReady(permit),
                    Err(_) => ActorEvent::EventsClosed,
                },
                () = sleep_until_opt(next_deadline), if next_deadline.is_some() => ActorEvent::DeadlineReached,
            };
            tracing::trace!(%event, "cdp actor");
            match event {
                ActorEvent::Call(call) => self.on_call(call),
                ActorEvent::HandlesDropped => return,
                ActorEvent::Line(line) => {
                    if let LineOutcome::Ended = self.on_line(&line, &events) {
                        self.on_disconnect(&events);
                        return;
                    }
                }
                ActorEvent::IncomingEnded | ActorEvent::OutgoingClosed => {
                    self.on_disconnect(&events);
                    return;
                }
                ActorEvent::OutgoingReady(permit) => self.on_outgoing_ready(permit),
                ActorEvent::EventsReady(permit) => {
                    if let Some(event) = self.overflow.pop_front() {
                        permit.send(event);
                    }
                }
                ActorEvent::EventsClosed => {
                    self.events_closed = true;
                    self.overflow.clear();
                }
                ActorEvent::DeadlineReached => self.on_deadline(Instant::now()),
            }
        }
    }

    fn on_call(&mut self, call: Call) {
        if self.pending.len() >= MAX_PENDING_CALLS {
            let _ = call.reply.send(Err(CdpError::TooManyPending {
                limit: MAX_PENDING_CALLS,
            }));
            return;
        }
        self.next_id += 1;
        let id = self.next_id;
        let line = request_line(id, call.session.as_ref(), &call.method, &call.params);
        self.deadlines.insert((call.deadline, id));
        self.pending.insert(
            id,
            Pending {
                session: call.session,
                method: call.method,
                deadline: call.deadline,
                reply: call.reply,
            },
        );
        self.unsent.push_back((id, line));
    }

    fn on_outgoing_ready(&mut self, permit: mpsc::OwnedPermit<String>) {
        // Skip lines whose call already resolved (deadline) before sending.
        while let Some((id, line)) = self.unsent.pop_front() {
            if self.pending.contains_key(&id) {
                permit.send(line);
                return;
            }
        }
    }

    fn on_line(&mut self, line: &str, events: &mpsc::Sender<CdpEvent>) -> LineOutcome {
        match classify_line(line) {
            Ok(Inbound::Response { id, outcome, .. }) => self.on_response(id, outcome),
            Ok(Inbound::Event {
                session,
                method,
                params,
            }) => {
                self.on_lifecycle(session.as_ref(), &method, &params);
                self.forward_event(
                    CdpEvent {
                        session,
                        method,
                        params,
                    },
                    events,
                );
            }
            // The janitor's last line: the WebSocket closed, nothing more will come.
            Ok(Inbound::Janitor(Some(JanitorLine::Disconnected))) => return LineOutcome::Ended,
            Ok(Inbound::Janitor(line)) => {
                tracing::warn!(?line, "skipping an unexpected janitor line");
            }
            Err(error) => tracing::warn!(%error, "skipping malformed cdp line"),
        }
        LineOutcome::Continue
    }

    fn on_response(&mut self, id: u64, outcome: Result<Value, super::message::RemoteError>) {
        match self.pending.remove(&id) {
            Some(pending) => {
                self.deadlines.remove(&(pending.deadline, id));
                let result = outcome.map_err(|remote| CdpError::Remote {
                    method: pending.method,
                    code: remote.code,
                    message: remote.message,
                });
                let _ = pending.reply.send(result);
            }
            None => tracing::warn!(id, "dropping cdp response with unknown id"),
        }
    }

    /// Sessions end on detach, crash and target destruction; their pending
    /// calls would otherwise never be answered (docs/cdp.md, "unanswered calls").
    fn on_lifecycle(&mut self, session: Option<&SessionId>, method: &str, params: &Value) {
        match method {
            AttachedToTarget::METHOD => {
                let session_id = params.get("sessionId").and_then(Value::as_str);
                let target_id = params
                    .pointer("/targetInfo/targetId")
                    .and_then(Value::as_str);
                if let (Some(session_id), Some(target_id)) = (session_id, target_id) {
                    self.session_targets
                        .insert(SessionId::new(session_id), TargetId::new(target_id));
                }
            }
            DetachedFromTarget::METHOD => {
                if let Some(session_id) = params.get("sessionId").and_then(Value::as_str) {
                    let session_id = SessionId::new(session_id);
                    self.session_targets.remove(&session_id);
                    self.fail_session(&session_id);
                }
            }
            inspector::TargetCrashed::METHOD | inspector::Detached::METHOD => {
                if let Some(session_id) = session {
                    self.fail_session(session_id);
                }
            }
            TargetCrashed::METHOD | TargetDestroyed::METHOD => {
                if let Some(target_id) = params.get("targetId").and_then(Value::as_str) {
                    let sessions: Vec<SessionId> = self
                        .session_targets
                        .iter()
                        .filter(|(_, target)| target.as_str() == target_id)
                        .map(|(session, _)| session.clone())
                        .collect();
                    for session_id in sessions {
                        self.fail_session(&session_id);
                    }
                }
            }
            _ => {}
        }
    }

    fn fail_session(&mut self, session_id: &SessionId) {
        let ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, pending)| pending.session.as_ref() == Some(session_id))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(pending) = self.pending.remove(&id) {
                self.deadlines.remove(&(pending.deadline, id));
                let _ = pending.reply.send(Err(CdpError::SessionClosed {
                    method: pending.method,
                }));
            }
        }
    }

    fn forward_event(&mut self, event: CdpEvent, events: &mpsc::Sender<CdpEvent>) {
        if self.events_closed {
            return;
        }
        let lifecycle = Event::is_lifecycle(&event.method);
        if !self.overflow.is_empty() {
            // Keep order: once something waits, everything queues behind it.
            self.queue_or_drop(event, lifecycle);
            return;
        }
        match events.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(event)) => self.queue_or_drop(event, lifecycle),
            Err(mpsc::error::TrySendError::Closed(_)) => self.events_closed = true,
        }
    }

    fn queue_or_drop(&mut self, event: CdpEvent, lifecycle: bool) {
        if lifecycle && self.overflow.len() < MAX_LIFECYCLE_OVERFLOW {
            self.overflow.push_back(event);
            return;
        }
        self.n_dropped_events += 1;
        if self.n_dropped_events % DROP_LOG_EVERY == 1 {
            tracing::warn!(
                method = %event.method,
                n_dropped = self.n_dropped_events,
                "cdp event channel full; dropping event"
            );
        }
    }

    fn on_deadline(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(pending) = self.pending.remove(&id) {
                let _ = pending.reply.send(Err(CdpError::Timeout {
                    method: pending.method,
                }));
            }
        }
        let pending = &self.pending;
        self.unsent.retain(|(id, _)| pending.contains_key(id));
    }

    fn on_disconnect(&mut self, events: &mpsc::Sender<CdpEvent>) {
        for (_, pending) in self.pending.drain() {
            let _ = pending.reply.send(Err(CdpError::Disconnected));
        }
        self.deadlines.clear();
        self.unsent.clear();
        // Best effort: the consumer may not be reading; never block here.
        while let Some(event) = self.overflow.pop_front() {
            if events.try_send(event).is_err() {
                break;
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The far side of the two line channels: what the client sent, and a
    /// way to answer. A unit-test peer for the client, not a Chromium mock.
    struct Peer {
        sent: mpsc::Receiver<String>,
        reply: mpsc::Sender<String>,
    }

    impl Peer {
        async fn next_request(&mut self) -> Value {
            let line = self.sent.recv().await.expect("client sent a line");
            serde_json::from_str(&line).expect("client sent json")
        }

        async fn send(&self, message: Value) {
            self.reply.send(message.to_string()).await.unwrap();
        }

        async fn send_raw(&self, line: &str) {
            self.reply.send(line.to_owned()).await.unwrap();
        }
    }

    fn start(event_capacity: usize) -> (CdpClient, mpsc::Receiver<CdpEvent>, Peer) {
        let (out_tx, out_rx) = mpsc::channel(16);
        let (in_tx, in_rx) = mpsc::channel(16);
        let (client, events) = CdpClient::spawn_with_capacity(out_tx, in_rx, event_capacity);
        let peer = Peer {
            sent: out_rx,
            reply: in_tx,
        };
        (client, events, peer)
    }

    const LONG: Duration = Duration::from_secs(30);

    fn session(raw: &str) -> SessionId {
        SessionId::new(raw)
    }

    #[tokio::test]
    async fn replies_are_correlated_by_id() {
        let (client, _events, mut peer) = start(16);
        let a = tokio::spawn({
            let client = client.clone();
            async move { client.call(None, "A.a", json!({"n":1}), LONG).await }
        });
        let first = peer.next_request().await;
        let b = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call(Some(&session("S")), "B.b", json!({}), LONG)
                    .await
            }
        });
        let second = peer.next_request().await;
        assert_eq!(first["method"], "A.a");
        assert_eq!(first["params"], json!({"n":1}));
        assert_eq!(second["sessionId"], "S");
        assert_ne!(first["id"], second["id"]);
        // Answer out of order.
        peer.send(json!({"id": second["id"], "result": {"who":"b"}, "sessionId":"S"}))
            .await;
        peer.send(json!({"id": first["id"], "result": {"who":"a"}}))
            .await;
        assert_eq!(a.await.unwrap(), Ok(json!({"who":"a"})));
        assert_eq!(b.await.unwrap(), Ok(json!({"who":"b"})));
    }

    #[tokio::test]
    async fn remote_error_becomes_cdp_error() {
        let (client, _events, mut peer) = start(16);
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call(None, "Target.closeTarget", json!({}), LONG)
                    .await
            }
        });
        let request = peer.next_request().await;
        peer.send(json!({"id": request["id"], "error": {"code": -32602, "message": "No target with given id found"}}))
            .await;
        assert_eq!(
            call.await.unwrap(),
            Err(CdpError::Remote {
                method: "Target.closeTarget".to_owned(),
                code: -32602,
                message: "No target with given id found".to_owned(),
            })
        );
    }

    #[tokio::test]
    async fn deadline_fails_the_call_and_a_late_reply_is_dropped() {
        let (client, _events, mut peer) = start(16);
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call(
                        None,
                        "Runtime.evaluate",
                        json!({}),
                        Duration::from_millis(20),
                    )
                    .await
            }
        });
        let request = peer.next_request().await;
        assert_eq!(
            call.await.unwrap(),
            Err(CdpError::Timeout {
                method: "Runtime.evaluate".to_owned()
            })
        );
        // The late reply has an id nobody waits for: dropped, nothing breaks.
        peer.send(json!({"id": request["id"], "result": {}})).await;
        let next = tokio::spawn({
            let client = client.clone();
            async move { client.call(None, "X.y", json!({}), LONG).await }
        });
        let request = peer.next_request().await;
        peer.send(json!({"id": request["id"], "result": {"ok":true}}))
            .await;
        assert_eq!(next.await.unwrap(), Ok(json!({"ok":true})));
    }

    #[tokio::test]
    async fn detach_fails_only_that_sessions_calls() {
        let (client, mut events, mut peer) = start(16);
        let on_s = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call(Some(&session("S")), "Page.enable", json!({}), LONG)
                    .await
            }
        });
        peer.next_request().await;
        let on_t = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call(Some(&session("T")), "Page.enable", json!({}), LONG)
                    .await
            }
        });
        let request_t = peer.next_request().await;
        peer.send(
            json!({"method":"Target.detachedFromTarget","params":{"sessionId":"S","targetId":"X"}}),
        )
        .await;
        assert_eq!(
            on_s.await.unwrap(),
            Err(CdpError::SessionClosed {
                method: "Page.enable".to_owned()
            })
        );
        peer.send(json!({"id": request_t["id"], "result": {}, "sessionId":"T"}))
            .await;
        assert_eq!(on_t.await.unwrap(), Ok(json!({})));
        let event = events.recv().await.unwrap();
        assert_eq!(event.method, "Target.detachedFromTarget");
        assert_eq!(event.session, None);
    }

    #[tokio::test]
    async fn renderer_crash_fails_the_sessions_calls() {
        let (client, _events, mut peer) = start(16);
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call(Some(&session("S")), "Runtime.evaluate", json!({}), LONG)
                    .await
            }
        });
        peer.next_request().await;
        peer.send(json!({"method":"Inspector.targetCrashed","params":{},"sessionId":"S"}))
            .await;
        assert_eq!(
            call.await.unwrap(),
            Err(CdpError::SessionClosed {
                method: "Runtime.evaluate".to_owned()
            })
        );
    }

    #[tokio::test]
    async fn target_crash_fails_calls_of_attached_sessions() {
        let (client, _events, mut peer) = start(16);
        peer.send(json!({"method":"Target.attachedToTarget","params":{"sessionId":"S","targetInfo":{"targetId":"T1","type":"page"},"waitingForDebugger":false}}))
            .await;
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call(Some(&session("S")), "Runtime.evaluate", json!({}), LONG)
                    .await
            }
        });
        peer.next_request().await;
        peer.send(json!({"method":"Target.targetCrashed","params":{"targetId":"T1","status":"crashed","errorCode":5}}))
            .await;
        assert_eq!(
            call.await.unwrap(),
            Err(CdpError::SessionClosed {
                method: "Runtime.evaluate".to_owned()
            })
        );
    }

    #[tokio::test]
    async fn end_of_input_fails_every_pending_call() {
        let (client, mut events, mut peer) = start(16);
        let mut calls = Vec::new();
        for n in 0..3 {
            let client = client.clone();
            calls.push(tokio::spawn(async move {
                let session = session(&format!("S{n}"));
                client
                    .call(Some(&session), "Page.enable", json!({}), LONG)
                    .await
            }));
            peer.next_request().await;
        }
        drop(peer.reply);
        for call in calls {
            assert_eq!(call.await.unwrap(), Err(CdpError::Disconnected));
        }
        assert_eq!(events.recv().await, None);
        assert_eq!(
            client.call(None, "X.y", json!({}), LONG).await,
            Err(CdpError::Disconnected)
        );
    }

    #[tokio::test]
    async fn the_janitors_disconnected_line_ends_the_connection() {
        let (client, mut events, mut peer) = start(16);
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call(Some(&session("S")), "Page.enable", json!({}), LONG)
                    .await
            }
        });
        peer.next_request().await;
        peer.send(json!({"method":"Page.loadEventFired","params":{},"sessionId":"S"}))
            .await;
        // An unknown janitor line is skipped, never taken for CDP.
        peer.send(json!({"janitor": "later"})).await;
        peer.send(json!({"janitor": "disconnected"})).await;
        assert_eq!(call.await.unwrap(), Err(CdpError::Disconnected));
        let first = events.recv().await.unwrap();
        assert_eq!(first.method, "Page.loadEventFired");
        assert_eq!(events.recv().await, None);
        // The peer still holds its end open: the line alone ended the connection.
        drop(peer);
    }

    #[tokio::test]
    async fn typed_commands_go_through_execute() {
        let (client, _events, mut peer) = start(16);
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                let command = crate::cdp::target::GetTargetInfo {
                    target_id: TargetId::new("T1"),
                };
                client.execute(None, &command, LONG).await
            }
        });
        let request = peer.next_request().await;
        assert_eq!(request["method"], "Target.getTargetInfo");
        assert_eq!(request["params"], json!({"targetId": "T1"}));
        assert!(request.get("sessionId").is_none());
        peer.send(json!({"id": request["id"], "result": {"targetInfo": {"targetId": "T1", "type": "page", "title": "t", "url": "about:blank", "attached": true, "canAccessOpener": false}}}))
            .await;
        let info = call.await.unwrap().unwrap().target_info;
        assert_eq!(
            (info.target_id, info.title),
            (TargetId::new("T1"), "t".to_owned())
        );
        // A reply without the members the type needs is an unexpected result, not a panic.
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                let enable = crate::cdp::page::Navigate {
                    url: "about:blank".to_owned(),
                };
                client.execute(&session("S"), &enable, LONG).await
            }
        });
        let request = peer.next_request().await;
        assert_eq!(request["sessionId"], "S");
        peer.send(json!({"id": request["id"], "result": {}, "sessionId": "S"}))
            .await;
        assert!(matches!(
            call.await.unwrap(),
            Err(CdpError::UnexpectedResult { method, .. }) if method == "Page.navigate"
        ));
    }

    #[tokio::test]
    async fn unknown_ids_and_malformed_lines_are_skipped() {
        let (client, mut events, mut peer) = start(16);
        let call = tokio::spawn({
            let client = client.clone();
            async move { client.call(None, "A.a", json!({}), LONG).await }
        });
        let request = peer.next_request().await;
        peer.send(json!({"id": 999_999, "result": {"stray":true}}))
            .await;
        peer.send_raw("this is not json").await;
        peer.send_raw("[]").await;
        peer.send_raw(r#"{"params":{}}"#).await;
        peer.send(json!({"method":"Page.loadEventFired","params":{"timestamp":1},"sessionId":"S"}))
            .await;
        peer.send(json!({"id": request["id"], "result": {"mine":true}}))
            .await;
        assert_eq!(call.await.unwrap(), Ok(json!({"mine":true})));
        let event = events.recv().await.unwrap();
        assert_eq!(
            event,
            CdpEvent {
                session: Some(session("S")),
                method: "Page.loadEventFired".to_owned(),
                params: json!({"timestamp":1}),
            }
        );
    }

    #[tokio::test]
    async fn full_event_channel_keeps_lifecycle_events_in_order() {
        let (client, mut events, mut peer) = start(1);
        peer.send(json!({"method":"Network.dataReceived","params":{"n":1}}))
            .await;
        peer.send(json!({"method":"Network.dataReceived","params":{"n":2}}))
            .await;
        peer.send(json!({"method":"Target.targetCreated","params":{"n":3}}))
            .await;
        peer.send(json!({"method":"Network.dataReceived","params":{"n":4}}))
            .await;
        peer.send(json!({"method":"Target.targetDestroyed","params":{"n":5}}))
            .await;
        // A reply after the burst proves the actor processed all of it
        // without blocking on the full event channel.
        let call = tokio::spawn({
            let client = client.clone();
            async move { client.call(None, "A.a", json!({}), LONG).await }
        });
        let request = peer.next_request().await;
        peer.send(json!({"id": request["id"], "result": {}})).await;
        assert_eq!(call.await.unwrap(), Ok(json!({})));
        let mut seen = Vec::new();
        for _ in 0..3 {
            let event = events.recv().await.unwrap();
            seen.push(event.params["n"].as_i64().unwrap());
        }
        assert_eq!(seen, vec![1, 3, 5]);
    }

    #[tokio::test]
    async fn too_many_pending_calls_fail_fast() {
        let (client, _events, mut peer) = start(16);
        let mut calls = Vec::new();
        for _ in 0..MAX_PENDING_CALLS {
            let client = client.clone();
            calls.push(tokio::spawn(async move {
                client.call(None, "A.a", json!({}), LONG).await
            }));
        }
        // Drain what the client sends so its queue empties.
        let drain = tokio::spawn(async move {
            while peer.sent.recv().await.is_some() {}
            peer
        });
        // Probe with short calls until the table is full.
        loop {
            tokio::task::yield_now().await;
            let extra = client
                .call(None, "A.a", json!({}), Duration::from_millis(1))
                .await;
            match extra {
                Err(CdpError::TooManyPending { limit }) => {
                    assert_eq!(limit, MAX_PENDING_CALLS);
                    break;
                }
                Err(CdpError::Timeout { .. }) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
        for call in &calls {
            call.abort();
        }
        drop(drain);
    }
}
