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
//! Frames: out-of-process iframes auto-attached to a tab session are recorded in the tab's
//! `FrameBook` (and their own OOPIFs, recursively); a Workspace's selected frame that is removed,
//! or whose ancestor loads a new document, emits `watchdog.frame_detached` and
//! `observation.invalidated` with the opaque ids only. OOPIF sessions are kept apart from tab
//! sessions, so an OOPIF never looks like a tab (dialogs, `document.changed`).

use std::collections::HashMap;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::frames::FrameGone;
use super::service::{BrowserService, Live};
use crate::cdp::page::{Enable, FrameNavigated, JavascriptDialogOpening};
use crate::cdp::target::{AttachedToTarget, SetAutoAttach};
use crate::cdp::{CdpClient, CdpEvent, Event, SessionId, TargetId, TargetInfo};
use crate::events::Emit;

/// How long a paused managed popup waits for its setup before it is resumed anyway (a popup
/// that keeps its opener is set up in a few ms; a `noopener` one cannot be before it runs).
const PAUSED_POPUP_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// How long the setup calls on a fresh OOPIF session may take.
const CHILD_SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// OOPIF sessions the pump maps to their tab, over all tabs: a bound for detach events that
/// never come; a frame beyond it is simply not reachable out of process.
const MAX_FRAME_SESSIONS: usize = 4096;

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
    let mut sessions = Sessions::default();
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
                    journal(&service, std::mem::take(&mut batch)).await;
                    flush_at = None;
                    continue;
                }
            },
        };
        let Some(event) = next else { break };
        if service
            .live()
            .is_none_or(|now| now.generation != live.generation)
        {
            continue;
        }
        for mut emit in on_event(&service, &live.client, &mut sessions, event) {
            emit.generation = Some(live.generation);
            let network = emit.event_type.starts_with("network.");
            batch.push(emit);
            if !network || batch.len() >= NETWORK_BATCH_MAX {
                journal(&service, std::mem::take(&mut batch)).await;
                flush_at = None;
                continue;
            }
            let now = tokio::time::Instant::now();
            let oldest = flush_at.map_or(now + NETWORK_BATCH_MAX_AGE, |(_, oldest)| oldest);
            flush_at = Some((now + NETWORK_BATCH_IDLE, oldest));
        }
    }
    journal(&service, batch).await;
    let _ = janitor.wait().await;
    service.on_lost(&live).await;
}

/// Journals a burst in one store transaction (`EventSink::emit_all`), then offers each event.
async fn journal(service: &BrowserService, batch: Vec<Emit>) {
    if batch.is_empty() {
        return;
    }
    match service.events().emit_all(batch).await {
        Ok(rows) => {
            for error in rows.into_iter().filter_map(Result::err) {
                tracing::debug!(%error, "browser event not journaled (workspace gone)");
            }
        }
        Err(error) => tracing::warn!(%error, "browser events not journaled"),
    }
}

fn on_event(
    service: &BrowserService,
    client: &CdpClient,
    sessions: &mut Sessions,
    event: CdpEvent,
) -> Vec<Emit> {
    let (session, event) = match event.decode() {
        Ok(decoded) => decoded,
        Err(error) => {
            tracing::debug!(%error, "skipping a malformed browser event");
            return Vec::new();
        }
    };
    note_activity(service, sessions, session.as_ref(), &event);
    match (session.as_ref(), event) {
        (None, Event::TargetCreated(created)) => on_created(service, &created.target_info),
        (None, Event::TargetInfoChanged(changed)) => on_info_changed(service, &changed.target_info),
        (None, Event::TargetDestroyed(destroyed)) => {
            let target = destroyed.target_id;
            let known = service.with_registry(|registry| registry.remove(&target));
            service.forget_owned(&target);
            known
                .into_iter()
                .map(|(workspace_id, opaque)| {
                    let mut emit = Emit::new(
                        &workspace_id,
                        "target.detached",
                        json!({"targetId": opaque, "reason": "closed"}),
                    );
                    emit.target_id = Some(opaque);
                    emit
                })
                .collect()
        }
        (None, Event::AttachedToTarget(attached)) => {
            let (session, target) = (
                attached.session_id.clone(),
                attached.target_info.target_id.clone(),
            );
            super::downloads::on_session_attached(service, &session, &target);
            sessions.tabs.insert(session, target);
            on_page_attached(service, client, attached)
        }
        (None, Event::DetachedFromTarget(detached)) => {
            // A tab session's OOPIF sessions end with it.
            if let Some(tab) = sessions.tabs.remove(&detached.session_id) {
                sessions.frames.retain(|_, owner| *owner != tab);
                if let Some(handle) = service.with_registry(|registry| registry.handle(&tab)) {
                    handle.withdraw_session(&detached.session_id);
                }
            }
            super::downloads::on_session_detached(service, client, &detached.session_id)
        }
        (Some(session), Event::DownloadWillBegin(begin)) => {
            super::downloads::on_will_begin(service, client, session, begin)
        }
        (Some(session), Event::DownloadProgress(progress)) => {
            super::downloads::on_progress(service, client, session, progress)
        }
        (Some(parent), Event::AttachedToTarget(attached)) => {
            on_child_attached(service, client, sessions, parent, attached);
            Vec::new()
        }
        (Some(parent), Event::DetachedFromTarget(detached)) => {
            if let Some(tab) = sessions.tab_of(parent).cloned() {
                let child = detached.session_id;
                sessions.frames.remove(&child);
                if let Some(handle) = service.with_registry(|registry| registry.handle(&tab)) {
                    handle.frames().detach_child(&child);
                }
            }
            Vec::new()
        }
        (Some(session), Event::LifecycleEvent(lifecycle)) => {
            with_load(service, sessions, session, &lifecycle.frame_id, |book| {
                book.on_lifecycle(&lifecycle.loader_id, &lifecycle.name);
            });
            Vec::new()
        }
        (Some(session), Event::FrameStartedNavigating(started)) => {
            // `sameDocument` and `historySameDocument` keep the document; every other type
            // (`differentDocument`, `reload`, `historyDifferentDocument`, ...) replaces it.
            let same_document = started.same_document();
            with_load(service, sessions, session, &started.frame_id, |book| {
                book.on_started_navigating(started.loader_id.as_deref(), same_document);
            });
            Vec::new()
        }
        (Some(session), Event::NavigatedWithinDocument(within)) => {
            with_load(service, sessions, session, &within.frame_id, |book| {
                book.on_within_document();
            });
            Vec::new()
        }
        (Some(session), Event::FrameStoppedLoading(stopped)) => {
            with_load(service, sessions, session, &stopped.frame_id, |book| {
                book.on_stopped_loading();
            });
            Vec::new()
        }
        (Some(session), Event::FrameDetached(detached)) => {
            // A process swap keeps the frame (it continues in another session).
            match (sessions.tab_of(session).cloned(), detached.swapped()) {
                (Some(tab), false) => {
                    let gone = with_frames(service, &tab, |book| {
                        book.on_frame_removed(&detached.frame_id)
                    });
                    frame_detached(service, &tab, gone)
                }
                _ => Vec::new(),
            }
        }
        (Some(session), Event::JavascriptDialogOpening(opening)) => {
            let Some(target) = sessions.tabs.get(session).cloned() else {
                return Vec::new();
            };
            on_dialog_opening(service, session, &target, opening)
        }
        (Some(session), Event::JavascriptDialogClosed(closed)) => {
            let Some(target) = sessions.tabs.get(session).cloned() else {
                return Vec::new();
            };
            let dialog = service.with_registry(|registry| registry.dialogs.remove(&target));
            let Some(dialog) = dialog else {
                return Vec::new();
            };
            let accepted = closed.result;
            for_interested(service, &target, |opaque| {
                (
                    "dialog",
                    json!({"dialogId": dialog.id, "state": "closed", "type": dialog.dialog_type, "accepted": accepted, "targetId": opaque}),
                )
            })
        }
        (Some(session), Event::FileChooserOpened(opened)) => match sessions.tab_of(session) {
            Some(tab) => super::choosers::on_opened(service, &tab.clone(), session, &opened),
            None => Vec::new(),
        },
        (Some(session), Event::RequestWillBeSent(sent)) => {
            match sessions.tab_of(session).cloned() {
                Some(tab) => {
                    let tab_session = sessions.tabs.contains_key(session);
                    super::network::on_request(service, &tab, session, tab_session, sent)
                }
                None => Vec::new(),
            }
        }
        (Some(session), Event::ResponseReceived(received)) => match sessions.tab_of(session) {
            Some(tab) => super::network::on_response(service, tab, session, received),
            None => Vec::new(),
        },
        (Some(session), Event::LoadingFinished(finished)) => {
            if let Some(tab) = sessions.tab_of(session) {
                super::network::on_finished(service, tab, session, finished);
            }
            Vec::new()
        }
        (Some(session), Event::LoadingFailed(failed)) => match sessions.tab_of(session) {
            Some(tab) => super::network::on_failed(service, tab, session, failed),
            None => Vec::new(),
        },
        (Some(session), Event::RequestPaused(paused)) => {
            super::fetch::on_paused(service, client, sessions.tab_of(session), session, paused);
            Vec::new()
        }
        (Some(session), Event::AuthRequired(required)) => {
            super::fetch::on_auth(service, client, sessions.tab_of(session), session, required);
            Vec::new()
        }
        (Some(session), Event::FrameNavigated(navigated)) => {
            let is_main = navigated.frame.parent_id.is_none();
            if is_main {
                on_main_frame_navigated(service, sessions, session, &navigated);
            }
            let mut emits = match sessions.tab_of(session).cloned() {
                Some(tab) => {
                    let gone = with_frames(service, &tab, |book| {
                        book.on_frame_navigated(&navigated.frame.id)
                    });
                    frame_detached(service, &tab, gone)
                }
                None => Vec::new(),
            };
            let Some(target) = sessions.tabs.get(session).cloned() else {
                return emits;
            };
            emits.extend(match is_main {
                true => {
                    let url = bounded(&navigated.frame.url);
                    let mut changed = for_interested(service, &target, |opaque| {
                        ("document.changed", json!({"targetId": opaque, "url": url}))
                    });
                    // Refs are scoped to their document: every Observation held of the old one
                    // stopped resolving.
                    changed.extend(for_interested(service, &target, |opaque| {
                        (
                            "observation.invalidated",
                            json!({"targetId": opaque, "reason": "document_changed"}),
                        )
                    }));
                    changed
                }
                false => Vec::new(),
            });
            emits
        }
        _ => Vec::new(),
    }
}

/// Feeds a tab session's console and request events into the tab's `ActivityBook`, beside
/// whatever else the pump does with them (`session::activity`).
fn note_activity(
    service: &BrowserService,
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
    if let Some(handle) = service.with_registry(|registry| registry.handle(tab)) {
        super::activity::on_event(&mut handle.activity(), event);
    }
}

/// Feeds the tab's `LoadBook` from its own session's main-frame events (a page target's main
/// frame id is its target id). OOPIF sessions and subframes do not move the tab's load state.
fn with_load(
    service: &BrowserService,
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
    if let Some(handle) = service.with_registry(|registry| registry.handle(tab)) {
        handle.on_load(f);
    }
}

/// A tab session's main frame committed a document: the tab's `LoadBook` learns its loader
/// (a back/forward cache restore fires no lifecycle events at all).
fn on_main_frame_navigated(
    service: &BrowserService,
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
    if let Some(handle) = service.with_registry(|registry| registry.handle(tab)) {
        handle.on_load(|book| book.on_navigated(loader, restored));
    }
}

/// An OOPIF attached under a tab session or under another OOPIF of the same tab: record its
/// session, then enable `Page` there (its own frames' events) and auto-attach its OOPIFs.
fn on_child_attached(
    service: &BrowserService,
    client: &CdpClient,
    sessions: &mut Sessions,
    parent: &SessionId,
    attached: AttachedToTarget,
) {
    let is_iframe = attached.target_info.target_type == "iframe";
    let child = attached.session_id;
    // For an iframe target the target id is the frame id (field notes §2).
    let frame = attached.target_info.target_id.as_str();
    let handle = match (sessions.tab_of(parent).cloned(), is_iframe) {
        (Some(tab), true) => service
            .with_registry(|registry| registry.handle(&tab))
            .map(|handle| (tab, handle)),
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
    let client = client.clone();
    let Some((tab, handle)) = tracked else {
        // Auto-attach paused it at its start: it runs untracked.
        tokio::spawn(async move { resume(&client, &child).await });
        return;
    };
    sessions.frames.insert(child.clone(), tab);
    tokio::spawn(async move {
        setup_child(&client, &child, &handle).await;
        // Whatever the setup achieved, the frame must not stay paused.
        resume(&client, &child).await;
    });
}

/// `Page`, network observation and interception, nested auto-attach and click truth on a fresh
/// OOPIF session, while it is still paused at its start.
async fn setup_child(client: &CdpClient, child: &SessionId, handle: &super::TabHandle) {
    if let Err(error) = client.execute(child, &Enable {}, CHILD_SETUP_TIMEOUT).await {
        tracing::debug!(%error, "enabling Page on an out-of-process frame session");
        return;
    }
    if let Err(error) = super::network::enable(client, child, handle).await {
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
    super::choosers::intercept(client, child, true).await;
}

async fn resume(client: &CdpClient, child: &SessionId) {
    let run = crate::cdp::runtime::RunIfWaitingForDebugger {};
    if let Err(error) = client.execute(child, &run, CHILD_SETUP_TIMEOUT).await {
        tracing::debug!(%error, "resuming an auto-attached frame session");
    }
}

fn with_frames<T: Default>(
    service: &BrowserService,
    tab: &TargetId,
    f: impl FnOnce(&mut super::FrameBook) -> T,
) -> T {
    match service.with_registry(|registry| registry.handle(tab)) {
        Some(handle) => f(&mut handle.frames()),
        None => T::default(),
    }
}

/// `watchdog.frame_detached` and `observation.invalidated` for each Workspace whose selected
/// frame went away: opaque ids and a reason only, never a URL or a raw id.
fn frame_detached(service: &BrowserService, tab: &TargetId, gone: Vec<FrameGone>) -> Vec<Emit> {
    let mut emits = Vec::new();
    for gone in gone {
        let Some(opaque) =
            service.with_registry(|registry| registry.known_opaque(&gone.workspace_id, tab))
        else {
            continue;
        };
        let mut watchdog = Emit::new(
            &gone.workspace_id,
            "watchdog.frame_detached",
            json!({"targetId": opaque, "frameId": gone.frame_id, "reason": gone.reason.as_str()}),
        );
        watchdog.target_id = Some(opaque.clone());
        let mut invalidated = Emit::new(
            &gone.workspace_id,
            "observation.invalidated",
            json!({"targetId": opaque, "frameId": gone.frame_id, "reason": "frame_detached"}),
        );
        invalidated.target_id = Some(opaque);
        emits.push(watchdog);
        emits.push(invalidated);
    }
    emits
}

/// How long a dialog may stay unanswered before `watchdog.dialog_unhandled` (contract: 15 s).
const DIALOG_UNHANDLED_AFTER: std::time::Duration = std::time::Duration::from_secs(15);

fn on_dialog_opening(
    service: &BrowserService,
    session: &SessionId,
    target: &TargetId,
    opening: JavascriptDialogOpening,
) -> Vec<Emit> {
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
    service.with_registry(|registry| registry.dialogs.insert(target.clone(), dialog.clone()));
    service.signal_dialog(target);
    // Never answered automatically; after 15 s the Workspaces are told once.
    let watchdog = service.clone();
    let (dialog_id, watched) = (dialog.id.clone(), target.clone());
    tokio::spawn(async move {
        tokio::time::sleep(DIALOG_UNHANDLED_AFTER).await;
        let still_open = watchdog.with_registry(|registry| {
            registry
                .dialogs
                .get(&watched)
                .is_some_and(|d| d.id == dialog_id)
        });
        if still_open {
            for emit in for_interested(&watchdog, &watched, |opaque| {
                (
                    "watchdog.dialog_unhandled",
                    json!({"dialogId": dialog_id, "targetId": opaque, "pendingMs": DIALOG_UNHANDLED_AFTER.as_millis() as u64}),
                )
            }) {
                let _ = watchdog.events().emit(emit).await;
            }
        }
    });
    for_interested(service, target, |opaque| {
        (
            "dialog",
            json!({"dialogId": dialog.id, "state": "opened", "type": dialog.dialog_type, "message": dialog.message, "url": dialog.url, "targetId": opaque}),
        )
    })
}

fn on_created(service: &BrowserService, info: &TargetInfo) -> Vec<Emit> {
    let adopted = service.with_registry(|registry| {
        let owner = registry.upsert(info)?;
        let opaque = registry.opaque_id(&owner, &info.target_id);
        let opener = info
            .opener_id
            .as_ref()
            .map(|o| registry.opaque_id(&owner, o));
        Some((owner, opaque, opener))
    });
    let Some((workspace_id, opaque, opener)) = adopted else {
        return Vec::new();
    };
    service.note_owned(&info.target_id, &workspace_id);
    let mut popup = Emit::new(
        &workspace_id,
        "popup.opened",
        json!({"targetId": opaque, "openerTargetId": opener, "url": bounded(&info.url)}),
    );
    popup.target_id = Some(opaque.clone());
    popup.sensitivity = "browser_data";
    let mut attached = Emit::new(
        &workspace_id,
        "target.attached",
        json!({"targetId": opaque, "managed": true, "popup": true}),
    );
    attached.target_id = Some(opaque);
    vec![attached, popup]
}

/// A page session opened by the browser connection's auto-attach (`SetAutoAttach::pages`):
/// offered to its tab for the next `TabGuard::session`, so no tab gets a second session. A new
/// page waits paused at its start: a managed popup is set up first (network observation and
/// its Workspace's rules before its first request), anything else (a user's new tab, a tab the
/// Broker is creating) is resumed at once, with nothing enabled. The session of a tab nobody
/// controls stays idle: it observes nothing.
fn on_page_attached(
    service: &BrowserService,
    client: &CdpClient,
    attached: AttachedToTarget,
) -> Vec<Emit> {
    if attached.target_info.target_type != "page" {
        return Vec::new();
    }
    if !attached.waiting_for_debugger {
        // An existing page (or the Broker's own explicit attach, then already in use): offered
        // for the tab's next `TabGuard::session`.
        if let Some(handle) =
            service.with_registry(|registry| registry.handle(&attached.target_info.target_id))
        {
            handle.offer_session(attached.session_id);
        }
        return Vec::new();
    }
    // The attach can arrive before `Target.targetCreated`: adopt a popup here if so.
    let emits = on_created(service, &attached.target_info);
    let target = attached.target_info.target_id.clone();
    let (handle, popup) = service.with_registry(|registry| {
        (
            registry.handle(&target),
            registry.managed_by(&target).is_some() && attached.target_info.opener_id.is_some(),
        )
    });
    let session = attached.session_id;
    let client = client.clone();
    match (handle, popup) {
        (Some(handle), true) => {
            handle.offer_session(session.clone());
            let service = service.clone();
            tokio::spawn(async move {
                super::fetch::refresh_tab(&service, &target).await;
                let setup = async {
                    let mut guard = handle.acquire().await;
                    if let Err(error) = guard.session(&client).await {
                        tracing::debug!(%error, "setting up a new popup");
                    }
                };
                tokio::pin!(setup);
                // A `noopener` popup (every `target="_blank"` link) answers its renderer's
                // domains only once it runs (docs/cdp.md, "Popups that turn into downloads"):
                // past a short patience it is resumed and its setup finishes right after.
                // Whatever the setup achieves, the popup (and its opener) must not stay paused.
                if tokio::time::timeout(PAUSED_POPUP_PATIENCE, &mut setup)
                    .await
                    .is_err()
                {
                    resume(&client, &session).await;
                    setup.await;
                    return;
                }
                resume(&client, &session).await;
            });
        }
        (handle, _) => {
            if let Some(handle) = handle {
                handle.offer_session(session.clone());
            }
            tokio::spawn(async move { resume(&client, &session).await });
        }
    }
    emits
}

fn on_info_changed(service: &BrowserService, info: &TargetInfo) -> Vec<Emit> {
    let url_changed = service.with_registry(|registry| {
        let before = registry.url_of(&info.target_id);
        registry.upsert(info);
        before.is_some_and(|before| before != super::bounds::bound_url(&info.url))
    });
    match url_changed {
        true => for_interested(service, &info.target_id, |opaque| {
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
    service: &BrowserService,
    target: &TargetId,
    make: impl Fn(&str) -> (&'static str, Value),
) -> Vec<Emit> {
    let interested = service.with_registry(|registry| registry.interested_workspaces(target));
    interested
        .into_iter()
        .map(|(workspace_id, opaque)| {
            let (event_type, payload) = make(&opaque);
            let mut emit = Emit::new(&workspace_id, event_type, payload);
            emit.target_id = Some(opaque);
            emit.sensitivity = "browser_data";
            emit
        })
        .collect()
}

fn bounded(url: &str) -> String {
    super::bounds::bound_event_url(url)
}
