//! The live view's side of the session (docs/view.md): the origins the view serves on, which
//! are never an eligible tab (not listed, not resolvable, so no agent can drive the view's own
//! tab), and the read-only reads the view makes: the tabs every Workspace manages or controls,
//! and a frame of one of them.
//!
//! Nothing here takes a tab's turn or a Command: a frame is one `Page.captureScreenshot` on the
//! session the tools already set up for the tab, sent beside whatever the tab's Command does,
//! so the view never waits for an agent and never holds one up.

use std::sync::RwLock;
use std::time::Duration;

use super::service::BrowserService;
use super::tab::TabHandle;
use crate::cdp::page::CaptureScreenshot;

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
        self.with_registry(|registry| registry.view_rows())
    }

    /// One JPEG frame (base64) of a Workspace's tab, taken on the session the tools set up.
    pub async fn view_frame(&self, workspace_id: &str, opaque: &str) -> Result<String, FrameError> {
        let handle = self
            .tab_handle(&workspace_id.into(), &opaque.into())
            .map_err(|_| FrameError::NotFound)?;
        let session = handle.books().view_session.clone();
        let session = session.ok_or(FrameError::NoSession)?;
        let live = self.live().ok_or(FrameError::NotFound)?;
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
}
