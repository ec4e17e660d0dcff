//! The browser candidate value: identity, kind (local or remote), the four state axes the
//! contract names, remediation and a remote entry's diagnostics. `to_json` is the only wire
//! form and it never contains a port, a WebSocket path, a filesystem path or a token; the
//! endpoint and the user-data directory stay behind crate-visible getters. This file does
//! no I/O.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::remote::{Diagnostic, RemoteEndpoint};

/// Where the browser runs: found on this machine, or listed in `remote-browsers.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateKind {
    Local,
    Remote,
}

impl CandidateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateKind::Local => "local",
            CandidateKind::Remote => "remote",
        }
    }
}

/// The aggregate state a host branches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateState {
    /// A live debugging endpoint was found; `browser.connect` can try it.
    Ready,
    /// The browser (or the managed profile) needs a setup step first.
    NeedsSetup,
    /// The browser is not running (or cannot be reached) right now.
    Unavailable,
}

/// Whether the browser process behind the profile is running, as far as a
/// passive look can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    Running,
    NotRunning,
    Unknown,
}

/// What the profile's `DevToolsActivePort` says (for the managed profile: its keeper's
/// socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteDebuggingState {
    /// The file names a port that accepts TCP connections (the keeper answers).
    Enabled,
    /// The file exists but its port is closed or the file is malformed
    /// (Chromium never deletes it on exit); the keeper's socket is left but nobody listens.
    Stale,
    /// No file (no keeper socket): remote debugging was never enabled for this profile.
    Disabled,
}

/// Whether Chromium let us connect: the only values `authorizationState` takes. Discovery
/// always reports `Unknown`; a connection attempt makes it `Authorized` (connected) or `Denied`
/// (the browser refused the upgrade), and leaves it `Unknown` when it ended otherwise (an
/// approval prompt still open at the timeout, an endpoint that went away).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationState {
    Unknown,
    Authorized,
    Denied,
}

/// A structured next step for the host or the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remediation {
    /// Stable snake_case action: `start_browser`, `enable_remote_debugging`,
    /// `launch_managed_browser`.
    pub action: String,
    /// Human text; hosts must not parse it.
    pub message: String,
    pub url: Option<String>,
}

/// Where the janitor reaches a live browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A user's browser: `ws://127.0.0.1:<port><path>` from its `DevToolsActivePort`.
    Port { port: u16, path: String },
    /// The managed browser, which has no port: its keeper's owner-only socket.
    Keeper { socket: PathBuf },
    /// A remote browser of `remote-browsers.toml`: its URL and headers with the token.
    Remote(RemoteEndpoint),
}

impl Endpoint {
    /// The janitor's argument: the browser-level WebSocket URL, `keeper:<socket>`, or for a
    /// remote browser `remote:<candidate id>` (the URL and headers travel in the janitor's
    /// environment, `janitor::REMOTE_ENV`, never on its command line).
    pub fn janitor_arg(&self) -> String {
        match self {
            Endpoint::Port { port, path } => format!("ws://127.0.0.1:{port}{path}"),
            Endpoint::Keeper { socket } => {
                format!("{}{}", crate::janitor::KEEPER_SCHEME, socket.display())
            }
            Endpoint::Remote(remote) => {
                format!("{}{}", crate::janitor::REMOTE_SCHEME, remote.browser_id)
            }
        }
    }
}

/// One browser profile the Broker could use.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Stable across runs: `browser:<product>[-<channel>]-<8 hex of sha256
    /// of the canonical user-data dir>`.
    pub id: String,
    /// `chrome`, `chromium`, `edge` or `brave`.
    pub product: String,
    /// `stable`, `beta`, `dev`, `canary` or `managed`.
    pub channel: String,
    /// A display name, never a path.
    pub profile: String,
    pub managed: bool,
    pub kind: CandidateKind,
    pub state: CandidateState,
    pub process_state: ProcessState,
    pub remote_debugging_state: RemoteDebuggingState,
    pub authorization_state: AuthorizationState,
    pub remediation: Option<Remediation>,
    /// What is wrong with a remote entry (empty for local candidates and usable entries).
    pub diagnostics: Vec<Diagnostic>,
    pub(super) endpoint: Option<Endpoint>,
    pub(super) user_data_dir: PathBuf,
    /// A `[[pool]]` candidate's entries (their candidate ids, in the pool's order); empty for
    /// every other candidate.
    pub(super) pool: Vec<String>,
}

impl Candidate {
    /// The entries of a `[[pool]]` candidate (empty for any other).
    pub(crate) fn pool_members(&self) -> &[String] {
        &self.pool
    }

    /// A usable remote entry's endpoint (and its sessions mode and capacity).
    pub(crate) fn remote_endpoint(&self) -> Option<&RemoteEndpoint> {
        match &self.endpoint {
            Some(Endpoint::Remote(remote)) => Some(remote),
            _ => None,
        }
    }

    /// The live endpoint, when `remote_debugging_state` is `Enabled`.
    /// Crate-internal: never serialized.
    pub(crate) fn endpoint(&self) -> Option<&Endpoint> {
        self.endpoint.as_ref()
    }

    /// The wire form (camelCase): identity, states and remediation only.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("id".into(), json!(self.id));
        object.insert("product".into(), json!(self.product));
        object.insert("channel".into(), json!(self.channel));
        object.insert("profile".into(), json!(self.profile));
        object.insert("managed".into(), json!(self.managed));
        object.insert("kind".into(), json!(self.kind.as_str()));
        object.insert("state".into(), json!(self.state.as_str()));
        object.insert("processState".into(), json!(self.process_state.as_str()));
        object.insert(
            "remoteDebuggingState".into(),
            json!(self.remote_debugging_state.as_str()),
        );
        object.insert(
            "authorizationState".into(),
            json!(self.authorization_state.as_str()),
        );
        if let Some(remediation) = &self.remediation {
            let mut value = json!({
                "action": remediation.action,
                "message": remediation.message,
            });
            if let Some(url) = &remediation.url {
                value["url"] = json!(url);
            }
            object.insert("remediation".into(), value);
        }
        if !self.diagnostics.is_empty() {
            let diagnostics = self.diagnostics.iter().map(Diagnostic::to_json).collect();
            object.insert("diagnostics".into(), Value::Array(diagnostics));
        }
        Value::Object(object)
    }
}

impl CandidateState {
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateState::Ready => "ready",
            CandidateState::NeedsSetup => "needs_setup",
            CandidateState::Unavailable => "unavailable",
        }
    }
}

impl ProcessState {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessState::Running => "running",
            ProcessState::NotRunning => "not_running",
            ProcessState::Unknown => "unknown",
        }
    }
}

impl RemoteDebuggingState {
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteDebuggingState::Enabled => "enabled",
            RemoteDebuggingState::Stale => "stale",
            RemoteDebuggingState::Disabled => "disabled",
        }
    }
}

impl AuthorizationState {
    /// Every value, in the order the schema lists them.
    pub const ALL: [AuthorizationState; 3] = [
        AuthorizationState::Unknown,
        AuthorizationState::Authorized,
        AuthorizationState::Denied,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuthorizationState::Unknown => "unknown",
            AuthorizationState::Authorized => "authorized",
            AuthorizationState::Denied => "denied",
        }
    }
}
