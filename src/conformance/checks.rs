//! One function per contract check, sharing a `Session` that remembers only
//! what later checks and cleanup need: negotiated facts, advertised tool
//! names, and the ids of resources this runner created.
//!
//! Checks speak to the child only through `client` and read results only
//! through `shape`. They never enumerate or act on a tab they did not open,
//! and they never put a value read from the executable into a failure
//! message, except the executable's own error text and remediation, which
//! the report scrubs.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::client::{CallError, Client, Remediation};
use super::codes::RunnerCode;
use super::os;
use super::shape::{Doc, ShapeError};

/// The client id the runner announces, so Broker logs can tell it apart.
pub const CLIENT_ID: &str = "dev.browser-pilot.conformance";

/// Every capability of the stdio contract; the runner asks for all of them.
pub const CAPABILITIES: [&str; 6] = [
    "browser.control",
    "workspace.manage",
    "observation.read",
    "action.input",
    "artifact.read",
    "event.read",
];

/// The per-Connection input limit the runner requests: the contract default.
const REQUESTED_MAX_MESSAGE_BYTES: u64 = 1024 * 1024;

/// The per-Connection result limit the runner requests: the contract default.
const REQUESTED_MAX_RESULT_BYTES: u64 = 4 * 1024 * 1024;

/// The Lease TTL the runner asks for: the contract default, long enough for
/// every check at the default per-operation timeout between heartbeats.
const LEASE_TTL_MS: u64 = 30_000;

/// Observation size the runner asks for, and the most elements it accepts.
const OBSERVE_LIMIT: u64 = 50;

/// Events per `events/poll` page the runner asks for, and the most it accepts.
const EVENT_PAGE_LIMIT: u64 = 100;

/// Pages the runner follows while `hasMore` stays true. A fresh Workspace's
/// journal holds a handful of events; this many pages means the cursor is
/// not advancing.
const MAX_EVENT_PAGES: usize = 64;

/// Candidate states in which a browser can serve target tools.
const READY_STATES: [&str; 2] = ["ready", "connected"];

/// The managed page the runner opens: it carries no user content.
const BLANK_URL: &str = "about:blank";

/// Why a check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Stable snake_case code: the executable's `data.code` or the runner's own.
    pub code: String,
    /// Human text; scrubbed by the report.
    pub message: String,
    /// The bridge hung or exited, so no later check can talk to it.
    pub fatal: bool,
}

impl Failure {
    fn new(code: RunnerCode, message: impl Into<String>) -> Failure {
        Failure {
            code: code.as_str().to_owned(),
            message: message.into(),
            fatal: false,
        }
    }

    /// A failed call to `method`.
    fn call(method: &str, error: CallError, timeout_ms: u64) -> Failure {
        match error {
            CallError::Timeout => Failure {
                code: RunnerCode::Timeout.as_str().to_owned(),
                message: format!("{method}: no response within {timeout_ms} ms"),
                fatal: true,
            },
            CallError::BridgeExited => Failure {
                code: RunnerCode::BridgeExited.as_str().to_owned(),
                message: format!("{method}: the bridge exited before answering"),
                fatal: true,
            },
            CallError::Protocol(detail) => {
                Failure::new(RunnerCode::ProtocolError, format!("{method}: {detail}"))
            }
            CallError::Rpc(error) => {
                let code = error
                    .data_code
                    .unwrap_or_else(|| RunnerCode::RpcError.as_str().to_owned());
                let mut message = format!("{method} failed ({}): {}", error.code, error.message);
                if let Some(remediation) = error.remediation {
                    message.push_str(&format!(
                        "; remediation: {}",
                        remediation_text(&remediation)
                    ));
                }
                Failure {
                    code,
                    message,
                    fatal: false,
                }
            }
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Failure {}

impl From<ShapeError> for Failure {
    fn from(error: ShapeError) -> Failure {
        Failure::new(RunnerCode::InvalidResult, error.to_string())
    }
}

fn remediation_text(remediation: &Remediation) -> String {
    match (&remediation.action, &remediation.message) {
        (Some(action), Some(message)) => format!("{action}: {message}"),
        (Some(action), None) => action.clone(),
        (None, Some(message)) => message.clone(),
        (None, None) => "none given".to_owned(),
    }
}

/// How a check that did not fail ended. A check never skips itself: a tool the suite needs
/// that is not advertised fails it (`tool_not_advertised`); only the suite skips checks whose
/// prerequisite did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
}

/// What `initialize` told the runner.
#[derive(Debug, Clone, Default)]
pub struct Negotiated {
    pub executable_version: String,
    pub service_version: String,
    pub protocol: (u64, u64),
    granted: Vec<String>,
    any_browser_ready: bool,
    /// The first candidate's remediation, when no candidate is ready.
    remediation: Option<Remediation>,
    n_candidates: usize,
}

/// State shared by the checks of one run.
pub struct Session {
    client: Client,
    timeout_ms: u64,
    instance_id: String,
    pub negotiated: Option<Negotiated>,
    tools: HashSet<String>,
    workspace_id: Option<String>,
    lease_id: Option<String>,
    event_cursor: Option<String>,
    /// The one managed target this runner opened.
    target_id: Option<String>,
    /// An Artifact this runner captured and has not released.
    artifact_id: Option<String>,
    /// The browser candidate the Workspace is created on (`None`: the default binding).
    pub browser_id: Option<String>,
}

/// Whether `text` is an event cursor `cursor:N`; returns N.
fn cursor_position(text: &str) -> Option<u64> {
    let digits = text.strip_prefix("cursor:")?;
    match !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit()) {
        true => digits.parse().ok(),
        false => None,
    }
}

fn require_cursor(label: &str, text: &str) -> Result<u64, Failure> {
    cursor_position(text).ok_or_else(|| {
        Failure::new(
            RunnerCode::InvalidCursor,
            format!("{label} is not of the form cursor:N"),
        )
    })
}

impl Session {
    pub fn new(client: Client, timeout_ms: u64, instance_id: String) -> Session {
        Session {
            client,
            timeout_ms,
            instance_id,
            negotiated: None,
            tools: HashSet::new(),
            workspace_id: None,
            lease_id: None,
            event_cursor: None,
            target_id: None,
            artifact_id: None,
            browser_id: None,
        }
    }

    /// How many `events/event` notifications arrived during the run.
    pub fn n_event_notifications(&self) -> u64 {
        self.client.n_event_notifications()
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        self.client
            .call(method, params)
            .map_err(|error| Failure::call(method, error, self.timeout_ms))
    }

    fn workspace_id(&self) -> Result<String, Failure> {
        self.workspace_id
            .clone()
            .ok_or_else(|| Failure::new(RunnerCode::MissingWorkspace, "no Workspace was created"))
    }

    fn lease_id(&self) -> Result<String, Failure> {
        self.lease_id
            .clone()
            .ok_or_else(|| Failure::new(RunnerCode::MissingLease, "no Lease was created"))
    }

    fn target_id(&self) -> Result<String, Failure> {
        self.target_id
            .clone()
            .ok_or_else(|| Failure::new(RunnerCode::MissingTarget, "no managed target was opened"))
    }

    /// Calls a tool and returns the inner `result` of its completed Command.
    fn call_tool(
        &mut self,
        name: &str,
        arguments: Value,
        target_id: Option<String>,
    ) -> Result<Value, Failure> {
        let mut params = json!({
            "name": name,
            "arguments": arguments,
            "workspaceId": self.workspace_id()?,
            "leaseId": self.lease_id()?,
            "deadlineMs": self.timeout_ms,
        });
        if let Some(target_id) = target_id {
            params["targetId"] = Value::String(target_id);
        }
        let outcome = self.call("tools/call", params).map_err(|failure| Failure {
            message: failure
                .message
                .replacen("tools/call", &format!("tools/call {name}"), 1),
            ..failure
        })?;
        let doc = Doc::new(name, &outcome);
        doc.id("command.id")?;
        let status = doc.str("command.status")?;
        if status != "completed" {
            return Err(Failure::new(
                RunnerCode::CommandNotCompleted,
                format!("{name}: command.status is not \"completed\""),
            ));
        }
        doc.object("result")?;
        Ok(outcome["result"].clone())
    }

    fn has_tool(&self, name: &str) -> bool {
        self.tools.contains(name)
    }
}

/// `initialize`: negotiation and the result shape.
pub fn initialize(session: &mut Session) -> Result<Outcome, Failure> {
    let params = json!({
        "client": {
            "id": CLIENT_ID,
            "name": "Browser Pilot Conformance",
            "version": env!("CARGO_PKG_VERSION"),
            "instanceId": session.instance_id,
        },
        "protocol": {"min": {"major": 1, "minor": 0}, "max": {"major": 1, "minor": 1}},
        "requestedCapabilities": CAPABILITIES,
        "launchMode": "embedded",
        "limits": {
            "maxMessageBytes": REQUESTED_MAX_MESSAGE_BYTES,
            "maxResultBytes": REQUESTED_MAX_RESULT_BYTES,
        },
    });
    let result = session.call("initialize", params)?;
    let doc = Doc::new("initialize", &result);
    let protocol = (doc.u64("protocol.major")?, doc.u64("protocol.minor")?);
    if !((1, 0)..=(1, 1)).contains(&protocol) {
        return Err(Failure::new(
            RunnerCode::ProtocolMismatch,
            format!(
                "selected protocol {}.{} is outside the requested 1.0..1.1",
                protocol.0, protocol.1
            ),
        ));
    }
    let supported = doc.strings("capabilities.supported")?;
    let granted = doc.strings("capabilities.granted")?;
    for capability in &granted {
        if !supported.contains(capability) || !CAPABILITIES.contains(capability) {
            return Err(Failure::new(
                RunnerCode::CapabilityMismatch,
                format!("granted capability {capability:?} was not both supported and requested"),
            ));
        }
    }
    let executable_version = doc.id("executable.version")?.to_owned();
    let service_version = doc.id("service.version")?.to_owned();
    doc.id("broker.id")?;
    doc.id("connectionId")?;
    let connection_message = doc.u64("limits.connection.maxMessageBytes")?;
    let connection_result = doc.u64("limits.connection.maxResultBytes")?;
    let service_message = doc.u64("limits.service.maxMessageBytes")?;
    let service_result = doc.u64("limits.service.maxResultBytes")?;
    doc.u64("limits.service.maxArtifactBytes")?;
    doc.u64("limits.service.eventJournalSize")?;
    if protocol == (1, 1)
        && (connection_message > REQUESTED_MAX_MESSAGE_BYTES.min(service_message)
            || connection_result > REQUESTED_MAX_RESULT_BYTES.min(service_result))
    {
        return Err(Failure::new(
            RunnerCode::LimitsNotNegotiated,
            "connection limits exceed the smaller of the requested and service limits",
        ));
    }
    let browsers = doc.array("browsers")?;
    let mut any_browser_ready = false;
    let mut remediation = None;
    for (index, candidate) in browsers.iter().enumerate() {
        let label = format!("initialize.browsers[{index}]");
        let candidate_doc = Doc::new(&label, candidate);
        candidate_doc.id("id")?;
        let state = candidate_doc.str("state")?;
        any_browser_ready |= READY_STATES.contains(&state);
        if remediation.is_none() {
            remediation = candidate
                .get("remediation")
                .and_then(Remediation::from_json);
        }
    }
    session.negotiated = Some(Negotiated {
        executable_version,
        service_version,
        protocol,
        granted: granted
            .iter()
            .map(|capability| (*capability).to_owned())
            .collect(),
        any_browser_ready,
        remediation,
        n_candidates: browsers.len(),
    });
    Ok(Outcome::Passed)
}

/// `tools/list`: the manifest shape and unique names.
pub fn tools_list(session: &mut Session) -> Result<Outcome, Failure> {
    let result = session.call("tools/list", json!({}))?;
    let doc = Doc::new("tools/list", &result);
    let tools = doc.array("tools")?;
    let granted = session
        .negotiated
        .as_ref()
        .map(|negotiated| negotiated.granted.clone())
        .unwrap_or_default();
    let mut names = HashSet::new();
    for (index, tool) in tools.iter().enumerate() {
        let label = format!("tools/list.tools[{index}]");
        let tool_doc = Doc::new(&label, tool);
        let name = tool_doc.id("name")?;
        let capability = tool_doc.id("capability")?;
        tool_doc.bool("mutating")?;
        tool_doc.object("inputSchema")?;
        tool_doc.object("outputSchema")?;
        tool_doc.strings("sensitivity.input")?;
        tool_doc.strings("sensitivity.output")?;
        if !granted.iter().any(|granted| granted == capability) {
            return Err(Failure::new(
                RunnerCode::CapabilityNotGranted,
                format!("tool {name:?} needs capability {capability:?}, which was not granted"),
            ));
        }
        if !names.insert(name.to_owned()) {
            return Err(Failure::new(
                RunnerCode::DuplicateTool,
                format!("tool name {name:?} is listed more than once"),
            ));
        }
    }
    session.tools = names;
    Ok(Outcome::Passed)
}

/// Workspace creation, Lease creation and heartbeat, Workspace lookup.
pub fn workspace_lease_lifecycle(session: &mut Session) -> Result<Outcome, Failure> {
    let params = match &session.browser_id {
        Some(browser_id) => json!({"browserId": browser_id}),
        None => json!({}),
    };
    let created = session.call("workspaces/create", params)?;
    let doc = Doc::new("workspaces/create", &created);
    let workspace_id = doc.id("workspace.id")?.to_owned();
    session.workspace_id = Some(workspace_id.clone());
    match doc.value("workspace.browserId")? {
        Value::String(_) | Value::Null => {}
        _ => {
            return Err(Failure::new(
                RunnerCode::InvalidResult,
                "workspaces/create.workspace.browserId: expected string or null",
            ));
        }
    }
    doc.id("workspace.state")?;
    doc.u64("workspace.createdAt")?;
    doc.id("managedTabSet.id")?;
    let cursor = doc.str("eventCursor")?;
    require_cursor("workspaces/create.eventCursor", cursor)?;
    session.event_cursor = Some(cursor.to_owned());

    let leased = session.call(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": LEASE_TTL_MS}),
    )?;
    let doc = Doc::new("leases/create", &leased);
    let lease_id = doc.id("lease.id")?.to_owned();
    session.lease_id = Some(lease_id.clone());
    if doc.str("lease.workspaceId")? != workspace_id {
        return Err(Failure::new(
            RunnerCode::LeaseMismatch,
            "leases/create returned a Lease for another Workspace",
        ));
    }
    let expires_at = doc.u64("lease.expiresAt")?;
    if doc.u64("lease.ttlMs")? != LEASE_TTL_MS {
        return Err(Failure::new(
            RunnerCode::LeaseMismatch,
            "leases/create did not grant the requested in-range ttlMs",
        ));
    }

    let renewed = session.call(
        "leases/heartbeat",
        json!({"workspaceId": workspace_id, "leaseId": lease_id}),
    )?;
    let doc = Doc::new("leases/heartbeat", &renewed);
    if doc.str("lease.id")? != lease_id {
        return Err(Failure::new(
            RunnerCode::LeaseMismatch,
            "leases/heartbeat returned a different Lease",
        ));
    }
    if doc.u64("lease.expiresAt")? < expires_at {
        return Err(Failure::new(
            RunnerCode::LeaseNotRenewed,
            "leases/heartbeat moved expiresAt backwards",
        ));
    }

    let fetched = session.call("workspaces/get", json!({"workspaceId": workspace_id}))?;
    let doc = Doc::new("workspaces/get", &fetched);
    if doc.str("workspace.id")? != workspace_id {
        return Err(Failure::new(
            RunnerCode::WorkspaceMismatch,
            "workspaces/get returned a different Workspace",
        ));
    }
    require_cursor("workspaces/get.eventCursor", doc.str("eventCursor")?)?;
    Ok(Outcome::Passed)
}

/// Fails unless `tools/list` advertised every one of `names`: a conforming executable offers
/// the browser tools the suite exercises.
fn require_tools(session: &Session, names: &[&str]) -> Result<(), Failure> {
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !session.has_tool(name))
        .collect();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(Failure::new(
            RunnerCode::ToolNotAdvertised,
            format!("tools/list does not advertise {}", missing.join(", ")),
        )),
    }
}

/// Opens one managed `about:blank` target and finds it in the inventory.
pub fn managed_target(session: &mut Session) -> Result<Outcome, Failure> {
    require_tools(session, &["browser.open", "browser.tabs.list"])?;
    let negotiated = session.negotiated.clone().unwrap_or_default();
    if !negotiated.any_browser_ready {
        let message = match (&negotiated.remediation, negotiated.n_candidates) {
            (Some(remediation), _) => format!(
                "initialize reported no ready browser candidate; remediation: {}",
                remediation_text(remediation)
            ),
            (None, 0) => "initialize reported no browser candidates".to_owned(),
            (None, _) => {
                "initialize reported no ready browser candidate and no remediation".to_owned()
            }
        };
        return Err(Failure::new(RunnerCode::BrowserNotReady, message));
    }
    if session.has_tool("browser.connect") {
        session.call_tool("browser.connect", json!({}), None)?;
    }
    let opened = session.call_tool("browser.open", json!({"url": BLANK_URL}), None)?;
    let doc = Doc::new("browser.open.result", &opened);
    let target_id = doc.id("targetId")?.to_owned();
    session.target_id = Some(target_id.clone());
    doc.str("url")?;

    let listed = session.call_tool("browser.tabs.list", json!({}), None)?;
    let doc = Doc::new("browser.tabs.list.result", &listed);
    let tabs = doc.array("tabs")?;
    let ours = tabs
        .iter()
        .find(|tab| tab.get("targetId").and_then(Value::as_str) == Some(target_id.as_str()));
    match ours.map(|tab| tab.get("managed").and_then(Value::as_bool)) {
        None => Err(Failure::new(
            RunnerCode::TargetNotListed,
            "browser.tabs.list does not contain the target browser.open returned",
        )),
        Some(Some(true)) => Ok(Outcome::Passed),
        Some(_) => Err(Failure::new(
            RunnerCode::TargetNotManaged,
            "browser.tabs.list does not mark the opened target managed: true",
        )),
    }
}

/// One bounded Observation of the managed target.
pub fn observation(session: &mut Session) -> Result<Outcome, Failure> {
    require_tools(session, &["browser.observe"])?;
    let target_id = session.target_id()?;
    let observed = session.call_tool(
        "browser.observe",
        json!({"limit": OBSERVE_LIMIT}),
        Some(target_id),
    )?;
    let doc = Doc::new("browser.observe.result", &observed);
    doc.id("observationId")?;
    let n_elements = doc.array("elements")?.len();
    doc.bool("truncated")?;
    match u64::try_from(n_elements).unwrap_or(u64::MAX) > OBSERVE_LIMIT {
        true => Err(Failure::new(
            RunnerCode::ObservationUnbounded,
            format!("browser.observe returned {n_elements} elements for limit {OBSERVE_LIMIT}"),
        )),
        false => Ok(Outcome::Passed),
    }
}

/// A screenshot Artifact: protected access, release, and no access after.
pub fn screenshot_artifact(session: &mut Session) -> Result<Outcome, Failure> {
    require_tools(session, &["browser.capture"])?;
    let target_id = session.target_id()?;
    let captured = session.call_tool("browser.capture", json!({}), Some(target_id))?;
    let doc = Doc::new("browser.capture.result", &captured);
    let artifact_id = doc.id("artifact.id")?.to_owned();
    session.artifact_id = Some(artifact_id.clone());
    doc.id("artifact.mimeType")?;
    doc.u64("artifact.byteLength")?;

    let params = json!({
        "workspaceId": session.workspace_id()?,
        "leaseId": session.lease_id()?,
        "artifactId": artifact_id,
    });
    let fetched = session.call("artifacts/get", params.clone())?;
    let doc = Doc::new("artifacts/get", &fetched);
    doc.object("artifact")?;
    let byte_length = doc.u64("artifact.byteLength")?;
    check_protected_file(Path::new(doc.str("path")?), byte_length)?;

    session.call("artifacts/release", params.clone())?;
    session.artifact_id = None;
    match session.client.call("artifacts/get", params) {
        Ok(_) => Err(Failure::new(
            RunnerCode::ArtifactStillAvailable,
            "artifacts/get still succeeds after artifacts/release",
        )),
        Err(CallError::Rpc(_)) => Ok(Outcome::Passed),
        Err(error) => Err(Failure::call(
            "artifacts/get after release",
            error,
            session.timeout_ms,
        )),
    }
}

fn check_protected_file(path: &Path, byte_length: u64) -> Result<(), Failure> {
    if !path.is_absolute() {
        return Err(Failure::new(
            RunnerCode::ArtifactPathRelative,
            "artifacts/get path is not absolute",
        ));
    }
    let metadata = std::fs::metadata(path).map_err(|error| {
        Failure::new(
            RunnerCode::ArtifactFileMissing,
            format!("the artifacts/get path cannot be read: {}", error.kind()),
        )
    })?;
    if !metadata.is_file() || metadata.len() == 0 {
        return Err(Failure::new(
            RunnerCode::ArtifactFileEmpty,
            "the artifacts/get path is not a non-empty file",
        ));
    }
    if metadata.len() != byte_length {
        return Err(Failure::new(
            RunnerCode::ArtifactSizeMismatch,
            "the Artifact file size differs from artifact.byteLength",
        ));
    }
    match os::is_owner_only(&metadata) {
        Some(false) => Err(Failure::new(
            RunnerCode::ArtifactUnprotected,
            "the Artifact file is readable or writable by group or others",
        )),
        Some(true) | None => Ok(()),
    }
}

/// Polls the journal from the creation cursor until `hasMore` is false.
pub fn event_polling(session: &mut Session) -> Result<Outcome, Failure> {
    let workspace_id = session.workspace_id()?;
    let mut cursor = session
        .event_cursor
        .clone()
        .ok_or_else(|| Failure::new(RunnerCode::MissingCursor, "no event cursor was recorded"))?;
    let mut position = require_cursor("eventCursor", &cursor)?;
    let mut last_sequence: Option<u64> = None;
    for _ in 0..MAX_EVENT_PAGES {
        let page = session.call(
            "events/poll",
            json!({"workspaceId": workspace_id, "cursor": cursor, "limit": EVENT_PAGE_LIMIT}),
        )?;
        let doc = Doc::new("events/poll", &page);
        let events = doc.array("events")?;
        let has_more = doc.bool("hasMore")?;
        let next_cursor = doc.str("nextCursor")?.to_owned();
        let next_position = require_cursor("events/poll.nextCursor", &next_cursor)?;
        if u64::try_from(events.len()).unwrap_or(u64::MAX) > EVENT_PAGE_LIMIT {
            return Err(Failure::new(
                RunnerCode::EventPageUnbounded,
                format!("events/poll returned more than {EVENT_PAGE_LIMIT} events"),
            ));
        }
        for (index, event) in events.iter().enumerate() {
            let label = format!("events/poll.events[{index}]");
            let event_doc = Doc::new(&label, event);
            let sequence = event_doc.u64("sequence")?;
            event_doc.id("type")?;
            if last_sequence.is_some_and(|last| sequence <= last) {
                return Err(Failure::new(
                    RunnerCode::SequenceNotIncreasing,
                    format!(
                        "event sequence {sequence} does not follow {}",
                        last_sequence.unwrap_or(0)
                    ),
                ));
            }
            last_sequence = Some(sequence);
        }
        if next_position < position {
            return Err(Failure::new(
                RunnerCode::CursorMovedBackwards,
                "events/poll.nextCursor moved backwards",
            ));
        }
        if !has_more {
            return Ok(Outcome::Passed);
        }
        if events.is_empty() {
            return Err(Failure::new(
                RunnerCode::PollNotAdvancing,
                "events/poll said hasMore with no events",
            ));
        }
        cursor = next_cursor;
        position = next_position;
    }
    Err(Failure::new(
        RunnerCode::PollNotAdvancing,
        format!("events/poll still had more after {MAX_EVENT_PAGES} pages"),
    ))
}

/// Releases what the runner created, twice for the Workspace, then shuts the
/// bridge down. Every step runs even after an earlier one failed, unless the
/// bridge is gone; the first failure is reported.
pub fn cleanup(session: &mut Session) -> Result<Outcome, Failure> {
    let mut first_failure: Option<Failure> = None;
    let mut record = |result: Result<Value, Failure>| -> bool {
        match result {
            Ok(_) => true,
            Err(failure) => {
                let fatal = failure.fatal;
                first_failure.get_or_insert(failure);
                !fatal
            }
        }
    };
    let mut alive = true;
    if let Some(target_id) = session.target_id.clone() {
        if session.has_tool("browser.tabs.close") {
            alive = record(session.call_tool("browser.tabs.close", json!({}), Some(target_id)));
        }
        session.target_id = None;
    }
    if let (true, Some(artifact_id)) = (alive, session.artifact_id.take()) {
        let params = json!({
            "workspaceId": session.workspace_id.clone(),
            "leaseId": session.lease_id.clone(),
            "artifactId": artifact_id,
        });
        alive = record(session.call("artifacts/release", params));
    }
    if let (true, Some(lease_id)) = (alive, session.lease_id.take()) {
        let params = json!({"workspaceId": session.workspace_id.clone(), "leaseId": lease_id});
        alive = record(session.call("leases/release", params));
    }
    if let (true, Some(workspace_id)) = (alive, session.workspace_id.take()) {
        let params = json!({"workspaceId": workspace_id});
        alive = record(session.call("workspaces/release", params.clone()));
        if alive {
            alive = record(
                session
                    .call("workspaces/release", params)
                    .map_err(|failure| Failure {
                        message: format!("second call: {}", failure.message),
                        ..failure
                    }),
            );
        }
    }
    if alive {
        alive = record(session.call("shutdown", json!({})));
    }
    session.client.close_stdin();
    if alive {
        match session.client.wait_exit() {
            Ok(status) if status.success() => {}
            Ok(_) => {
                first_failure.get_or_insert(Failure::new(
                    RunnerCode::BridgeExitStatus,
                    "the bridge exited with a failure status after shutdown",
                ));
            }
            Err(error) => {
                first_failure.get_or_insert(Failure {
                    code: RunnerCode::BridgeDidNotExit.as_str().to_owned(),
                    message: error.to_string(),
                    fatal: true,
                });
            }
        }
    }
    match first_failure {
        Some(failure) => Err(failure),
        None => Ok(Outcome::Passed),
    }
}

/// Closes stdin and gives the child up to `grace` to exit on EOF, as a
/// conforming bridge does; whatever still runs afterwards is killed when the
/// session is dropped.
pub fn abandon(session: &mut Session, grace: Duration) {
    session.client.close_stdin();
    if !grace.is_zero() {
        // Ignored: a child that does not exit in time is killed on drop.
        let _ = session.client.wait_exit_within(grace);
    }
}

#[cfg(test)]
mod tests {
    use super::cursor_position;

    #[test]
    fn parses_cursor_positions() {
        assert_eq!(cursor_position("cursor:0"), Some(0));
        assert_eq!(cursor_position("cursor:42"), Some(42));
        assert_eq!(cursor_position("cursor:"), None);
        assert_eq!(cursor_position("cursor:-1"), None);
        assert_eq!(cursor_position("cursor:1a"), None);
        assert_eq!(cursor_position("42"), None);
    }
}
