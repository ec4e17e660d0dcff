//! Browser candidates: passive discovery of Chromium-family user-data
//! directories (`DevToolsActivePort` plus a TCP probe, never a WebSocket or
//! HTTP), deterministic selection, and the `browser launch`/`stop` commands
//! for the Broker-managed profile. It must not speak CDP itself (stopping the
//! managed browser goes through `janitor::close_browser`) and never touches
//! the store.

mod candidate;
mod discovery;
mod launch;
mod os;

pub use candidate::{
    AuthorizationState, Candidate, CandidateState, Endpoint, ProcessState, Remediation,
    RemoteDebuggingState,
};
pub use discovery::{
    DISCOVERY_DIRS_ENV, DiscoveryConfig, PROBE_TIMEOUT, discover, managed_profile_dir, select,
};
pub use launch::{CHROMIUM_ENV, LaunchError, launch_cli, relaunch, stop_cli};
