//! The typed command seam: the `Command` trait that every CDP command type implements (its
//! method name, its params as the type itself, its reply type), `CdpClient::execute` that sends
//! one, and the shared wire helpers the domain files use (`Empty`, raw-id serializers). Domain
//! files (`target.rs`, `page.rs`, `input.rs`, ...) hold the command types; this file holds no
//! command of its own, no state, and never touches the agent protocol.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serializer};

use super::client::{CdpClient, CdpError};
use super::ids::{BrowserContextId, SessionId, TargetId};

/// Every CDP method that changes the browser or the page when it arrives, by its whole name:
/// input events, navigations, dialog answers, DOM writes, tab creation and closing, cookie and
/// storage writes. Reads, attaching, evaluation and emulation are not mutations (a page script
/// that writes announces itself instead). The never-replay record reads this list
/// (`tools::mutates_browser`); whole names keep every one of them a literal of `src/cdp/`.
pub const MUTATING_METHODS: &[&str] = &[
    "Input.cancelDragging",
    "Input.dispatchDragEvent",
    "Input.dispatchKeyEvent",
    "Input.dispatchMouseEvent",
    "Input.dispatchTouchEvent",
    "Input.emulateTouchFromMouseEvent",
    "Input.imeSetComposition",
    "Input.insertText",
    "Input.setIgnoreInputEvents",
    "Input.setInterceptDrags",
    "Input.synthesizePinchGesture",
    "Input.synthesizeScrollGesture",
    "Input.synthesizeTapGesture",
    "Page.navigate",
    "Page.reload",
    "Page.navigateToHistoryEntry",
    "Page.handleJavaScriptDialog",
    "Page.setDocumentContent",
    "Page.resetNavigationHistory",
    "Page.stopLoading",
    "DOM.setAttributeValue",
    "DOM.setAttributesAsText",
    "DOM.setFileInputFiles",
    "DOM.setNodeName",
    "DOM.setNodeStackTracesEnabled",
    "DOM.setNodeValue",
    "DOM.setOuterHTML",
    "DOM.removeNode",
    "DOM.removeAttribute",
    "DOM.moveTo",
    "DOM.copyTo",
    "DOM.undo",
    "DOM.redo",
    "Target.createTarget",
    "Target.closeTarget",
    "Network.setCookie",
    "Network.setCookies",
    "Network.deleteCookies",
    "Network.clearBrowserCookies",
    "Storage.setCookies",
    "Storage.clearCookies",
    "Storage.clearDataForOrigin",
    "Storage.clearDataForStorageKey",
    "DOMStorage.setDOMStorageItem",
    "DOMStorage.removeDOMStorageItem",
    "DOMStorage.clear",
];

/// One CDP command. The implementing type is the command's params: it serializes to the
/// `params` object of the request (a struct with no fields serializes to `{}`), and `Reply` is
/// decoded from the `result` object of the response. `METHOD` is the wire name; the client's
/// `CallObserver` is told it for every call, which is what the never-replay record reads.
pub trait Command: Serialize {
    /// `Domain.method`, as Chromium spells it.
    const METHOD: &'static str;
    /// The decoded `result`. Unknown fields are ignored, so a newer Chromium's additions do not
    /// break decoding; a missing required field is `CdpError::UnexpectedResult`.
    type Reply: DeserializeOwned;
}

/// The reply of a command whose `result` carries nothing the Broker reads (`{}` or fields it
/// ignores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub struct Empty {}

impl CdpClient {
    /// Sends `command` on `session` (a flattened target session, or `None` for the browser
    /// connection) and decodes its reply. Every typed command goes through here; resolution is
    /// that of `call`: the reply, Chromium's error, or a local failure (deadline, session
    /// closed, disconnect).
    pub async fn execute<'s, C: Command>(
        &self,
        session: impl Into<Option<&'s SessionId>>,
        command: &C,
        timeout: Duration,
    ) -> Result<C::Reply, CdpError> {
        // Command types are plain structs of strings, numbers and JSON values: they always
        // serialize, but a failure is still reported rather than sent as `null`.
        let params = serde_json::to_value(command).map_err(|error| CdpError::UnexpectedResult {
            method: C::METHOD.to_owned(),
            detail: format!("params do not serialize: {error}"),
        })?;
        let result = self
            .call(session.into(), C::METHOD, params, timeout)
            .await?;
        decode_reply::<C>(result)
    }
}

/// One request line for `command` with request id `id` on the browser connection, for a
/// sender that is not a `CdpClient` (the janitor's own requests).
pub fn request_line<C: Command>(id: u64, command: &C) -> String {
    let params = serde_json::to_value(command).unwrap_or(serde_json::Value::Null);
    super::message::request_line(id, None, C::METHOD, &params)
}

/// Decodes a command's `result` into its reply type.
pub(crate) fn decode_reply<C: Command>(result: serde_json::Value) -> Result<C::Reply, CdpError> {
    serde_json::from_value(result).map_err(|error| CdpError::UnexpectedResult {
        method: C::METHOD.to_owned(),
        detail: error.to_string(),
    })
}

/// Serializes a raw target id into params. `TargetId` deliberately has no `Serialize` (it must
/// never reach an agent-protocol response); command params opt in field by field.
pub(crate) fn target_id<S: Serializer>(id: &TargetId, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(id.as_str())
}

/// Serializes a raw browser context id into params (no `Serialize`, like `TargetId`).
pub(crate) fn browser_context_id<S: Serializer>(
    id: &BrowserContextId,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(id.as_str())
}

/// Serializes an optional raw browser context id (with `skip_serializing_if = "Option::is_none"`).
pub(crate) fn optional_browser_context_id<S: Serializer>(
    id: &Option<BrowserContextId>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match id {
        Some(id) => serializer.serialize_str(id.as_str()),
        None => serializer.serialize_none(),
    }
}

/// Serializes a raw session id into params (`SessionId` has no `Serialize`, like `TargetId`).
pub(crate) fn session_id<S: Serializer>(id: &SessionId, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(id.as_str())
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers for the domain files' wire-shape tests.
    use super::*;

    /// The params object `command` puts on the wire.
    pub fn params<C: Command>(command: &C) -> serde_json::Value {
        serde_json::to_value(command).expect("command params serialize")
    }

    /// `result` decoded as `C`'s reply; panics with the decode error.
    pub fn reply<C: Command>(result: serde_json::Value) -> C::Reply {
        match decode_reply::<C>(result) {
            Ok(reply) => reply,
            Err(error) => panic!("{} reply does not decode: {error}", C::METHOD),
        }
    }
}
