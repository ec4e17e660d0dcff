//! Scoped download capture (docs/artifacts.md, "Downloads"): the per-session download setting,
//! each tab's book of downloads in flight (`DownloadBook`, among the tab's books, so it belongs
//! to its connection and goes with its tab), the Broker's own cancels and quotas, and the
//! `download` events with their hints.
//!
//! A controlled tab session gets `Browser.setDownloadBehavior {behavior: "default",
//! eventsEnabled: true}` when it is attached (`enable`, from `TabGuard::session`): it observes
//! only that session's downloads and redirects nothing. The setting is restored (`eventsEnabled:
//! false`) when the tab is released (`browser.tabs.release`, the controlling Lease ending, the
//! Workspace released) and set again when a Lease controls the tab once more. On `completed` the
//! browser's file is copied into the session's 0700 staging directory, deleted, and stored as a
//! Workspace-owned `download` Artifact (the bytes are `artifacts/`'s). CDP reports a cancel and
//! a network failure alike (`canceled`), so the downloads the Broker cancelled itself (quota,
//! release) are remembered here; every other end is `failed`/`interrupted`. A managed popup's
//! first document response that is an attachment (Chromium would close the popup before that
//! download's end is reported) is read from the paused response into an Artifact instead, so the
//! browser never downloads it (`on_first_document`).
//!
//! A remote browser writes downloads on its own machine, whose files the Broker cannot read: a
//! controlled tab's sessions there pause their `Document` responses, and one the browser would
//! download is streamed into an Artifact the same way and its request failed
//! (`remote_download`, `on_remote_response`); a `blob:` or `data:` download, which pauses
//! nothing, is cancelled in the browser and read from the page (`FromPage`), or reported
//! `capture_unavailable` (`not_streamable`) when it cannot be. The browser's `filePath` is never
//! used there.
//!
//! Must not: set anything browser-wide, touch the session of an uncontrolled tab, or let a CDP
//! guid, a browser file path or a staging path reach an event (ids are opaque `download:` ids).

use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::bounds::{bound_event_url, bound_name};
use super::registry::Registry;
use super::service::{BrowserService, Live};
use super::tab::{TabGuard, TabHandle};
use crate::artifacts::{Artifact, ArtifactError, MAX_ARTIFACT_BYTES};
use crate::cdp::browser::{
    CancelDownload, DownloadProgress, DownloadWillBegin, SetDownloadBehavior,
};
use crate::cdp::fetch::{ContinueRequest, FailRequest, RequestPaused, TakeResponseBodyAsStream};
use crate::cdp::io;
use crate::cdp::target::CloseTarget;
use crate::cdp::{CdpClient, CdpError, SessionId, TargetId};
use crate::events::{Emit, EventSink};
use crate::page::{DownloadPhase, EventHint, Hint};
use crate::protocol::ids::{IdKind, new_id};
use crate::store::{LeaseId, TargetRef, WorkspaceId};

/// Timeout of one setting or cancel call (and of one read of a popup's attachment).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes asked for per `IO.read` of a popup's attachment.
const READ_CHUNK_BYTES: u64 = 1 << 20;

/// Streamed URLs remembered per tab (`DownloadBook::streamed`).
const MAX_STREAMED: usize = 16;

/// Downloads in flight per session: a page that starts a burst of downloads gets its first four
/// captured and the rest cancelled (`quota_exceeded`); an agent rarely needs more at once.
pub const MAX_ACTIVE_PER_SESSION: usize = 4;

/// Bytes in flight per session (the sum over its downloads of the larger of the announced and
/// the received size): the per-Artifact limit, since every completed download becomes one.
pub const SESSION_QUOTA_BYTES: u64 = MAX_ARTIFACT_BYTES;

/// Downloads tracked at once over all tabs of a connection: a bound for `canceled` events that
/// never come. One beyond it is cancelled before it is announced.
const MAX_TRACKED: usize = 1024;

/// The per-tab bounds of the book (count and bytes), with the other books' in one place.
pub use super::bounds::{MAX_DOWNLOAD_BOOK_BYTES, MAX_TRACKED_DOWNLOADS_PER_TAB};

/// What `BROWSER_PILOT_DOWNLOAD_QUOTA_BYTES` may set the session quota to.
const QUOTA_OVERRIDE_RANGE: RangeInclusive<u64> = 1024..=SESSION_QUOTA_BYTES;

/// The quotas one Broker applies to each controlled session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownloadLimits {
    pub max_active_per_session: usize,
    pub session_quota_bytes: u64,
}

impl DownloadLimits {
    /// The defaults, with `BROWSER_PILOT_DOWNLOAD_QUOTA_BYTES` lowering the byte quota (tests).
    pub fn from_env() -> DownloadLimits {
        let mut limits = DownloadLimits {
            max_active_per_session: MAX_ACTIVE_PER_SESSION,
            session_quota_bytes: SESSION_QUOTA_BYTES,
        };
        if let Some(bytes) = std::env::var("BROWSER_PILOT_DOWNLOAD_QUOTA_BYTES")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            limits.session_quota_bytes =
                bytes.clamp(*QUOTA_OVERRIDE_RANGE.start(), *QUOTA_OVERRIDE_RANGE.end());
        }
        limits
    }
}

/// Whether a tab session took the download setting (kept in its `TabState`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Capture {
    /// Not attempted on this session yet.
    #[default]
    Off,
    On,
    /// The session refused the setting: its downloads are not captured, and each Workspace that
    /// controls it is told once (`capture_unavailable`).
    Refused,
}

impl Capture {
    /// Only Chromium's own refusal is `Refused`; a session that closed or a call that timed
    /// out leaves the setting unknown (`Off`; a live session is set again on the next control).
    fn after(result: Result<(), CdpError>) -> Capture {
        match result {
            Ok(()) => Capture::On,
            Err(error @ CdpError::Remote { .. }) => {
                tracing::warn!(%error, "a tab session refused download capture");
                Capture::Refused
            }
            Err(error) => {
                tracing::debug!(%error, "setting download capture on a tab session");
                Capture::Off
            }
        }
    }
}

/// Fault knob for the process test of `capture_unavailable`: with
/// `BROWSER_PILOT_TEST_REFUSE_DOWNLOAD_CAPTURE=1` every session is asked with a form Chromium
/// refuses, so the refusal path runs against a real browser (Chromium 156 never refuses the
/// real request). Read once per Broker.
fn refusal_injected() -> bool {
    static INJECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INJECTED.get_or_init(|| {
        std::env::var("BROWSER_PILOT_TEST_REFUSE_DOWNLOAD_CAPTURE").is_ok_and(|v| v.trim() == "1")
    })
}

/// Turns on download events for a freshly attached controlled tab session.
pub async fn enable(client: &CdpClient, session: &SessionId, timeout: Duration) -> Capture {
    let request = match refusal_injected() {
        true => SetDownloadBehavior::refused(),
        false => SetDownloadBehavior::observe(),
    };
    Capture::after(client.execute(session, &request, timeout).await.map(|_| ()))
}

/// What the download handlers share over the Broker's life: the Artifact store (attached once,
/// at start), the quotas and the event sink. The downloads themselves are per tab
/// (`DownloadBook`, among the tab's books), so they live and end with their connection.
pub struct Downloads {
    artifacts: std::sync::OnceLock<crate::artifacts::Artifacts>,
    limits: DownloadLimits,
    events: EventSink,
}

/// One tab's downloads, a book among the tab's books (`TabHandle::downloads`): its sessions the
/// pump saw attach, its downloads in flight by CDP guid (the guid never leaves the book), and
/// the per-session capture state. It goes with the tab; the guid still resolves from any
/// session, since every book of the connection is searched for it (`tab_of_guid`).
#[derive(Debug, Default)]
pub struct DownloadBook {
    /// Tab sessions, each with its staging directory and the Workspace it was made for once a
    /// download started there.
    sessions: HashMap<SessionId, Option<(String, PathBuf)>>,
    active: HashMap<String, Active>,
    /// Sessions whose setting was restored on release; set again on the next control.
    restored: HashSet<SessionId>,
    /// `(session, Workspace)` pairs already told `capture_unavailable`.
    told_unavailable: HashSet<(SessionId, String)>,
    /// Remote browser: the URLs of the last responses streamed to the Broker, per session. A
    /// `download` link's request belongs to the browser's download manager, which announces the
    /// download after its request was failed: that announcement is this capture's, not another.
    streamed: std::collections::VecDeque<(SessionId, String)>,
}

impl DownloadBook {
    /// A tab session of this tab attached: its downloads are captured from now on.
    pub(super) fn watch(&mut self, session: SessionId) {
        self.sessions.entry(session).or_default();
    }

    /// Downloads in flight, the Broker's cancels not yet confirmed included.
    pub fn len(&self) -> usize {
        self.active.len()
    }

    /// What the tracked downloads hold in memory, in bytes.
    pub fn bytes(&self) -> usize {
        (self.active.iter())
            .map(|(guid, active)| guid.len() + active.weight())
            .sum()
    }

    /// Whether one more download (`guid`) stays within the book's count and byte bounds.
    fn fits(&self, guid: &str, active: &Active) -> bool {
        self.active.len() < MAX_TRACKED_DOWNLOADS_PER_TAB
            && self.bytes() + guid.len() + active.weight() <= MAX_DOWNLOAD_BOOK_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.sessions.is_empty()
    }

    /// Takes the downloads `which` selects out of the book.
    fn take(&mut self, which: impl Fn(&Active) -> bool) -> Vec<(String, Active)> {
        let guids: Vec<String> = (self.active.iter())
            .filter(|(_, a)| which(a))
            .map(|(g, _)| g.clone())
            .collect();
        guids
            .into_iter()
            .filter_map(|g| self.active.remove(&g).map(|a| (g, a)))
            .collect()
    }

    /// Takes the staging directories of the sessions whose Workspace `which` selects.
    fn take_staging(&mut self, which: impl Fn(&str) -> bool) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for staging in self.sessions.values_mut() {
            if staging.as_ref().is_some_and(|(ws, _)| which(ws))
                && let Some((_, dir)) = staging.take()
            {
                dirs.push(dir);
            }
        }
        dirs
    }

    /// Downloads of `session` the Broker has not cancelled.
    fn running(&self, session: &SessionId) -> impl Iterator<Item = &Active> {
        (self.active.values()).filter(move |a| a.session == *session && a.cancelled.is_none())
    }

    /// Everything at once: the tab closed or its connection ended. Returns the downloads in
    /// flight and the staging directories.
    fn clear(&mut self) -> (Vec<(String, Active)>, Vec<PathBuf>) {
        let dirs = self.take_staging(|_| true);
        let taken = self.active.drain().collect();
        self.sessions.clear();
        self.restored.clear();
        self.told_unavailable.clear();
        self.streamed.clear();
        (taken, dirs)
    }
}

/// The tab whose book knows `session`.
fn tab_of_session(registry: &Registry, session: &SessionId) -> Option<TabHandle> {
    (registry.handles())
        .find(|handle| handle.downloads().sessions.contains_key(session))
        .cloned()
}

/// The tab whose book tracks the download `guid`, whichever session announced it.
fn tab_of_guid(registry: &Registry, guid: &str) -> Option<TabHandle> {
    (registry.handles())
        .find(|handle| handle.downloads().active.contains_key(guid))
        .cloned()
}

/// Downloads tracked over every tab of the connection.
fn tracked(registry: &Registry) -> usize {
    (registry.handles())
        .map(|handle| handle.downloads().len())
        .sum()
}

#[derive(Debug)]
struct Active {
    id: String,
    session: SessionId,
    target: TargetId,
    workspace_id: String,
    lease_id: Option<String>,
    opaque: TargetRef,
    suggested: String,
    received: u64,
    total: u64,
    /// Why the Broker cancelled it, when it did.
    cancelled: Option<&'static str>,
}

impl Active {
    /// What the entry holds in memory, in bytes: what `MAX_DOWNLOAD_BOOK_BYTES` counts.
    fn weight(&self) -> usize {
        std::mem::size_of::<(String, Active)>()
            + self.id.len()
            + self.session.as_str().len()
            + self.target.as_str().len()
            + self.workspace_id.len()
            + self.lease_id.as_ref().map_or(0, String::len)
            + self.opaque.len()
            + self.suggested.len()
    }

    /// Whether the browser announced a length and received all of it: a cancel can no longer
    /// stop the file from being written.
    fn fully_received(&self) -> bool {
        self.total > 0 && self.received >= self.total
    }

    fn in_flight_bytes(&self) -> u64 {
        self.received.max(self.total)
    }

    fn emit(&self, payload: Value) -> Emit {
        let mut emit = Emit::new(&self.workspace_id, "download", payload);
        emit.target_id = Some(self.opaque.to_string());
        emit.lease_id.clone_from(&self.lease_id);
        emit.sensitivity = "browser_data";
        emit
    }

    /// `started`, with the bounded URL and the suggested name.
    fn started(&self, url: &str) -> Emit {
        self.emit(json!({
            "state": "started",
            "downloadId": self.id,
            "targetId": self.opaque,
            "url": bound_event_url(url),
            "suggestedFilename": self.suggested,
            "hints": [EventHint::from(Hint::download(DownloadPhase::InProgress, Some(self.id.clone()), None))],
        }))
    }

    /// `cancelled` (the Broker's own reason) or `failed` (`interrupted`), with byte counts and
    /// a failure hint.
    fn ended(&self, state: &'static str, reason: &str) -> Emit {
        let mut hint = Hint::download(DownloadPhase::Failed, Some(self.id.clone()), None);
        hint.reason = Some(reason.to_owned());
        self.emit(json!({
            "state": state,
            "downloadId": self.id,
            "targetId": self.opaque,
            "reason": reason,
            "receivedBytes": self.received,
            "totalBytes": self.total,
            "hints": [EventHint::from(hint)],
        }))
    }

    fn completed(&self, artifact: &Artifact) -> Emit {
        let hint = Hint::download(
            DownloadPhase::Completed,
            Some(self.id.clone()),
            Some(artifact.id.clone()),
        );
        self.emit(json!({
            "state": "completed",
            "downloadId": self.id,
            "targetId": self.opaque,
            "artifact": artifact.to_json(),
            "hints": [EventHint::from(hint)],
        }))
    }
}

/// The `capture_unavailable` event for one Workspace: setup state, no hint, no download.
fn unavailable(workspace_id: &WorkspaceId, lease_id: &LeaseId, opaque: &TargetRef) -> Emit {
    let mut emit = Emit::new(
        workspace_id,
        "download",
        json!({"state": "capture_unavailable", "targetId": opaque, "reason": "session_refused"}),
    );
    emit.target_id = Some(opaque.to_string());
    emit.lease_id = Some(lease_id.to_string());
    emit
}

/// The `capture_unavailable` event of a remote browser's download that never crossed the
/// network (a `blob:` or `data:` URL, or one no response pause showed): cancelled in the
/// browser, so nothing lands on the far machine, and not captured.
fn not_streamable(owner: (String, Option<String>, TargetRef), url: &str, name: &str) -> Emit {
    let (workspace_id, lease_id, opaque) = owner;
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    let mut emit = Emit::new(
        &workspace_id,
        "download",
        json!({"state": "capture_unavailable", "targetId": opaque, "reason": "not_streamable",
               "scheme": bound_name(scheme), "suggestedFilename": bound_name(name)}),
    );
    emit.target_id = Some(opaque.to_string());
    emit.lease_id = lease_id;
    emit.sensitivity = "browser_data";
    emit
}

/// Whether the connection is to a remote browser (`browser:remote:*`), whose downloads land on
/// its own machine: they are streamed from their responses instead.
fn is_remote(live: &Live) -> bool {
    live.browser_id
        .starts_with(crate::browser::REMOTE_ID_PREFIX)
}

/// Stores a download's body, whole on disk in its staging directory, as the `download`
/// Artifact; the end event: `completed`, or how the capture failed.
async fn captured(
    artifacts: &crate::artifacts::Artifacts,
    active: &Active,
    body: PathBuf,
    staging: PathBuf,
) -> Emit {
    let now = crate::version::now_ms();
    match (artifacts)
        .capture_download(&active.workspace_id, &active.suggested, body, staging, now)
        .await
    {
        Ok(artifact) => active.completed(&artifact),
        Err(error) => {
            tracing::warn!(%error, "a download was not captured");
            let (state, reason) = capture_failure(&error);
            active.ended(state, reason)
        }
    }
}

/// Why an Artifact could not be made of a completed download: the quotas are the Broker's own
/// refusal (`cancelled`), anything else a storage failure.
fn capture_failure(error: &ArtifactError) -> (&'static str, &'static str) {
    match error {
        ArtifactError::TooLarge { .. } | ArtifactError::QuotaExceeded { .. } => {
            ("cancelled", "quota_exceeded")
        }
        _ => ("failed", "storage_failed"),
    }
}

impl Downloads {
    pub fn new(limits: DownloadLimits, events: EventSink) -> Downloads {
        Downloads {
            artifacts: std::sync::OnceLock::new(),
            limits,
            events,
        }
    }

    /// Hands the tracker the Artifact store (once, at Broker start).
    pub fn attach_artifacts(&self, artifacts: crate::artifacts::Artifacts) {
        let _ = self.artifacts.set(artifacts);
    }

    async fn emit(&self, emits: Vec<Emit>) {
        emit_all(&self.events, emits).await;
    }
}

async fn emit_all(events: &EventSink, emits: Vec<Emit>) {
    for emit in emits {
        if let Err(error) = events.emit(emit).await {
            tracing::debug!(%error, "download event not journaled (workspace gone)");
        }
    }
}

/// The pump saw the Broker attach a tab session (its tab is in the registry by then).
pub(super) fn on_session_attached(live: &Live, session: &SessionId, target: &TargetId) {
    live.with_tabs(|tabs| {
        if let Some(handle) = tabs.registry.handle(target) {
            handle.downloads().watch(session.clone());
        }
    });
}

/// A tab session ended (its tab closed or crashed; the browser dropped its setting): its
/// downloads in flight are cancelled by guid on the browser connection, reported `cancelled`
/// (`released`), and its staging directory is removed. A download whose bytes had all arrived
/// cannot be cancelled any more and no session is left to report its file (a popup that turned
/// into a download, closed by Chromium before `completed`): it is reported `failed`
/// (`capture_lost`), since the browser keeps that file in its own download folder.
pub(super) fn on_session_detached(
    downloads: &Downloads,
    live: &Live,
    session: &SessionId,
) -> Vec<Emit> {
    let (taken, dirs) = live.with_tabs(|tabs| {
        let Some(handle) = tab_of_session(&tabs.registry, session) else {
            return (Vec::new(), Vec::new());
        };
        let mut book = handle.downloads();
        book.restored.remove(session);
        book.told_unavailable.retain(|(s, _)| s != session);
        let staging = book.sessions.remove(session).flatten();
        let taken = book.take(|a| a.session == *session);
        (taken, staging.map(|(_, d)| d).into_iter().collect())
    });
    ended_without_session(downloads, &live.client, taken, dirs)
}

/// The tab's book, taken whole when its tab left the registry while downloads were still in
/// it: they end as if each session had detached.
pub(super) fn on_tab_gone(downloads: &Downloads, live: &Live, mut book: DownloadBook) -> Vec<Emit> {
    let (taken, dirs) = book.clear();
    ended_without_session(downloads, &live.client, taken, dirs)
}

/// The ends of downloads whose session is gone: `failed` (`capture_lost`) when every byte
/// already arrived (the browser finishes it whatever the Broker sends, and the session that
/// would have reported the file is gone), else cancelled on the browser connection.
fn ended_without_session(
    downloads: &Downloads,
    client: &CdpClient,
    taken: Vec<(String, Active)>,
    dirs: Vec<PathBuf>,
) -> Vec<Emit> {
    let mut emits = Vec::new();
    let mut cancellable = Vec::new();
    for (guid, active) in taken {
        match active.fully_received() {
            true => emits.push(active.ended("failed", "capture_lost")),
            false => cancellable.push((guid, active)),
        }
    }
    emits.extend(finish_release(downloads, client, cancellable, dirs, false));
    emits
}

/// Cancels taken downloads in the browser (on their session while it lives, else on the
/// browser connection), removes staging directories, and returns the `cancelled` (`released`)
/// events.
fn finish_release(
    downloads: &Downloads,
    client: &CdpClient,
    taken: Vec<(String, Active)>,
    dirs: Vec<PathBuf>,
    sessions_alive: bool,
) -> Vec<Emit> {
    let emits = taken
        .iter()
        .map(|(_, a)| a.ended("cancelled", "released"))
        .collect();
    let client = client.clone();
    let artifacts = downloads.artifacts.get().cloned();
    tokio::spawn(async move {
        for (guid, active) in taken {
            let session = sessions_alive.then_some(active.session);
            cancel(&client, session.as_ref(), guid).await;
        }
        if let Some(artifacts) = artifacts {
            for dir in dirs {
                artifacts.remove_staging(dir).await;
            }
        }
    });
    emits
}

async fn cancel(client: &CdpClient, session: Option<&SessionId>, guid: String) {
    let command = CancelDownload { guid };
    if let Err(error) = client.execute(session, &command, CALL_TIMEOUT).await {
        // The session may be gone: the browser connection can cancel by guid as well.
        tracing::debug!(%error, "cancelling a download on its session; retrying on the browser");
        if session.is_some()
            && let Err(error) = client.execute(None, &command, CALL_TIMEOUT).await
        {
            tracing::debug!(%error, "cancelling a download");
        }
    }
}

/// `Browser.downloadWillBegin` on a tab session: captured when the tab is controlled (or
/// managed), `started` with an opaque id, or cancelled at once past the concurrency quota.
pub(super) fn on_will_begin(
    downloads: &Downloads,
    live: &Live,
    session: &SessionId,
    begin: DownloadWillBegin,
) -> Vec<Emit> {
    if is_remote(live) {
        return remote_will_begin(downloads, live, session, begin);
    }
    let client = &live.client;
    let outcome = live.with_tabs(|tabs| {
        let registry = &mut tabs.registry;
        // A guid already tracked was announced on another session of the same tab.
        if tab_of_guid(registry, &begin.guid).is_some() {
            return None;
        }
        let handle = tab_of_session(registry, session)?;
        // A restored session is not capturing.
        if handle.downloads().restored.contains(session) {
            return None;
        }

        // Never announced, so it needs no end: cancelled before it can land anywhere.
        let refuse = || {
            tracing::warn!("too many downloads in flight; one is cancelled unannounced");
            let client = client.clone();
            let session = session.clone();
            let guid = begin.guid.clone();
            tokio::spawn(async move { cancel(&client, Some(&session), guid).await });
            None
        };
        let here = handle.downloads().len();
        if here >= MAX_TRACKED_DOWNLOADS_PER_TAB || tracked(registry) >= MAX_TRACKED {
            return refuse();
        }
        let (workspace_id, lease_id, opaque) = registry.capture_owner(&handle.target)?;
        let mut active = Active {
            id: new_id(IdKind::Download),
            session: session.clone(),
            target: handle.target.clone(),
            workspace_id,
            lease_id,
            opaque,
            suggested: bound_name(&begin.suggested_filename),
            received: 0,
            total: 0,
            cancelled: None,
        };
        let mut book = handle.downloads();
        if !book.fits(&begin.guid, &active) {
            drop(book);
            return refuse();
        }
        let started = active.started(&begin.url);
        let over = book.running(session).count() >= downloads.limits.max_active_per_session;
        if over {
            active.cancelled = Some("quota_exceeded");
        }
        let staging = match book.sessions.get_mut(session) {
            Some(staging) if staging.is_none() => {
                let dir =
                    (downloads.artifacts.get()).map(|a| a.staging_dir(&new_id(IdKind::Download)));
                *staging = dir.clone().map(|d| (active.workspace_id.clone(), d));
                dir
            }
            _ => None,
        };
        book.active.insert(begin.guid.clone(), active);
        Some((started, over, staging))
    });
    let Some((started, over, staging)) = outcome else {
        return Vec::new();
    };
    let client = client.clone();
    let artifacts = downloads.artifacts.get().cloned();
    let session = session.clone();
    tokio::spawn(async move {
        if let (Some(artifacts), Some(dir)) = (artifacts, staging)
            && let Err(error) = artifacts.prepare_staging(dir).await
        {
            tracing::warn!(%error, "cannot create a download staging directory");
        }
        if over {
            cancel(&client, Some(&session), begin.guid).await;
        }
    });
    vec![started]
}

/// `Browser.downloadProgress` on a tab session: byte quotas while in progress, the Artifact on
/// `completed`, `cancelled` or `failed` on `canceled`.
pub(super) fn on_progress(
    downloads: &Downloads,
    live: &Live,
    session: &SessionId,
    progress: DownloadProgress,
) -> Vec<Emit> {
    let client = &live.client;
    let quota = downloads.limits.session_quota_bytes;
    let received = progress.received_bytes.max(0.0) as u64;
    let total = progress.total_bytes.max(0.0) as u64;
    let Some(handle) = live.with_tabs(|tabs| tab_of_guid(&tabs.registry, &progress.guid)) else {
        return Vec::new();
    };
    match progress.state.as_str() {
        "inProgress" => {
            let cancel_now = {
                let mut book = handle.downloads();
                let Some(active) = book.active.get_mut(&progress.guid) else {
                    return Vec::new();
                };
                let gained = received.saturating_sub(active.received);
                active.received = active.received.max(received);
                active.total = active.total.max(total);
                if active.cancelled.is_some() {
                    return Vec::new();
                }
                // Chromium reports progress about twice a second, so a download of unannounced
                // length checked only against what arrived overshoots by up to a report's worth
                // of bytes (measured: 2.8x a 512 KiB quota at 3 MB/s). Expecting the next report
                // to bring as much as the last one stops it before it crosses the quota instead.
                let expected = match active.total {
                    0 => gained,
                    _ => 0,
                };
                let own = active.in_flight_bytes() + expected;
                let sum: u64 = book
                    .running(session)
                    .map(Active::in_flight_bytes)
                    .sum::<u64>()
                    + expected;
                let over = own > quota || sum > quota;
                if over && let Some(active) = book.active.get_mut(&progress.guid) {
                    active.cancelled = Some("quota_exceeded");
                }
                over
            };
            if cancel_now {
                let (client, session) = (client.clone(), session.clone());
                tokio::spawn(async move { cancel(&client, Some(&session), progress.guid).await });
            }
            Vec::new()
        }
        "canceled" => {
            let Some(mut active) = handle.downloads().active.remove(&progress.guid) else {
                return Vec::new();
            };
            active.received = active.received.max(received);
            active.total = active.total.max(total);
            match active.cancelled {
                Some(reason) => vec![active.ended("cancelled", reason)],
                None => vec![active.ended("failed", "interrupted")],
            }
        }
        "completed" => {
            let (active, staging) = {
                let mut book = handle.downloads();
                let Some(mut active) = book.active.remove(&progress.guid) else {
                    return Vec::new();
                };
                active.received = active.received.max(received);
                active.total = active.total.max(total);
                let staging = (book.sessions.get(session).and_then(Option::as_ref))
                    .map(|(_, dir)| dir.clone());
                (active, staging)
            };
            let refused = match active.cancelled {
                Some(reason) => Some(reason),
                None if active.in_flight_bytes() > quota => Some("quota_exceeded"),
                None => None,
            };
            let (artifacts, file) = (downloads.artifacts.get().cloned(), progress.file_path);
            let events = downloads.events.clone();
            tokio::spawn(async move {
                let emit = match (refused, artifacts, file, staging) {
                    (Some(reason), _, file, _) => {
                        if let Some(file) = file {
                            remove_browser_file(PathBuf::from(file)).await;
                        }
                        active.ended("cancelled", reason)
                    }
                    (None, Some(artifacts), Some(file), Some(staging)) => {
                        captured(&artifacts, &active, PathBuf::from(file), staging).await
                    }
                    (None, _, file, _) => {
                        if let Some(file) = file {
                            remove_browser_file(PathBuf::from(file)).await;
                        }
                        active.ended("failed", "storage_failed")
                    }
                };
                emit_all(&events, vec![emit]).await;
            });
            Vec::new()
        }
        _ => Vec::new(),
    }
}

/// Deletes the browser's copy of a download the Broker refused after it completed.
async fn remove_browser_file(file: PathBuf) {
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(error) = std::fs::remove_file(&file)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(%error, "cannot delete the browser's copy of a download");
        }
    })
    .await;
}

/// A remote browser's `Browser.downloadWillBegin` on a controlled tab. Every download that
/// crosses the network was streamed from its paused response before the browser could write it
/// (`on_remote_response`; a `download` link's own announcement, which follows, is swallowed).
/// Anything else is cancelled in the browser at once, so nothing lands on the far machine: a
/// download the page made (`blob:` or `data:` URL) is read from the page instead
/// (`capture_from_page`), any other is reported `capture_unavailable` (`not_streamable`).
fn remote_will_begin(
    downloads: &Downloads,
    live: &Live,
    session: &SessionId,
    begin: DownloadWillBegin,
) -> Vec<Emit> {
    let known = live.with_tabs(|tabs| {
        let registry = &mut tabs.registry;
        let handle = tab_of_session(registry, session)?;
        let mut book = handle.downloads();
        if book.restored.contains(session) {
            return None;
        }
        let known = (book.streamed.iter()).position(|(s, url)| s == session && *url == begin.url);
        if let Some(at) = known {
            book.streamed.remove(at);
            return Some(None);
        }
        drop(book);
        let owner = registry.capture_owner(&handle.target)?;
        Some(Some((handle.target.clone(), owner)))
    });
    let Some(owner) = known else {
        return Vec::new();
    };
    let client = live.client.clone();
    let (on, guid) = (session.clone(), begin.guid.clone());
    let cancelled = async move { cancel(&client, Some(&on), guid).await };
    let Some((target, owner)) = owner else {
        tokio::spawn(cancelled);
        return Vec::new();
    };
    let page_made = ["blob:", "data:"].iter().any(|scheme| {
        begin
            .url
            .get(..scheme.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
    });
    if !page_made {
        tokio::spawn(cancelled);
        return vec![not_streamable(owner, &begin.url, &begin.suggested_filename)];
    }
    let (workspace_id, lease_id, opaque) = owner;
    let active = Active {
        id: new_id(IdKind::Download),
        session: session.clone(),
        target,
        workspace_id,
        lease_id,
        opaque,
        suggested: bound_name(&begin.suggested_filename),
        received: 0,
        total: 0,
        cancelled: None,
    };
    let from_page = FromPage {
        client: live.client.clone(),
        events: downloads.events.clone(),
        artifacts: downloads.artifacts.get().cloned(),
        quota: downloads.limits.session_quota_bytes,
    };
    tokio::spawn(async move {
        cancelled.await;
        from_page.capture(active, begin).await;
    });
    Vec::new()
}

/// What reading a page-made download needs, owned so it can move into its own task.
struct FromPage {
    client: CdpClient,
    events: EventSink,
    artifacts: Option<crate::artifacts::Artifacts>,
    quota: u64,
}

impl FromPage {
    /// Reads the `blob:` or `data:` URL of `begin` in the Broker's isolated world of the frame
    /// that started it (`page::DownloadOpen`, then 1 MiB base64 pieces) into the download's own
    /// staging and stores it as the `download` Artifact: `started`, then `completed`,
    /// `cancelled` (`quota_exceeded`) or `failed`. A URL that no longer resolves (a blob the
    /// page revoked at once) is `capture_unavailable` (`not_streamable`), never `started`.
    async fn capture(self, mut active: Active, begin: DownloadWillBegin) {
        let owner = (
            active.workspace_id.clone(),
            active.lease_id.clone(),
            active.opaque.clone(),
        );
        let session = active.session.clone();
        let opened = async {
            let world = crate::page::create_isolated_world(
                &self.client,
                &session,
                &begin.frame_id,
                CALL_TIMEOUT,
            )
            .await?;
            let open = crate::page::DownloadOpen {
                url: begin.url.clone(),
                max_bytes: self.quota,
            };
            let opened =
                crate::page::run(&self.client, &session, world, &open, CALL_TIMEOUT).await?;
            Ok::<_, crate::page::PageError>((world, opened))
        };
        let (world, opened) = match opened.await {
            Ok(opened) => opened,
            Err(error) => {
                tracing::debug!(%error, "a page-made download could not be read");
                let emit = not_streamable(owner, &begin.url, &begin.suggested_filename);
                return emit_all(&self.events, vec![emit]).await;
            }
        };
        active.total = opened.size;
        emit_all(&self.events, vec![active.started(&begin.url)]).await;
        let end = match (opened.too_large, self.artifacts.clone()) {
            (true, _) => active.ended("cancelled", "quota_exceeded"),
            (false, None) => active.ended("failed", "storage_failed"),
            (false, Some(artifacts)) => self.store(&artifacts, &mut active, world).await,
        };
        emit_all(&self.events, vec![end]).await;
    }

    /// The opened download's pieces into a staging file, then the Artifact; the end event.
    async fn store(
        &self,
        artifacts: &crate::artifacts::Artifacts,
        active: &mut Active,
        world: crate::page::ExecutionContextId,
    ) -> Emit {
        use tokio::io::AsyncWriteExt;
        let staging = artifacts.staging_dir(&new_id(IdKind::Download));
        if let Err(error) = artifacts.prepare_staging(staging.clone()).await {
            tracing::warn!(%error, "cannot create a download staging directory");
            return active.ended("failed", "storage_failed");
        }
        let body = staging.join("response");
        let written = async {
            let mut file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&body)
                .await
                .map_err(|_| "storage_failed")?;
            while active.received < active.total {
                let chunk = crate::page::DownloadChunk {
                    offset: active.received,
                    length: READ_CHUNK_BYTES,
                };
                let piece =
                    crate::page::run(&self.client, &active.session, world, &chunk, CALL_TIMEOUT)
                        .await
                        .map_err(|_| "interrupted")?;
                let bytes = crate::artifacts::decode_base64(&piece.data).ok_or("interrupted")?;
                if bytes.is_empty() {
                    return Err("interrupted");
                }
                active.received += bytes.len() as u64;
                file.write_all(&bytes).await.map_err(|_| "storage_failed")?;
            }
            file.flush().await.map_err(|_| "storage_failed")
        };
        let end = match written.await {
            Ok(()) => captured(artifacts, active, body, staging.clone()).await,
            Err(reason) => active.ended("failed", reason),
        };
        artifacts.remove_staging(staging).await;
        end
    }
}

/// A paused response on a tab of a remote browser that the browser would download, when the
/// tab is controlled (its Fetch book says so) and has a capture owner: the file name it gets.
/// Chromium downloads a successful `Document` response that is an attachment, of a type it
/// does not show, or requested by its download manager (a `download` link: the request has no
/// `Accept` header, which every navigation sends; verified on Chromium 156).
pub(super) fn remote_download(
    registry: &mut Registry,
    target: &TargetId,
    paused: &RequestPaused,
) -> Option<String> {
    let success = matches!(paused.response_status_code, Some(200..=299));
    if !success || paused.resource_type != "Document" {
        return None;
    }
    if !registry.handle(target)?.network().fetch.remote_downloads {
        return None;
    }
    registry.capture_owner(target)?;
    if let Some(name) = attachment_name(paused) {
        return Some(name);
    }
    let headers = &paused.request.headers;
    let navigation = headers
        .keys()
        .any(|name| name.eq_ignore_ascii_case("accept"));
    match navigation && shown(paused.response_header("content-type")) {
        true => None,
        false => Some(url_file_name(&paused.request.url)),
    }
}

/// Whether Chromium shows a document of this `Content-Type` rather than downloading it (no
/// type: it sniffs, and shows).
fn shown(content_type: Option<&str>) -> bool {
    let essence = content_type
        .and_then(|t| t.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let shown_types = [
        "application/xml",
        "application/json",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/pdf",
        "multipart/x-mixed-replace",
    ];
    essence.is_empty()
        || ["text/", "image/", "video/", "audio/"]
            .iter()
            .any(|p| essence.starts_with(p))
        || essence.ends_with("+xml")
        || essence.ends_with("+json")
        || shown_types.contains(&essence.as_str())
}

/// A controlled tab's response the remote browser would download, paused: the Broker reads its
/// body (`capture_response`) into a `download` Artifact with the events of any download,
/// `started` then `completed`, `cancelled` (`quota_exceeded`) or `failed`; then the request is
/// failed (`Aborted`), so the browser never downloads it and the page stays where it was.
pub(super) fn on_remote_response(
    service: &BrowserService,
    live: &Live,
    session: SessionId,
    target: TargetId,
    paused: RequestPaused,
    name: String,
) {
    let owner = live.with_tabs(|tabs| {
        let registry = &mut tabs.registry;
        let owner = registry.capture_owner(&target)?;
        if let Some(handle) = registry.handle(&target) {
            let mut book = handle.downloads();
            if book.streamed.len() >= MAX_STREAMED {
                book.streamed.pop_front();
            }
            book.streamed
                .push_back((session.clone(), paused.request.url.clone()));
        }
        Some(owner)
    });
    let (service, live) = (service.clone(), live.clone());
    tokio::spawn(async move {
        let (client, downloads) = (&live.client, service.downloads());
        let Some((workspace_id, lease_id, opaque)) = owner else {
            let go_on = ContinueRequest {
                request_id: paused.request_id,
                headers: None,
            };
            if let Err(error) = client.execute(&session, &go_on, CALL_TIMEOUT).await {
                tracing::debug!(%error, "letting a response through");
            }
            return;
        };
        let owner = (workspace_id, lease_id, opaque);
        take_response(downloads, client, (&session, &target), owner, &name, paused).await;
    });
}

/// Takes a paused response the browser would download: announces it `started`, reads its body
/// into a `download` Artifact (`capture_response`), fails the request (`Aborted`), so the browser
/// never downloads it, and announces how it ended.
async fn take_response(
    downloads: &Downloads,
    client: &CdpClient,
    (session, target): (&SessionId, &TargetId),
    (workspace_id, lease_id, opaque): (String, Option<String>, TargetRef),
    name: &str,
    paused: RequestPaused,
) {
    let active = Active {
        id: new_id(IdKind::Download),
        session: session.clone(),
        target: target.clone(),
        workspace_id,
        lease_id,
        opaque,
        suggested: bound_name(name),
        received: 0,
        total: paused
            .response_header("content-length")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0),
        cancelled: None,
    };
    (downloads.emit(vec![active.started(&paused.request.url)])).await;
    let end = capture_response(downloads, client, active, &paused.request_id).await;
    let fail = FailRequest {
        request_id: paused.request_id,
        error_reason: "Aborted",
    };
    if let Err(error) = client.execute(session, &fail, CALL_TIMEOUT).await {
        tracing::debug!(%error, "ending a taken download's response");
    }
    downloads.emit(vec![end]).await;
}

/// A managed popup's first document response, paused at the response stage
/// (`fetch::watch_first_document`). Anything but an attachment goes on to the page. An
/// attachment is taken from the response by the Broker: the browser never starts a download,
/// so nothing lands in its download folder, and the capture does not depend on the popup's
/// session, which Chromium would close before the download's end is reported. It gets the
/// events of any download of that popup, `started` then `completed` (the `download` Artifact),
/// `cancelled` (`quota_exceeded`) or `failed` (`interrupted`, `storage_failed`); then the request
/// is failed and the popup closed, as Chromium closes a popup that became a download.
pub(super) fn on_first_document(
    service: &BrowserService,
    live: &Live,
    session: SessionId,
    target: TargetId,
    paused: RequestPaused,
) {
    let (service, live) = (service.clone(), live.clone());
    tokio::spawn(async move {
        let (client, downloads, net) = (&live.client, service.downloads(), service.net());
        // Chromium downloads only a successful response; an error page is shown.
        let success = matches!(paused.response_status_code, Some(200..=299));
        let owner = match attachment_name(&paused).filter(|_| success) {
            Some(name) => live
                .with_tabs(|tabs| tabs.registry.capture_owner(&target))
                .map(|owner| (owner, name)),
            None => None,
        };
        match owner {
            None => {
                let go_on = ContinueRequest {
                    request_id: paused.request_id,
                    headers: None,
                };
                if let Err(error) = client.execute(&session, &go_on, CALL_TIMEOUT).await {
                    tracing::debug!(%error, "letting a popup's first document through");
                }
                super::fetch::first_document_answered(&live, net, &target).await;
            }
            Some((owner, name)) => {
                take_response(downloads, client, (&session, &target), owner, &name, paused).await;
                super::fetch::first_document_answered(&live, net, &target).await;
                let close = CloseTarget { target_id: target };
                if let Err(error) = client.execute(None, &close, CALL_TIMEOUT).await {
                    tracing::debug!(%error, "closing a popup that became a download");
                }
            }
        }
    });
}

/// Reads a paused attachment response into the download's own staging directory, bounded by
/// the session byte quota, and stores it as the `download` Artifact; the end event.
async fn capture_response(
    downloads: &Downloads,
    client: &CdpClient,
    mut active: Active,
    request_id: &str,
) -> Emit {
    let quota = downloads.limits.session_quota_bytes;
    if active.total > quota {
        return active.ended("cancelled", "quota_exceeded");
    }
    let Some(artifacts) = downloads.artifacts.get().cloned() else {
        return active.ended("failed", "storage_failed");
    };
    let staging = artifacts.staging_dir(&new_id(IdKind::Download));
    if let Err(error) = artifacts.prepare_staging(staging.clone()).await {
        tracing::warn!(%error, "cannot create a download staging directory");
        return active.ended("failed", "storage_failed");
    }
    let body = staging.join("response");
    let end = match read_body(client, &mut active, request_id, &body, quota).await {
        Ok(()) => captured(&artifacts, &active, body, staging.clone()).await,
        Err(end) => end,
    };
    artifacts.remove_staging(staging).await;
    end
}

/// Streams the paused response body into `path` (0600), counting `active.received`; the end
/// event when it cannot: past the quota (`cancelled`) or the stream broke (`failed`).
async fn read_body(
    client: &CdpClient,
    active: &mut Active,
    request_id: &str,
    path: &std::path::Path,
    quota: u64,
) -> Result<(), Emit> {
    use tokio::io::AsyncWriteExt;
    let session = active.session.clone();
    let take = TakeResponseBodyAsStream {
        request_id: request_id.to_owned(),
    };
    let interrupted = |active: &Active, error: &dyn std::fmt::Display| {
        tracing::debug!(%error, "reading a popup's attachment");
        active.ended("failed", "interrupted")
    };
    let handle = match client.execute(&session, &take, CALL_TIMEOUT).await {
        Ok(reply) => reply.stream,
        Err(error) => return Err(interrupted(active, &error)),
    };
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await;
    let mut file = match file {
        Ok(file) => file,
        Err(error) => {
            tracing::warn!(%error, "cannot write a popup's attachment");
            return Err(active.ended("failed", "storage_failed"));
        }
    };
    let result = loop {
        let read = io::Read {
            handle: handle.clone(),
            size: Some(READ_CHUNK_BYTES),
        };
        let chunk = match client.execute(&session, &read, CALL_TIMEOUT).await {
            Ok(chunk) => chunk,
            Err(error) => break Err(interrupted(active, &error)),
        };
        let bytes = match chunk.base64_encoded {
            true => match crate::artifacts::decode_base64(&chunk.data) {
                Some(bytes) => bytes,
                None => break Err(interrupted(active, &"malformed stream data")),
            },
            false => chunk.data.into_bytes(),
        };
        active.received += bytes.len() as u64;
        active.total = active.total.max(active.received);
        if active.received > quota {
            break Err(active.ended("cancelled", "quota_exceeded"));
        }
        if let Err(error) = file.write_all(&bytes).await {
            tracing::warn!(%error, "cannot write a popup's attachment");
            break Err(active.ended("failed", "storage_failed"));
        }
        if chunk.eof {
            break file.flush().await.map_err(|error| {
                tracing::warn!(%error, "cannot write a popup's attachment");
                active.ended("failed", "storage_failed")
            });
        }
    };
    let _ = client
        .execute(&session, &io::Close { handle }, CALL_TIMEOUT)
        .await;
    result
}

/// The file name of an attachment response (`Content-Disposition: attachment`), from its
/// `filename*` (RFC 5987) or `filename` parameter, else the URL's last path segment; `None` for
/// a response the browser would show.
fn attachment_name(paused: &RequestPaused) -> Option<String> {
    let disposition = paused.response_header("content-disposition")?;
    let mut parts = disposition.split(';').map(str::trim);
    if !parts.next()?.eq_ignore_ascii_case("attachment") {
        return None;
    }
    let mut plain = None;
    let mut extended = None;
    for part in parts {
        let Some((key, value)) = part.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match key.trim().to_ascii_lowercase().as_str() {
            "filename*" => {
                extended = value
                    .split_once("''")
                    .map(|(_, encoded)| percent_decode(encoded))
            }
            "filename" => plain = Some(value.trim_matches('"').to_owned()),
            _ => {}
        }
    }
    let name = extended.or(plain).filter(|n| !n.is_empty());
    Some(name.unwrap_or_else(|| url_file_name(&paused.request.url)))
}

/// A file name from a URL's last path segment, `download` when it has none.
fn url_file_name(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let name = percent_decode(path.rsplit('/').next().unwrap_or(""));
    match name.is_empty() {
        true => "download".to_owned(),
        false => name,
    }
}

/// `%XX` decoding (invalid escapes kept as they are, invalid UTF-8 replaced).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Before a Command runs on a controlled tab: a session whose setting was restored on an
/// earlier release gets it again (with the emulation of `background::emulate`), and a session
/// that refused it tells this Workspace once.
pub async fn on_control(
    service: &BrowserService,
    client: &CdpClient,
    guard: &mut TabGuard,
    workspace_id: &WorkspaceId,
    lease_id: &LeaseId,
) {
    let Some(session) = guard.state().session.clone() else {
        return;
    };
    let handle = guard.handle();
    if let Some(live) = service.live_of(workspace_id).filter(is_remote)
        && !handle.network().fetch.remote_downloads
    {
        // Its downloads are streamed from their responses (`remote_download`).
        handle.network().fetch.remote_downloads = true;
        super::fetch::refresh_tab(&live, service.net(), &guard.target).await;
    }
    let restored = handle.downloads().restored.remove(&session);
    if restored && let Err(error) = super::background::emulate(client, &session, CALL_TIMEOUT).await
    {
        tracing::debug!(%error, "focus emulation not enabled again");
    }
    if restored || guard.state().download_capture == Capture::Off {
        guard.state().download_capture = enable(client, &session, CALL_TIMEOUT).await;
    }
    if guard.state().download_capture != Capture::Refused {
        return;
    }
    let first = (handle.downloads().told_unavailable).insert((session, workspace_id.to_string()));
    let target = guard.target.clone();
    let opaque = service.with_registry_of(workspace_id, |registry| {
        registry.known_opaque(workspace_id, &target)
    });
    if let (true, Some(opaque)) = (first, opaque) {
        (service.downloads())
            .emit(vec![unavailable(workspace_id, lease_id, &opaque)])
            .await;
    }
}

/// Restores the setting on every session of `target` (and hands back its emulation,
/// `background::hand_back`), cancels its downloads in flight that `which` selects (`cancelled`,
/// `released`) and removes its staging.
async fn release_tab(
    downloads: &Downloads,
    live: &Live,
    target: &TargetId,
    which: impl Fn(&Active) -> bool,
) -> Vec<Emit> {
    let client = &live.client;
    let Some(handle) = live.with_tabs(|tabs| tabs.registry.handle(target)) else {
        return Vec::new();
    };
    let sessions: Vec<SessionId> = handle.downloads().sessions.keys().cloned().collect();
    let emulated = handle.books().emulation.take();
    for session in &sessions {
        handle.downloads().restored.insert(session.clone());
        super::background::hand_back(client, session, emulated.as_ref(), CALL_TIMEOUT).await;
        if let Err(error) = client
            .execute(session, &SetDownloadBehavior::restore(), CALL_TIMEOUT)
            .await
        {
            tracing::debug!(%error, "restoring the download setting of a released tab");
        }
    }
    // Overrides on a session download capture does not know end too.
    if let Some(emulated) = emulated.filter(|e| !sessions.contains(&e.session)) {
        let own = super::background::Emulated::none(emulated.session.clone());
        let undo =
            super::background::apply(client, &emulated.session, &own, &emulated, CALL_TIMEOUT);
        if let Err(error) = undo.await {
            tracing::debug!(%error, "ending the emulation of a released tab");
        }
    }
    let (taken, dirs) = {
        let mut book = handle.downloads();
        (
            book.take(|a| a.target == *target && which(a)),
            book.take_staging(|_| true),
        )
    };
    finish_release(downloads, client, taken, dirs, true)
}

impl BrowserService {
    /// `browser.tabs.release` handed the tab back: its sessions stop capturing downloads.
    pub async fn downloads_tab_released(&self, workspace_id: &WorkspaceId, opaque: &TargetRef) {
        let Some(live) = self.live_of(workspace_id) else {
            return;
        };
        let Ok((target, _)) = live.with_tabs(|tabs| tabs.registry.resolve(workspace_id, opaque))
        else {
            return;
        };
        let downloads = self.downloads();
        let emits = release_tab(downloads, &live, &target, |a| {
            a.workspace_id == workspace_id
        })
        .await;
        downloads.emit(emits).await;
    }

    /// A Lease ended (released or expired): the user tabs it controlled stop capturing.
    pub(super) async fn downloads_lease_ended(
        &self,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
    ) {
        let Some(live) = self.live_of(workspace_id) else {
            return;
        };
        let tabs =
            live.with_tabs(|tabs| (tabs.registry).user_tabs_controlled_by(workspace_id, lease_id));
        let downloads = self.downloads();
        let mut emits = Vec::new();
        for target in tabs {
            emits.extend(
                release_tab(downloads, &live, &target, |a| {
                    a.workspace_id == workspace_id
                })
                .await,
            );
        }
        downloads.emit(emits).await;
    }

    /// A Workspace is being released (before its tabs are forgotten and closed): every download
    /// it owns is cancelled, the tabs it managed or controlled stop capturing (before a managed
    /// tab's session is retired by closing it), and its staging goes. No event: the journal goes
    /// with the Workspace.
    pub(super) async fn downloads_workspace_released(&self, workspace_id: &str) {
        let Some(live) = self.live_of(workspace_id) else {
            return;
        };
        let downloads = self.downloads();
        let tabs: Vec<TargetId> = live.with_tabs(|tabs| {
            let registry = &mut tabs.registry;
            let watched: Vec<TargetId> = (registry.handles())
                .filter(|handle| !handle.downloads().sessions.is_empty())
                .map(|handle| handle.target.clone())
                .collect();
            watched
                .into_iter()
                .filter(|t| {
                    registry.managed_by(t) == Some(workspace_id)
                        || (registry.capture_owner(t)).is_some_and(|(w, _, _)| w == workspace_id)
                })
                .collect()
        });
        for target in &tabs {
            release_tab(downloads, &live, target, |a| a.workspace_id == workspace_id).await;
        }
        let (taken, dirs) = live.with_tabs(|tabs| {
            let (mut taken, mut dirs) = (Vec::new(), Vec::new());
            for handle in tabs.registry.handles() {
                let mut book = handle.downloads();
                taken.extend(book.take(|a| a.workspace_id == workspace_id));
                dirs.extend(book.take_staging(|ws| ws == workspace_id));
            }
            (taken, dirs)
        });
        for (guid, active) in taken {
            cancel(&live.client, Some(&active.session), guid).await;
        }
        if let Some(artifacts) = downloads.artifacts.get() {
            for dir in dirs {
                artifacts.remove_staging(dir).await;
            }
        }
    }

    /// The browser connection `live` was lost: the downloads in flight in its tabs' books end
    /// `failed` (`connection_lost`, in the lost generation; the browser may still finish them
    /// into its own download folder) and every staging directory goes with the old sessions.
    pub(super) async fn downloads_connection_lost(&self, live: &Live) {
        let downloads = self.downloads();
        let (taken, dirs) = live.with_tabs(|tabs| {
            let (mut taken, mut dirs) = (Vec::new(), Vec::new());
            for handle in tabs.registry.handles() {
                let (more, more_dirs) = handle.downloads().clear();
                taken.extend(more);
                dirs.extend(more_dirs);
            }
            (taken, dirs)
        });
        if let Some(artifacts) = downloads.artifacts.get() {
            for dir in dirs {
                artifacts.remove_staging(dir).await;
            }
        }
        let emits = taken
            .into_iter()
            .map(|(_, active)| {
                let mut emit = active.ended("failed", "connection_lost");
                emit.generation = Some(live.generation);
                emit
            })
            .collect();
        downloads.emit(emits).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(cancelled: Option<&'static str>) -> Active {
        Active {
            id: "download:1".into(),
            session: SessionId::new("S"),
            target: TargetId::new("T"),
            workspace_id: "workspace:1".into(),
            lease_id: Some("lease:1".into()),
            opaque: "target:1".into(),
            suggested: "report.txt".into(),
            received: 300,
            total: 1000,
            cancelled,
        }
    }

    /// The session refusing the setting (not seen on Chromium 156; injected here) makes the
    /// session `Refused`, and the Workspace is told with setup state only.
    #[test]
    fn an_injected_refusal_is_capture_unavailable() {
        let refusal = CdpError::Remote {
            method: "Browser.setDownloadBehavior".into(),
            code: -32000,
            message: "Browser context management is not supported.".into(),
        };
        assert_eq!(Capture::after(Err(refusal)), Capture::Refused);
        assert_eq!(Capture::after(Ok(())), Capture::On);
        let closed = CdpError::SessionClosed {
            method: "Browser.setDownloadBehavior".into(),
        };
        assert_eq!(Capture::after(Err(closed)), Capture::Off);
        let emit = unavailable(&"workspace:1".into(), &"lease:1".into(), &"target:1".into());
        assert_eq!(emit.event_type, "download");
        assert_eq!(
            emit.payload,
            json!({"state": "capture_unavailable", "targetId": "target:1", "reason": "session_refused"})
        );
        assert!(emit.payload.get("hints").is_none(), "no download started");
    }

    /// A flood of downloads with the longest names a page can give: the book admits one only
    /// while it stays within its count and byte bounds (`on_will_begin` cancels the rest
    /// unannounced), and `clear` takes everything with the tab.
    #[test]
    fn a_flood_stays_within_the_count_and_byte_bounds() {
        let mut book = DownloadBook::default();
        book.watch(SessionId::new("S"));
        let wide = bound_name(&"\u{1F600}".repeat(5 * super::super::bounds::MAX_NAME_CHARS));
        let mut refused = 0;
        for n in 0..1000 {
            let mut download = active(None);
            download.suggested = wide.clone();
            let guid = format!("{n:0>36}");
            match book.fits(&guid, &download) {
                true => {
                    book.active.insert(guid, download);
                }
                false => refused += 1,
            }
            assert!(book.len() <= MAX_TRACKED_DOWNLOADS_PER_TAB);
            assert!(
                book.bytes() <= MAX_DOWNLOAD_BOOK_BYTES,
                "{} bytes",
                book.bytes()
            );
        }
        assert!(
            refused > 0 && book.len() < MAX_TRACKED_DOWNLOADS_PER_TAB,
            "the bytes bind first"
        );
        // Small names: the count binds.
        let mut small = DownloadBook::default();
        for n in 0..1000 {
            let guid = format!("{n:0>36}");
            if small.fits(&guid, &active(None)) {
                small.active.insert(guid, active(None));
            }
        }
        assert_eq!(small.len(), MAX_TRACKED_DOWNLOADS_PER_TAB);
        let (taken, _) = book.clear();
        assert!(!taken.is_empty());
        assert!(book.is_empty() && book.bytes() == 0);
    }

    #[test]
    fn broker_cancels_and_other_ends_are_told_apart() {
        let mine = active(Some("quota_exceeded")).ended("cancelled", "quota_exceeded");
        assert_eq!(mine.payload["state"], "cancelled");
        assert_eq!(mine.payload["reason"], "quota_exceeded");
        assert_eq!(
            mine.payload["hints"][0]["recommendedAction"],
            "inspect_failure"
        );
        assert_eq!(mine.payload["hints"][0]["reason"], "quota_exceeded");
        let other = active(None).ended("failed", "interrupted");
        assert_eq!(other.payload["receivedBytes"], 300);
        assert_eq!(other.payload["totalBytes"], 1000);
        assert_eq!(other.lease_id.as_deref(), Some("lease:1"));
        assert_eq!(other.sensitivity, "browser_data");
        // No guid, no path: only opaque ids.
        let text = other.payload.to_string();
        assert!(!text.contains("\"S\"") && !text.contains("\"T\""), "{text}");
    }

    #[test]
    fn only_a_download_with_every_announced_byte_is_past_cancelling() {
        let mut download = active(None);
        assert!(!download.fully_received());
        download.received = download.total;
        assert!(download.fully_received());
        // No announced length: a cancel may still stop it.
        download.total = 0;
        assert!(!download.fully_received());
    }

    #[test]
    fn artifact_refusals_map_to_quota_or_storage() {
        assert_eq!(
            capture_failure(&ArtifactError::QuotaExceeded {
                what: "bytes",
                limit: 1
            }),
            ("cancelled", "quota_exceeded")
        );
        assert_eq!(
            capture_failure(&ArtifactError::TooLarge { len: 2, limit: 1 }),
            ("cancelled", "quota_exceeded")
        );
        assert_eq!(
            capture_failure(&ArtifactError::NotFound),
            ("failed", "storage_failed")
        );
    }

    fn paused(url: &str, disposition: Option<&str>) -> RequestPaused {
        let headers: Vec<Value> = disposition
            .map(|d| json!({"name": "content-disposition", "value": d}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({"requestId": "r", "request": {"url": url}, "resourceType": "Document", "responseStatusCode": 200, "responseHeaders": headers})).unwrap()
    }

    #[test]
    fn only_an_attachment_is_captured_and_its_name_comes_from_the_header_or_the_url() {
        let url = "http://127.0.0.1/files/r%C3%A9sum%C3%A9.pdf?x=1";
        assert_eq!(attachment_name(&paused(url, None)), None);
        assert_eq!(attachment_name(&paused(url, Some("inline"))), None);
        assert_eq!(
            attachment_name(&paused(url, Some("attachment; filename=\"report.csv\""))),
            Some("report.csv".to_owned())
        );
        assert_eq!(
            attachment_name(&paused(
                url,
                Some("Attachment; filename=plain.txt; filename*=UTF-8''na%C3%AFve.txt")
            )),
            Some("naïve.txt".to_owned())
        );
        assert_eq!(
            attachment_name(&paused(url, Some("attachment"))),
            Some("résumé.pdf".to_owned())
        );
        assert_eq!(
            attachment_name(&paused("http://127.0.0.1/", Some("attachment"))),
            Some("download".to_owned())
        );
        assert_eq!(percent_decode("100%zz%41"), "100%zzA");
    }

    #[test]
    fn the_quota_override_is_clamped() {
        let limits = DownloadLimits::from_env();
        assert!(QUOTA_OVERRIDE_RANGE.contains(&limits.session_quota_bytes));
        assert_eq!(limits.max_active_per_session, MAX_ACTIVE_PER_SESSION);
    }
}
