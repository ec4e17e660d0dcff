//! The Fetch controller: network rules and HTTP auth credentials of each Workspace
//! (`NetControl`, in Broker memory only, ended with the Workspace, never persisted), the one
//! `Fetch.enable` pattern set of each controlled session (`FetchBook`, beside the tab's
//! `NetworkBook`), and the answer to every paused request and auth challenge. A fresh managed
//! popup's sessions also pause `Document` responses until its first one, which
//! `session::downloads` captures when it is an attachment.
//!
//! Chromium keeps one pattern set per session and a second `Fetch.enable` replaces the first
//! (docs/cdp.md, "fetch patterns"), so rules and auth never enable Fetch on their own: this module derives the
//! session's one mode (`FetchMode`) from the rules and credentials of the Workspaces that
//! manage or control the tab, and re-applies it when they change. Every `Fetch.requestPaused`
//! and `Fetch.authRequired` the pump hands over gets exactly one answer, decided from the rules
//! as they are at that moment: a rule removed, a Lease released or a page closed never leaves
//! a request paused (a request of a tab nobody controls any more is continued unchanged). A
//! rejected credential is cancelled on the second challenge for the same request instead of
//! letting Chromium loop. Passwords live only here and in the one `Fetch.continueWithAuth`
//! they are sent in: no `Debug` output, result, event or log line carries one.
//!
//! The URL policy's WebSocket part is here too: a handshake is paused by no Fetch pattern, so
//! the policies of the Workspaces that manage or control a tab become URLPattern network
//! conditions (`url_policy::SocketRules`, `Network.emulateNetworkConditionsByRule`) on every
//! session of the tab, set with its Fetch mode before the session runs. Chromium keeps one
//! conditions list per session, which `browser.emulate`'s offline and throttle share: the list
//! sent always ends with the tab's emulated conditions, and the emulate tool hands a session
//! with socket rules back here (`reassert_conditions`).
//!
//! A storage-state load writes `localStorage` through a scratch page of the origin; its one
//! navigation is answered here with an empty document (`NetControl::add_seed`), so the origin's
//! server never sees it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};

use super::background::Conditions;
use super::registry::Registry;
use super::service::{BrowserService, Live};
use super::tab::TabHandle;
use super::url_policy::{Blocked, EVERY_SOCKET, SocketRules, UrlPolicy};
use crate::cdp::fetch::{
    AuthChallengeResponse, AuthRequired, ContinueRequest, ContinueWithAuth, Disable, Enable,
    FailRequest, FulfillRequest, HeaderEntry, RequestPattern, RequestPaused,
};
use crate::cdp::network::{
    EmulateNetworkConditions, EmulateNetworkConditionsByRule, NetworkConditions,
};
use crate::cdp::{CdpClient, CdpError, Command, SessionId, TargetId};
use crate::store::WorkspaceId;

/// Rules per Workspace: each paused request is matched against all of them.
pub const MAX_RULES_PER_WORKSPACE: usize = 64;

/// Longest URL pattern, in characters.
pub const MAX_PATTERN_CHARS: usize = 1024;

/// Largest mock body, in bytes (before base64).
pub const MAX_MOCK_BODY_BYTES: usize = 1024 * 1024;

/// Headers one rule may set (request headers, or a mock's response headers).
pub const MAX_RULE_HEADERS: usize = 32;

/// Longest header name / value a rule may set, in characters.
pub const MAX_RULE_HEADER_NAME_CHARS: usize = 256;
pub const MAX_RULE_HEADER_VALUE_CHARS: usize = 8192;

/// Origins with credentials per Workspace.
pub const MAX_AUTH_ORIGINS: usize = 32;

/// Auth challenges remembered per tab to recognise the second one for a request.
const MAX_AUTH_ATTEMPTS: usize = 256;

/// Sessions whose applied mode a tab remembers (its own, its OOPIFs', re-attached ones).
const MAX_FETCH_SESSIONS: usize = 512;

/// `<!doctype html><link rel=icon href="data:,">` in base64: a scratch page's document.
const SEED_DOCUMENT_BASE64: &str = "PCFkb2N0eXBlIGh0bWw+PGxpbmsgcmVsPWljb24gaHJlZj0iZGF0YTosIj4=";

/// How long one answer or `Fetch.enable` may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// What a rule does to a request that matches it.
#[derive(Clone, PartialEq, Eq)]
pub enum RuleAction {
    /// Fail it as blocked by the client.
    Block,
    /// Answer it without the network.
    Mock {
        status: u16,
        headers: Vec<(String, String)>,
        /// Base64 of the body (CDP's form).
        body_base64: String,
        body_bytes: usize,
    },
    /// Send it with these headers added or overriding the originals (case-insensitive names).
    Headers { set: Vec<(String, String)> },
}

impl RuleAction {
    pub fn kind(&self) -> &'static str {
        match self {
            RuleAction::Block => "block",
            RuleAction::Mock { .. } => "mock",
            RuleAction::Headers { .. } => "headers",
        }
    }
}

/// One rule of a Workspace.
#[derive(Clone)]
pub struct Rule {
    /// Opaque `rule:` id.
    pub id: String,
    /// A glob over the whole URL: `*` any run of characters, `?` one character.
    pub pattern: String,
    pub action: RuleAction,
    pub created_at: i64,
}

/// Credentials for one origin. Never printed.
#[derive(Clone)]
pub struct Credential {
    pub origin: String,
    pub username: String,
    password: String,
}

impl Credential {
    pub fn new(origin: String, username: String, password: String) -> Credential {
        Credential {
            origin,
            username,
            password,
        }
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// A Workspace at its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlLimit {
    Rules,
    AuthOrigins,
}

#[derive(Default)]
struct WorkspaceNet {
    rules: Vec<Rule>,
    credentials: Vec<Credential>,
    /// The Workspace's `urlPolicy`, set at its creation and kept for its lifetime.
    policy: Option<UrlPolicy>,
}

/// Rules and credentials of every Workspace.
#[derive(Default)]
pub struct NetControl {
    workspaces: Mutex<HashMap<String, WorkspaceNet>>,
    /// Unguessable path words of the URLs a storage-state load navigates a scratch page to: a
    /// paused request whose URL holds one is answered with an empty document, never sent
    /// (`tools::storage`).
    seeds: Mutex<std::collections::HashSet<String>>,
}

/// The one Fetch pattern set of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FetchMode {
    /// Fetch disabled: nothing pauses.
    #[default]
    Off,
    /// Every request pauses at the request stage; `auth`: challenges come to the Broker.
    Intercept { auth: bool },
}

/// What a paused request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Continue {
        headers: Option<Vec<HeaderEntry>>,
    },
    Block,
    Fulfill {
        status: u16,
        headers: Vec<HeaderEntry>,
        body_base64: String,
    },
}

impl NetControl {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, WorkspaceNet>) -> T) -> T {
        f(&mut self.workspaces.lock().expect("net control lock"))
    }

    pub fn add_rule(&self, workspace_id: &str, rule: Rule) -> Result<(), ControlLimit> {
        self.with(|all| {
            let net = all.entry(workspace_id.to_owned()).or_default();
            if net.rules.len() >= MAX_RULES_PER_WORKSPACE {
                return Err(ControlLimit::Rules);
            }
            net.rules.push(rule);
            Ok(())
        })
    }

    pub fn rules(&self, workspace_id: &str) -> Vec<Rule> {
        self.with(|all| {
            all.get(workspace_id)
                .map(|n| n.rules.clone())
                .unwrap_or_default()
        })
    }

    /// True when the rule existed.
    pub fn remove_rule(&self, workspace_id: &WorkspaceId, rule_id: &str) -> bool {
        self.with(|all| {
            let Some(net) = all.get_mut(workspace_id.as_str()) else {
                return false;
            };
            let before = net.rules.len();
            net.rules.retain(|r| r.id != rule_id);
            before != net.rules.len()
        })
    }

    /// Sets (or replaces) the credential of its origin; true when one was replaced.
    pub fn set_credential(
        &self,
        workspace_id: &str,
        credential: Credential,
    ) -> Result<bool, ControlLimit> {
        self.with(|all| {
            let net = all.entry(workspace_id.to_owned()).or_default();
            if let Some(existing) = net
                .credentials
                .iter_mut()
                .find(|c| c.origin == credential.origin)
            {
                *existing = credential;
                return Ok(true);
            }
            if net.credentials.len() >= MAX_AUTH_ORIGINS {
                return Err(ControlLimit::AuthOrigins);
            }
            net.credentials.push(credential);
            Ok(false)
        })
    }

    /// Forgets the credential of one origin (or all); how many were forgotten.
    pub fn clear_credentials(&self, workspace_id: &str, origin: Option<&str>) -> usize {
        self.with(|all| {
            let Some(net) = all.get_mut(workspace_id) else {
                return 0;
            };
            let before = net.credentials.len();
            net.credentials
                .retain(|c| origin.is_some_and(|origin| c.origin != origin));
            before - net.credentials.len()
        })
    }

    /// Answers paused requests whose URL holds `token` (an unguessable word) with an empty
    /// document until `forget_seed`.
    pub fn add_seed(&self, token: &str) {
        (self.seeds.lock().expect("seeds lock")).insert(token.to_owned());
    }

    pub fn forget_seed(&self, token: &str) {
        (self.seeds.lock().expect("seeds lock")).remove(token);
    }

    fn is_seed(&self, url: &str) -> bool {
        let seeds = self.seeds.lock().expect("seeds lock");
        seeds.iter().any(|token| url.contains(token.as_str()))
    }

    /// The Workspace ended: its rules, credentials and URL policy go with it.
    pub fn forget_workspace(&self, workspace_id: &str) {
        self.with(|all| all.remove(workspace_id));
    }

    /// Holds the Workspace's requests to `policy` (at its creation; the same policy again for a
    /// repeated `clientKey`).
    pub fn set_policy(&self, workspace_id: &str, policy: UrlPolicy) {
        self.with(|all| all.entry(workspace_id.to_owned()).or_default().policy = Some(policy));
    }

    /// The Workspace's URL policy, if it has one.
    pub fn policy(&self, workspace_id: &str) -> Option<UrlPolicy> {
        self.with(|all| all.get(workspace_id).and_then(|n| n.policy.clone()))
    }

    /// Why the URL policy of one of these Workspaces refuses `url`, if one does.
    pub fn policy_refusal(&self, workspaces: &[String], url: &str) -> Option<Blocked> {
        self.with(|all| {
            workspaces
                .iter()
                .filter_map(|w| all.get(w)?.policy.as_ref())
                .find_map(|policy| policy.decide(url).err())
        })
    }

    /// The WebSocket rules of these Workspaces' URL policies (empty when none has one).
    pub fn socket_rules(&self, workspaces: &[String]) -> SocketRules {
        self.with(|all| {
            let policies: Vec<&UrlPolicy> = workspaces
                .iter()
                .filter_map(|w| all.get(w)?.policy.as_ref())
                .collect();
            SocketRules::of(&policies)
        })
    }

    /// The mode a session of a tab these Workspaces manage or control needs.
    pub fn wanted(&self, workspaces: &[String]) -> FetchMode {
        self.with(|all| {
            let nets: Vec<&WorkspaceNet> = workspaces.iter().filter_map(|w| all.get(w)).collect();
            let rules = nets
                .iter()
                .any(|n| !n.rules.is_empty() || n.policy.is_some());
            let auth = nets.iter().any(|n| !n.credentials.is_empty());
            match (rules, auth) {
                (false, false) => FetchMode::Off,
                _ => FetchMode::Intercept { auth },
            }
        })
    }

    /// The answer for a paused request: blocked when a Workspace's URL policy refuses it; else
    /// the first block or mock rule that matches wins; otherwise every matching header rule
    /// applies, merged over the original headers.
    pub fn plan(&self, workspaces: &[String], url: &str, headers: &Map<String, Value>) -> Answer {
        if self.policy_refusal(workspaces, url).is_some() {
            return Answer::Block;
        }
        let rules: Vec<Rule> = self.with(|all| {
            workspaces
                .iter()
                .filter_map(|w| all.get(w))
                .flat_map(|n| n.rules.iter().cloned())
                .collect()
        });
        plan(&rules, url, headers)
    }

    fn credential_for(&self, workspaces: &[String], origin: &str) -> Option<Credential> {
        self.with(|all| {
            workspaces
                .iter()
                .filter_map(|w| all.get(w))
                .flat_map(|n| n.credentials.iter())
                .find(|c| c.origin == origin)
                .cloned()
        })
    }
}

fn plan(rules: &[Rule], url: &str, headers: &Map<String, Value>) -> Answer {
    let mut set: Vec<(String, String)> = Vec::new();
    for rule in rules.iter().filter(|r| glob_matches(&r.pattern, url)) {
        match &rule.action {
            RuleAction::Block => return Answer::Block,
            RuleAction::Mock {
                status,
                headers,
                body_base64,
                ..
            } => {
                return Answer::Fulfill {
                    status: *status,
                    headers: entries(headers),
                    body_base64: body_base64.clone(),
                };
            }
            RuleAction::Headers { set: more } => set.extend(more.iter().cloned()),
        }
    }
    if set.is_empty() {
        return Answer::Continue { headers: None };
    }
    Answer::Continue {
        headers: Some(merge_headers(headers, &set)),
    }
}

fn entries(headers: &[(String, String)]) -> Vec<HeaderEntry> {
    headers
        .iter()
        .map(|(name, value)| HeaderEntry {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

/// The original request headers with `set` added, each replacing any header of the same name
/// (ASCII case-insensitive). `Fetch.continueRequest` replaces the whole header list, so the
/// originals must be repeated (docs/cdp.md, "fetch patterns").
pub fn merge_headers(original: &Map<String, Value>, set: &[(String, String)]) -> Vec<HeaderEntry> {
    let mut merged: Vec<HeaderEntry> = original
        .iter()
        .filter(|(name, _)| !set.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)))
        .map(|(name, value)| HeaderEntry {
            name: name.clone(),
            value: match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            },
        })
        .collect();
    let mut seen: Vec<&str> = Vec::new();
    for (name, value) in set.iter().rev() {
        if seen.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            continue;
        }
        seen.push(name);
        merged.push(HeaderEntry {
            name: name.clone(),
            value: value.clone(),
        });
    }
    merged
}

/// Whether `url` matches the glob `pattern` as a whole: `*` is any run of characters
/// (also empty), `?` exactly one; everything else is literal.
pub fn glob_matches(pattern: &str, url: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = url.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(c) if *c == '?' || *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// Why a URL pattern is refused, if it is.
pub fn check_pattern(pattern: &str) -> Result<(), &'static str> {
    if pattern.is_empty() {
        return Err("the pattern is empty");
    }
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err("the pattern is longer than 1024 characters");
    }
    if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the pattern contains whitespace or a control character");
    }
    if pattern.contains('\\') {
        return Err("the pattern contains a backslash (only * and ? are special)");
    }
    Ok(())
}

/// Why a header name or value a rule sets is refused, if it is.
pub fn check_header(name: &str, value: &str) -> Result<(), &'static str> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err("the header name is not an HTTP token");
    }
    if name.chars().count() > MAX_RULE_HEADER_NAME_CHARS {
        return Err("the header name is too long");
    }
    if value.chars().count() > MAX_RULE_HEADER_VALUE_CHARS {
        return Err("the header value is too long");
    }
    if value.chars().any(|c| c == '\r' || c == '\n' || c == '\0') {
        return Err("the header value contains a line break or NUL");
    }
    Ok(())
}

/// Interception state of one tab's sessions.
#[derive(Default)]
pub struct FetchBook {
    /// What this tab's sessions should have, as last derived.
    wanted: FetchMode,
    /// A fresh managed popup whose first document response is still to come (or being
    /// answered): its sessions also pause `Document` responses, so one that is an attachment is
    /// captured by the Broker instead of downloaded by the browser
    /// (`session::downloads::on_first_document`).
    first_document: FirstDocument,
    /// A controlled tab of a remote browser: its sessions pause every `Document` response, so
    /// one the browser would download is streamed to the Broker instead of landing on the far
    /// machine (`session::downloads::remote_download`).
    pub(super) remote_downloads: bool,
    /// What each known session was last told.
    applied: HashMap<SessionId, Patterns>,
    /// Auth challenges already answered with credentials: (session, Fetch request id).
    auth_attempts: VecDeque<(SessionId, String)>,
    /// The URL policies' WebSocket rules this tab's sessions should have, as last derived.
    sockets: SocketRules,
    /// The conditions list each session was last given here (absent: none, the session's
    /// conditions are `browser.emulate`'s alone).
    conditions: HashMap<SessionId, Vec<NetworkConditions>>,
}

impl FetchBook {
    /// Records a challenge; true when it is the second for the same request.
    fn challenge_repeated(&mut self, session: &SessionId, request_id: &str) -> bool {
        let key = (session.clone(), request_id.to_owned());
        if self.auth_attempts.contains(&key) {
            return true;
        }
        if self.auth_attempts.len() >= MAX_AUTH_ATTEMPTS {
            self.auth_attempts.pop_front();
        }
        self.auth_attempts.push_back(key);
        false
    }
}

/// Where a popup's first document response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum FirstDocument {
    /// Not watched (any tab but a fresh managed popup, or already answered).
    #[default]
    Off,
    /// The next `Document` response is the one.
    Watching,
    /// It came and is being answered: the pattern set stays as it is until the answer went
    /// (changing it while a body is read is undefined in CDP).
    Answering,
}

/// The one pattern set of a session: the rules' mode, and the popup's first document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Patterns {
    mode: FetchMode,
    first_document: bool,
}

impl FetchBook {
    fn wanted_patterns(&self) -> Patterns {
        Patterns {
            mode: self.wanted,
            first_document: self.first_document != FirstDocument::Off || self.remote_downloads,
        }
    }
}

fn enable_command(wanted: Patterns) -> Option<Enable> {
    let mut patterns = Vec::new();
    let mut auth = false;
    if let FetchMode::Intercept { auth: with_auth } = wanted.mode {
        patterns.push(RequestPattern {
            url_pattern: "*".to_owned(),
            request_stage: "Request",
            resource_type: None,
        });
        auth = with_auth;
    }
    if wanted.first_document {
        patterns.push(RequestPattern {
            url_pattern: "*".to_owned(),
            request_stage: "Response",
            resource_type: Some("Document"),
        });
    }
    match patterns.is_empty() {
        true => None,
        false => Some(Enable {
            patterns,
            handle_auth_requests: auth,
        }),
    }
}

async fn apply(client: &CdpClient, session: &SessionId, mode: Patterns) -> Result<(), CdpError> {
    match enable_command(mode) {
        Some(enable) => client
            .execute(session, &enable, ANSWER_TIMEOUT)
            .await
            .map(drop),
        None => client
            .execute(session, &Disable {}, ANSWER_TIMEOUT)
            .await
            .map(drop),
    }
}

/// The conditions list of a session: the sockets `rules` refuse or admit, then every other
/// request under `emulated` (`browser.emulate`'s conditions of the session). Empty when there
/// are no rules: the session is then `browser.emulate`'s alone.
fn conditions_list(rules: &SocketRules, emulated: Conditions) -> Vec<NetworkConditions> {
    if rules.is_empty() {
        return Vec::new();
    }
    let entry = |url_pattern: &str, offline: bool| NetworkConditions {
        url_pattern: url_pattern.to_owned(),
        offline,
        latency: emulated.latency_ms,
        download_throughput: emulated.download.unwrap_or(-1.0),
        upload_throughput: emulated.upload.unwrap_or(-1.0),
    };
    let mut list: Vec<NetworkConditions> = rules.refuse.iter().map(|p| entry(p, true)).collect();
    list.extend(rules.admit.iter().map(|p| entry(p, emulated.offline)));
    if rules.refuse_rest {
        list.extend(EVERY_SOCKET.iter().map(|p| entry(p, true)));
    }
    if emulated != Conditions::default() {
        list.push(entry("", emulated.offline));
    }
    list
}

/// What `browser.emulate` set on `session` of the tab (the browser's own network if nothing).
fn emulated_on(handle: &TabHandle, session: &SessionId) -> Conditions {
    let books = handle.books();
    books
        .emulation
        .as_ref()
        .filter(|e| e.session == *session)
        .map(|e| e.network)
        .unwrap_or_default()
}

/// Gives `session` the conditions list `list`; an empty one puts back `emulated` alone (a
/// `Network.emulateNetworkConditions`, which replaces the rules).
async fn send_conditions(
    client: &CdpClient,
    session: &SessionId,
    list: Vec<NetworkConditions>,
    emulated: Conditions,
) -> Result<(), CdpError> {
    if list.is_empty() {
        let plain = EmulateNetworkConditions {
            offline: emulated.offline,
            latency: emulated.latency_ms,
            download_throughput: emulated.download.unwrap_or(-1.0),
            upload_throughput: emulated.upload.unwrap_or(-1.0),
        };
        return client
            .execute(session, &plain, ANSWER_TIMEOUT)
            .await
            .map(drop);
    }
    let command = EmulateNetworkConditionsByRule {
        matched_network_conditions: list,
    };
    client
        .execute(session, &command, ANSWER_TIMEOUT)
        .await
        .map(drop)
}

/// Brings `session`'s conditions list in line with the tab's socket rules and its emulated
/// conditions, when it differs from what the session was last given (`fresh`: a session never
/// given one, which gets nothing when there are no rules).
async fn sync_conditions(client: &CdpClient, session: &SessionId, handle: &TabHandle) {
    let emulated = emulated_on(handle, session);
    let list = {
        let mut book = handle.network();
        let fetch = &mut book.fetch;
        let list = conditions_list(&fetch.sockets, emulated);
        let before = fetch.conditions.get(session);
        if before.map_or(list.is_empty(), |before| *before == list) {
            return;
        }
        match list.is_empty() {
            true => fetch.conditions.remove(session),
            false => fetch.conditions.insert(session.clone(), list.clone()),
        };
        list
    };
    match send_conditions(client, session, list, emulated).await {
        Ok(()) => {}
        Err(CdpError::SessionClosed { .. }) => {
            handle.network().fetch.conditions.remove(session);
        }
        Err(error) => tracing::warn!(%error, "setting the URL policy's socket rules failed"),
    }
}

/// Whether `session` of the tab carries the URL policy's socket rules: `browser.emulate` then
/// leaves its network conditions to [`reassert_conditions`] (a plain
/// `Network.emulateNetworkConditions` would drop the rules).
pub fn holds_socket_rules(handle: &TabHandle, session: &SessionId) -> bool {
    handle.network().fetch.conditions.contains_key(session)
}

/// `browser.emulate` recorded new network conditions for `session`: the session gets the
/// socket rules followed by them, in one list.
pub async fn reassert_conditions(client: &CdpClient, handle: &TabHandle, session: &SessionId) {
    handle.network().fetch.conditions.remove(session);
    sync_conditions(client, session, handle).await;
}

/// A fresh session of the tab (its own, or an OOPIF's): it gets the tab's current mode and
/// socket rules before it is resumed or navigated. A session already told (a popup's, before
/// it ran) is left alone: `refresh_tab` carries every later change to it.
pub(super) async fn on_session(client: &CdpClient, session: &SessionId, handle: &TabHandle) {
    let known = handle.network().fetch.conditions.contains_key(session);
    if !known {
        sync_conditions(client, session, handle).await;
    }
    let mode = {
        let mut book = handle.network();
        let fetch = &mut book.fetch;
        let wanted = fetch.wanted_patterns();
        if fetch.applied.contains_key(session) {
            return;
        }
        if fetch.applied.len() >= MAX_FETCH_SESSIONS {
            fetch.applied.clear();
        }
        fetch.applied.insert(session.clone(), wanted);
        wanted
    };
    if mode == Patterns::default() {
        return;
    }
    if let Err(error) = apply(client, session, mode).await {
        tracing::warn!(%error, "enabling request interception on a session failed");
    }
}

/// Derives the tab's mode from the Workspaces that manage or control it now and tells every
/// known session of the tab whose mode changes, returning once they answered. Call after
/// rules, credentials or control change.
pub(super) async fn refresh_tab(live: &Live, net: &NetControl, target: &TargetId) {
    let (workspaces, handle) = live.with_tabs(|tabs| {
        let registry = &mut tabs.registry;
        let workspaces: Vec<String> = registry
            .interested_workspaces(target)
            .into_iter()
            .map(|(w, _)| w)
            .collect();
        (workspaces, registry.handle(target))
    });
    let Some(handle) = handle else { return };
    let mode = net.wanted(&workspaces);
    let sockets = net.socket_rules(&workspaces);
    let (changed, wanted, sessions): (Vec<SessionId>, Patterns, Vec<SessionId>) = {
        let mut book = handle.network();
        let fetch = &mut book.fetch;
        fetch.wanted = mode;
        fetch.sockets = sockets;
        let sessions = fetch
            .applied
            .keys()
            .chain(fetch.conditions.keys())
            .cloned()
            .collect::<std::collections::HashSet<_>>()
            .into_iter()
            .collect();
        let wanted = fetch.wanted_patterns();
        let changed = fetch
            .applied
            .iter_mut()
            .filter(|(_, applied)| **applied != wanted)
            .map(|(session, applied)| {
                *applied = wanted;
                session.clone()
            })
            .collect();
        (changed, wanted, sessions)
    };
    // Socket rules first: a tab gaining a policy has its sockets held before anything else.
    for session in &sessions {
        sync_conditions(&live.client, session, &handle).await;
    }
    for session in changed {
        match apply(&live.client, &session, wanted).await {
            Ok(()) => {}
            Err(CdpError::SessionClosed { .. }) => {
                handle.network().fetch.applied.remove(&session);
            }
            Err(error) => tracing::debug!(%error, "changing request interception failed"),
        }
    }
}

/// A managed popup paused at its start: its session pauses `Document` responses (with the
/// rules' patterns) until its first one came, set before it runs (`Fetch.enable` is answered
/// while a popup is paused, `noopener` ones included; docs/cdp.md).
pub(super) async fn watch_first_document(
    client: &CdpClient,
    session: &SessionId,
    handle: &TabHandle,
) {
    watch_first_document_of(handle);
    on_session(client, session, handle).await;
}

/// Marks the tab as a fresh popup whose first document response is to be paused.
pub(super) fn watch_first_document_of(handle: &TabHandle) {
    handle.network().fetch.first_document = FirstDocument::Watching;
}

/// Whether `paused` is the first document response of a watched popup (then being answered:
/// the caller answers it, then calls `first_document_answered`).
pub(super) fn first_document(
    registry: &Registry,
    tab: Option<&TargetId>,
    paused: &RequestPaused,
) -> bool {
    // A redirect is not the document yet: it is let through, and the pause after it is.
    let redirect = matches!(paused.response_status_code, Some(300..=399));
    if paused.response_status_code.is_none() || redirect || paused.resource_type != "Document" {
        return false;
    }
    let Some(handle) = tab.and_then(|tab| registry.handle(tab)) else {
        return false;
    };
    let mut book = handle.network();
    let watching = book.fetch.first_document == FirstDocument::Watching;
    if watching {
        book.fetch.first_document = FirstDocument::Answering;
    }
    watching
}

/// The popup's first document response was answered: its sessions stop pausing documents.
pub(super) async fn first_document_answered(live: &Live, net: &NetControl, target: &TargetId) {
    let handle = live.with_tabs(|tabs| tabs.registry.handle(target));
    if let Some(handle) = handle {
        handle.network().fetch.first_document = FirstDocument::Off;
    }
    refresh_tab(live, net, target).await;
}

/// `refresh_tab` for every tab (a Workspace's rules or credentials changed, or it ended).
pub async fn refresh_all(service: &BrowserService) {
    for live in service.lives() {
        let targets = live.with_tabs(|tabs| tabs.registry.targets());
        for target in targets {
            refresh_tab(&live, service.net(), &target).await;
        }
    }
}

fn interested(registry: &mut Registry, tab: Option<&TargetId>) -> (Vec<String>, Option<TabHandle>) {
    let Some(tab) = tab else {
        return (Vec::new(), None);
    };
    let workspaces = registry
        .interested_workspaces(tab)
        .into_iter()
        .map(|(w, _)| w)
        .collect();
    (workspaces, registry.handle(tab))
}

/// The one answer to a paused request or an auth challenge (`pump::Effect::Fetch`).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Continue(ContinueRequest),
    Fail(FailRequest),
    Fulfill(FulfillRequest),
    Auth(ContinueWithAuth),
}

/// Sends a reply on its session without waiting for the browser's answer.
pub(super) fn send_reply(client: &CdpClient, session: SessionId, reply: Reply) {
    match reply {
        Reply::Continue(command) => send(client, session, command),
        Reply::Fail(command) => send(client, session, command),
        Reply::Fulfill(command) => send(client, session, command),
        Reply::Auth(command) => send(client, session, command),
    }
}

fn send<C: Command + Send + Sync + 'static>(client: &CdpClient, session: SessionId, command: C) {
    let client = client.clone();
    tokio::spawn(async move {
        if let Err(error) = client.execute(&session, &command, ANSWER_TIMEOUT).await {
            tracing::debug!(%error, method = C::METHOD, "answering a paused request failed");
        }
    });
}

/// `Fetch.requestPaused` on a session of `tab` (`None`: a session the pump does not know):
/// exactly one answer, from the rules of the Workspaces interested in the tab now.
pub(super) fn on_paused(
    registry: &mut Registry,
    net: &NetControl,
    tab: Option<&TargetId>,
    paused: RequestPaused,
) -> Reply {
    let request_id = paused.request_id;
    if paused.response_status_code.is_none() && net.is_seed(&paused.request.url) {
        // A storage-state load's scratch page: the origin's document without the network, with
        // an icon of its own so that no `/favicon.ico` request follows (the Fetch domain does
        // not see that one).
        return Reply::Fulfill(FulfillRequest {
            request_id,
            response_code: 200,
            response_headers: vec![HeaderEntry {
                name: "Content-Type".to_owned(),
                value: "text/html".to_owned(),
            }],
            body: SEED_DOCUMENT_BASE64.to_owned(),
        });
    }
    if paused.response_status_code.is_some() {
        // A response-stage pause that is no popup's first document: let it through.
        return Reply::Continue(ContinueRequest {
            request_id,
            headers: None,
        });
    }
    let (workspaces, _) = interested(registry, tab);
    let answer = match workspaces.is_empty() {
        true => Answer::Continue { headers: None },
        false => net.plan(&workspaces, &paused.request.url, &paused.request.headers),
    };
    match answer {
        Answer::Continue { headers } => Reply::Continue(ContinueRequest {
            request_id,
            headers,
        }),
        Answer::Block => Reply::Fail(FailRequest {
            request_id,
            error_reason: "BlockedByClient",
        }),
        Answer::Fulfill {
            status,
            headers,
            body_base64,
        } => Reply::Fulfill(FulfillRequest {
            request_id,
            response_code: status,
            response_headers: headers,
            body: body_base64,
        }),
    }
}

/// `Fetch.authRequired`: the Workspace's credential for the challenge's origin on the first
/// challenge of a request, `CancelAuth` on the second (the credential was rejected), and
/// Chromium's default handling when no Workspace has a credential for the origin.
pub(super) fn on_auth(
    registry: &mut Registry,
    net: &NetControl,
    tab: Option<&TargetId>,
    session: &SessionId,
    required: AuthRequired,
) -> Reply {
    let (workspaces, handle) = interested(registry, tab);
    let challenge = &required.auth_challenge;
    let credential = match challenge.source.as_deref() {
        Some("Proxy") => None,
        _ => net.credential_for(&workspaces, &challenge.origin),
    };
    let response = match (credential, handle) {
        (Some(credential), Some(handle)) => {
            let repeated = handle
                .network()
                .fetch
                .challenge_repeated(session, &required.request_id);
            match repeated {
                true => AuthChallengeResponse {
                    response: "CancelAuth",
                    username: None,
                    password: None,
                },
                false => AuthChallengeResponse {
                    response: "ProvideCredentials",
                    username: Some(credential.username),
                    password: Some(credential.password),
                },
            }
        }
        _ => AuthChallengeResponse {
            response: "Default",
            username: None,
            password: None,
        },
    };
    Reply::Auth(ContinueWithAuth {
        request_id: required.request_id,
        auth_challenge_response: response,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(pattern: &str, action: RuleAction) -> Rule {
        Rule {
            id: format!("rule:{pattern}"),
            pattern: pattern.into(),
            action,
            created_at: 0,
        }
    }

    #[test]
    fn globs_match_whole_urls() {
        let check = |pattern: &str, url: &str, expect: bool| {
            assert_eq!(glob_matches(pattern, url), expect, "{pattern} ~ {url}");
        };
        check("*", "http://a/", true);
        check("*/api/*", "http://a/api/x?y=1", true);
        check("*/api/*", "http://a/apix", false);
        check("http://a/?", "http://a/b", true);
        check("http://a/?", "http://a/bc", false);
        check("*.png", "http://a/b.png", true);
        check("*.png", "http://a/b.png?x", false);
        check("http://a/*/c*", "http://a/b/x/c/d", true);
        check("", "", true);
        assert!(check_pattern("*/api/*").is_ok());
        assert!(check_pattern("").is_err());
        assert!(check_pattern("a b").is_err());
        assert!(check_pattern(&"x".repeat(MAX_PATTERN_CHARS + 1)).is_err());
        assert!(check_header("X-Test", "1").is_ok());
        assert!(check_header("X Test", "1").is_err());
        assert!(check_header("X-Test", "a\r\nb").is_err());
    }

    #[test]
    fn block_and_mock_win_header_rules_merge() {
        let mut original = Map::new();
        original.insert("Accept".into(), json!("*/*"));
        original.insert("X-Keep".into(), json!("1"));
        let headers = rule(
            "*/api/*",
            RuleAction::Headers {
                set: vec![
                    ("accept".into(), "application/json".into()),
                    ("X-Added".into(), "yes".into()),
                ],
            },
        );
        let block = rule("*.png", RuleAction::Block);
        let rules = vec![headers.clone(), block];
        assert_eq!(plan(&rules, "http://a/x.png", &original), Answer::Block);
        assert_eq!(
            plan(&rules, "http://a/page", &original),
            Answer::Continue { headers: None }
        );
        let Answer::Continue {
            headers: Some(merged),
        } = plan(&rules, "http://a/api/1", &original)
        else {
            panic!("header rule");
        };
        let names: Vec<&str> = merged.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["X-Keep", "X-Added", "accept"]);
        assert_eq!(merged[2].value, "application/json");
    }

    /// The rules' request-stage pattern and a popup's first-document pattern share the one
    /// `Fetch.enable`; neither means Fetch off.
    #[test]
    fn a_popup_first_document_pattern_joins_the_rules_patterns() {
        let off = Patterns::default();
        assert_eq!(enable_command(off), None);
        let popup = Patterns {
            mode: FetchMode::Off,
            first_document: true,
        };
        let enable = serde_json::to_value(enable_command(popup).unwrap()).unwrap();
        assert_eq!(
            enable,
            serde_json::json!({"patterns": [{"urlPattern": "*", "requestStage": "Response", "resourceType": "Document"}], "handleAuthRequests": false})
        );
        let both = Patterns {
            mode: FetchMode::Intercept { auth: true },
            first_document: true,
        };
        let enable = serde_json::to_value(enable_command(both).unwrap()).unwrap();
        assert_eq!(enable["patterns"][0]["requestStage"], "Request");
        assert_eq!(enable["patterns"][1]["requestStage"], "Response");
        assert_eq!(enable["handleAuthRequests"], true);
    }

    #[test]
    fn socket_rules_come_before_the_emulated_conditions() {
        let rules = SocketRules {
            refuse: vec!["ws://ads.test{.}?/*".to_owned()],
            admit: vec!["wss://ok.test{.}?/*".to_owned()],
            refuse_rest: true,
        };
        let slow = Conditions {
            offline: false,
            latency_ms: 200.0,
            download: Some(1000.0),
            upload: None,
        };
        let list = conditions_list(&rules, slow);
        let patterns: Vec<(&str, bool)> = list
            .iter()
            .map(|c| (c.url_pattern.as_str(), c.offline))
            .collect();
        assert_eq!(
            patterns,
            vec![
                ("ws://ads.test{.}?/*", true),
                ("wss://ok.test{.}?/*", false),
                ("ws://*:*/*", true),
                ("wss://*:*/*", true),
                ("", false),
            ]
        );
        assert!(list.iter().all(|c| c.latency == 200.0
            && c.download_throughput == 1000.0
            && c.upload_throughput == -1.0));
        // Offline emulation keeps admitted sockets offline too; no emulation adds no global entry.
        let offline = Conditions {
            offline: true,
            ..Conditions::default()
        };
        assert!(conditions_list(&rules, offline).iter().all(|c| c.offline));
        assert_eq!(conditions_list(&rules, Conditions::default()).len(), 4);
        // No policy: the session's conditions are `browser.emulate`'s alone.
        assert!(conditions_list(&SocketRules::default(), slow).is_empty());
    }

    #[test]
    fn modes_follow_rules_and_credentials() {
        let control = NetControl::default();
        let a = vec!["workspace:a".to_owned()];
        assert_eq!(control.wanted(&a), FetchMode::Off);
        control
            .add_rule("workspace:a", rule("*", RuleAction::Block))
            .unwrap();
        assert_eq!(control.wanted(&a), FetchMode::Intercept { auth: false });
        control
            .set_credential(
                "workspace:a",
                Credential::new("http://h".into(), "u".into(), "secret-pw".into()),
            )
            .unwrap();
        assert_eq!(control.wanted(&a), FetchMode::Intercept { auth: true });
        assert_eq!(
            control.wanted(&["workspace:b".to_owned()]),
            FetchMode::Off,
            "another Workspace's rules do not apply"
        );
        assert!(control.remove_rule(&"workspace:a".into(), "rule:*"));
        assert_eq!(control.wanted(&a), FetchMode::Intercept { auth: true });
        assert_eq!(control.clear_credentials("workspace:a", None), 1);
        assert_eq!(control.wanted(&a), FetchMode::Off);
        for n in 0..MAX_RULES_PER_WORKSPACE {
            control
                .add_rule("workspace:a", rule(&format!("{n}"), RuleAction::Block))
                .unwrap();
        }
        assert_eq!(
            control.add_rule("workspace:a", rule("x", RuleAction::Block)),
            Err(ControlLimit::Rules)
        );
        control.forget_workspace("workspace:a");
        assert!(control.rules("workspace:a").is_empty());
    }

    #[test]
    fn the_second_challenge_of_a_request_is_recognised_and_passwords_never_print() {
        let mut book = FetchBook::default();
        let session = SessionId::new("S");
        assert!(!book.challenge_repeated(&session, "job-1"));
        assert!(book.challenge_repeated(&session, "job-1"));
        assert!(!book.challenge_repeated(&session, "job-2"));
        let credential = Credential::new("http://h".into(), "user".into(), "hunter2".into());
        assert!(!format!("{credential:?}").contains("hunter2"));
    }
}
