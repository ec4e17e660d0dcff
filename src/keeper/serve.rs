//! The keeper's life: start the browser on its pipe, wait until it answers, bind the owner-only
//! socket, then serve one client at a time until the browser exits. One loop owns all state;
//! the pipe and the client are pumped by small tasks over bounded channels, so a slow client
//! slows the reading of the pipe (backpressure) instead of growing memory. A client that goes
//! away has its browser session detached (which detaches its child sessions and resumes any
//! page waiting for its debugger); the browser and its tabs are never touched. Writes nothing
//! but its socket and its clients' lines.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::AbortHandle;

use super::frames::{Frame, next_frame};
use super::line::KeeperLine;
use super::route::{self, Inbound, Root};
use super::spawn;
use crate::cdp::target::{AttachToBrowserTarget, DetachFromTarget, DetachedFromTarget};
use crate::cdp::{Command, EventParams, SessionId, browser, pipe::MAX_LINE_BYTES, request_line};
use crate::framing::{FramingError, LineReader};
use crate::ipc::{self, IpcReader, IpcWriter};

/// How long the browser may take to answer its first call on the pipe.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a new connection may take to send its first line.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest first line of a connection.
const MAX_HELLO_BYTES: usize = 4096;

/// Connections read for their first line at once; later ones wait for a turn.
const MAX_GREETERS: usize = 8;

/// Connections accepted and not yet greeted (reading their first line or waiting for a turn);
/// more are closed at once. Discovery's probes (a connect and hang-up) from many agents arrive
/// together with a janitor's attach, which must wait its turn rather than be closed.
const MAX_PENDING: usize = 64;

/// Messages buffered in each direction (pipe to loop, loop to pipe, loop to client, client to
/// loop).
const QUEUE: usize = 256;

/// How long a connection asking to attach while a client holds the slot waits before it is
/// refused: a client killed a moment ago still holds the slot until its hang-up is read, and
/// its successor (the janitor the Broker starts next) must not be turned away meanwhile.
const TAKEOVER_GRACE: Duration = Duration::from_millis(1500);

/// How long the keeper waits for the browser process after its pipe closed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Runs the keeper role: `<browser-dir> <executable> <browser args>...`. Returns the exit code.
pub async fn run_keeper(args: Vec<OsString>) -> i32 {
    let (Some(dir), Some(executable)) = (args.first(), args.get(1)) else {
        eprintln!("error: the keeper role needs the browser directory and the executable");
        return 2;
    };
    let dir = PathBuf::from(dir);
    let executable = PathBuf::from(executable);
    match serve(&dir, &executable, &args[2..]).await {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("error: {message}");
            1
        }
    }
}

/// What the keeper itself asked on the pipe's root connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootCall {
    Version,
    Attach,
    Detach,
    Close,
}

/// A connection that sent its first line.
struct Greeting {
    hello: KeeperLine,
    reader: LineReader<IpcReader>,
    writer: IpcWriter,
}

/// Something the client's tasks report, tagged with the client's number.
enum ClientEvent {
    Line(u64, Vec<u8>),
    Gone(u64),
}

/// The one client slot.
enum Link {
    Idle,
    /// `Target.attachToBrowserTarget` is on its way for this connection.
    Attaching(Greeting),
    Attached {
        session: SessionId,
        number: u64,
        out: mpsc::Sender<String>,
        reader: AbortHandle,
    },
    /// The last client's session is being detached.
    Detaching,
}

struct Keeper {
    pipe: mpsc::Sender<Vec<u8>>,
    next_id: u64,
    pending: HashMap<u64, RootCall>,
    link: Link,
    /// One connection that asked to attach while the slot was held or being freed.
    waiting: Option<Greeting>,
    /// When `waiting` is refused if the client holding the slot has not gone by then.
    waiting_until: Option<tokio::time::Instant>,
    /// `close` connections, told `closed` when the browser is gone.
    closers: Vec<Greeting>,
    clients: u64,
    client_events: mpsc::Sender<ClientEvent>,
    started: bool,
    /// A browser message the client's full queue could not take yet: the pipe is not read
    /// until it is delivered (backpressure), while the loop still serves exits and `close`.
    stalled: Option<String>,
}

async fn serve(dir: &Path, executable: &Path, args: &[OsString]) -> Result<(), String> {
    let socket = super::socket_path(dir);
    let started = spawn::start(executable, args)
        .map_err(|error| format!("cannot start {}: {error}", executable.display()))?;
    let mut child = started.child;
    let browser_pid = child.id();
    let stderr_tail = tokio::spawn(read_stderr(started.stderr));
    let (pipe_tx, pipe_rx) = mpsc::channel::<Vec<u8>>(QUEUE);
    tokio::spawn(write_pipe(started.input, pipe_rx));
    let (browser_tx, mut from_browser) = mpsc::channel::<String>(QUEUE);
    tokio::spawn(read_pipe(started.output, browser_tx));
    let (client_tx, mut client_events) = mpsc::channel::<ClientEvent>(QUEUE);
    let mut keeper = Keeper {
        pipe: pipe_tx,
        next_id: 1,
        pending: HashMap::new(),
        link: Link::Idle,
        waiting: None,
        waiting_until: None,
        closers: Vec::new(),
        clients: 0,
        client_events: client_tx,
        started: false,
        stalled: None,
    };

    // The socket is bound only once the browser answers on its pipe: a live socket means a
    // browser that serves CDP.
    keeper
        .call_root(RootCall::Version, &browser::GetVersion {})
        .await;
    let deadline = tokio::time::sleep(START_TIMEOUT);
    tokio::pin!(deadline);
    while !keeper.started {
        tokio::select! {
            status = child.wait() => {
                return Err(format!("the browser exited during start-up ({}){}", describe(status),
                    said(stderr_tail, browser_pid).await));
            }
            message = from_browser.recv() => match message {
                Some(message) => keeper.on_browser(message).await,
                None => {
                    let status = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
                    return Err(format!("the browser closed its pipe during start-up ({}){}",
                        status.map(describe).unwrap_or_else(|_| "still running".to_owned()),
                        said(stderr_tail, browser_pid).await));
                }
            },
            () = &mut deadline => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                return Err(format!("the browser did not answer on its pipe within {} s",
                    START_TIMEOUT.as_secs()));
            }
        }
    }
    if super::client::probe(&socket) {
        // Another keeper serves this profile; ours goes (closing the pipe ends its browser).
        return Err("another keeper already serves this profile".to_owned());
    }
    match std::fs::remove_file(&socket) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!(
                "cannot remove the stale {}: {error}",
                socket.display()
            ));
        }
        _ => {}
    }
    let listener = ipc::listen(&socket)
        .map_err(|error| format!("cannot listen on {}: {error}", socket.display()))?;
    let identity = crate::os::file_identity(&socket);
    let (greet_tx, mut greetings) = mpsc::channel::<Greeting>(MAX_GREETERS);
    let greeters = Arc::new(Semaphore::new(MAX_GREETERS));
    let pending = Arc::new(Semaphore::new(MAX_PENDING));

    loop {
        let stalled_out = keeper.stalled_sender();
        tokio::select! {
            status = child.wait() => {
                tracing::debug!(status = %describe(status), "the browser exited");
                break;
            }
            permit = reserve(stalled_out), if keeper.stalled.is_some() => keeper.unstall(permit).await,
            message = from_browser.recv(), if keeper.stalled.is_none() => match message {
                Some(message) => keeper.on_browser(message).await,
                None => {
                    let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
                    break;
                }
            },
            accepted = listener.accept() => match accepted {
                Ok((reader, writer)) => match pending.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let (greeters, greet_tx) = (greeters.clone(), greet_tx.clone());
                        tokio::spawn(async move {
                            if let Ok(_turn) = greeters.acquire_owned().await {
                                greet(reader, writer, greet_tx).await;
                            }
                            drop(slot);
                        });
                    }
                    Err(_) => tracing::warn!("too many connections waiting; closing one"),
                },
                Err(error) => {
                    tracing::warn!(%error, "accepting a keeper connection failed");
                    // Out of descriptors, say: do not spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(greeting) = greetings.recv() => keeper.on_greeting(greeting).await,
            Some(event) = client_events.recv() => keeper.on_client(event).await,
            () = tokio::time::sleep_until(keeper.waiting_until.unwrap_or_else(tokio::time::Instant::now)),
                if keeper.waiting_until.is_some() => keeper.refuse_waiting(),
        }
    }

    // The browser is gone: no socket names this keeper any more, then every client hears it.
    if identity.is_some() && crate::os::file_identity(&socket) == identity {
        let _ = std::fs::remove_file(&socket);
    }
    drop(listener);
    keeper.link = Link::Idle;
    for mut closer in std::mem::take(&mut keeper.closers) {
        let line = format!("{}\n", KeeperLine::Closed.to_line());
        let _ = tokio::time::timeout(HELLO_TIMEOUT, closer.writer.write_all(line.as_bytes())).await;
        let _ = tokio::time::timeout(HELLO_TIMEOUT, closer.writer.flush()).await;
    }
    Ok(())
}

/// The bytes of the browser's stderr kept for a start-up failure to quote: its first output,
/// where Chromium says why it gives up ("Missing X server or $DISPLAY") before the noise of
/// its helper processes going down.
const STDERR_KEPT_BYTES: usize = 4096;

/// The lines a start-up failure quotes.
const QUOTED_LINES: usize = 2;

/// Reads the browser's stderr until it closes (a full pipe would stall the browser), keeping
/// only its first [`STDERR_KEPT_BYTES`]; answers those once the browser closed it.
async fn read_stderr(mut stderr: tokio::process::ChildStderr) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = STDERR_KEPT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

/// What the browser said before it failed to start, as `": reason; reason"`, or nothing when
/// it said nothing before [`EXIT_GRACE`].
async fn said(stderr: tokio::task::JoinHandle<Vec<u8>>, browser_pid: Option<u32>) -> String {
    let bytes = match tokio::time::timeout(EXIT_GRACE, stderr).await {
        Ok(Ok(bytes)) => bytes,
        _ => return String::new(),
    };
    quote_reasons(&String::from_utf8_lossy(&bytes), browser_pid)
}

/// The reasons in Chromium's `[pid:tid:time:LEVEL:file:line] message` log lines: the `ERROR`
/// and `FATAL` messages of the browser process's main thread, in order (other threads, such as
/// a D-Bus client, and the helper processes going down interleave their own errors); else any
/// `ERROR`/`FATAL` message; else the last non-empty line.
fn quote_reasons(text: &str, browser_pid: Option<u32>) -> String {
    let errors: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|line| {
            let (prefix, message) = line.trim().strip_prefix('[')?.split_once("] ")?;
            let message = message.trim();
            let serious = prefix.contains(":ERROR:") || prefix.contains(":FATAL:");
            (serious && !message.is_empty()).then_some((prefix, message))
        })
        .collect();
    let main_thread = |prefix: &str| {
        let mut ids = prefix.split(':');
        let (pid, tid) = (ids.next(), ids.next());
        pid == tid && pid.and_then(|p| p.parse::<u32>().ok()) == browser_pid
    };
    let mut quoted: Vec<&str> = errors
        .iter()
        .filter(|(prefix, _)| main_thread(prefix))
        .map(|(_, message)| *message)
        .take(QUOTED_LINES)
        .collect();
    if quoted.is_empty() {
        quoted = errors
            .iter()
            .map(|(_, message)| *message)
            .take(QUOTED_LINES)
            .collect();
    }
    if quoted.is_empty() {
        quoted.extend(text.lines().map(str::trim).rfind(|line| !line.is_empty()));
    }
    match quoted.is_empty() {
        true => String::new(),
        false => format!(
            ": {}",
            quoted.join("; ").chars().take(400).collect::<String>()
        ),
    }
}

fn describe(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(status) => status.to_string(),
        Err(error) => error.to_string(),
    }
}

impl Keeper {
    /// Sends one of the keeper's own requests on the root connection.
    async fn call_root<C: Command>(&mut self, call: RootCall, command: &C) {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, call);
        let mut bytes = request_line(id, command).into_bytes();
        bytes.push(0);
        // A closed pipe means the browser is going; the loop sees its exit.
        let _ = self.pipe.send(bytes).await;
    }

    async fn on_browser(&mut self, message: String) {
        match route::classify(&message) {
            Inbound::Session { session, tail } => {
                let Link::Attached {
                    session: own, out, ..
                } = &self.link
                else {
                    return;
                };
                let line = match session == own.as_str() {
                    true => route::strip_session(&message, tail),
                    false => Some(message),
                };
                let Some(line) = line.and_then(one_line) else {
                    return;
                };
                match out.try_send(line) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(line)) => self.stalled = Some(line),
                    Err(mpsc::error::TrySendError::Closed(_)) => self.client_gone().await,
                }
            }
            Inbound::Root(root) => self.on_root(root).await,
            Inbound::Unparsable => tracing::warn!("dropping a browser message that is not JSON"),
        }
    }

    async fn on_root(&mut self, root: Root) {
        if let Some(id) = root.id {
            match self.pending.remove(&id) {
                Some(RootCall::Version) => self.started = true,
                Some(RootCall::Attach) => {
                    let Link::Attaching(greeting) = std::mem::replace(&mut self.link, Link::Idle)
                    else {
                        return;
                    };
                    let session = root
                        .result
                        .and_then(|result| result.session_id)
                        .filter(|_| root.error.is_none());
                    match session {
                        Some(session) => self.attached(greeting, SessionId::new(session)).await,
                        None => {
                            tracing::warn!("the browser refused a browser session");
                            refuse(greeting);
                            self.next_waiting().await;
                        }
                    }
                }
                Some(RootCall::Detach) => {
                    if matches!(self.link, Link::Detaching) {
                        self.link = Link::Idle;
                        self.next_waiting().await;
                    }
                }
                Some(RootCall::Close) | None => {}
            }
            return;
        }
        // The client detached its own browser session: it has no connection left.
        if root.method.as_deref() == Some(DetachedFromTarget::METHOD)
            && let Link::Attached { session, .. } = &self.link
            && root.params.and_then(|params| params.session_id).as_deref() == Some(session.as_str())
        {
            self.drop_client();
            self.next_waiting().await;
        }
    }

    async fn on_greeting(&mut self, greeting: Greeting) {
        match greeting.hello {
            KeeperLine::Attach => match (&self.link, &self.waiting) {
                (Link::Idle, _) => self.start_attach(greeting).await,
                (Link::Attaching(_) | Link::Detaching, None) => self.waiting = Some(greeting),
                (Link::Attached { .. }, None) => {
                    self.waiting = Some(greeting);
                    self.waiting_until = Some(tokio::time::Instant::now() + TAKEOVER_GRACE);
                }
                _ => refuse(greeting),
            },
            KeeperLine::Close => {
                self.call_root(RootCall::Close, &browser::Close {}).await;
                self.closers.push(greeting);
            }
            _ => {}
        }
    }

    async fn start_attach(&mut self, greeting: Greeting) {
        self.link = Link::Attaching(greeting);
        self.call_root(RootCall::Attach, &AttachToBrowserTarget {})
            .await;
    }

    /// The client holding the slot outlived [`TAKEOVER_GRACE`]: the waiting connection is
    /// refused.
    fn refuse_waiting(&mut self) {
        self.waiting_until = None;
        if let Some(waiting) = self.waiting.take() {
            refuse(waiting);
        }
    }

    async fn next_waiting(&mut self) {
        if matches!(self.link, Link::Idle)
            && let Some(greeting) = self.waiting.take()
        {
            self.waiting_until = None;
            self.start_attach(greeting).await;
        }
    }

    async fn attached(&mut self, greeting: Greeting, session: SessionId) {
        self.clients += 1;
        let number = self.clients;
        let (out, out_rx) = mpsc::channel::<String>(QUEUE);
        let _ = out.try_send(KeeperLine::Attached.to_line());
        tokio::spawn(write_client(
            greeting.writer,
            out_rx,
            number,
            self.client_events.clone(),
        ));
        let reader = tokio::spawn(read_client(
            greeting.reader,
            number,
            self.client_events.clone(),
        ));
        self.link = Link::Attached {
            session,
            number,
            out,
            reader: reader.abort_handle(),
        };
        self.refuse_waiting();
    }

    async fn on_client(&mut self, event: ClientEvent) {
        let current = match &self.link {
            Link::Attached { number, .. } => *number,
            _ => return,
        };
        match event {
            ClientEvent::Line(number, line) if number == current => {
                let Link::Attached { session, .. } = &self.link else {
                    return;
                };
                let injected = std::str::from_utf8(&line)
                    .ok()
                    .and_then(|line| route::inject_session(line, session.as_str()));
                match injected {
                    Some(message) => {
                        let mut bytes = message.into_bytes();
                        bytes.push(0);
                        let _ = self.pipe.send(bytes).await;
                    }
                    None => tracing::warn!("dropping a client line that is not a JSON object"),
                }
            }
            ClientEvent::Gone(number) if number == current => self.client_gone().await,
            _ => {}
        }
    }

    /// The client's queue while a message waits for room in it.
    fn stalled_sender(&self) -> Option<mpsc::Sender<String>> {
        match (&self.stalled, &self.link) {
            (Some(_), Link::Attached { out, .. }) => Some(out.clone()),
            _ => None,
        }
    }

    /// Room in the client's queue (or its end): the stalled message goes on.
    async fn unstall(&mut self, permit: Option<mpsc::OwnedPermit<String>>) {
        let Some(line) = self.stalled.take() else {
            return;
        };
        match permit {
            Some(permit) => {
                permit.send(line);
            }
            None => self.client_gone().await,
        }
    }

    /// Closes the client's connection and forgets it.
    fn drop_client(&mut self) -> Option<SessionId> {
        // What the client's queue could not take is the client's, not the next one's.
        self.stalled = None;
        match std::mem::replace(&mut self.link, Link::Idle) {
            Link::Attached {
                session, reader, ..
            } => {
                // The writer task ends when `out` is dropped; the reader must be stopped.
                reader.abort();
                Some(session)
            }
            other => {
                self.link = other;
                None
            }
        }
    }

    /// The client went away: detach its browser session, which takes its child sessions and
    /// its auto-attach and discovery settings with it. The browser and its tabs stay.
    async fn client_gone(&mut self) {
        if let Some(session) = self.drop_client() {
            self.link = Link::Detaching;
            // The waiting connection now waits for the detach, not for the grace.
            self.waiting_until = None;
            self.call_root(
                RootCall::Detach,
                &DetachFromTarget {
                    session_id: session,
                },
            )
            .await;
        }
    }
}

/// Room for one message in `out`; `None` when there is no client or it is gone.
async fn reserve(out: Option<mpsc::Sender<String>>) -> Option<mpsc::OwnedPermit<String>> {
    out?.reserve_owned().await.ok()
}

/// Answers `busy` and closes the connection, without holding up the loop.
fn refuse(greeting: Greeting) {
    let Greeting { mut writer, .. } = greeting;
    tokio::spawn(async move {
        let line = format!("{}\n", KeeperLine::Busy.to_line());
        let _ = tokio::time::timeout(HELLO_TIMEOUT, async {
            let _ = writer.write_all(line.as_bytes()).await;
            let _ = writer.flush().await;
        })
        .await;
    });
}

/// Reads a new connection's first line; hands `attach` and `close` connections to the loop and
/// closes any other.
async fn greet(reader: IpcReader, writer: IpcWriter, greetings: mpsc::Sender<Greeting>) {
    let mut reader = LineReader::new(reader, MAX_HELLO_BYTES);
    let first = tokio::time::timeout(HELLO_TIMEOUT, reader.next_line()).await;
    let hello = match first {
        Ok(Ok(Some(line))) => KeeperLine::from_line(&line),
        _ => None,
    };
    if let Some(hello @ (KeeperLine::Attach | KeeperLine::Close)) = hello {
        reader.set_max_line_bytes(MAX_LINE_BYTES);
        let _ = greetings
            .send(Greeting {
                hello,
                reader,
                writer,
            })
            .await;
    }
}

/// Reads the client's lines into the loop until its end.
async fn read_client(
    mut reader: LineReader<IpcReader>,
    number: u64,
    events: mpsc::Sender<ClientEvent>,
) {
    loop {
        match reader.next_line().await {
            Ok(Some(line)) => {
                if events.send(ClientEvent::Line(number, line)).await.is_err() {
                    return;
                }
            }
            Err(FramingError::TooLong { limit }) => {
                tracing::warn!(limit, "skipping an over-long client line");
                if !matches!(reader.skip_line().await, Ok(true)) {
                    break;
                }
            }
            Ok(None) | Err(FramingError::Io(_)) => break,
        }
    }
    let _ = events.send(ClientEvent::Gone(number)).await;
}

/// Writes lines to the client, flushing whenever the queue runs empty.
async fn write_client(
    writer: IpcWriter,
    mut lines: mpsc::Receiver<String>,
    number: u64,
    events: mpsc::Sender<ClientEvent>,
) {
    let mut writer = tokio::io::BufWriter::new(writer);
    while let Some(line) = lines.recv().await {
        let written = async {
            writer.write_all(line.as_bytes()).await?;
            writer.write_all(b"\n").await?;
            if lines.is_empty() {
                writer.flush().await?;
            }
            Ok::<(), std::io::Error>(())
        }
        .await;
        if written.is_err() {
            let _ = events.send(ClientEvent::Gone(number)).await;
            return;
        }
    }
    let _ = writer.flush().await;
}

/// Writes NUL-terminated messages into the browser's fd 3.
async fn write_pipe(
    mut pipe: tokio::net::unix::pipe::Sender,
    mut messages: mpsc::Receiver<Vec<u8>>,
) {
    while let Some(message) = messages.recv().await {
        if pipe.write_all(&message).await.is_err() {
            return;
        }
    }
}

/// Reads the browser's NUL-terminated messages from its fd 4 into the loop.
async fn read_pipe(pipe: tokio::net::unix::pipe::Receiver, messages: mpsc::Sender<String>) {
    let mut reader = BufReader::with_capacity(64 * 1024, pipe);
    let mut buf = Vec::new();
    loop {
        match next_frame(&mut reader, &mut buf, MAX_LINE_BYTES).await {
            Ok(Frame::Message(bytes)) => match String::from_utf8(bytes) {
                Ok(text) => {
                    if messages.send(text).await.is_err() {
                        return;
                    }
                }
                Err(_) => tracing::warn!("dropping a browser message that is not UTF-8"),
            },
            Ok(Frame::Skipped) => tracing::warn!("skipping an over-long browser message"),
            Ok(Frame::End) | Err(_) => return,
        }
    }
}

/// Chromium sends compact JSON; a message with a raw line break would break the client's line
/// protocol, so it is re-serialized (or dropped if not JSON).
fn one_line(text: String) -> Option<String> {
    if !text.contains(['\n', '\r']) {
        return Some(text);
    }
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .map(|value| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::quote_reasons;

    #[test]
    fn a_start_up_failure_quotes_chromiums_reasons_first() {
        let check = |text: &str, expect: &str| {
            assert_eq!(quote_reasons(text, Some(5538)), expect, "{text}")
        };
        // The browser's main thread says why; a D-Bus thread and the zygote interleave.
        let start_up = "/usr/bin/chromium: 9: [: 1: unexpected operator\n\
             [5538:5570:1205/064814.620795:ERROR:dbus/bus.cc:405] Failed to connect to the bus\n\
             [5538:5538:1205/064814.619245:ERROR:ui/ozone/platform/x11/ozone_platform_x11.cc:257] Missing X server or $DISPLAY\n\
             [5560:5560:0100/000000.706498:ERROR:content/zygote/zygote_linux.cc:662] write: Broken pipe (32)\n\
             [5538:5538:1205/064814.619292:ERROR:ui/aura/env.cc:253] The platform failed to initialize.  Exiting.\n";
        check(
            start_up,
            ": Missing X server or $DISPLAY; The platform failed to initialize.  Exiting.",
        );
        // Another pid: any error, in order.
        assert_eq!(
            quote_reasons(start_up, Some(1)),
            ": Failed to connect to the bus; Missing X server or $DISPLAY"
        );
        check(
            "[1:1:0100/000000.1:WARNING:x.cc:1] not a reason\nplain last words\n\n",
            ": plain last words",
        );
        check("", "");
    }
}
