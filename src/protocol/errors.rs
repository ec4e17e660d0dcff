//! The one table of agent-visible error codes.
//!
//! Every `error.data.code` the Host API can return is a variant of [`ErrorCode`], with its
//! JSON-RPC integer and its `retryable` flag. Modules keep their own typed errors and are mapped
//! to an [`RpcError`] in exactly one place per role (the Broker's dispatch, the bridge's framing).
//! This module does no I/O and knows nothing of the store, sockets or CDP.

use serde_json::{Map, Value, json};

pub use super::remediation::{Reason, RemediationAction};

/// Every `data.code` of the Host API. `docs/errors.md` lists each one; a unit test keeps the two
/// in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    ParseError,
    InvalidRequest,
    MessageTooLarge,
    MethodNotFound,
    InvalidParams,
    InternalError,
    NotInitialized,
    AlreadyInitialized,
    ProtocolIncompatible,
    ResultTooLarge,
    CapabilityDenied,
    WorkspaceNotFound,
    LeaseNotFound,
    LeaseNotOwned,
    LeaseExpired,
    ClientKeyConflict,
    LimitExceeded,
    CursorExpired,
    BrowserDisconnected,
    BrokerInUse,
    BrokerUnavailable,
    TooManyConnections,
    ReadOnlyViolation,
    ToolNotFound,
    IdempotencyConflict,
    CommandNotFound,
    UnknownOutcome,
    DeadlineExceeded,
    Cancelled,
    BrowserNotReady,
    AuthorizationDenied,
    AuthorizationTimeout,
    TargetNotFound,
    TargetControlledElsewhere,
    TargetNotManaged,
    NavigationFailed,
    BrowserBusy,
    ObservationNotFound,
    StaleRef,
    ActionNotVerified,
    ElementNotActionable,
    VerificationFailed,
    FrameNotFound,
    DialogOpen,
    DocumentChanged,
    // Artifacts.
    ArtifactNotFound,
    ArtifactExpired,
    ArtifactTooLarge,
    ArtifactKindNotAllowed,
    ExportExists,
    PathNotAllowed,
    FileNotFound,
    PdfUnavailable,
    // Local-user boundaries.
    BrokerUntrusted,
    HomeNotAllowed,
    CopyStalled,
    // Eval.
    EvalException,
    // Network observation and rules.
    RequestNotFound,
    RuleNotFound,
}

impl ErrorCode {
    /// Every code, in the order `docs/errors.md` lists them.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MessageTooLarge,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::NotInitialized,
        ErrorCode::AlreadyInitialized,
        ErrorCode::ProtocolIncompatible,
        ErrorCode::ResultTooLarge,
        ErrorCode::CapabilityDenied,
        ErrorCode::WorkspaceNotFound,
        ErrorCode::LeaseNotFound,
        ErrorCode::LeaseNotOwned,
        ErrorCode::LeaseExpired,
        ErrorCode::ClientKeyConflict,
        ErrorCode::LimitExceeded,
        ErrorCode::CursorExpired,
        ErrorCode::BrowserDisconnected,
        ErrorCode::BrokerInUse,
        ErrorCode::BrokerUnavailable,
        ErrorCode::TooManyConnections,
        ErrorCode::ReadOnlyViolation,
        ErrorCode::ToolNotFound,
        ErrorCode::IdempotencyConflict,
        ErrorCode::CommandNotFound,
        ErrorCode::UnknownOutcome,
        ErrorCode::DeadlineExceeded,
        ErrorCode::Cancelled,
        ErrorCode::BrowserNotReady,
        ErrorCode::AuthorizationDenied,
        ErrorCode::AuthorizationTimeout,
        ErrorCode::TargetNotFound,
        ErrorCode::TargetControlledElsewhere,
        ErrorCode::TargetNotManaged,
        ErrorCode::NavigationFailed,
        ErrorCode::BrowserBusy,
        ErrorCode::ObservationNotFound,
        ErrorCode::StaleRef,
        ErrorCode::ActionNotVerified,
        ErrorCode::ElementNotActionable,
        ErrorCode::VerificationFailed,
        ErrorCode::FrameNotFound,
        ErrorCode::DialogOpen,
        ErrorCode::DocumentChanged,
        ErrorCode::ArtifactNotFound,
        ErrorCode::ArtifactExpired,
        ErrorCode::ArtifactTooLarge,
        ErrorCode::ArtifactKindNotAllowed,
        ErrorCode::ExportExists,
        ErrorCode::PathNotAllowed,
        ErrorCode::FileNotFound,
        ErrorCode::PdfUnavailable,
        ErrorCode::BrokerUntrusted,
        ErrorCode::HomeNotAllowed,
        ErrorCode::CopyStalled,
        ErrorCode::EvalException,
        ErrorCode::RequestNotFound,
        ErrorCode::RuleNotFound,
    ];

    /// The stable snake_case string hosts branch on.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "parse_error",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::MessageTooLarge => "message_too_large",
            ErrorCode::MethodNotFound => "method_not_found",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::NotInitialized => "not_initialized",
            ErrorCode::AlreadyInitialized => "already_initialized",
            ErrorCode::ProtocolIncompatible => "protocol_incompatible",
            ErrorCode::ResultTooLarge => "result_too_large",
            ErrorCode::CapabilityDenied => "capability_denied",
            ErrorCode::WorkspaceNotFound => "workspace_not_found",
            ErrorCode::LeaseNotFound => "lease_not_found",
            ErrorCode::LeaseNotOwned => "lease_not_owned",
            ErrorCode::LeaseExpired => "lease_expired",
            ErrorCode::ClientKeyConflict => "client_key_conflict",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::CursorExpired => "cursor_expired",
            ErrorCode::BrowserDisconnected => "browser_disconnected",
            ErrorCode::BrokerInUse => "broker_in_use",
            ErrorCode::BrokerUnavailable => "broker_unavailable",
            ErrorCode::TooManyConnections => "too_many_connections",
            ErrorCode::ReadOnlyViolation => "read_only_violation",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::DeadlineExceeded => "deadline_exceeded",
            ErrorCode::UnknownOutcome => "unknown_outcome",
            ErrorCode::CommandNotFound => "command_not_found",
            ErrorCode::IdempotencyConflict => "idempotency_conflict",
            ErrorCode::ToolNotFound => "tool_not_found",
            ErrorCode::VerificationFailed => "verification_failed",
            ErrorCode::FrameNotFound => "frame_not_found",
            ErrorCode::DialogOpen => "dialog_open",
            ErrorCode::DocumentChanged => "document_changed",
            ErrorCode::ElementNotActionable => "element_not_actionable",
            ErrorCode::ActionNotVerified => "action_not_verified",
            ErrorCode::StaleRef => "stale_ref",
            ErrorCode::ObservationNotFound => "observation_not_found",
            ErrorCode::BrowserBusy => "browser_busy",
            ErrorCode::NavigationFailed => "navigation_failed",
            ErrorCode::TargetNotManaged => "target_not_managed",
            ErrorCode::TargetControlledElsewhere => "target_controlled_elsewhere",
            ErrorCode::TargetNotFound => "target_not_found",
            ErrorCode::AuthorizationTimeout => "authorization_timeout",
            ErrorCode::AuthorizationDenied => "authorization_denied",
            ErrorCode::BrowserNotReady => "browser_not_ready",
            ErrorCode::ArtifactNotFound => "artifact_not_found",
            ErrorCode::ArtifactExpired => "artifact_expired",
            ErrorCode::ArtifactTooLarge => "artifact_too_large",
            ErrorCode::ArtifactKindNotAllowed => "artifact_kind_not_allowed",
            ErrorCode::ExportExists => "export_exists",
            ErrorCode::PathNotAllowed => "path_not_allowed",
            ErrorCode::FileNotFound => "file_not_found",
            ErrorCode::PdfUnavailable => "pdf_unavailable",
            ErrorCode::BrokerUntrusted => "broker_untrusted",
            ErrorCode::HomeNotAllowed => "home_not_allowed",
            ErrorCode::CopyStalled => "copy_stalled",
            ErrorCode::EvalException => "eval_exception",
            ErrorCode::RequestNotFound => "request_not_found",
            ErrorCode::RuleNotFound => "rule_not_found",
        }
    }

    /// The JSON-RPC `error.code` integer. Standard codes for envelope and parameter errors,
    /// the server range -32000..-32099 for everything the Broker decides.
    pub fn rpc_code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest | ErrorCode::MessageTooLarge => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::NotInitialized => -32002,
            ErrorCode::AlreadyInitialized => -32003,
            ErrorCode::ProtocolIncompatible => -32004,
            ErrorCode::ResultTooLarge => -32005,
            ErrorCode::CapabilityDenied => -32010,
            ErrorCode::WorkspaceNotFound => -32011,
            ErrorCode::LeaseNotFound => -32012,
            ErrorCode::LeaseNotOwned => -32013,
            ErrorCode::LeaseExpired => -32014,
            ErrorCode::ClientKeyConflict => -32015,
            ErrorCode::LimitExceeded => -32016,
            ErrorCode::CursorExpired => -32017,
            ErrorCode::BrowserDisconnected => -32030,
            ErrorCode::BrokerInUse => -32040,
            ErrorCode::BrokerUnavailable => -32041,
            ErrorCode::TooManyConnections => -32039,
            ErrorCode::ReadOnlyViolation => -32042,
            ErrorCode::Cancelled => -32022,
            ErrorCode::DeadlineExceeded => -32021,
            ErrorCode::UnknownOutcome => -32020,
            ErrorCode::CommandNotFound => -32019,
            ErrorCode::IdempotencyConflict => -32018,
            ErrorCode::ToolNotFound => -32601,
            ErrorCode::FrameNotFound => -32048,
            ErrorCode::DialogOpen => -32049,
            ErrorCode::DocumentChanged => -32058,
            ErrorCode::VerificationFailed => -32047,
            ErrorCode::ElementNotActionable => -32046,
            ErrorCode::ActionNotVerified => -32045,
            ErrorCode::StaleRef => -32044,
            ErrorCode::ObservationNotFound => -32043,
            ErrorCode::BrowserBusy => -32038,
            ErrorCode::NavigationFailed => -32037,
            ErrorCode::TargetNotManaged => -32036,
            ErrorCode::TargetControlledElsewhere => -32035,
            ErrorCode::TargetNotFound => -32034,
            ErrorCode::AuthorizationTimeout => -32033,
            ErrorCode::AuthorizationDenied => -32032,
            ErrorCode::BrowserNotReady => -32031,
            ErrorCode::ArtifactNotFound => -32050,
            ErrorCode::ArtifactExpired => -32051,
            ErrorCode::ArtifactTooLarge => -32052,
            ErrorCode::ArtifactKindNotAllowed => -32053,
            ErrorCode::ExportExists => -32054,
            ErrorCode::PathNotAllowed => -32055,
            ErrorCode::FileNotFound => -32056,
            ErrorCode::PdfUnavailable => -32057,
            ErrorCode::BrokerUntrusted => -32060,
            ErrorCode::HomeNotAllowed => -32061,
            ErrorCode::CopyStalled => -32062,
            ErrorCode::EvalException => -32070,
            ErrorCode::RequestNotFound => -32071,
            ErrorCode::RuleNotFound => -32072,
        }
    }

    /// Whether the same call may succeed later without the caller changing anything.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::ResultTooLarge
                | ErrorCode::BrowserDisconnected
                | ErrorCode::BrokerInUse
                | ErrorCode::BrokerUnavailable
                | ErrorCode::TooManyConnections
                | ErrorCode::InternalError
                | ErrorCode::DeadlineExceeded
                | ErrorCode::ActionNotVerified
                | ErrorCode::DocumentChanged
                | ErrorCode::AuthorizationTimeout
                | ErrorCode::BrowserNotReady
        )
    }
}

/// An error on its way to a JSON-RPC `error` member.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    /// Where the user or host must act: `{action, message, ...}`.
    pub remediation: Option<Value>,
    /// Machine-readable detail, e.g. `earliestCursor` for `cursor_expired`.
    pub context: Option<Map<String, Value>>,
    /// Overrides the code's `retryable` flag for this one error (e.g. `element_not_actionable`
    /// while waiting longer could help: covered, not stable, disabled, hidden).
    pub retryable: Option<bool>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            remediation: None,
            context: None,
            retryable: None,
        }
    }

    /// Sets `data.retryable` for this error instead of the code's default.
    pub fn with_retryable(mut self, retryable: bool) -> RpcError {
        self.retryable = Some(retryable);
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::InvalidParams, message)
    }

    /// Attaches remediation `{action, message}`.
    pub fn with_remediation(
        mut self,
        action: RemediationAction,
        message: impl Into<String>,
    ) -> RpcError {
        self.remediation = Some(json!({"action": action.as_str(), "message": message.into()}));
        self
    }

    /// Attaches `context.reason`.
    pub fn with_reason(self, reason: Reason) -> RpcError {
        self.with_context("reason", Value::from(reason.as_str()))
    }

    pub fn with_context(mut self, key: &str, value: Value) -> RpcError {
        self.context
            .get_or_insert_with(Map::new)
            .insert(key.to_owned(), value);
        self
    }

    /// The JSON-RPC `error` object.
    pub fn to_json(&self) -> Value {
        let mut data = Map::new();
        data.insert("code".into(), Value::from(self.code.as_str()));
        let retryable = self.retryable.unwrap_or(self.code.retryable());
        data.insert("retryable".into(), Value::from(retryable));
        if let Some(remediation) = &self.remediation {
            data.insert("remediation".into(), remediation.clone());
        }
        if let Some(context) = &self.context {
            data.insert("context".into(), Value::Object(context.clone()));
        }
        json!({"code": self.code.rpc_code(), "message": self.message, "data": data})
    }

    /// Rebuilds an error from a JSON-RPC `error` object (as recorded in a Command or sent by the
    /// Broker). An unknown `data.code` becomes `internal_error`.
    pub fn from_json(error: &Value) -> RpcError {
        let code = error["data"]["code"].as_str().unwrap_or("");
        let code = ErrorCode::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == code)
            .unwrap_or(ErrorCode::InternalError);
        let mut rebuilt = RpcError::new(code, error["message"].as_str().unwrap_or(""));
        rebuilt.remediation = error["data"].get("remediation").cloned();
        rebuilt.context = error["data"]
            .get("context")
            .and_then(|c| c.as_object().cloned());
        rebuilt.retryable = error["data"]["retryable"]
            .as_bool()
            .filter(|recorded| *recorded != code.retryable());
        rebuilt
    }

    /// A complete JSON-RPC error response line (without the newline).
    pub fn response(&self, id: &Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "error": self.to_json()}).to_string()
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for RpcError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_documented() {
        let doc = include_str!("../../docs/errors.md");
        for code in ErrorCode::ALL {
            assert!(
                doc.contains(&format!("`{}`", code.as_str())),
                "{} missing from docs/errors.md",
                code.as_str()
            );
        }
    }

    #[test]
    fn a_retryable_override_survives_the_round_trip() {
        let error = RpcError::new(ErrorCode::ElementNotActionable, "covered").with_retryable(true);
        assert_eq!(error.to_json()["data"]["retryable"], true);
        assert_eq!(RpcError::from_json(&error.to_json()), error);
        let plain = RpcError::new(ErrorCode::ElementNotActionable, "hidden");
        assert_eq!(plain.to_json()["data"]["retryable"], false);
        assert_eq!(RpcError::from_json(&plain.to_json()).retryable, None);
    }

    #[test]
    fn codes_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
        }
    }

    #[test]
    fn from_json_round_trips() {
        let error = RpcError::new(ErrorCode::LeaseExpired, "gone")
            .with_remediation(RemediationAction::CreateLease, "make a new one")
            .with_context("leaseId", json!("lease:1"));
        assert_eq!(RpcError::from_json(&error.to_json()), error);
        assert_eq!(
            RpcError::from_json(&json!({"data": {"code": "nope"}})).code,
            ErrorCode::InternalError
        );
    }

    #[test]
    fn error_object_shape() {
        let error = RpcError::new(ErrorCode::CursorExpired, "cursor predates the journal")
            .with_context("earliestCursor", json!("cursor:5"));
        let value = error.to_json();
        assert_eq!(value["code"], -32017);
        assert_eq!(value["data"]["code"], "cursor_expired");
        assert_eq!(value["data"]["retryable"], false);
        assert_eq!(value["data"]["context"]["earliestCursor"], "cursor:5");
        assert!(value["data"].get("remediation").is_none());
    }
}
