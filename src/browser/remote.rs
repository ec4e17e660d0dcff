//! Remote browser candidates from the owner-only `<home>/remote-browsers.toml` (docs/remote.md):
//! parsing with the `toml` crate, vetting of each entry (endpoint scheme and host, token file,
//! CA file, headers, options that are not implemented yet) and the structured diagnostics that
//! say what is wrong, on the entry's candidate or, for a file that cannot be used at all, on the
//! file. It reads the file, the token files and the CA files and nothing else: no network, no
//! writes. The token
//! only ever lives in `RemoteEndpoint`, whose `Debug` form hides it, and no diagnostic quotes
//! the file's text.

use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::candidate::{
    AuthorizationState, Candidate, CandidateKind, CandidateState, Endpoint, ProcessState,
    Remediation, RemoteDebuggingState,
};

/// The file's name inside the Browser Pilot home.
pub const REMOTE_FILE: &str = "remote-browsers.toml";

/// The candidate id prefix of a remote entry: `browser:remote:<id>`.
pub const REMOTE_ID_PREFIX: &str = "browser:remote:";

/// The placeholder in `endpoint` and header values that the token file's content replaces.
const TOKEN_PLACEHOLDER: &str = "{token}";

/// Largest configuration file read; a list of endpoints is a few KiB.
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Largest token file read (tokens are tens to hundreds of bytes; JWTs a few KiB).
const MAX_TOKEN_BYTES: u64 = 16 * 1024;

/// Entries listed; the rest get a file diagnostic.
const MAX_ENTRIES: usize = 64;

/// Headers per entry.
const MAX_HEADERS: usize = 32;

/// Longest entry id.
const MAX_ID_CHARS: usize = 64;

/// Upper bound of `max_sessions`.
const MAX_SESSIONS_LIMIT: i64 = 1024;

/// Pools listed; the rest get a file diagnostic.
const MAX_POOLS: usize = 64;

/// The keys a `[[pool]]` may have.
const POOL_KEYS: [&str; 2] = ["id", "browsers"];

/// The keys an entry may have.
const ENTRY_KEYS: [&str; 9] = [
    "id",
    "endpoint",
    "token_file",
    "headers",
    "sessions",
    "max_sessions",
    "allow_insecure",
    "ca_file",
    "list_foreign_tabs",
];

/// Where and how the Broker reaches one remote browser: the endpoint with the token filled
/// in. Crate-internal and never serialized; `Debug` names the candidate only.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteEndpoint {
    /// The candidate id, for messages.
    pub(crate) browser_id: String,
    /// The `ws://` URL with `{token}` replaced.
    pub(crate) url: String,
    /// Extra handshake headers, `{token}` replaced.
    pub(crate) headers: Vec<(String, String)>,
    /// The entry allows plain `ws://` to a host that is not loopback.
    pub(crate) allow_insecure: bool,
    /// A PEM CA bundle trusted for this `wss://` endpoint besides the web-PKI roots.
    pub(crate) ca_file: Option<PathBuf>,
    /// The token, so that anything reported about this endpoint can be scrubbed of it.
    pub(crate) token: Option<String>,
    /// `sessions = "per_workspace"`: one connection (one engine session) per Workspace.
    pub(crate) per_workspace: bool,
    /// `max_sessions`: the Workspaces it takes at once (per_workspace sessions, or Workspaces
    /// connected through a shared connection).
    pub(crate) max_sessions: Option<usize>,
    /// `list_foreign_tabs = true`: tabs the Broker did not create are listed to Workspaces.
    pub(crate) list_foreign_tabs: bool,
}

impl std::fmt::Debug for RemoteEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteEndpoint({})", self.browser_id)
    }
}

impl RemoteEndpoint {
    /// `text` with the token and every URL credential replaced by `[redacted]`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let text = crate::protocol::redact::redact_url(text).into_owned();
        match &self.token {
            Some(token) if !token.is_empty() => {
                text.replace(token.as_str(), crate::protocol::redact::REDACTED)
            }
            _ => text,
        }
    }
}

/// One problem found in the file or an entry. `code` is stable snake_case; `message` is human
/// text that never contains the token or the file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: &'static str,
    pub message: String,
}

impl Diagnostic {
    fn new(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            message: message.into(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// What the file yields: one candidate per entry (in file order) and the diagnostics that
/// belong to the file as a whole (unreadable, unparseable, not owner-only, unknown sections).
#[derive(Debug, Default)]
pub struct RemoteScan {
    pub candidates: Vec<Candidate>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads `<home>/remote-browsers.toml`. A missing file is an empty scan. Every diagnostic is
/// also logged (warn) with the candidate it belongs to, once per change: the file is read at
/// every candidate lookup, and a broken file must not fill the log with one copy per agent.
pub fn scan(home: &Path) -> RemoteScan {
    let path = home.join(REMOTE_FILE);
    let scan = scan_file(&path);
    let lines: Vec<(Option<&str>, &Diagnostic)> = scan
        .diagnostics
        .iter()
        .map(|diagnostic| (None, diagnostic))
        .chain(scan.candidates.iter().flat_map(|candidate| {
            let id = Some(candidate.id.as_str());
            candidate
                .diagnostics
                .iter()
                .map(move |diagnostic| (id, diagnostic))
        }))
        .collect();
    if LAST_LOGGED.changed(&lines) {
        for (candidate, diagnostic) in lines {
            tracing::warn!(
                code = diagnostic.code,
                candidate = candidate.unwrap_or("-"),
                "{REMOTE_FILE}: {}",
                diagnostic.message
            );
        }
    }
    scan
}

/// The diagnostics last logged, as a digest; see [`scan`].
static LAST_LOGGED: LoggedDigest = LoggedDigest(std::sync::Mutex::new(0));

struct LoggedDigest(std::sync::Mutex<u64>);

impl LoggedDigest {
    /// Whether `lines` differ from the set last seen (an empty set is remembered too, so a
    /// problem that comes back is logged again).
    fn changed(&self, lines: &[(Option<&str>, &Diagnostic)]) -> bool {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        for (candidate, diagnostic) in lines {
            (candidate, diagnostic.code, &diagnostic.message).hash(&mut hasher);
        }
        let digest = hasher.finish();
        let mut last = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::replace(&mut *last, digest) != digest
    }
}

fn scan_file(path: &Path) -> RemoteScan {
    let mut scan = RemoteScan::default();
    let text = match read_private(path, MAX_FILE_BYTES) {
        Ok(Some((text, private))) => {
            if !private {
                scan.diagnostics.push(Diagnostic::new(
                    "remote_config_not_owner_only",
                    format!("{REMOTE_FILE} must be owned by this user and not readable or writable by group or others (chmod 600); its entries are not used until it is"),
                ));
            }
            text
        }
        Ok(None) => return scan,
        Err(message) => {
            scan.diagnostics
                .push(Diagnostic::new("remote_config_unreadable", message));
            return scan;
        }
    };
    let table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(error) => {
            let at = error
                .span()
                .map(|span| format!(" at line {}", line_of(&text, span.start)))
                .unwrap_or_default();
            // The parser's message names what it expected, never the file's text; its
            // `Display` would quote the line (which may hold a literal token).
            scan.diagnostics.push(Diagnostic::new(
                "remote_config_malformed",
                format!(
                    "{REMOTE_FILE} is not valid TOML{at}: {}",
                    error.message().trim()
                ),
            ));
            return scan;
        }
    };
    let file_blocked = !scan.diagnostics.is_empty();
    for key in table.keys() {
        match key.as_str() {
            "browser" => {}
            "pool" => {}
            other => scan.diagnostics.push(Diagnostic::new(
                "remote_config_malformed",
                format!(
                    "unknown top-level key {other:?}; only [[browser]] and [[pool]] sections are read"
                ),
            )),
        }
    }
    let entries = sections(&table, "browser", MAX_ENTRIES, &mut scan.diagnostics);
    let mut seen: Vec<String> = Vec::new();
    for (index, entry) in entries.into_iter().take(MAX_ENTRIES).enumerate() {
        let mut candidate = entry_candidate(index + 1, entry, &seen);
        seen.push(candidate.id.clone());
        if file_blocked {
            candidate.diagnostics.insert(
                0,
                Diagnostic::new(
                    "remote_config_not_owner_only",
                    format!("{REMOTE_FILE} is not owner-only (chmod 600)"),
                ),
            );
        }
        settle(&mut candidate);
        scan.candidates.push(candidate);
    }
    let pools = sections(&table, "pool", MAX_POOLS, &mut scan.diagnostics);
    let entries = scan.candidates.len();
    for (index, pool) in pools.into_iter().take(MAX_POOLS).enumerate() {
        let seen: Vec<String> = scan.candidates.iter().map(|c| c.id.clone()).collect();
        let mut candidate = pool_candidate(index + 1, pool, &seen, &scan.candidates[..entries]);
        if file_blocked {
            candidate.diagnostics.insert(
                0,
                Diagnostic::new(
                    "remote_config_not_owner_only",
                    format!("{REMOTE_FILE} is not owner-only (chmod 600)"),
                ),
            );
        }
        settle(&mut candidate);
        if !candidate.diagnostics.is_empty() {
            candidate.pool.clear();
        }
        scan.candidates.push(candidate);
    }
    scan
}

/// The candidate of `[[pool]]` number `number` (1-based): one candidate whose `browser.connect`
/// places the Workspace on one of its entries (`entries`: the `[[browser]]` candidates; `seen`:
/// every id listed before it). An entry that is listed but unusable is kept (placement skips
/// it); an id no entry has is a diagnostic.
fn pool_candidate(
    number: usize,
    value: &toml::Value,
    seen: &[String],
    entries: &[Candidate],
) -> Candidate {
    let mut diagnostics = Vec::new();
    let mut bad = |message: String| {
        diagnostics.push(Diagnostic::new("remote_config_malformed", message));
    };
    let fallback_id = format!("{REMOTE_ID_PREFIX}#pool{number}");
    let mut members = Vec::new();
    let id = match value.as_table() {
        None => {
            bad(format!("[[pool]] {number} is not a table"));
            fallback_id
        }
        Some(table) => {
            for key in table.keys() {
                if !POOL_KEYS.contains(&key.as_str()) {
                    bad(format!("unknown key {key:?} in [[pool]] {number}"));
                }
            }
            let mut id = match table.get("id") {
                Some(toml::Value::String(id)) if valid_id(id) => format!("{REMOTE_ID_PREFIX}{id}"),
                Some(_) => {
                    bad(format!(
                        "`id` of [[pool]] {number} must be 1 to {MAX_ID_CHARS} characters of a-z, 0-9, '-' and '_'"
                    ));
                    fallback_id.clone()
                }
                None => {
                    bad(format!("[[pool]] {number} has no `id`"));
                    fallback_id.clone()
                }
            };
            if seen.contains(&id) {
                bad(format!(
                    "[[pool]] {number} repeats the id of an earlier entry or pool"
                ));
                id = format!("{id}#pool{number}");
            }
            match table.get("browsers") {
                Some(toml::Value::Array(names)) if !names.is_empty() => {
                    for name in names {
                        let member = name
                            .as_str()
                            .map(|name| format!("{REMOTE_ID_PREFIX}{name}"));
                        match member {
                            Some(member) if members.contains(&member) => {
                                bad(format!("[[pool]] {number} lists an entry twice"));
                            }
                            Some(member) if entries.iter().any(|c| c.id == member) => {
                                members.push(member);
                            }
                            _ => bad(format!(
                                "[[pool]] {number} names a browser that no [[browser]] entry has"
                            )),
                        }
                    }
                }
                _ => bad(format!(
                    "`browsers` of [[pool]] {number} must be a non-empty array of [[browser]] ids"
                )),
            }
            id
        }
    };
    Candidate {
        profile: id.trim_start_matches(REMOTE_ID_PREFIX).to_owned(),
        id,
        product: "remote".to_owned(),
        channel: "pool".to_owned(),
        managed: false,
        kind: CandidateKind::Remote,
        state: CandidateState::Ready,
        process_state: ProcessState::Unknown,
        remote_debugging_state: RemoteDebuggingState::Enabled,
        authorization_state: AuthorizationState::Unknown,
        remediation: None,
        diagnostics,
        endpoint: None,
        user_data_dir: PathBuf::new(),
        pool: members,
    }
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&byte| byte == b'\n')
        .count()
        + 1
}

/// A file's text (at most `limit` bytes) and whether it is owner-only (owned by this user, no
/// group or other permission bits); `None` when it does not exist.
fn read_private(path: &Path, limit: u64) -> Result<Option<(String, bool)>, String> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot open {}: {}", display(path), error.kind())),
    };
    let metadata = file
        .metadata()
        .map_err(|error| format!("cannot stat {}: {}", display(path), error.kind()))?;
    if !metadata.is_file() {
        return Err(format!("{} is not a regular file", display(path)));
    }
    if metadata.len() > limit {
        return Err(format!("{} is larger than {limit} bytes", display(path)));
    }
    let mut text = String::new();
    file.take(limit)
        .read_to_string(&mut text)
        .map_err(|_| format!("{} is not UTF-8 text", display(path)))?;
    Ok(Some((text, owner_only(&metadata))))
}

#[cfg(unix)]
fn owner_only(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    metadata.uid() == crate::os::effective_uid() && metadata.mode() & 0o077 == 0
}

#[cfg(not(unix))]
fn owner_only(_metadata: &std::fs::Metadata) -> bool {
    true
}

/// The file name of a path, for messages (never the directories above it).
fn display(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "the file".to_owned())
}

/// What an entry says, collected while vetting it.
struct Entry {
    id: String,
    sessions: String,
    diagnostics: Vec<Diagnostic>,
    endpoint: Option<RemoteEndpoint>,
}

/// The candidate of entry number `number` (1-based); `seen` holds the ids listed before it.
fn entry_candidate(number: usize, value: &toml::Value, seen: &[String]) -> Candidate {
    let entry = vet_entry(number, value, seen);
    Candidate {
        profile: entry.id.trim_start_matches(REMOTE_ID_PREFIX).to_owned(),
        id: entry.id,
        product: "remote".to_owned(),
        channel: entry.sessions,
        managed: false,
        kind: CandidateKind::Remote,
        state: CandidateState::Ready,
        process_state: ProcessState::Unknown,
        remote_debugging_state: RemoteDebuggingState::Enabled,
        authorization_state: AuthorizationState::Unknown,
        remediation: None,
        diagnostics: entry.diagnostics,
        endpoint: entry.endpoint.map(Endpoint::Remote),
        user_data_dir: PathBuf::new(),
        pool: Vec::new(),
    }
}

/// The `[[key]]` sections of the file, the first `max` of them; a `key` that is not an array
/// of tables, or more than `max` sections, is a file diagnostic.
fn sections<'a>(
    table: &'a toml::Table,
    key: &str,
    max: usize,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<&'a toml::Value> {
    let sections: Vec<&toml::Value> = match table.get(key) {
        None => Vec::new(),
        Some(toml::Value::Array(sections)) => sections.iter().collect(),
        Some(_) => {
            diagnostics.push(Diagnostic::new(
                "remote_config_malformed",
                format!("`{key}` must be an array of tables ([[{key}]])"),
            ));
            Vec::new()
        }
    };
    if sections.len() > max {
        diagnostics.push(Diagnostic::new(
            "remote_config_malformed",
            format!(
                "{} [[{key}]] sections; only the first {max} are read",
                sections.len()
            ),
        ));
    }
    sections
}

/// A candidate with diagnostics needs its entry fixed and has no endpoint.
fn settle(candidate: &mut Candidate) {
    if candidate.diagnostics.is_empty() {
        return;
    }
    candidate.endpoint = None;
    candidate.state = CandidateState::NeedsSetup;
    candidate.remote_debugging_state = RemoteDebuggingState::Disabled;
    let first = &candidate.diagnostics[0];
    candidate.remediation = Some(Remediation {
        action: "fix_remote_config".to_owned(),
        message: format!(
            "fix this entry of {REMOTE_FILE} in the Browser Pilot home ({}), then call browser.discover again",
            first.message
        ),
        url: None,
    });
}

fn vet_entry(number: usize, value: &toml::Value, seen: &[String]) -> Entry {
    let mut diagnostics = Vec::new();
    let mut bad =
        |code: &'static str, message: String| diagnostics.push(Diagnostic::new(code, message));
    let fallback_id = format!("{REMOTE_ID_PREFIX}#{number}");
    let Some(table) = value.as_table() else {
        bad(
            "remote_config_malformed",
            format!("[[browser]] entry {number} is not a table"),
        );
        return Entry {
            id: fallback_id,
            sessions: "shared".to_owned(),
            diagnostics,
            endpoint: None,
        };
    };
    for key in table.keys() {
        if !ENTRY_KEYS.contains(&key.as_str()) {
            bad(
                "remote_config_malformed",
                format!("unknown key {key:?} in [[browser]] entry {number}"),
            );
        }
    }
    let string = |key: &str| -> Result<Option<&str>, String> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(text)) => Ok(Some(text.as_str())),
            Some(_) => Err(format!("`{key}` must be a string")),
        }
    };
    let mut id = match string("id") {
        Ok(Some(id)) if valid_id(id) => format!("{REMOTE_ID_PREFIX}{id}"),
        Ok(Some(_)) => {
            bad(
                "remote_config_malformed",
                format!(
                    "`id` of entry {number} must be 1 to {MAX_ID_CHARS} characters of a-z, 0-9, '-' and '_'"
                ),
            );
            fallback_id.clone()
        }
        Ok(None) => {
            bad(
                "remote_config_malformed",
                format!("entry {number} has no `id`"),
            );
            fallback_id.clone()
        }
        Err(message) => {
            bad("remote_config_malformed", message);
            fallback_id.clone()
        }
    };
    if seen.contains(&id) {
        bad(
            "remote_config_malformed",
            format!("entry {number} repeats the id of an earlier entry"),
        );
        id = format!("{id}#{number}");
    }
    let sessions = match string("sessions") {
        Ok(None) | Ok(Some("shared")) => "shared".to_owned(),
        Ok(Some("per_workspace")) => "per_workspace".to_owned(),
        Ok(Some(_)) => {
            bad(
                "remote_config_malformed",
                "`sessions` must be \"shared\" or \"per_workspace\"".to_owned(),
            );
            "shared".to_owned()
        }
        Err(message) => {
            bad("remote_config_malformed", message);
            "shared".to_owned()
        }
    };
    let max_sessions = match table.get("max_sessions") {
        None => None,
        Some(toml::Value::Integer(n)) if (1..=MAX_SESSIONS_LIMIT).contains(n) => {
            usize::try_from(*n).ok()
        }
        Some(_) => {
            bad(
                "remote_config_malformed",
                format!("`max_sessions` must be an integer from 1 to {MAX_SESSIONS_LIMIT}"),
            );
            None
        }
    };
    let list_foreign_tabs = match table.get("list_foreign_tabs") {
        None => false,
        Some(toml::Value::Boolean(list)) => *list,
        Some(_) => {
            bad(
                "remote_config_malformed",
                "`list_foreign_tabs` must be true or false".to_owned(),
            );
            false
        }
    };
    let allow_insecure = match table.get("allow_insecure") {
        None => false,
        Some(toml::Value::Boolean(allow)) => *allow,
        Some(_) => {
            bad(
                "remote_config_malformed",
                "`allow_insecure` must be true or false".to_owned(),
            );
            false
        }
    };
    let ca_file = match string("ca_file") {
        Ok(None) => None,
        Ok(Some(path)) if Path::new(path).is_absolute() => match read_ca_file(Path::new(path)) {
            Ok(()) => Some(PathBuf::from(path)),
            Err(message) => {
                bad("remote_ca_invalid", message);
                None
            }
        },
        Ok(Some(_)) => {
            bad(
                "remote_config_malformed",
                "`ca_file` must be an absolute path".to_owned(),
            );
            None
        }
        Err(message) => {
            bad("remote_config_malformed", message);
            None
        }
    };
    let token = match string("token_file") {
        Ok(None) => None,
        Ok(Some(path)) if Path::new(path).is_absolute() => match read_token(Path::new(path)) {
            Ok(token) => Some(token),
            Err((code, message)) => {
                bad(code, message);
                None
            }
        },
        Ok(Some(_)) => {
            bad(
                "remote_config_malformed",
                "`token_file` must be an absolute path".to_owned(),
            );
            None
        }
        Err(message) => {
            bad("remote_config_malformed", message);
            None
        }
    };
    let has_token_file = !matches!(string("token_file"), Ok(None));
    let mut uses_token = false;
    let mut headers = Vec::new();
    match table.get("headers") {
        None => {}
        Some(toml::Value::Table(values)) if values.len() <= MAX_HEADERS => {
            for (name, value) in values {
                let Some(value) = value.as_str() else {
                    bad(
                        "remote_config_malformed",
                        format!("header {name:?} must be a string"),
                    );
                    continue;
                };
                if !valid_header_name(name)
                    || FORBIDDEN_HEADERS.contains(&name.to_ascii_lowercase().as_str())
                {
                    bad(
                        "remote_config_malformed",
                        format!("header name {name:?} cannot be sent"),
                    );
                    continue;
                }
                if value.chars().any(|c| c.is_control()) {
                    bad(
                        "remote_config_malformed",
                        format!("header {name:?} has a control character"),
                    );
                    continue;
                }
                uses_token |= value.contains(TOKEN_PLACEHOLDER);
                headers.push((name.clone(), value.to_owned()));
            }
        }
        Some(_) => bad(
            "remote_config_malformed",
            format!("`headers` must be a table of at most {MAX_HEADERS} strings"),
        ),
    }
    let url = match string("endpoint") {
        Ok(Some(endpoint)) => {
            uses_token |= endpoint.contains(TOKEN_PLACEHOLDER);
            match vet_endpoint(endpoint, allow_insecure) {
                Ok(tls) => {
                    if !tls && ca_file.is_some() {
                        bad(
                            "remote_config_malformed",
                            "`ca_file` applies to wss:// and https:// endpoints only".to_owned(),
                        );
                    }
                    Some(endpoint.to_owned())
                }
                Err((code, message)) => {
                    bad(code, message);
                    None
                }
            }
        }
        Ok(None) => {
            bad(
                "remote_config_malformed",
                format!("entry {number} has no `endpoint`"),
            );
            None
        }
        Err(message) => {
            bad("remote_config_malformed", message);
            None
        }
    };
    if uses_token && !has_token_file {
        bad(
            "remote_token_missing",
            "the entry uses {token} but has no `token_file`".to_owned(),
        );
    }
    let endpoint = match (url, diagnostics.is_empty()) {
        (Some(url), true) => {
            let fill = |text: &str| match &token {
                Some(token) => text.replace(TOKEN_PLACEHOLDER, token),
                None => text.to_owned(),
            };
            Some(RemoteEndpoint {
                browser_id: id.clone(),
                url: fill(&url),
                headers: headers
                    .iter()
                    .map(|(name, value)| (name.clone(), fill(value)))
                    .collect(),
                allow_insecure,
                ca_file,
                token,
                per_workspace: sessions == "per_workspace",
                max_sessions,
                list_foreign_tabs,
            })
        }
        _ => None,
    };
    Entry {
        id,
        sessions,
        diagnostics,
        endpoint,
    }
}

/// Headers the WebSocket handshake sets itself.
const FORBIDDEN_HEADERS: [&str; 7] = [
    "host",
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "content-length",
];

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= MAX_ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// An HTTP token (RFC 9110 `tchar`s).
fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Reads a token file: owner-only, non-empty, one line (surrounding whitespace trimmed).
fn read_token(path: &Path) -> Result<String, (&'static str, String)> {
    match read_private(path, MAX_TOKEN_BYTES) {
        Ok(None) => Err((
            "remote_token_missing",
            format!("the token file {} does not exist", display(path)),
        )),
        Err(message) => Err(("remote_token_unreadable", message)),
        Ok(Some((_, false))) => Err((
            "remote_token_not_owner_only",
            format!(
                "the token file {} must be owned by this user and not readable by group or others (chmod 600)",
                display(path)
            ),
        )),
        Ok(Some((text, true))) => {
            let token = text.trim();
            match token.is_empty() || token.chars().any(|c| c.is_control()) {
                true => Err((
                    "remote_token_unreadable",
                    format!(
                        "the token file {} must hold one non-empty line",
                        display(path)
                    ),
                )),
                false => Ok(token.to_owned()),
            }
        }
    }
}

/// Checks the endpoint's form without any network: `wss://` and `https://` to any host, `ws://`
/// and `http://` to loopback unless `allow_insecure`; `Ok` says whether it is TLS. An
/// `http(s)://` endpoint names the engine whose `/json/version` gives the WebSocket path at
/// connect.
fn vet_endpoint(endpoint: &str, allow_insecure: bool) -> Result<bool, (&'static str, String)> {
    // `{token}` is not valid in every URL position; any stand-in parses the same way.
    let parsed = url::Url::parse(&endpoint.replace(TOKEN_PLACEHOLDER, "t")).map_err(|error| {
        (
            "remote_config_malformed",
            format!("`endpoint` is not a URL: {error}"),
        )
    })?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err((
            "remote_config_malformed",
            "`endpoint` must not carry credentials before the host; use {token} and token_file"
                .to_owned(),
        ));
    }
    let host = parsed.host_str().unwrap_or_default();
    if host.is_empty() {
        return Err((
            "remote_config_malformed",
            "`endpoint` has no host".to_owned(),
        ));
    }
    match parsed.scheme() {
        "ws" | "http" => match allow_insecure || is_loopback(host) {
            true => Ok(false),
            false => Err((
                "remote_insecure_endpoint",
                "plain ws:// and http:// are accepted only to a loopback host; use wss:// or https://, or set allow_insecure = true".to_owned(),
            )),
        },
        "wss" | "https" => Ok(true),
        _ => Err((
            "remote_config_malformed",
            "`endpoint` must be a wss://, ws://, https:// or http:// URL".to_owned(),
        )),
    }
}

/// Largest CA bundle read (the whole web-PKI is about 250 KiB of PEM).
const MAX_CA_BYTES: u64 = 1024 * 1024;

/// Checks a `ca_file`: a regular file of at most 1 MiB that nobody but its owner (this user or
/// root) may change, holding at least one PEM certificate usable as a trust anchor. The janitor
/// reads it again when it connects.
fn read_ca_file(path: &Path) -> Result<(), String> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let name = display(path);
    let metadata = std::fs::metadata(path)
        .map_err(|error| format!("the CA file {name} cannot be read: {}", error.kind()))?;
    if !metadata.is_file() || metadata.len() > MAX_CA_BYTES {
        return Err(format!(
            "the CA file {name} must be a regular file of at most {MAX_CA_BYTES} bytes"
        ));
    }
    if !protected(&metadata) {
        return Err(format!(
            "the CA file {name} must be owned by this user or root and not writable by group or others (chmod 644)"
        ));
    }
    let bytes = std::fs::read(path)
        .map_err(|error| format!("the CA file {name} cannot be read: {}", error.kind()))?;
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|_| format!("the CA file {name} is not a PEM certificate bundle"))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates);
    match added {
        0 => Err(format!(
            "the CA file {name} holds no usable CA certificate (-----BEGIN CERTIFICATE-----)"
        )),
        _ => Ok(()),
    }
}

#[cfg(unix)]
fn protected(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (metadata.uid() == crate::os::effective_uid() || metadata.uid() == 0)
        && metadata.mode() & 0o022 == 0
}

#[cfg(not(unix))]
fn protected(_metadata: &std::fs::Metadata) -> bool {
    true
}

/// `localhost`, `127.0.0.0/8` or `::1`.
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn write(path: &Path, text: &str, mode: u32) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_same_diagnostics_are_logged_once_and_again_after_a_change() {
        let digest = LoggedDigest(std::sync::Mutex::new(0));
        let broken = Diagnostic::new("remote_token_missing", "no token file");
        let other = Diagnostic::new("remote_insecure_endpoint", "ws to a remote host");
        assert!(digest.changed(&[(Some("browser:remote:farm"), &broken)]));
        assert!(!digest.changed(&[(Some("browser:remote:farm"), &broken)]));
        assert!(digest.changed(&[(Some("browser:remote:farm"), &other)]));
        assert!(digest.changed(&[]));
        assert!(digest.changed(&[(Some("browser:remote:farm"), &broken)]));
    }

    fn codes(candidate: &Candidate) -> Vec<&'static str> {
        candidate.diagnostics.iter().map(|d| d.code).collect()
    }

    #[test]
    fn missing_file_is_empty() {
        let home = tempfile::tempdir().unwrap();
        let scan = scan_file(&home.path().join(REMOTE_FILE));
        assert!(scan.candidates.is_empty() && scan.diagnostics.is_empty());
    }

    #[test]
    fn entries_become_candidates_with_the_token_filled_in() {
        let home = tempfile::tempdir().unwrap();
        let token = home.path().join("farm.token");
        write(&token, "s3cr3t-TOKEN\n", 0o600);
        let text = format!(
            r#"
[[browser]]
id = "farm"
endpoint = "ws://127.0.0.1:3000/chrome?token={{token}}"
token_file = "{}"
headers = {{ Authorization = "Bearer {{token}}" }}
sessions = "shared"
max_sessions = 8

[[browser]]
id = "lab"
endpoint = "ws://10.0.0.7:9222/devtools/browser/x"
allow_insecure = true

[[browser]]
id = "far"
endpoint = "ws://10.0.0.8:9222/devtools/browser/x"
"#,
            token.display()
        );
        let path = home.path().join(REMOTE_FILE);
        write(&path, &text, 0o600);
        let scan = scan_file(&path);
        assert!(scan.diagnostics.is_empty(), "{:?}", scan.diagnostics);
        let ids: Vec<&str> = scan.candidates.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "browser:remote:farm",
                "browser:remote:lab",
                "browser:remote:far"
            ]
        );
        let farm = &scan.candidates[0];
        assert_eq!(farm.state, CandidateState::Ready);
        assert_eq!(farm.kind, CandidateKind::Remote);
        let Some(Endpoint::Remote(endpoint)) = farm.endpoint() else {
            panic!("farm has a remote endpoint");
        };
        assert_eq!(
            endpoint.url,
            "ws://127.0.0.1:3000/chrome?token=s3cr3t-TOKEN"
        );
        assert_eq!(
            endpoint.headers,
            [("Authorization".to_owned(), "Bearer s3cr3t-TOKEN".to_owned())]
        );
        assert_eq!(
            endpoint.scrub("ws://x/?token=s3cr3t-TOKEN"),
            "ws://x/?token=[redacted]"
        );
        assert!(!format!("{farm:?}").contains("s3cr3t"));
        assert!(!farm.to_json().to_string().contains("s3cr3t"));
        assert_eq!(farm.to_json()["kind"], "remote");
        assert_eq!(scan.candidates[1].state, CandidateState::Ready);
        let far = &scan.candidates[2];
        assert_eq!(far.state, CandidateState::NeedsSetup);
        assert_eq!(codes(far), ["remote_insecure_endpoint"]);
        assert_eq!(far.endpoint(), None);
        assert_eq!(far.to_json()["remediation"]["action"], "fix_remote_config");
    }

    #[test]
    fn every_problem_is_a_diagnostic_on_its_entry() {
        let home = tempfile::tempdir().unwrap();
        let open_token = home.path().join("open.token");
        write(&open_token, "OPEN-SECRET", 0o644);
        let text = format!(
            r#"
[[browser]]
id = "open"
endpoint = "ws://127.0.0.1:1/?t={{token}}"
token_file = "{}"

[[browser]]
id = "gone"
endpoint = "ws://127.0.0.1:1/?t={{token}}"
token_file = "/nonexistent/gone.token"

[[browser]]
id = "tls"
endpoint = "wss://farm.example/chrome"
ca_file = "/etc/ca.pem"

[[browser]]
id = "pw"
endpoint = "ws://127.0.0.1:1/"
sessions = "per_workspace"
colour = "blue"

[[browser]]
id = "pw"
endpoint = "ws://127.0.0.1:1/"

[[browser]]
endpoint = "ws://127.0.0.1:1/?t={{token}}"
"#,
            open_token.display()
        );
        let path = home.path().join(REMOTE_FILE);
        write(&path, &text, 0o600);
        let scan = scan_file(&path);
        let listed: Vec<(&str, Vec<&str>)> = scan
            .candidates
            .iter()
            .map(|c| (c.id.as_str(), codes(c)))
            .collect();
        assert_eq!(
            listed,
            [
                ("browser:remote:open", vec!["remote_token_not_owner_only"]),
                ("browser:remote:gone", vec!["remote_token_missing"]),
                ("browser:remote:tls", vec!["remote_ca_invalid"]),
                ("browser:remote:pw", vec!["remote_config_malformed"]),
                ("browser:remote:pw#5", vec!["remote_config_malformed"]),
                (
                    "browser:remote:#6",
                    vec!["remote_config_malformed", "remote_token_missing"]
                ),
            ]
        );
        for candidate in &scan.candidates {
            assert_eq!(candidate.state, CandidateState::NeedsSetup);
            assert!(!candidate.to_json().to_string().contains("OPEN-SECRET"));
        }
    }

    #[test]
    fn a_pool_is_one_candidate_over_its_entries_and_per_workspace_entries_carry_their_capacity() {
        let home = tempfile::tempdir().unwrap();
        let text = r#"
[[browser]]
id = "a"
endpoint = "ws://127.0.0.1:1/"
sessions = "per_workspace"
max_sessions = 2

[[browser]]
id = "b"
endpoint = "ws://127.0.0.1:2/"
list_foreign_tabs = true

[[pool]]
id = "farm"
browsers = ["a", "b"]

[[pool]]
id = "a"
browsers = ["a", "a"]
"#;
        let path = home.path().join(REMOTE_FILE);
        write(&path, text, 0o600);
        let scan = scan_file(&path);
        assert!(scan.diagnostics.is_empty(), "{:?}", scan.diagnostics);
        let ids: Vec<&str> = scan.candidates.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "browser:remote:a",
                "browser:remote:b",
                "browser:remote:farm",
                "browser:remote:a#pool2"
            ]
        );
        let a = scan.candidates[0].remote_endpoint().unwrap();
        assert!(a.per_workspace && !a.list_foreign_tabs);
        assert_eq!(a.max_sessions, Some(2));
        let b = scan.candidates[1].remote_endpoint().unwrap();
        assert!(!b.per_workspace && b.list_foreign_tabs);
        assert_eq!(b.max_sessions, None);
        let farm = &scan.candidates[2];
        assert_eq!(
            farm.pool_members(),
            ["browser:remote:a", "browser:remote:b"]
        );
        assert_eq!(
            (farm.channel.as_str(), farm.state),
            ("pool", CandidateState::Ready)
        );
        assert!(farm.endpoint().is_none());
        // A repeated id and an entry listed twice: a diagnostic, no members.
        let repeated = &scan.candidates[3];
        assert_eq!(
            codes(repeated),
            ["remote_config_malformed", "remote_config_malformed"]
        );
        assert!(repeated.pool_members().is_empty());
        assert_eq!(repeated.state, CandidateState::NeedsSetup);
    }

    /// A self-signed CA certificate (its key was thrown away), for `ca_file`.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBsTCCAVegAwIBAgIUI8rYouoWlCr4kYG93VgeXgT8TycwCgYIKoZIzj0EAwIw
JTEjMCEGA1UEAwwaQnJvd3NlciBQaWxvdCB1bml0IHRlc3QgQ0EwIBcNMjYxMjA1
MTcwNjU3WhgPMjEyNjExMTExNzA2NTdaMCUxIzAhBgNVBAMMGkJyb3dzZXIgUGls
b3QgdW5pdCB0ZXN0IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE0bnecP57
40usE6urge/TEy1jrrtpsypr4jE7E+K5T+HVVlwwoYSU8+yfDGldvrA27offLvC/
YA3AMZYwEOgsRqNjMGEwHQYDVR0OBBYEFE9BEehE9eEFrVCEcrMBYI3tfddnMB8G
A1UdIwQYMBaAFE9BEehE9eEFrVCEcrMBYI3tfddnMA8GA1UdEwEB/wQFMAMBAf8w
DgYDVR0PAQH/BAQDAgIEMAoGCCqGSM49BAMCA0gAMEUCIFFNXz3adQ9qM26ihUJf
g0LeMhbVSvQivwtpy0VRcjlfAiEAi2dmfin9IoeOOlYAYxrtgQnUuSPwz3fg1AZz
a/WSbmU=
-----END CERTIFICATE-----\n";

    #[test]
    fn wss_entries_take_a_ca_file_that_only_its_owner_can_change() {
        let home = tempfile::tempdir().unwrap();
        let ca = home.path().join("ca.pem");
        write(&ca, TEST_CA, 0o644);
        let open_ca = home.path().join("open-ca.pem");
        write(&open_ca, TEST_CA, 0o666);
        let junk = home.path().join("junk.pem");
        write(&junk, "not a certificate\n", 0o644);
        let text = format!(
            r#"
[[browser]]
id = "web"
endpoint = "wss://farm.example/chrome"

[[browser]]
id = "own"
endpoint = "wss://localhost:9443/devtools/browser/x"
ca_file = "{ca}"

[[browser]]
id = "open"
endpoint = "wss://localhost:9443/"
ca_file = "{open}"

[[browser]]
id = "junk"
endpoint = "wss://localhost:9443/"
ca_file = "{junk}"

[[browser]]
id = "plain"
endpoint = "ws://127.0.0.1:9222/"
ca_file = "{ca}"
"#,
            ca = ca.display(),
            open = open_ca.display(),
            junk = junk.display()
        );
        let path = home.path().join(REMOTE_FILE);
        write(&path, &text, 0o600);
        let scan = scan_file(&path);
        let listed: Vec<(&str, Vec<&str>)> = scan
            .candidates
            .iter()
            .map(|c| (c.id.as_str(), codes(c)))
            .collect();
        assert_eq!(
            listed,
            [
                ("browser:remote:web", vec![]),
                ("browser:remote:own", vec![]),
                ("browser:remote:open", vec!["remote_ca_invalid"]),
                ("browser:remote:junk", vec!["remote_ca_invalid"]),
                ("browser:remote:plain", vec!["remote_config_malformed"]),
            ]
        );
        let Some(Endpoint::Remote(own)) = scan.candidates[1].endpoint() else {
            panic!("own has an endpoint");
        };
        assert_eq!(own.ca_file.as_deref(), Some(ca.as_path()));
        let Some(Endpoint::Remote(web)) = scan.candidates[0].endpoint() else {
            panic!("web has an endpoint");
        };
        assert_eq!(web.ca_file, None);
    }

    #[test]
    fn a_file_that_is_not_owner_only_or_not_toml_is_a_file_diagnostic() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(REMOTE_FILE);
        write(
            &path,
            "[[browser]]\nid = \"a\"\nendpoint = \"ws://127.0.0.1:1/\"\n",
            0o644,
        );
        let scan = scan_file(&path);
        assert_eq!(scan.diagnostics[0].code, "remote_config_not_owner_only");
        assert_eq!(codes(&scan.candidates[0]), ["remote_config_not_owner_only"]);
        assert_eq!(scan.candidates[0].endpoint(), None);

        write(
            &path,
            "[[browser]]\nid = \"a\"\nendpoint = \"ws://x/?token=LITERAL-SECRET\n",
            0o600,
        );
        let scan = scan_file(&path);
        assert!(scan.candidates.is_empty());
        assert_eq!(scan.diagnostics.len(), 1);
        assert_eq!(scan.diagnostics[0].code, "remote_config_malformed");
        assert!(
            scan.diagnostics[0].message.contains("line 3"),
            "{:?}",
            scan.diagnostics
        );
        assert!(!scan.diagnostics[0].message.contains("LITERAL-SECRET"));
    }

    #[test]
    fn loopback_hosts() {
        for host in ["localhost", "127.0.0.1", "127.1.2.3", "[::1]", "::1"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["10.0.0.1", "example.com", "[::2]", "localhost.example"] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
