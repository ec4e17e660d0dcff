//! The live view's side of the session (docs/view.md): the origins the view serves on, which
//! are never an eligible tab (not listed, not resolvable, so no agent can drive the view's own
//! tab), the read-only reads the view makes (the tabs every Workspace manages or controls, and a
//! frame of one of them), the person's take-over of a tab, and each session's screencast, the
//! one owner of it: shared by the view's watchers and the background screenshots in progress
//! (`keep_rendering`), started for its first user and stopped when its last leaves.
//!
//! The reads take no tab's turn and no Command: a frame is one `Page.captureScreenshot` on the
//! session the tools already set up for the tab, sent beside whatever the tab's Command does,
//! so the view never waits for an agent and never holds one up. A take-over marks the tab held
//! in the registry (every Lease's control of it then fails with `human_in_control`, the one
//! check in `Registry::acquire_control`) and takes the tab's turn, so what the agents queued
//! before runs first and nothing runs against the person's input; during a hand-off of the tab
//! the hand-off's Command already holds the turn for the person. The person's mouse, wheel and
//! keyboard go to the tab's session until the hand-back.

use std::sync::RwLock;
use std::time::Duration;

use super::bounds::{bound_title, bound_url};
use super::load::LoadMark;
use super::service::{BrowserService, Live};
use super::tab::{TabGuard, TabHandle};
use crate::cdp::input::{
    self, DispatchMouseEvent, InsertText, MouseButton, MouseEventType, MouseWheel, Stroke,
};
use crate::cdp::page::{
    CaptureScreenshot, GetLayoutMetrics, ScreencastFrameAck, StartScreencast, StopScreencast,
};
use crate::cdp::{CdpClient, SessionId, TargetId};
use crate::store::TargetRef;

/// Origins of views registered with this Broker (`http://127.0.0.1:PORT`). A view registers
/// each time it connects; the oldest is forgotten beyond this many.
const MAX_VIEW_ORIGINS: usize = 16;

/// How long one frame capture may take.
const FRAME_TIMEOUT: Duration = Duration::from_secs(5);

/// JPEG quality of a frame: enough to read a page, a few tens of KiB per frame.
const FRAME_QUALITY: u64 = 60;

static VIEW_ORIGINS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Records `origin` (`http://127.0.0.1:PORT`, nothing after the port) as a live view's.
pub fn register_view_origin(origin: &str) {
    let mut origins = VIEW_ORIGINS.write().expect("view origins lock");
    if origins.iter().any(|o| o == origin) {
        return;
    }
    if origins.len() >= MAX_VIEW_ORIGINS {
        origins.remove(0);
    }
    origins.push(origin.to_owned());
}

/// Whether `url` is on a registered view's origin.
pub fn is_view_url(url: &str) -> bool {
    let origins = VIEW_ORIGINS.read().expect("view origins lock");
    origins.iter().any(|origin| {
        url.strip_prefix(origin.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?', '#']))
    })
}

/// A JavaScript dialog waiting on a tab.
#[derive(Debug, Clone)]
pub struct ViewDialog {
    pub dialog_type: String,
    pub message: String,
}

/// One tab as the live view lists it under one Workspace.
#[derive(Clone)]
pub struct ViewTab {
    pub workspace_id: String,
    /// The Workspace's opaque `target:` id.
    pub target_id: String,
    pub url: String,
    pub title: String,
    /// Created for (or adopted by) this Workspace.
    pub managed: bool,
    /// The Lease of this Workspace controlling the tab.
    pub controlled_by: Option<String>,
    pub dialog: Option<ViewDialog>,
    /// The person at the live view holds the tab.
    pub human: bool,
    pub(super) handle: TabHandle,
}

impl ViewTab {
    /// Requests kept in the tab's network book and downloads in flight.
    pub fn activity_counts(&self) -> (usize, usize) {
        let requests = self.handle.network().len();
        let downloads = self.handle.downloads().len();
        (requests, downloads)
    }
}

/// Why no frame could be had.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("no such tab")]
    NotFound,
    #[error("no frame yet: no Workspace has driven this tab since the Broker connected")]
    NoSession,
    #[error("the browser did not give a frame: {0}")]
    Cdp(String),
}

impl BrowserService {
    /// Every tab a Workspace manages or controls, per Workspace.
    pub fn view_tabs(&self) -> Vec<ViewTab> {
        (self.lives().iter())
            .flat_map(|live| live.with_tabs(|tabs| tabs.registry.view_rows()))
            .collect()
    }

    /// A Workspace's tab as the view reads it: its handle, the session the tools set up for
    /// it (none before a Workspace drove it) and its browser connection.
    fn view_tab(
        &self,
        workspace_id: &str,
        opaque: &str,
    ) -> Result<(TabHandle, SessionId, Live), FrameError> {
        let handle = self
            .tab_handle(&workspace_id.into(), &opaque.into())
            .map_err(|_| FrameError::NotFound)?;
        let session = handle.books().view_session.clone();
        let session = session.ok_or(FrameError::NoSession)?;
        let live = self.live_of(workspace_id).ok_or(FrameError::NotFound)?;
        Ok((handle, session, live))
    }

    /// One JPEG frame (base64) of a Workspace's tab, taken on the session the tools set up.
    pub async fn view_frame(&self, workspace_id: &str, opaque: &str) -> Result<String, FrameError> {
        let (_, session, live) = self.view_tab(workspace_id, opaque)?;
        let capture = CaptureScreenshot {
            format: "jpeg",
            quality: Some(FRAME_QUALITY),
            clip: None,
            capture_beyond_viewport: false,
            optimize_for_speed: true,
        };
        let reply = live
            .client
            .execute(&session, &capture, FRAME_TIMEOUT)
            .await
            .map_err(|error| FrameError::Cdp(error.to_string()))?;
        Ok(reply.data)
    }
}

/// JPEG quality of the live view's screencast frames.
const CAST_QUALITY: u64 = 60;

/// Largest screencast frame, in device pixels a side: a 1280×720 tab is sent as it is.
const CAST_MAX_EDGE: u64 = 1280;

/// Longest wait of one [`BrowserService::view_screencast`] call for a frame newer than the
/// watcher has.
pub const CAST_WAIT: Duration = Duration::from_secs(5);

/// Shortest time between two acknowledgements of the live view's frames while agents drive
/// the tab. Chromium sends a frame only while fewer than two wait for an acknowledgement, so
/// pacing the acknowledgements bounds a tab that changes on every frame to 2 frames a second
/// (after the first two), and Chromium encodes no more frames than that for the view beside the
/// agent's work (docs/performance.md, "The live view"). While the person holds the tab,
/// frames are acknowledged at once: they follow the person's own input.
const CAST_MIN_INTERVAL: Duration = Duration::from_millis(500);

/// A screencast nobody asked or waited for a frame of for this long has no watcher left and is
/// stopped.
const CAST_IDLE: Duration = Duration::from_secs(3);

/// The live view's part of a tab's screencast: the newest frame, the frame Chromium waits to
/// have acknowledged before it sends another, and when a watcher last asked for one.
struct Watched {
    target: TargetId,
    /// (frame number counting from 1, base64 JPEG); 0 before the first.
    newest: tokio::sync::watch::Sender<(u64, Option<String>)>,
    unacked: Option<i64>,
    /// The earliest moment the next acknowledgement may go ([`CAST_MIN_INTERVAL`] after the
    /// last one, unless the person holds the tab).
    ack_after: tokio::time::Instant,
    wanted: std::time::Instant,
    /// Watcher calls waiting for a frame now: the view is not idle while one waits.
    waiting: usize,
}

impl Watched {
    /// Takes the frame waiting for its acknowledgement, if any, and says when to send that:
    /// now, or `pause` after the previous one.
    fn schedule_ack(
        &mut self,
        now: tokio::time::Instant,
        pause: Duration,
    ) -> Option<(i64, tokio::time::Instant)> {
        let frame = self.unacked.take()?;
        let due = self.ack_after.max(now);
        self.ack_after = due + pause;
        Some((frame, due))
    }
}

/// The screencast of one session and its users: the view's watchers (until [`CAST_IDLE`]
/// after the last one asked) and the background screenshots in progress. It runs while it
/// has a user; only the last user to leave stops it.
struct Cast {
    session: SessionId,
    watched: Option<Watched>,
    shots: usize,
}

/// The screencasts running now, at most one per session: the one owner that starts and stops
/// them. Each change says what to send Chromium; the caller sends it.
#[derive(Default)]
struct Casts(Vec<Cast>);

/// What a change of [`Casts`] asks to send on the session.
#[derive(Debug, PartialEq, Eq)]
enum CastCall {
    Nothing,
    /// Start the view's screencast (stopping a background one first).
    StartWatched,
    /// Start a background screencast of tiny frames.
    StartTiny,
    Stop,
}

impl Casts {
    fn find(&mut self, session: &SessionId) -> Option<&mut Cast> {
        self.0.iter_mut().find(|cast| cast.session == *session)
    }

    /// A watcher of `target` asks for a frame on `session`: joins (or starts) the view's part
    /// and returns the frames to wait on. The view's part of `target` on another session (the
    /// tools' session changed) is dropped.
    fn watch(
        &mut self,
        target: &TargetId,
        session: &SessionId,
    ) -> (
        tokio::sync::watch::Receiver<(u64, Option<String>)>,
        CastCall,
    ) {
        for cast in &mut self.0 {
            if cast.session != *session
                && cast.watched.as_ref().is_some_and(|w| w.target == *target)
            {
                cast.watched = None;
            }
        }
        self.0
            .retain(|cast| cast.watched.is_some() || cast.shots > 0);
        let now = std::time::Instant::now();
        if let Some(watched) = self.find(session).and_then(|c| c.watched.as_mut()) {
            watched.wanted = now;
            return (watched.newest.subscribe(), CastCall::Nothing);
        }
        let (newest, watching) = tokio::sync::watch::channel((0, None));
        let watched = Watched {
            target: target.clone(),
            newest,
            unacked: None,
            ack_after: tokio::time::Instant::now(),
            wanted: now,
            waiting: 0,
        };
        match self.find(session) {
            Some(cast) => cast.watched = Some(watched),
            None => self.0.push(Cast {
                session: session.clone(),
                watched: Some(watched),
                shots: 0,
            }),
        }
        (watching, CastCall::StartWatched)
    }

    /// The view's screencast could not start: its part goes, the rest stays.
    fn unwatch(&mut self, session: &SessionId) {
        if let Some(cast) = self.find(session) {
            cast.watched = None;
        }
        self.0
            .retain(|cast| cast.watched.is_some() || cast.shots > 0);
    }

    /// The view's part of `target` leaves when no watcher asked for `idle`: `None` while it is
    /// watched, else the session to stop the screencast on when no screenshot still uses it.
    fn leave_if_idle(&mut self, target: &TargetId, idle: Duration) -> Option<Option<SessionId>> {
        let at = self
            .0
            .iter()
            .position(|cast| cast.watched.as_ref().is_some_and(|w| w.target == *target));
        let Some(at) = at else {
            return Some(None);
        };
        let cast = &mut self.0[at];
        if cast
            .watched
            .as_ref()
            .is_some_and(|w| w.waiting > 0 || w.wanted.elapsed() < idle)
        {
            return None;
        }
        cast.watched = None;
        if cast.shots > 0 {
            return Some(None);
        }
        Some(Some(self.0.remove(at).session))
    }

    /// A watcher's call on `session` starts (`true`) or stops (`false`) waiting for a frame;
    /// when it stops, that counts as its last ask.
    fn waiting(&mut self, session: &SessionId, starts: bool) {
        if let Some(watched) = self.find(session).and_then(|c| c.watched.as_mut()) {
            match starts {
                true => watched.waiting += 1,
                false => {
                    watched.waiting = watched.waiting.saturating_sub(1);
                    watched.wanted = std::time::Instant::now();
                }
            }
        }
    }

    /// A background screenshot on `session` begins: it starts the screencast when nobody runs
    /// one.
    fn shoot(&mut self, session: &SessionId) -> CastCall {
        match self.find(session) {
            Some(cast) => {
                cast.shots += 1;
                CastCall::Nothing
            }
            None => {
                self.0.push(Cast {
                    session: session.clone(),
                    watched: None,
                    shots: 1,
                });
                CastCall::StartTiny
            }
        }
    }

    /// A background screenshot on `session` ended: the last user stops the screencast.
    fn shot(&mut self, session: &SessionId) -> CastCall {
        let Some(at) = self.0.iter().position(|cast| cast.session == *session) else {
            return CastCall::Nothing;
        };
        let cast = &mut self.0[at];
        cast.shots = cast.shots.saturating_sub(1);
        if cast.shots > 0 || cast.watched.is_some() {
            return CastCall::Nothing;
        }
        self.0.remove(at);
        CastCall::Stop
    }
}

static CASTS: std::sync::Mutex<Casts> = std::sync::Mutex::new(Casts(Vec::new()));

fn casts() -> std::sync::MutexGuard<'static, Casts> {
    CASTS.lock().expect("casts lock")
}

/// A background screenshot's use of its session's screencast ([`keep_rendering`]); dropping
/// it (the screenshot ended, or its Command was cancelled) stops the screencast when nobody
/// else uses it.
pub(super) struct Rendering {
    client: CdpClient,
    session: SessionId,
    timeout: Duration,
}

impl Drop for Rendering {
    fn drop(&mut self) {
        if casts().shot(&self.session) == CastCall::Stop {
            let (client, session, timeout) =
                (self.client.clone(), self.session.clone(), self.timeout);
            tokio::spawn(async move {
                let _ = client.execute(&session, &StopScreencast {}, timeout).await;
            });
        }
    }
}

/// Keeps the tab on `session` rendering while the returned guard lives, sharing the view's
/// screencast when it runs one and starting a screencast of tiny, never acknowledged frames
/// (`frame_edge` pixels a side) when nobody does. Best effort: a refused start is ignored.
pub(super) async fn keep_rendering(
    client: &CdpClient,
    session: &SessionId,
    frame_edge: u64,
    timeout: Duration,
) -> Rendering {
    let send = casts().shoot(session);
    let guard = Rendering {
        client: client.clone(),
        session: session.clone(),
        timeout,
    };
    if send == CastCall::StartTiny {
        let start = StartScreencast {
            format: "jpeg",
            quality: 1,
            max_width: frame_edge,
            max_height: frame_edge,
            every_nth_frame: None,
        };
        if let Err(error) = client.execute(session, &start, timeout).await {
            tracing::debug!(%error, "screencast for a background screenshot refused");
        }
    }
    guard
}

/// A watcher's call waiting for a frame, counted while it lives (a call the view gives up on
/// is dropped mid-wait and still uncounted).
struct FrameWait(SessionId);

impl FrameWait {
    fn start(session: &SessionId) -> FrameWait {
        casts().waiting(session, true);
        FrameWait(session.clone())
    }
}

impl Drop for FrameWait {
    fn drop(&mut self) {
        casts().waiting(&self.0, false);
    }
}

/// The last number given to a live view frame (the first is 1).
static FRAME_NUMBERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A `Page.screencastFrame` on `session`: the newest frame of the view's screencast there.
/// Frames nobody watches (a background screenshot's, never read) are left unacked.
pub(super) fn on_screencast_frame(session: &SessionId, frame: crate::cdp::page::ScreencastFrame) {
    let mut casts = casts();
    if let Some(watched) = casts.find(session).and_then(|c| c.watched.as_mut()) {
        watched.unacked = Some(frame.session_id);
        // Numbered across every screencast of the Broker, so a watcher's `after` from before a
        // restart never hides the new screencast's first frames.
        let number = FRAME_NUMBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        watched.newest.send_replace((number, Some(frame.data)));
    }
}

impl BrowserService {
    /// The newest screencast frame of a Workspace's tab newer than frame number `after`,
    /// waiting up to [`CAST_WAIT`] for one: `(number, Some(jpeg))`, or `(number, None)` when
    /// none came. The first call for a tab starts `Page.startScreencast` on the tools' session
    /// of it; taking a frame acknowledges it (`Page.screencastFrameAck`, paced by
    /// [`CAST_MIN_INTERVAL`] unless the person holds the tab), so Chromium never queues frames
    /// for the watchers; once no call came for [`CAST_IDLE`] (the last watcher left) the view
    /// leaves the screencast, which stops unless a background screenshot still uses it. No
    /// turn is taken.
    pub async fn view_screencast(
        &self,
        workspace_id: &str,
        opaque: &str,
        after: u64,
    ) -> Result<(u64, Option<String>), FrameError> {
        let (handle, session, live) = self.view_tab(workspace_id, opaque)?;
        let target = handle.target.clone();
        let (mut newest, send) = casts().watch(&target, &session);
        let client = &live.client;
        if send == CastCall::StartWatched {
            // A stop first ends a background screenshot's screencast, whose unread frame would
            // otherwise hold the new one back; the new one keeps that screenshot's tab rendering.
            let _ = client
                .execute(&session, &StopScreencast {}, FRAME_TIMEOUT)
                .await;
            let cast = StartScreencast {
                format: "jpeg",
                quality: CAST_QUALITY,
                max_width: CAST_MAX_EDGE,
                max_height: CAST_MAX_EDGE,
                // Every frame: the paced acks bound the rate (`CAST_MIN_INTERVAL`); skipping
                // frames would also skip a static page's only one.
                every_nth_frame: None,
            };
            if let Err(error) = client.execute(&session, &cast, FRAME_TIMEOUT).await {
                casts().unwatch(&session);
                return Err(FrameError::Cdp(error.to_string()));
            }
            tokio::spawn(stop_when_unwatched(client.clone(), target.clone()));
        }
        let waiting = FrameWait::start(&session);
        let arrived = tokio::time::timeout(CAST_WAIT, newest.wait_for(|(n, _)| *n > after))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|frame| frame.clone());
        drop(waiting);
        let Some((number, data)) = arrived else {
            return Ok((newest.borrow().0, None));
        };
        let held = HELD
            .lock()
            .expect("held lock")
            .iter()
            .any(|h| h.target == target);
        let pause = if held {
            Duration::ZERO
        } else {
            CAST_MIN_INTERVAL
        };
        // One acknowledgement per pause: Chromium keeps two frames in flight and any ack frees
        // one, so pacing the acks is what bounds the frame rate.
        let ack = (casts().find(&session))
            .and_then(|c| c.watched.as_mut())
            .and_then(|w| w.schedule_ack(tokio::time::Instant::now(), pause));
        if let Some((frame, due)) = ack {
            let (client, ack) = (client.clone(), ScreencastFrameAck { session_id: frame });
            tokio::spawn(async move {
                tokio::time::sleep_until(due).await;
                if let Err(error) = client.execute(&session, &ack, FRAME_TIMEOUT).await {
                    tracing::debug!(%error, "screencast frame not acknowledged");
                }
            });
        }
        Ok((number, data))
    }
}

/// The view leaves the screencast of `target` once no watcher asked for a frame for
/// [`CAST_IDLE`], stopping it unless a background screenshot still uses it.
async fn stop_when_unwatched(client: CdpClient, target: TargetId) {
    loop {
        tokio::time::sleep(CAST_IDLE / 3).await;
        let Some(left) = casts().leave_if_idle(&target, CAST_IDLE) else {
            continue;
        };
        if let Some(session) = left {
            let _ = client
                .execute(&session, &StopScreencast {}, FRAME_TIMEOUT)
                .await;
        }
        return;
    }
}

/// How long a take-over waits for the Commands the agents queued on the tab before it.
const TAKEOVER_TURN_WAIT: Duration = Duration::from_secs(5);

/// How long one of the person's input steps (or a read around the take-over) may take.
const INPUT_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest key name the view forwards (`Enter`, `ArrowLeft`, one character).
const MAX_KEY_CHARS: usize = 24;

/// A tab the person at the live view holds.
struct Held {
    target: TargetId,
    handle: TabHandle,
    /// The tab's turn; `None` while a hand-off's Command holds it for the person.
    _turn: Option<TabGuard>,
    session: SessionId,
    url: String,
    title: String,
    mark: LoadMark,
    since: std::time::Instant,
}

/// Tabs held now: at most one entry per tab, each taken by the person at a view.
static HELD: std::sync::Mutex<Vec<Held>> = std::sync::Mutex::new(Vec::new());

/// One step of the person's input on a held tab, at a point given as fractions of the tab's
/// viewport (the view scales its picture of the tab).
#[derive(Debug, Clone, PartialEq)]
pub enum ViewInput {
    /// `button`: `left`, `middle` or `right`.
    Click {
        x: f64,
        y: f64,
        button: String,
    },
    Wheel {
        x: f64,
        y: f64,
        dx: f64,
        dy: f64,
    },
    /// A `KeyboardEvent.key`: one character, or a named key (`Enter`, `Backspace`, ...).
    Key {
        key: String,
    },
}

/// Who must hear of a take-over or hand-back: every Workspace managing or controlling the tab,
/// with its own id of the tab.
pub type Interested = Vec<(String, TargetRef)>;

/// The tab the person took, as it stood.
pub struct TakenOver {
    pub interested: Interested,
    pub url: String,
    pub title: String,
}

/// The tab handed back: what the person changed while they held it.
pub struct HandedBack {
    pub interested: Interested,
    pub url: String,
    pub title: String,
    pub url_changed: bool,
    pub title_changed: bool,
    pub document_changed: bool,
    pub held_ms: u64,
}

/// Why a take-over, an input step or a hand-back did not happen.
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    #[error("no such tab")]
    NotFound,
    #[error("an agent's Command on this tab is still running: try again in a moment")]
    Busy,
    #[error("the tab is not taken over: press Take over first")]
    NotHeld,
    #[error("{0}")]
    Invalid(String),
    #[error("the browser refused: {0}")]
    Cdp(String),
}

impl From<crate::cdp::CdpError> for TakeoverError {
    fn from(error: crate::cdp::CdpError) -> TakeoverError {
        TakeoverError::Cdp(error.to_string())
    }
}

/// URL and title of the tab's current history entry, bounded.
async fn page_info(
    client: &CdpClient,
    session: &SessionId,
) -> Result<(String, String), TakeoverError> {
    let history = client.navigation_history(session, INPUT_TIMEOUT).await?;
    Ok(history
        .entry(0)
        .map(|entry| (bound_url(&entry.url), bound_title(&entry.title)))
        .unwrap_or_default())
}

/// A point at fractions `(x, y)` of the tab's viewport, in its CSS pixels.
async fn viewport_point(
    client: &CdpClient,
    session: &SessionId,
    x: f64,
    y: f64,
) -> Result<(f64, f64), TakeoverError> {
    if !(0.0..=1.0).contains(&x) || !(0.0..=1.0).contains(&y) {
        return Err(TakeoverError::Invalid(
            "x and y are fractions from 0 to 1".to_owned(),
        ));
    }
    let metrics = client
        .execute(session, &GetLayoutMetrics {}, INPUT_TIMEOUT)
        .await?;
    let size = |name: &str| metrics.css_visual_viewport[name].as_f64().unwrap_or(0.0);
    Ok((x * size("clientWidth"), y * size("clientHeight")))
}

impl BrowserService {
    /// The person at the live view takes the tab behind a Workspace's opaque id; a second
    /// take-over of a held tab changes nothing. `handoff_holds_turn`: a hand-off's Command of
    /// this tab waits for the person, so it holds the turn on their behalf.
    pub async fn take_over(
        &self,
        workspace_id: &str,
        opaque: &str,
        handoff_holds_turn: bool,
    ) -> Result<TakenOver, TakeoverError> {
        let handle = self
            .tab_handle(&workspace_id.into(), &opaque.into())
            .map_err(|_| TakeoverError::NotFound)?;
        let live = self.live_of(workspace_id).ok_or(TakeoverError::NotFound)?;
        let target = handle.target.clone();
        let taken =
            self.with_target_registry(&target, |registry| registry.set_human(&target, true));
        if !taken.map_err(|_| TakeoverError::NotFound)? {
            let held = HELD.lock().expect("held lock");
            if let Some(held) = held.iter().find(|h| h.target == target) {
                return Ok(TakenOver {
                    interested: self
                        .with_target_registry(&target, |r| r.interested_workspaces(&target)),
                    url: held.url.clone(),
                    title: held.title.clone(),
                });
            }
        }
        let release = |service: &BrowserService| {
            service
                .with_target_registry(&target, |registry| registry.set_human(&target, false).ok());
        };
        let mut turn = None;
        if !handoff_holds_turn {
            match tokio::time::timeout(TAKEOVER_TURN_WAIT, handle.acquire()).await {
                Ok(guard) => turn = Some(guard),
                Err(_) => {
                    release(self);
                    return Err(TakeoverError::Busy);
                }
            }
        }
        let session = match turn.as_mut() {
            Some(guard) => guard
                .session_within(&live.client, INPUT_TIMEOUT)
                .await
                .map_err(TakeoverError::from),
            None => handle
                .books()
                .view_session
                .clone()
                .ok_or(TakeoverError::NotFound),
        };
        let info = match session {
            Ok(session) => page_info(&live.client, &session)
                .await
                .map(|info| (session, info)),
            Err(error) => Err(error),
        };
        let (session, (url, title)) = match info {
            Ok(found) => found,
            Err(error) => {
                release(self);
                return Err(error);
            }
        };
        let interested =
            self.with_target_registry(&target, |registry| registry.interested_workspaces(&target));
        let mut held = HELD.lock().expect("held lock");
        held.retain(|h| h.target != target);
        held.push(Held {
            target: target.clone(),
            mark: handle.load_mark(),
            handle,
            _turn: turn,
            session,
            url: url.clone(),
            title: title.clone(),
            since: std::time::Instant::now(),
        });
        Ok(TakenOver {
            interested,
            url,
            title,
        })
    }

    /// One step of the person's input on a tab they hold.
    pub async fn view_input(
        &self,
        workspace_id: &str,
        opaque: &str,
        step: ViewInput,
    ) -> Result<(), TakeoverError> {
        let handle = self
            .tab_handle(&workspace_id.into(), &opaque.into())
            .map_err(|_| TakeoverError::NotFound)?;
        let live = self.live_of(workspace_id).ok_or(TakeoverError::NotFound)?;
        let session = {
            let held = HELD.lock().expect("held lock");
            let found = held.iter().find(|h| h.target == handle.target);
            found
                .map(|h| h.session.clone())
                .ok_or(TakeoverError::NotHeld)?
        };
        let client = &live.client;
        match step {
            ViewInput::Click { x, y, button } => {
                let (x, y) = viewport_point(client, &session, x, y).await?;
                let button = MouseButton::from_name(&button);
                for kind in [
                    MouseEventType::MouseMoved,
                    MouseEventType::MousePressed,
                    MouseEventType::MouseReleased,
                ] {
                    let event = DispatchMouseEvent::step(kind, x, y, button, 1);
                    client.execute(&session, &event, INPUT_TIMEOUT).await?;
                }
            }
            ViewInput::Wheel { x, y, dx, dy } => {
                let (x, y) = viewport_point(client, &session, x, y).await?;
                let clamp = |d: f64| d.clamp(-10_000.0, 10_000.0);
                let wheel = MouseWheel::at(x, y, clamp(dx), clamp(dy));
                client.execute(&session, &wheel, INPUT_TIMEOUT).await?;
            }
            ViewInput::Key { key } => {
                if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
                    return Err(TakeoverError::Invalid("key must name one key".to_owned()));
                }
                let mut chars = key.chars();
                let stroke = match (chars.next(), chars.next()) {
                    (Some(ch), None) => input::stroke_for(ch),
                    _ => match input::table::named_key(&key) {
                        Some(named) => Stroke::Key {
                            key: input::Key::named(named),
                            shift: false,
                        },
                        None => return Err(TakeoverError::Invalid(format!("unknown key {key:?}"))),
                    },
                };
                match stroke {
                    Stroke::Key { key, shift } => {
                        let events = input::stroke_events(&key, shift);
                        input::send_key_events(client, &session, events, INPUT_TIMEOUT).await?;
                    }
                    Stroke::Insert(ch) => {
                        let text = InsertText {
                            text: ch.to_string(),
                        };
                        client.execute(&session, &text, INPUT_TIMEOUT).await?;
                    }
                    Stroke::InsertText(text) => {
                        client
                            .execute(&session, &InsertText { text }, INPUT_TIMEOUT)
                            .await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The person hands the tab back: Leases may take it again, the turn goes to the next
    /// Command, and what the person changed is read.
    pub async fn hand_back(
        &self,
        workspace_id: &str,
        opaque: &str,
    ) -> Result<HandedBack, TakeoverError> {
        let handle = self
            .tab_handle(&workspace_id.into(), &opaque.into())
            .map_err(|_| TakeoverError::NotFound)?;
        let target = handle.target.clone();
        let held = {
            let mut held = HELD.lock().expect("held lock");
            let position = held.iter().position(|h| h.target == target);
            held.remove(position.ok_or(TakeoverError::NotHeld)?)
        };
        let (url, title) = match self.live_of(workspace_id) {
            Some(live) => page_info(&live.client, &held.session)
                .await
                .unwrap_or_else(|_| (held.url.clone(), held.title.clone())),
            None => (held.url.clone(), held.title.clone()),
        };
        let document_changed = held.handle.navigated_since(&held.mark);
        let interested = self.with_target_registry(&target, |registry| {
            let _ = registry.set_human(&target, false);
            registry.interested_workspaces(&target)
        });
        let held_ms = held.since.elapsed().as_millis() as u64;
        // The turn goes with `held`: the next queued Command (none was let in) may run.
        Ok(HandedBack {
            interested,
            url_changed: url != held.url,
            title_changed: title != held.title,
            url,
            title,
            document_changed,
            held_ms,
        })
    }
}

/// How often a recording samples its tab: two frames a second.
pub const RECORDING_INTERVAL: Duration = Duration::from_millis(500);

/// Most frames one recording keeps (ten minutes at two a second); later ones are dropped.
pub const MAX_RECORDING_FRAMES: usize = 1_200;

/// Most bytes of frames (base64 JPEG) one recording keeps; later frames are dropped.
pub const MAX_RECORDING_FRAME_BYTES: usize = 32 * 1024 * 1024;

/// Recordings running at once in one Broker.
pub const MAX_RECORDINGS: usize = 4;

/// One frame of a recording: when it was taken (ms since the epoch) and its JPEG in base64.
pub struct RecordedFrame {
    pub at: i64,
    pub data: String,
}

/// What a stopped recording took.
pub struct Recording {
    pub started_at: i64,
    pub stopped_at: i64,
    /// Frames that differ from the one before, oldest first.
    pub frames: Vec<RecordedFrame>,
    /// A bound was reached and later frames were dropped.
    pub truncated: bool,
}

struct RunningRecording {
    target: TargetId,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Recording>,
}

static RECORDINGS: std::sync::Mutex<Vec<RunningRecording>> = std::sync::Mutex::new(Vec::new());

/// Why a recording did not start or stop.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("no such tab")]
    NotFound,
    #[error("this tab is being recorded already")]
    Already,
    #[error("{MAX_RECORDINGS} recordings run already: stop one first")]
    TooMany,
    #[error("this tab is not being recorded")]
    NotRecording,
}

impl BrowserService {
    /// Starts sampling frames of a Workspace's tab on the tools' session of it (as the view's
    /// frames), until [`BrowserService::stop_recording`]. Returns when it started (ms).
    pub fn start_recording(&self, workspace_id: &str, opaque: &str) -> Result<i64, RecordingError> {
        let handle = self
            .tab_handle(&workspace_id.into(), &opaque.into())
            .map_err(|_| RecordingError::NotFound)?;
        let mut running = RECORDINGS.lock().expect("recordings lock");
        running.retain(|r| !r.task.is_finished());
        if running.iter().any(|r| r.target == handle.target) {
            return Err(RecordingError::Already);
        }
        if running.len() >= MAX_RECORDINGS {
            return Err(RecordingError::TooMany);
        }
        let started_at = crate::version::now_ms();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let target = handle.target.clone();
        let task = tokio::spawn(record(self.clone(), handle, started_at, stopped));
        running.push(RunningRecording { target, stop, task });
        Ok(started_at)
    }

    /// Stops the recording of a Workspace's tab and hands over what it took.
    pub async fn stop_recording(
        &self,
        workspace_id: &str,
        opaque: &str,
    ) -> Result<Recording, RecordingError> {
        let handle = self
            .tab_handle(&workspace_id.into(), &opaque.into())
            .map_err(|_| RecordingError::NotFound)?;
        let found = {
            let mut running = RECORDINGS.lock().expect("recordings lock");
            let position = running.iter().position(|r| r.target == handle.target);
            running.remove(position.ok_or(RecordingError::NotRecording)?)
        };
        let _ = found.stop.send(());
        found.task.await.map_err(|_| RecordingError::NotRecording)
    }
}

/// Samples `handle` every `RECORDING_INTERVAL` and once more at `stopped`, keeping frames that
/// differ from the one before, within the bounds, until stopped or until the tab is gone.
async fn record(
    service: BrowserService,
    handle: TabHandle,
    started_at: i64,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) -> Recording {
    let mut frames: Vec<RecordedFrame> = Vec::new();
    let (mut bytes, mut truncated) = (0usize, false);
    let mut ticks = tokio::time::interval(RECORDING_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopping = false;
    while !stopping {
        // One last frame at the stop, so the recording ends on the tab as it was then.
        stopping = tokio::select! {
            _ = &mut stopped => true,
            _ = ticks.tick() => false,
        };
        if truncated {
            continue;
        }
        // A tab no connection knows any more (closed, or its browser gone) ends the recording
        // with what it took, freeing its place among the MAX_RECORDINGS.
        let Some(live) = service.live_with_target(&handle.target) else {
            break;
        };
        let Some(session) = handle.books().view_session.clone() else {
            continue;
        };
        let capture = CaptureScreenshot {
            format: "jpeg",
            quality: Some(FRAME_QUALITY),
            clip: None,
            capture_beyond_viewport: false,
            optimize_for_speed: true,
        };
        let Ok(reply) = live.client.execute(&session, &capture, FRAME_TIMEOUT).await else {
            continue;
        };
        if frames.last().is_some_and(|last| last.data == reply.data) {
            continue;
        }
        if frames.len() >= MAX_RECORDING_FRAMES
            || bytes + reply.data.len() > MAX_RECORDING_FRAME_BYTES
        {
            truncated = true;
            continue;
        }
        bytes += reply.data.len();
        frames.push(RecordedFrame {
            at: crate::version::now_ms(),
            data: reply.data,
        });
    }
    Recording {
        started_at,
        stopped_at: crate::version::now_ms(),
        frames,
        truncated,
    }
}

/// A hand-off an agent asked for (`browser.handoff`), waiting for the person's Done.
#[derive(Debug, Clone)]
pub struct Handoff {
    pub handoff_id: String,
    pub workspace_id: String,
    /// The Workspace's opaque id of the tab.
    pub target_id: String,
    pub reason: String,
    pub requested_at: i64,
}

/// What the person said when they pressed Done.
#[derive(Debug, Clone, Default)]
pub struct HandoffDone {
    pub note: Option<String>,
}

type Waiting = Vec<(Handoff, tokio::sync::oneshot::Sender<HandoffDone>)>;

/// Hand-offs waiting now, each tied to its running Command (so bounded by the Commands a
/// Broker runs at once): the entry goes when the Command ends, however it ends.
static HANDOFFS: std::sync::Mutex<Waiting> = std::sync::Mutex::new(Vec::new());

/// Keeps a hand-off listed while it lives; dropping it (the Command completed, timed out or
/// was cancelled) takes it off the list.
pub struct HandoffGuard {
    handoff_id: String,
}

impl Drop for HandoffGuard {
    fn drop(&mut self) {
        let mut waiting = HANDOFFS.lock().expect("handoffs lock");
        waiting.retain(|(h, _)| h.handoff_id != self.handoff_id);
    }
}

/// Lists `handoff` until the guard drops; the receiver resolves when the person is done.
pub fn open_handoff(
    handoff: Handoff,
) -> (HandoffGuard, tokio::sync::oneshot::Receiver<HandoffDone>) {
    let (done, wait) = tokio::sync::oneshot::channel();
    let guard = HandoffGuard {
        handoff_id: handoff.handoff_id.clone(),
    };
    HANDOFFS
        .lock()
        .expect("handoffs lock")
        .push((handoff, done));
    (guard, wait)
}

/// Every hand-off waiting now, oldest first.
pub fn pending_handoffs() -> Vec<Handoff> {
    let waiting = HANDOFFS.lock().expect("handoffs lock");
    waiting.iter().map(|(h, _)| h.clone()).collect()
}

/// Why Done reached no hand-off.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FinishError {
    #[error("no hand-off is waiting with that id")]
    NotFound,
    #[error("{0} hand-offs are waiting: name one by its id")]
    Ambiguous(usize),
}

/// The person is done with `handoff_id` (or with the only one waiting when `None`).
pub fn finish_handoff(handoff_id: Option<&str>, done: HandoffDone) -> Result<Handoff, FinishError> {
    let mut waiting = HANDOFFS.lock().expect("handoffs lock");
    let position = match handoff_id {
        Some(id) => waiting.iter().position(|(h, _)| h.handoff_id == id),
        None if waiting.len() > 1 => return Err(FinishError::Ambiguous(waiting.len())),
        None => (!waiting.is_empty()).then_some(0),
    };
    let (handoff, sender) = waiting.remove(position.ok_or(FinishError::NotFound)?);
    // A Command that ended in the same instant no longer listens; its guard is about to go.
    let _ = sender.send(done);
    Ok(handoff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_urls_on_a_registered_origin_are_the_views() {
        register_view_origin("http://127.0.0.1:45123");
        assert!(is_view_url("http://127.0.0.1:45123/"));
        assert!(is_view_url("http://127.0.0.1:45123"));
        assert!(is_view_url("http://127.0.0.1:45123/#bpview=[redacted]"));
        assert!(!is_view_url("http://127.0.0.1:451234/"));
        assert!(!is_view_url("http://127.0.0.1:4512/"));
        assert!(!is_view_url(
            "https://example.com/?u=http://127.0.0.1:45123/"
        ));
    }

    #[test]
    fn a_screencast_stops_only_when_its_last_user_leaves() {
        let (tab, session) = (TargetId::new("T"), SessionId::new("S"));
        let mut casts = Casts::default();
        // The view starts it; a background screenshot joins without a second start.
        assert_eq!(casts.watch(&tab, &session).1, CastCall::StartWatched);
        assert_eq!(casts.watch(&tab, &session).1, CastCall::Nothing);
        assert_eq!(casts.shoot(&session), CastCall::Nothing);
        // Watched a moment ago: the view stays; and while a call waits for a frame, however
        // long ago it asked.
        assert_eq!(casts.leave_if_idle(&tab, CAST_IDLE), None);
        casts.waiting(&session, true);
        assert_eq!(casts.leave_if_idle(&tab, Duration::ZERO), None);
        casts.waiting(&session, false);
        // The last watcher leaves while the screenshot runs: no stop under it.
        assert_eq!(casts.leave_if_idle(&tab, Duration::ZERO), Some(None));
        assert_eq!(casts.shot(&session), CastCall::Stop);
        assert!(casts.0.is_empty());

        // A screenshot starts it; the view joins (restarting it with its own frames), the
        // screenshot ends without stopping it, the last watcher's leaving stops it.
        assert_eq!(casts.shoot(&session), CastCall::StartTiny);
        assert_eq!(casts.shoot(&session), CastCall::Nothing);
        assert_eq!(casts.shot(&session), CastCall::Nothing);
        assert_eq!(casts.watch(&tab, &session).1, CastCall::StartWatched);
        assert_eq!(casts.shot(&session), CastCall::Nothing);
        let left = casts.leave_if_idle(&tab, Duration::ZERO);
        assert_eq!(left, Some(Some(session.clone())));
        assert!(casts.0.is_empty());
        // Nothing left to stop, and a stray end stops nothing.
        assert_eq!(casts.leave_if_idle(&tab, Duration::ZERO), Some(None));
        assert_eq!(casts.shot(&session), CastCall::Nothing);
    }

    #[test]
    fn frames_are_acknowledged_one_pause_apart_and_each_once() {
        let (tab, session) = (TargetId::new("T"), SessionId::new("S"));
        let mut casts = Casts::default();
        casts.watch(&tab, &session);
        let pause = CAST_MIN_INTERVAL;
        let now = tokio::time::Instant::now();
        let cast = casts
            .find(&session)
            .and_then(|c| c.watched.as_mut())
            .unwrap();
        assert_eq!(
            cast.schedule_ack(now, pause),
            None,
            "no frame, nothing to ack"
        );
        cast.unacked = Some(1);
        assert_eq!(cast.schedule_ack(now, pause), Some((1, now)));
        assert_eq!(cast.schedule_ack(now, pause), None, "a frame is acked once");
        // Chromium's second frame in flight, taken at once: its ack waits one pause.
        cast.unacked = Some(2);
        assert_eq!(cast.schedule_ack(now, pause), Some((2, now + pause)));
        // Taken long after: no wait beyond the pause since the last ack.
        cast.unacked = Some(3);
        let later = now + pause * 5;
        assert_eq!(cast.schedule_ack(later, pause), Some((3, later)));
        // While the person holds the tab there is no pause after an ack.
        cast.unacked = Some(4);
        assert_eq!(
            cast.schedule_ack(later, Duration::ZERO),
            Some((4, later + pause))
        );
        cast.unacked = Some(5);
        assert_eq!(
            cast.schedule_ack(later, Duration::ZERO),
            Some((5, later + pause))
        );
    }

    #[test]
    fn a_new_tools_session_moves_the_views_part_and_keeps_the_old_screenshot() {
        let tab = TargetId::new("T");
        let (old, new) = (SessionId::new("S1"), SessionId::new("S2"));
        let mut casts = Casts::default();
        assert_eq!(casts.watch(&tab, &old).1, CastCall::StartWatched);
        assert_eq!(casts.shoot(&old), CastCall::Nothing);
        assert_eq!(casts.watch(&tab, &new).1, CastCall::StartWatched);
        // The screenshot on the old session is its last user now.
        assert_eq!(casts.shot(&old), CastCall::Stop);
        assert_eq!(casts.leave_if_idle(&tab, Duration::ZERO), Some(Some(new)));
    }
}
