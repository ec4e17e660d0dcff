//! The `Page` domain: navigation, history, frame trees, isolated worlds, document-start
//! scripts, dialogs, screenshots and PDF printing as typed commands, and the page load, frame
//! and dialog events as typed event params, plus the `CdpClient` shorthands for navigation.
//! Wire shapes only: load waits are `session/load.rs`'s, frame bookkeeping `session/frames.rs`'s.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::{CdpClient, CdpError};
use super::command::{Command, Empty};
use super::event::EventParams;
use super::ids::SessionId;

/// `Page.enable`: the session reports page events (and a dialog the page opens stays
/// answerable by it, docs/cdp.md, "dialog session").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Enable {}

impl Command for Enable {
    const METHOD: &'static str = "Page.enable";
    type Reply = Empty;
}

/// `Page.navigate` of the session's main frame; answered when the navigation committed or
/// failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Navigate {
    pub url: String,
}

/// What `Page.navigate` answered. `error_text` is set when the navigation
/// failed before commit (`net::ERR_...`); `is_download` when the URL became
/// a download instead (docs/cdp.md, "downloads").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NavigateOutcome {
    pub frame_id: String,
    #[serde(default)]
    pub loader_id: Option<String>,
    #[serde(default)]
    pub error_text: Option<String>,
    #[serde(default)]
    pub is_download: bool,
}

impl Command for Navigate {
    const METHOD: &'static str = "Page.navigate";
    type Reply = NavigateOutcome;
}

/// `Page.reload` of the tab's main frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reload {}

impl Command for Reload {
    const METHOD: &'static str = "Page.reload";
    type Reply = Empty;
}

/// `Page.getNavigationHistory`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GetNavigationHistory {}

impl Command for GetNavigationHistory {
    const METHOD: &'static str = "Page.getNavigationHistory";
    type Reply = NavigationHistory;
}

/// One entry of `Page.getNavigationHistory`. Chromium reads these in the
/// browser process, so the page cannot change them by script; `title` is the
/// document's own title (empty when it has none, unlike `TargetInfo.title`,
/// which falls back to the URL) and at most 4,096 characters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NavigationEntry {
    pub id: i64,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub title: String,
}

/// `Page.getNavigationHistory`: the tab's session history and where it is.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NavigationHistory {
    pub current_index: i64,
    #[serde(default)]
    pub entries: Vec<NavigationEntry>,
}

impl NavigationHistory {
    /// The entry `offset` steps from the current one (0: the current entry).
    pub fn entry(&self, offset: i64) -> Option<&NavigationEntry> {
        let index = self.current_index.checked_add(offset)?;
        usize::try_from(index)
            .ok()
            .and_then(|index| self.entries.get(index))
    }
}

/// `Page.navigateToHistoryEntry` with an entry id from `GetNavigationHistory`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NavigateToHistoryEntry {
    pub entry_id: i64,
}

impl Command for NavigateToHistoryEntry {
    const METHOD: &'static str = "Page.navigateToHistoryEntry";
    type Reply = Empty;
}

/// `Page.setLifecycleEventsEnabled`: the session then reports `Page.lifecycleEvent` (`init`,
/// `DOMContentLoaded`, `load`, ...) per frame and loader. Chromium 156 replays the current
/// document's events (`commit`, `DOMContentLoaded`, `load`) when enabled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetLifecycleEventsEnabled {
    pub enabled: bool,
}

impl Command for SetLifecycleEventsEnabled {
    const METHOD: &'static str = "Page.setLifecycleEventsEnabled";
    type Reply = Empty;
}

/// `Page.getFrameTree` of the session: its root frame and, recursively, the frames in the same
/// process (an out-of-process frame shows as a leaf whose document lives in its own session).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GetFrameTree {}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetFrameTreeReply {
    pub frame_tree: FrameTree,
}

impl Command for GetFrameTree {
    const METHOD: &'static str = "Page.getFrameTree";
    type Reply = GetFrameTreeReply;
}

/// One node of a frame tree.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameTree {
    pub frame: Frame,
    #[serde(default)]
    pub child_frames: Vec<FrameTree>,
}

impl FrameTree {
    /// Every frame of the tree in pre-order (the root first).
    pub fn frames(&self) -> Vec<&Frame> {
        let mut frames = Vec::new();
        let mut pending = vec![self];
        while let Some(node) = pending.pop() {
            frames.push(&node.frame);
            pending.extend(node.child_frames.iter().rev());
        }
        frames
    }
}

/// A frame as `Page.getFrameTree` and `Page.frameNavigated` describe it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frame {
    pub id: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub loader_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub url_fragment: Option<String>,
    #[serde(default)]
    pub security_origin: String,
}

/// `Page.createIsolatedWorld` in one frame; creating a world of the same name again returns
/// the same context (docs/cdp.md, "isolated world").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateIsolatedWorld {
    pub frame_id: String,
    pub world_name: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateIsolatedWorldReply {
    pub execution_context_id: i64,
}

impl Command for CreateIsolatedWorld {
    const METHOD: &'static str = "Page.createIsolatedWorld";
    type Reply = CreateIsolatedWorldReply;
}

/// `Page.addScriptToEvaluateOnNewDocument`: `source` runs in every new document of the
/// session before any page script, in the isolated world `world_name` when given.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddScriptToEvaluateOnNewDocument {
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub world_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AddScriptToEvaluateOnNewDocumentReply {
    pub identifier: String,
}

impl Command for AddScriptToEvaluateOnNewDocument {
    const METHOD: &'static str = "Page.addScriptToEvaluateOnNewDocument";
    type Reply = AddScriptToEvaluateOnNewDocumentReply;
}

/// `Page.handleJavaScriptDialog`: accepts or dismisses the open dialog of the session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandleJavaScriptDialog {
    pub accept: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_text: Option<String>,
}

impl Command for HandleJavaScriptDialog {
    const METHOD: &'static str = "Page.handleJavaScriptDialog";
    type Reply = Empty;
}

/// The region of a screenshot, in CSS pixels of the document, and its scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Viewport {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    pub scale: f64,
}

/// `Page.captureScreenshot`; the reply carries the image base64-encoded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureScreenshot {
    /// `png`, `jpeg` or `webp`.
    pub format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clip: Option<Viewport>,
    pub capture_beyond_viewport: bool,
    pub optimize_for_speed: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CaptureScreenshotReply {
    pub data: String,
}

impl Command for CaptureScreenshot {
    const METHOD: &'static str = "Page.captureScreenshot";
    type Reply = CaptureScreenshotReply;
}

/// `Page.getLayoutMetrics`; only the CSS-pixel members are decoded (the device-pixel ones are
/// deprecated).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GetLayoutMetrics {}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LayoutMetrics {
    pub css_visual_viewport: Value,
    pub css_content_size: Value,
    #[serde(default)]
    pub visual_viewport: Option<Value>,
}

impl Command for GetLayoutMetrics {
    const METHOD: &'static str = "Page.getLayoutMetrics";
    type Reply = LayoutMetrics;
}

/// `Page.printToPDF` with `transferMode: ReturnAsStream`: the PDF is read from the returned
/// `IO` stream. `options` are the caller's validated print options (landscape, scale, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrintToPdf {
    #[serde(flatten)]
    pub options: serde_json::Map<String, Value>,
    pub transfer_mode: &'static str,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PrintToPdfReply {
    pub stream: String,
}

impl Command for PrintToPdf {
    const METHOD: &'static str = "Page.printToPDF";
    type Reply = PrintToPdfReply;
}

/// `Page.startScreencast`: while a screencast runs, a tab that is not the front tab of its
/// window still produces compositor frames, so `Page.captureScreenshot` is answered (see
/// docs/cdp.md "Background driving"). The Broker asks for tiny frames and never acks them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartScreencast {
    pub format: &'static str,
    pub quality: u64,
    pub max_width: u64,
    pub max_height: u64,
    /// Send every Nth compositor frame only (the live view's bound on its frame rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_nth_frame: Option<u64>,
}

impl Command for StartScreencast {
    const METHOD: &'static str = "Page.startScreencast";
    type Reply = Empty;
}

/// `Page.screencastFrame`: one frame of a running screencast (base64 `data`). Chromium sends
/// the next one only after `Page.screencastFrameAck` with this `sessionId` (the frame's number,
/// not a CDP session).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScreencastFrame {
    pub data: String,
    pub session_id: i64,
}

impl EventParams for ScreencastFrame {
    const METHOD: &'static str = "Page.screencastFrame";
}

/// `Page.screencastFrameAck`: the frame numbered `session_id` was taken; send the next.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScreencastFrameAck {
    pub session_id: i64,
}

impl Command for ScreencastFrameAck {
    const METHOD: &'static str = "Page.screencastFrameAck";
    type Reply = Empty;
}

/// `Page.stopScreencast`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StopScreencast {}

impl Command for StopScreencast {
    const METHOD: &'static str = "Page.stopScreencast";
    type Reply = Empty;
}

/// `Page.lifecycleEvent`: `name` (`init`, `commit`, `DOMContentLoaded`, `load`, ...) of one
/// frame's loader.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleEvent {
    pub frame_id: String,
    pub loader_id: String,
    pub name: String,
}

impl EventParams for LifecycleEvent {
    const METHOD: &'static str = "Page.lifecycleEvent";
}

/// `Page.frameStartedNavigating`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameStartedNavigating {
    pub frame_id: String,
    #[serde(default)]
    pub loader_id: Option<String>,
    /// `differentDocument`, `sameDocument`, `historySameDocument`, `reload`, ...
    #[serde(default)]
    pub navigation_type: Option<String>,
}

impl FrameStartedNavigating {
    /// Whether the navigation keeps the document (`sameDocument`, `historySameDocument`);
    /// every other type replaces it.
    pub fn same_document(&self) -> bool {
        matches!(
            self.navigation_type.as_deref(),
            Some("sameDocument" | "historySameDocument")
        )
    }
}

impl EventParams for FrameStartedNavigating {
    const METHOD: &'static str = "Page.frameStartedNavigating";
}

/// `Page.frameNavigated`: a frame committed a document.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameNavigated {
    pub frame: Frame,
    /// `Navigation` or `BackForwardCacheRestore`.
    #[serde(default, rename = "type")]
    pub navigation_type: Option<String>,
}

impl FrameNavigated {
    /// A back/forward cache restore (which fires no lifecycle events at all).
    pub fn restored(&self) -> bool {
        self.navigation_type.as_deref() == Some("BackForwardCacheRestore")
    }
}

impl EventParams for FrameNavigated {
    const METHOD: &'static str = "Page.frameNavigated";
}

/// `Page.navigatedWithinDocument`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NavigatedWithinDocument {
    pub frame_id: String,
    #[serde(default)]
    pub url: String,
}

impl EventParams for NavigatedWithinDocument {
    const METHOD: &'static str = "Page.navigatedWithinDocument";
}

/// `Page.frameStoppedLoading`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameStoppedLoading {
    pub frame_id: String,
}

impl EventParams for FrameStoppedLoading {
    const METHOD: &'static str = "Page.frameStoppedLoading";
}

/// `Page.frameDetached`: `reason` is `remove` or `swap` (a process swap: the frame continues
/// in another session).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameDetached {
    pub frame_id: String,
    #[serde(default)]
    pub reason: Option<String>,
}

impl FrameDetached {
    pub fn swapped(&self) -> bool {
        self.reason.as_deref() == Some("swap")
    }
}

impl EventParams for FrameDetached {
    const METHOD: &'static str = "Page.frameDetached";
}

/// `Page.javascriptDialogOpening`. Every field is page-controlled text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JavascriptDialogOpening {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub message: String,
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    #[serde(rename = "type", default = "alert")]
    pub dialog_type: String,
    #[serde(default)]
    pub default_prompt: Option<String>,
}

fn alert() -> String {
    "alert".to_owned()
}

impl EventParams for JavascriptDialogOpening {
    const METHOD: &'static str = "Page.javascriptDialogOpening";
}

/// `Page.javascriptDialogClosed`: `result` is whether it was accepted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JavascriptDialogClosed {
    #[serde(default)]
    pub result: bool,
}

impl EventParams for JavascriptDialogClosed {
    const METHOD: &'static str = "Page.javascriptDialogClosed";
}

/// `Page.setInterceptFileChooserDialog`: while enabled, a file chooser the page opens is never
/// shown; the session reports `Page.fileChooserOpened` instead (docs/cdp.md, "file chooser").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetInterceptFileChooserDialog {
    pub enabled: bool,
}

impl Command for SetInterceptFileChooserDialog {
    const METHOD: &'static str = "Page.setInterceptFileChooserDialog";
    type Reply = Empty;
}

/// `Page.fileChooserOpened` (only while interception is enabled): `mode` is `selectSingle` or
/// `selectMultiple`; `backend_node_id` the input, absent for choosers not opened by one.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChooserOpened {
    #[serde(default)]
    pub frame_id: String,
    #[serde(default)]
    pub mode: String,
    #[serde(default)]
    pub backend_node_id: Option<i64>,
}

impl FileChooserOpened {
    /// Whether the chooser takes several files.
    pub fn multiple(&self) -> bool {
        self.mode == "selectMultiple"
    }
}

impl EventParams for FileChooserOpened {
    const METHOD: &'static str = "Page.fileChooserOpened";
}

impl CdpClient {
    /// `Page.navigate` on a session.
    pub async fn navigate(
        &self,
        session: &SessionId,
        url: &str,
        timeout: Duration,
    ) -> Result<NavigateOutcome, CdpError> {
        let command = Navigate {
            url: url.to_owned(),
        };
        self.execute(session, &command, timeout).await
    }

    /// `Page.setLifecycleEventsEnabled`.
    pub async fn set_lifecycle_events_enabled(
        &self,
        session: &SessionId,
        enabled: bool,
        timeout: Duration,
    ) -> Result<(), CdpError> {
        let command = SetLifecycleEventsEnabled { enabled };
        self.execute(session, &command, timeout).await.map(|_| ())
    }

    /// `Page.getNavigationHistory` on a tab session.
    pub async fn navigation_history(
        &self,
        session: &SessionId,
        timeout: Duration,
    ) -> Result<NavigationHistory, CdpError> {
        self.execute(session, &GetNavigationHistory {}, timeout)
            .await
    }

    /// `Page.navigateToHistoryEntry` with an entry id from `navigation_history`.
    pub async fn navigate_to_history_entry(
        &self,
        session: &SessionId,
        entry_id: i64,
        timeout: Duration,
    ) -> Result<(), CdpError> {
        let command = NavigateToHistoryEntry { entry_id };
        self.execute(session, &command, timeout).await.map(|_| ())
    }

    /// `Page.reload` of the tab's main frame.
    pub async fn reload(&self, session: &SessionId, timeout: Duration) -> Result<(), CdpError> {
        self.execute(session, &Reload {}, timeout).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    #[test]
    fn commands_have_the_wire_shape() {
        assert_eq!(params(&Enable {}), json!({}));
        assert_eq!(
            params(&Navigate {
                url: "http://127.0.0.1:8000/".to_owned()
            }),
            json!({"url": "http://127.0.0.1:8000/"})
        );
        assert_eq!(params(&Reload {}), json!({}));
        assert_eq!(
            params(&SetInterceptFileChooserDialog { enabled: true }),
            json!({"enabled": true})
        );
        assert_eq!(
            params(&NavigateToHistoryEntry { entry_id: 22 }),
            json!({"entryId": 22})
        );
        assert_eq!(
            params(&SetLifecycleEventsEnabled { enabled: true }),
            json!({"enabled": true})
        );
        assert_eq!(
            params(&CreateIsolatedWorld {
                frame_id: "F".to_owned(),
                world_name: "browser-pilot".to_owned()
            }),
            json!({"frameId": "F", "worldName": "browser-pilot"})
        );
        assert_eq!(
            params(&AddScriptToEvaluateOnNewDocument {
                source: "1".to_owned(),
                world_name: Some("w".to_owned())
            }),
            json!({"source": "1", "worldName": "w"})
        );
        assert_eq!(
            params(&HandleJavaScriptDialog {
                accept: true,
                prompt_text: None
            }),
            json!({"accept": true})
        );
        assert_eq!(
            params(&CaptureScreenshot {
                format: "jpeg",
                quality: Some(80),
                clip: Some(Viewport {
                    x: 0.0,
                    y: 10.0,
                    width: 800.0,
                    height: 600.0,
                    scale: 1.0
                }),
                capture_beyond_viewport: false,
                optimize_for_speed: true,
            }),
            json!({"format": "jpeg", "quality": 80, "captureBeyondViewport": false,
                "optimizeForSpeed": true,
                "clip": {"x": 0.0, "y": 10.0, "width": 800.0, "height": 600.0, "scale": 1.0}})
        );
        let mut options = serde_json::Map::new();
        options.insert("landscape".to_owned(), json!(true));
        assert_eq!(
            params(&PrintToPdf {
                options,
                transfer_mode: "ReturnAsStream"
            }),
            json!({"landscape": true, "transferMode": "ReturnAsStream"})
        );
    }

    /// `Page.getFrameTree` of a fixture tab holding one `srcdoc` iframe, recorded from
    /// Chromium 156.
    fn frame_tree_sample() -> serde_json::Value {
        json!({"frameTree":{"childFrames":[{"frame":{"adFrameStatus":{"adFrameType":"none","explanations":[]},"crossOriginIsolatedContextType":"NotIsolated","domainAndRegistry":"","gatedAPIFeatures":[],"id":"8CA8D39EBB5F4B5ECF3884526CE93705","loaderId":"4BF5785E5FA38BD6C21EADCA2346BD72","mimeType":"text/html","name":"inner","parentId":"FC5A3C1B58A88245272668F3F49949EB","secureContextType":"SecureLocalhost","securityOrigin":"://","securityOriginDetails":{"isLocalhost":false},"url":"about:srcdoc"}}],"frame":{"adFrameStatus":{"adFrameType":"none"},"crossOriginIsolatedContextType":"NotIsolated","domainAndRegistry":"","gatedAPIFeatures":[],"id":"FC5A3C1B58A88245272668F3F49949EB","loaderId":"2E1937A88FEE0FE481E74A5ECFE19904","mimeType":"text/html","secureContextType":"SecureLocalhost","securityOrigin":"http://127.0.0.1:45519","securityOriginDetails":{"isLocalhost":true},"url":"http://127.0.0.1:45519/page/rec"}}})
    }

    /// Replies recorded from Chromium 156, except the failure and download shapes of
    /// `Page.navigate` (docs/cdp.md, "downloads") and the screenshot data (shortened).
    #[test]
    fn replies_decode_from_chromium_samples() {
        let navigated = reply::<Navigate>(
            json!({"frameId":"FC5A3C1B58A88245272668F3F49949EB","isDownload":false,"loaderId":"2E1937A88FEE0FE481E74A5ECFE19904"}),
        );
        assert_eq!(
            navigated.loader_id.as_deref(),
            Some("2E1937A88FEE0FE481E74A5ECFE19904")
        );
        assert_eq!((navigated.error_text, navigated.is_download), (None, false));
        let failed = reply::<Navigate>(
            json!({"frameId": "M", "loaderId": "L9", "errorText": "net::ERR_CONNECTION_REFUSED"}),
        );
        assert_eq!(
            failed.error_text.as_deref(),
            Some("net::ERR_CONNECTION_REFUSED")
        );
        let download = reply::<Navigate>(json!({"frameId": "M", "isDownload": true}));
        assert!(download.is_download);
        let tree = reply::<GetFrameTree>(frame_tree_sample()).frame_tree;
        let ids: Vec<&str> = tree.frames().iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "FC5A3C1B58A88245272668F3F49949EB",
                "8CA8D39EBB5F4B5ECF3884526CE93705"
            ]
        );
        let inner = &tree.child_frames[0].frame;
        assert_eq!(
            inner.parent_id.as_deref(),
            Some("FC5A3C1B58A88245272668F3F49949EB")
        );
        assert_eq!(
            (
                inner.name.as_deref(),
                inner.url.as_str(),
                inner.url_fragment.as_deref()
            ),
            (Some("inner"), "about:srcdoc", None)
        );
        assert_eq!(tree.frame.parent_id, None);
        assert_eq!(tree.frame.security_origin, "http://127.0.0.1:45519");
        let world = reply::<CreateIsolatedWorld>(json!({"executionContextId":3}));
        assert_eq!(world.execution_context_id, 3);
        let script = reply::<AddScriptToEvaluateOnNewDocument>(json!({"identifier":"1"}));
        assert_eq!(script.identifier, "1");
        let shot = reply::<CaptureScreenshot>(json!({"data": "iVBORw0KGgo="}));
        assert_eq!(shot.data, "iVBORw0KGgo=");
        let pdf = reply::<PrintToPdf>(json!({"data":"","stream":"1"}));
        assert_eq!(pdf.stream, "1");
        reply::<Enable>(json!({}));
        reply::<Reload>(json!({}));
        reply::<SetLifecycleEventsEnabled>(json!({}));
        reply::<HandleJavaScriptDialog>(json!({}));
        let metrics = reply::<GetLayoutMetrics>(
            json!({"contentSize":{"height":493,"width":780,"x":0,"y":0},"cssContentSize":{"height":493,"width":780,"x":0,"y":0},"cssLayoutViewport":{"clientHeight":493,"clientWidth":780,"pageX":0,"pageY":0},"cssVisualViewport":{"clientHeight":493,"clientWidth":780,"offsetX":0,"offsetY":0,"pageX":0,"pageY":0,"scale":1,"zoom":1},"layoutViewport":{"clientHeight":493,"clientWidth":780,"pageX":0,"pageY":0},"visualViewport":{"clientHeight":493,"clientWidth":780,"offsetX":0,"offsetY":0,"pageX":0,"pageY":0,"scale":1,"zoom":1}}),
        );
        assert_eq!(metrics.css_content_size["height"], 493);
        assert_eq!(metrics.css_visual_viewport["clientWidth"], 780);
    }

    /// Recorded from Chromium 156: a tab opened on about:blank, then navigated.
    #[test]
    fn navigation_history_finds_entries_by_offset() {
        let history = reply::<GetNavigationHistory>(
            json!({"currentIndex":1,"entries":[{"id":8,"title":"","transitionType":"auto_toplevel","url":"about:blank","userTypedURL":"about:blank"},{"id":13,"title":"rec","transitionType":"typed","url":"http://127.0.0.1:45519/page/rec","userTypedURL":"http://127.0.0.1:45519/page/rec"}]}),
        );
        assert_eq!(history.entry(0).map(|e| e.id), Some(13));
        assert_eq!(history.entry(0).map(|e| e.title.as_str()), Some("rec"));
        assert_eq!(
            history
                .entry(-1)
                .map(|e| (e.url.as_str(), e.title.as_str())),
            Some(("about:blank", ""))
        );
        assert_eq!(history.entry(1), None);
        assert_eq!(history.entry(-2), None);
    }
}
