//! The janitor over the keeper's socket (the managed browser, which has no debugging port): the
//! same announce, proxy and clean-up as over a WebSocket, on lines both ways. The socket is read
//! and written by two small tasks over bounded channels; one loop owns the tracker. On stdin EOF
//! it disposes the browser contexts the Broker made and closes exactly the managed targets (at
//! most `CLEANUP_TIMEOUT`) and exits 0, which hangs up
//! on the keeper: the keeper detaches this connection's browser session and the browser lives
//! on.

use std::path::PathBuf;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::run::{
    CLEANUP_TIMEOUT, HANDSHAKE_TIMEOUT, STDIN_QUEUE, sleep_until_opt, spawn_stdin_reader,
    write_lines,
};
use super::tracker::{Outbound, PrivateCall, Tracker, Verdict};
use crate::cdp::pipe::{FailReason, JanitorLine};
use crate::framing::FramingError;
use crate::keeper::{self, KeeperError};

/// Messages buffered from the keeper towards the loop.
const SOCKET_QUEUE: usize = 1024;

/// Runs the janitor against the keeper at `socket`; `stdout` carries the status and CDP lines.
pub(super) async fn run(socket: PathBuf, stdout: mpsc::Sender<String>) -> i32 {
    let (mut lines, writer) = match keeper::attach(&socket, HANDSHAKE_TIMEOUT).await {
        Ok(parts) => parts,
        Err(error) => {
            let reason = match &error {
                KeeperError::NotRunning(_) | KeeperError::Busy => FailReason::Refused,
                KeeperError::Closed => FailReason::Closed,
                KeeperError::Timeout(_) | KeeperError::Io(_) => FailReason::Io,
            };
            let line = JanitorLine::Failed {
                reason,
                message: error.to_string(),
            };
            let _ = stdout.send(line.to_line()).await;
            return 1;
        }
    };
    let _ = stdout.send(JanitorLine::Connected.to_line()).await;
    let (stdin_tx, mut stdin) = mpsc::channel::<String>(STDIN_QUEUE);
    spawn_stdin_reader(stdin_tx);
    let (inbound_tx, mut inbound) = mpsc::channel::<String>(SOCKET_QUEUE);
    tokio::spawn(async move {
        loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Err(FramingError::TooLong { limit }) => {
                    tracing::warn!(limit, "skipping an over-long keeper line");
                    match lines.skip_line().await {
                        Ok(true) => continue,
                        _ => return,
                    }
                }
                Ok(None) | Err(FramingError::Io(_)) => return,
            };
            let Ok(line) = String::from_utf8(line) else {
                tracing::warn!("skipping a keeper line that is not UTF-8");
                continue;
            };
            if inbound_tx.send(line).await.is_err() {
                return;
            }
        }
    });
    let (outbound, outbound_rx) = mpsc::channel::<String>(STDIN_QUEUE);
    tokio::spawn(write_lines(writer, outbound_rx));

    let mut tracker = Tracker::default();
    // Popup tracking needs target events whether or not the Broker asks.
    let discover = tracker.private_request(PrivateCall::DiscoverTargets);
    if outbound.send(discover).await.is_err() {
        return disconnected(&stdout).await;
    }
    let mut cleanup_deadline: Option<Instant> = None;
    loop {
        if cleanup_deadline.is_some() && !tracker.has_private_pending() {
            return 0;
        }
        tokio::select! {
            message = inbound.recv() => match message {
                Some(text) => match tracker.on_inbound(&text) {
                    Verdict::Private(call) => tracing::debug!(?call, "private call answered"),
                    // A closed stdout means the Broker is gone; stdin EOF follows.
                    Verdict::Forward if cleanup_deadline.is_none() => {
                        let _ = stdout.send(text).await;
                    }
                    Verdict::Forward => {}
                },
                None if cleanup_deadline.is_some() => return 0,
                None => return disconnected(&stdout).await,
            },
            line = stdin.recv(), if cleanup_deadline.is_none() => match line {
                Some(line) => {
                    if tracker.on_outbound(&line) == Outbound::Forward
                        && outbound.send(line).await.is_err()
                    {
                        return disconnected(&stdout).await;
                    }
                }
                None => {
                    cleanup_deadline = Some(Instant::now() + CLEANUP_TIMEOUT);
                    for line in tracker.cleanup_requests() {
                        if outbound.send(line).await.is_err() {
                            return 0;
                        }
                    }
                }
            },
            () = sleep_until_opt(cleanup_deadline), if cleanup_deadline.is_some() => return 0,
        }
    }
}

async fn disconnected(stdout: &mpsc::Sender<String>) -> i32 {
    let _ = stdout.send(JanitorLine::Disconnected.to_line()).await;
    0
}
