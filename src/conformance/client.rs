//! The runner's own minimal JSON-RPC 2.0 client over a child's stdio pipes:
//! it spawns the exact command (never through a shell), writes one request
//! line at a time, correlates the response by id under a per-operation
//! deadline, counts `events/event` notifications, and drains stderr to
//! nowhere.
//!
//! It owns the child process through a guard that kills and reaps it on drop.
//! It knows method names only as opaque strings and never interprets a result;
//! what a result must look like is `checks`' business.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::lines::{self, Frame};

/// How often a waiting call also checks whether the child has exited, so a
/// bridge that dies while a grandchild still holds its stdout is noticed
/// long before the operation deadline.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// After the child is seen to have exited, how long the runner keeps reading
/// lines it wrote just before exiting (a response can still be in the pipe).
const EXIT_DRAIN_GRACE: Duration = Duration::from_millis(250);

/// The notification method whose arrivals are counted rather than ignored.
const EVENT_NOTIFICATION: &str = "events/event";

/// Everything that can happen on the child's pipes, as seen by the caller.
#[derive(Debug)]
enum Event {
    /// A stdout line that parsed as JSON.
    Message(Value),
    /// A stdout line that is not UTF-8 JSON, or longer than the bound.
    Malformed(&'static str),
    /// Stdout reached end of file (or failed to read).
    StdoutClosed,
    /// Writing a request to the child's stdin failed.
    StdinFailed,
}

impl fmt::Display for Event {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Message(_) => formatter.write_str("stdout message"),
            Event::Malformed(why) => write!(formatter, "malformed stdout line: {why}"),
            Event::StdoutClosed => formatter.write_str("stdout closed"),
            Event::StdinFailed => formatter.write_str("stdin write failed"),
        }
    }
}

/// Structured remediation copied from an error or a browser candidate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remediation {
    /// `remediation.action`, a stable machine string.
    pub action: Option<String>,
    /// `remediation.message`, human text.
    pub message: Option<String>,
}

impl Remediation {
    /// Reads `{action?, message?}` from a JSON object; `None` when neither is a string.
    pub fn from_json(value: &Value) -> Option<Remediation> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        let remediation = Remediation {
            action: text("action"),
            message: text("message"),
        };
        match remediation == Remediation::default() {
            true => None,
            false => Some(remediation),
        }
    }
}

/// A JSON-RPC error response.
#[derive(Debug, Clone)]
pub struct RpcError {
    /// The JSON-RPC integer code.
    pub code: i64,
    /// The human message, unscrubbed.
    pub message: String,
    /// `error.data.code`, the stable snake_case code.
    pub data_code: Option<String>,
    /// `error.data.remediation`, when the executable gave one.
    pub remediation: Option<Remediation>,
}

/// Why a call produced no result.
#[derive(Debug)]
pub enum CallError {
    /// No response within the per-operation deadline.
    Timeout,
    /// The child exited (or closed its pipes) before answering.
    BridgeExited,
    /// The child wrote something on stdout that breaks the framing or envelope.
    Protocol(String),
    /// The child answered with a JSON-RPC error.
    Rpc(RpcError),
}

impl fmt::Display for CallError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Timeout => formatter.write_str("no response before the timeout"),
            CallError::BridgeExited => formatter.write_str("the bridge exited before answering"),
            CallError::Protocol(detail) => write!(formatter, "protocol violation: {detail}"),
            CallError::Rpc(error) => write!(formatter, "error {}: {}", error.code, error.message),
        }
    }
}

impl std::error::Error for CallError {}

/// Why the child did not exit cleanly when asked.
#[derive(Debug)]
pub enum WaitError {
    /// Still running after the deadline.
    Timeout,
    /// The OS refused to report its status.
    Io(io::ErrorKind),
}

impl fmt::Display for WaitError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Timeout => formatter.write_str("the bridge did not exit before the timeout"),
            WaitError::Io(kind) => write!(formatter, "could not wait for the bridge: {kind}"),
        }
    }
}

impl std::error::Error for WaitError {}

/// Owns the child process; dropping it kills and reaps a child still running.
struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // Ignored: the child may exit between the check and the kill.
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A JSON-RPC connection to one spawned child.
pub struct Client {
    child: ChildGuard,
    outgoing: Option<Sender<Vec<u8>>>,
    incoming: Receiver<Event>,
    next_id: u64,
    timeout: Duration,
    stdout_closed: bool,
    n_event_notifications: u64,
}

impl Client {
    /// Spawns `program args...` directly with all three pipes and starts the
    /// reader, writer and stderr-drain threads.
    pub fn spawn(program: &OsStr, args: &[OsString], timeout: Duration) -> io::Result<Client> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (events, incoming) = mpsc::channel();
        let (outgoing, requests) = mpsc::channel();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let guard = ChildGuard { child };
        if let Some(stdout) = stdout {
            let events = events.clone();
            thread::spawn(move || read_stdout(stdout, &events));
        }
        if let Some(stdin) = stdin {
            thread::spawn(move || write_stdin(stdin, &requests, &events));
        }
        if let Some(mut stderr) = stderr {
            // Stderr is diagnostics for humans; the report never contains it.
            thread::spawn(move || io::copy(&mut stderr, &mut io::sink()));
        }
        Ok(Client {
            child: guard,
            outgoing: Some(outgoing),
            incoming,
            next_id: 1,
            timeout,
            stdout_closed: false,
            n_event_notifications: 0,
        })
    }

    /// How many `events/event` notifications arrived so far.
    pub fn n_event_notifications(&self) -> u64 {
        self.n_event_notifications
    }

    /// Sends one request and waits for the response with the same id.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, CallError> {
        if self.stdout_closed {
            return Err(CallError::BridgeExited);
        }
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = request.to_string().into_bytes();
        line.push(b'\n');
        let sent = match &self.outgoing {
            Some(outgoing) => outgoing.send(line).is_ok(),
            None => false,
        };
        if !sent {
            return Err(CallError::BridgeExited);
        }
        let deadline = Instant::now() + self.timeout;
        let mut exit_deadline: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let limit = exit_deadline.map_or(deadline, |grace| grace.min(deadline));
            if now >= limit {
                return Err(match exit_deadline {
                    Some(_) => CallError::BridgeExited,
                    None => CallError::Timeout,
                });
            }
            let event = match self
                .incoming
                .recv_timeout((limit - now).min(EXIT_POLL_INTERVAL))
            {
                Ok(event) => event,
                Err(RecvTimeoutError::Timeout) => {
                    if exit_deadline.is_none() && self.child.has_exited() {
                        exit_deadline = Some(Instant::now() + EXIT_DRAIN_GRACE);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return Err(CallError::BridgeExited),
            };
            match event {
                Event::Message(message) => match self.on_message(id, message) {
                    Some(outcome) => return outcome,
                    None => continue,
                },
                Event::Malformed(why) => return Err(CallError::Protocol(why.to_owned())),
                Event::StdoutClosed => {
                    self.stdout_closed = true;
                    return Err(CallError::BridgeExited);
                }
                Event::StdinFailed => return Err(CallError::BridgeExited),
            }
        }
    }

    /// Classifies one message by its keys; `Some` resolves the pending call.
    fn on_message(&mut self, id: u64, message: Value) -> Option<Result<Value, CallError>> {
        let Value::Object(object) = message else {
            return Some(Err(CallError::Protocol(
                "stdout line is not a JSON object".to_owned(),
            )));
        };
        match (object.get("id"), object.get("method")) {
            (None, Some(method)) => {
                if method.as_str() == Some(EVENT_NOTIFICATION) {
                    self.n_event_notifications += 1;
                }
                None
            }
            (Some(_), Some(_)) => None,
            (Some(response_id), None) => match response_id {
                Value::Null => Some(Err(on_error_object(object.get("error")))),
                _ if *response_id == json!(id) => Some(on_response(&object)),
                // A response to nothing outstanding: stale or foreign, dropped.
                _ => None,
            },
            (None, None) => Some(Err(CallError::Protocol(
                "stdout message is neither a response nor a notification".to_owned(),
            ))),
        }
    }

    /// Closes the child's stdin after any queued requests are written.
    pub fn close_stdin(&mut self) {
        self.outgoing = None;
    }

    /// Waits until the child exits or the per-operation timeout passes.
    pub fn wait_exit(&mut self) -> Result<ExitStatus, WaitError> {
        self.wait_exit_within(self.timeout)
    }

    /// Waits until the child exits or `limit` passes.
    pub fn wait_exit_within(&mut self, limit: Duration) -> Result<ExitStatus, WaitError> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) if Instant::now() >= deadline => return Err(WaitError::Timeout),
                Ok(None) => thread::sleep(EXIT_POLL_INTERVAL.min(limit)),
                Err(error) => return Err(WaitError::Io(error.kind())),
            }
        }
    }
}

fn on_response(object: &serde_json::Map<String, Value>) -> Result<Value, CallError> {
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(CallError::Protocol(
            "response lacks \"jsonrpc\": \"2.0\"".to_owned(),
        ));
    }
    match (object.get("result"), object.get("error")) {
        (Some(result), None) => Ok(result.clone()),
        (None, Some(error)) => Err(on_error_object(Some(error))),
        _ => Err(CallError::Protocol(
            "response must carry exactly one of result and error".to_owned(),
        )),
    }
}

fn on_error_object(error: Option<&Value>) -> CallError {
    let Some(error) = error.filter(|error| error.is_object()) else {
        return CallError::Protocol("error response without an error object".to_owned());
    };
    let code = error.get("code").and_then(Value::as_i64);
    let message = error.get("message").and_then(Value::as_str);
    let (Some(code), Some(message)) = (code, message) else {
        return CallError::Protocol("error object lacks an integer code or a message".to_owned());
    };
    let data = error.get("data");
    CallError::Rpc(RpcError {
        code,
        message: message.to_owned(),
        data_code: data
            .and_then(|data| data.get("code"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        remediation: data
            .and_then(|data| data.get("remediation"))
            .and_then(Remediation::from_json),
    })
}

fn read_stdout(stdout: ChildStdout, events: &Sender<Event>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let event = match lines::read_frame(&mut reader, lines::MAX_LINE_BYTES) {
            Ok(Frame::Line(bytes)) => match serde_json::from_slice::<Value>(&bytes) {
                Ok(message) => Event::Message(message),
                Err(_) => Event::Malformed("not valid UTF-8 JSON"),
            },
            Ok(Frame::Oversized) => Event::Malformed("line longer than the runner's bound"),
            Ok(Frame::Eof) | Err(_) => {
                let _ = events.send(Event::StdoutClosed);
                return;
            }
        };
        if events.send(event).is_err() {
            return;
        }
    }
}

fn write_stdin(mut stdin: ChildStdin, requests: &Receiver<Vec<u8>>, events: &Sender<Event>) {
    for line in requests {
        // One write per message so lines never interleave.
        if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
            let _ = events.send(Event::StdinFailed);
            return;
        }
    }
}
