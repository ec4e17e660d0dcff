//! One physical tab's actor: a ticketed FIFO queue in front of the tab's CDP session state.
//!
//! Every command for a tab, from any Workspace, takes a ticket when the Broker accepts it (in
//! input order) and runs only when its number is served, so commands for one tab never
//! interleave and run in acceptance order, while commands for different tabs run concurrently.
//! A Command waiting for its turn is `accepted`; the holder of the turn is `dispatched`. A ticket
//! dropped before its turn (cancelled, deadline passed) is skipped.
//!
//! Beside the queue sits the tab's `FrameBook` (OOPIF sessions, frame selections), behind a
//! plain mutex that the event pump may take without a turn; nothing awaits while holding it.
//! A session attached here gets `Page.enable`, OOPIF auto-attach and the click-truth
//! document-start listener (`register_click_truth`, also used for OOPIF sessions by the pump).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, OwnedMutexGuard};

use super::frames::{FrameBook, FrameSelection};
use crate::cdp::{CdpClient, CdpError, SessionId, TargetId};

#[derive(Default)]
struct Turns {
    next: u64,
    serving: u64,
    abandoned: BTreeSet<u64>,
}

struct TabQueue {
    turns: Mutex<Turns>,
    turn_changed: Notify,
    state: Arc<tokio::sync::Mutex<TabState>>,
    /// Bumped when a Lease hands control back; streaks recorded under an older value are void.
    control_epoch: AtomicU64,
    frames: Mutex<FrameBook>,
}

impl TabQueue {
    fn advance(&self) {
        {
            let mut turns = self.turns.lock().expect("turns lock");
            turns.serving += 1;
            loop {
                let serving = turns.serving;
                if !turns.abandoned.remove(&serving) {
                    break;
                }
                turns.serving += 1;
            }
        }
        self.turn_changed.notify_waiters();
    }

    fn abandon(&self, number: u64) {
        let is_current = {
            let mut turns = self.turns.lock().expect("turns lock");
            match turns.serving == number {
                true => true,
                false => {
                    turns.abandoned.insert(number);
                    false
                }
            }
        };
        if is_current {
            self.advance();
        }
    }
}

/// State only the turn holder may touch.
#[derive(Default)]
pub struct TabState {
    pub session: Option<SessionId>,
    /// The main frame's id of the current session (stable for the target's lifetime).
    pub main_frame: Option<String>,
    /// The newest Observations of this tab (refs resolve only through these), newest last.
    pub observations: std::collections::VecDeque<ObservationRecord>,
    /// Whether the last Observation showed an authentication surface (hint transitions);
    /// `None` after a session or frame change.
    pub auth_surface: Option<bool>,
    /// The no-progress detector's memory (`tools/progress.rs`); cleared with the session.
    pub progress: ProgressMemory,
}

/// What the no-progress detector remembers of the last completed actions on this tab. Only
/// 64-bit hashes: no argument, value or fingerprint input is kept, and none of it is ever sent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProgressMemory {
    /// Who acted where: Workspace, Lease, session, frame and control epoch, hashed. Streaks of
    /// another actor are void.
    pub actor: Option<u64>,
    /// The last fresh Observation's URL, hashed; a change is a navigation.
    pub url: Option<u64>,
    /// Consecutive actions with `mismatch` evidence.
    pub mismatches: u32,
    pub mismatch_reported: bool,
    /// The last action's signature and the page fingerprint after it.
    pub last_action: Option<(u64, u64)>,
    /// Consecutive repetitions of `last_action` on that unchanged fingerprint.
    pub repeats: u32,
    pub repeat_reported: bool,
}

/// How many Observations per tab keep their refs; the page keeps the same number of element
/// maps in the isolated world.
pub const KEPT_OBSERVATIONS: usize = 4;

/// Where an Observation was taken, so a ref is only ever resolved where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservationRecord {
    pub id: String,
    pub workspace_id: String,
    pub frame_id: String,
    /// What each ref was when observed (index = ref - 1): tells actions what to expect.
    pub elements: Vec<ElementSummary>,
}

/// The kind of an observed element, kept for action evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementSummary {
    pub role: String,
    pub tag: String,
    pub input_type: Option<String>,
}

/// A cheap handle to one tab's actor.
#[derive(Clone)]
pub struct TabHandle {
    pub target: TargetId,
    queue: Arc<TabQueue>,
}

impl TabHandle {
    pub fn new(target: TargetId) -> TabHandle {
        TabHandle {
            target,
            queue: Arc::new(TabQueue {
                turns: Mutex::new(Turns::default()),
                turn_changed: Notify::new(),
                state: Arc::new(tokio::sync::Mutex::new(TabState::default())),
                control_epoch: AtomicU64::new(0),
                frames: Mutex::new(FrameBook::default()),
            }),
        }
    }

    /// The tab's frame bookkeeping; usable without a turn (the pump's view of frames).
    pub fn frames(&self) -> std::sync::MutexGuard<'_, FrameBook> {
        self.queue.frames.lock().expect("frames lock")
    }

    /// A place in this tab's queue, taken in acceptance order.
    pub fn ticket(&self) -> TabTicket {
        let number = {
            let mut turns = self.queue.turns.lock().expect("turns lock");
            let number = turns.next;
            turns.next += 1;
            number
        };
        TabTicket {
            handle: self.clone(),
            number,
            used: false,
        }
    }

    /// Takes a ticket and waits for its turn.
    pub async fn acquire(&self) -> TabGuard {
        self.ticket().turn().await
    }
}

/// A place in a tab's queue. Dropping it before its turn gives the place up.
pub struct TabTicket {
    handle: TabHandle,
    number: u64,
    used: bool,
}

impl TabTicket {
    pub fn target(&self) -> &TargetId {
        &self.handle.target
    }

    /// A Lease handed the tab back: transient per-Lease state (no-progress streaks) recorded so
    /// far is void from now on, without waiting for the tab's turn.
    pub fn note_control_released(&self) {
        self.handle
            .queue
            .control_epoch
            .fetch_add(1, Ordering::SeqCst);
    }

    /// Waits until this ticket is served, then holds the tab until the guard drops.
    pub async fn turn(mut self) -> TabGuard {
        let queue = self.handle.queue.clone();
        loop {
            let notified = queue.turn_changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if queue.turns.lock().expect("turns lock").serving == self.number {
                break;
            }
            notified.await;
        }
        self.used = true;
        let state = queue.state.clone().lock_owned().await;
        TabGuard {
            target: self.handle.target.clone(),
            workspace_id: None,
            state,
            queue,
        }
    }
}

impl Drop for TabTicket {
    fn drop(&mut self) {
        if !self.used {
            self.handle.queue.abandon(self.number);
        }
    }
}

/// Exclusive use of a tab for one Command; the next ticket is served when it drops.
pub struct TabGuard {
    pub target: TargetId,
    /// The Workspace whose Command holds the turn: frame-scoped tools run in its selected frame.
    workspace_id: Option<String>,
    state: OwnedMutexGuard<TabState>,
    queue: Arc<TabQueue>,
}

impl Drop for TabGuard {
    fn drop(&mut self) {
        self.queue.advance();
    }
}

/// How long one setup call of a fresh session may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// `Target.setAutoAttach` on a tab (or OOPIF) session: Chromium attaches every out-of-process
/// iframe as a flattened child session (`Target.attachedToTarget` carrying the parent's session)
/// without pausing it, and nothing but iframes (no workers). Field notes §2 "Auto-attach".
pub fn auto_attach_params() -> Value {
    json!({
        "autoAttach": true,
        "waitForDebuggerOnStart": false,
        "flatten": true,
        "filter": [{"type": "iframe"}, {"exclude": true}],
    })
}

/// Registers the click-truth listener (`page::click_truth_document_script`) to run in the
/// Broker's isolated world of every new document of a tab or OOPIF session, before any page
/// script. Without it clicks are still judged, from a listener installed later (see
/// docs/observation.md), so a failure is logged rather than fatal.
pub async fn register_click_truth(client: &CdpClient, session: &SessionId) {
    let params = json!({
        "source": crate::page::click_truth_document_script(),
        "worldName": crate::page::WORLD_NAME,
    });
    if let Err(error) = client
        .call(
            Some(session),
            "Page.addScriptToEvaluateOnNewDocument",
            params,
            SETUP_TIMEOUT,
        )
        .await
    {
        tracing::warn!(%error, "registering the click-truth listener failed");
    }
}

impl TabGuard {
    /// The flattened CDP session of this tab, attaching and enabling the domains the tools need
    /// on first use. `Page` is enabled before anything else can run, so a dialog the page opens
    /// later stays answerable by this session (field notes §0 item 3).
    pub async fn session(&mut self, client: &CdpClient) -> Result<SessionId, CdpError> {
        if let Some(session) = &self.state.session {
            return Ok(session.clone());
        }
        let session = client.attach_to_target(&self.target, SETUP_TIMEOUT).await?;
        client
            .call(Some(&session), "Page.enable", json!({}), SETUP_TIMEOUT)
            .await?;
        register_click_truth(client, &session).await;
        // OOPIFs become child sessions the pump records in the FrameBook. Without it frames
        // still work in-process, so a failure is logged rather than fatal.
        if let Err(error) = client
            .call(
                Some(&session),
                "Target.setAutoAttach",
                auto_attach_params(),
                SETUP_TIMEOUT,
            )
            .await
        {
            tracing::warn!(%error, "auto-attach of out-of-process iframes failed");
        }
        self.state.session = Some(session.clone());
        Ok(session)
    }

    /// Forgets the session (it detached or the target crashed); the next use re-attaches.
    pub fn drop_session(&mut self) {
        self.state.session = None;
        self.state.main_frame = None;
        self.state.observations.clear();
        self.state.auth_surface = None;
        self.state.progress = ProgressMemory::default();
        self.frames().clear_children();
    }

    /// Changes with every `TabTicket::note_control_released` on this tab.
    pub fn control_epoch(&self) -> u64 {
        self.queue.control_epoch.load(Ordering::SeqCst)
    }

    /// Names the Workspace whose Command holds this turn (frame selection is per Workspace).
    pub fn set_workspace(&mut self, workspace_id: &str) {
        self.workspace_id = Some(workspace_id.to_owned());
    }

    pub fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }

    /// The tab's frame bookkeeping.
    pub fn frames(&self) -> std::sync::MutexGuard<'_, FrameBook> {
        self.queue.frames.lock().expect("frames lock")
    }

    /// The turn holder's frame selection (`None`: the main frame), after dropping the
    /// Observations of its frames that detached since the last call.
    pub fn frame_selection(&mut self) -> Option<FrameSelection> {
        let workspace_id = self.workspace_id.clone()?;
        let (selection, gone) = {
            let mut frames = self.frames();
            (
                frames.selection(&workspace_id).cloned(),
                frames.take_invalidations(&workspace_id),
            )
        };
        if !gone.is_empty() {
            self.state.observations.retain(|record| {
                record.workspace_id != workspace_id || !gone.contains(&record.frame_id)
            });
        }
        selection
    }

    pub fn state(&mut self) -> &mut TabState {
        &mut self.state
    }

    /// Evaluates an expression in the page's main world and returns its value.
    pub async fn evaluate(
        &mut self,
        client: &CdpClient,
        expression: &str,
        timeout: Duration,
    ) -> Result<Value, CdpError> {
        let session = self.session(client).await?;
        let result = client
            .call(
                Some(&session),
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true}),
                timeout,
            )
            .await;
        match result {
            Ok(result) => Ok(result
                .get("result")
                .and_then(|r| r.get("value"))
                .cloned()
                .unwrap_or(Value::Null)),
            Err(error @ CdpError::SessionClosed { .. }) => {
                self.drop_session();
                Err(error)
            }
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tickets_are_served_in_order_and_abandoned_ones_skipped() {
        let handle = TabHandle::new(TargetId::new("t"));
        let first = handle.ticket();
        let second = handle.ticket();
        let third = handle.ticket();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, ticket) in [("third", third), ("first", first)] {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let _guard = ticket.turn().await;
                order.lock().unwrap().push(name);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }));
        }
        drop(second);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec!["first", "third"]);
        // The queue keeps working afterwards.
        let _guard = tokio::time::timeout(Duration::from_secs(1), handle.acquire())
            .await
            .expect("served");
    }
}
