//! The CDP event pump: browser events in, journaled Workspace events out.
//!
//! Target discovery keeps the registry current (the janitor enabled it); a popup of a managed
//! tab becomes a managed tab of the same Workspace (`popup.opened`); a destroyed tab emits
//! `target.detached`; a URL change of a managed or controlled tab emits `navigation`; a new main
//! document emits `document.changed`. An event from an older generation is dropped before it is
//! journaled. When the janitor's stream ends, the browser is gone: `connection.lost`.
//!
//! Loads: the main-frame lifecycle and navigation events of a tab session (`Page.lifecycleEvent`,
//! `Page.frameStartedNavigating`, `Page.frameNavigated`, `Page.navigatedWithinDocument`,
//! `Page.frameStoppedLoading`) feed the tab's `LoadBook`, which load waits read; the pump also
//! keeps the service's record of targets created for Workspaces (popups added, destroyed
//! targets dropped).
//!
//! The pump is two halves: `on_event(&mut Tabs, ..)` is plain bookkeeping, one browser event in
//! and the `Effect`s it calls for out (events to journal, sessions to set up or resume, dialogs
//! to watch, requests to answer, download input), unit-tested without a browser; `run` is the
//! thin executor that applies them with the connection's client. `Tabs` is what one browser
//! connection knows of its tabs (the registry and the session map), so each connection owns its
//! own.
//!
//! Frames: out-of-process iframes auto-attached to a tab session are recorded in the tab's
//! `FrameBook` (and their own OOPIFs, recursively); a Workspace's selected frame that is removed,
//! or whose ancestor loads a new document, emits `watchdog.frame_detached` and
//! `observation.invalidated` with the opaque ids only. OOPIF sessions are kept apart from tab
//! sessions, so an OOPIF never looks like a tab (dialogs, `document.changed`).

use std::collections::HashMap;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::fetch::{NetControl, Reply};
use super::frames::FrameGone;
use super::registry::Registry;
use super::service::{BrowserService, Live};
use super::tab::TabHandle;
use crate::cdp::browser::{DownloadProgress, DownloadWillBegin};
use crate::cdp::fetch::RequestPaused;
use crate::cdp::page::{Enable, FrameNavigated, JavascriptDialogOpening};
use crate::cdp::target::{AttachedToTarget, SetAutoAttach};
use crate::cdp::{CdpClient, CdpEvent, Event, SessionId, TargetId, TargetInfo};
use crate::events::{Emit, EventSink};

/// How long a paused managed popup waits for its setup before it is resumed anyway (a popup
/// that keeps its opener is set up in a few ms; a `noopener` one cannot be before it runs).
const PAUSED_POPUP_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// How long the setup calls on a fresh OOPIF session may take.
const CHILD_SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// OOPIF sessions the pump maps to their tab, over all tabs: a bound for detach events that
/// never come; a frame beyond it is simply not reachable out of process.
const MAX_FRAME_SESSIONS: usize = 4096;

/// What one browser connection knows of its tabs: the registry (tabs, opaque ids, control,
/// dialogs; each tab owns its books) and the pump's map of flattened sessions. Replaced with the
/// connection, so ids and books die with their generation.
#[derive(Default)]
pub struct Tabs {
    pub registry: Registry,
    sessions: Sessions,
}

/// What the executor does for one event, in order.
pub enum Effect {
    /// Journal this event (network events in batches).
    Emit(Emit),
    /// Let a session paused at its start run, with nothing set up.
    Resume(SessionId),
    /// A fresh OOPIF session of a tracked frame: set it up (`setup_child`), then resume it.
    SetupFrame { session: SessionId, tab: TabHandle },
    /// A dedicated worker of a tab, paused at its start: network observation and the tab's
    /// interception (rules, URL policy) on its session, then resumed.
    SetupWorker { session: SessionId, tab: TabHandle },
    /// A managed popup paused at its start: its Workspace's rules and its session setup first,
    /// then resume it.
    SetupPopup {
        target: TargetId,
        session: SessionId,
        tab: TabHandle,
    },
    /// A dialog opened: wake the actions racing it, and tell the Workspaces once if it stays
    /// unanswered.
    DialogOpened { target: TargetId, dialog_id: String },
    /// A target created (or adopted as a popup) for a Workspace: remembered beyond the
    /// connection.
    Owned {
        target: TargetId,
        workspace_id: String,
    },
    /// A destroyed target: forgotten.
    Disowned(TargetId),
    /// The one answer to a paused request or an auth challenge.
    Fetch { session: SessionId, reply: Reply },
    /// Input for the download tracker (`session::downloads`), whose events follow in place.
    Download(DownloadInput),
}

/// What the download tracker learns from the pump.
#[derive(Debug)]
pub enum DownloadInput {
    Attached {
        session: SessionId,
        target: TargetId,
    },
    Detached(SessionId),
    WillBegin(SessionId, DownloadWillBegin),
    Progress(SessionId, DownloadProgress),
    /// A managed popup's first document response, paused (`fetch::first_document`).
    FirstDocument {
        session: SessionId,
        target: TargetId,
        paused: RequestPaused,
    },
    /// A tab left the registry with downloads still in its book (its sessions had not
    /// detached yet): they end as if they had.
    TabGone(super::downloads::DownloadBook),
    /// A response a controlled tab of a remote browser would download, paused
    /// (`downloads::remote_download`): streamed to the Broker, with the file name it gets.
    RemoteResponse {
        session: SessionId,
        target: TargetId,
        paused: RequestPaused,
        name: String,
    },
}

/// The pump's view of flattened sessions.
#[derive(Default)]
struct Sessions {
    /// Tab sessions (attached by the Broker) -> their tab.
    tabs: HashMap<SessionId, TargetId>,
    /// OOPIF sessions (auto-attached under a tab or another OOPIF) -> the tab they belong to.
    frames: HashMap<SessionId, TargetId>,
}

impl Sessions {
    /// The tab a tab or OOPIF session belongs to.
    fn tab_of(&self, session: &SessionId) -> Option<&TargetId> {
        self.tabs.get(session).or_else(|| self.frames.get(session))
    }
}

/// Network events wait this long for more before their batch is journaled: a page load's
/// requests and responses arrive as one burst and are journaled in one store transaction.
const NETWORK_BATCH_IDLE: std::time::Duration = std::time::Duration::from_millis(50);

/// A batch is journaled at this size at the latest, or when its oldest event waited
/// `NETWORK_BATCH_MAX_AGE` (a page that never stops loading still reports).
const NETWORK_BATCH_MAX: usize = 2000;
const NETWORK_BATCH_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(1);

pub async fn run(
    service: BrowserService,
    live: Live,
    mut events: mpsc::Receiver<CdpEvent>,
    mut janitor: tokio::process::Child,
) {
    // Network events held for one batch; any other event is journaled at once, after them, so
    // the journal keeps the browser's order.
    let mut batch: Vec<Emit> = Vec::new();
    let mut flush_at: Option<(tokio::time::Instant, tokio::time::Instant)> = None;
    loop {
        let next = match flush_at {
            None => events.recv().await,
            Some((idle, oldest)) => tokio::select! {
                event = events.recv() => event,
                () = tokio::time::sleep_until(idle.min(oldest)) => {
                    journal(service.events(), std::mem::take(&mut batch)).await;
                    flush_at = None;
                    continue;
                }
            },
        };
        let Some(event) = next else { break };
        if !service.is_current(&live) {
            continue;
        }
        let (session, event) = match event.decode() {
            Ok(decoded) => decoded,
            Err(error) => {
                tracing::debug!(%error, "skipping a malformed browser event");
                continue;
            }
        };
        if let (Some(session), Event::ScreencastFrame(frame)) = (&session, &event) {
            super::view::on_screencast_frame(session, frame.clone());
            continue;
        }
        let effects = live.with_tabs(|tabs| on_event(tabs, service.net(), session, event));
        let emits = effects
            .into_iter()
            .flat_map(|effect| execute(&service, &live, effect));
        for mut emit in emits.collect::<Vec<Emit>>() {
            emit.generation = Some(live.generation);
            let network = emit.event_type.starts_with("network.");
            batch.push(emit);
            if !network || batch.len() >= NETWORK_BATCH_MAX {
                journal(service.events(), std::mem::take(&mut batch)).await;
                flush_at = None;
                continue;
            }
            let now = tokio::time::Instant::now();
            let oldest = flush_at.map_or(now + NETWORK_BATCH_MAX_AGE, |(_, oldest)| oldest);
            flush_at = Some((now + NETWORK_BATCH_IDLE, oldest));
        }
    }
    journal(service.events(), batch).await;
    let _ = janitor.wait().await;
    service.on_lost(&live).await;
}

/// Journals a burst in one store transaction (`EventSink::emit_all`), then offers each event.
async fn journal(events: &EventSink, batch: Vec<Emit>) {
    if batch.is_empty() {
        return;
    }
    match events.emit_all(batch).await {
        Ok(rows) => {
            for error in rows.into_iter().filter_map(Result::err) {
                tracing::debug!(%error, "browser event not journaled (workspace gone)");
            }
        }
        Err(error) => tracing::warn!(%error, "browser events not journaled"),
    }
}

/// Applies one effect with the connection's client; returns the events it produced, to be
/// journaled in place.
fn execute(service: &BrowserService, live: &Live, effect: Effect) -> Vec<Emit> {
    let client = &live.client;
    match effect {
        Effect::Emit(emit) => return vec![emit],
        Effect::Resume(session) => {
            let client = client.clone();
            tokio::spawn(async move { resume(&client, &session).await });
        }
        Effect::SetupFrame { session, tab } => {
            let client = client.clone();
            tokio::spawn(async move {
                setup_child(&client, &session, &tab).await;
                // Whatever the setup achieved, the frame must not stay paused.
                resume(&client, &session).await;
            });
        }
        Effect::SetupWorker { session, tab } => {
            let client = client.clone();
            tokio::spawn(async move {
                let enabled =
                    super::network::enable(&client, &session, &tab, CHILD_SETUP_TIMEOUT).await;
                if let Err(error) = enabled {
                    tracing::debug!(%error, "enabling Network on a worker session");
                }
                // Whatever the setup achieved, the worker must not stay paused.
                resume(&client, &session).await;
            });
        }
        Effect::SetupPopup {
            target,
            session,
            tab,
        } => {
            let (service, live) = (service.clone(), live.clone());
            tokio::spawn(async move { setup_popup(&service, &live, target, session, tab).await });
        }
        Effect::DialogOpened { target, dialog_id } => {
            service.signal_dialog(&target);
            tokio::spawn(watch_dialog(service.clone(), target, dialog_id));
        }
        Effect::Owned {
            target,
            workspace_id,
        } => service.note_owned(&target, &workspace_id),
        Effect::Disowned(target) => service.forget_owned(&target),
        Effect::Fetch { session, reply } => super::fetch::send_reply(client, session, reply),
        Effect::Download(input) => {
            let downloads = service.downloads();
            return match input {
                DownloadInput::Attached { session, target } => {
                    super::downloads::on_session_attached(live, &session, &target);
                    Vec::new()
                }
                DownloadInput::Detached(session) => {
                    super::downloads::on_session_detached(downloads, live, &session)
                }
                DownloadInput::WillBegin(session, begin) => {
                    super::downloads::on_will_begin(downloads, live, &session, begin)
                }
                DownloadInput::Progress(session, progress) => {
                    super::downloads::on_progress(downloads, live, &session, progress)
                }
                DownloadInput::FirstDocument {
                    session,
                    target,
                    paused,
                } => {
                    super::downloads::on_first_document(service, live, session, target, paused);
                    Vec::new()
                }
                DownloadInput::TabGone(book) => {
                    super::downloads::on_tab_gone(downloads, live, book)
                }
                DownloadInput::RemoteResponse {
                    session,
                    target,
                    paused,
                    name,
                } => {
                    super::downloads::on_remote_response(
                        service, live, session, target, paused, name,
                    );
                    Vec::new()
                }
            };
        }
    }
    Vec::new()
}

fn emits(emits: Vec<Emit>) -> Vec<Effect> {
    emits.into_iter().map(Effect::Emit).collect()
}

/// One browser event (with the session it came on) in; what the executor must do out.
pub fn on_event(
    tabs: &mut Tabs,
    net: &NetControl,
    session: Option<SessionId>,
    event: Event,
) -> Vec<Effect> {
    let Tabs { registry, sessions } = tabs;
    note_activity(registry, sessions, session.as_ref(), &event);
    match (session.as_ref(), event) {
        (None, Event::TargetCreated(created)) => on_created(registry, &created.target_info),
        (None, Event::TargetInfoChanged(changed)) => {
            emits(on_info_changed(registry, &changed.target_info))
        }
        (None, Event::TargetDestroyed(destroyed)) => {
            let target = destroyed.target_id;
            // The tab's books go with it; downloads still in its book are ended first.
            let downloads = (registry.handle(&target))
                .map(|handle| std::mem::take(&mut *handle.downloads()))
                .filter(|book| !book.is_empty());
            let known = registry.remove(&target);
            let mut effects = vec![Effect::Disowned(target)];
            effects.extend(known.into_iter().map(|(workspace_id, opaque)| {
                let mut emit = Emit::new(
                    &workspace_id,
                    "target.detached",
                    json!({"targetId": opaque, "reason": "closed"}),
                );
                emit.target_id = Some(opaque.into());
                Effect::Emit(emit)
            }));
            effects.extend(downloads.map(|book| Effect::Download(DownloadInput::TabGone(book))));
            effects
        }
        (None, Event::AttachedToTarget(attached)) => {
            let (session, target) = (
                attached.session_id.clone(),
                attached.target_info.target_id.clone(),
            );
            let mut effects = vec![Effect::Download(DownloadInput::Attached {
                session: session.clone(),
                target: target.clone(),
            })];
            sessions.tabs.insert(session, target);
            effects.extend(on_page_attached(registry, attached));
            effects
        }
        (None, Event::DetachedFromTarget(detached)) => {
            // A tab session's OOPIF sessions end with it.
            if let Some(tab) = sessions.tabs.remove(&detached.session_id) {
                sessions.frames.retain(|_, owner| *owner != tab);
                if let Some(handle) = registry.handle(&tab) {
                    handle.withdraw_session(&detached.session_id);
                }
            }
            vec![Effect::Download(DownloadInput::Detached(
                detached.session_id,
            ))]
        }
        (Some(session), Event::DownloadWillBegin(begin)) => vec![Effect::Download(
            DownloadInput::WillBegin(session.clone(), begin),
        )],
        (Some(session), Event::DownloadProgress(progress)) => vec![Effect::Download(
            DownloadInput::Progress(session.clone(), progress),
        )],
        (Some(parent), Event::AttachedToTarget(attached)) => {
            vec![on_child_attached(registry, sessions, parent, attached)]
        }
        (Some(parent), Event::DetachedFromTarget(detached)) => {
            if let Some(tab) = sessions.tab_of(parent).cloned() {
                let child = detached.session_id;
                sessions.frames.remove(&child);
                if let Some(handle) = registry.handle(&tab) {
                    handle.frames().detach_child(&child);
                }
            }
            Vec::new()
        }
        (Some(session), Event::LifecycleEvent(lifecycle)) => {
            with_load(registry, sessions, session, &lifecycle.frame_id, |book| {
                book.on_lifecycle(&lifecycle.loader_id, &lifecycle.name);
            });
            Vec::new()
        }
        (Some(session), Event::FrameStartedNavigating(started)) => {
            // `sameDocument` and `historySameDocument` keep the document; every other type
            // (`differentDocument`, `reload`, `historyDifferentDocument`, ...) replaces it.
            let same_document = started.same_document();
            with_load(registry, sessions, session, &started.frame_id, |book| {
                book.on_started_navigating(started.loader_id.as_deref(), same_document);
            });
            Vec::new()
        }
        (Some(session), Event::NavigatedWithinDocument(within)) => {
            with_load(registry, sessions, session, &within.frame_id, |book| {
                book.on_within_document();
            });
            Vec::new()
        }
        (Some(session), Event::FrameStoppedLoading(stopped)) => {
            with_load(registry, sessions, session, &stopped.frame_id, |book| {
                book.on_stopped_loading();
            });
            Vec::new()
        }
        (Some(session), Event::FrameDetached(detached)) => {
            // A process swap keeps the frame (it continues in another session).
            match (sessions.tab_of(session).cloned(), detached.swapped()) {
                (Some(tab), false) => {
                    let gone = with_frames(registry, &tab, |book| {
                        book.on_frame_removed(&detached.frame_id)
                    });
                    emits(frame_detached(registry, &tab, gone))
                }
                _ => Vec::new(),
            }
        }
        (Some(session), Event::JavascriptDialogOpening(opening)) => {
            let Some(target) = sessions.tabs.get(session).cloned() else {
                return Vec::new();
            };
            on_dialog_opening(registry, session, &target, opening)
        }
        (Some(session), Event::JavascriptDialogClosed(closed)) => {
            let Some(target) = sessions.tabs.get(session).cloned() else {
                return Vec::new();
            };
            let Some(dialog) = registry.dialogs.remove(&target) else {
                return Vec::new();
            };
            let accepted = closed.result;
            emits(for_interested(registry, &target, |opaque| {
                (
                    "dialog",
                    json!({"dialogId": dialog.id, "state": "closed", "type": dialog.dialog_type, "accepted": accepted, "targetId": opaque}),
                )
            }))
        }
        (Some(session), Event::FileChooserOpened(opened)) => match sessions.tab_of(session) {
            Some(tab) => emits(super::choosers::on_opened(
                registry,
                &tab.clone(),
                session,
                &opened,
            )),
            None => Vec::new(),
        },
        (Some(session), Event::RequestWillBeSent(sent)) => {
            match sessions.tab_of(session).cloned() {
                Some(tab) => {
                    let tab_session = sessions.tabs.contains_key(session);
                    emits(super::network::on_request(
                        registry,
                        &tab,
                        session,
                        tab_session,
                        sent,
                    ))
                }
                None => Vec::new(),
            }
        }
        (Some(session), Event::ResponseReceived(received)) => match sessions.tab_of(session) {
            Some(tab) => emits(super::network::on_response(
                registry, tab, session, received,
            )),
            None => Vec::new(),
        },
        (Some(session), Event::LoadingFinished(finished)) => {
            if let Some(tab) = sessions.tab_of(session) {
                super::network::on_finished(registry, tab, session, finished);
            }
            Vec::new()
        }
        (Some(session), Event::LoadingFailed(failed)) => match sessions.tab_of(session) {
            Some(tab) => emits(super::network::on_failed(
                registry, net, tab, session, failed,
            )),
            None => Vec::new(),
        },
        (Some(session), Event::RequestPaused(paused)) => {
            let tab = sessions.tab_of(session).cloned();
            if super::fetch::first_document(registry, tab.as_ref(), &paused)
                && let Some(target) = tab
            {
                return vec![Effect::Download(DownloadInput::FirstDocument {
                    session: session.clone(),
                    target,
                    paused,
                })];
            }
            if let Some(target) = tab.as_ref()
                && let Some(name) = super::downloads::remote_download(registry, target, &paused)
            {
                return vec![Effect::Download(DownloadInput::RemoteResponse {
                    session: session.clone(),
                    target: target.clone(),
                    paused,
                    name,
                })];
            }
            let reply = super::fetch::on_paused(registry, net, tab.as_ref(), paused);
            vec![Effect::Fetch {
                session: session.clone(),
                reply,
            }]
        }
        (Some(session), Event::AuthRequired(required)) => {
            let tab = sessions.tab_of(session);
            let reply = super::fetch::on_auth(registry, net, tab, session, required);
            vec![Effect::Fetch {
                session: session.clone(),
                reply,
            }]
        }
        (Some(session), Event::FrameNavigated(navigated)) => {
            let is_main = navigated.frame.parent_id.is_none();
            if is_main {
                on_main_frame_navigated(registry, sessions, session, &navigated);
            }
            let mut emitted = match sessions.tab_of(session).cloned() {
                Some(tab) => {
                    let gone = with_frames(registry, &tab, |book| {
                        book.on_frame_navigated(&navigated.frame.id)
                    });
                    frame_detached(registry, &tab, gone)
                }
                None => Vec::new(),
            };
            let Some(target) = sessions.tabs.get(session).cloned() else {
                return emits(emitted);
            };
            if is_main {
                let url = bounded(&navigated.frame.url);
                emitted.extend(for_interested(registry, &target, |opaque| {
                    ("document.changed", json!({"targetId": opaque, "url": url}))
                }));
                // Refs are scoped to their document: every Observation held of the old one
                // stopped resolving.
                emitted.extend(for_interested(registry, &target, |opaque| {
                    (
                        "observation.invalidated",
                        json!({"targetId": opaque, "reason": "document_changed"}),
                    )
                }));
            }
            emits(emitted)
        }
        _ => Vec::new(),
    }
}

/// Feeds a tab session's console and request events into the tab's `ActivityBook`, beside
/// whatever else the pump does with them (`session::activity`).
fn note_activity(
    registry: &Registry,
    sessions: &Sessions,
    session: Option<&SessionId>,
    event: &Event,
) {
    if !super::activity::is_activity(event) {
        return;
    }
    let Some(tab) = session.and_then(|session| sessions.tabs.get(session)) else {
        return;
    };
    if let Some(handle) = registry.handle(tab) {
        super::activity::on_event(&mut handle.activity(), event);
    }
}

/// Feeds the tab's `LoadBook` from its own session's main-frame events (a page target's main
/// frame id is its target id). OOPIF sessions and subframes do not move the tab's load state.
fn with_load(
    registry: &Registry,
    sessions: &Sessions,
    session: &SessionId,
    frame_id: &str,
    f: impl FnOnce(&mut super::load::LoadBook),
) {
    let Some(tab) = sessions.tabs.get(session) else {
        return;
    };
    if frame_id != tab.as_str() {
        return;
    }
    if let Some(handle) = registry.handle(tab) {
        handle.on_load(f);
    }
}

/// A tab session's main frame committed a document: the tab's `LoadBook` learns its loader
/// (a back/forward cache restore fires no lifecycle events at all).
fn on_main_frame_navigated(
    registry: &Registry,
    sessions: &Sessions,
    session: &SessionId,
    navigated: &FrameNavigated,
) {
    let Some(tab) = sessions.tabs.get(session) else {
        return;
    };
    let Some(loader) = navigated.frame.loader_id.as_deref() else {
        return;
    };
    let restored = navigated.restored();
    if let Some(handle) = registry.handle(tab) {
        handle.on_load(|book| book.on_navigated(loader, restored));
    }
}

/// An OOPIF attached under a tab session or under another OOPIF of the same tab: record its
/// session, then enable `Page` there (its own frames' events) and auto-attach its OOPIFs. A
/// dedicated worker of the tab: its session is recorded as the tab's, for its requests.
fn on_child_attached(
    registry: &Registry,
    sessions: &mut Sessions,
    parent: &SessionId,
    attached: AttachedToTarget,
) -> Effect {
    let is_iframe = attached.target_info.target_type == "iframe";
    let child = attached.session_id;
    if attached.target_info.target_type == "worker" {
        // A dedicated worker's requests are its own session's: they count as the tab's.
        let tab = sessions.tab_of(parent).cloned();
        let handle = tab.as_ref().and_then(|tab| registry.handle(tab));
        return match (tab, handle) {
            (Some(tab), Some(handle)) if sessions.frames.len() < MAX_FRAME_SESSIONS => {
                sessions.frames.insert(child.clone(), tab);
                Effect::SetupWorker {
                    session: child,
                    tab: handle,
                }
            }
            _ => Effect::Resume(child),
        };
    }
    // For an iframe target the target id is the frame id (field notes §2).
    let frame = attached.target_info.target_id.as_str();
    let handle = match (sessions.tab_of(parent).cloned(), is_iframe) {
        (Some(tab), true) => registry.handle(&tab).map(|handle| (tab, handle)),
        _ => None,
    };
    let tracked = handle.filter(|(_, handle)| {
        let fits = sessions.frames.len() < MAX_FRAME_SESSIONS
            && handle.frames().attach_child(frame, child.clone());
        if !fits {
            tracing::debug!("too many out-of-process frames on one tab; one is not tracked");
        }
        fits
    });
    let Some((tab, handle)) = tracked else {
        // Auto-attach paused it at its start: it runs untracked.
        return Effect::Resume(child);
    };
    sessions.frames.insert(child.clone(), tab);
    Effect::SetupFrame {
        session: child,
        tab: handle,
    }
}

/// `Page`, network observation and interception, nested auto-attach and click truth on a fresh
/// OOPIF session, while it is still paused at its start.
async fn setup_child(client: &CdpClient, child: &SessionId, handle: &super::TabHandle) {
    if let Err(error) = client.execute(child, &Enable {}, CHILD_SETUP_TIMEOUT).await {
        tracing::debug!(%error, "enabling Page on an out-of-process frame session");
        return;
    }
    if let Err(error) = super::network::enable(client, child, handle, CHILD_SETUP_TIMEOUT).await {
        tracing::debug!(%error, "enabling Network on an out-of-process frame session");
    }
    let auto_attach = SetAutoAttach::iframes();
    if let Err(error) = client
        .execute(child, &auto_attach, CHILD_SETUP_TIMEOUT)
        .await
    {
        tracing::debug!(%error, "auto-attaching under an out-of-process frame session");
        return;
    }
    super::tab::register_document_start(client, child).await;
    super::choosers::intercept(client, child, true, CHILD_SETUP_TIMEOUT).await;
}

async fn resume(client: &CdpClient, child: &SessionId) {
    let run = crate::cdp::runtime::RunIfWaitingForDebugger {};
    if let Err(error) = client.execute(child, &run, CHILD_SETUP_TIMEOUT).await {
        tracing::debug!(%error, "resuming an auto-attached frame session");
    }
}

fn with_frames<T: Default>(
    registry: &Registry,
    tab: &TargetId,
    f: impl FnOnce(&mut super::FrameBook) -> T,
) -> T {
    match registry.handle(tab) {
        Some(handle) => f(&mut handle.frames()),
        None => T::default(),
    }
}

/// `watchdog.frame_detached` and `observation.invalidated` for each Workspace whose selected
/// frame went away: opaque ids and a reason only, never a URL or a raw id.
fn frame_detached(registry: &Registry, tab: &TargetId, gone: Vec<FrameGone>) -> Vec<Emit> {
    let mut emits = Vec::new();
    for gone in gone {
        let Some(opaque) = registry.known_opaque(&gone.workspace_id, tab) else {
            continue;
        };
        let mut watchdog = Emit::new(
            &gone.workspace_id,
            "watchdog.frame_detached",
            json!({"targetId": opaque, "frameId": gone.frame_id, "reason": gone.reason.as_str()}),
        );
        watchdog.target_id = Some(opaque.to_string());
        let mut invalidated = Emit::new(
            &gone.workspace_id,
            "observation.invalidated",
            json!({"targetId": opaque, "frameId": gone.frame_id, "reason": "frame_detached"}),
        );
        invalidated.target_id = Some(opaque.into());
        emits.push(watchdog);
        emits.push(invalidated);
    }
    emits
}

/// How long a dialog may stay unanswered before `watchdog.dialog_unhandled` (contract: 15 s).
const DIALOG_UNHANDLED_AFTER: std::time::Duration = std::time::Duration::from_secs(15);

fn on_dialog_opening(
    registry: &mut Registry,
    session: &SessionId,
    target: &TargetId,
    opening: JavascriptDialogOpening,
) -> Vec<Effect> {
    let dialog = crate::session::DialogInfo {
        id: crate::protocol::ids::new_id(crate::protocol::ids::IdKind::Dialog),
        target: target.clone(),
        session: session.clone(),
        dialog_type: opening.dialog_type,
        message: super::bounds::bound_name(&opening.message),
        default_prompt: opening
            .default_prompt
            .as_deref()
            .map(super::bounds::bound_name),
        url: bounded(&opening.url),
        opened_at: crate::version::now_ms(),
    };
    registry.dialogs.insert(target.clone(), dialog.clone());
    let mut effects = vec![Effect::DialogOpened {
        target: target.clone(),
        dialog_id: dialog.id.clone(),
    }];
    effects.extend(emits(for_interested(registry, target, |opaque| {
        (
            "dialog",
            json!({"dialogId": dialog.id, "state": "opened", "type": dialog.dialog_type, "message": dialog.message, "url": dialog.url, "targetId": opaque}),
        )
    })));
    effects
}

/// Never answered automatically: after 15 s a dialog still open tells its Workspaces once.
async fn watch_dialog(service: BrowserService, target: TargetId, dialog_id: String) {
    tokio::time::sleep(DIALOG_UNHANDLED_AFTER).await;
    let unhandled = service.with_target_registry(&target, |registry| {
        let still_open = registry
            .dialogs
            .get(&target)
            .is_some_and(|d| d.id == dialog_id);
        match still_open {
            true => for_interested(registry, &target, |opaque| {
                (
                    "watchdog.dialog_unhandled",
                    json!({"dialogId": dialog_id, "targetId": opaque, "pendingMs": DIALOG_UNHANDLED_AFTER.as_millis() as u64}),
                )
            }),
            false => Vec::new(),
        }
    });
    for emit in unhandled {
        let _ = service.events().emit(emit).await;
    }
}

fn on_created(registry: &mut Registry, info: &TargetInfo) -> Vec<Effect> {
    let Some(workspace_id) = registry.upsert(info) else {
        return Vec::new();
    };
    let opaque = registry.opaque_id(&workspace_id, &info.target_id);
    let opener = info
        .opener_id
        .as_ref()
        .map(|o| registry.opaque_id(&workspace_id, o));
    let mut popup = Emit::new(
        &workspace_id,
        "popup.opened",
        json!({"targetId": opaque, "openerTargetId": opener, "url": bounded(&info.url)}),
    );
    popup.target_id = Some(opaque.to_string());
    popup.sensitivity = "browser_data";
    let mut attached = Emit::new(
        &workspace_id,
        "target.attached",
        json!({"targetId": opaque, "managed": true, "popup": true}),
    );
    attached.target_id = Some(opaque.into());
    vec![
        Effect::Owned {
            target: info.target_id.clone(),
            workspace_id,
        },
        Effect::Emit(attached),
        Effect::Emit(popup),
    ]
}

/// A page session opened by the browser connection's auto-attach (`SetAutoAttach::pages`):
/// offered to its tab for the next `TabGuard::session`, so no tab gets a second session. A new
/// page waits paused at its start: a managed popup is set up first (network observation and
/// its Workspace's rules before its first request), anything else (a user's new tab, a tab the
/// Broker is creating) is resumed at once, with nothing enabled. The session of a tab nobody
/// controls stays idle: it observes nothing.
fn on_page_attached(registry: &mut Registry, attached: AttachedToTarget) -> Vec<Effect> {
    if attached.target_info.target_type != "page" {
        return Vec::new();
    }
    if !attached.waiting_for_debugger {
        // An existing page (or the Broker's own explicit attach, then already in use): offered
        // for the tab's next `TabGuard::session`.
        if let Some(handle) = registry.handle(&attached.target_info.target_id) {
            handle.offer_session(attached.session_id);
        }
        return Vec::new();
    }
    // The attach can arrive before `Target.targetCreated`: adopt a popup here if so.
    let mut effects = on_created(registry, &attached.target_info);
    let target = attached.target_info.target_id.clone();
    let handle = registry.handle(&target);
    let popup = registry.managed_by(&target).is_some() && attached.target_info.opener_id.is_some();
    let session = attached.session_id;
    if let Some(handle) = &handle {
        handle.offer_session(session.clone());
    }
    effects.push(match (handle, popup) {
        (Some(tab), true) => Effect::SetupPopup {
            target,
            session,
            tab,
        },
        _ => Effect::Resume(session),
    });
    effects
}

/// A managed popup paused at its start: its Workspace's rules, then its session, then resumed.
async fn setup_popup(
    service: &BrowserService,
    live: &Live,
    target: TargetId,
    session: SessionId,
    handle: TabHandle,
) {
    let client = &live.client;
    super::fetch::refresh_tab(live, service.net(), &target).await;
    // Before it runs: a popup whose first document is an attachment is captured from its
    // response, since Chromium closes it before its download's end is reported.
    super::fetch::watch_first_document(client, &session, &handle).await;
    let setup = async {
        let mut guard = handle.acquire().await;
        if let Err(error) = guard.session(client).await {
            tracing::debug!(%error, "setting up a new popup");
        }
    };
    tokio::pin!(setup);
    // A `noopener` popup (every `target="_blank"` link) answers its renderer's domains only
    // once it runs (docs/cdp.md, "Popups that turn into downloads"): past a short patience it
    // is resumed and its setup finishes right after. Whatever the setup achieves, the popup
    // (and its opener) must not stay paused.
    if tokio::time::timeout(PAUSED_POPUP_PATIENCE, &mut setup)
        .await
        .is_err()
    {
        resume(client, &session).await;
        setup.await;
        return;
    }
    resume(client, &session).await;
}

fn on_info_changed(registry: &mut Registry, info: &TargetInfo) -> Vec<Emit> {
    let before = registry.url_of(&info.target_id);
    registry.upsert(info);
    let url_changed = before.is_some_and(|before| before != super::bounds::bound_url(&info.url));
    match url_changed {
        true => for_interested(registry, &info.target_id, |opaque| {
            (
                "navigation",
                json!({"targetId": opaque, "url": bounded(&info.url)}),
            )
        }),
        false => Vec::new(),
    }
}

/// One event per Workspace that manages or controls the tab.
fn for_interested(
    registry: &mut Registry,
    target: &TargetId,
    make: impl Fn(&str) -> (&'static str, Value),
) -> Vec<Emit> {
    registry
        .interested_workspaces(target)
        .into_iter()
        .map(|(workspace_id, opaque)| {
            let (event_type, payload) = make(&opaque);
            let mut emit = Emit::new(&workspace_id, event_type, payload);
            emit.target_id = Some(opaque.into());
            emit.sensitivity = "browser_data";
            emit
        })
        .collect()
}

fn bounded(url: &str) -> String {
    super::bounds::bound_event_url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(method: &str, params: Value) -> Event {
        Event::decode(method, params).expect("a well-formed event")
    }

    fn info(id: &str, opener: Option<&str>) -> Value {
        json!({"targetId": id, "type": "page", "url": format!("http://127.0.0.1/{id}"), "openerId": opener})
    }

    /// A Broker-created tab `mine` of `workspace:a`, controlled by `lease:a`, with its tab
    /// session `S` attached (as the pump saw it).
    fn tabs_with_a_managed_tab() -> Tabs {
        let mut tabs = Tabs::default();
        let net = NetControl::default();
        let created = event(
            "Target.targetCreated",
            json!({"targetInfo": info("mine", None)}),
        );
        assert!(
            on_event(&mut tabs, &net, None, created).is_empty(),
            "a user tab at first"
        );
        tabs.registry.adopt(
            &TargetId::new("mine"),
            &"workspace:a".into(),
            &"lease:a".into(),
        );
        let attached = event(
            "Target.attachedToTarget",
            json!({"sessionId": "S", "targetInfo": info("mine", None), "waitingForDebugger": false}),
        );
        let effects = on_event(&mut tabs, &net, None, attached);
        assert!(matches!(
            effects.as_slice(),
            [Effect::Download(DownloadInput::Attached { .. })]
        ));
        tabs
    }

    fn emitted(effects: &[Effect]) -> Vec<(&str, &Value)> {
        effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Emit(emit) => Some((emit.event_type, &emit.payload)),
                _ => None,
            })
            .collect()
    }

    /// A watched popup's first document response goes to the download tracker (event in,
    /// effect out); the next one, and any request-stage pause, get the one Fetch answer.
    #[test]
    fn a_popup_first_document_response_goes_to_the_download_tracker() {
        let mut tabs = tabs_with_a_managed_tab();
        let net = NetControl::default();
        let attached = event(
            "Target.attachedToTarget",
            json!({"sessionId": "P", "targetInfo": info("popup", Some("mine")), "waitingForDebugger": true}),
        );
        on_event(&mut tabs, &net, None, attached);
        let handle = tabs.registry.handle(&TargetId::new("popup")).unwrap();
        super::super::fetch::watch_first_document_of(&handle);
        let paused = |id: &str, status: Option<u16>| {
            event(
                "Fetch.requestPaused",
                json!({"requestId": id, "request": {"url": "http://127.0.0.1/attach/a.txt", "method": "GET", "headers": {}}, "frameId": "popup", "resourceType": "Document", "responseStatusCode": status, "responseHeaders": [{"name": "Content-Disposition", "value": "attachment"}]}),
            )
        };
        let p = Some(SessionId::new("P"));
        let request_stage = on_event(&mut tabs, &net, p.clone(), paused("r0", None));
        assert!(matches!(request_stage.as_slice(), [Effect::Fetch { .. }]));
        let redirect = on_event(&mut tabs, &net, p.clone(), paused("r0", Some(302)));
        assert!(matches!(redirect.as_slice(), [Effect::Fetch { .. }]));
        let first = on_event(&mut tabs, &net, p.clone(), paused("r1", Some(200)));
        assert!(matches!(
            first.as_slice(),
            [Effect::Download(DownloadInput::FirstDocument { session, target, paused })]
                if session.as_str() == "P" && target.as_str() == "popup" && paused.request_id == "r1"
        ));
        let second = on_event(&mut tabs, &net, p, paused("r2", Some(200)));
        assert!(matches!(
            second.as_slice(),
            [Effect::Fetch { reply: Reply::Continue(go_on), .. }] if go_on.request_id == "r2"
        ));
    }

    #[test]
    fn a_popup_of_a_managed_tab_is_adopted_set_up_and_closed() {
        let mut tabs = tabs_with_a_managed_tab();
        let net = NetControl::default();
        // The attach (paused) can come before `targetCreated`.
        let attached = event(
            "Target.attachedToTarget",
            json!({"sessionId": "P", "targetInfo": info("popup", Some("mine")), "waitingForDebugger": true}),
        );
        let effects = on_event(&mut tabs, &net, None, attached);
        assert!(
            matches!(&effects[1], Effect::Owned { workspace_id, .. } if workspace_id == "workspace:a")
        );
        let events = emitted(&effects);
        assert_eq!(events[0].0, "target.attached");
        assert_eq!(events[0].1["popup"], true);
        assert_eq!(events[1].0, "popup.opened");
        assert_eq!(events[1].1["url"], "http://127.0.0.1/popup");
        assert!(
            matches!(effects.last(), Some(Effect::SetupPopup { session, .. }) if session.as_str() == "P"),
            "a managed popup is set up before it runs"
        );
        // A user tab's new page is only resumed.
        let user = event(
            "Target.attachedToTarget",
            json!({"sessionId": "U", "targetInfo": info("user", None), "waitingForDebugger": true}),
        );
        let effects = on_event(&mut tabs, &net, None, user);
        assert!(matches!(effects.last(), Some(Effect::Resume(session)) if session.as_str() == "U"));
        assert!(emitted(&effects).is_empty());
        // Closing it tells its Workspace, with the same opaque id.
        let opaque = events[0].1["targetId"].clone();
        let destroyed = event("Target.targetDestroyed", json!({"targetId": "popup"}));
        let effects = on_event(&mut tabs, &net, None, destroyed);
        assert!(matches!(&effects[0], Effect::Disowned(target) if target.as_str() == "popup"));
        assert_eq!(
            emitted(&effects),
            vec![(
                "target.detached",
                &json!({"targetId": opaque, "reason": "closed"})
            )]
        );
    }

    /// A tab destroyed before its sessions detached takes its download book out of the
    /// registry with it, handed to the tracker to end what is left; an empty book is simply
    /// dropped with the tab.
    #[test]
    fn a_closed_tab_takes_its_books_with_it() {
        let mut tabs = tabs_with_a_managed_tab();
        let net = NetControl::default();
        let mine = TargetId::new("mine");
        let handle = tabs.registry.handle(&mine).unwrap();
        handle.downloads().watch(SessionId::new("S"));
        drop(handle);
        let destroyed = event("Target.targetDestroyed", json!({"targetId": "mine"}));
        let effects = on_event(&mut tabs, &net, None, destroyed);
        assert!(matches!(
            effects.last(),
            Some(Effect::Download(DownloadInput::TabGone(book))) if !book.is_empty()
        ));
        assert!(tabs.registry.handle(&mine).is_none());
        // A tab whose sessions detached first leaves nothing for the tracker.
        let created = event(
            "Target.targetCreated",
            json!({"targetInfo": info("other", None)}),
        );
        on_event(&mut tabs, &net, None, created);
        let destroyed = event("Target.targetDestroyed", json!({"targetId": "other"}));
        let effects = on_event(&mut tabs, &net, None, destroyed);
        assert!(
            !effects
                .iter()
                .any(|effect| matches!(effect, Effect::Download(_)))
        );
    }

    /// Fills a tab's console and network books through the pump, as its session would.
    fn fill_books(tabs: &mut Tabs, net: &NetControl, session: &str, n: usize) {
        for i in 0..n {
            let logged = event(
                "Runtime.consoleAPICalled",
                json!({"type": "log", "args": [{"type": "string", "value": format!("line {i}")}], "timestamp": 5.0}),
            );
            on_event(tabs, net, Some(SessionId::new(session)), logged);
            let sent = event(
                "Network.requestWillBeSent",
                json!({"requestId": format!("R{i}"), "request": {"url": "http://127.0.0.1/x", "method": "GET"},
                    "type": "XHR", "frameId": "mine", "timestamp": 1.0, "wallTime": 2.0}),
            );
            on_event(tabs, net, Some(SessionId::new(session)), sent);
        }
    }

    /// Closing a tab frees its books: the registry lets its handle go, so the books go with the
    /// last handle; ending control of a user tab nobody else manages or controls empties what
    /// they kept of the page, while a managed tab keeps its books for its Workspace.
    #[test]
    fn a_tab_s_books_go_when_it_closes_or_its_control_ends() {
        let mut tabs = tabs_with_a_managed_tab();
        let net = NetControl::default();
        let mine = TargetId::new("mine");
        let sizes = |handle: &TabHandle| {
            let console = handle.activity().len();
            (console, handle.network().len())
        };
        let handle = tabs.registry.handle(&mine).unwrap();
        handle.activity().start(0);
        fill_books(&mut tabs, &net, "S", 10);
        assert_eq!(sizes(&handle), (10, 10));
        // The managed tab's Lease lets go: the Workspace still manages it, the books stay.
        assert!(
            tabs.registry
                .release_control(&mine, &"workspace:a".into(), &"lease:a".into())
        );
        assert_eq!(sizes(&handle), (10, 10));
        // Closed: only this test's handle is left holding the books.
        let destroyed = event("Target.targetDestroyed", json!({"targetId": "mine"}));
        on_event(&mut tabs, &net, None, destroyed);
        assert_eq!(handle.holders(), 1, "the registry let the tab's books go");

        // A user tab under a Lease's control: its books empty when the control ends.
        let created = event(
            "Target.targetCreated",
            json!({"targetInfo": info("user", None)}),
        );
        on_event(&mut tabs, &net, None, created);
        let user = TargetId::new("user");
        let attached = event(
            "Target.attachedToTarget",
            json!({"sessionId": "U", "targetInfo": info("user", None), "waitingForDebugger": false}),
        );
        on_event(&mut tabs, &net, None, attached);
        assert_eq!(
            tabs.registry
                .acquire_control(&user, &"workspace:a".into(), &"lease:a".into()),
            Ok(false)
        );
        let handle = tabs.registry.handle(&user).unwrap();
        handle.activity().start(0);
        fill_books(&mut tabs, &net, "U", 10);
        assert_eq!(sizes(&handle), (10, 10));
        assert_eq!(
            tabs.registry
                .end_lease_control(&"workspace:a".into(), &"lease:a".into()),
            vec![user]
        );
        assert_eq!(sizes(&handle), (0, 0));
        assert_eq!(handle.network().bytes(), 0);
    }

    #[test]
    fn a_main_frame_commit_changes_the_document_and_feeds_the_load_book() {
        let mut tabs = tabs_with_a_managed_tab();
        let net = NetControl::default();
        let handle = tabs.registry.handle(&TargetId::new("mine")).unwrap();
        let before = handle.load_mark();
        let navigated = event(
            "Page.frameNavigated",
            json!({"frame": {"id": "mine", "loaderId": "L2", "url": "http://127.0.0.1/next"}}),
        );
        let effects = on_event(&mut tabs, &net, Some(SessionId::new("S")), navigated);
        let events = emitted(&effects);
        assert_eq!(events.len(), 2, "only workspace:a is interested");
        assert_eq!(events[0].0, "document.changed");
        assert_eq!(events[0].1["url"], "http://127.0.0.1/next");
        assert_eq!(events[1].0, "observation.invalidated");
        assert_eq!(events[1].1["reason"], "document_changed");
        assert!(
            handle.navigated_since(&before),
            "the load book learnt the loader"
        );
        // A session the pump never saw attach moves nothing.
        let stray = event(
            "Page.frameNavigated",
            json!({"frame": {"id": "mine", "loaderId": "L3", "url": "http://127.0.0.1/x"}}),
        );
        assert!(on_event(&mut tabs, &net, Some(SessionId::new("X")), stray).is_empty());
    }

    #[test]
    fn a_dialog_is_recorded_signalled_and_told_to_its_workspace() {
        let mut tabs = tabs_with_a_managed_tab();
        let net = NetControl::default();
        let opening = event(
            "Page.javascriptDialogOpening",
            json!({"url": "http://127.0.0.1/mine", "message": "Sure?", "type": "confirm"}),
        );
        let effects = on_event(&mut tabs, &net, Some(SessionId::new("S")), opening);
        let Some(Effect::DialogOpened { target, dialog_id }) = effects.first() else {
            panic!("the dialog race is woken first");
        };
        assert_eq!(target.as_str(), "mine");
        let events = emitted(&effects);
        assert_eq!(events[0].0, "dialog");
        assert_eq!(events[0].1["state"], "opened");
        assert_eq!(events[0].1["dialogId"], json!(dialog_id));
        assert!(tabs.registry.dialogs.contains_key(&TargetId::new("mine")));
        let closed = event("Page.javascriptDialogClosed", json!({"result": true}));
        let effects = on_event(&mut tabs, &net, Some(SessionId::new("S")), closed);
        assert_eq!(emitted(&effects)[0].1["accepted"], true);
        assert!(tabs.registry.dialogs.is_empty());
    }

    #[test]
    fn requests_are_recorded_and_paused_ones_answered_from_the_rules() {
        let mut tabs = tabs_with_a_managed_tab();
        let net = NetControl::default();
        let sent = event(
            "Network.requestWillBeSent",
            json!({"requestId": "R1", "request": {"url": "http://127.0.0.1/mine", "method": "GET"},
                "type": "Document", "frameId": "mine", "timestamp": 1.0, "wallTime": 2.0}),
        );
        let effects = on_event(&mut tabs, &net, Some(SessionId::new("S")), sent);
        let events = emitted(&effects);
        assert_eq!(events[0].0, "network.request");
        assert_eq!(events[0].1["mainDocument"], true);
        let handle = tabs.registry.handle(&TargetId::new("mine")).unwrap();
        assert_eq!(handle.network().len(), 1);
        assert_eq!(
            handle.activity().network().in_flight,
            1,
            "the activity book saw it too"
        );

        assert_eq!(
            fetch_reply(&mut tabs, &net, "S", "http://127.0.0.1/a.png"),
            "continue"
        );
        net.add_rule(
            "workspace:a",
            super::super::fetch::Rule {
                id: "rule:1".into(),
                pattern: "*.png".into(),
                action: super::super::fetch::RuleAction::Block,
                created_at: 0,
            },
        )
        .unwrap();
        assert_eq!(
            fetch_reply(&mut tabs, &net, "S", "http://127.0.0.1/a.png"),
            "fail"
        );
        // A session the pump does not know: continued unchanged, never blocked.
        assert_eq!(
            fetch_reply(&mut tabs, &net, "X", "http://127.0.0.1/a.png"),
            "continue"
        );
    }

    /// The one answer the pump gives a paused request of `url` on `session`: "continue" or
    /// "fail" (anything else panics).
    fn fetch_reply(tabs: &mut Tabs, net: &NetControl, session: &str, url: &str) -> &'static str {
        let paused = event(
            "Fetch.requestPaused",
            json!({"requestId": "F1", "request": {"url": url, "method": "GET"}}),
        );
        let effects = on_event(tabs, net, Some(SessionId::new(session)), paused);
        match effects.as_slice() {
            [
                Effect::Fetch {
                    reply: Reply::Continue(_),
                    ..
                },
            ] => "continue",
            [
                Effect::Fetch {
                    reply: Reply::Fail(_),
                    ..
                },
            ] => "fail",
            _ => panic!("not one Fetch answer: {} effects", effects.len()),
        }
    }
}
