//! The `Target` domain: target discovery, creation, attachment and closing, as typed commands
//! (`CreateTarget`, `AttachToTarget`, `CloseTarget`, `GetTargets`, `GetTargetInfo`,
//! `SetDiscoverTargets`, `SetAutoAttach`) and typed events (`TargetCreated`, ...,
//! `DetachedFromTarget`), plus the `CdpClient` shorthands for the common ones. Wire shapes only:
//! what a target means to a Workspace is `session/`'s business.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::client::{CdpClient, CdpError};
use super::command::{self, Command, Empty};
use super::event::EventParams;
use super::ids::{BrowserContextId, SessionId, TargetId};

/// One entry of `Target.getTargets` / `Target.targetCreated`, as Chromium
/// describes it. Crate-internal: the agent protocol maps it to its own ids.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetInfo {
    pub target_id: TargetId,
    /// `page`, `iframe`, `browser_ui`, `worker`, ... (docs/cdp.md, "target types").
    #[serde(rename = "type")]
    pub target_type: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub opener_id: Option<TargetId>,
    #[serde(default)]
    pub browser_context_id: Option<String>,
    #[serde(default)]
    pub attached: bool,
    /// `prerender` for prerendered pages, which are not user tabs.
    #[serde(default)]
    pub subtype: Option<String>,
    /// For an `iframe` target: the frame that holds it (in its parent's frame tree).
    #[serde(default)]
    pub parent_frame_id: Option<String>,
}

impl TargetInfo {
    /// A page target as the Broker knows it before Chromium describes it: no title, no opener,
    /// in the default browser context, not attached.
    pub fn page(target_id: TargetId, url: &str) -> TargetInfo {
        TargetInfo {
            target_id,
            target_type: "page".into(),
            title: String::new(),
            url: url.to_owned(),
            opener_id: None,
            browser_context_id: None,
            attached: false,
            subtype: None,
            parent_frame_id: None,
        }
    }
}

/// `Target.createTarget`: opens a tab (or a window), with Chromium's default focus: the new tab
/// is the front tab of its window. A tab created with `focus: false` stays hidden behind it, and
/// a hidden tab's screenshot was not answered in time (docs/cdp.md, "Background driving").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTarget {
    pub url: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub new_window: bool,
    /// `false`: the new tab (or window) is not activated; absent: Chromium's default (focused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<bool>,
    /// The browser context to open it in; absent: the profile's default context.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "command::optional_browser_context_id"
    )]
    pub browser_context_id: Option<BrowserContextId>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTargetReply {
    pub target_id: TargetId,
}

impl Command for CreateTarget {
    const METHOD: &'static str = "Target.createTarget";
    type Reply = CreateTargetReply;
}

/// `Target.createBrowserContext`: a new context with cookies, storage and cache of its own
/// (shared with no other context, the user's included). With `disposeOnDetach` Chromium disposes
/// it, and closes its pages, when the connection or browser-target session that made it ends;
/// without it the context outlives its maker (docs/cdp.md, "browser contexts").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateBrowserContext {
    pub dispose_on_detach: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateBrowserContextReply {
    pub browser_context_id: BrowserContextId,
}

impl Command for CreateBrowserContext {
    const METHOD: &'static str = "Target.createBrowserContext";
    type Reply = CreateBrowserContextReply;
}

/// `Target.disposeBrowserContext`: closes every page of the context and drops its cookies and
/// storage. Any connection may dispose any context; an unknown id is an error.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisposeBrowserContext {
    #[serde(serialize_with = "command::browser_context_id")]
    pub browser_context_id: BrowserContextId,
}

impl Command for DisposeBrowserContext {
    const METHOD: &'static str = "Target.disposeBrowserContext";
    type Reply = Empty;
}

/// `Target.attachToTarget` with `flatten: true`; the session id goes on the top-level
/// `sessionId` of later calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachToTarget {
    #[serde(serialize_with = "command::target_id")]
    pub target_id: TargetId,
    pub flatten: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachToTargetReply {
    pub session_id: SessionId,
}

impl Command for AttachToTarget {
    const METHOD: &'static str = "Target.attachToTarget";
    type Reply = AttachToTargetReply;
}

/// `Target.attachToBrowserTarget`: a new flattened session on the browser target itself, with
/// its own Target-domain state (auto-attach, discovery) and its own child sessions. Detaching it
/// detaches every session attached through it and resumes a page waiting for its debugger
/// (docs/cdp.md, "The keeper").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttachToBrowserTarget {}

impl Command for AttachToBrowserTarget {
    const METHOD: &'static str = "Target.attachToBrowserTarget";
    type Reply = AttachToTargetReply;
}

/// `Target.detachFromTarget` of one flattened session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetachFromTarget {
    #[serde(serialize_with = "command::session_id")]
    pub session_id: SessionId,
}

impl Command for DetachFromTarget {
    const METHOD: &'static str = "Target.detachFromTarget";
    type Reply = Empty;
}

/// `Target.closeTarget`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloseTarget {
    #[serde(serialize_with = "command::target_id")]
    pub target_id: TargetId,
}

/// Chromium 156 still sends the deprecated `success`; a missing flag means success.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CloseTargetReply {
    #[serde(default = "yes")]
    pub success: bool,
}

fn yes() -> bool {
    true
}

impl Command for CloseTarget {
    const METHOD: &'static str = "Target.closeTarget";
    type Reply = CloseTargetReply;
}

/// `Target.getTargets` with the default filter (everything except the `browser` and `tab`
/// types).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GetTargets {}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTargetsReply {
    pub target_infos: Vec<TargetInfo>,
}

impl Command for GetTargets {
    const METHOD: &'static str = "Target.getTargets";
    type Reply = GetTargetsReply;
}

/// `Target.getTargetInfo` for one target (browser-level; answered even while the tab shows a
/// dialog).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTargetInfo {
    #[serde(serialize_with = "command::target_id")]
    pub target_id: TargetId,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTargetInfoReply {
    pub target_info: TargetInfo,
}

impl Command for GetTargetInfo {
    const METHOD: &'static str = "Target.getTargetInfo";
    type Reply = GetTargetInfoReply;
}

/// `Target.setDiscoverTargets`: when enabled, Chromium replays one `Target.targetCreated` per
/// existing target and then reports changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetDiscoverTargets {
    pub discover: bool,
}

impl Command for SetDiscoverTargets {
    const METHOD: &'static str = "Target.setDiscoverTargets";
    type Reply = Empty;
}

/// One entry of `Target.setAutoAttach`'s `filter`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetFilter {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub target_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude: Option<bool>,
}

/// `Target.setAutoAttach` on a session: related targets matching `filter` attach as flattened
/// child sessions (`Target.attachedToTarget` on that session).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetAutoAttach {
    pub auto_attach: bool,
    pub wait_for_debugger_on_start: bool,
    pub flatten: bool,
    pub filter: Vec<TargetFilter>,
}

impl SetAutoAttach {
    /// What a tab (or OOPIF) session enables: Chromium attaches every out-of-process iframe and
    /// every dedicated worker as a flattened child session (`Target.attachedToTarget` carrying
    /// the parent's session), paused at its start until the pump has enabled its domains
    /// (network observation and interception from its first request) and sent
    /// `Runtime.runIfWaitingForDebugger`. Workers must be in the filter: with
    /// `waitForDebuggerOnStart`, Chromium 156 also holds a dedicated worker the filter excludes,
    /// and nothing would ever resume it (docs/network.md, "URL policy"). Field notes §2
    /// "Auto-attach".
    pub fn iframes() -> SetAutoAttach {
        SetAutoAttach {
            auto_attach: true,
            wait_for_debugger_on_start: true,
            flatten: true,
            filter: vec![
                TargetFilter {
                    target_type: Some("iframe"),
                    exclude: None,
                },
                TargetFilter {
                    target_type: Some("worker"),
                    exclude: None,
                },
                TargetFilter {
                    target_type: None,
                    exclude: Some(true),
                },
            ],
        }
    }
}

impl SetAutoAttach {
    /// What the browser connection enables: every page target (existing tabs, new tabs and
    /// popups) is attached as a flattened session, and a new one is paused at its start until
    /// `Runtime.runIfWaitingForDebugger`, so a managed popup gets network observation and its
    /// Workspace's rules before its first request. Field notes §0 item 2.
    pub fn pages() -> SetAutoAttach {
        SetAutoAttach {
            auto_attach: true,
            wait_for_debugger_on_start: true,
            flatten: true,
            filter: vec![
                TargetFilter {
                    target_type: Some("page"),
                    exclude: None,
                },
                TargetFilter {
                    target_type: None,
                    exclude: Some(true),
                },
            ],
        }
    }
}

impl Command for SetAutoAttach {
    const METHOD: &'static str = "Target.setAutoAttach";
    type Reply = Empty;
}

/// The common prefix of the `Target.target*` lifecycle event names (created, info changed,
/// destroyed, crashed): a prefilter over raw message text can look for it in one pass.
pub const TARGET_EVENTS_PREFIX: &str = "Target.target";

/// `Target.targetCreated`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetCreated {
    pub target_info: TargetInfo,
}

impl EventParams for TargetCreated {
    const METHOD: &'static str = "Target.targetCreated";
}

/// `Target.targetInfoChanged`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetInfoChanged {
    pub target_info: TargetInfo,
}

impl EventParams for TargetInfoChanged {
    const METHOD: &'static str = "Target.targetInfoChanged";
}

/// `Target.targetDestroyed`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetDestroyed {
    pub target_id: TargetId,
}

impl EventParams for TargetDestroyed {
    const METHOD: &'static str = "Target.targetDestroyed";
}

/// `Target.targetCrashed`: the target's renderer died.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetCrashed {
    pub target_id: TargetId,
}

impl EventParams for TargetCrashed {
    const METHOD: &'static str = "Target.targetCrashed";
}

/// `Target.attachedToTarget`: on the browser connection for an attach the Broker asked for, on
/// a session for an auto-attached child (an OOPIF).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachedToTarget {
    pub session_id: SessionId,
    pub target_info: TargetInfo,
    #[serde(default)]
    pub waiting_for_debugger: bool,
}

impl EventParams for AttachedToTarget {
    const METHOD: &'static str = "Target.attachedToTarget";
}

/// `Target.detachedFromTarget`: the session ended.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetachedFromTarget {
    pub session_id: SessionId,
    #[serde(default)]
    pub target_id: Option<TargetId>,
}

impl EventParams for DetachedFromTarget {
    const METHOD: &'static str = "Target.detachedFromTarget";
}

impl CdpClient {
    /// `Target.createTarget`: opens a tab (or a window) and returns its id, with Chromium's
    /// default focus (the new tab comes to the front and its window is activated).
    pub async fn create_target(
        &self,
        url: &str,
        new_window: bool,
        timeout: Duration,
    ) -> Result<TargetId, CdpError> {
        let command = CreateTarget {
            url: url.to_owned(),
            new_window,
            focus: None,
            browser_context_id: None,
        };
        Ok(self.execute(None, &command, timeout).await?.target_id)
    }

    /// `Target.createTarget {newWindow: true, focus: false}`: a new window whose only tab is
    /// its visible front tab, shown without being activated, so the window the user works in
    /// keeps the focus (docs/cdp.md "Background driving").
    /// With a `context`, the window is that browser context's (its first window when it has
    /// none yet).
    pub async fn create_background_window(
        &self,
        url: &str,
        context: Option<&BrowserContextId>,
        timeout: Duration,
    ) -> Result<TargetId, CdpError> {
        let command = CreateTarget {
            url: url.to_owned(),
            new_window: true,
            focus: Some(false),
            browser_context_id: context.cloned(),
        };
        Ok(self.execute(None, &command, timeout).await?.target_id)
    }

    /// `Target.attachToTarget` with `flatten: true`.
    pub async fn attach_to_target(
        &self,
        target: &TargetId,
        timeout: Duration,
    ) -> Result<SessionId, CdpError> {
        let command = AttachToTarget {
            target_id: target.clone(),
            flatten: true,
        };
        Ok(self.execute(None, &command, timeout).await?.session_id)
    }

    /// `Target.closeTarget`; returns Chromium's `success` flag.
    pub async fn close_target(
        &self,
        target: &TargetId,
        timeout: Duration,
    ) -> Result<bool, CdpError> {
        let command = CloseTarget {
            target_id: target.clone(),
        };
        Ok(self.execute(None, &command, timeout).await?.success)
    }

    /// `Target.getTargets` with the default filter.
    pub async fn get_targets(&self, timeout: Duration) -> Result<Vec<TargetInfo>, CdpError> {
        Ok(self
            .execute(None, &GetTargets {}, timeout)
            .await?
            .target_infos)
    }

    /// `Target.getTargetInfo` for one target.
    pub async fn get_target_info(
        &self,
        target: &TargetId,
        timeout: Duration,
    ) -> Result<TargetInfo, CdpError> {
        let command = GetTargetInfo {
            target_id: target.clone(),
        };
        Ok(self.execute(None, &command, timeout).await?.target_info)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    /// A `targetInfo` recorded from Chromium 156 for a fixture tab.
    fn page_info() -> serde_json::Value {
        json!({"attached":true,"browserContextId":"BD5129C3E5009BCB12CFF0B137C509F5","canAccessOpener":false,"targetId":"FC5A3C1B58A88245272668F3F49949EB","title":"rec","type":"page","url":"http://127.0.0.1:45519/page/rec"})
    }

    #[test]
    fn target_info_decodes_chromium_shape() {
        let info: TargetInfo = serde_json::from_value(json!({
            "targetId": "T2", "type": "page", "title": "x", "url": "about:blank",
            "attached": false, "openerId": "T1", "canAccessOpener": false,
            "browserContextId": "C"
        }))
        .unwrap();
        assert_eq!(info.target_id, TargetId::new("T2"));
        assert_eq!(info.opener_id, Some(TargetId::new("T1")));
        assert_eq!(info.target_type, "page");
        assert_eq!(info.browser_context_id.as_deref(), Some("C"));
        assert!(!info.attached);
        let iframe: TargetInfo = serde_json::from_value(json!({
            "targetId": "F1", "type": "iframe", "title": "", "url": "http://b.test/",
            "attached": true, "canAccessOpener": false, "parentFrameId": "M1",
            "browserContextId": "C"
        }))
        .unwrap();
        assert_eq!(iframe.parent_frame_id.as_deref(), Some("M1"));
    }

    #[test]
    fn the_target_events_share_their_prefix() {
        for method in [
            TargetCreated::METHOD,
            TargetInfoChanged::METHOD,
            TargetDestroyed::METHOD,
            TargetCrashed::METHOD,
        ] {
            assert!(method.starts_with(TARGET_EVENTS_PREFIX), "{method}");
        }
    }

    #[test]
    fn commands_have_the_wire_shape() {
        let create = CreateTarget {
            url: "about:blank".to_owned(),
            new_window: false,
            focus: None,
            browser_context_id: None,
        };
        assert_eq!(params(&create), json!({"url": "about:blank"}));
        let window = CreateTarget {
            url: "about:blank".to_owned(),
            new_window: true,
            focus: None,
            browser_context_id: None,
        };
        assert_eq!(
            params(&window),
            json!({"url": "about:blank", "newWindow": true})
        );
        let background = CreateTarget {
            url: "about:blank".to_owned(),
            new_window: true,
            focus: Some(false),
            browser_context_id: Some(BrowserContextId::new("C")),
        };
        assert_eq!(
            params(&background),
            json!({"url": "about:blank", "newWindow": true, "focus": false, "browserContextId": "C"})
        );
        assert_eq!(
            params(&CreateBrowserContext {
                dispose_on_detach: true
            }),
            json!({"disposeOnDetach": true})
        );
        assert_eq!(
            params(&DisposeBrowserContext {
                browser_context_id: BrowserContextId::new("C")
            }),
            json!({"browserContextId": "C"})
        );
        let context = reply::<CreateBrowserContext>(
            json!({"browserContextId": "61AA6D1E12CB21616691505BEBA3BC0E"}),
        );
        assert_eq!(
            context.browser_context_id.as_str(),
            "61AA6D1E12CB21616691505BEBA3BC0E"
        );
        let attach = AttachToTarget {
            target_id: TargetId::new("T"),
            flatten: true,
        };
        assert_eq!(params(&attach), json!({"targetId": "T", "flatten": true}));
        let close = CloseTarget {
            target_id: TargetId::new("T"),
        };
        assert_eq!(params(&close), json!({"targetId": "T"}));
        assert_eq!(params(&GetTargets {}), json!({}));
        assert_eq!(
            params(&SetDiscoverTargets { discover: true }),
            json!({"discover": true})
        );
        assert_eq!(
            params(&SetAutoAttach::iframes()),
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true,
                "filter": [{"type": "iframe"}, {"type": "worker"}, {"exclude": true}]})
        );
        assert_eq!(CloseTarget::METHOD, "Target.closeTarget");
    }

    /// Recorded from Chromium 156, and a close reply without the deprecated `success`.
    #[test]
    fn replies_decode_from_chromium_samples() {
        let created = reply::<CreateTarget>(json!({"targetId":"FC5A3C1B58A88245272668F3F49949EB"}));
        assert_eq!(
            created.target_id.as_str(),
            "FC5A3C1B58A88245272668F3F49949EB"
        );
        let attached =
            reply::<AttachToTarget>(json!({"sessionId":"64CF082844C5C9D95E3DF4CA3E5893A6"}));
        assert_eq!(
            attached.session_id.as_str(),
            "64CF082844C5C9D95E3DF4CA3E5893A6"
        );
        assert!(reply::<CloseTarget>(json!({"success":true})).success);
        assert!(reply::<CloseTarget>(json!({})).success);
        let omnibox = json!({"attached":false,"browserContextId":"BD5129C3E5009BCB12CFF0B137C509F5","canAccessOpener":false,"targetId":"0FC24E7898F0408071A422DB65CC541A","title":"Omnibox Popup","type":"browser_ui","url":"chrome://omnibox-popup.top-chrome/omnibox_popup_aim.html"});
        let targets = reply::<GetTargets>(json!({"targetInfos": [page_info(), omnibox]}));
        let kinds: Vec<&str> = targets
            .target_infos
            .iter()
            .map(|t| t.target_type.as_str())
            .collect();
        assert_eq!(kinds, ["page", "browser_ui"]);
        let info = reply::<GetTargetInfo>(json!({"targetInfo": page_info()}));
        assert_eq!(info.target_info.url, "http://127.0.0.1:45519/page/rec");
        assert_eq!(info.target_info.title, "rec");
        assert!(info.target_info.attached);
        reply::<SetDiscoverTargets>(json!({}));
        reply::<SetAutoAttach>(json!({}));
        let missing = super::super::command::decode_reply::<CreateTarget>(json!({})).unwrap_err();
        assert!(matches!(missing, CdpError::UnexpectedResult { .. }));
    }
}
