//! Artifacts: protected bytes on disk (screenshots, PDFs, downloads, upload inputs, previews),
//! their TTL, per-Artifact and per-Workspace bounds, and copies in (`import`) and out
//! (`export`) of protected storage.
//!
//! Layout, TTLs and quotas are documented in `docs/artifacts.md`. The metadata rows live in the
//! store (`store::artifacts`); this module owns the files they name and is the only code that
//! builds a protected path. It never speaks CDP and never sees a JSON-RPC envelope: tools and the
//! Broker hand it bytes or client paths and map its typed errors to agent-visible codes.

mod bounded;
mod descriptor;
mod encoding;
mod error;
mod files;
mod image;
mod limits;
mod service;

pub use descriptor::{Artifact, ArtifactKind, NewArtifact};
pub use encoding::decode as decode_base64;
pub use error::ArtifactError;
pub use image::{dimensions, dimensions_base64};
pub use limits::{
    ArtifactLimits, DEFAULT_TTL_MS, MAX_ARTIFACT_BYTES, MAX_ARTIFACTS_PER_WORKSPACE,
    RETAINED_TTL_MS, WORKSPACE_QUOTA_BYTES,
};
pub use service::Artifacts;
