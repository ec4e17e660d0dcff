//! The runner's own failure codes: together with the executable's
//! `error.data.code` strings, the stable vocabulary of the report's
//! `checks[].error.code`. Each is documented in `docs/conformance.md`.
//!
//! It must not decide when a code applies; `checks` and `suite` do.

/// A failure the runner detects itself (not an executable's JSON-RPC error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerCode {
    /// No response (or no exit, or no launch completion) within the per-operation timeout; later checks are skipped.
    Timeout,
    /// The bridge exited or closed its pipes before answering; later checks are skipped.
    BridgeExited,
    /// After `shutdown` and closing stdin, the bridge was still running at the timeout.
    BridgeDidNotExit,
    /// After `shutdown`, the bridge exited with a non-zero status.
    BridgeExitStatus,
    /// The bridge command could not be started at all.
    SpawnFailed,
    /// `browser launch --headless` could not start or exited non-zero.
    LaunchFailed,
    /// Stdout carried a line that is not a JSON-RPC 2.0 message, or a malformed response.
    ProtocolError,
    /// The executable answered with a JSON-RPC error that had no `data.code`.
    RpcError,
    /// A result lacks a field or has the wrong JSON type (the message names the path).
    InvalidResult,
    /// The selected protocol is outside the requested 1.0 to 1.1.
    ProtocolMismatch,
    /// A granted capability was not both supported and requested.
    CapabilityMismatch,
    /// Protocol 1.1 connection limits exceed the smaller of the requested and service limits.
    LimitsNotNegotiated,
    /// `tools/list` advertised a tool whose capability was not granted.
    CapabilityNotGranted,
    /// `tools/list` listed a tool name twice.
    DuplicateTool,
    /// An event cursor is not of the form `cursor:N`.
    InvalidCursor,
    /// A Lease result names another Workspace or Lease, or ignored the requested TTL.
    LeaseMismatch,
    /// `leases/heartbeat` moved `expiresAt` backwards.
    LeaseNotRenewed,
    /// `workspaces/get` returned another Workspace.
    WorkspaceMismatch,
    /// No browser candidate is `ready` or `connected`; the message carries the executable's remediation.
    BrowserNotReady,
    /// A `tools/call` result's `command.status` is not `completed`.
    CommandNotCompleted,
    /// `tools/list` does not advertise a browser tool the suite exercises.
    ToolNotAdvertised,
    /// `browser.tabs.list` lacks the target `browser.open` returned.
    TargetNotListed,
    /// `browser.tabs.list` lists that target without `managed: true`.
    TargetNotManaged,
    /// `browser.observe` returned more elements than the limit.
    ObservationUnbounded,
    /// `artifacts/get` returned a relative path.
    ArtifactPathRelative,
    /// The `artifacts/get` path cannot be read.
    ArtifactFileMissing,
    /// The `artifacts/get` path is not a non-empty regular file.
    ArtifactFileEmpty,
    /// The Artifact file size differs from `artifact.byteLength`.
    ArtifactSizeMismatch,
    /// The Artifact file grants any permission to group or others (POSIX only).
    ArtifactUnprotected,
    /// `artifacts/get` still succeeded after `artifacts/release`.
    ArtifactStillAvailable,
    /// `events/poll` returned more events than the limit.
    EventPageUnbounded,
    /// Event sequences did not strictly increase across the poll.
    SequenceNotIncreasing,
    /// `nextCursor` pointed before the cursor that was polled.
    CursorMovedBackwards,
    /// `hasMore` stayed true without events, or past the page bound.
    PollNotAdvancing,
    /// Internal precondition: a check ran without a Workspace (should not happen).
    MissingWorkspace,
    /// Internal precondition: a check ran without a Lease (should not happen).
    MissingLease,
    /// Internal precondition: a check ran without a target (should not happen).
    MissingTarget,
    /// Internal precondition: no event cursor was recorded (should not happen).
    MissingCursor,
}

impl RunnerCode {
    /// Every code, for the documentation test.
    #[cfg(test)]
    pub const ALL: [RunnerCode; 38] = [
        RunnerCode::Timeout,
        RunnerCode::BridgeExited,
        RunnerCode::BridgeDidNotExit,
        RunnerCode::BridgeExitStatus,
        RunnerCode::SpawnFailed,
        RunnerCode::LaunchFailed,
        RunnerCode::ProtocolError,
        RunnerCode::RpcError,
        RunnerCode::InvalidResult,
        RunnerCode::ProtocolMismatch,
        RunnerCode::CapabilityMismatch,
        RunnerCode::LimitsNotNegotiated,
        RunnerCode::CapabilityNotGranted,
        RunnerCode::DuplicateTool,
        RunnerCode::InvalidCursor,
        RunnerCode::LeaseMismatch,
        RunnerCode::LeaseNotRenewed,
        RunnerCode::WorkspaceMismatch,
        RunnerCode::BrowserNotReady,
        RunnerCode::CommandNotCompleted,
        RunnerCode::ToolNotAdvertised,
        RunnerCode::TargetNotListed,
        RunnerCode::TargetNotManaged,
        RunnerCode::ObservationUnbounded,
        RunnerCode::ArtifactPathRelative,
        RunnerCode::ArtifactFileMissing,
        RunnerCode::ArtifactFileEmpty,
        RunnerCode::ArtifactSizeMismatch,
        RunnerCode::ArtifactUnprotected,
        RunnerCode::ArtifactStillAvailable,
        RunnerCode::EventPageUnbounded,
        RunnerCode::SequenceNotIncreasing,
        RunnerCode::CursorMovedBackwards,
        RunnerCode::PollNotAdvancing,
        RunnerCode::MissingWorkspace,
        RunnerCode::MissingLease,
        RunnerCode::MissingTarget,
        RunnerCode::MissingCursor,
    ];

    /// The snake_case code written to the report.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerCode::Timeout => "timeout",
            RunnerCode::BridgeExited => "bridge_exited",
            RunnerCode::BridgeDidNotExit => "bridge_did_not_exit",
            RunnerCode::BridgeExitStatus => "bridge_exit_status",
            RunnerCode::SpawnFailed => "spawn_failed",
            RunnerCode::LaunchFailed => "launch_failed",
            RunnerCode::ProtocolError => "protocol_error",
            RunnerCode::RpcError => "rpc_error",
            RunnerCode::InvalidResult => "invalid_result",
            RunnerCode::ProtocolMismatch => "protocol_mismatch",
            RunnerCode::CapabilityMismatch => "capability_mismatch",
            RunnerCode::LimitsNotNegotiated => "limits_not_negotiated",
            RunnerCode::CapabilityNotGranted => "capability_not_granted",
            RunnerCode::DuplicateTool => "duplicate_tool",
            RunnerCode::InvalidCursor => "invalid_cursor",
            RunnerCode::LeaseMismatch => "lease_mismatch",
            RunnerCode::LeaseNotRenewed => "lease_not_renewed",
            RunnerCode::WorkspaceMismatch => "workspace_mismatch",
            RunnerCode::BrowserNotReady => "browser_not_ready",
            RunnerCode::CommandNotCompleted => "command_not_completed",
            RunnerCode::ToolNotAdvertised => "tool_not_advertised",
            RunnerCode::TargetNotListed => "target_not_listed",
            RunnerCode::TargetNotManaged => "target_not_managed",
            RunnerCode::ObservationUnbounded => "observation_unbounded",
            RunnerCode::ArtifactPathRelative => "artifact_path_relative",
            RunnerCode::ArtifactFileMissing => "artifact_file_missing",
            RunnerCode::ArtifactFileEmpty => "artifact_file_empty",
            RunnerCode::ArtifactSizeMismatch => "artifact_size_mismatch",
            RunnerCode::ArtifactUnprotected => "artifact_unprotected",
            RunnerCode::ArtifactStillAvailable => "artifact_still_available",
            RunnerCode::EventPageUnbounded => "event_page_unbounded",
            RunnerCode::SequenceNotIncreasing => "sequence_not_increasing",
            RunnerCode::CursorMovedBackwards => "cursor_moved_backwards",
            RunnerCode::PollNotAdvancing => "poll_not_advancing",
            RunnerCode::MissingWorkspace => "missing_workspace",
            RunnerCode::MissingLease => "missing_lease",
            RunnerCode::MissingTarget => "missing_target",
            RunnerCode::MissingCursor => "missing_cursor",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RunnerCode;

    #[test]
    fn every_code_is_documented() {
        let docs = include_str!("../../docs/conformance.md");
        for code in RunnerCode::ALL {
            let entry = format!("| `{}` |", code.as_str());
            assert!(docs.contains(&entry), "docs/conformance.md lacks {entry}");
        }
    }
}
