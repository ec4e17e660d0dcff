//! One physical tab's actor: a ticketed FIFO queue in front of the tab's CDP session state.
//!
//! Every command for a tab, from any Workspace, takes a ticket when the Broker accepts it (in
//! input order) and runs only when its number is served, so commands for one tab never
//! interleave and run in acceptance order, while commands for different tabs run concurrently.
//! A Command waiting for its turn is `accepted`; the holder of the turn is `dispatched`. A ticket
//! dropped before its turn (cancelled, deadline passed) is skipped.
//!
//! Beside the queue sit the tab's books (`TabBooks`): its `FrameBook` (OOPIF sessions, frame
//! selections), its `LoadBook` (the main document's loader and load phase, from lifecycle
//! events), its `ActivityBook`, `FileChooserBook`, `NetworkBook` and `DownloadBook`, plain fields of one value
//! behind the tab's one lock, which the event pump may take without a turn; nothing awaits
//! while holding it, and no code holds one book's guard while it asks for another.
//! Load waits and the URL and title a tool reports come from CDP, never from the page's main
//! world (docs/security.md, "Hostile pages").
//! A session attached here gets `Page.enable`, OOPIF auto-attach, the click-truth
//! listener and the keystroke guard at document start (`register_document_start`, also used for OOPIF sessions by the pump),
//! download capture (`session::downloads::enable`), console/request collection
//! (`activity::enable`, into the tab's `ActivityBook`), file-chooser interception
//! (`choosers.rs`, whose `FileChooserBook` sits beside the queue) and network observation
//! with the tab's interception (`session::network::enable`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, OwnedMutexGuard};

use super::activity::ActivityBook;
use super::bounds::{bound_title, bound_url};
use super::choosers::{self, FileChooserBook};
use super::frames::{FrameBook, FrameSelection};
use super::load::{Awaited, LoadBook, LoadMark, LoadPhase};
use crate::cdp::page::{AddScriptToEvaluateOnNewDocument, Enable};
use crate::cdp::target::SetAutoAttach;
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
    books: Mutex<TabBooks>,
    /// Woken on every change of the load book.
    load_changed: Notify,
}

/// What the event pump learnt of one tab, usable without a turn: plain data, one owner.
#[derive(Default)]
pub struct TabBooks {
    pub frames: FrameBook,
    pub load: LoadBook,
    /// Console entries and requests in flight (`session::activity`).
    pub activity: ActivityBook,
    /// File choosers the tab's sessions reported, and whether its session intercepts them.
    pub choosers: FileChooserBook,
    /// Recent requests and interception state (`session::network`, `session::fetch`).
    pub network: super::network::NetworkBook,
    /// The tab's sessions as download capture sees them and its downloads in flight
    /// (`session::downloads`).
    pub downloads: super::downloads::DownloadBook,
    /// A session the browser connection's auto-attach opened for this tab and nobody set up
    /// yet: the next `TabGuard::session` uses it instead of attaching again.
    pub auto_session: Option<SessionId>,
    /// The session the tools set up for this tab, for the live view's read-only frames
    /// (`session::view`); cleared when that session is dropped.
    pub view_session: Option<SessionId>,
    /// The overrides `browser.emulate` set on the tab's session, undone when control ends
    /// (`background::hand_back`).
    pub emulation: Option<super::background::Emulated>,
}

/// The tab's books, borrowed under its lock. A second borrow of the same tab's books on the
/// thread that holds them would wait forever; it panics instead, naming the mistake.
pub struct Books<'a> {
    books: MutexGuard<'a, TabBooks>,
    queue: *const TabQueue,
}

thread_local! {
    /// The tabs whose books this thread holds now.
    static BORROWED: std::cell::RefCell<Vec<*const TabQueue>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl std::ops::Deref for Books<'_> {
    type Target = TabBooks;
    fn deref(&self) -> &TabBooks {
        &self.books
    }
}

impl std::ops::DerefMut for Books<'_> {
    fn deref_mut(&mut self) -> &mut TabBooks {
        &mut self.books
    }
}

impl Drop for Books<'_> {
    fn drop(&mut self) {
        BORROWED.with(|held| held.borrow_mut().retain(|queue| *queue != self.queue));
    }
}

/// One book of a tab, borrowed under the tab's lock (`TabHandle::frames`, `activity`, ...).
/// Take what is needed and let it go: the tab's other books wait for this one.
pub struct Book<'a, T> {
    books: Books<'a>,
    part: fn(&TabBooks) -> &T,
    part_mut: fn(&mut TabBooks) -> &mut T,
}

impl<T> std::ops::Deref for Book<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        (self.part)(&self.books)
    }
}

impl<T> std::ops::DerefMut for Book<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        (self.part_mut)(&mut self.books)
    }
}

impl TabQueue {
    fn books(&self) -> Books<'_> {
        let queue = self as *const TabQueue;
        BORROWED.with(|held| {
            let mut held = held.borrow_mut();
            assert!(
                !held.contains(&queue),
                "a tab's books borrowed twice on one thread (let the first book go)"
            );
            held.push(queue);
        });
        Books {
            books: self.books.lock().expect("tab books lock"),
            queue,
        }
    }

    fn frames(&self) -> Book<'_, FrameBook> {
        Book {
            books: self.books(),
            part: |b| &b.frames,
            part_mut: |b| &mut b.frames,
        }
    }

    fn activity(&self) -> Book<'_, ActivityBook> {
        Book {
            books: self.books(),
            part: |b| &b.activity,
            part_mut: |b| &mut b.activity,
        }
    }

    fn choosers(&self) -> Book<'_, FileChooserBook> {
        Book {
            books: self.books(),
            part: |b| &b.choosers,
            part_mut: |b| &mut b.choosers,
        }
    }

    fn network(&self) -> Book<'_, super::network::NetworkBook> {
        Book {
            books: self.books(),
            part: |b| &b.network,
            part_mut: |b| &mut b.network,
        }
    }

    fn downloads(&self) -> Book<'_, super::downloads::DownloadBook> {
        Book {
            books: self.books(),
            part: |b| &b.downloads,
            part_mut: |b| &mut b.downloads,
        }
    }
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
    /// The newest Observations of this tab (diff bases, annotations), newest last.
    pub observations: std::collections::VecDeque<ObservationRecord>,
    /// Every Observation id issued on this tab and the refs of each frame's current document:
    /// refs resolve through this, for as long as their document lasts.
    pub refs: super::refs::RefBook,
    /// Whether the last Observation showed an authentication surface (hint transitions);
    /// `None` after a session or frame change.
    pub auth_surface: Option<bool>,
    /// The no-progress detector's memory (`tools/progress.rs`); cleared with the session.
    pub progress: ProgressMemory,
    /// Whether the session took the download setting (`session::downloads`).
    pub download_capture: super::downloads::Capture,
    /// The Broker's isolated world of the main frame's current document: the load history
    /// point it was created at (a navigation since means another document) and its context.
    pub main_world: Option<(LoadMark, crate::page::ExecutionContextId)>,
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

/// How many Observations per tab keep their refs (the page's constant, which the page scripts
/// share).
pub use crate::page::KEPT_OBSERVATIONS;

/// Where an Observation was taken, so a ref is only ever resolved where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservationRecord {
    pub id: String,
    pub workspace_id: String,
    pub frame_id: String,
    /// The page's key of the observed document: a diff needs the same document.
    pub document_key: String,
    /// Every ref this Observation resolves (stable refs, not dense; a diff Observation's
    /// include its base's) and what each was when observed: tells actions what to expect.
    pub elements: std::sync::Arc<std::collections::HashMap<u32, ElementSummary>>,
    /// The elements as the agent has been shown them, in document order: the base of a later
    /// diff (`page::diff`).
    pub view: std::sync::Arc<Vec<crate::page::ObservedElement>>,
    /// A later Observation of the same frame saw another document: every ref of this one is
    /// stale, so its `elements` and `view` were let go (`tools::tab::take_observation_reading`).
    pub replaced: bool,
}

/// The kind of an observed element, kept for action evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementSummary {
    pub role: String,
    pub tag: String,
    pub input_type: Option<String>,
}

/// Waits until `check` says done on the tab's load book, or `until` passed; woken by the pump on
/// every change of the book.
async fn wait_load<T>(
    queue: &TabQueue,
    until: tokio::time::Instant,
    check: impl Fn(&LoadBook) -> (bool, T),
) -> T {
    loop {
        let notified = queue.load_changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (done, value) = check(&queue.books().load);
        if done || tokio::time::Instant::now() >= until {
            return value;
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(until) => {}
        }
    }
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
                books: Mutex::new(TabBooks::default()),
                load_changed: Notify::new(),
            }),
        }
    }

    /// Updates the tab's load book (the pump, from the tab session's lifecycle events) and
    /// wakes the load waits.
    pub fn on_load(&self, update: impl FnOnce(&mut LoadBook)) {
        update(&mut self.queue.books().load);
        self.queue.load_changed.notify_waiters();
    }

    /// Every book of the tab at once (the pump); usable without a turn.
    pub fn books(&self) -> Books<'_> {
        self.queue.books()
    }

    /// The tab's frame bookkeeping; usable without a turn (the pump's view of frames).
    pub fn frames(&self) -> Book<'_, FrameBook> {
        self.queue.frames()
    }

    /// The tab's console entries and requests in flight; usable without a turn (the pump).
    pub fn activity(&self) -> Book<'_, ActivityBook> {
        self.queue.activity()
    }

    /// The tab's file-chooser record; usable without a turn (the pump counts choosers).
    pub fn file_choosers(&self) -> Book<'_, FileChooserBook> {
        self.queue.choosers()
    }

    /// Nobody manages or controls the tab any more: its console entries and requests go (the
    /// next controller sees only what the page does from then on, as after a hand-over).
    pub fn forget_page_data(&self, now_ms: i64) {
        let mut books = self.queue.books();
        books.activity.hand_over(now_ms);
        books.network.forget_records();
    }

    /// How many handles to this tab exist (its books are freed when the last one goes).
    #[cfg(test)]
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.queue)
    }

    /// Offers a session auto-attach opened for this tab (the pump).
    pub fn offer_session(&self, session: SessionId) {
        self.queue.books().auto_session = Some(session);
    }

    /// The session auto-attach offered and nobody set up yet, left offered.
    pub fn offered_session(&self) -> Option<SessionId> {
        self.queue.books().auto_session.clone()
    }

    /// Withdraws an offered session that detached.
    pub fn withdraw_session(&self, session: &SessionId) {
        let mut books = self.queue.books();
        if books.auto_session.as_ref() == Some(session) {
            books.auto_session = None;
        }
    }

    /// The tab's recent requests and interception state; usable without a turn.
    pub fn network(&self) -> Book<'_, super::network::NetworkBook> {
        self.queue.network()
    }

    /// The tab's downloads in flight and capture state; usable without a turn (the pump).
    pub fn downloads(&self) -> Book<'_, super::downloads::DownloadBook> {
        self.queue.downloads()
    }

    /// Where the tab's load history stands now (`TabGuard::load_mark`, without the turn).
    pub fn load_mark(&self) -> LoadMark {
        self.queue.books().load.mark()
    }

    /// Whether the main frame started or made a navigation since `mark` (no wait).
    pub fn navigated_since(&self, mark: &LoadMark) -> bool {
        self.queue.books().load.moved_since(mark)
    }

    /// Waits until the main frame navigated after `mark` or started a navigation, or `until`
    /// passed; true when it did. Needs no turn: it only reads what the pump reported.
    pub async fn wait_navigation_since(
        &self,
        mark: &LoadMark,
        until: tokio::time::Instant,
    ) -> bool {
        wait_load(&self.queue, until, |book| {
            let moved = book.moved_since(mark);
            (moved, moved)
        })
        .await
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

    /// Whether a Command queued after the turn `number` holds the tab now (or held it): what
    /// happens on the tab from then on may be that Command's doing.
    pub fn later_turn_started(&self, number: u64) -> bool {
        let turns = self.queue.turns.lock().expect("turns lock");
        turns.serving > number && turns.serving < turns.next
            || turns.serving > number.saturating_add(1)
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
            number: self.number,
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
    /// The ticket number this guard serves (`TabHandle::later_turn_started`).
    number: u64,
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

/// How long one setup call of a fresh session may take when no Command bounds it (the pump's
/// background setup, a page-state read); a Command's own setup is bounded by its deadline
/// instead ([`TabGuard::session_within`]), so a browser slowed by many tabs opening at once
/// is waited for as long as the agent asked, not failed at a fixed bound.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Registers the click-truth listener and the keystroke guard (`page::document_start_script`)
/// to run in the Broker's isolated world of every new document of a tab or OOPIF session,
/// before any page script. Without it clicks are still judged, from a listener installed later
/// (see docs/observation.md), and typing goes one guarded step per character (docs/keyboard.md),
/// so a failure is logged rather than fatal.
pub async fn register_document_start(client: &CdpClient, session: &SessionId) {
    let command = AddScriptToEvaluateOnNewDocument {
        source: crate::page::document_start_script().to_owned(),
        world_name: Some(crate::page::WORLD_NAME.to_owned()),
    };
    if let Err(error) = client.execute(session, &command, SETUP_TIMEOUT).await {
        tracing::warn!(%error, "registering the document-start listeners failed");
    }
}

impl TabGuard {
    /// The flattened CDP session of this tab, attaching (or taking the session auto-attach
    /// offered) and enabling the domains the tools need on first use. `Page` is enabled before anything else can run, so a dialog the page opens
    /// later stays answerable by this session (docs/cdp.md, "dialog session").
    pub async fn session(&mut self, client: &CdpClient) -> Result<SessionId, CdpError> {
        self.session_within(client, SETUP_TIMEOUT).await
    }

    /// [`TabGuard::session`] with each setup call bounded by `timeout` (what is left of the
    /// Command's deadline).
    pub async fn session_within(
        &mut self,
        client: &CdpClient,
        timeout: Duration,
    ) -> Result<SessionId, CdpError> {
        if let Some(session) = &self.state.session {
            return Ok(session.clone());
        }
        let offered = self.queue.books().auto_session.take();
        let session = match offered {
            Some(session) => session,
            None => client.attach_to_target(&self.target, timeout).await?,
        };
        // Load waits follow the lifecycle events; Chromium replays the current document's.
        self.queue.books().load = LoadBook::default();
        // Every setup call is queued at once, `Page.enable` first: the session handles them in
        // order, and only the waits for the earlier replies go (a new tab's renderer answers
        // its first calls slowly).
        let handle = self.handle();
        let page = client.execute(&session, &Enable {}, timeout);
        let lifecycle = client.set_lifecycle_events_enabled(&session, true, timeout);
        // Managed tabs run in unfocused windows (background driving): the page behaves as
        // focused (focus/blur events, `:focus`, `hasFocus()`) without any window activated.
        let focus = super::background::emulate(client, &session, timeout);
        // OOPIFs become child sessions the pump records in the FrameBook. Without it frames
        // still work in-process, so a failure is logged rather than fatal.
        let iframes = SetAutoAttach::iframes();
        let (page, lifecycle, (), focus, downloads, (), intercepting, network, iframes) = tokio::join!(
            page,
            lifecycle,
            register_document_start(client, &session),
            focus,
            super::downloads::enable(client, &session, timeout),
            super::activity::enable(client, &session, &handle, timeout),
            choosers::intercept(client, &session, true, timeout),
            super::network::enable(client, &session, &handle, timeout),
            client.execute(&session, &iframes, timeout),
        );
        page?;
        lifecycle?;
        if let Err(error) = focus {
            tracing::debug!(%error, "focus emulation not enabled");
        }
        self.state.download_capture = downloads;
        self.file_choosers()
            .set_intercepting(intercepting, Some(&session));
        network?;
        // `Network` is on: the activity book counts requests in flight from now on.
        self.activity().counting_started();
        if let Err(error) = iframes {
            tracing::warn!(%error, "auto-attach of out-of-process iframes failed");
        }
        self.state.session = Some(session.clone());
        self.queue.books().view_session = Some(session.clone());
        Ok(session)
    }

    /// Switches file-chooser interception back on for a tab whose control was handed back
    /// (`choosers::release` switched it off): a controlled tab never shows a native chooser.
    pub async fn ensure_file_chooser_interception(&mut self, client: &CdpClient) {
        let Some(session) = self.state.session.clone() else {
            return;
        };
        if self.file_choosers().intercepting() {
            return;
        }
        let intercepting = choosers::intercept(client, &session, true, SETUP_TIMEOUT).await;
        self.file_choosers()
            .set_intercepting(intercepting, Some(&session));
    }

    /// The tab's file-chooser record.
    pub fn file_choosers(&self) -> Book<'_, FileChooserBook> {
        self.queue.choosers()
    }

    /// Forgets the session (it detached or the target crashed); the next use re-attaches.
    pub fn drop_session(&mut self) {
        self.file_choosers().set_intercepting(false, None);
        self.state.session = None;
        self.state.main_frame = None;
        self.state.observations.clear();
        self.state.refs.clear();
        self.state.auth_surface = None;
        self.state.progress = ProgressMemory::default();
        self.state.download_capture = super::downloads::Capture::Off;
        self.state.main_world = None;
        let mut books = self.queue.books();
        books.frames.clear_children();
        books.load = LoadBook::default();
        books.view_session = None;
        books.activity.session_ended();
    }

    /// Whether a cross-document navigation of the main frame has started and not committed.
    pub fn navigation_under_way(&self) -> bool {
        self.queue.books().load.settled_phase().is_none()
    }

    /// This guard's place in the tab's queue.
    pub fn turn_number(&self) -> u64 {
        self.number
    }

    /// A handle to this tab (for setup that outlives the turn).
    pub fn handle(&self) -> TabHandle {
        TabHandle {
            target: self.target.clone(),
            queue: self.queue.clone(),
        }
    }

    /// The tab's recent requests (the main document's status for hints).
    pub fn network(&self) -> Book<'_, super::network::NetworkBook> {
        self.queue.network()
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
    pub fn frames(&self) -> Book<'_, FrameBook> {
        self.queue.frames()
    }

    /// The tab's console entries and requests in flight (`session::activity`).
    pub fn activity(&self) -> Book<'_, ActivityBook> {
        self.queue.activity()
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
            self.state.refs.forget_frames(&workspace_id, &gone);
        }
        selection
    }

    pub fn state(&mut self) -> &mut TabState {
        &mut self.state
    }

    /// Where the tab's load history stands now; take it before dispatching a navigation.
    pub fn load_mark(&self) -> LoadMark {
        self.queue.books().load.mark()
    }

    /// Waits until the awaited document reached `wanted`, or `until` passed; returns the phase
    /// it reached (`None`: it is not the current document yet).
    pub async fn wait_for_phase(
        &self,
        awaited: &Awaited,
        wanted: LoadPhase,
        until: tokio::time::Instant,
    ) -> Option<LoadPhase> {
        self.wait_load(until, |book| {
            let phase = book.phase_of(awaited);
            (phase >= Some(wanted), phase)
        })
        .await
    }

    /// Waits until no cross-document navigation is under way and the current document has
    /// loaded completely, or `until` passed. True when it settled.
    pub async fn wait_until_settled(&self, until: tokio::time::Instant) -> bool {
        self.wait_load(until, |book| {
            let settled = book.settled_phase() == Some(LoadPhase::Complete);
            (settled, settled)
        })
        .await
    }

    async fn wait_load<T>(
        &self,
        until: tokio::time::Instant,
        check: impl Fn(&LoadBook) -> (bool, T),
    ) -> T {
        wait_load(&self.queue, until, check).await
    }

    /// The URL and title of the tab's current history entry, bounded (`session::bounds`). Read
    /// by the browser process (`Page.getNavigationHistory`), so nothing the page defines in
    /// its own world can change them; `title` is empty when the document has none.
    pub async fn page_info(&mut self, client: &CdpClient) -> Result<(String, String), CdpError> {
        let session = self.session(client).await?;
        let history = match client.navigation_history(&session, SETUP_TIMEOUT).await {
            Ok(history) => history,
            Err(error @ CdpError::SessionClosed { .. }) => {
                self.drop_session();
                return Err(error);
            }
            Err(error) => return Err(error),
        };
        match history.entry(0) {
            Some(entry) => Ok((bound_url(&entry.url), bound_title(&entry.title))),
            None => {
                let info = client.get_target_info(&self.target, SETUP_TIMEOUT).await?;
                Ok((bound_url(&info.url), String::new()))
            }
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

    #[test]
    fn one_book_at_a_time_and_a_second_borrow_on_one_thread_is_named() {
        let (one, two) = (
            TabHandle::new(TargetId::new("1")),
            TabHandle::new(TargetId::new("2")),
        );
        {
            // Books of different tabs together are fine; one after the other too.
            let _first = one.frames();
            let _other = two.activity();
        }
        one.offer_session(SessionId::new("s"));
        assert_eq!(one.books().auto_session, Some(SessionId::new("s")));
        let held = one.file_choosers();
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| one.load_mark()));
        assert!(again.is_err(), "a second borrow must not wait forever");
        drop(held);
        let _ = one.load_mark();
    }

    #[tokio::test]
    async fn a_later_turn_is_seen_only_once_it_starts() {
        let handle = TabHandle::new(TargetId::new("t"));
        let guard = handle.acquire().await;
        let mine = guard.turn_number();
        assert!(!handle.later_turn_started(mine), "still mine");
        drop(guard);
        assert!(
            !handle.later_turn_started(mine),
            "idle after mine: nobody else acted"
        );
        let later = handle.acquire().await;
        assert!(
            handle.later_turn_started(mine),
            "a later Command holds the tab"
        );
        drop(later);
        assert!(handle.later_turn_started(mine), "and it held it");
    }
}
