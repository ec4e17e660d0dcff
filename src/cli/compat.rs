//! The one-shot compatibility session of a `bp` invocation, on the host adapter library: one
//! short bridge Connection as client `browser-pilot-cli` with an `instanceId` stable for this
//! home, the compatibility Workspace (idempotent `clientKey` `bp:<browserId>`), and a short
//! Lease released at exit.
//!
//! Owns how a `bp` process finds its state in the Broker between invocations. Nothing is ever
//! written to disk: the current tab and the latest Observation are read back from the
//! Workspace's own record in the Broker — its event journal names each completed Command with
//! its target (`command.status`), and `commands/get` returns that Command's recorded result,
//! whose `observationId` is still the Broker's. It uses only the public protocol through
//! `crate::adapter`; it never prints (see `output.rs`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::adapter::{
    BridgeSession, ClientIdentity, LaunchSpec, Lease, LeaseOptions, SessionOptions, ToolCall,
    ToolOutcome, Workspace, WorkspaceOptions,
};
use crate::home::Home;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::ids::{format_cursor, parse_cursor};

/// The Principal's client id of every `bp` invocation.
pub const CLIENT_ID: &str = "browser-pilot-cli";
/// The compatibility Lease: short, renewed while the invocation runs, released at exit.
const LEASE_TTL_MS: u64 = 15_000;
/// How long a second `bp` waits for a tab another Lease controls (`BP_CONTROL_WAIT_MS`).
const CONTROL_WAIT: Duration = Duration::from_secs(10);
const CONTROL_RETRY: Duration = Duration::from_millis(200);
/// How far back the journal is read for the current tab: events per page and pages.
const JOURNAL_PAGE: u64 = 500;
const JOURNAL_PAGES: u64 = 10;
/// Recorded Commands read back per lookup before giving up on finding an Observation.
const MAX_COMMAND_LOOKUPS: usize = 8;

/// Tools whose result carries a fresh Observation (refs for the next `bp` command).
const OBSERVING_TOOLS: &[&str] = &[
    "browser.observe",
    "browser.click",
    "browser.press",
    "browser.type",
    "browser.keyboard",
    "browser.scroll",
    "browser.dropdown.select",
    "browser.hover",
    "browser.drag",
    "browser.upload",
];

/// Tools after which their target is no longer anyone's current tab.
const LEAVING_TOOLS: &[&str] = &["browser.tabs.close", "browser.tabs.release"];

/// The `instanceId` of this home's `bp`: stable for the home (each home belongs to one user
/// and has its own Broker), so every invocation is the same Principal and finds the same
/// Workspace.
pub fn instance_id(home: &Home) -> String {
    let hex = crate::hex::sha256(home.root().as_os_str().as_encoded_bytes());
    format!("cli:{}", &hex[..16])
}

/// The `browser-pilot` executable beside this `bp`.
pub fn sibling_executable() -> Result<PathBuf, RpcError> {
    let me = std::env::current_exe().map_err(|error| {
        RpcError::new(
            ErrorCode::BrokerUnavailable,
            format!("cannot resolve bp's own path: {error}"),
        )
    })?;
    let name = format!("browser-pilot{}", std::env::consts::EXE_SUFFIX);
    let sibling = me.with_file_name(name);
    match sibling.is_file() {
        true => Ok(sibling),
        false => Err(RpcError::new(
            ErrorCode::BrokerUnavailable,
            format!(
                "the browser-pilot executable is not next to bp ({})",
                sibling.display()
            ),
        )
        .with_remediation(
            RemediationAction::InstallExecutable,
            "Install bp and browser-pilot into the same directory.",
        )),
    }
}

/// What the Broker remembers for this Workspace: the current tab and its latest Observation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Current {
    pub target_id: Option<String>,
    pub observation_id: Option<String>,
}

/// One invocation's session.
pub struct Compat {
    pub session: BridgeSession,
    pub workspace: Workspace,
    pub lease: Lease,
    calls: AtomicU64,
    control_wait: Duration,
    /// Tabs this invocation acted on; their control is handed back at exit.
    used: std::sync::Mutex<Vec<String>>,
}

/// What the user let this invocation have: the extra capabilities (`--allow` / `BP_ALLOW`) and
/// the URL policy of its Workspace (`--url-allow`, `--url-block` / `BP_URL_ALLOW`,
/// `BP_URL_BLOCK`).
#[derive(Debug, Clone, Default)]
pub struct Grants {
    pub extras: Vec<String>,
    /// `{allow, block}`, or `None` for no policy.
    pub url_policy: Option<Value>,
}

/// The compatibility Workspace's `clientKey`: `bp:BROWSER`, plus the digest of the URL policy
/// when there is one.
fn workspace_key(browser_id: &str, url_policy: Option<&Value>) -> String {
    match url_policy {
        None => format!("bp:{browser_id}"),
        Some(policy) => {
            let digest = crate::hex::sha256(policy.to_string().as_bytes());
            format!("bp:{browser_id}:policy:{}", &digest[..16])
        }
    }
}

impl Compat {
    /// Launches the bridge asking for the contract's six capabilities plus the granted extras,
    /// picks the browser (`preference`, else a connected one, else the Broker's selection), and
    /// takes the compatibility Workspace and a Lease. A URL policy gets a Workspace of its own
    /// (its `clientKey` names the policy's digest): a Workspace keeps its policy for life, so
    /// invocations with another policy, or none, never share one.
    pub async fn open(
        home: &Home,
        preference: Option<&str>,
        grants: &Grants,
    ) -> Result<Compat, RpcError> {
        let extras = &grants.extras;
        let mut spec = LaunchSpec::new(sibling_executable()?);
        spec.browser = preference.map(str::to_owned);
        let identity = ClientIdentity {
            id: CLIENT_ID.to_owned(),
            name: "bp".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instance_id: instance_id(home),
        };
        let mut options = SessionOptions::default();
        for extra in extras {
            if !options.capabilities.contains(extra) {
                options.capabilities.push(extra.clone());
            }
        }
        let (session, _notifications) = BridgeSession::launch(&spec, &identity, &options).await?;
        let discovered = session
            .call_connection_tool(&ToolCall::new("browser.discover", json!({}), "discover"))
            .await?;
        let browser_id = choose_browser(&discovered.result, preference)?;
        let workspace = session
            .create_workspace(&WorkspaceOptions {
                client_key: Some(workspace_key(&browser_id, grants.url_policy.as_ref())),
                browser_id: Some(browser_id),
                url_policy: grants.url_policy.clone(),
            })
            .await?;
        let lease = workspace
            .create_lease(&LeaseOptions {
                ttl_ms: Some(LEASE_TTL_MS),
                client_key: None,
            })
            .await?;
        let control_wait = std::env::var("BP_CONTROL_WAIT_MS")
            .ok()
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or(CONTROL_WAIT, Duration::from_millis);
        Ok(Compat {
            session,
            workspace,
            lease,
            calls: AtomicU64::new(1),
            control_wait,
            used: std::sync::Mutex::new(Vec::new()),
        })
    }

    fn next_call_id(&self) -> String {
        format!("bp-{}", self.calls.fetch_add(1, Ordering::SeqCst))
    }

    /// A Workspace or target tool call. A tab another live Lease controls is waited for (a
    /// bounded time, new Command each attempt: the refused one never ran); then its error.
    pub async fn tool(
        &self,
        name: &str,
        arguments: Value,
        target_id: Option<&str>,
    ) -> Result<ToolOutcome, RpcError> {
        self.tool_within(name, arguments, target_id, None).await
    }

    /// [`Compat::tool`] with the Command's own deadline (`bp wait --timeout`).
    pub async fn tool_within(
        &self,
        name: &str,
        arguments: Value,
        target_id: Option<&str>,
        deadline_ms: Option<u64>,
    ) -> Result<ToolOutcome, RpcError> {
        if let Some(target) = target_id {
            let mut used = self.used.lock().expect("used lock");
            if !used.iter().any(|t| t == target) {
                used.push(target.to_owned());
            }
        }
        let started = Instant::now();
        loop {
            let mut call = ToolCall::new(name, arguments.clone(), self.next_call_id())
                .on_target(target_id.map(str::to_owned));
            call.deadline_ms = deadline_ms;
            match self.workspace.call(&self.lease, &call).await {
                Err(error)
                    if error.code == ErrorCode::TargetControlledElsewhere
                        && started.elapsed() < self.control_wait =>
                {
                    tokio::time::sleep(CONTROL_RETRY).await;
                }
                Err(mut error) if error.code == ErrorCode::TargetControlledElsewhere => {
                    error.message = format!(
                        "{} (waited {} s for it)",
                        error.message,
                        self.control_wait.as_secs_f64().round()
                    );
                    return Err(error);
                }
                other => return other,
            }
        }
    }

    /// `browser.connect` for the Workspace's browser (reused when already connected).
    pub async fn connect(&self, browser_id: Option<&str>) -> Result<ToolOutcome, RpcError> {
        let arguments = match browser_id {
            Some(id) => json!({"browserId": id}),
            None => json!({}),
        };
        self.tool("browser.connect", arguments, None).await
    }

    /// The current tab: the target of the newest completed target Command of this Workspace
    /// that is still listed, and the latest Observation taken on it.
    pub async fn current(&self) -> Result<Current, RpcError> {
        let listed = self.tab_ids().await?;
        let events = self.recent_commands().await?;
        let mut current = Current::default();
        for event in events.iter().rev() {
            let Some(target) = event["targetId"].as_str() else {
                continue;
            };
            let method = event["payload"]["method"].as_str().unwrap_or("");
            if LEAVING_TOOLS.contains(&method) || !listed.iter().any(|t| t == target) {
                continue;
            }
            current.target_id = Some(target.to_owned());
            break;
        }
        let Some(target) = current.target_id.clone() else {
            return Ok(current);
        };
        let mut lookups = 0;
        for event in events.iter().rev() {
            let method = event["payload"]["method"].as_str().unwrap_or("");
            if event["targetId"].as_str() != Some(target.as_str())
                || !OBSERVING_TOOLS.contains(&method)
            {
                continue;
            }
            if lookups == MAX_COMMAND_LOOKUPS {
                break;
            }
            lookups += 1;
            let Some(command_id) = event["payload"]["commandId"].as_str() else {
                continue;
            };
            let recorded = self
                .session
                .request(
                    "commands/get",
                    json!({"commandId": command_id, "workspaceId": self.workspace.id()}),
                )
                .await;
            if let Ok(recorded) = recorded
                && let Some(observation) = recorded["result"]["observationId"].as_str()
            {
                current.observation_id = Some(observation.to_owned());
                break;
            }
        }
        Ok(current)
    }

    /// The current tab, or the error telling the user how to get one.
    pub async fn current_target(&self) -> Result<(String, Current), RpcError> {
        let current = self.current().await?;
        match current.target_id.clone() {
            Some(target) => Ok((target, current)),
            None => Err(match self.workspace.previous() {
                // The Broker reclaimed the previous compatibility Workspace as idle and closed
                // its tabs: say so, not merely that there is no tab.
                Some(previous) => RpcError::new(
                    ErrorCode::WorkspaceNotFound,
                    format!(
                        "bp's Workspace expired: nothing used it for {} s, so the Broker \
                         reclaimed it and closed the tabs bp had opened",
                        previous["idleLimitMs"].as_i64().unwrap_or_default() / 1000
                    ),
                )
                .with_context("state", json!("expired"))
                .with_context("reason", previous["reason"].clone())
                .with_context("idleLimitMs", previous["idleLimitMs"].clone())
                .with_context("releasedAt", previous["releasedAt"].clone()),
                None => RpcError::invalid_params("there is no current tab"),
            }
            .with_remediation(
                RemediationAction::OpenTab,
                "Open one with `bp open URL` or pick one with `bp tabs` and `bp tab N`.",
            )),
        }
    }

    /// The latest Observation of the current tab, for ref commands.
    pub async fn current_observation(&self) -> Result<(String, String), RpcError> {
        let (target, current) = self.current_target().await?;
        match current.observation_id {
            Some(observation) => Ok((target, observation)),
            None => Err(RpcError::new(
                ErrorCode::ObservationNotFound,
                "the current tab has no observation whose refs could be used",
            )
            .with_remediation(
                RemediationAction::Observe,
                "Run `bp observe` and use a ref it prints.",
            )),
        }
    }

    /// The opaque ids `browser.tabs.list` returns for this Workspace, in its order.
    pub async fn tab_ids(&self) -> Result<Vec<String>, RpcError> {
        let tabs = self.tool("browser.tabs.list", json!({}), None).await?;
        Ok(tabs.result["tabs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tab| tab["targetId"].as_str().map(str::to_owned))
            .collect())
    }

    /// The newest events of the Workspace's journal (oldest first), up to the bounded window.
    pub async fn recent_events(&self, window: u64) -> Result<Vec<Value>, RpcError> {
        let got = self.workspace.get().await?;
        let latest = got["eventCursor"]
            .as_str()
            .and_then(parse_cursor)
            .unwrap_or(0);
        let mut cursor = format_cursor(latest.saturating_sub(window));
        let mut events = Vec::new();
        for _ in 0..(window / JOURNAL_PAGE + 1) {
            let page = self
                .session
                .request(
                    "events/poll",
                    json!({"workspaceId": self.workspace.id(), "cursor": cursor, "limit": JOURNAL_PAGE}),
                )
                .await;
            let page = match page {
                Ok(page) => page,
                Err(error) if error.code == ErrorCode::CursorExpired => {
                    let earliest = error
                        .context
                        .as_ref()
                        .and_then(|c| c.get("earliestCursor"))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    match earliest {
                        Some(earliest) if earliest != cursor => {
                            cursor = earliest;
                            continue;
                        }
                        _ => return Err(error),
                    }
                }
                Err(error) => return Err(error),
            };
            events.extend(page["events"].as_array().cloned().unwrap_or_default());
            cursor = page["nextCursor"].as_str().unwrap_or(&cursor).to_owned();
            if page["hasMore"] != true {
                break;
            }
        }
        Ok(events)
    }

    /// Completed `command.status` events of target Commands, oldest first.
    async fn recent_commands(&self) -> Result<Vec<Value>, RpcError> {
        let events = self.recent_events(JOURNAL_PAGE * JOURNAL_PAGES).await?;
        Ok(events
            .into_iter()
            .filter(|e| {
                e["type"] == "command.status"
                    && e["payload"]["status"] == "completed"
                    && e["targetId"].is_string()
            })
            .collect())
    }

    /// Hands back control of the tabs this invocation used (so another host, or the next `bp`,
    /// takes them without waiting for a stale Lease to be noticed), releases the Lease, then
    /// ends the bridge; the Workspace and its Observations stay in the Broker.
    pub async fn close(self) {
        let used = std::mem::take(&mut *self.used.lock().expect("used lock"));
        for target in used {
            let call = ToolCall::new("browser.tabs.release", json!({}), self.next_call_id())
                .on_target(Some(target));
            let _ = self.workspace.call(&self.lease, &call).await;
        }
        let _ = self.lease.release().await;
        self.session.shutdown().await;
    }

    /// Releases the compatibility Workspace (its managed tabs close), then ends the bridge.
    pub async fn release_workspace(self) -> Result<Value, RpcError> {
        let _ = self.lease.release().await;
        let released = self.workspace.release().await;
        self.session.shutdown().await;
        released
    }
}

/// The browser this invocation works with: the user's preference (candidate id, product or
/// channel), else one already connected, else the Broker's selection, else the first ready one.
fn choose_browser(discovered: &Value, preference: Option<&str>) -> Result<String, RpcError> {
    let browsers: Vec<&Value> = discovered["browsers"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let id = |b: &&Value| b["id"].as_str().map(str::to_owned);
    if let Some(preference) = preference {
        return browsers
            .iter()
            .find(|b| {
                [&b["id"], &b["product"], &b["channel"]]
                    .iter()
                    .any(|v| v.as_str() == Some(preference))
            })
            .and_then(id)
            .ok_or_else(|| {
                RpcError::invalid_params(format!("no browser candidate matches {preference:?}"))
                    .with_remediation(
                        RemediationAction::Discover,
                        "Run `bp status` for the candidates.",
                    )
            });
    }
    let with_state = |state: &str| browsers.iter().find(|b| b["state"] == state).and_then(id);
    with_state("connected")
        .or_else(|| discovered["selectedBrowserId"].as_str().map(str::to_owned))
        .or_else(|| with_state("ready"))
        .or_else(|| browsers.first().and_then(id))
        .ok_or_else(|| RpcError::new(ErrorCode::BrowserNotReady, "no browser candidate was found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browser_choice() {
        let discovered = json!({"selectedBrowserId": "browser:b", "browsers": [
            {"id": "browser:a", "product": "chrome", "channel": "stable", "state": "ready"},
            {"id": "browser:b", "product": "chromium", "channel": "managed", "state": "needs_setup"},
        ]});
        assert_eq!(choose_browser(&discovered, None).unwrap(), "browser:b");
        assert_eq!(
            choose_browser(&discovered, Some("chrome")).unwrap(),
            "browser:a"
        );
        assert_eq!(
            choose_browser(&discovered, Some("managed")).unwrap(),
            "browser:b"
        );
        assert_eq!(
            choose_browser(&discovered, Some("firefox"))
                .unwrap_err()
                .code,
            ErrorCode::InvalidParams
        );
        let connected = json!({"selectedBrowserId": "browser:b", "browsers": [
            {"id": "browser:a", "state": "connected"}, {"id": "browser:b", "state": "ready"}]});
        assert_eq!(choose_browser(&connected, None).unwrap(), "browser:a");
    }

    #[test]
    fn instance_ids_are_stable_per_home() {
        let a = Home::at(PathBuf::from("/tmp/a"));
        let b = Home::at(PathBuf::from("/tmp/b"));
        assert_eq!(
            instance_id(&a),
            instance_id(&Home::at(PathBuf::from("/tmp/a")))
        );
        assert_ne!(instance_id(&a), instance_id(&b));
        assert!(instance_id(&a).starts_with("cli:"));
    }
}
