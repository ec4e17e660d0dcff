//! The one mapping from store errors to the agent-visible code table (`From<StoreError> for
//! RpcError`, so a handler's `?` converts), and the answer for an ended Workspace.

use serde_json::json;

use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::store::{ReleaseReason, StoreError, TombstoneRow};

impl From<StoreError> for RpcError {
    fn from(error: StoreError) -> RpcError {
        match error {
        StoreError::WorkspaceNotFound => RpcError::new(
            ErrorCode::WorkspaceNotFound,
            "no active Workspace with this id for this client",
        ),
        StoreError::LeaseNotFound => RpcError::new(
            ErrorCode::LeaseNotFound,
            "no Lease with this id in this Workspace",
        ),
        StoreError::LeaseNotOwned => RpcError::new(
            ErrorCode::LeaseNotOwned,
            "this Lease belongs to another Connection",
        )
        .with_remediation(
            RemediationAction::CreateLease,
            "A Lease cannot be continued by another bridge; create a new Lease on the Workspace.",
        ),
        StoreError::LeaseExpired | StoreError::LeaseEnded(_) => {
            RpcError::new(ErrorCode::LeaseExpired, "the Lease expired").with_remediation(
                RemediationAction::CreateLease,
                "Create a new Lease and heartbeat well before expiresAt.",
            )
        }
        StoreError::ClientKeyConflict => RpcError::new(
            ErrorCode::ClientKeyConflict,
            "this clientKey already names an active Workspace for another browser",
        ),
        StoreError::LimitExceeded { what, limit } => RpcError::new(
            ErrorCode::LimitExceeded,
            format!("limit reached: at most {limit} {what}"),
        )
        .with_context("limit", json!(limit))
        .with_context("what", json!(what))
        .with_remediation(
            RemediationAction::ReleaseUnused,
            "Release Workspaces or Leases you no longer use.",
        ),
        StoreError::ReadOnlyViolation(why) => RpcError::new(ErrorCode::ReadOnlyViolation, why),
        other => {
            tracing::error!(error = %other, "store failure");
            RpcError::new(ErrorCode::InternalError, "internal store error")
        }
    }
    }
}

/// The answer for a call naming a Workspace that ended: released by its host, or reclaimed by
/// the idle sweep after `idle_limit_ms` without a Command, Lease call or poll (and with no
/// Lease and no live Connection of its Principal).
pub fn ended_workspace(tombstone: &TombstoneRow, idle_limit_ms: i64) -> RpcError {
    match tombstone.reason {
        ReleaseReason::Released => {
            RpcError::new(ErrorCode::WorkspaceNotFound, "the Workspace was released")
                .with_context("state", json!("released"))
        }
        ReleaseReason::Idle => RpcError::new(
            ErrorCode::WorkspaceNotFound,
            format!(
                "the Workspace expired: nothing used it for {} s (no Command, Lease or poll, \
                 no live Connection), so the Broker reclaimed it and closed its tabs",
                idle_limit_ms / 1000
            ),
        )
        .with_context("state", json!("expired"))
        .with_context("reason", json!("idle"))
        .with_context("idleLimitMs", json!(idle_limit_ms))
        .with_remediation(
            RemediationAction::RebuildState,
            "Create a new Workspace and open the tabs again; keep a Lease or call at least once \
             per idle limit to keep a Workspace.",
        ),
    }
    .with_context("releasedAt", json!(tombstone.released_at))
}
