//! The README's first command (`scripts/quickstart`): one real session end to end, driven the way
//! an agent host drives Browser Pilot. It launches the managed headless Chromium, spawns
//! `browser-pilot bridge --stdio`, speaks newline-delimited JSON-RPC 2.0 over the bridge's pipes
//! (initialize, tools/list, a Workspace and a Lease, `browser.connect`, `browser.open`,
//! `browser.tabs.list`, events/poll) and cleans everything up again, printing one line per step.
//!
//! It uses only the public surface (the executable, its stdin/stdout and exit codes) and imports
//! nothing from the crate, like a real host. Browser tools that the running build does not
//! advertise in `tools/list` are reported as skipped, not failed. Exit status 0 means every
//! advertised step succeeded.
//!
//! Usage: `quickstart [PATH/TO/browser-pilot]` (default: the `browser-pilot` next to the
//! directory holding this example). `BROWSER_PILOT_HOME` is honoured when set; otherwise a
//! temporary home is created and removed at the end.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Longest wait for one response. `browser.connect` and the first navigation may take a few
/// seconds on a cold machine; anything longer is a failure worth reporting.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the bridge may take to exit after `shutdown` before it is killed.
const BRIDGE_EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Attempts to delete the temporary home, `HOME_REMOVAL_PAUSE` apart: about 5 s in all, far longer
/// than Chromium's helpers take to exit after the browser closed.
const HOME_REMOVAL_ATTEMPTS: usize = 10;
const HOME_REMOVAL_PAUSE: Duration = Duration::from_millis(500);

/// Characters of an opaque id's random part shown in the output: enough to tell ids apart.
const SHORT_ID_CHARS: usize = 8;

/// Longest URL or title shown in one output line.
const MAX_SHOWN_CHARS: usize = 60;

/// The page the quick start opens: self-contained, so no network is needed.
const PAGE_URL: &str = "data:text/html,%3Ctitle%3EBrowser%20Pilot%20quick%20start%3C/title%3E%3Ch1%3EHello%20from%20Browser%20Pilot%3C/h1%3E";

/// What can go wrong in one step.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error("{code}: {message}")]
    Rpc { code: String, message: String },
    #[error("no response within {} s", RESPONSE_TIMEOUT.as_secs())]
    Timeout,
    #[error("the bridge closed its stdout")]
    BridgeGone,
    #[error("cannot write to the bridge: {0}")]
    Write(#[source] std::io::Error),
    #[error("unexpected result: {0}")]
    Shape(String),
    #[error("{0}")]
    Process(String),
}

/// The running bridge: its stdin, a channel of parsed stdout lines, and request bookkeeping.
struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: u64,
    notifications: usize,
}

impl Bridge {
    fn spawn(executable: &Path, home: &Path) -> Result<Bridge, StepError> {
        let mut child = Command::new(executable)
            .args(["bridge", "--stdio"])
            .env("BROWSER_PILOT_HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| StepError::Process(format!("cannot spawn the bridge: {e}")))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                match serde_json::from_str::<Value>(&line) {
                    Ok(message) => {
                        if sender.send(message).is_err() {
                            return;
                        }
                    }
                    Err(error) => eprintln!("quickstart: the bridge wrote non-JSON: {error}"),
                }
            }
        });
        Ok(Bridge {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 0,
            notifications: 0,
        })
    }

    /// Sends one request and waits for its response; notifications in between are counted.
    fn call(&mut self, method: &str, params: Value) -> Result<Value, StepError> {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = request.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().ok_or(StepError::BridgeGone)?;
        stdin.write_all(line.as_bytes()).map_err(StepError::Write)?;
        stdin.flush().map_err(StepError::Write)?;
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.lines.recv_timeout(left) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => return Err(StepError::Timeout),
                Err(RecvTimeoutError::Disconnected) => return Err(StepError::BridgeGone),
            };
            if message.get("id") != Some(&json!(id)) {
                self.notifications += 1;
                continue;
            }
            return match (message.get("result"), message.get("error")) {
                (Some(result), None) => Ok(result.clone()),
                (_, Some(error)) => Err(StepError::Rpc {
                    code: error["data"]["code"]
                        .as_str()
                        .unwrap_or("unknown")
                        .to_owned(),
                    message: error["message"].as_str().unwrap_or("").to_owned(),
                }),
                (None, None) => Err(StepError::Shape("response without result or error".into())),
            };
        }
    }

    /// `shutdown`, then waits for the bridge to exit (killing it after a grace period).
    fn shutdown(mut self) -> Result<(), StepError> {
        let answered = self.call("shutdown", json!({}));
        self.stdin.take();
        let deadline = Instant::now() + BRIDGE_EXIT_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return answered.map(|_| ()),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) | Err(_) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(StepError::Process(
                        "the bridge did not exit after shutdown".into(),
                    ));
                }
            }
        }
    }
}

/// Prints one line per step and remembers whether any advertised step failed.
#[derive(Default)]
struct Report {
    failed: usize,
}

impl Report {
    fn ok(&self, step: &str, what: &str, took: Duration) {
        println!("ok       {step:<20} {what} ({} ms)", took.as_millis());
    }

    fn failed(&mut self, step: &str, error: &StepError) {
        self.failed += 1;
        println!("FAILED   {step:<20} {error}");
    }

    fn skipped(&self, tool: &str) {
        println!("skipped: {tool} not advertised yet");
    }
}

/// The ids the session created, so cleanup knows what to release.
#[derive(Default)]
struct Session {
    tools: Vec<String>,
    workspace_id: Option<String>,
    lease_id: Option<String>,
    target_id: Option<String>,
    event_cursor: Option<String>,
}

impl Session {
    fn advertises(&self, tool: &str) -> bool {
        self.tools.iter().any(|name| name == tool)
    }

    /// The `tools/call` params for a Workspace (and optionally target) tool.
    fn tool_params(&self, name: &str, arguments: Value, target: bool) -> Value {
        let mut params = json!({
            "name": name,
            "arguments": arguments,
            "workspaceId": self.workspace_id,
            "leaseId": self.lease_id,
        });
        if target {
            params["targetId"] = json!(self.target_id);
        }
        params
    }
}

fn main() -> ExitCode {
    let executable = match executable() {
        Ok(path) => path,
        Err(error) => {
            eprintln!("quickstart: {error}");
            return ExitCode::from(2);
        }
    };
    let (home, temporary) = match home() {
        Ok(home) => home,
        Err(error) => {
            eprintln!("quickstart: {error}");
            return ExitCode::from(2);
        }
    };
    println!(
        "Browser Pilot quick start: {} with BROWSER_PILOT_HOME={}{}",
        executable.display(),
        home.display(),
        match temporary {
            true => " (temporary)",
            false => "",
        }
    );
    let mut report = Report::default();
    let started = Instant::now();
    let browser_launched = launch_browser(&executable, &home, &mut report);
    if browser_launched {
        run_session(&executable, &home, &mut report);
    }
    stop_browser(&executable, &home, &mut report);
    if temporary {
        stop_broker(&executable, &home);
        remove_home(&home);
    }
    let verdict = match report.failed {
        0 => "every advertised step succeeded".to_owned(),
        n => format!("{n} step(s) failed"),
    };
    println!("done in {} ms: {verdict}", started.elapsed().as_millis());
    match report.failed {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// The executable from the first argument, else `browser-pilot` one directory above this example.
fn executable() -> Result<PathBuf, String> {
    let path = match std::env::args_os().nth(1) {
        Some(path) => PathBuf::from(path),
        None => {
            let me = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
            let examples = me.parent().ok_or("no parent directory")?;
            let profile = examples.parent().ok_or("no profile directory")?;
            profile.join(format!("browser-pilot{}", std::env::consts::EXE_SUFFIX))
        }
    };
    match path.is_file() {
        true => Ok(path),
        false => Err(format!(
            "{} does not exist; build it with `cargo build --release --bins`",
            path.display()
        )),
    }
}

/// `BROWSER_PILOT_HOME` when set, else a fresh directory under the system temp dir.
fn home() -> Result<(PathBuf, bool), String> {
    match std::env::var_os("BROWSER_PILOT_HOME") {
        Some(home) => Ok((PathBuf::from(home), false)),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let dir = std::env::temp_dir().join(format!(
                "browser-pilot-quickstart-{}-{nanos:x}",
                std::process::id()
            ));
            // create_dir (not create_dir_all) fails if the name is taken, so the home is ours.
            std::fs::create_dir(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            Ok((dir, true))
        }
    }
}

fn launch_browser(executable: &Path, home: &Path, report: &mut Report) -> bool {
    let step = "browser launch";
    let started = Instant::now();
    let output = Command::new(executable)
        .args(["browser", "launch", "--headless"])
        .env("BROWSER_PILOT_HOME", home)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output();
    let output = match output {
        Ok(output) => output,
        Err(error) => {
            report.failed(step, &StepError::Process(format!("cannot run: {error}")));
            return false;
        }
    };
    if !output.status.success() {
        report.failed(
            step,
            &StepError::Process(format!("exited with {}", output.status)),
        );
        return false;
    }
    let candidate: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    report.ok(
        step,
        &format!(
            "managed headless Chromium ready as candidate {} ({})",
            candidate["id"].as_str().unwrap_or("?"),
            candidate["state"].as_str().unwrap_or("?"),
        ),
        started.elapsed(),
    );
    true
}

fn run_session(executable: &Path, home: &Path, report: &mut Report) {
    let started = Instant::now();
    let mut bridge = match Bridge::spawn(executable, home) {
        Ok(bridge) => bridge,
        Err(error) => {
            report.failed("bridge", &error);
            return;
        }
    };
    let mut session = Session::default();
    if initialize(&mut bridge, report, started) {
        run_steps(&mut bridge, &mut session, report);
        cleanup(&mut bridge, &session, report);
    }
    let notifications = bridge.notifications;
    let started = Instant::now();
    match bridge.shutdown() {
        Ok(()) => report.ok(
            "shutdown",
            &format!("bridge exited; it delivered {notifications} event notification(s)"),
            started.elapsed(),
        ),
        Err(error) => report.failed("shutdown", &error),
    }
}

fn initialize(bridge: &mut Bridge, report: &mut Report, spawned: Instant) -> bool {
    let params = json!({
        "client": {
            "id": "dev.browser-pilot.quickstart",
            "name": "Browser Pilot quick start",
            "version": env!("CARGO_PKG_VERSION"),
            "instanceId": format!("quickstart:{}", std::process::id()),
        },
        "protocol": {"min": {"major": 1, "minor": 1}, "max": {"major": 1, "minor": 1}},
        "requestedCapabilities": [
            "browser.control", "workspace.manage", "observation.read",
            "action.input", "artifact.read", "event.read"
        ],
        "launchMode": "embedded",
    });
    match bridge.call("initialize", params) {
        Ok(result) => {
            report.ok(
                "initialize",
                &format!(
                    "protocol {}.{}, Broker {}, Connection {}, {} browser candidate(s), {} capabilities granted",
                    result["protocol"]["major"],
                    result["protocol"]["minor"],
                    short_id(&result["broker"]["id"]),
                    short_id(&result["connectionId"]),
                    result["browsers"].as_array().map_or(0, Vec::len),
                    result["capabilities"]["granted"]
                        .as_array()
                        .map_or(0, Vec::len),
                ),
                spawned.elapsed(),
            );
            true
        }
        Err(error) => {
            report.failed("initialize", &error);
            false
        }
    }
}

/// Runs `call` as one step; prints its line from `describe` or the error.
fn step(
    report: &mut Report,
    name: &str,
    call: impl FnOnce() -> Result<Value, StepError>,
    describe: impl FnOnce(&Value) -> Result<String, StepError>,
) -> Option<Value> {
    let started = Instant::now();
    match call().and_then(|result| describe(&result).map(|line| (result, line))) {
        Ok((result, line)) => {
            report.ok(name, &line, started.elapsed());
            Some(result)
        }
        Err(error) => {
            report.failed(name, &error);
            None
        }
    }
}

fn run_steps(bridge: &mut Bridge, session: &mut Session, report: &mut Report) {
    let Some(tools) = step(
        report,
        "tools/list",
        || bridge.call("tools/list", json!({})),
        |result| {
            let names = tool_names(result)?;
            Ok(format!("{} tool(s) advertised", names.len()))
        },
    ) else {
        return;
    };
    session.tools = tool_names(&tools).unwrap_or_default();

    let Some(workspace) = step(
        report,
        "workspaces/create",
        || bridge.call("workspaces/create", json!({"clientKey": "quickstart"})),
        |result| {
            Ok(format!(
                "Workspace {} on {}, event cursor {}",
                short_id(&result["workspace"]["id"]),
                result["workspace"]["browserId"].as_str().unwrap_or("?"),
                result["eventCursor"].as_str().unwrap_or("?"),
            ))
        },
    ) else {
        return;
    };
    session.workspace_id = workspace["workspace"]["id"].as_str().map(str::to_owned);
    session.event_cursor = workspace["eventCursor"].as_str().map(str::to_owned);

    let Some(lease) = step(
        report,
        "leases/create",
        || {
            bridge.call(
                "leases/create",
                json!({"workspaceId": session.workspace_id, "ttlMs": 60_000}),
            )
        },
        |result| {
            Ok(format!(
                "Lease {} for {} ms",
                short_id(&result["lease"]["id"]),
                result["lease"]["ttlMs"],
            ))
        },
    ) else {
        return;
    };
    session.lease_id = lease["lease"]["id"].as_str().map(str::to_owned);

    browser_steps(bridge, session, report);

    let cursor = session.event_cursor.clone();
    step(
        report,
        "events/poll",
        || {
            bridge.call(
                "events/poll",
                json!({"workspaceId": session.workspace_id, "cursor": cursor, "limit": 100}),
            )
        },
        |result| {
            let events = result["events"]
                .as_array()
                .ok_or_else(|| StepError::Shape("no events array".into()))?;
            let mut types: Vec<&str> = Vec::new();
            for kind in events.iter().filter_map(|e| e["type"].as_str()) {
                if !types.contains(&kind) {
                    types.push(kind);
                }
            }
            Ok(format!(
                "{} event(s) since {} [{}], next cursor {}",
                events.len(),
                cursor.as_deref().unwrap_or("?"),
                types.join(", "),
                result["nextCursor"].as_str().unwrap_or("?"),
            ))
        },
    );
}

/// connect, open, list: each only when advertised.
fn browser_steps(bridge: &mut Bridge, session: &mut Session, report: &mut Report) {
    if !session.advertises("browser.connect") {
        for tool in ["browser.connect", "browser.open", "browser.tabs.list"] {
            report.skipped(tool);
        }
        return;
    }
    let params = session.tool_params("browser.connect", json!({}), false);
    let connected = step(
        report,
        "browser.connect",
        || bridge.call("tools/call", params),
        |result| {
            let inner = &result["result"];
            Ok(format!(
                "connected, generation {}",
                inner["browserConnectionGeneration"]
                    .as_u64()
                    .or_else(|| result["command"]["browserConnectionGeneration"].as_u64())
                    .map_or("?".to_owned(), |g| g.to_string()),
            ))
        },
    );
    if connected.is_none() {
        return;
    }

    match session.advertises("browser.open") {
        true => {
            let params = session.tool_params("browser.open", json!({"url": PAGE_URL}), false);
            let opened = step(
                report,
                "browser.open",
                || bridge.call("tools/call", params),
                |result| {
                    let target = &result["result"]["targetId"];
                    match target.as_str() {
                        Some(_) => Ok(format!(
                            "managed tab {} at {}",
                            short_id(target),
                            shown(result["result"]["url"].as_str().unwrap_or(PAGE_URL)),
                        )),
                        None => Err(StepError::Shape("result has no targetId".into())),
                    }
                },
            );
            session.target_id =
                opened.and_then(|r| r["result"]["targetId"].as_str().map(str::to_owned));
        }
        false => report.skipped("browser.open"),
    }

    match session.advertises("browser.tabs.list") {
        true => {
            let params = session.tool_params("browser.tabs.list", json!({}), false);
            let ours = session.target_id.clone();
            step(
                report,
                "browser.tabs.list",
                || bridge.call("tools/call", params),
                |result| describe_tabs(&result["result"], ours.as_deref()),
            );
        }
        false => report.skipped("browser.tabs.list"),
    }
}

fn describe_tabs(result: &Value, ours: Option<&str>) -> Result<String, StepError> {
    let tabs = result["tabs"]
        .as_array()
        .ok_or_else(|| StepError::Shape("result has no tabs array".into()))?;
    let managed = tabs.iter().filter(|t| t["managed"] == json!(true)).count();
    let mine = tabs
        .iter()
        .find(|t| ours.is_some() && t["targetId"].as_str() == ours);
    let detail = match (ours, mine) {
        (None, _) => String::new(),
        (Some(_), Some(tab)) => format!(
            "; ours is titled {:?}",
            shown(tab["title"].as_str().unwrap_or(""))
        ),
        (Some(_), None) => {
            return Err(StepError::Shape(
                "the tab browser.open returned is not listed".into(),
            ));
        }
    };
    Ok(format!(
        "{} tab(s), {managed} managed by this Workspace{detail}",
        tabs.len()
    ))
}

/// Releases what the session created, newest first. Failures count, but cleanup goes on.
fn cleanup(bridge: &mut Bridge, session: &Session, report: &mut Report) {
    if session.target_id.is_some() {
        match session.advertises("browser.tabs.close") {
            true => {
                let params = session.tool_params("browser.tabs.close", json!({}), true);
                step(
                    report,
                    "browser.tabs.close",
                    || bridge.call("tools/call", params),
                    |_| Ok("closed our managed tab".to_owned()),
                );
            }
            false => report.skipped("browser.tabs.close"),
        }
    }
    if let (Some(workspace_id), Some(lease_id)) = (&session.workspace_id, &session.lease_id) {
        step(
            report,
            "leases/release",
            || {
                bridge.call(
                    "leases/release",
                    json!({"workspaceId": workspace_id, "leaseId": lease_id}),
                )
            },
            |_| Ok(format!("Lease {} released", short_id(&json!(lease_id)))),
        );
    }
    if let Some(workspace_id) = &session.workspace_id {
        step(
            report,
            "workspaces/release",
            || bridge.call("workspaces/release", json!({"workspaceId": workspace_id})),
            |result| {
                Ok(format!(
                    "Workspace {} {}",
                    short_id(&json!(workspace_id)),
                    result["workspace"]["state"].as_str().unwrap_or("?"),
                ))
            },
        );
    }
}

fn stop_browser(executable: &Path, home: &Path, report: &mut Report) {
    let started = Instant::now();
    let status = Command::new(executable)
        .args(["browser", "stop"])
        .env("BROWSER_PILOT_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status();
    match status {
        Ok(status) if status.success() => {
            report.ok("browser stop", "managed Chromium closed", started.elapsed())
        }
        Ok(status) => report.failed(
            "browser stop",
            &StepError::Process(format!("exited with {status}")),
        ),
        Err(error) => report.failed(
            "browser stop",
            &StepError::Process(format!("cannot run: {error}")),
        ),
    }
}

/// Stops the Broker of a temporary home with `bp disconnect` (it would also exit by itself once
/// the home is deleted). Best effort: a shared home's Broker is never stopped here.
fn stop_broker(executable: &Path, home: &Path) {
    let bp = executable.with_file_name(format!("bp{}", std::env::consts::EXE_SUFFIX));
    let _ = Command::new(bp)
        .arg("disconnect")
        .env("BROWSER_PILOT_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Deletes the temporary home. Chromium's helper processes may still write to the profile for a
/// moment after `browser stop`, so removal is retried briefly.
fn remove_home(home: &Path) {
    for _ in 0..HOME_REMOVAL_ATTEMPTS {
        match std::fs::remove_dir_all(home) {
            Ok(()) => return,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(HOME_REMOVAL_PAUSE),
        }
    }
    eprintln!("quickstart: could not remove {}", home.display());
}

fn tool_names(result: &Value) -> Result<Vec<String>, StepError> {
    let tools = result["tools"]
        .as_array()
        .ok_or_else(|| StepError::Shape("no tools array".into()))?;
    Ok(tools
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect())
}

/// `workspace:0123abcd…` from `workspace:0123abcd4567…`.
fn short_id(id: &Value) -> String {
    let Some(id) = id.as_str() else {
        return "?".to_owned();
    };
    match id.split_once(':') {
        Some((prefix, random)) if random.chars().count() > SHORT_ID_CHARS => {
            let head: String = random.chars().take(SHORT_ID_CHARS).collect();
            format!("{prefix}:{head}…")
        }
        _ => id.to_owned(),
    }
}

/// A URL or title cut to `MAX_SHOWN_CHARS`.
fn shown(text: &str) -> String {
    match text.chars().count() > MAX_SHOWN_CHARS {
        true => format!(
            "{}…",
            text.chars().take(MAX_SHOWN_CHARS).collect::<String>()
        ),
        false => text.to_owned(),
    }
}
