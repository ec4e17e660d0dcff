//! The one table of agent-visible error codes.
//!
//! Every `error.data.code` the Host API can return is a variant of [`ErrorCode`], with its
//! JSON-RPC integer and its `retryable` flag. Modules keep their own typed errors and are mapped
//! to an [`RpcError`] in exactly one place per role (the Broker's dispatch, the bridge's framing).
//! This module does no I/O and knows nothing of the store, sockets or CDP.

use serde_json::{Map, Value, json};

pub use super::remediation::{Reason, RemediationAction};

/// Declares [`ErrorCode`] from its table: one row per code, in the order `docs/errors.md`
/// lists them.
macro_rules! error_codes {
    ($($variant:ident $name:literal $rpc:literal $retryable:literal;)*) => {
        /// Every `data.code` of the Host API. `docs/errors.md` lists each one; a unit test keeps
        /// the two in step.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)*
        }

        impl ErrorCode {
            /// Every code, in the order `docs/errors.md` lists them.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The stable snake_case string hosts branch on.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                }
            }

            /// The JSON-RPC `error.code` integer.
            pub fn rpc_code(self) -> i64 {
                match self {
                    $(ErrorCode::$variant => $rpc,)*
                }
            }

            /// Whether the same call may succeed later without the caller changing anything.
            pub fn retryable(self) -> bool {
                match self {
                    $(ErrorCode::$variant => $retryable,)*
                }
            }
        }
    };
}

// The JSON-RPC numbers: the standard codes for envelope and parameter errors, the server range
// -32000..-32099 for everything the Broker decides.
error_codes! {
    // variant                data.code                     JSON-RPC  retryable
    ParseError                "parse_error"                 -32700    false;
    InvalidRequest            "invalid_request"             -32600    false;
    MessageTooLarge           "message_too_large"           -32600    false;
    MethodNotFound            "method_not_found"            -32601    false;
    InvalidParams             "invalid_params"              -32602    false;
    InternalError             "internal_error"              -32603    true;
    NotInitialized            "not_initialized"             -32002    false;
    AlreadyInitialized        "already_initialized"         -32003    false;
    ProtocolIncompatible      "protocol_incompatible"       -32004    false;
    ResultTooLarge            "result_too_large"            -32005    true;
    CapabilityDenied          "capability_denied"           -32010    false;
    WorkspaceNotFound         "workspace_not_found"         -32011    false;
    LeaseNotFound             "lease_not_found"             -32012    false;
    LeaseNotOwned             "lease_not_owned"             -32013    false;
    LeaseExpired              "lease_expired"               -32014    false;
    ClientKeyConflict         "client_key_conflict"         -32015    false;
    LimitExceeded             "limit_exceeded"              -32016    false;
    CursorExpired             "cursor_expired"              -32017    false;
    BrowserDisconnected       "browser_disconnected"        -32030    true;
    BrokerInUse               "broker_in_use"               -32040    true;
    BrokerUnavailable         "broker_unavailable"          -32041    true;
    TooManyConnections        "too_many_connections"        -32039    true;
    ReadOnlyViolation         "read_only_violation"         -32042    false;
    ToolNotFound              "tool_not_found"              -32601    false;
    IdempotencyConflict       "idempotency_conflict"        -32018    false;
    CommandNotFound           "command_not_found"           -32019    false;
    UnknownOutcome            "unknown_outcome"             -32020    false;
    DeadlineExceeded          "deadline_exceeded"           -32021    true;
    Cancelled                 "cancelled"                   -32022    false;
    BrowserNotReady           "browser_not_ready"           -32031    true;
    AuthorizationDenied       "authorization_denied"        -32032    false;
    AuthorizationTimeout      "authorization_timeout"       -32033    true;
    TargetNotFound            "target_not_found"            -32034    false;
    TargetControlledElsewhere "target_controlled_elsewhere" -32035    false;
    TargetNotManaged          "target_not_managed"          -32036    false;
    NavigationFailed          "navigation_failed"           -32037    false;
    BrowserBusy               "browser_busy"                -32038    true;
    ObservationNotFound       "observation_not_found"       -32043    false;
    StaleRef                  "stale_ref"                   -32044    false;
    ActionNotVerified         "action_not_verified"         -32045    true;
    ElementNotActionable      "element_not_actionable"      -32046    false;
    VerificationFailed        "verification_failed"         -32047    false;
    FrameNotFound             "frame_not_found"             -32048    false;
    DialogOpen                "dialog_open"                 -32049    false;
    DocumentChanged           "document_changed"            -32058    true;
    // Artifacts.
    ArtifactNotFound          "artifact_not_found"          -32050    false;
    ArtifactExpired           "artifact_expired"            -32051    false;
    ArtifactTooLarge          "artifact_too_large"          -32052    false;
    ArtifactKindNotAllowed    "artifact_kind_not_allowed"   -32053    false;
    ExportExists              "export_exists"               -32054    false;
    PathNotAllowed            "path_not_allowed"            -32055    false;
    FileNotFound              "file_not_found"              -32056    false;
    PdfUnavailable            "pdf_unavailable"             -32057    false;
    // Local-user boundaries.
    BrokerUntrusted           "broker_untrusted"            -32060    false;
    HomeNotAllowed            "home_not_allowed"            -32061    false;
    CopyStalled               "copy_stalled"                -32062    false;
    // Remote browsers.
    RemoteConfigInvalid       "remote_config_invalid"       -32065    false;
    RemoteTlsFailed           "remote_tls_failed"           -32066    false;
    // Eval.
    EvalException             "eval_exception"              -32070    false;
    // Network observation and rules.
    RequestNotFound           "request_not_found"           -32071    false;
    RuleNotFound              "rule_not_found"              -32072    false;
    UrlBlocked                "url_blocked"                 -32073    false;
    // Isolation and state.
    IsolationUnavailable      "isolation_unavailable"       -32080    false;
    StorageStateInvalid       "storage_state_invalid"       -32081    false;
    WorkspaceNotIsolated      "workspace_not_isolated"      -32082    false;
    // The live view.
    HandoffTimeout            "handoff_timeout"             -32090    true;
    HumanInControl            "human_in_control"            -32091    true;
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
    fn each_documented_row_agrees_with_the_table() {
        let doc = include_str!("../../docs/errors.md");
        for code in ErrorCode::ALL {
            let start = format!("| `{}` |", code.as_str());
            let row = doc
                .lines()
                .find(|line| line.starts_with(&start))
                .unwrap_or_else(|| panic!("no row for {} in docs/errors.md", code.as_str()));
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            assert_eq!(cells[2], code.rpc_code().to_string(), "{row}");
            let retryable = match code.retryable() {
                true => "yes",
                false => "no",
            };
            // A code whose single errors may override the flag says "(see text)" after it.
            assert_eq!(cells[3].trim_end_matches(" (see text)"), retryable, "{row}");
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
