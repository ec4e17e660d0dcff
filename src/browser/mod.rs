//! Browser candidates: passive discovery of Chromium-family user-data
//! directories (`DevToolsActivePort` plus a TCP probe, never a WebSocket or
//! HTTP), remote browsers listed in `remote-browsers.toml` (read, never contacted), deterministic selection, and the `browser launch`/`stop` commands
//! for the Broker-managed profile. It must not speak CDP itself (stopping the
//! managed browser goes through `janitor::close_browser`) and never touches
//! the store.

mod candidate;
mod discovery;
mod launch;
mod os;
mod remote;

pub use candidate::{
    AuthorizationState, Candidate, CandidateKind, CandidateState, Endpoint, ProcessState,
    Remediation, RemoteDebuggingState,
};
pub use discovery::{
    DISCOVERY_DIRS_ENV, DiscoveryConfig, PROBE_TIMEOUT, discover, discover_all,
    managed_profile_dir, select,
};
pub use remote::{Diagnostic, REMOTE_FILE, REMOTE_ID_PREFIX, RemoteEndpoint};

/// Where the janitor of a remote browser finds its URL and headers (`janitor::REMOTE_ENV`).
pub use crate::janitor::REMOTE_ENV as JANITOR_REMOTE_ENV;
pub use launch::{CHROMIUM_ENV, LaunchError, launch_cli, relaunch, stop_cli};
