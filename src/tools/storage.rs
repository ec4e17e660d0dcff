//! `browser.storage.save` and `browser.storage.load`: a Workspace's cookies and web storage into
//! and out of a `storage_state` Artifact (sensitivity `credential`), in the versioned JSON format
//! of docs/artifacts.md ("Storage state"). Owns the format (parse, check, bounds) and the two
//! tools. Values travel only between the browser and the Artifact's protected bytes: results,
//! events, logs and errors carry counts, origins and JSON paths, never a cookie or storage value.
//!
//! Save needs an isolated Workspace and reads only its own browser context: the jar of the
//! context (`Storage.getCookies {browserContextId}`) and the `localStorage` and `sessionStorage`
//! of the origins its open managed tabs show (`DOMStorage` on each tab's session). Load writes
//! the cookies into the Workspace's context (made now when the Workspace has none yet, so a load
//! before the first navigation is what that navigation finds) and the web storage of each origin
//! into the Workspace's open tabs that show it; an origin no tab shows is reported as not applied.
//! On a shared-profile Workspace, load writes into the profile the user's own tabs share, and is
//! refused without the extra capability `profile.write`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::capture::descriptor_schema;
use super::context::{ToolEnv, WorkspaceScope};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{ControlledTab, TabCalls};
use super::tabs::workspace_isolated;
use crate::artifacts::{ArtifactKind, NewArtifact};
use crate::cdp::dom_storage::{GetDomStorageItems, SetDomStorageItem, StorageId};
use crate::cdp::fetch::{Enable, RequestPattern};
use crate::cdp::page::Navigate;
use crate::cdp::storage::{Cookie, CookieParam, GetContextCookies, SetContextCookies};
use crate::cdp::target::{AttachToTarget, CreateTarget};
use crate::cdp::{BrowserContextId, TargetId};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::store::TargetRef;
use crate::version::now_ms;

/// The `format` word of a storage state.
pub const FORMAT: &str = "browser-pilot.storage-state";
/// The one format version this Broker writes and reads.
pub const VERSION: u64 = 1;
/// Largest storage state read back: far above a real profile's cookies and web storage of a few
/// origins (a browser keeps at most ~180 cookies per domain of ~4 KB, and 5–10 MiB of
/// `localStorage` per origin), small enough to parse in memory at once.
pub const MAX_STATE_BYTES: u64 = 32 << 20;
/// Most cookies in one state.
pub const MAX_COOKIES: usize = 10_000;
/// Most origins in one state.
pub const MAX_ORIGINS: usize = 1_000;
/// Most storage items of one origin's area.
pub const MAX_ITEMS: usize = 100_000;
/// Sensitivity of a saved state.
const STATE_SENSITIVITY: &str = "credential";
/// Timeout of one CDP call of these tools.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

fn origins_schema(applied: bool) -> Value {
    let mut item = json!({
        "origin": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
        "localStorage": {"type": "integer", "minimum": 0},
        "sessionStorage": {"type": "integer", "minimum": 0},
    });
    let mut required = vec!["origin", "localStorage", "sessionStorage"];
    if applied {
        item["applied"] = json!({"type": "boolean"});
        required.push("applied");
    }
    json!({"type": "array", "items": open_object(item, &required)})
}

pub fn defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "browser.storage.save",
            description: "Save an isolated Workspace's cookies and the localStorage and sessionStorage of the origins its open managed tabs show into a Workspace-owned storage_state Artifact (sensitivity credential; values never appear in the result). Reads only the Workspace's own browser context, never the user's profile.",
            capability: "network.read",
            mutating: false,
            input_schema: object(json!({}), &[]),
            output_schema: open_object(
                json!({
                    "artifact": descriptor_schema(),
                    "cookies": {"type": "integer", "minimum": 0},
                    "origins": origins_schema(false),
                    "skippedTargetIds": {"type": "array", "items": {"type": "string"}},
                }),
                &["artifact", "cookies", "origins"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data", "user_file"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Workspace: save),
        },
        ToolDef {
            name: "browser.storage.load",
            description: "Apply a storage state (a storage_state Artifact, or a JSON file imported with artifacts/import) to this Workspace: its cookies into the Workspace's browser context, before or after navigation, and each origin's localStorage and sessionStorage into the open managed tabs showing that origin; in an isolated Workspace the localStorage of an origin no tab shows goes into its context, found by that origin's first page. A shared-profile Workspace also needs the capability profile.write.",
            capability: "network.control",
            mutating: true,
            input_schema: object(
                json!({"artifactId": {"type": "string", "minLength": 1, "maxLength": 256, "description": "The storage state's Artifact id."}}),
                &["artifactId"],
            ),
            output_schema: open_object(
                json!({
                    "cookies": {"type": "integer", "minimum": 0},
                    "origins": origins_schema(true),
                    "isolated": {"type": "boolean"},
                }),
                &["cookies", "origins", "isolated"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Workspace: load),
        },
    ]
}

#[derive(Deserialize)]
pub(super) struct SaveParams {}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LoadParams {
    artifact_id: String,
}

/// One origin's web storage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginState {
    pub local: BTreeMap<String, String>,
    pub session: BTreeMap<String, String>,
}

/// A storage state: the cookies and each origin's web storage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageState {
    pub cookies: Vec<CookieParam>,
    pub origins: BTreeMap<String, OriginState>,
}

/// Why a storage state could not be read: the JSON path and what is wrong, never a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateError {
    pub path: String,
    pub problem: &'static str,
}

fn bad(path: impl Into<String>, problem: &'static str) -> StateError {
    StateError {
        path: path.into(),
        problem,
    }
}

impl StorageState {
    /// The state as the versioned JSON of docs/artifacts.md.
    pub fn to_json(&self) -> Value {
        let cookies: Vec<Value> = (self.cookies.iter())
            .map(|c| {
                let mut cookie = json!({
                    "name": c.name, "value": c.value, "domain": c.domain, "path": c.path,
                    "expires": c.expires.unwrap_or(-1.0), "httpOnly": c.http_only, "secure": c.secure,
                });
                if let Some(same_site) = &c.same_site {
                    cookie["sameSite"] = json!(same_site);
                }
                cookie
            })
            .collect();
        let items = |area: &BTreeMap<String, String>| -> Vec<Value> {
            (area.iter())
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect()
        };
        let origins: Vec<Value> = (self.origins.iter())
            .map(|(origin, state)| {
                json!({"origin": origin, "localStorage": items(&state.local), "sessionStorage": items(&state.session)})
            })
            .collect();
        json!({"format": FORMAT, "version": VERSION, "cookies": cookies, "origins": origins})
    }

    /// Reads a state. `format` and `version` may be absent (a Playwright storage state file has
    /// neither and the same members); present, they must be this format's. Unknown members are
    /// ignored.
    pub fn parse(bytes: &[u8]) -> Result<StorageState, StateError> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|_| bad("", "is not JSON text"))?;
        let root = value
            .as_object()
            .ok_or_else(|| bad("", "is not an object"))?;
        match root.get("format") {
            None => {}
            Some(Value::String(format)) if format == FORMAT => {}
            Some(_) => return Err(bad("format", "is not \"browser-pilot.storage-state\"")),
        }
        match root.get("version") {
            None => {}
            Some(version) if version.as_u64() == Some(VERSION) => {}
            Some(_) => return Err(bad("version", "is not a version this Broker reads (1)")),
        }
        let mut state = StorageState::default();
        let cookies = optional_array(root, "cookies")?;
        if cookies.len() > MAX_COOKIES {
            return Err(bad("cookies", "has more than 10,000 cookies"));
        }
        for (i, cookie) in cookies.iter().enumerate() {
            state
                .cookies
                .push(parse_cookie(cookie, &format!("cookies[{i}]"))?);
        }
        let origins = optional_array(root, "origins")?;
        if origins.len() > MAX_ORIGINS {
            return Err(bad("origins", "has more than 1,000 origins"));
        }
        for (i, entry) in origins.iter().enumerate() {
            let path = format!("origins[{i}]");
            let entry = entry
                .as_object()
                .ok_or_else(|| bad(&path, "is not an object"))?;
            let origin = entry
                .get("origin")
                .and_then(Value::as_str)
                .and_then(normalize_origin)
                .ok_or_else(|| bad(format!("{path}.origin"), "is not an http(s) origin"))?;
            let into = state.origins.entry(origin).or_default();
            read_items(entry, "localStorage", &path, &mut into.local)?;
            read_items(entry, "sessionStorage", &path, &mut into.session)?;
        }
        Ok(state)
    }
}

fn optional_array<'v>(
    object: &'v Map<String, Value>,
    key: &str,
) -> Result<&'v [Value], StateError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(bad(key, "is not an array")),
    }
}

fn parse_cookie(cookie: &Value, path: &str) -> Result<CookieParam, StateError> {
    let cookie = cookie
        .as_object()
        .ok_or_else(|| bad(path, "is not an object"))?;
    let text = |key: &str| -> Result<String, StateError> {
        match cookie.get(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            _ => Err(bad(format!("{path}.{key}"), "is not a string")),
        }
    };
    let flag = |key: &str| -> Result<bool, StateError> {
        match cookie.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(_) => Err(bad(format!("{path}.{key}"), "is not a boolean")),
        }
    };
    let (name, value, domain) = (text("name")?, text("value")?, text("domain")?);
    if name.is_empty() && value.is_empty() || domain.is_empty() {
        return Err(bad(path, "has no name and value, or no domain"));
    }
    let cookie_path = match cookie.get("path") {
        None | Some(Value::Null) => "/".to_owned(),
        Some(_) => text("path")?,
    };
    let expires = match cookie.get("expires") {
        None | Some(Value::Null) => None,
        Some(expires) => match expires.as_f64() {
            Some(seconds) if seconds > 0.0 => Some(seconds),
            Some(_) => None,
            None => return Err(bad(format!("{path}.expires"), "is not a number")),
        },
    };
    let same_site = match cookie.get("sameSite") {
        None | Some(Value::Null) => None,
        Some(Value::String(word)) if ["Strict", "Lax", "None"].contains(&word.as_str()) => {
            Some(word.clone())
        }
        Some(_) => {
            return Err(bad(
                format!("{path}.sameSite"),
                "is not \"Strict\", \"Lax\" or \"None\"",
            ));
        }
    };
    Ok(CookieParam {
        name,
        value,
        domain,
        path: cookie_path,
        secure: flag("secure")?,
        http_only: flag("httpOnly")?,
        same_site,
        expires,
    })
}

fn read_items(
    entry: &Map<String, Value>,
    key: &str,
    path: &str,
    into: &mut BTreeMap<String, String>,
) -> Result<(), StateError> {
    let items =
        optional_array(entry, key).map_err(|error| bad(format!("{path}.{key}"), error.problem))?;
    if items.len() > MAX_ITEMS {
        return Err(bad(format!("{path}.{key}"), "has more than 100,000 items"));
    }
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}.{key}[{i}]");
        let (Some(Value::String(name)), Some(Value::String(value))) =
            (item.get("name"), item.get("value"))
        else {
            return Err(bad(
                item_path,
                "is not {\"name\": string, \"value\": string}",
            ));
        };
        into.insert(name.clone(), value.clone());
    }
    Ok(())
}

/// `scheme://host[:port]` of an http(s) URL or origin, lowercased, default port dropped; `None`
/// for anything else (an opaque `data:` or `about:` document has no storage to carry).
pub fn normalize_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?.to_ascii_lowercase();
    if host_port.is_empty() {
        return None;
    }
    // The port follows the last `:` after an IPv6 literal's `]`, if any.
    let port_at = match host_port.rfind(']') {
        Some(end) => host_port[end..].find(':').map(|i| end + i),
        None => host_port.rfind(':'),
    };
    let host_port = match port_at {
        Some(at) if [default_port, ""].contains(&&host_port[at + 1..]) => {
            host_port[..at].to_owned()
        }
        _ => host_port,
    };
    Some(format!("{scheme}://{host_port}"))
}

fn cookie_param(cookie: Cookie) -> CookieParam {
    CookieParam {
        name: cookie.name,
        value: cookie.value,
        domain: cookie.domain,
        path: cookie.path,
        secure: cookie.secure,
        http_only: cookie.http_only,
        same_site: cookie.same_site,
        expires: match cookie.session || cookie.expires <= 0.0 {
            true => None,
            false => Some(cookie.expires),
        },
    }
}

fn not_isolated() -> ToolError {
    ToolError::from(
        RpcError::new(
            ErrorCode::WorkspaceNotIsolated,
            "browser.storage.save reads only an isolated Workspace's own browser context, never the user's profile",
        )
        .with_remediation(
            RemediationAction::CreateWorkspace,
            "Create the Workspace with isolation: \"context\" and sign in there.",
        ),
    )
}

async fn save(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    _params: SaveParams,
) -> Result<Value, ToolError> {
    if !workspace_isolated(env, scope).await? {
        return Err(not_isolated());
    }
    let calls = TabCalls::watched(env, scope)?;
    scope.gate.pass().await?;
    let mut state = StorageState::default();
    let mut skipped = Vec::new();
    if let Some(context) = env.browser.workspace_context(scope.workspace_id) {
        let command = GetContextCookies {
            browser_context_id: context.clone(),
        };
        let jar = calls.execute(None, &command, CALL_TIMEOUT).await?;
        state.cookies = jar.cookies.into_iter().map(cookie_param).collect();
        for opaque in own_tabs(env, scope, &context) {
            let target = scope.visiting(&opaque);
            let mut tab = match ControlledTab::acquire(env, &target).await {
                Ok(tab) => tab,
                Err(ToolError::Target(_)) => {
                    skipped.push(opaque);
                    continue;
                }
                Err(error) => return Err(error),
            };
            let Some(origin) = normalize_origin(&tab.current_url().await) else {
                continue;
            };
            let session = tab.session().await?;
            let into = state.origins.entry(origin.clone()).or_default();
            for (local, area) in [(true, &mut into.local), (false, &mut into.session)] {
                let command = GetDomStorageItems {
                    storage_id: StorageId {
                        security_origin: origin.clone(),
                        is_local_storage: local,
                    },
                };
                let items = tab.execute(&session, &command, CALL_TIMEOUT).await?;
                area.extend(items.entries);
            }
        }
    }
    let bytes = serde_json::to_vec(&state.to_json())?;
    let new = NewArtifact::new(
        scope.workspace_id,
        ArtifactKind::StorageState,
        "application/json",
        STATE_SENSITIVITY,
    );
    let artifact = env.artifacts.create(new, bytes, now_ms()).await?;
    let mut result = json!({
        "artifact": artifact.to_json(),
        "cookies": state.cookies.len(),
        "origins": origin_counts(&state, None),
    });
    if !skipped.is_empty() {
        result["skippedTargetIds"] = json!(skipped);
    }
    Ok(result)
}

/// The opaque ids of the Workspace's managed tabs in its own context.
fn own_tabs(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    context: &BrowserContextId,
) -> Vec<TargetRef> {
    (env.browser.list_tabs(scope.workspace_id, scope.lease_id))
        .into_iter()
        .filter(|tab| tab.managed && tab.context.as_ref() == Some(context))
        .map(|tab| tab.target_id)
        .collect()
}

fn origin_counts(state: &StorageState, applied: Option<&[String]>) -> Vec<Value> {
    (state.origins.iter())
        .map(|(origin, areas)| {
            let mut row = json!({"origin": origin, "localStorage": areas.local.len(), "sessionStorage": areas.session.len()});
            if let Some(applied) = applied {
                row["applied"] = json!(applied.contains(origin));
            }
            row
        })
        .collect()
}

async fn load(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    params: LoadParams,
) -> Result<Value, ToolError> {
    let isolated = workspace_isolated(env, scope).await?;
    if !isolated && !scope.granted("profile.write") {
        return Err(ToolError::from(
            RpcError::new(
                ErrorCode::CapabilityDenied,
                "loading a storage state into a shared-profile Workspace writes the profile the user's own tabs share; it needs the capability profile.write",
            )
            .with_context("capability", json!("profile.write"))
            .with_remediation(
                RemediationAction::RequestCapability,
                "Request profile.write at initialize, or use a Workspace created with isolation: \"context\".",
            ),
        ));
    }
    let state = read_state(env, scope, &params.artifact_id).await?;
    let calls = TabCalls::watched(env, scope)?;
    scope.gate.pass().await?;
    let context = match isolated {
        true => Some(
            calls
                .isolated_context(env, scope.workspace_id, CALL_TIMEOUT)
                .await?,
        ),
        false => None,
    };
    if !state.cookies.is_empty() {
        let command = SetContextCookies {
            cookies: state.cookies.clone(),
            browser_context_id: context.clone(),
        };
        calls.execute(None, &command, CALL_TIMEOUT).await?;
    }
    let mut applied = Vec::new();
    let tabs: Vec<TargetRef> = (env.browser.list_tabs(scope.workspace_id, scope.lease_id))
        .into_iter()
        .filter(|tab| tab.managed && (context.is_none() || tab.context == context))
        .map(|tab| tab.target_id)
        .collect();
    for opaque in tabs {
        let target = scope.visiting(&opaque);
        let mut tab = match ControlledTab::acquire(env, &target).await {
            Ok(tab) => tab,
            Err(ToolError::Target(_)) => continue,
            Err(error) => return Err(error),
        };
        let Some(origin) = normalize_origin(&tab.current_url().await) else {
            continue;
        };
        let Some(areas) = state.origins.get(&origin) else {
            continue;
        };
        let session = tab.session().await?;
        for (local, area) in [(true, &areas.local), (false, &areas.session)] {
            for (key, value) in area {
                let command = SetDomStorageItem {
                    storage_id: StorageId {
                        security_origin: origin.clone(),
                        is_local_storage: local,
                    },
                    key: key.clone(),
                    value: value.clone(),
                };
                tab.execute(&session, &command, CALL_TIMEOUT).await?;
            }
        }
        if !applied.contains(&origin) {
            applied.push(origin);
        }
    }
    if let Some(context) = &context {
        let unshown: Vec<String> = (state.origins.iter())
            .filter(|(origin, areas)| !areas.local.is_empty() && !applied.contains(origin))
            .map(|(origin, _)| origin.clone())
            .collect();
        applied.extend(seed_local_storage(env, &calls, context, &state, &unshown).await?);
    }
    Ok(json!({
        "cookies": state.cookies.len(),
        "origins": origin_counts(&state, Some(&applied)),
        "isolated": isolated,
    }))
}

/// Writes the `localStorage` of `origins` (no open tab shows them) into the isolated
/// Workspace's `context` through one scratch page of it, closed again: for each origin the page
/// is navigated to an unguessable URL of the origin, which the Fetch controller answers with an
/// empty document (`NetControl::add_seed`; the origin's server sees nothing), and the items are
/// set there, where the context keeps them for every later page of the origin. The origins
/// written.
async fn seed_local_storage(
    env: &ToolEnv,
    calls: &TabCalls,
    context: &BrowserContextId,
    state: &StorageState,
    origins: &[String],
) -> Result<Vec<String>, ToolError> {
    if origins.is_empty() {
        return Ok(Vec::new());
    }
    let create = CreateTarget {
        url: "about:blank".to_owned(),
        new_window: false,
        focus: Some(false),
        browser_context_id: Some(context.clone()),
    };
    let scratch = calls.execute(None, &create, CALL_TIMEOUT).await?.target_id;
    let seeded = seed_through(env, calls, &scratch, state, origins).await;
    if let Err(error) = calls.close_target(&scratch, CALL_TIMEOUT).await {
        tracing::debug!(%error, "closing a storage-state scratch page");
    }
    seeded
}

/// An unguessable path word of a scratch page's URL.
fn seed_token() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source is available");
    let word: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(".browser-pilot-storage-{word}")
}

async fn seed_through(
    env: &ToolEnv,
    calls: &TabCalls,
    scratch: &TargetId,
    state: &StorageState,
    origins: &[String],
) -> Result<Vec<String>, ToolError> {
    let attach = AttachToTarget {
        target_id: scratch.clone(),
        flatten: true,
    };
    let session = calls.execute(None, &attach, CALL_TIMEOUT).await?.session_id;
    let every_request = Enable {
        patterns: vec![RequestPattern {
            url_pattern: "*".to_owned(),
            request_stage: "Request",
            resource_type: None,
        }],
        handle_auth_requests: false,
    };
    calls
        .execute(&session, &every_request, CALL_TIMEOUT)
        .await?;
    let net = env.browser.net();
    let mut seeded = Vec::new();
    for origin in origins {
        let Some(areas) = state.origins.get(origin) else {
            continue;
        };
        let token = seed_token();
        net.add_seed(&token);
        let navigate = Navigate {
            url: format!("{origin}/{token}"),
        };
        let navigated = calls.execute(&session, &navigate, CALL_TIMEOUT).await;
        net.forget_seed(&token);
        if navigated?.error_text.is_some() {
            continue;
        }
        for (key, value) in &areas.local {
            let command = SetDomStorageItem {
                storage_id: StorageId {
                    security_origin: origin.clone(),
                    is_local_storage: true,
                },
                key: key.clone(),
                value: value.clone(),
            };
            calls.execute(&session, &command, CALL_TIMEOUT).await?;
        }
        seeded.push(origin.clone());
    }
    Ok(seeded)
}

/// The state of a `storage_state` Artifact, or of an imported (`upload_input`) JSON file.
async fn read_state(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    artifact_id: &str,
) -> Result<StorageState, ToolError> {
    let (artifact, path) = env
        .artifacts
        .get(scope.workspace_id, artifact_id, now_ms())
        .await?;
    if !matches!(
        artifact.kind,
        ArtifactKind::StorageState | ArtifactKind::UploadInput
    ) {
        return Err(ToolError::from(
            RpcError::new(
                ErrorCode::ArtifactKindNotAllowed,
                format!(
                    "a {} Artifact is not a storage state",
                    artifact.kind.as_str()
                ),
            )
            .with_context("kind", json!(artifact.kind.as_str()))
            .with_context("allowed", json!(["storage_state", "upload_input"])),
        ));
    }
    if artifact.byte_len > MAX_STATE_BYTES {
        return Err(ToolError::from(
            RpcError::new(
                ErrorCode::StorageStateInvalid,
                "the storage state is larger than 32 MiB",
            )
            .with_context("limit", json!(MAX_STATE_BYTES)),
        ));
    }
    let bytes = tokio::task::spawn_blocking(move || std::fs::read(path))
        .await
        .map_err(|_| {
            RpcError::new(
                ErrorCode::InternalError,
                "reading the storage state stopped",
            )
        })?
        .map_err(|error| {
            tracing::warn!(%error, "cannot read a storage state Artifact");
            RpcError::new(
                ErrorCode::ArtifactNotFound,
                "the storage state's bytes are gone",
            )
        })?;
    StorageState::parse(&bytes).map_err(|error| {
        let message = match error.path.is_empty() {
            true => format!("the storage state {}", error.problem),
            false => format!("the storage state's {} {}", error.path, error.problem),
        };
        ToolError::from(
            RpcError::new(ErrorCode::StorageStateInvalid, message)
                .with_context("path", json!(error.path)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalized() {
        let check = |url: &str, expect: Option<&str>| {
            assert_eq!(normalize_origin(url).as_deref(), expect, "{url}");
        };
        check("http://127.0.0.1:8080/a?b#c", Some("http://127.0.0.1:8080"));
        check("HTTPS://Example.COM:443/", Some("https://example.com"));
        check("http://example.com:80", Some("http://example.com"));
        check(
            "http://user:pw@example.com:81/x",
            Some("http://example.com:81"),
        );
        check("http://[::1]:80/", Some("http://[::1]"));
        check("about:blank", None);
        check("data:text/html,x", None);
        check("file:///tmp/x", None);
    }

    #[test]
    fn a_state_survives_its_own_json() {
        let mut state = StorageState::default();
        state.cookies.push(CookieParam {
            name: "sid".into(),
            value: "secret".into(),
            domain: "127.0.0.1".into(),
            path: "/".into(),
            secure: false,
            http_only: true,
            same_site: Some("Lax".into()),
            expires: None,
        });
        let origin = state
            .origins
            .entry("http://127.0.0.1:8080".into())
            .or_default();
        origin.local.insert("token".into(), "t".into());
        origin.session.insert("tab".into(), "s".into());
        let bytes = serde_json::to_vec(&state.to_json()).unwrap();
        assert_eq!(StorageState::parse(&bytes).unwrap(), state);
        let json = state.to_json();
        assert_eq!(json["format"], FORMAT);
        assert_eq!(json["version"], 1);
        assert_eq!(json["cookies"][0]["expires"], -1.0);
    }

    /// A Playwright storage state (no format or version, the same members) is read as is.
    #[test]
    fn a_playwright_state_is_read() {
        let text = r#"{"cookies":[{"name":"a","value":"1","domain":".example.com","path":"/","expires":1900000000,"httpOnly":false,"secure":true,"sameSite":"None"}],"origins":[{"origin":"https://example.com","localStorage":[{"name":"k","value":"v"}]}]}"#;
        let state = StorageState::parse(text.as_bytes()).unwrap();
        assert_eq!(state.cookies[0].expires, Some(1_900_000_000.0));
        assert_eq!(state.cookies[0].same_site.as_deref(), Some("None"));
        assert_eq!(state.origins["https://example.com"].local["k"], "v");
    }

    /// Errors name the path and never quote the value that was wrong.
    #[test]
    fn bad_states_name_the_path_and_never_the_value() {
        let check = |text: &str, path: &str| {
            let error = StorageState::parse(text.as_bytes()).unwrap_err();
            assert_eq!(error.path, path, "{text}");
            assert!(!error.problem.contains("s3cret"), "{text}");
        };
        check("not json s3cret", "");
        check("[]", "");
        check(r#"{"version":2}"#, "version");
        check(r#"{"format":"other"}"#, "format");
        check(r#"{"cookies":{}}"#, "cookies");
        check(
            r#"{"cookies":[{"name":"a","value":5,"domain":"x"}]}"#,
            "cookies[0].value",
        );
        check(
            r#"{"cookies":[{"name":"a","value":"s3cret","domain":"x","sameSite":"s3cret"}]}"#,
            "cookies[0].sameSite",
        );
        check(
            r#"{"origins":[{"origin":"data:s3cret"}]}"#,
            "origins[0].origin",
        );
        check(
            r#"{"origins":[{"origin":"http://a","localStorage":[{"name":"k"}]}]}"#,
            "origins[0].localStorage[0]",
        );
    }
}
