//! The bridge's host pipes: stdin and stdout polled by the runtime when they are pipes or
//! sockets (`os::PolledStdio`: how an agent host spawns the bridge; a line in or out then costs
//! no hop through tokio's blocking pool, a thread wake-up each way and the larger part of a
//! heartbeat's round trip), tokio's blocking-pool stdio otherwise (a terminal, a file,
//! `/dev/null`). Owns only the choice; the descriptors are `os`'s, framing is `framing`'s.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::os::{self, PolledStdio};

/// The bridge's stdin.
pub enum HostInput {
    Polled(PolledStdio),
    Blocking(tokio::io::Stdin),
}

/// The bridge's stdout.
pub enum HostOutput {
    Polled(PolledStdio),
    Blocking(tokio::io::Stdout),
}

/// Stdin, polled when it can be. Must be called inside the runtime.
pub fn input() -> HostInput {
    match os::polled_stdin() {
        Some(polled) => HostInput::Polled(polled),
        None => HostInput::Blocking(tokio::io::stdin()),
    }
}

/// Stdout, polled when it can be. Must be called inside the runtime.
pub fn output() -> HostOutput {
    match os::polled_stdout() {
        Some(polled) => HostOutput::Polled(polled),
        None => HostOutput::Blocking(tokio::io::stdout()),
    }
}

impl AsyncRead for HostInput {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostInput::Polled(polled) => Pin::new(polled).poll_read(cx, buf),
            HostInput::Blocking(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for HostOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HostOutput::Polled(polled) => Pin::new(polled).poll_write(cx, buf),
            HostOutput::Blocking(stdout) => Pin::new(stdout).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostOutput::Polled(polled) => Pin::new(polled).poll_flush(cx),
            HostOutput::Blocking(stdout) => Pin::new(stdout).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostOutput::Polled(polled) => Pin::new(polled).poll_shutdown(cx),
            HostOutput::Blocking(stdout) => Pin::new(stdout).poll_shutdown(cx),
        }
    }
}
