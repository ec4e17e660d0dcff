//! The janitor role (`--browser-pilot-internal=janitor <ws_url>|keeper:<socket>|remote:<id>`):
//! the only owner of the browser-level CDP connection, a WebSocket to a user's
//! browser or a remote one, or the keeper's socket for the managed one. It proxies CDP between
//! the Broker's pipes (one message per line) and that connection, tracks the targets
//! the Broker created through it (and their popups), and closes exactly
//! those when the Broker goes away. It never reads disk state, never touches
//! the store or the agent protocol, and never closes a target it did not see
//! created through itself.

mod close;
mod endpoint;
mod json_version;
mod keeper_link;
mod run;
mod socket;
mod tracker;

pub use close::close_browser;
pub use run::{
    CLEANUP_TIMEOUT, HANDSHAKE_TIMEOUT, KEEPER_SCHEME, REMOTE_ENV, REMOTE_SCHEME, run_janitor,
};
pub use socket::{JanitorError, MAX_MESSAGE_BYTES};
pub use tracker::PRIVATE_ID_BASE;
