//! The tab context of a tool: [`ControlledTab`] owns the controlled-tab prologue (resolve the
//! envelope `targetId`, take control for the Lease, wait for the tab's turn, pass the dispatch
//! gate and hand out the Command's watched CDP handle), the page and frame context scripts run
//! in, observation taking, ref resolution, load waits, input dispatch ([`TabCalls`], the
//! watched handle) and the tab's no-progress memory.
//!
//! `ControlledTab`'s fields are private: a tool reaches the tab's books and the browser only
//! through its verbs (`session`, `page_info`, `target`, `frame_selection`, `execute`, `run`,
//! ...), and the feature files add their own verbs in `impl ControlledTab` blocks built on
//! these (`frames.rs`: the selected frame's context; `pointer.rs`: the frame chain a pointer
//! event is aimed through). Tools never see the browser connection's unwatched client. With
//! `context.rs` this is the only file of `tools/` that imports `session`: the per-tab types a
//! tool names are re-exported here. It decides no evidence and builds no tool result beyond
//! the Observation.

use std::ops::DerefMut;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::actions::INPUT_TIMEOUT;
use super::context::{CallScope, ContextError, TargetScope, ToolEnv, WorkspaceScope};
use super::error::ToolError;
use super::observation::{
    DiffBase, DiffUnavailable, ObservationRequest, fingerprint_fields, shape,
};
use super::progress::{self, Completed, NoProgress};
use crate::cdp::dom::BackendNodeId;
use crate::cdp::input::{
    self, DispatchKeyEvent, DispatchMouseEvent, MouseButton, MouseEventType, Stroke,
};
use crate::cdp::{
    BrowserContextId, CdpClient, CdpError, Command, NavigateOutcome, NavigationHistory, SessionId,
    TargetId, TargetInfo,
};
use crate::events::Emit;
use crate::page::{
    self, DocumentInfo, ExecutionContextId, HintContext, ObservationFormat, Observe, PageScript,
    RefTarget,
};
use crate::protocol::errors::{ErrorCode, Reason, RemediationAction, RpcError};
use crate::protocol::ids::{IdKind, new_id};
use crate::session::activity::ActivityBook;
use crate::session::bounds::{
    MAX_TITLE_CHARS, MAX_URL_CHARS, bound_event_url, bound_title, bound_url,
};
use crate::session::{FrameBook, KEPT_OBSERVATIONS, ObservationRecord, RefLookup, TabGuard};
use crate::session::{background, fetch};
use crate::store::{LeaseId, TargetRef, WorkspaceId};

// The per-tab types a tool names: with `context.rs` (the session-wide ones) this is the only
// file of `tools/` that imports `session`.
pub use crate::session::activity::{ConsoleLevel, MAX_CONSOLE_ENTRIES, MAX_ENTRY_CHARS};
pub use crate::session::{
    Awaited, ElementSummary, FrameSelection, LoadMark, LoadPhase, TabHandle, TabState,
};

/// Timeout of one page-script call.
pub const SCRIPT_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a navigation waits for `complete` before settling for `interactive` (bounded by the
/// deadline too).
const LOAD_WAIT: Duration = Duration::from_secs(15);
/// How long a page may stay short of `interactive` after `Page.navigate` (or a reload/history
/// navigation) was dispatched before `watchdog.navigation_stalled` fires and the Command ends
/// `unknown_outcome` (spec: 30 seconds).
pub const NAVIGATION_STALL: Duration = Duration::from_secs(30);
/// Operator knob overriding `NAVIGATION_STALL`, in milliseconds (see docs/watchdogs.md).
const NAVIGATION_STALL_ENV: &str = "BROWSER_PILOT_NAVIGATION_STALL_MS";
/// Bounds of `BROWSER_PILOT_NAVIGATION_STALL_MS`: under a second a slow but healthy page would
/// be called stalled; beyond ten minutes (the longest Command deadline) it could never fire.
const NAVIGATION_STALL_RANGE_MS: std::ops::RangeInclusive<u64> = 1_000..=600_000;
/// `NAVIGATION_STALL`, or the operator's `BROWSER_PILOT_NAVIGATION_STALL_MS` clamped to
/// `NAVIGATION_STALL_RANGE_MS`; read once per Broker.
fn navigation_stall() -> Duration {
    static STALL: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *STALL.get_or_init(|| {
        crate::knobs::millis_or(
            NAVIGATION_STALL_ENV,
            NAVIGATION_STALL_RANGE_MS,
            NAVIGATION_STALL,
        )
    })
}

/// The session hosting the frame scripts run in (the tab's, or an out-of-process iframe's),
/// that frame, and the Broker's isolated world there.
pub struct PageContext {
    pub session: SessionId,
    pub frame_id: String,
    pub context: ExecutionContextId,
    /// Whether `frame_id` is its session's root frame (the main frame or an OOPIF's): then the
    /// page scripts' viewport coordinates are the session's input coordinates.
    pub session_root: bool,
}

impl PageContext {
    /// Runs a page script in this context's isolated world, within `SCRIPT_TIMEOUT`.
    pub async fn run<S: PageScript>(
        &self,
        calls: &TabCalls,
        script: &S,
    ) -> Result<S::Output, page::PageError> {
        self.run_within(calls, script, SCRIPT_TIMEOUT).await
    }

    /// [`PageContext::run`] within `timeout`: the one way `tools/` runs a page script.
    pub async fn run_within<S: PageScript>(
        &self,
        calls: &TabCalls,
        script: &S,
        timeout: Duration,
    ) -> Result<S::Output, page::PageError> {
        page::run(&calls.client, &self.session, self.context, script, timeout).await
    }
}

/// A tab this Command controls and holds the turn of. Its fields are its own: a tool reaches
/// the tab's books and the browser only through the verbs here (and the `impl ControlledTab`
/// blocks of the feature files, which use these verbs).
pub struct ControlledTab {
    /// The Command's CDP handle: every call through it is seen by the dispatch gate's
    /// mutation record (`DispatchGate::watch`).
    calls: TabCalls,
    /// The tab's turn and its per-tab state.
    guard: TabGuard,
}

impl ControlledTab {
    /// The controlled-tab prologue; see [`controlled_tab`].
    pub async fn acquire(
        env: &ToolEnv,
        scope: &TargetScope<'_>,
    ) -> Result<ControlledTab, ToolError> {
        controlled_tab(env, scope).await
    }

    /// A tab this Command just created and holds (`browser.open`): `calls` is the Command's
    /// watched handle ([`TabCalls::watched`]).
    pub fn new(calls: TabCalls, guard: TabGuard) -> ControlledTab {
        ControlledTab { calls, guard }
    }

    /// The watched CDP handle, for calls that need no per-tab state (a clone may move into a
    /// future of its own).
    pub fn calls(&self) -> &TabCalls {
        &self.calls
    }

    /// The tab's target id.
    pub fn target(&self) -> &TargetId {
        &self.guard.target
    }

    /// The tab's flattened CDP session, attached and set up on first use, each setup call
    /// bounded by what is left of the Command's deadline.
    pub async fn session(&mut self) -> Result<SessionId, ToolError> {
        let left = (self.calls.deadline).saturating_duration_since(tokio::time::Instant::now());
        Ok(self.guard.session_within(&self.calls.client, left).await?)
    }

    /// URL and title of the tab's current history entry, bounded (`TabGuard::page_info`).
    pub async fn page_info(&mut self) -> Result<(String, String), ToolError> {
        Ok(self.guard.page_info(&self.calls.client).await?)
    }

    /// The tab's committed top-level URL, from the browser's history (never the page's
    /// world); empty when it cannot be read.
    pub async fn current_url(&mut self) -> String {
        match self.guard.page_info(&self.calls.client).await {
            Ok((url, _)) => url,
            Err(_) => String::new(),
        }
    }

    /// The turn holder's frame selection (`None`: the main frame), after dropping the
    /// Observations of frames that detached.
    pub fn frame_selection(&mut self) -> Option<FrameSelection> {
        self.guard.frame_selection()
    }

    /// Sends one typed CDP command on `session` through the watched handle.
    pub async fn execute<C: Command>(
        &self,
        session: &SessionId,
        command: &C,
        timeout: Duration,
    ) -> Result<C::Reply, CdpError> {
        self.calls.execute(session, command, timeout).await
    }

    /// The overrides `browser.emulate` set on this tab's session (none set: nothing).
    pub fn emulation(&self, session: &SessionId) -> background::Emulated {
        let books = self.guard.handle();
        let current = books.books().emulation.clone();
        current
            .filter(|e| e.session == *session)
            .unwrap_or_else(|| background::Emulated::none(session.clone()))
    }

    /// Moves the tab's session to the overrides `to` (`background::apply`) and records what is
    /// in force, so the hand-back undoes it; on a refusal midway the record keeps `to` too (an
    /// undo of what was not set is harmless). On a session holding the URL policy's socket
    /// rules the network conditions are sent with them (`fetch::reassert_conditions`), never
    /// alone.
    pub async fn emulate(&mut self, to: background::Emulated) -> Result<(), CdpError> {
        let from = self.emulation(&to.session);
        let handle = self.guard.handle();
        let policy_held = fetch::holds_socket_rules(&handle, &to.session);
        let mut first = to.clone();
        if policy_held {
            first.network = from.network;
        }
        let outcome = background::apply(
            &self.calls.client,
            &to.session,
            &first,
            &from,
            SCRIPT_TIMEOUT,
        )
        .await;
        let (session, network_changed) = (to.session.clone(), to.network != from.network);
        let record = match (outcome.is_ok(), to.any()) {
            (true, false) => None,
            _ => Some(to),
        };
        handle.books().emulation = record;
        if policy_held && network_changed {
            fetch::reassert_conditions(&self.calls.client, &handle, &session).await;
        }
        outcome
    }

    /// Where the tab's load history stands now; take it before dispatching a navigation.
    pub fn load_mark(&self) -> LoadMark {
        self.guard.load_mark()
    }

    /// A handle to the tab's books that outlives the turn (late watches, load waits).
    pub fn handle(&self) -> TabHandle {
        self.guard.handle()
    }

    /// This Command's place in the tab's queue.
    pub fn turn_number(&self) -> u64 {
        self.guard.turn_number()
    }

    /// Changes with every release of control of the tab.
    pub fn control_epoch(&self) -> u64 {
        self.guard.control_epoch()
    }

    /// The tab's frame bookkeeping, borrowed under the tab's lock (let it go soon: the tab's
    /// other books wait for it).
    pub fn frames(&self) -> impl DerefMut<Target = FrameBook> + '_ {
        self.guard.frames()
    }

    /// The tab's console entries and requests in flight, borrowed under the tab's lock.
    pub fn activity(&self) -> impl DerefMut<Target = ActivityBook> + '_ {
        self.guard.activity()
    }

    /// How many file choosers the tab has opened (intercepted) so far.
    pub fn file_choosers_opened(&self) -> u64 {
        self.guard.file_choosers().opened()
    }

    /// The session and node of the tab's latest intercepted file chooser's input.
    pub fn last_file_chooser(&self) -> Option<(SessionId, BackendNodeId)> {
        self.guard.file_choosers().last()
    }

    /// Waits until the awaited document reached `wanted`, or `until` passed.
    pub async fn wait_for_phase(
        &self,
        awaited: &Awaited,
        wanted: LoadPhase,
        until: tokio::time::Instant,
    ) -> Option<LoadPhase> {
        self.guard.wait_for_phase(awaited, wanted, until).await
    }

    /// Waits until no navigation is under way and the document has loaded, or `until` passed.
    pub async fn wait_until_settled(&self, until: tokio::time::Instant) -> bool {
        self.guard.wait_until_settled(until).await
    }

    /// Whether the tab's network is counted and no request of it started or ended since `since`.
    pub fn network_quiet_since(&self, since: tokio::time::Instant) -> bool {
        let network = self.guard.activity().network();
        network.counting && network.in_flight == 0 && network.quiet_since <= since
    }

    /// Whether `frame_id` is the tab's main frame.
    pub fn is_main_frame(&mut self, frame_id: &str) -> bool {
        self.guard.state().main_frame.as_deref() == Some(frame_id)
    }

    /// The tab's main frame id, read once per document.
    pub async fn main_frame(
        &mut self,
        session: &SessionId,
        timeout: Duration,
    ) -> Result<String, ToolError> {
        if let Some(frame_id) = self.guard.state().main_frame.clone() {
            return Ok(frame_id);
        }
        let frame_id = page::main_frame_id(&self.calls.client, session, timeout).await?;
        self.guard.state().main_frame = Some(frame_id.clone());
        Ok(frame_id)
    }

    /// The frame a recorded Observation of this Workspace was taken in, if the tab keeps it.
    pub fn observation_frame(
        &mut self,
        observation_id: &str,
        workspace_id: &str,
    ) -> Option<String> {
        self.guard
            .state()
            .observations
            .iter()
            .find(|o| o.id == observation_id && o.workspace_id == workspace_id)
            .map(|o| o.frame_id.clone())
    }

    /// Whether the tab's last Observation was small enough that taking the next one
    /// speculatively costs little (none yet: the first is taken when needed).
    pub fn cheap_to_observe(&mut self) -> bool {
        self.guard
            .state()
            .observations
            .back()
            .is_some_and(|record| record.view.len() <= SPECULATIVE_OBSERVATION_ELEMENTS)
    }

    /// Where frame-scoped tools run: the selected frame of the Workspace holding the turn.
    pub async fn page_context(&mut self) -> Result<PageContext, ToolError> {
        let session = self.session().await?;
        if let Some(selection) = self.guard.frame_selection() {
            return self.frame_context(session, selection).await;
        }
        let frame_id = self.main_frame(&session, SCRIPT_TIMEOUT).await?;
        let (client, guard) = (&self.calls.client, &mut self.guard);
        // The world lives as long as its document: reused until the tab's load history moves (a
        // new document, or a same-document navigation, which merely costs one more creation), and
        // never while a navigation is under way (its commit ends the document). A call that still
        // finds the context gone never ran (`PageError::context_gone`); see `forget_main_world`.
        let mark = guard.load_mark();
        let usable = mark.has_document() && !guard.navigation_under_way();
        let cached = guard
            .state()
            .main_world
            .as_ref()
            .filter(|(at, _)| *at == mark && usable)
            .map(|(_, context)| *context);
        let context = match cached {
            Some(context) => context,
            None => {
                let context =
                    page::create_isolated_world(client, &session, &frame_id, SCRIPT_TIMEOUT)
                        .await?;
                guard.state().main_world = Some((mark, context));
                context
            }
        };
        Ok(PageContext {
            session,
            frame_id,
            context,
            session_root: true,
        })
    }

    /// Runs one page script in `ctx`.
    pub async fn run<S: PageScript>(
        &self,
        ctx: &PageContext,
        script: &S,
    ) -> Result<S::Output, ToolError> {
        Ok(ctx.run(&self.calls, script).await?)
    }

    /// Takes and records a fresh Observation; see [`ControlledTab::take_observation_reading`].
    pub async fn observe(
        &mut self,
        scope: &TargetScope<'_>,
        request: &ObservationRequest,
    ) -> Result<Map<String, Value>, ToolError> {
        let (taken, _) = self
            .take_observation_reading(scope, request, false, Along::default())
            .await?;
        Ok(taken.result)
    }

    /// [`ControlledTab::observe`] plus the no-progress fingerprint of the full page state.
    pub async fn observe_with_fingerprint(
        &mut self,
        scope: &TargetScope<'_>,
        request: &ObservationRequest,
    ) -> Result<TakenObservation, ToolError> {
        let (taken, _) = self
            .take_observation_reading(scope, request, true, Along::default())
            .await?;
        Ok(taken)
    }

    /// URL and title of the document the scripts ran in, bounded (`session::bounds`). The main
    /// frame's come from the browser's navigation history; a selected subframe's are read in
    /// the Broker's isolated world of that frame, where the page's own overrides of
    /// `document.title` or `JSON.stringify` do not exist. Never evaluated in the page's main
    /// world.
    pub async fn url_and_title(
        &mut self,
        ctx: &PageContext,
    ) -> Result<(String, String), ToolError> {
        url_and_title(&self.calls, &mut self.guard, ctx).await
    }

    /// Resolves a ref of this Workspace's Observations (the function of the same name below).
    pub fn resolve_ref(
        &mut self,
        scope: &TargetScope<'_>,
        frame_id: &str,
        params: &RefParams,
    ) -> Result<(RefTarget, ElementSummary), ToolError> {
        resolve_ref(&mut self.guard, scope, frame_id, params)
    }

    /// Waits until the awaited document has loaded (the function of the same name below).
    pub async fn wait_for_load(
        &mut self,
        env: &ToolEnv,
        scope: &WorkspaceScope<'_>,
        opaque: &str,
        awaited: &Awaited,
        dispatched: tokio::time::Instant,
    ) -> Result<PageState, ToolError> {
        wait_for_load(
            env,
            &self.calls.client,
            &mut self.guard,
            scope,
            opaque,
            awaited,
            dispatched,
        )
        .await
    }

    /// A navigation ends every no-progress streak on the tab.
    pub fn begin_navigation(&mut self) {
        self.guard.state().progress = Default::default();
    }

    /// A frame selection changed: the next Observation starts without an auth baseline.
    pub fn forget_auth_surface(&mut self) {
        self.guard.state().auth_surface = None;
    }

    /// Feeds one completed action to the tab's no-progress detector.
    pub fn record_progress(&mut self, completed: Completed<'_>) -> Option<NoProgress> {
        progress::record(self.guard.state(), completed)
    }

    /// The tab session's id, which keys the no-progress actor.
    pub fn session_key(&mut self) -> String {
        self.guard
            .state()
            .session
            .as_ref()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default()
    }

    /// The tab's input handle, for a dispatch that must move into a future of its own (the
    /// dialog-aware final dispatch); see [`TabCalls`].
    pub fn input(&self) -> TabCalls {
        self.calls.clone()
    }

    /// One mouse event on `session`; see [`TabCalls::mouse`].
    pub async fn mouse(&self, session: &SessionId, event: MouseStep) -> Result<(), CdpError> {
        self.calls.mouse(session, event).await
    }
}

/// One mouse event at a point in the dispatch session's viewport.
#[derive(Debug, Clone, Copy)]
pub struct MouseStep {
    pub kind: MouseEventType,
    pub x: f64,
    pub y: f64,
    pub button: MouseButton,
    pub click_count: u64,
}

/// The Command's watched CDP handle: every call through it is seen by the never-replay record
/// (`DispatchGate::watch`). Tools send CDP commands, page scripts and input only through this
/// (or the `ControlledTab` verbs of the same names); the input encodings are `cdp/input.rs`'s.
/// Cheap to clone, so a dispatch can move into a future of its own.
#[derive(Clone)]
pub struct TabCalls {
    client: CdpClient,
    /// The Command's deadline: what bounds the set-up of a tab's session.
    deadline: tokio::time::Instant,
    /// The connection is to a remote browser (`browser:remote:*`): a file of the Broker's
    /// machine is not on the browser's (`browser.upload` sends bytes instead of a path).
    remote: bool,
}

/// Whether a connected browser id names a remote browser of `remote-browsers.toml`.
fn is_remote(browser_id: &str) -> bool {
    browser_id.starts_with(crate::browser::REMOTE_ID_PREFIX)
}

impl TabCalls {
    /// Whether the browser runs on another machine (a remote browser): files of this machine
    /// are not on its disk, and its downloads land on its own.
    pub fn remote_browser(&self) -> bool {
        self.remote
    }

    /// The watched handle of a Command (its `gate`) on the live browser connection
    /// (`Disconnected` when there is none): the one way a tool without a controlled tab sends
    /// CDP calls.
    pub fn watched(env: &ToolEnv, call: &CallScope) -> Result<TabCalls, ToolError> {
        let workspace_id = call.ids.workspace_id().ok_or(ToolError::Disconnected)?;
        let live = (env.browser.live_of(workspace_id)).ok_or(ToolError::Disconnected)?;
        Ok(TabCalls {
            client: call.gate.watch(&live.client),
            deadline: call.deadline,
            remote: is_remote(&live.browser_id),
        })
    }

    /// Sends one typed CDP command on `session` (or the browser connection).
    pub async fn execute<'s, C: Command>(
        &self,
        session: impl Into<Option<&'s SessionId>>,
        command: &C,
        timeout: Duration,
    ) -> Result<C::Reply, CdpError> {
        self.client.execute(session, command, timeout).await
    }

    /// The Broker's isolated world in `frame_id` (`page::create_isolated_world`).
    pub async fn create_isolated_world(
        &self,
        session: &SessionId,
        frame_id: &str,
        timeout: Duration,
    ) -> Result<ExecutionContextId, page::PageError> {
        page::create_isolated_world(&self.client, session, frame_id, timeout).await
    }

    /// The browser's targets (`Target.getTargets`).
    pub async fn get_targets(&self, timeout: Duration) -> Result<Vec<TargetInfo>, CdpError> {
        self.client.get_targets(timeout).await
    }

    /// Navigates the tab on `session` (`Page.navigate`).
    pub async fn navigate(
        &self,
        session: &SessionId,
        url: &str,
        timeout: Duration,
    ) -> Result<NavigateOutcome, CdpError> {
        self.client.navigate(session, url, timeout).await
    }

    /// The tab's navigation history (`Page.getNavigationHistory`).
    pub async fn navigation_history(
        &self,
        session: &SessionId,
        timeout: Duration,
    ) -> Result<NavigationHistory, CdpError> {
        self.client.navigation_history(session, timeout).await
    }

    /// Goes to an entry of the tab's history (`Page.navigateToHistoryEntry`).
    pub async fn navigate_to_history_entry(
        &self,
        session: &SessionId,
        entry_id: i64,
        timeout: Duration,
    ) -> Result<(), CdpError> {
        self.client
            .navigate_to_history_entry(session, entry_id, timeout)
            .await
    }

    /// Opens a tab in a window of its own, shown without being activated, in `context` (an
    /// isolated Workspace's own) or the profile's default context.
    pub async fn create_background_window(
        &self,
        url: &str,
        context: Option<&BrowserContextId>,
        timeout: Duration,
    ) -> Result<TargetId, CdpError> {
        (self.client)
            .create_background_window(url, context, timeout)
            .await
    }

    /// The isolated Workspace's own browser context, made on this handle at its first managed
    /// navigation (`session::contexts`).
    pub async fn isolated_context(
        &self,
        env: &ToolEnv,
        workspace_id: &WorkspaceId,
        timeout: Duration,
    ) -> Result<BrowserContextId, ContextError> {
        (env.browser)
            .isolated_context(workspace_id, &self.client, timeout)
            .await
    }

    /// Reloads the tab on `session` (`Page.reload`).
    pub async fn reload(&self, session: &SessionId, timeout: Duration) -> Result<(), CdpError> {
        self.client.reload(session, timeout).await
    }

    /// Closes `target` (`Target.closeTarget`).
    pub async fn close_target(
        &self,
        target: &TargetId,
        timeout: Duration,
    ) -> Result<bool, CdpError> {
        self.client.close_target(target, timeout).await
    }

    /// Evaluates in the page's main world (`browser.eval`; `page::eval_in_main_world`).
    pub async fn eval_in_main_world(
        &self,
        session: &SessionId,
        request: &page::EvalRequest,
        timeout: Duration,
    ) -> Result<page::EvalOutcome, page::PageError> {
        page::eval_in_main_world(&self.client, session, request, timeout).await
    }

    /// The file input `PickFileInput` remembered in `ctx` (`page::picked_file_input`).
    pub async fn picked_file_input(
        &self,
        ctx: &PageContext,
    ) -> Result<Option<page::RemoteObjectId>, page::PageError> {
        page::picked_file_input(&self.client, &ctx.session, ctx.context, SCRIPT_TIMEOUT).await
    }

    /// The index of `object_id` among its document's file inputs (`page::file_input_index`).
    pub async fn file_input_index(
        &self,
        session: &SessionId,
        object_id: &str,
    ) -> Result<Option<u32>, page::PageError> {
        page::file_input_index(&self.client, session, object_id, SCRIPT_TIMEOUT).await
    }

    /// Draws annotation boxes onto an image in `context` (`page::draw_annotations`).
    pub async fn draw_annotations(
        &self,
        session: &SessionId,
        context: ExecutionContextId,
        image: String,
        boxes: &[page::ImageBox],
        style: (&str, Option<u64>, f64),
        timeout: Duration,
    ) -> Result<String, page::PageError> {
        page::draw_annotations(&self.client, session, context, image, boxes, style, timeout).await
    }

    /// Where a point of a frame lands inside it (`page::frame_point_hit`).
    pub async fn frame_point_hit(
        &self,
        session: &SessionId,
        object_id: &str,
        point: (f64, f64),
        timeout: Duration,
    ) -> Result<Option<page::FrameHit>, page::PageError> {
        page::frame_point_hit(&self.client, session, object_id, point, timeout).await
    }

    /// Runs `work` (a screenshot) while the tab keeps rendering (`session::background`).
    pub async fn rendering<T>(
        &self,
        session: &SessionId,
        timeout: Duration,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        background::rendering(&self.client, session, timeout, work).await
    }

    /// Runs `work` as it is, keeping the tab rendering only after `patience`
    /// (`session::background::when_slow`).
    pub async fn when_slow<T>(
        &self,
        session: &SessionId,
        timeout: Duration,
        patience: Duration,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        background::when_slow(&self.client, session, timeout, patience, work).await
    }

    pub async fn mouse(&self, session: &SessionId, step: MouseStep) -> Result<(), CdpError> {
        let event =
            DispatchMouseEvent::step(step.kind, step.x, step.y, step.button, step.click_count);
        self.client
            .execute(session, &event, INPUT_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// A mouse move with `button` held down (one step of a drag).
    pub async fn held_move(
        &self,
        session: &SessionId,
        (x, y): (f64, f64),
        button: MouseButton,
    ) -> Result<(), CdpError> {
        let event = DispatchMouseEvent::held_move(x, y, button);
        self.client
            .execute(session, &event, INPUT_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// Sends `events` in order as one step (`cdp::input::send_key_events`).
    pub async fn keys(
        &self,
        session: &SessionId,
        events: Vec<DispatchKeyEvent>,
    ) -> Result<(), CdpError> {
        input::send_key_events(&self.client, session, events, INPUT_TIMEOUT).await
    }

    /// Several strokes' key events sent at once, in order; see `cdp::input::send_key_strokes`.
    pub async fn strokes(
        &self,
        session: &SessionId,
        strokes: Vec<Vec<DispatchKeyEvent>>,
        answered: &std::sync::atomic::AtomicU64,
    ) -> Result<(), CdpError> {
        input::send_key_strokes(&self.client, session, strokes, INPUT_TIMEOUT, answered).await
    }

    /// One typing stroke: a key press, or an editing insertion.
    pub async fn stroke(&self, session: &SessionId, stroke: &Stroke) -> Result<(), CdpError> {
        input::send_stroke(&self.client, session, stroke, INPUT_TIMEOUT).await
    }
}

/// Resolves the envelope `targetId`, takes control for this Lease, waits for the tab's turn,
/// and passes the dispatch gate. Everything before the gate is the `accepted` phase.
async fn controlled_tab(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
) -> Result<ControlledTab, ToolError> {
    let live = (env.browser.live_of(scope.workspace_id)).ok_or(ToolError::Disconnected)?;
    let (workspace_id, lease_id, opaque) = (scope.workspace_id, scope.lease_id, scope.target_id);
    let (target, handle) = env.browser.control(workspace_id, lease_id, opaque).await?;
    env.browser.apply_network_rules(&target).await;
    let ticket = scope
        .ticket
        .lock()
        .expect("ticket lock")
        .take()
        .filter(|t| *t.target() == target);
    let mut guard = ticket.unwrap_or_else(|| handle.ticket()).turn().await;
    guard.set_workspace(workspace_id);
    scope.gate.pass().await?;
    // A tab released earlier captures downloads again (session::downloads; not a mutation).
    let browser = &env.browser;
    crate::session::download_capture_on_control(
        browser,
        &live.client,
        &mut guard,
        workspace_id,
        lease_id,
    )
    .await;
    let client = scope.gate.watch(&live.client);
    guard.ensure_file_chooser_interception(&client).await;
    Ok(ControlledTab {
        calls: TabCalls {
            client,
            deadline: scope.deadline,
            remote: is_remote(&live.browser_id),
        },
        guard,
    })
}

/// Switches file-chooser interception off for a tab whose control is handed back
/// (`browser.tabs.release`): the user gets the native chooser again.
pub async fn release_file_choosers(
    env: &ToolEnv,
    workspace_id: &WorkspaceId,
    lease_id: &LeaseId,
    opaque: &TargetRef,
) {
    crate::session::release_file_chooser_interception(&env.browser, workspace_id, lease_id, opaque)
        .await;
}

pub struct PageState {
    pub url: String,
    pub title: String,
    pub load_state: &'static str,
}

/// [`ControlledTab::url_and_title`] on the tab's parts, so it can run beside a page call.
async fn url_and_title(
    calls: &TabCalls,
    guard: &mut TabGuard,
    page_context: &PageContext,
) -> Result<(String, String), ToolError> {
    if guard.state().main_frame.as_deref() == Some(page_context.frame_id.as_str()) {
        return Ok(guard.page_info(&calls.client).await?);
    }
    // One character past each bound, so a cut value gets its marker.
    let script = DocumentInfo {
        max_url_chars: MAX_URL_CHARS,
        max_title_chars: MAX_TITLE_CHARS,
    };
    let info = page_context.run(calls, &script).await?;
    Ok((bound_url(&info.url), bound_title(&info.title)))
}

pub(super) fn base_result(
    scope: &TargetScope<'_>,
    url: String,
    title: String,
) -> Map<String, Value> {
    let mut result = Map::new();
    result.insert("workspaceId".into(), json!(scope.workspace_id));
    result.insert("leaseId".into(), json!(scope.lease_id));
    result.insert("targetId".into(), json!(scope.target_id));
    result.insert("url".into(), json!(url));
    result.insert("title".into(), json!(title));
    result
}

/// A fresh Observation's result and, when asked for, the no-progress fingerprint of the full
/// page state (whatever diff, form or budget shaped the result).
/// Observations of at most this many elements are cheap enough to take speculatively, with an
/// action's last reads, and throw away when the action turns out to need a settle window.
const SPECULATIVE_OBSERVATION_ELEMENTS: usize = 2_000;

/// Elements of replaced Observation records from which the freed heap is handed back to the OS.
const FREED_ELEMENTS_TO_TRIM: usize = 2_000;

pub struct TakenObservation {
    pub result: Map<String, Value>,
    pub fingerprint: Option<(u64, u64)>,
}

/// The Observation script's answer and the document's URL and title. They come from different
/// places (the page's isolated world, the browser's history), so both are asked at once.
async fn observe_in(
    calls: &TabCalls,
    guard: &mut TabGuard,
    ctx: &PageContext,
    script: &Observe,
) -> (
    Result<<Observe as PageScript>::Output, page::PageError>,
    Result<(String, String), ToolError>,
) {
    let world = (ctx.context, ctx.session_root);
    let observe = page::run_observe(&calls.client, &ctx.session, world, script, SCRIPT_TIMEOUT);
    tokio::join!(observe, url_and_title(calls, guard, ctx))
}

/// What an action reads in its closing Observation's own page call, before the walk and in
/// this order (each as its own script would, disarming what it reads): the keystroke guard's
/// record (`page::KeyRecord`), the click-truth verdict (`page::ClickVerdict`) and its element's
/// state (`page::StateSnapshot`). One page call instead of one each.
#[derive(Default)]
pub struct Along<'a> {
    pub key_record: bool,
    pub click_verdict: Option<page::ClickVerdict>,
    pub state_of: Option<&'a page::RefTarget>,
}

/// What [`Along`] read: `None` where it was not asked for or the answer did not decode (the
/// state also when the page refused the ref: stale, another document).
#[derive(Debug)]
pub struct AlongRead {
    pub keys: Option<page::KeysRecorded>,
    pub click: Option<page::ClickRecord>,
    pub state: Option<page::ElementState>,
}

impl ControlledTab {
    /// Takes a fresh Observation of the tab (the caller holds its turn) and records it so its
    /// refs resolve later, reading what `along` asks for in the same page call, first. Used by
    /// `browser.observe` and by every action that returns a fresh Observation. With
    /// `request.since`, the base must be this Workspace's Observation of the same frame and
    /// document (`tools/observation.rs` shapes the diff); otherwise the result is a full
    /// Observation with `diffUnavailable`.
    pub async fn take_observation_reading(
        &mut self,
        scope: &TargetScope<'_>,
        request: &ObservationRequest,
        with_fingerprint: bool,
        along: Along<'_>,
    ) -> Result<(TakenObservation, AlongRead), ToolError> {
        take_observation_reading(self, scope, request, with_fingerprint, along).await
    }

    /// Forgets the main frame's cached isolated world (its document went away under a call).
    fn forget_main_world(&mut self) {
        self.guard.state().main_world = None;
    }
}

async fn take_observation_reading(
    tab: &mut ControlledTab,
    scope: &TargetScope<'_>,
    request: &ObservationRequest,
    with_fingerprint: bool,
    along: Along<'_>,
) -> Result<(TakenObservation, AlongRead), ToolError> {
    let mut page_context = tab.page_context().await?;
    let observation_id = new_id(IdKind::Observation);
    let mut unavailable = None;
    let mut base = None;
    if let Some(since) = &request.since {
        let found = tab
            .guard
            .state()
            .observations
            .iter()
            .find(|o| o.id == *since && o.workspace_id == *scope.workspace_id)
            .cloned();
        match found {
            None => unavailable = Some(DiffUnavailable::Expired),
            Some(record) if record.frame_id != page_context.frame_id => {
                unavailable = Some(DiffUnavailable::OtherFrame)
            }
            Some(record) => base = Some(record),
        }
    }
    let script = Observe {
        key: observation_id.clone(),
        options: request.options,
        base_key: base.as_ref().map(|record| record.id.clone()),
        compact: request.format == ObservationFormat::Compact,
        key_record: along.key_record,
        click_verdict: along.click_verdict.clone(),
        state_of: along.state_of.cloned(),
    };
    // The elements and the URL and title come from different places (the page's isolated
    // world, the browser's history): both are asked at once.
    let (mut observation, mut place) =
        observe_in(&tab.calls, &mut tab.guard, &page_context, &script).await;
    // The document went away between the world lookup and the call (a navigation committing):
    // nothing ran; observe the document that is there now.
    if observation
        .as_ref()
        .is_err_and(page::PageError::context_gone)
    {
        tab.forget_main_world();
        page_context = tab.page_context().await?;
        (observation, place) = observe_in(&tab.calls, &mut tab.guard, &page_context, &script).await;
    }
    let mut observation = observation?;
    let (url, title) = place?;
    // What rode along, as the page answered it: a refusal (stale ref, another document) or an
    // undecodable answer reads as nothing.
    let read = AlongRead {
        keys: observation
            .keys
            .take()
            .and_then(|answer| page::KeyRecord.parse(&answer.to_string()).ok()),
        click: match (observation.click.take(), &along.click_verdict) {
            (Some(answer), Some(verdict)) => verdict.parse(&answer.to_string()).ok(),
            _ => None,
        },
        state: match (observation.state.take(), along.state_of) {
            (Some(answer), Some(target)) => page::StateSnapshot(target.clone())
                .parse(&answer.to_string())
                .ok(),
            _ => None,
        },
    };
    if let Some(record) = &base {
        if record.document_key != observation.document_key {
            unavailable = Some(DiffUnavailable::OtherDocument);
            base = None;
        } else if !observation.base_merged {
            unavailable = Some(DiffUnavailable::Expired);
            base = None;
        }
    }
    // The network's `access_blocked` (main document 403/429) applies to the main frame's
    // Observation; a main frame's id is its tab's target id.
    let main_document_status = match page_context.frame_id == tab.guard.target.as_str() {
        true => tab.guard.network().blocked_main_status(),
        false => None,
    };
    let state = tab.guard.state();
    let hint_context = HintContext {
        main_document_status,
        previous_auth_surface: state.auth_surface,
    };
    let hints = page::observation_hints(&observation, &hint_context);
    state.auth_surface = Some(page::has_auth_surface(&observation));
    // A plain Observation carries the full page state itself; a shaped one is fingerprinted
    // from the walk (the same fields, so the two agree on an unchanged page).
    let plain = request.since.is_none()
        && request.max_tokens.is_none()
        && request.format == ObservationFormat::Json;
    let full_state = (with_fingerprint && !plain).then(|| fingerprint_fields(&url, &observation));
    let mut result = base_result(scope, url, title);
    result.insert("observationId".into(), json!(observation_id));
    let head_bytes = serde_json::to_vec(&result)?.len();
    let diff_base = base.as_ref().map(|record| DiffBase {
        id: &record.id,
        elements: &record.elements,
        view: &record.view,
    });
    let shaped = shape(
        &observation,
        hints,
        diff_base,
        unavailable,
        request,
        head_bytes,
    )?;
    result.extend(shaped.fields);
    let fingerprint = with_fingerprint.then(|| match &full_state {
        Some(fields) => progress::fingerprint(fields),
        None => progress::fingerprint(&result),
    });
    let view = shaped.view.unwrap_or(observation.elements);
    // Kept Observations of this frame's earlier documents can only answer that their refs are
    // stale: their elements go now, not once four newer ones pushed them out (after a
    // 20,000-element page they held tens of MiB), and the heap they held goes back to the OS
    // (this call's own response is small then, so the Connection's trim after large ones would
    // not run).
    let mut freed = 0;
    for record in state.observations.iter_mut().filter(|record| {
        !record.replaced
            && record.frame_id == page_context.frame_id
            && record.document_key != observation.document_key
    }) {
        freed += record.view.len();
        record.replaced = true;
        record.elements = Default::default();
        record.view = Default::default();
    }
    state.refs.record(
        &observation_id,
        scope.workspace_id,
        &page_context.frame_id,
        &observation.document_key,
        &shaped.elements,
    );
    state.observations.push_back(ObservationRecord {
        id: observation_id,
        workspace_id: scope.workspace_id.to_string(),
        frame_id: page_context.frame_id.clone(),
        document_key: observation.document_key,
        elements: std::sync::Arc::new(shaped.elements),
        view: std::sync::Arc::new(view),
        replaced: false,
    });
    while state.observations.len() > KEPT_OBSERVATIONS {
        state.observations.pop_front();
    }
    if freed >= FREED_ELEMENTS_TO_TRIM {
        crate::os::return_freed_memory();
    }
    Ok((
        TakenObservation {
            result,
            fingerprint,
        },
        read,
    ))
}

/// The `observationId` + `ref` arguments of every ref-taking tool (flattened into its params).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefParams {
    pub observation_id: Option<String>,
    #[serde(rename = "ref")]
    pub element_ref: Option<u64>,
}

impl RefParams {
    /// Whether the call names a ref (either half: the schema does not pair them).
    pub fn given(&self) -> bool {
        self.observation_id.is_some() || self.element_ref.is_some()
    }
}

/// A ref of an Observation the calling Workspace took on this tab, checked on the Broker side
/// before the page is asked (the page re-checks the element itself). Any Observation of the
/// frame's current document will do, however many came since: refs resolve through the
/// document (`session::RefBook`), not through the kept Observation records.
fn resolve_ref(
    guard: &mut TabGuard,
    scope: &TargetScope<'_>,
    frame_id: &str,
    params: &RefParams,
) -> Result<(RefTarget, ElementSummary), ToolError> {
    let observation_id = params.observation_id.as_deref().unwrap_or_default();
    let element_ref = params.element_ref.unwrap_or(0);
    let lookup =
        guard
            .state()
            .refs
            .resolve(scope.workspace_id, frame_id, observation_id, element_ref);
    let error = match lookup {
        RefLookup::Found {
            summary,
            document_key,
        } => {
            let target = RefTarget::new(observation_id, element_ref as u32);
            return Ok((target.in_document(document_key), summary));
        }
        RefLookup::NotIssued => RpcError::new(ErrorCode::ObservationNotFound, "no such Observation for this Workspace on this target (another target, a frame that went away, before a reconnect, or older than the last 4,096)")
            .with_context("observationId", json!(observation_id))
            .with_remediation(RemediationAction::Observe, "Call browser.observe on this target and use refs from the new Observation."),
        RefLookup::OtherFrame => RpcError::new(
            ErrorCode::StaleRef,
            "the Observation was taken in another frame or document",
        )
        .with_context("reason", json!("frame_changed"))
        .with_remediation(
            RemediationAction::Observe,
            "Call browser.observe in the selected frame and use refs from the new Observation.",
        ),
        RefLookup::DocumentReplaced => RpcError::new(
            ErrorCode::StaleRef,
            "the Observation's document was replaced (a navigation or reload since)",
        )
        .with_reason(Reason::DocumentReplaced)
        .with_remediation(
            RemediationAction::Observe,
            "Call browser.observe and use refs from the new Observation.",
        ),
        RefLookup::NotInDocument {
            handed_out,
            highest,
        } => RpcError::new(
            ErrorCode::StaleRef,
            format!(
                "ref {element_ref} is not one of the {handed_out} ref(s) the Observations of this document handed out (the highest is {highest})"
            ),
        )
        .with_context("reason", json!("ref_not_in_observation"))
        .with_context("ref", json!(element_ref))
        .with_context("observationId", json!(observation_id))
        .with_context("highestRef", json!(highest))
        .with_remediation(
            RemediationAction::Observe,
            "Use a ref listed in an Observation of this document, or call browser.observe and use refs from the new Observation.",
        ),
    };
    Err(ToolError::from(error))
}

/// Waits, on the tab's lifecycle events, until the awaited document has loaded. Settles for
/// `interactive` once the load wait or the deadline nears. A page still short of `interactive`
/// when the stall bound passes (counted from the navigation's dispatch) is reported with
/// `watchdog.navigation_stalled` and ends `unknown_outcome`; one still loading at the deadline
/// is left to the deadline, which makes the dispatched Command `unknown_outcome` too. Never
/// answers success for a loading page. URL and title are then read from the browser's history.
async fn wait_for_load(
    env: &ToolEnv,
    client: &CdpClient,
    guard: &mut TabGuard,
    scope: &WorkspaceScope<'_>,
    opaque: &str,
    awaited: &Awaited,
    dispatched: tokio::time::Instant,
) -> Result<PageState, ToolError> {
    let now = tokio::time::Instant::now();
    let settle_at = (now + LOAD_WAIT).min(
        scope
            .deadline
            .checked_sub(Duration::from_millis(50))
            .unwrap_or(now),
    );
    let stall_at = dispatched + navigation_stall();
    let mut phase = None;
    let load_state = loop {
        let now = tokio::time::Instant::now();
        let interactive = phase >= Some(LoadPhase::Interactive);
        match phase {
            Some(LoadPhase::Complete) => break LoadPhase::Complete,
            Some(reached) if interactive && now >= settle_at => break reached,
            _ if !interactive && now >= stall_at => {
                let url = match guard.page_info(client).await {
                    Ok((url, _)) => url,
                    Err(_) => String::new(),
                };
                return Err(ToolError::from(
                    navigation_stalled(env, scope, opaque, &url, now - dispatched).await,
                ));
            }
            _ => {}
        }
        // Interactive: wait for complete until the settle time. Short of it: wait for any
        // progress until the settle time, then for interactive until the stall bound.
        phase = match (interactive, now < settle_at) {
            (true, _) => {
                guard
                    .wait_for_phase(awaited, LoadPhase::Complete, settle_at)
                    .await
            }
            (false, true) => {
                guard
                    .wait_for_phase(awaited, LoadPhase::Interactive, settle_at.min(stall_at))
                    .await
            }
            (false, false) => {
                guard
                    .wait_for_phase(awaited, LoadPhase::Interactive, stall_at)
                    .await
            }
        };
    };
    let (url, title) = match guard.page_info(client).await {
        Ok(info) => info,
        // The navigation is done; a page that replaces its document again at once (a reload
        // loop) can make the history read fail. The browser's own target info still names the
        // committed page, and a read must not turn a finished navigation into unknown_outcome.
        Err(CdpError::Remote { .. }) => {
            let info = client.get_target_info(&guard.target, INPUT_TIMEOUT).await?;
            (bound_url(&info.url), bound_title(&info.title))
        }
        Err(other) => return Err(other.into()),
    };
    // Target discovery may report the new title later; the inventory shows what we just read.
    env.browser.note_page(&guard.target, &url, &title);
    Ok(PageState {
        url,
        title,
        load_state: load_state.as_str(),
    })
}

/// Emits `watchdog.navigation_stalled` and returns the Command's `unknown_outcome` error. The
/// browser is left alone: nothing is stopped, retried or navigated again.
async fn navigation_stalled(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    opaque: &str,
    url: &str,
    elapsed: Duration,
) -> RpcError {
    let (workspace_id, lease_id) = (scope.workspace_id, scope.lease_id);
    let url = bound_event_url(url);
    let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let mut emit = Emit::new(
        workspace_id,
        "watchdog.navigation_stalled",
        json!({"targetId": opaque, "url": url, "elapsedMs": elapsed_ms}),
    );
    emit.lease_id = Some(lease_id.to_string());
    emit.target_id = Some(opaque.to_owned());
    emit.sensitivity = "browser_data";
    if let Err(error) = env.events.emit(emit).await {
        tracing::debug!(%error, "watchdog.navigation_stalled not journaled");
    }
    RpcError::new(
        ErrorCode::UnknownOutcome,
        "the navigation was dispatched but the page did not become interactive in time",
    )
    .with_context("reason", json!("navigation_stalled"))
    .with_context("targetId", json!(opaque))
    .with_context("elapsedMs", json!(elapsed_ms))
    .with_remediation(
        RemediationAction::InspectState,
        "Observe the target before deciding whether to navigate again; the navigation is never repeated automatically.",
    )
}
