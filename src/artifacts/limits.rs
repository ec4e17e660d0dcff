//! The bounds and lifetimes of Artifacts, each with the reason for its number.

/// Default lifetime of an Artifact (contract: 15 minutes). Long enough for a host to read or
/// export a screenshot it just asked for; short enough that forgotten captures do not pile up.
pub const DEFAULT_TTL_MS: i64 = 15 * 60 * 1000;

/// Lifetime after `artifacts/retain`, counted from the retain call: 24 hours, so a host can keep
/// an Artifact across a working day without the Broker holding page images indefinitely.
pub const RETAINED_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// Largest single Artifact (reported by `initialize` as `maxArtifactBytes`): 256 MiB covers a
/// full-page PNG of a very long page and typical uploads, and equals the CDP message bound.
pub const MAX_ARTIFACT_BYTES: u64 = 256 * 1024 * 1024;

/// Bytes one Workspace may hold at once: four maximal Artifacts. A runaway capture loop hits
/// this long before it fills the disk.
pub const WORKSPACE_QUOTA_BYTES: u64 = 1024 * 1024 * 1024;

/// Artifacts one Workspace may hold at once, whatever their size: bounds directory size and
/// the metadata rows a host can create without releasing anything.
pub const MAX_ARTIFACTS_PER_WORKSPACE: u64 = 1024;

/// Smallest and largest `BROWSER_PILOT_ARTIFACT_TTL_MS` an operator (or a test) may set.
const TTL_OVERRIDE_RANGE: std::ops::RangeInclusive<i64> = 1_000..=RETAINED_TTL_MS;

/// The limits one Broker applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    pub default_ttl_ms: i64,
    pub retained_ttl_ms: i64,
    pub max_artifact_bytes: u64,
    pub workspace_quota_bytes: u64,
    pub max_artifacts_per_workspace: u64,
}

impl Default for ArtifactLimits {
    fn default() -> ArtifactLimits {
        ArtifactLimits {
            default_ttl_ms: DEFAULT_TTL_MS,
            retained_ttl_ms: RETAINED_TTL_MS,
            max_artifact_bytes: MAX_ARTIFACT_BYTES,
            workspace_quota_bytes: WORKSPACE_QUOTA_BYTES,
            max_artifacts_per_workspace: MAX_ARTIFACTS_PER_WORKSPACE,
        }
    }
}

impl ArtifactLimits {
    /// The defaults, with `BROWSER_PILOT_ARTIFACT_TTL_MS` overriding the default TTL (clamped
    /// to 1 s ..= the retained TTL).
    pub fn from_env() -> ArtifactLimits {
        let mut limits = ArtifactLimits::default();
        if let Some(ttl) = std::env::var("BROWSER_PILOT_ARTIFACT_TTL_MS")
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
        {
            limits.default_ttl_ms =
                ttl.clamp(*TTL_OVERRIDE_RANGE.start(), *TTL_OVERRIDE_RANGE.end());
        }
        limits
    }
}
