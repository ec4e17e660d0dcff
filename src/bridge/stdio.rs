//! The bridge's host pipes: stdin and stdout polled by the runtime when they are pipes or
//! sockets (`os::PolledStdio`: how an agent host spawns the bridge; a line in or out then costs
//! no hop through tokio's blocking pool, a thread wake-up each way and the larger part of a
//! heartbeat's round trip), tokio's blocking-pool stdio otherwise (a terminal, a file,
//! `/dev/null`). Owns only the choice; the descriptors are `os`'s, framing is `framing`'s.

use tokio::io::{AsyncRead, AsyncWrite};

use crate::os;

/// Stdin, polled when it can be. Must be called inside the runtime.
pub fn input() -> Box<dyn AsyncRead + Send + Unpin> {
    match os::polled_stdin() {
        Some(polled) => Box::new(polled),
        None => Box::new(tokio::io::stdin()),
    }
}

/// Stdout, polled when it can be. Must be called inside the runtime.
pub fn output() -> Box<dyn AsyncWrite + Send + Unpin> {
    match os::polled_stdout() {
        Some(polled) => Box::new(polled),
        None => Box::new(tokio::io::stdout()),
    }
}
