//! The one mapping from module errors to the agent-visible code table.

use serde_json::json;

use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::store::StoreError;

pub fn from_store(error: StoreError) -> RpcError {
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
