//! Which targets the janitor may close: those created by a proxied
//! `Target.createTarget` (request id remembered, `result.targetId` read from
//! the matching response), popups whose `openerId` is already managed, and
//! targets the Broker hands over with a private `JanitorLine::Adopt` line
//! (tabs it created under an earlier janitor that died, and the launched
//! browser's start tab a Workspace adopted; that line is never forwarded to
//! Chromium). And which browser contexts it may dispose: exactly
//! those made by a proxied `Target.createBrowserContext` (read from its
//! response the same way) and not yet disposed by a proxied
//! `Target.disposeBrowserContext`; never the default context, never one another
//! client made.
//! It also allocates the janitor's own request ids and recognises their
//! responses so they are not forwarded to the Broker. Pure bookkeeping over
//! message text: no I/O, no disk. Method and event names, the private
//! requests and the control line are `cdp`'s types; the prefilters only
//! decide whether a line is worth parsing.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

use crate::cdp::pipe::JanitorLine;
use crate::cdp::target::{
    CloseTarget, CreateBrowserContext, CreateTarget, DisposeBrowserContext, SetDiscoverTargets,
    TARGET_EVENTS_PREFIX, TargetCreated, TargetDestroyed, TargetInfoChanged,
};
use crate::cdp::{BrowserContextId, Command, EventParams, TargetId, request_line};

/// First id of the janitor's own requests. Chromium parses `id` as a 32-bit
/// int, so private ids live just below `i32::MAX`; the Broker's client
/// counts up from 1 and must stay below this base.
pub const PRIVATE_ID_BASE: u64 = 2_000_000_000;

/// Upper bound of tracked managed targets. Far above any real tab count; a
/// target beyond it is not tracked (so never closed), which errs on the
/// side of never touching a tab.
const MAX_MANAGED_TARGETS: usize = 4096;

/// Upper bound of `Target.createTarget` requests awaiting their response.
const MAX_PENDING_CREATES: usize = 1024;

/// Upper bound of tracked browser contexts: one per isolated Workspace, and a Principal has at
/// most 64 active Workspaces. A context beyond it is not tracked (so never disposed by the
/// janitor), erring, like targets, on the side of touching nothing.
const MAX_CONTEXTS: usize = 4096;

/// What the janitor itself asked Chromium.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PrivateCall {
    DiscoverTargets,
    CloseTarget(TargetId),
    DisposeContext(BrowserContextId),
    /// A blank tab put in place of an adopted start tab before the clean-up closes it (a
    /// headed browser exits with its last window); never tracked, so never closed.
    OpenBlank,
}

/// Whether a Broker line goes on to Chromium.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outbound {
    Forward,
    /// A private control line for the janitor itself.
    Control,
    /// The Broker is done with this connection: clean up and close, as at stdin EOF.
    Close,
}

/// Whether an inbound message goes on to the Broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    Forward,
    /// A response to a janitor-private request.
    Private(PrivateCall),
}

#[derive(Default)]
pub(super) struct Tracker {
    managed: HashSet<TargetId>,
    /// The managed targets that are the launched browser's adopted start tab.
    start_tabs: HashSet<TargetId>,
    pending_creates: HashSet<u64>,
    /// Browser contexts made through this janitor and not disposed since.
    contexts: HashSet<BrowserContextId>,
    /// `Target.createBrowserContext` requests awaiting their response.
    pending_contexts: HashSet<u64>,
    private_pending: HashMap<u64, PrivateCall>,
    next_private: u64,
}

#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    result: Option<PeekResult>,
    #[serde(default)]
    params: Option<PeekParams>,
}

#[derive(Deserialize)]
struct PeekResult {
    #[serde(default, rename = "targetId")]
    target_id: Option<TargetId>,
    #[serde(default, rename = "browserContextId")]
    browser_context_id: Option<BrowserContextId>,
}

#[derive(Deserialize)]
struct PeekParams {
    #[serde(default, rename = "targetInfo")]
    target_info: Option<PeekTargetInfo>,
    #[serde(default, rename = "targetId")]
    target_id: Option<TargetId>,
    #[serde(default, rename = "browserContextId")]
    browser_context_id: Option<BrowserContextId>,
}

#[derive(Deserialize)]
struct PeekTargetInfo {
    #[serde(rename = "targetId")]
    target_id: TargetId,
    #[serde(default, rename = "openerId")]
    opener_id: Option<TargetId>,
}

impl Tracker {
    /// Notes a Broker line and says whether it goes on to Chromium. Only
    /// `Target.createTarget`, `Target.closeTarget`, `Target.createBrowserContext`,
    /// `Target.disposeBrowserContext` and the private control line matter;
    /// other lines are not parsed.
    pub(super) fn on_outbound(&mut self, line: &str) -> Outbound {
        if let Some(control) = JanitorLine::from_line(line) {
            match control {
                Ok(JanitorLine::Adopt { target_id, start }) => {
                    if start && self.start_tabs.len() < MAX_MANAGED_TARGETS {
                        self.start_tabs.insert(target_id.clone());
                    }
                    self.adopt(target_id);
                }
                Ok(JanitorLine::Disown { target_id }) => {
                    self.managed.remove(&target_id);
                    self.start_tabs.remove(&target_id);
                }
                Ok(JanitorLine::Close) => return Outbound::Close,
                _ => tracing::warn!("ignoring an unknown janitor control line"),
            }
            return Outbound::Control;
        }
        if ![
            CreateTarget::METHOD,
            CloseTarget::METHOD,
            CreateBrowserContext::METHOD,
            DisposeBrowserContext::METHOD,
        ]
        .iter()
        .any(|method| line.contains(method))
        {
            return Outbound::Forward;
        }
        let Ok(peek) = serde_json::from_str::<Peek>(line) else {
            return Outbound::Forward;
        };
        match (peek.id, peek.method.as_deref()) {
            (Some(id), Some(CreateTarget::METHOD)) => {
                match self.pending_creates.len() < MAX_PENDING_CREATES {
                    true => {
                        self.pending_creates.insert(id);
                    }
                    false => {
                        tracing::warn!(id, "too many pending createTarget calls; not tracking")
                    }
                }
            }
            (Some(id), Some(CreateBrowserContext::METHOD)) => {
                match self.pending_contexts.len() < MAX_PENDING_CREATES {
                    true => {
                        self.pending_contexts.insert(id);
                    }
                    false => tracing::warn!(
                        id,
                        "too many pending createBrowserContext calls; not tracking"
                    ),
                }
            }
            (Some(_), Some(CloseTarget::METHOD)) => {
                // The Broker closes an adopted start tab only after it put a blank tab in its
                // place: the clean-up need not, even before the close is confirmed.
                if let Some(target) = peek.params.and_then(|params| params.target_id) {
                    self.start_tabs.remove(&target);
                }
            }
            (Some(_), Some(DisposeBrowserContext::METHOD)) => {
                // Disposed by the Broker: nothing left to dispose at its death.
                if let Some(context) = peek.params.and_then(|params| params.browser_context_id) {
                    self.contexts.remove(&context);
                }
            }
            _ => {}
        }
        Outbound::Forward
    }

    /// Updates the managed set from one inbound message and says whether it
    /// goes on to the Broker. Messages are parsed only when they can matter.
    pub(super) fn on_inbound(&mut self, text: &str) -> Verdict {
        let awaiting = !self.pending_creates.is_empty()
            || !self.pending_contexts.is_empty()
            || !self.private_pending.is_empty();
        if !awaiting && !text.contains(TARGET_EVENTS_PREFIX) {
            return Verdict::Forward;
        }
        let Ok(peek) = serde_json::from_str::<Peek>(text) else {
            return Verdict::Forward;
        };
        match (peek.id, peek.method.as_deref()) {
            (Some(id), _) => {
                if let Some(call) = self.private_pending.remove(&id) {
                    return Verdict::Private(call);
                }
                if self.pending_creates.remove(&id)
                    && let Some(target_id) = peek.result.as_ref().and_then(|r| r.target_id.clone())
                {
                    self.adopt(target_id);
                }
                if self.pending_contexts.remove(&id)
                    && let Some(context) = peek.result.and_then(|result| result.browser_context_id)
                {
                    match self.contexts.len() < MAX_CONTEXTS {
                        true => {
                            self.contexts.insert(context);
                        }
                        false => tracing::warn!("browser context limit reached; not tracking"),
                    }
                }
            }
            (None, Some(TargetCreated::METHOD | TargetInfoChanged::METHOD)) => {
                if let Some(info) = peek.params.and_then(|params| params.target_info)
                    && let Some(opener) = info.opener_id
                    && self.managed.contains(&opener)
                {
                    self.adopt(info.target_id);
                }
            }
            (None, Some(TargetDestroyed::METHOD)) => {
                if let Some(target_id) = peek.params.and_then(|params| params.target_id) {
                    self.managed.remove(&target_id);
                    self.start_tabs.remove(&target_id);
                }
            }
            _ => {}
        }
        Verdict::Forward
    }

    fn adopt(&mut self, target_id: TargetId) {
        match self.managed.len() < MAX_MANAGED_TARGETS {
            true => {
                self.managed.insert(target_id);
            }
            false => tracing::warn!(%target_id, "managed target limit reached; not tracking"),
        }
    }

    /// Builds a janitor-private request line and remembers its id.
    pub(super) fn private_request(&mut self, call: PrivateCall) -> String {
        let id = PRIVATE_ID_BASE + self.next_private;
        self.next_private += 1;
        let line = match &call {
            PrivateCall::DiscoverTargets => {
                request_line(id, &SetDiscoverTargets { discover: true })
            }
            PrivateCall::CloseTarget(target_id) => request_line(
                id,
                &CloseTarget {
                    target_id: target_id.clone(),
                },
            ),
            PrivateCall::DisposeContext(context) => request_line(
                id,
                &DisposeBrowserContext {
                    browser_context_id: context.clone(),
                },
            ),
            PrivateCall::OpenBlank => request_line(
                id,
                &CreateTarget {
                    url: "about:blank".to_owned(),
                    new_window: false,
                    focus: Some(false),
                    browser_context_id: None,
                },
            ),
        };
        self.private_pending.insert(id, call);
        line
    }

    /// Managed targets, sorted for deterministic cleanup order.
    pub(super) fn managed_targets(&self) -> Vec<TargetId> {
        let mut targets: Vec<TargetId> = self.managed.iter().cloned().collect();
        targets.sort();
        targets
    }

    /// Browser contexts made through this janitor and not disposed, sorted.
    pub(super) fn contexts(&self) -> Vec<BrowserContextId> {
        let mut contexts: Vec<BrowserContextId> = self.contexts.iter().cloned().collect();
        contexts.sort();
        contexts
    }

    /// The private requests of the cleanup at the Broker's death: dispose every context the
    /// Broker made (which closes its pages), then close every managed target (those of the
    /// default context; one already closed with its context answers an error, which is fine).
    /// When an adopted start tab is among them, a blank tab opens first (the browser handles
    /// one connection's commands in order), so the browser keeps a page.
    pub(super) fn cleanup_requests(&mut self) -> Vec<String> {
        let contexts = self.contexts();
        let targets = self.managed_targets();
        let blank = (self
            .start_tabs
            .iter()
            .any(|target| self.managed.contains(target)))
        .then_some(PrivateCall::OpenBlank);
        tracing::debug!(
            n_contexts = contexts.len(),
            n_targets = targets.len(),
            "disposing contexts and closing managed targets"
        );
        let calls = (blank.into_iter())
            .chain(contexts.into_iter().map(PrivateCall::DisposeContext))
            .chain(targets.into_iter().map(PrivateCall::CloseTarget));
        calls.map(|call| self.private_request(call)).collect()
    }

    /// Whether any janitor-private request still waits for its response.
    pub(super) fn has_private_pending(&self) -> bool {
        !self.private_pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn target(raw: &str) -> TargetId {
        TargetId::new(raw)
    }

    #[test]
    fn created_targets_and_their_popups_are_managed() {
        let mut tracker = Tracker::default();
        tracker.on_outbound(
            r#"{"id":7,"method":"Target.createTarget","params":{"url":"about:blank"}}"#,
        );
        // Chromium announces the target before answering.
        let created = r#"{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"M1","type":"page","url":""}}}"#;
        assert_eq!(tracker.on_inbound(created), Verdict::Forward);
        assert!(tracker.managed_targets().is_empty());
        assert_eq!(
            tracker.on_inbound(r#"{"id":7,"result":{"targetId":"M1"}}"#),
            Verdict::Forward
        );
        assert_eq!(tracker.managed_targets(), vec![target("M1")]);

        // A popup of the managed tab, and a popup of that popup.
        tracker.on_inbound(r#"{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"P1","type":"page","openerId":"M1"}}}"#);
        tracker.on_inbound(r#"{"method":"Target.targetInfoChanged","params":{"targetInfo":{"targetId":"P2","type":"page","openerId":"P1"}}}"#);
        // A user tab and a user's popup are never adopted.
        tracker.on_inbound(r#"{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"U1","type":"page"}}}"#);
        tracker.on_inbound(r#"{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"U2","type":"page","openerId":"U1"}}}"#);
        assert_eq!(
            tracker.managed_targets(),
            vec![target("M1"), target("P1"), target("P2")]
        );

        tracker.on_inbound(r#"{"method":"Target.targetDestroyed","params":{"targetId":"P1"}}"#);
        assert_eq!(tracker.managed_targets(), vec![target("M1"), target("P2")]);
    }

    #[test]
    fn the_broker_hands_over_targets_by_a_private_line() {
        let mut tracker = Tracker::default();
        assert_eq!(
            tracker.on_outbound(r#"{"janitor":"adopt","targetId":"R1"}"#),
            Outbound::Control
        );
        assert_eq!(
            tracker.on_outbound(r#"{"janitor":"something-else"}"#),
            Outbound::Control,
            "unknown control lines are not sent to Chromium either"
        );
        assert_eq!(tracker.managed_targets(), vec![target("R1")]);
        // Its popups are managed too.
        tracker.on_inbound(r#"{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"P","type":"page","openerId":"R1"}}}"#);
        assert_eq!(tracker.managed_targets(), vec![target("P"), target("R1")]);
        assert_eq!(
            tracker.on_outbound(r#"{"id":3,"method":"Page.enable","params":{}}"#),
            Outbound::Forward
        );
    }

    #[test]
    fn an_adopted_start_tab_is_replaced_by_an_untracked_blank_tab_before_it_closes() {
        let mut tracker = Tracker::default();
        tracker.on_outbound(r#"{"janitor":"adopt","targetId":"M1"}"#);
        // Without a start tab, the clean-up only closes.
        let plain = tracker.cleanup_requests();
        assert_eq!(plain.len(), 1);
        assert!(plain[0].contains("Target.closeTarget"), "{plain:?}");

        let mut tracker = Tracker::default();
        tracker.on_outbound(r#"{"janitor":"adopt","targetId":"S1","start":true}"#);
        tracker.on_outbound(r#"{"janitor":"adopt","targetId":"M1"}"#);
        let lines = tracker.cleanup_requests();
        assert_eq!(lines.len(), 3, "{lines:?}");
        let first: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(first["method"], "Target.createTarget");
        assert_eq!(first["params"]["url"], "about:blank");
        assert_eq!(first["params"]["focus"], false);
        assert!(lines[1..].iter().all(|l| l.contains("Target.closeTarget")));
        // The blank tab's reply is the janitor's own: it is not forwarded and never managed.
        let id = first["id"].as_u64().unwrap();
        assert_eq!(
            tracker.on_inbound(&format!(r#"{{"id":{id},"result":{{"targetId":"B1"}}}}"#)),
            Verdict::Private(PrivateCall::OpenBlank)
        );
        assert_eq!(tracker.managed_targets(), vec![target("M1"), target("S1")]);

        // The Broker's own replacement blank tab is left open.
        let mut tracker = Tracker::default();
        tracker.on_outbound(
            r#"{"id":4,"method":"Target.createTarget","params":{"url":"about:blank"}}"#,
        );
        tracker.on_inbound(r#"{"id":4,"result":{"targetId":"B2"}}"#);
        assert_eq!(tracker.managed_targets(), vec![target("B2")]);
        assert_eq!(
            tracker.on_outbound(r#"{"janitor":"disown","targetId":"B2"}"#),
            Outbound::Control
        );
        assert!(tracker.managed_targets().is_empty());

        // Nor one the Broker is closing (it put the blank tab in place itself).
        let mut tracker = Tracker::default();
        tracker.on_outbound(r#"{"janitor":"adopt","targetId":"S1","start":true}"#);
        tracker.on_outbound(r#"{"id":5,"method":"Target.closeTarget","params":{"targetId":"S1"}}"#);
        let lines = tracker.cleanup_requests();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("Target.closeTarget"));

        // A start tab that is gone already needs no replacement.
        let mut tracker = Tracker::default();
        tracker.on_outbound(r#"{"janitor":"adopt","targetId":"S1","start":true}"#);
        tracker.on_inbound(r#"{"method":"Target.targetDestroyed","params":{"targetId":"S1"}}"#);
        assert!(tracker.cleanup_requests().is_empty());
    }

    #[test]
    fn failed_or_other_requests_adopt_nothing() {
        let mut tracker = Tracker::default();
        tracker.on_outbound(r#"{"id":1,"method":"Target.createTarget","params":{"url":"x"}}"#);
        tracker.on_inbound(r#"{"id":1,"error":{"code":-32000,"message":"Failed"}}"#);
        // The id is no longer pending: a later reply with it adopts nothing.
        tracker.on_inbound(r#"{"id":1,"result":{"targetId":"X"}}"#);
        // A response to some other request that happens to carry a targetId.
        tracker
            .on_outbound(r#"{"id":2,"method":"Target.attachToTarget","params":{"targetId":"U"}}"#);
        tracker.on_inbound(r#"{"id":2,"result":{"targetId":"U"}}"#);
        // A createTarget sent on a page session still counts by id.
        assert!(tracker.managed_targets().is_empty());
    }

    #[test]
    fn contexts_made_through_the_janitor_are_disposed_and_no_other() {
        let mut tracker = Tracker::default();
        tracker.on_outbound(
            r#"{"id":4,"method":"Target.createBrowserContext","params":{"disposeOnDetach":true}}"#,
        );
        tracker.on_outbound(
            r#"{"id":5,"method":"Target.createBrowserContext","params":{"disposeOnDetach":true}}"#,
        );
        tracker.on_outbound(r#"{"id":6,"method":"Target.createBrowserContext","params":{}}"#);
        tracker.on_inbound(r#"{"id":4,"result":{"browserContextId":"C1"}}"#);
        tracker.on_inbound(r#"{"id":5,"result":{"browserContextId":"C2"}}"#);
        tracker.on_inbound(r#"{"id":6,"error":{"code":-32000,"message":"refused"}}"#);
        // Contexts seen only in events (another client's, the default one) are not the Broker's.
        tracker.on_inbound(r#"{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"U","type":"page","browserContextId":"DEFAULT"}}}"#);
        tracker.on_inbound(r#"{"id":9,"result":{"browserContextId":"OTHER"}}"#);
        assert_eq!(
            tracker.contexts(),
            vec![BrowserContextId::new("C1"), BrowserContextId::new("C2")]
        );
        // The Broker disposed one itself: only the other is left.
        tracker.on_outbound(r#"{"id":7,"method":"Target.disposeBrowserContext","params":{"browserContextId":"C1"}}"#);
        tracker.on_outbound(r#"{"id":8,"method":"Target.createTarget","params":{"url":"about:blank","browserContextId":"C2"}}"#);
        tracker.on_inbound(r#"{"id":8,"result":{"targetId":"T"}}"#);
        let lines = tracker.cleanup_requests();
        let requests: Vec<Value> = lines
            .iter()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0]["method"], "Target.disposeBrowserContext");
        assert_eq!(requests[0]["params"]["browserContextId"], "C2");
        assert_eq!(requests[1]["method"], "Target.closeTarget");
        assert_eq!(requests[1]["params"]["targetId"], "T");
        let reply = format!(r#"{{"id":{},"result":{{}}}}"#, requests[0]["id"]);
        assert_eq!(
            tracker.on_inbound(&reply),
            Verdict::Private(PrivateCall::DisposeContext(BrowserContextId::new("C2")))
        );
    }

    #[test]
    fn private_responses_are_recognised_and_not_forwarded() {
        let mut tracker = Tracker::default();
        let line = tracker.private_request(PrivateCall::CloseTarget(target("M1")));
        let request: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(request["method"], "Target.closeTarget");
        assert_eq!(request["params"]["targetId"], "M1");
        let id = request["id"].as_u64().unwrap();
        assert!(id >= PRIVATE_ID_BASE && id <= i32::MAX as u64);
        assert!(tracker.has_private_pending());
        let reply = format!(r#"{{"id":{id},"result":{{"success":true}}}}"#);
        assert_eq!(
            tracker.on_inbound(&reply),
            Verdict::Private(PrivateCall::CloseTarget(target("M1")))
        );
        assert!(!tracker.has_private_pending());
        // The Broker's own responses go through.
        assert_eq!(
            tracker.on_inbound(r#"{"id":3,"result":{}}"#),
            Verdict::Forward
        );
    }

    #[test]
    fn unparsable_messages_are_forwarded_untouched() {
        let mut tracker = Tracker::default();
        tracker.on_outbound("Target.createTarget but not json");
        assert_eq!(
            tracker.on_inbound("Target.targetCreated garbage"),
            Verdict::Forward
        );
        assert!(tracker.managed_targets().is_empty());
    }
}
