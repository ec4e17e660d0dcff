//! The one error type of the tools and its one conversion to the agent-visible `RpcError`.
//! Handlers return `Result<_, ToolError>` and use `?` on CDP, page-script, target, connect,
//! Artifact and store errors; a refusal a tool decides itself (bad arguments, no such
//! history entry, a guarded step that found the page changed) is built as an `RpcError` and
//! carried as [`ToolError::Refused`]. Nothing else in `tools/` maps a module error to a code.

use serde_json::json;

use super::context::{ConnectError, ContextError, TargetError};
use crate::artifacts::ArtifactError;
use crate::cdp::CdpError;
use crate::page::{PageError, ScriptErrorCode};
use crate::protocol::errors::{ErrorCode, Reason, RemediationAction, RpcError};
use crate::store::StoreError;

/// Why a tool call failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    Cdp(#[from] CdpError),
    #[error(transparent)]
    Page(#[from] PageError),
    #[error("target: {0:?}")]
    Target(TargetError),
    #[error("connect: {0:?}")]
    Connect(ConnectError),
    /// An isolated Workspace got no browser context of its own.
    #[error(transparent)]
    Isolation(#[from] ContextError),
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A result that could not be encoded (a bug, never page data).
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// The Broker has no live browser connection.
    #[error("the Broker has no live browser connection")]
    Disconnected,
    /// A refusal the tool built itself, with its code, context and remediation.
    #[error("{}", .0.message)]
    Refused(Box<RpcError>),
}

impl From<TargetError> for ToolError {
    fn from(error: TargetError) -> ToolError {
        ToolError::Target(error)
    }
}

impl From<ConnectError> for ToolError {
    fn from(error: ConnectError) -> ToolError {
        ToolError::Connect(error)
    }
}

impl From<RpcError> for ToolError {
    fn from(error: RpcError) -> ToolError {
        ToolError::Refused(Box::new(error))
    }
}

/// The one conversion to the wire.
impl From<ToolError> for RpcError {
    fn from(error: ToolError) -> RpcError {
        match error {
            ToolError::Cdp(error) => cdp(error),
            ToolError::Page(error) => page(error),
            ToolError::Target(error) => target(error),
            ToolError::Connect(error) => connect(error),
            ToolError::Isolation(error) => isolation(error),
            ToolError::Artifact(error) => artifact(error),
            ToolError::Store(error) => {
                tracing::error!(%error, "a tool's store call failed");
                RpcError::new(ErrorCode::InternalError, "internal store error")
            }
            ToolError::Encode(error) => RpcError::new(ErrorCode::InternalError, error.to_string()),
            ToolError::Disconnected => disconnected(),
            ToolError::Refused(error) => *error,
        }
    }
}

/// The agent-visible form of an Artifact failure (also used by the Broker's `artifacts/*`).
pub fn artifact_error(error: ArtifactError) -> RpcError {
    RpcError::from(ToolError::from(error))
}

fn disconnected() -> RpcError {
    RpcError::new(
        ErrorCode::BrowserDisconnected,
        "the Broker has no live browser connection",
    )
    .with_remediation(
        RemediationAction::CallBrowserConnect,
        "Call browser.connect, then browser.tabs.list to rebuild target state.",
    )
}

/// An isolated Workspace without a context of its own: never retried onto the shared profile.
fn isolation(error: ContextError) -> RpcError {
    match error {
        ContextError::Refused(message) => RpcError::new(
            ErrorCode::IsolationUnavailable,
            format!("the browser refused a separate browser context for this isolated Workspace: {message}"),
        )
        .with_remediation(
            RemediationAction::Discover,
            "This browser cannot isolate a Workspace. Create the Workspace on another browser (browser.discover), or without isolation if sharing the profile is acceptable.",
        ),
        ContextError::TooMany => RpcError::new(
            ErrorCode::IsolationUnavailable,
            "this browser connection holds the most isolated Workspace contexts it keeps",
        )
        .with_context("limit", json!(super::context::MAX_CONTEXTS))
        .with_remediation(RemediationAction::ReleaseUnused, "Release isolated Workspaces that are no longer used."),
        ContextError::Cdp(error) => cdp(error),
    }
}

fn target(error: TargetError) -> RpcError {
    match error {
        TargetError::NotFound => RpcError::new(ErrorCode::TargetNotFound, "no such target for this Workspace (closed, never listed, or from an older connection generation)")
            .with_remediation(RemediationAction::ListTabs, "Call browser.tabs.list for current targetIds."),
        TargetError::ControlledElsewhere { .. } => RpcError::new(ErrorCode::TargetControlledElsewhere, "another Lease controls this tab")
            .with_remediation(RemediationAction::WaitForRelease, "The controlling Lease must call browser.tabs.release (or end) first; control is never stolen."),
        TargetError::NotManaged => RpcError::new(ErrorCode::TargetNotManaged, "this is a user tab; Browser Pilot never closes user tabs"),
        TargetError::HumanInControl => RpcError::new(ErrorCode::HumanInControl, "the person at the live view has taken this tab over")
            .with_remediation(RemediationAction::WaitForHandBack, "Wait for the target_control.returned event (the person handed the tab back), then observe and go on; or ask the user what they are doing in the live view."),
    }
}

fn cdp(error: CdpError) -> RpcError {
    match error {
        CdpError::Disconnected => disconnected(),
        CdpError::SessionClosed { .. } => RpcError::new(
            ErrorCode::TargetNotFound,
            "the tab closed or crashed during the call",
        )
        .with_remediation(
            RemediationAction::ListTabs,
            "Call browser.tabs.list and observe again.",
        ),
        CdpError::Timeout { method } => RpcError::new(
            ErrorCode::DeadlineExceeded,
            format!("the browser did not answer {method} in time"),
        ),
        CdpError::Remote { message, .. } if document_gone(&message) => document_changed(),
        other => RpcError::new(
            ErrorCode::InternalError,
            format!("browser call failed: {other}"),
        ),
    }
}

fn connect(error: ConnectError) -> RpcError {
    match error {
        ConnectError::UnknownBrowser(id) => RpcError::invalid_params(format!("no browser candidate {id:?}"))
            .with_remediation(RemediationAction::Discover, "Call browser.discover for the current candidates."),
        ConnectError::NotReady { remediation } => {
            let mut error = RpcError::new(ErrorCode::BrowserNotReady, "the browser has no live debugging endpoint");
            error.remediation = remediation.or_else(|| Some(json!({"action": RemediationAction::StartBrowser.as_str(), "message": "Start the browser with remote debugging enabled, then call browser.connect again."})));
            error
        }
        ConnectError::Busy { browser_id, capacity, in_use } => RpcError::new(ErrorCode::BrowserBusy, format!("the remote browser {browser_id} is at its capacity ({in_use} of {capacity} sessions in use)"))
            .with_context("browserId", json!(browser_id))
            .with_context("capacity", json!({"maxSessions": capacity, "inUse": in_use}))
            .with_remediation(RemediationAction::WaitForRelease, "Release a Workspace on this browser (or wait for one to be released), raise max_sessions in remote-browsers.toml, or name another browser; then call browser.connect again."),
        ConnectError::AuthorizationDenied(message) => RpcError::new(ErrorCode::AuthorizationDenied, format!("the browser refused the debugging connection: {message}"))
            .with_remediation(RemediationAction::AllowRemoteDebugging, "Allow the connection in the browser (chrome://inspect/#remote-debugging), then call browser.connect again."),
        ConnectError::AuthorizationTimeout => RpcError::new(ErrorCode::AuthorizationTimeout, "the browser did not accept the debugging connection in time")
            .with_remediation(RemediationAction::ApproveInBrowser, "Approve the remote debugging prompt in the browser window, then call browser.connect again with a longer deadlineMs."),
        ConnectError::Failed(message) => RpcError::new(ErrorCode::BrowserDisconnected, format!("cannot connect: {message}")),
        ConnectError::RemoteConfig { browser_id, message } => RpcError::new(ErrorCode::RemoteConfigInvalid, format!("the remote browser {browser_id} cannot be used as configured: {message}"))
            .with_context("browserId", json!(browser_id))
            .with_remediation(RemediationAction::FixRemoteConfig, "Fix this entry of remote-browsers.toml in the Browser Pilot home (browser.discover lists its diagnostics), then call browser.connect again."),
        ConnectError::RemoteRefused { browser_id, status } => RpcError::new(ErrorCode::AuthorizationDenied, format!("the remote browser {browser_id} refused the connection (HTTP {status})"))
            .with_context("browserId", json!(browser_id))
            .with_context("httpStatus", json!(status))
            .with_remediation(RemediationAction::FixRemoteConfig, "Check the entry's endpoint and token file in remote-browsers.toml, then call browser.connect again."),
        ConnectError::RemoteTls { browser_id, message } => RpcError::new(ErrorCode::RemoteTlsFailed, format!("the TLS handshake with the remote browser {browser_id} failed: {message}"))
            .with_context("browserId", json!(browser_id))
            .with_remediation(RemediationAction::FixRemoteConfig, "Check the entry's wss:// host name; if its engine's certificate is signed by a private CA, name that CA's PEM file in the entry's ca_file (remote-browsers.toml), then call browser.connect again."),
    }
}

/// What Chromium answers a call into a document that went away under it (the page navigated
/// or reloaded meanwhile): the call did not run there.
fn document_gone(message: &str) -> bool {
    const GONE: [&str; 5] = [
        "Cannot find context with specified id",
        "Execution context was destroyed",
        "Inspected target navigated or closed",
        "Cannot find default execution context",
        // Page.captureScreenshot between two documents.
        "Not attached to an active page",
    ];
    GONE.iter().any(|gone| message.contains(gone))
}

/// The page replaced its document while a call read or aimed at it: retryable.
pub(super) fn document_changed() -> RpcError {
    RpcError::new(
        ErrorCode::DocumentChanged,
        "the page replaced its document during the call; call again",
    )
    .with_reason(Reason::DocumentChanged)
    .with_remediation(
        RemediationAction::Observe,
        "Call again; refs of earlier Observations belong to the old document, so observe first.",
    )
}

/// Page-script failures.
fn page(error: PageError) -> RpcError {
    match error {
        PageError::InvalidOption { name, detail } => {
            RpcError::invalid_params(format!("{name} {detail}"))
                .with_context("path", json!(format!("arguments.{name}")))
        }
        PageError::Refused { code, message, .. } => match code {
            ScriptErrorCode::ObservationUnknown => {
                RpcError::new(ErrorCode::ObservationNotFound, message).with_remediation(
                    RemediationAction::Observe,
                    "Call browser.observe and use refs from the new Observation.",
                )
            }
            ScriptErrorCode::DocumentReplaced => RpcError::new(ErrorCode::StaleRef, message)
                .with_reason(Reason::DocumentReplaced)
                .with_remediation(
                    RemediationAction::Observe,
                    "Call browser.observe and use refs from the new Observation.",
                ),
            ScriptErrorCode::RefUnknown | ScriptErrorCode::RefStale => {
                RpcError::new(ErrorCode::StaleRef, message).with_remediation(
                    RemediationAction::Observe,
                    "Call browser.observe and use refs from the new Observation.",
                )
            }
            ScriptErrorCode::InvalidSelector
            | ScriptErrorCode::InvalidRegex
            | ScriptErrorCode::InvalidArgument => RpcError::invalid_params(message),
            ScriptErrorCode::NoMatch => {
                RpcError::invalid_params(message).with_reason(Reason::NoMatch)
            }
            ScriptErrorCode::NotVisible => RpcError::new(ErrorCode::ElementNotActionable, message)
                .with_reason(Reason::NotVisible),
            ScriptErrorCode::NotEditable => RpcError::new(ErrorCode::ElementNotActionable, message)
                .with_reason(Reason::NotEditable),
            ScriptErrorCode::UnsupportedElement => {
                RpcError::new(ErrorCode::ElementNotActionable, message)
                    .with_reason(Reason::UnsupportedElement)
            }
            ScriptErrorCode::OptionNotFound => {
                RpcError::invalid_params(message).with_reason(Reason::OptionNotFound)
            }
            ScriptErrorCode::OptionDisabled => {
                RpcError::invalid_params(message).with_reason(Reason::OptionDisabled)
            }
        },
        PageError::Cdp(error) => cdp(error),
        PageError::ScriptThrew { text, .. } if document_gone(&text) => document_changed(),
        // A script that threw in the page's context (often: the document was replaced mid-call).
        other => RpcError::new(ErrorCode::InternalError, other.to_string()),
    }
}

/// An Artifact failure. Protected paths never appear in it.
fn artifact(error: ArtifactError) -> RpcError {
    match error {
        ArtifactError::NotFound => RpcError::new(
            ErrorCode::ArtifactNotFound,
            "no Artifact with this id in this Workspace",
        ),
        ArtifactError::Expired { expired_at } => RpcError::new(
            ErrorCode::ArtifactExpired,
            "the Artifact expired",
        )
        .with_context("expiredAt", json!(expired_at))
        .with_remediation(
            RemediationAction::CaptureAgain,
            "Capture or import it again; call artifacts/retain on Artifacts you need longer.",
        ),
        ArtifactError::TooLarge { limit, .. } => RpcError::new(
            ErrorCode::ArtifactTooLarge,
            format!("the Artifact would exceed {limit} bytes"),
        )
        .with_context("maxArtifactBytes", json!(limit)),
        ArtifactError::QuotaExceeded { what, limit } => RpcError::new(
            ErrorCode::LimitExceeded,
            format!("limit reached: at most {limit} {what}"),
        )
        .with_context("what", json!(what))
        .with_context("limit", json!(limit))
        .with_remediation(
            RemediationAction::ReleaseUnused,
            "Release Artifacts you no longer need with artifacts/release.",
        ),
        ArtifactError::PathNotAllowed { reason } => RpcError::new(
            ErrorCode::PathNotAllowed,
            format!("path not allowed: {reason}"),
        )
        .with_context("reason", json!(reason)),
        ArtifactError::BadPath { reason } => {
            RpcError::invalid_params(format!("invalid \"path\": {reason}"))
                .with_context("path", json!("path"))
                .with_context("reason", json!(reason))
        }
        ArtifactError::Stalled { op, seconds } => RpcError::new(
            ErrorCode::CopyStalled,
            format!("the {op} stopped: the client file made no progress in time"),
        )
        .with_context("stallSeconds", json!(seconds))
        .with_remediation(
            RemediationAction::CheckClientFile,
            "The file system of the client path did not answer (a hung network or FUSE mount?). Check it, or copy the file to a local disk, then call again.",
        ),
        ArtifactError::FileNotFound(path) => {
            RpcError::new(ErrorCode::FileNotFound, "no such file or directory")
                .with_context("path", json!(path.to_string_lossy()))
        }
        ArtifactError::ExportExists(path) => {
            RpcError::new(ErrorCode::ExportExists, "the destination already exists")
                .with_context("path", json!(path.to_string_lossy()))
                .with_remediation(
                    RemediationAction::ChoosePath,
                    "Pass overwrite: true to replace it, or choose another path.",
                )
        }
        ArtifactError::KindNotAllowed { kind, allowed } => RpcError::new(
            ErrorCode::ArtifactKindNotAllowed,
            format!("a {kind} Artifact cannot be used here"),
        )
        .with_context("kind", json!(kind))
        .with_context("allowed", json!([allowed])),
        ArtifactError::BadMimeType(mime) => RpcError::invalid_params(format!(
            "\"mimeType\" {mime:?} is not a type/subtype MIME type"
        ))
        .with_context("path", json!("mimeType")),
        ArtifactError::WorkspaceNotFound => RpcError::new(
            ErrorCode::WorkspaceNotFound,
            "no active Workspace with this id for this client",
        ),
        ArtifactError::Client { op, path, source } => RpcError::new(
            ErrorCode::InternalError,
            format!("cannot {op} {}: {source}", path.to_string_lossy()),
        )
        .with_context("path", json!(path.to_string_lossy())),
        error @ (ArtifactError::BadEncoding
        | ArtifactError::Store(_)
        | ArtifactError::Storage { .. }) => {
            tracing::error!(%error, "artifact storage failed");
            RpcError::new(ErrorCode::InternalError, "artifact storage failed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(error: impl Into<ToolError>) -> (ErrorCode, Option<String>) {
        let rpc = RpcError::from(error.into());
        let action = rpc
            .remediation
            .as_ref()
            .and_then(|r| r["action"].as_str())
            .map(str::to_owned);
        (rpc.code, action)
    }

    #[test]
    fn a_call_into_a_replaced_document_is_document_changed() {
        let gone = CdpError::Remote {
            method: "Runtime.callFunctionOn".into(),
            code: -32000,
            message: "Cannot find context with specified id".into(),
        };
        let rpc = RpcError::from(ToolError::from(PageError::Cdp(gone)));
        assert_eq!(rpc.code, ErrorCode::DocumentChanged);
        assert!(ErrorCode::DocumentChanged.retryable());
        assert_eq!(rpc.context.unwrap()["reason"], "document_changed");
        assert!(
            !rpc.message.contains("callFunctionOn"),
            "no raw protocol text"
        );
        let threw = PageError::ScriptThrew {
            script: "observe",
            text: "Error: Execution context was destroyed.".into(),
        };
        assert_eq!(code(threw).0, ErrorCode::DocumentChanged);
        let other = CdpError::Remote {
            method: "m".into(),
            code: -32000,
            message: "something else".into(),
        };
        assert_eq!(code(other).0, ErrorCode::InternalError);
    }

    #[test]
    fn each_module_error_has_its_code() {
        assert_eq!(
            code(CdpError::Disconnected),
            (
                ErrorCode::BrowserDisconnected,
                Some("call_browser_connect".into())
            )
        );
        assert_eq!(
            code(CdpError::Timeout { method: "m".into() }).0,
            ErrorCode::DeadlineExceeded
        );
        assert_eq!(
            code(PageError::Cdp(CdpError::SessionClosed {
                method: "m".into()
            })),
            (ErrorCode::TargetNotFound, Some("list_tabs".into()))
        );
        assert_eq!(
            code(TargetError::ControlledElsewhere {
                workspace_id: "w".into(),
                lease_id: "l".into()
            }),
            (
                ErrorCode::TargetControlledElsewhere,
                Some("wait_for_release".into())
            )
        );
        assert_eq!(
            code(ConnectError::NotReady { remediation: None }),
            (ErrorCode::BrowserNotReady, Some("start_browser".into()))
        );
        assert_eq!(
            code(ConnectError::RemoteConfig {
                browser_id: "browser:remote:farm".into(),
                message: "m".into()
            }),
            (
                ErrorCode::RemoteConfigInvalid,
                Some("fix_remote_config".into())
            )
        );
        assert_eq!(
            code(ConnectError::RemoteRefused {
                browser_id: "browser:remote:farm".into(),
                status: 401
            }),
            (
                ErrorCode::AuthorizationDenied,
                Some("fix_remote_config".into())
            )
        );
        assert_eq!(
            code(ConnectError::RemoteTls {
                browser_id: "browser:remote:farm".into(),
                message: "invalid peer certificate: UnknownIssuer".into()
            }),
            (ErrorCode::RemoteTlsFailed, Some("fix_remote_config".into()))
        );
        assert_eq!(code(ArtifactError::NotFound).0, ErrorCode::ArtifactNotFound);
        assert_eq!(
            code(ToolError::Disconnected).0,
            ErrorCode::BrowserDisconnected
        );
        let refused = PageError::Refused {
            script: "x",
            code: ScriptErrorCode::OptionDisabled,
            message: "m".into(),
        };
        let rpc = RpcError::from(ToolError::from(refused));
        assert_eq!(rpc.code, ErrorCode::InvalidParams);
        assert_eq!(
            rpc.to_json()["data"]["context"]["reason"],
            "option_disabled"
        );
        let own = RpcError::new(ErrorCode::NavigationFailed, "no history");
        assert_eq!(RpcError::from(ToolError::from(own.clone())), own);
    }
}
