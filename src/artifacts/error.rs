//! The typed errors of `artifacts/`. Messages never contain a protected path: the only place a
//! protected path leaves the Broker is the `artifacts/get` result. Client paths may appear, the
//! client chose them.

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("no such artifact in this workspace")]
    NotFound,
    #[error("the artifact expired at {expired_at}")]
    Expired { expired_at: i64 },
    #[error("{len} bytes exceed the per-artifact limit of {limit} bytes")]
    TooLarge { len: u64, limit: u64 },
    #[error("limit reached: at most {limit} {what}")]
    QuotaExceeded { what: &'static str, limit: u64 },
    #[error("path not allowed: {reason}")]
    PathNotAllowed { reason: &'static str },
    /// A client path the OS could never use (NUL, overlong): the client's mistake.
    #[error("invalid path: {reason}")]
    BadPath { reason: &'static str },
    /// A copy from or to a client path made no progress in time (a hung file system); the call
    /// fails, the stuck read or write is left to finish on its own thread.
    #[error("the {op} made no progress within {seconds} s")]
    Stalled { op: &'static str, seconds: u64 },
    #[error("no file at {0:?}")]
    FileNotFound(std::path::PathBuf),
    #[error("{0:?} already exists")]
    ExportExists(std::path::PathBuf),
    #[error("a {kind} artifact cannot be used here (allowed: {allowed})")]
    KindNotAllowed {
        kind: &'static str,
        allowed: &'static str,
    },
    #[error("the artifact bytes are not valid base64")]
    BadEncoding,
    #[error("invalid mime type {0:?}")]
    BadMimeType(String),
    #[error("no active workspace with this id")]
    WorkspaceNotFound,
    #[error("artifact metadata: {0}")]
    Store(StoreError),
    /// Failure inside protected storage; `op` names the step, never the path.
    #[error("protected storage failed to {op}: {source}")]
    Storage {
        op: &'static str,
        source: std::io::Error,
    },
    /// Failure on the client's side of an import or export.
    #[error("cannot {op} {path:?}: {source}")]
    Client {
        op: &'static str,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

impl From<StoreError> for ArtifactError {
    fn from(error: StoreError) -> ArtifactError {
        match error {
            StoreError::WorkspaceNotFound => ArtifactError::WorkspaceNotFound,
            other => ArtifactError::Store(other),
        }
    }
}

/// Shorthand for a protected-storage I/O failure.
pub(super) fn storage(op: &'static str) -> impl FnOnce(std::io::Error) -> ArtifactError {
    move |source| ArtifactError::Storage { op, source }
}
