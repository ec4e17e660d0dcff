//! The typed subset of CDP commands the Broker uses, each a thin function
//! over `CdpClient::call` that builds params and decodes the result. Wire
//! shapes of Chromium's replies are decoded here and nowhere else; this file
//! holds no state and never touches the agent protocol.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::client::{CdpClient, CdpError};
use super::ids::{SessionId, TargetId};

/// One entry of `Target.getTargets` / `Target.targetCreated`, as Chromium
/// describes it. Crate-internal: the agent protocol maps it to its own ids.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetInfo {
    pub target_id: TargetId,
    /// `page`, `iframe`, `browser_ui`, `worker`, ... (field notes §2).
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
}

/// What `Page.navigate` answered. `error_text` is set when the navigation
/// failed before commit (`net::ERR_...`); `is_download` when the URL became
/// a download instead (field notes §6).
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

/// The outcome of `Runtime.evaluate` with `returnByValue`: the page either
/// produced a value or threw. Transport failures are `CdpError`s instead.
#[derive(Debug, Clone, PartialEq)]
pub enum Evaluation {
    Value(Value),
    Exception { text: String },
}

impl CdpClient {
    /// `Target.createTarget`: opens a tab (or a window) and returns its id.
    pub async fn create_target(
        &self,
        url: &str,
        new_window: bool,
        timeout: Duration,
    ) -> Result<TargetId, CdpError> {
        let method = "Target.createTarget";
        let mut params = json!({ "url": url });
        if new_window {
            params["newWindow"] = Value::Bool(true);
        }
        let result = self.call(None, method, params, timeout).await?;
        decode_field(method, result, "targetId")
    }

    /// `Target.attachToTarget` with `flatten: true`; the returned session id
    /// goes on the top-level `sessionId` of later calls.
    pub async fn attach_to_target(
        &self,
        target: &TargetId,
        timeout: Duration,
    ) -> Result<SessionId, CdpError> {
        let method = "Target.attachToTarget";
        let params = json!({ "targetId": target.as_str(), "flatten": true });
        let result = self.call(None, method, params, timeout).await?;
        decode_field(method, result, "sessionId")
    }

    /// `Target.closeTarget`; returns Chromium's `success` flag.
    pub async fn close_target(
        &self,
        target: &TargetId,
        timeout: Duration,
    ) -> Result<bool, CdpError> {
        let method = "Target.closeTarget";
        let params = json!({ "targetId": target.as_str() });
        let result = self.call(None, method, params, timeout).await?;
        // Chromium 156 still sends `success`; a missing flag means success.
        Ok(result
            .get("success")
            .and_then(Value::as_bool)
            .unwrap_or(true))
    }

    /// `Target.getTargets` with the default filter (everything except the
    /// `browser` and `tab` types).
    pub async fn get_targets(&self, timeout: Duration) -> Result<Vec<TargetInfo>, CdpError> {
        let method = "Target.getTargets";
        let result = self.call(None, method, json!({}), timeout).await?;
        decode_field(method, result, "targetInfos")
    }

    /// `Target.setDiscoverTargets`: when enabled, Chromium replays one
    /// `Target.targetCreated` per existing target and then reports changes.
    pub async fn set_discover_targets(
        &self,
        discover: bool,
        timeout: Duration,
    ) -> Result<(), CdpError> {
        let params = json!({ "discover": discover });
        self.call(None, "Target.setDiscoverTargets", params, timeout)
            .await
            .map(|_| ())
    }

    /// `Page.navigate` on a session; returns when the navigation committed
    /// or failed.
    pub async fn navigate(
        &self,
        session: &SessionId,
        url: &str,
        timeout: Duration,
    ) -> Result<NavigateOutcome, CdpError> {
        let method = "Page.navigate";
        let result = self
            .call(Some(session), method, json!({ "url": url }), timeout)
            .await?;
        decode(method, result)
    }

    /// `Target.getTargetInfo` for one target (browser-level; answered even
    /// while the tab shows a dialog).
    pub async fn get_target_info(
        &self,
        target: &TargetId,
        timeout: Duration,
    ) -> Result<TargetInfo, CdpError> {
        let method = "Target.getTargetInfo";
        let params = json!({ "targetId": target.as_str() });
        let result = self.call(None, method, params, timeout).await?;
        decode_field(method, result, "targetInfo")
    }

    /// `Page.setLifecycleEventsEnabled`: the session then reports
    /// `Page.lifecycleEvent` (`init`, `DOMContentLoaded`, `load`, ...) per
    /// frame and loader. Chromium 156 replays the current document's events
    /// (`commit`, `DOMContentLoaded`, `load`) when enabled.
    pub async fn set_lifecycle_events_enabled(
        &self,
        session: &SessionId,
        enabled: bool,
        timeout: Duration,
    ) -> Result<(), CdpError> {
        let params = json!({ "enabled": enabled });
        self.call(
            Some(session),
            "Page.setLifecycleEventsEnabled",
            params,
            timeout,
        )
        .await
        .map(|_| ())
    }

    /// `Page.getNavigationHistory` on a tab session.
    pub async fn navigation_history(
        &self,
        session: &SessionId,
        timeout: Duration,
    ) -> Result<NavigationHistory, CdpError> {
        let method = "Page.getNavigationHistory";
        let result = self.call(Some(session), method, json!({}), timeout).await?;
        decode(method, result)
    }

    /// `Page.navigateToHistoryEntry` with an entry id from `navigation_history`.
    pub async fn navigate_to_history_entry(
        &self,
        session: &SessionId,
        entry_id: i64,
        timeout: Duration,
    ) -> Result<(), CdpError> {
        let params = json!({ "entryId": entry_id });
        self.call(
            Some(session),
            "Page.navigateToHistoryEntry",
            params,
            timeout,
        )
        .await
        .map(|_| ())
    }

    /// `Page.reload` of the tab's main frame.
    pub async fn reload(&self, session: &SessionId, timeout: Duration) -> Result<(), CdpError> {
        self.call(Some(session), "Page.reload", json!({}), timeout)
            .await
            .map(|_| ())
    }

    /// `Runtime.evaluate` with `returnByValue` and `awaitPromise`, in the
    /// page's **main world**: the page controls every global the expression
    /// touches. The Broker's tools never use it; it is the one deliberate
    /// main-world path, kept for the test harness and for the later
    /// `browser.eval` (docs/security.md, "Hostile pages"). Wrap page
    /// scripts in a function: top-level `let`/`const` leak into the page's
    /// global scope (field notes §0.1).
    pub async fn evaluate(
        &self,
        session: &SessionId,
        expression: &str,
        timeout: Duration,
    ) -> Result<Evaluation, CdpError> {
        let method = "Runtime.evaluate";
        let params = json!({
            "expression": expression,
            "returnByValue": true,
            "awaitPromise": true,
        });
        let result = self.call(Some(session), method, params, timeout).await?;
        Ok(evaluation_from(result))
    }
}

fn evaluation_from(mut result: Value) -> Evaluation {
    match result.get("exceptionDetails") {
        Some(details) => {
            let text = details
                .pointer("/exception/description")
                .or_else(|| details.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("exception")
                .to_owned();
            Evaluation::Exception { text }
        }
        None => Evaluation::Value(
            result
                .pointer_mut("/result/value")
                .map(Value::take)
                .unwrap_or(Value::Null),
        ),
    }
}

fn decode<T: for<'de> Deserialize<'de>>(method: &str, value: Value) -> Result<T, CdpError> {
    serde_json::from_value(value).map_err(|error| CdpError::UnexpectedResult {
        method: method.to_owned(),
        detail: error.to_string(),
    })
}

fn decode_field<T: for<'de> Deserialize<'de>>(
    method: &str,
    mut value: Value,
    field: &str,
) -> Result<T, CdpError> {
    match value.get_mut(field).map(Value::take) {
        Some(inner) => decode(method, inner),
        None => Err(CdpError::UnexpectedResult {
            method: method.to_owned(),
            detail: format!("missing field {field}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn evaluation_distinguishes_value_and_exception() {
        assert_eq!(
            evaluation_from(json!({"result":{"type":"number","value":2}})),
            Evaluation::Value(json!(2))
        );
        assert_eq!(
            evaluation_from(json!({"result":{"type":"undefined"}})),
            Evaluation::Value(Value::Null)
        );
        assert_eq!(
            evaluation_from(
                json!({"result":{},"exceptionDetails":{"text":"Uncaught","exception":{"description":"Error: boom"}}})
            ),
            Evaluation::Exception {
                text: "Error: boom".to_owned()
            }
        );
    }

    #[test]
    fn navigation_history_finds_entries_by_offset() {
        let history: NavigationHistory = serde_json::from_value(json!({
            "currentIndex": 1,
            "entries": [
                {"id": 20, "url": "http://a/", "title": "A", "transitionType": "typed"},
                {"id": 22, "url": "http://a/#b", "title": "", "userTypedURL": "http://a/"}
            ]
        }))
        .unwrap();
        assert_eq!(history.entry(0).map(|e| e.id), Some(22));
        assert_eq!(history.entry(-1).map(|e| e.title.as_str()), Some("A"));
        assert_eq!(history.entry(1), None);
        assert_eq!(history.entry(-2), None);
    }

    #[test]
    fn missing_field_is_unexpected_result() {
        let error =
            decode_field::<TargetId>("Target.createTarget", json!({}), "targetId").unwrap_err();
        assert!(matches!(error, CdpError::UnexpectedResult { .. }));
    }
}
