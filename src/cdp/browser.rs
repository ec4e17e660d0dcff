//! The `Browser` domain: `Browser.close`, which `browser-pilot browser stop` sends to a browser
//! the Broker owns, the permission overrides of `browser.emulate` (`setPermission` for one
//! origin, `resetPermissions` of a browser context), and the per-session download commands and events (`setDownloadBehavior`,
//! `cancelDownload`, `downloadWillBegin`, `downloadProgress`; docs/cdp.md, "downloads"). Wire shapes only;
//! who may close a browser is `browser/`'s rule, which downloads are captured `session/`'s.

use serde::{Deserialize, Serialize};

use super::command::{Command, Empty};
use super::event::EventParams;

/// `Browser.close`: closes the browser gracefully.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Close {}

impl Command for Close {
    const METHOD: &'static str = "Browser.close";
    type Reply = Empty;
}

/// `Browser.getVersion`: the keeper's first call on the pipe, answered once the browser serves
/// CDP.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GetVersion {}

impl Command for GetVersion {
    const METHOD: &'static str = "Browser.getVersion";
    type Reply = Empty;
}

/// `Browser.setPermission` for one origin of a browser context (the default one when
/// `browser_context_id` is absent): an override of the profile's own setting until
/// [`ResetPermissions`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetPermission {
    pub permission: PermissionDescriptor,
    pub setting: &'static str,
    pub origin: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub browser_context_id: Option<String>,
}

/// A permission by name (`geolocation`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermissionDescriptor {
    pub name: &'static str,
}

impl Command for SetPermission {
    const METHOD: &'static str = "Browser.setPermission";
    type Reply = Empty;
}

/// `Browser.resetPermissions`: ends every permission override of a browser context (the
/// profile's own settings apply again).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetPermissions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub browser_context_id: Option<String>,
}

impl Command for ResetPermissions {
    const METHOD: &'static str = "Browser.resetPermissions";
    type Reply = Empty;
}

/// `Browser.setDownloadBehavior` as the Broker sends it: only ever on a target session and
/// only with `behavior: "default"`, which redirects nothing. `events_enabled: true` makes that
/// session report its own downloads (`Browser.downloadWillBegin`/`downloadProgress` with the
/// final `filePath`); `false` hands the session back to the browser's defaults. Never sent on
/// the browser connection (that form would cover every tab).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetDownloadBehavior {
    behavior: &'static str,
    events_enabled: bool,
}

impl SetDownloadBehavior {
    /// Observe this session's downloads; they still land where the browser puts them.
    pub fn observe() -> SetDownloadBehavior {
        SetDownloadBehavior {
            behavior: "default",
            events_enabled: true,
        }
    }

    /// A form Chromium refuses (`allow` without a `downloadPath`: invalid params). Only the
    /// `BROWSER_PILOT_TEST_REFUSE_DOWNLOAD_CAPTURE` fault knob sends it (`session::downloads`).
    pub fn refused() -> SetDownloadBehavior {
        SetDownloadBehavior {
            behavior: "allow",
            events_enabled: true,
        }
    }

    /// Back to the browser's defaults for this session.
    pub fn restore() -> SetDownloadBehavior {
        SetDownloadBehavior {
            behavior: "default",
            events_enabled: false,
        }
    }
}

impl Command for SetDownloadBehavior {
    const METHOD: &'static str = "Browser.setDownloadBehavior";
    type Reply = Empty;
}

/// `Browser.cancelDownload` of one download by its guid; the browser then reports it
/// `canceled` like any other end (docs/cdp.md, "downloads").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CancelDownload {
    pub guid: String,
}

impl Command for CancelDownload {
    const METHOD: &'static str = "Browser.cancelDownload";
    type Reply = Empty;
}

/// `Browser.downloadWillBegin` on a session that enabled download events.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadWillBegin {
    pub guid: String,
    /// The frame that started it (where a `blob:` URL it names resolves).
    #[serde(default)]
    pub frame_id: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub suggested_filename: String,
}

impl EventParams for DownloadWillBegin {
    const METHOD: &'static str = "Browser.downloadWillBegin";
}

/// `Browser.downloadProgress`: `state` is `inProgress`, `completed` or `canceled` (a cancel and
/// a network failure look the same); `file_path` is the final path once completed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadProgress {
    pub guid: String,
    #[serde(default)]
    pub total_bytes: f64,
    #[serde(default)]
    pub received_bytes: f64,
    pub state: String,
    #[serde(default)]
    pub file_path: Option<String>,
}

impl EventParams for DownloadProgress {
    const METHOD: &'static str = "Browser.downloadProgress";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    #[test]
    fn close_has_the_wire_shape() {
        assert_eq!(params(&Close {}), json!({}));
        reply::<Close>(json!({}));
        // What `browser stop` writes on its own socket.
        assert_eq!(
            crate::cdp::request_line(1, &Close {}),
            r#"{"id":1,"method":"Browser.close","params":{}}"#
        );
    }

    #[test]
    fn download_commands_have_the_wire_shape() {
        assert_eq!(
            params(&SetDownloadBehavior::observe()),
            json!({"behavior": "default", "eventsEnabled": true})
        );
        assert_eq!(
            params(&SetDownloadBehavior::restore()),
            json!({"behavior": "default", "eventsEnabled": false})
        );
        assert_eq!(
            params(&SetDownloadBehavior::refused()),
            json!({"behavior": "allow", "eventsEnabled": true})
        );
        assert_eq!(
            params(&CancelDownload { guid: "g".into() }),
            json!({"guid": "g"})
        );
        reply::<SetDownloadBehavior>(json!({}));
    }

    /// Shapes recorded from Chromium 156 (docs/cdp.md, "downloads").
    #[test]
    fn download_events_decode() {
        let begin: DownloadWillBegin = serde_json::from_value(json!({"frameId": "F1", "guid": "0f6f", "url": "http://127.0.0.1:1/file.txt", "suggestedFilename": "file.txt"})).unwrap();
        assert_eq!(begin.suggested_filename, "file.txt");
        let done: DownloadProgress = serde_json::from_value(json!({"guid": "0f6f", "totalBytes": 5, "receivedBytes": 5, "state": "completed", "filePath": "/home/u/Downloads/file.txt"})).unwrap();
        assert_eq!(
            done.file_path.as_deref(),
            Some("/home/u/Downloads/file.txt")
        );
        let going: DownloadProgress = serde_json::from_value(
            json!({"guid": "0f6f", "totalBytes": 0, "receivedBytes": 0, "state": "inProgress"}),
        )
        .unwrap();
        assert_eq!(going.file_path, None);
    }
}
