//! The runner's only platform-specific code: whether a file's permissions
//! keep it private to its owner.
//!
//! Nothing else in the runner says `#[cfg(...)]`. It must not open files or
//! decide what a failure means.

use std::fs::Metadata;

/// Whether `metadata` grants nothing to group or others; `None` where the
/// platform has no POSIX mode bits to inspect.
#[cfg(unix)]
pub fn is_owner_only(metadata: &Metadata) -> Option<bool> {
    use std::os::unix::fs::PermissionsExt;
    /// Group and other read/write/execute bits.
    const GROUP_OTHER_BITS: u32 = 0o077;
    Some(metadata.permissions().mode() & GROUP_OTHER_BITS == 0)
}

/// Whether `metadata` grants nothing to group or others; `None` where the
/// platform has no POSIX mode bits to inspect.
#[cfg(not(unix))]
pub fn is_owner_only(_metadata: &Metadata) -> Option<bool> {
    None
}
