//! The keeper role (`--browser-pilot-internal=keeper <browser-dir> <executable> <args>...`): the
//! small private process that starts the Broker-managed Chromium with `--remote-debugging-pipe`
//! (so it never listens on a TCP port), holds that pipe for the browser's whole life, and serves
//! it to one client at a time (the janitor) over an owner-only local socket,
//! `<home>/browser/keeper.sock`. Each client gets its own browser session
//! (`Target.attachToBrowserTarget`), detached when the client goes, so a new janitor starts from
//! a clean CDP state while the browser and its tabs live on. The keeper exits when the browser
//! exits; it never closes the browser on a client's disconnect (only a client's `close` line or
//! `Browser.close` does). Also the client side: `attach` (the janitor), `close` (`browser stop`)
//! and `probe` (discovery). The pipe framing is `frames`; the session rewriting is `route`.

mod client;
mod frames;
mod line;
mod route;
#[cfg(unix)]
mod serve;
#[cfg(unix)]
mod spawn;

pub use client::{KeeperError, attach, close, probe};
pub use line::KeeperLine;
#[cfg(unix)]
pub use serve::run_keeper;

/// Without Unix pipes there is no keeper: the role refuses to start.
#[cfg(not(unix))]
pub async fn run_keeper(_args: Vec<std::ffi::OsString>) -> i32 {
    eprintln!("error: the keeper needs a Unix platform");
    2
}

use std::path::{Path, PathBuf};

/// The keeper's socket in the managed browser's directory (`<home>/browser`, owner-only).
pub fn socket_path(browser_dir: &Path) -> PathBuf {
    browser_dir.join("keeper.sock")
}

/// The private role argument that starts a keeper.
pub const ROLE_ARG: &str = "--browser-pilot-internal=keeper";
