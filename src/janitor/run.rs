//! The janitor process: connect, announce, proxy, clean up. One loop owns
//! the WebSocket and the tracker; stdin and stdout are pumped by two small
//! tasks over bounded channels, so a slow Broker slows the socket reads
//! (backpressure) instead of growing memory. On stdin EOF (or the Broker's
//! `{"janitor":"close"}`: a `per_workspace` remote session it is done with) it disposes exactly
//! the browser contexts the Broker made, closes exactly the managed targets,
//! waits at most `CLEANUP_TIMEOUT`, and exits 0. It reads no disk state and
//! writes nothing but its stdout lines. On a remote browser's link it also sends a WebSocket
//! Ping every `REMOTE_PING_INTERVAL` and ends the link as a closed one when nothing at all has
//! arrived for `REMOTE_SILENT_INTERVALS` intervals (a local browser's link is never pinged).
//!
//! Stdout protocol (the status lines are `cdp::pipe::JanitorLine`): the
//! first line is `{"janitor":"connected"}` or
//! `{"janitor":"failed","reason":..,"message":..}` (then exit 1); after
//! that every line is one CDP message from Chromium, and the last line is
//! `{"janitor":"disconnected"}` when the WebSocket closes (exit 0).

use std::fmt;
use std::io::{self, BufRead};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{Message, error::Error as WsError};

use super::endpoint::{parse_remote_spec, parse_ws_url};
use super::socket::{Connection, JanitorError, MAX_MESSAGE_BYTES, connect};
use super::tracker::{Outbound, PrivateCall, Tracker, Verdict};
use crate::cdp::pipe::JanitorLine;

/// Handshake budget. In approval mode Chromium holds the upgrade while the
/// user decides; others settled on minutes (docs/cdp.md, "approval mode").
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(180);

/// Operator knob shortening the WebSocket handshake budget, in milliseconds (docs/cdp.md): a
/// browser that neither accepts nor refuses within it is `authorization_timeout`.
const HANDSHAKE_TIMEOUT_ENV: &str = "BROWSER_PILOT_AUTHORIZATION_TIMEOUT_MS";

/// Bounds of `BROWSER_PILOT_AUTHORIZATION_TIMEOUT_MS`: under a second a loaded machine's
/// handshake would fail; above `HANDSHAKE_TIMEOUT` the Broker's own wait for the janitor's first
/// line would end first.
const HANDSHAKE_TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 1_000..=180_000;

/// `HANDSHAKE_TIMEOUT`, or `BROWSER_PILOT_AUTHORIZATION_TIMEOUT_MS` clamped to its range.
fn ws_handshake_timeout() -> Duration {
    crate::knobs::millis_or(
        HANDSHAKE_TIMEOUT_ENV,
        HANDSHAKE_TIMEOUT_RANGE_MS,
        HANDSHAKE_TIMEOUT,
    )
}

/// How often the janitor pings a remote browser's WebSocket. A link that goes silent (no close,
/// no reset: a dead route, a frozen middlebox) is otherwise never noticed.
pub const REMOTE_PING_INTERVAL: Duration = Duration::from_secs(10);

/// Intervals without a single byte from a remote browser (a pong or anything else) after which
/// its link counts as lost, ending the connection as a closed one does.
const REMOTE_SILENT_INTERVALS: u32 = 3;

/// Test knob for `REMOTE_PING_INTERVAL`, in milliseconds (docs/remote.md).
const REMOTE_PING_INTERVAL_ENV: &str = "BROWSER_PILOT_REMOTE_PING_INTERVAL_MS";

/// Bounds of `BROWSER_PILOT_REMOTE_PING_INTERVAL_MS`.
const REMOTE_PING_INTERVAL_RANGE_MS: std::ops::RangeInclusive<u64> = 100..=600_000;

/// `REMOTE_PING_INTERVAL`, or `BROWSER_PILOT_REMOTE_PING_INTERVAL_MS` clamped to its range.
fn remote_ping_interval() -> Duration {
    crate::knobs::millis_or(
        REMOTE_PING_INTERVAL_ENV,
        REMOTE_PING_INTERVAL_RANGE_MS,
        REMOTE_PING_INTERVAL,
    )
}

/// Overall budget for closing managed targets after the Broker is gone.
/// `Target.closeTarget` answers in ~6 ms; a wedged renderer must not keep
/// the janitor alive.
pub const CLEANUP_TIMEOUT: Duration = Duration::from_secs(3);

/// Lines buffered from stdin towards the socket.
pub(super) const STDIN_QUEUE: usize = 256;

/// Lines buffered from the socket towards stdout.
const STDOUT_QUEUE: usize = 1024;

/// Budget for the WebSocket close handshake at the very end.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// The janitor argument's prefix for a managed browser: `keeper:<socket path>` instead of a
/// WebSocket URL.
pub const KEEPER_SCHEME: &str = "keeper:";

/// The janitor argument's prefix for a remote browser: `remote:<candidate id>`; its URL and
/// headers (which may carry a token) come in `REMOTE_ENV`, never on the command line.
pub const REMOTE_SCHEME: &str = "remote:";

/// The environment variable holding a remote browser's `{"url","headers","allowInsecure"}`.
pub const REMOTE_ENV: &str = "BROWSER_PILOT_JANITOR_REMOTE";

/// Runs the janitor role against `ws_url` (or `keeper:<socket>`) and returns the exit code.
/// Safe to call under any runtime: stdin is read on a plain thread, so
/// dropping the runtime afterwards does not wait for stdin.
pub async fn run_janitor(ws_url: String) -> i32 {
    let (stdout_tx, stdout_rx) = mpsc::channel::<String>(STDOUT_QUEUE);
    let writer = tokio::spawn(write_lines(tokio::io::stdout(), stdout_rx));
    if let Some(socket) = ws_url.strip_prefix(KEEPER_SCHEME) {
        let code = super::keeper_link::run(socket.into(), stdout_tx).await;
        let _ = writer.await;
        return code;
    }
    let remote = ws_url.starts_with(REMOTE_SCHEME);
    let endpoint = match remote {
        true => std::env::var(REMOTE_ENV)
            .map_err(|_| JanitorError::InvalidUrl(format!("{REMOTE_ENV} is not set")))
            .and_then(|spec| parse_remote_spec(&spec)),
        false => parse_ws_url(&ws_url),
    };
    let connected = match endpoint {
        Ok(endpoint) => connect(&endpoint, ws_handshake_timeout()).await,
        Err(error) => Err(error),
    };
    let code = match connected {
        Err(error) => {
            let line = JanitorLine::Failed {
                reason: error.reason(),
                message: error.to_string(),
            };
            let _ = stdout_tx.send(line.to_line()).await;
            1
        }
        Ok(connection) => {
            let _ = stdout_tx.send(JanitorLine::Connected.to_line()).await;
            let (stdin_tx, stdin_rx) = mpsc::channel::<String>(STDIN_QUEUE);
            spawn_stdin_reader(stdin_tx);
            let proxy = Proxy {
                connection,
                tracker: Tracker::default(),
                stdout: stdout_tx.clone(),
                liveness: remote.then(|| Liveness::new(remote_ping_interval())),
            };
            proxy.run(stdin_rx).await
        }
    };
    drop(stdout_tx);
    let _ = writer.await;
    code
}

/// Everything that can happen to the proxy loop.
enum ProxyEvent {
    SocketReady(io::Result<()>),
    Input(String),
    InputEnded,
    CleanupDeadline,
    PingDue,
}

impl fmt::Display for ProxyEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyEvent::SocketReady(Ok(())) => f.write_str("socket ready"),
            ProxyEvent::SocketReady(Err(error)) => write!(f, "socket error: {error}"),
            ProxyEvent::Input(_) => f.write_str("input line"),
            ProxyEvent::InputEnded => f.write_str("input ended"),
            ProxyEvent::CleanupDeadline => f.write_str("cleanup deadline"),
            ProxyEvent::PingDue => f.write_str("ping due"),
        }
    }
}

/// Why the socket side stopped.
enum SocketEnd {
    /// Nothing more to read right now.
    Idle,
    /// The WebSocket closed (by Chromium, or on an I/O error).
    Closed,
}

struct Proxy {
    connection: Connection,
    tracker: Tracker,
    stdout: mpsc::Sender<String>,
    /// A remote link's ping schedule and silence watch; none for a local browser.
    liveness: Option<Liveness>,
}

/// The liveness watch of a remote link: a Ping every `interval`, and the link is lost once no
/// byte has arrived for `REMOTE_SILENT_INTERVALS` intervals.
struct Liveness {
    interval: Duration,
    next_ping: Instant,
    last_inbound: Instant,
    bytes_seen: u64,
}

impl Liveness {
    fn new(interval: Duration) -> Liveness {
        let now = Instant::now();
        Liveness {
            interval,
            next_ping: now + interval,
            last_inbound: now,
            bytes_seen: 0,
        }
    }

    /// Notes the connection's byte count; any movement is a sign of life.
    fn observe(&mut self, bytes_read: u64) {
        if bytes_read != self.bytes_seen {
            self.bytes_seen = bytes_read;
            self.last_inbound = Instant::now();
        }
    }

    /// Whether the link has been silent past its deadline at `now`.
    fn silent(&self, now: Instant) -> bool {
        now.duration_since(self.last_inbound) >= self.interval * REMOTE_SILENT_INTERVALS
    }
}

impl Proxy {
    async fn run(mut self, mut stdin: mpsc::Receiver<String>) -> i32 {
        // Popup tracking needs target events whether or not the Broker asks.
        let discover = self.tracker.private_request(PrivateCall::DiscoverTargets);
        if self.write(discover).is_err() {
            return self.disconnected().await;
        }
        let mut cleanup_deadline: Option<Instant> = None;
        loop {
            if let SocketEnd::Closed = self.pump_socket(cleanup_deadline.is_none()).await {
                return self.disconnected().await;
            }
            // A due Ping is judged here, right after a read, so bytes that waited in the socket
            // while the janitor was not scheduled count as life.
            let bytes_read = self.connection.bytes_read();
            let ping_due = self.liveness.as_mut().is_some_and(|liveness| {
                liveness.observe(bytes_read);
                Instant::now() >= liveness.next_ping
            });
            if ping_due && cleanup_deadline.is_none() && self.ping().is_err() {
                return self.disconnected().await;
            }
            let flush_pending = match self.connection.ws.flush() {
                Ok(()) => false,
                Err(WsError::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => true,
                Err(_) => return self.disconnected().await,
            };
            if let Some(deadline) = cleanup_deadline
                && (!self.tracker.has_private_pending() || Instant::now() >= deadline)
            {
                self.close_socket().await;
                return 0;
            }
            let accept_input = cleanup_deadline.is_none() && !flush_pending;
            let next_ping = match (&self.liveness, cleanup_deadline) {
                (Some(liveness), None) => Some(liveness.next_ping),
                _ => None,
            };
            let readiness = self.connection.readiness();
            let event = tokio::select! {
                ready = readiness => ProxyEvent::SocketReady(ready),
                line = stdin.recv(), if accept_input => match line {
                    Some(line) => ProxyEvent::Input(line),
                    None => ProxyEvent::InputEnded,
                },
                () = sleep_until_opt(cleanup_deadline), if cleanup_deadline.is_some() => {
                    ProxyEvent::CleanupDeadline
                }
                () = sleep_until_opt(next_ping), if next_ping.is_some() => ProxyEvent::PingDue,
            };
            tracing::trace!(%event, "janitor");
            match event {
                ProxyEvent::SocketReady(Err(_)) => return self.disconnected().await,
                ProxyEvent::SocketReady(Ok(()))
                | ProxyEvent::CleanupDeadline
                | ProxyEvent::PingDue => {}
                ProxyEvent::Input(line) => match self.tracker.on_outbound(&line) {
                    Outbound::Forward if self.write(line).is_err() => {
                        return self.disconnected().await;
                    }
                    Outbound::Forward | Outbound::Control => {}
                    Outbound::Close => {
                        cleanup_deadline = Some(Instant::now() + CLEANUP_TIMEOUT);
                        if self.start_cleanup().is_err() {
                            return 0;
                        }
                    }
                },
                ProxyEvent::InputEnded => {
                    cleanup_deadline = Some(Instant::now() + CLEANUP_TIMEOUT);
                    if self.start_cleanup().is_err() {
                        return 0;
                    }
                }
            }
        }
    }

    /// Queues one text frame; tungstenite keeps it if the socket would
    /// block, and the next flush sends it.
    fn write(&mut self, text: String) -> Result<(), WsError> {
        match self.connection.ws.write(Message::text(text)) {
            Err(WsError::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
    }

    /// Reads every frame available now. Frames go to stdout unless they
    /// answer a janitor-private request or `forward` is false (cleanup:
    /// the Broker is gone).
    async fn pump_socket(&mut self, forward: bool) -> SocketEnd {
        loop {
            let text = match self.connection.ws.read() {
                Ok(Message::Text(text)) => text.as_str().to_owned(),
                Ok(Message::Binary(bytes)) => match String::from_utf8(bytes.to_vec()) {
                    Ok(text) => text,
                    Err(_) => {
                        tracing::warn!("dropping non-utf-8 binary frame");
                        continue;
                    }
                },
                Ok(_) => continue,
                Err(WsError::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                    return SocketEnd::Idle;
                }
                Err(error) => {
                    tracing::debug!(%error, "browser websocket ended");
                    return SocketEnd::Closed;
                }
            };
            match self.tracker.on_inbound(&text) {
                Verdict::Private(call) => tracing::debug!(?call, "private call answered"),
                Verdict::Forward if forward => {
                    if let Some(line) = one_line(text) {
                        // A closed stdout means the Broker is gone; stdin EOF
                        // follows and starts the cleanup.
                        let _ = self.stdout.send(line).await;
                    }
                }
                Verdict::Forward => {}
            }
        }
    }

    /// Sends the due Ping of a remote link, or fails when the link has been silent too long
    /// (then the connection ends as a closed one does and the Broker raises `connection.lost`).
    fn ping(&mut self) -> Result<(), WsError> {
        let Some(liveness) = &mut self.liveness else {
            return Ok(());
        };
        let now = Instant::now();
        if liveness.silent(now) {
            tracing::warn!("remote browser link silent past its deadline; ending it");
            return Err(WsError::ConnectionClosed);
        }
        liveness.next_ping = now + liveness.interval;
        match self.connection.ws.write(Message::Ping(Default::default())) {
            Err(WsError::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
    }

    fn start_cleanup(&mut self) -> Result<(), WsError> {
        for line in self.tracker.cleanup_requests() {
            self.write(line)?;
        }
        Ok(())
    }

    async fn close_socket(&mut self) {
        let _ = self.connection.ws.close(None);
        let _ = tokio::time::timeout(CLOSE_GRACE, async {
            loop {
                match self.connection.ws.flush() {
                    Ok(()) => return,
                    Err(WsError::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                        let _ = self.connection.readiness().await;
                    }
                    Err(_) => return,
                }
            }
        })
        .await;
    }

    async fn disconnected(self) -> i32 {
        let _ = self.stdout.send(JanitorLine::Disconnected.to_line()).await;
        0
    }
}

/// Chromium sends compact JSON, but a raw newline would break the line
/// protocol, so such a message is re-serialized (or dropped if not JSON).
fn one_line(text: String) -> Option<String> {
    if !text.contains(['\n', '\r']) {
        return Some(text);
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(value) => Some(value.to_string()),
        Err(error) => {
            tracing::warn!(%error, "dropping multi-line non-json frame");
            None
        }
    }
}

/// Starts the stdin reader on a plain thread. Not a tokio blocking task: a
/// blocked read of stdin cannot be cancelled, and a runtime waits for its
/// blocking tasks when dropped, which would keep the janitor alive after
/// the WebSocket closed.
pub(super) fn spawn_stdin_reader(lines: mpsc::Sender<String>) {
    let spawned = std::thread::Builder::new()
        .name("janitor-stdin".to_owned())
        .spawn(move || read_lines(std::io::stdin().lock(), &lines, MAX_MESSAGE_BYTES));
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the stdin reader");
    }
}

/// Reads lines (without terminators) into `lines` until EOF. A line longer
/// than `max_line_bytes` is skipped (with `MAX_MESSAGE_BYTES` it could not
/// be sent anyway).
fn read_lines<R: BufRead>(mut reader: R, lines: &mpsc::Sender<String>, max_line_bytes: usize) {
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        let mut too_long = false;
        let eof = loop {
            let available = match reader.fill_buf() {
                Ok(available) => available,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    tracing::warn!(%error, "stdin read failed");
                    return;
                }
            };
            if available.is_empty() {
                break true;
            }
            let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
                Some(end) => (&available[..end], Some(end + 1)),
                None => (available, None),
            };
            if buffer.len() + chunk.len() > max_line_bytes {
                too_long = true;
                buffer.clear();
            } else if !too_long {
                buffer.extend_from_slice(chunk);
            }
            let consumed = found.unwrap_or(available.len());
            reader.consume(consumed);
            if found.is_some() {
                break false;
            }
        };
        if too_long {
            tracing::warn!(limit = max_line_bytes, "skipping over-long stdin line");
        } else {
            if buffer.last() == Some(&b'\r') {
                buffer.pop();
            }
            if !buffer.is_empty() {
                match String::from_utf8(std::mem::take(&mut buffer)) {
                    Ok(line) => {
                        if lines.blocking_send(line).is_err() {
                            return;
                        }
                    }
                    Err(_) => tracing::warn!("skipping non-utf-8 stdin line"),
                }
            }
        }
        if eof {
            return;
        }
    }
}

/// Writes each line plus `\n`, flushing whenever the queue runs empty. Once a large message
/// (a big Observation's reply) has gone and nothing else waits, the freed heap goes back to the
/// OS (`os::return_freed_memory`).
pub(super) async fn write_lines<W: AsyncWrite + Unpin>(
    writer: W,
    mut lines: mpsc::Receiver<String>,
) {
    let mut writer = tokio::io::BufWriter::new(writer);
    let mut large = false;
    while let Some(line) = lines.recv().await {
        large |= line.len() >= crate::os::TRIM_AFTER_BYTES;
        let written = async {
            writer.write_all(line.as_bytes()).await?;
            writer.write_all(b"\n").await?;
            if lines.is_empty() {
                writer.flush().await?;
            }
            Ok::<(), io::Error>(())
        }
        .await;
        drop(line);
        if written.is_err() {
            // The Broker closed our stdout; keep draining so senders never
            // block, but write nothing more.
            while lines.recv().await.is_some() {}
            return;
        }
        if large && lines.is_empty() {
            large = false;
            crate::os::return_freed_memory();
        }
    }
    let _ = writer.flush().await;
}

pub(super) async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_frames_become_one_line() {
        assert_eq!(
            one_line("{\"a\":1}".to_owned()).as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(
            one_line("{\"a\":\n1}".to_owned()).as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(one_line("not\njson".to_owned()), None);
    }

    #[test]
    fn a_remote_link_is_silent_only_after_three_intervals_without_a_byte() {
        let interval = Duration::from_millis(100);
        let mut liveness = Liveness::new(interval);
        let start = liveness.last_inbound;
        assert!(!liveness.silent(start + interval * 2));
        assert!(liveness.silent(start + interval * 3));
        liveness.observe(0);
        assert_eq!(
            liveness.last_inbound, start,
            "no new bytes, no sign of life"
        );
        liveness.observe(42);
        assert!(liveness.last_inbound >= start);
        assert!(!liveness.silent(liveness.last_inbound + interval * 2));
    }

    #[test]
    fn stdin_lines_are_split_and_trimmed() {
        let input: &[u8] = b"{\"id\":1}\r\n\n{\"id\":2}\n{\"id\":3}";
        let (tx, mut rx) = mpsc::channel(8);
        read_lines(input, &tx, 64);
        drop(tx);
        let mut got = Vec::new();
        while let Some(line) = rx.blocking_recv() {
            got.push(line);
        }
        assert_eq!(got, ["{\"id\":1}", "{\"id\":2}", "{\"id\":3}"]);
    }

    #[test]
    fn over_long_stdin_lines_are_skipped() {
        // A BufReader with a tiny buffer makes the long line span reads.
        let input: &[u8] = b"{\"id\":1}\n0123456789abcdef-too-long\n{\"id\":2}\n";
        let reader = std::io::BufReader::with_capacity(4, input);
        let (tx, mut rx) = mpsc::channel(8);
        read_lines(reader, &tx, 12);
        drop(tx);
        let mut got = Vec::new();
        while let Some(line) = rx.blocking_recv() {
            got.push(line);
        }
        assert_eq!(got, ["{\"id\":1}", "{\"id\":2}"]);
    }

    #[tokio::test]
    async fn stdout_lines_end_with_newline() {
        let (tx, rx) = mpsc::channel(8);
        tx.send("a".to_owned()).await.unwrap();
        tx.send("b".to_owned()).await.unwrap();
        drop(tx);
        let mut out = Vec::new();
        write_lines(&mut out, rx).await;
        assert_eq!(out, b"a\nb\n");
    }
}
