//! Browser connection and tab tools: `browser.connect`, `browser.open`, `browser.navigate`,
//! `browser.tabs.list`, `browser.tabs.release`, `browser.tabs.close`.
//!
//! Load waits follow the tab's lifecycle events (`session::LoadBook`) and the reported URL and
//! title come from the browser's navigation history: nothing here evaluates script in the
//! page's main world, so a page that replaces `JSON.stringify` or its `document.title` getter
//! can neither spoof what these tools report nor make a load look stalled.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::Blocked;
use super::context::NoParams;
use super::context::TargetError;
use super::context::{TargetScope, ToolEnv, WorkspaceScope};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{Awaited, ControlledTab, PageState, TabCalls};
use crate::events::Emit;
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::store::TargetRef;

/// Longest URL accepted by `browser.open` / `browser.navigate`.
const MAX_URL_CHARS: usize = 8192;
/// Timeout of one CDP call made by these tools.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// URL schemes `browser.open` accepts. `javascript:` and browser-internal pages are refused.
const ALLOWED_SCHEMES: &[&str] = &["http:", "https:", "about:", "data:", "file:"];

fn url_schema() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": MAX_URL_CHARS, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Absolute http(s) URL to load in the tab."})
}

fn page_result_schema() -> Value {
    open_object(
        json!({
            "targetId": {"type": "string"},
            "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
            "title": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
            "managed": {"type": "boolean"},
            "isolated": {"type": "boolean"},
            "loadState": {"enum": ["complete", "interactive", "loading", "timeout"]},
        }),
        &["targetId", "url", "title", "loadState"],
    )
}

pub fn defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "browser.connect",
            description: "Connect the Broker to the Workspace's browser (or `browserId`). The only call that opens the browser's debugging connection; Chrome may ask the user to allow it. Reuses a live connection. Returns the connection generation.",
            capability: "browser.control",
            mutating: false,
            input_schema: object(
                json!({"browserId": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Candidate id from browser.discover to connect to."}}),
                &[],
            ),
            output_schema: open_object(
                json!({
                    "browserId": {"type": "string"},
                    "browserConnectionGeneration": {"type": "integer"},
                    "state": {"const": "connected"},
                    "reused": {"type": "boolean"},
                }),
                &["browserId", "browserConnectionGeneration", "state"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &[],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Workspace: connect),
        },
        ToolDef {
            name: "browser.open",
            description: "Open a URL in a new managed tab of this Workspace, in a window of its own that is shown without being activated (the user's window keeps the focus; on a browser Browser Pilot launched, the first one may take over its untouched start tab instead), or, with an envelope `targetId`, navigate that tab. Waits for the page to load (bounded).",
            capability: "browser.control",
            mutating: true,
            input_schema: object(json!({"url": url_schema()}), &["url"]),
            output_schema: page_result_schema(),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Workspace: open),
        },
        ToolDef {
            name: "browser.navigate",
            description: "Go back, forward, reload, or to a URL (`goto`) in a controlled tab, and wait for the page to load (bounded).",
            capability: "browser.control",
            mutating: true,
            input_schema: object(
                json!({"action": {"enum": ["back", "forward", "reload", "goto"], "description": "History step, reload, or goto the given url."}, "url": url_schema()}),
                &["action"],
            ),
            output_schema: page_result_schema(),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: navigate),
        },
        ToolDef {
            name: "browser.tabs.list",
            description: "Every eligible ordinary user tab plus this Workspace's managed tabs, each under this Workspace's opaque targetId, with whether this Lease or another one controls it.",
            capability: "browser.control",
            mutating: false,
            input_schema: object(json!({}), &[]),
            output_schema: open_object(
                json!({"tabs": {"type": "array", "items": open_object(json!({
                    "targetId": {"type": "string"},
                    "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                    "title": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                    "managed": {"type": "boolean"},
                    "controlled": {"type": "boolean"},
                    "controlledElsewhere": {"type": "boolean"},
                    "openerTargetId": {"type": ["string", "null"]},
                    "isolated": {"type": "boolean"},
                }), &["targetId", "url", "title", "managed", "controlled", "controlledElsewhere"])}}),
                &["tabs"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Workspace: tabs_list),
        },
        ToolDef {
            name: "browser.tabs.release",
            description: "Hand control of a tab back without closing it; emits target_control.released. Another Lease may then acquire the tab with its own targetId. Never accepts a destination Lease.",
            capability: "browser.control",
            mutating: true,
            input_schema: object(json!({}), &[]),
            output_schema: open_object(
                json!({"targetId": {"type": "string"}, "released": {"type": "boolean"}}),
                &["targetId", "released"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &[],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Target: tabs_release),
        },
        ToolDef {
            name: "browser.tabs.close",
            description: "Close a managed tab of this Workspace. User tabs are never closed (target_not_managed).",
            capability: "browser.control",
            mutating: true,
            input_schema: object(json!({}), &[]),
            output_schema: open_object(
                json!({"targetId": {"type": "string"}, "closed": {"type": "boolean"}}),
                &["targetId", "closed"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &[],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: tabs_close),
        },
    ]
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConnectParams {
    browser_id: Option<String>,
}

#[derive(Deserialize)]
struct OpenParams {
    url: Option<String>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum NavigateAction {
    Back,
    Forward,
    Reload,
    Goto,
}

#[derive(Deserialize)]
struct NavigateParams {
    action: NavigateAction,
    url: Option<String>,
}

async fn connect(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    params: ConnectParams,
) -> Result<Value, ToolError> {
    let browser_id = match params.browser_id {
        Some(id) => id,
        None => workspace_browser(env, scope).await?,
    };
    scope.gate.pass_connecting().await?;
    let connected = env.browser.connect(scope.workspace_id, &browser_id).await?;
    Ok(json!({
        "browserId": connected.browser_id,
        "browserConnectionGeneration": connected.generation,
        "state": "connected",
        "reused": connected.reused,
    }))
}

async fn workspace_browser(env: &ToolEnv, scope: &WorkspaceScope<'_>) -> Result<String, ToolError> {
    Ok(workspace_row(env, scope).await?.browser_id)
}

/// Whether the Workspace was created with `isolation: "context"`: its managed tabs live in a
/// browser context of its own (`session::contexts`).
pub(super) async fn workspace_isolated(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
) -> Result<bool, ToolError> {
    Ok(workspace_row(env, scope).await?.options.isolated)
}

/// The Workspace's active row.
async fn workspace_row(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
) -> Result<crate::store::WorkspaceRow, ToolError> {
    let store = env.store.clone();
    let principal = scope.principal.clone();
    let id = scope.workspace_id.to_owned();
    let lookup = store
        .call_read(move |store| store.get_workspace(&principal, &id))
        .await
        .map_err(|error| {
            tracing::error!(%error, "cannot look up the Workspace's browser");
            RpcError::new(ErrorCode::InternalError, "internal store error")
        })?;
    match lookup {
        crate::store::WorkspaceLookup::Active(row) => Ok(row),
        _ => Err(ToolError::from(RpcError::new(
            ErrorCode::WorkspaceNotFound,
            "no active Workspace with this id for this client",
        ))),
    }
}

fn check_url(url: &str) -> Result<(), ToolError> {
    let lower = url.trim_start().to_ascii_lowercase();
    match ALLOWED_SCHEMES
        .iter()
        .any(|scheme| lower.starts_with(scheme))
    {
        true => Ok(()),
        false => Err(ToolError::from(
            RpcError::invalid_params(format!(
                "unsupported URL scheme; allowed: {}",
                ALLOWED_SCHEMES.join(" ")
            ))
            .with_context("path", json!("arguments.url")),
        )),
    }
}

/// `url_blocked` when the Workspace's URL policy does not admit `url` (docs/network.md, "URL
/// policy"): asked before dispatch, so a refused navigation sends nothing to the browser.
fn check_policy(env: &ToolEnv, workspace_id: &str, url: &str) -> Result<(), ToolError> {
    let Some(policy) = env.browser.net().policy(workspace_id) else {
        return Ok(());
    };
    policy.decide(url).map_err(|refusal| url_blocked(&refusal))
}

fn url_blocked(refusal: &Blocked) -> ToolError {
    let mut error = RpcError::new(
        ErrorCode::UrlBlocked,
        "the Workspace's urlPolicy does not admit this URL; nothing was loaded",
    )
    .with_context("reason", json!(refusal.reason()));
    if let Blocked::BlockList(pattern) = refusal {
        error = error.with_context("pattern", json!(pattern));
    }
    ToolError::from(error)
}

async fn open(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    params: OpenParams,
) -> Result<Value, ToolError> {
    let url = params.url.unwrap_or_else(|| "about:blank".to_owned());
    check_url(&url)?;
    check_policy(env, scope.workspace_id, &url)?;
    let isolated = workspace_isolated(env, scope).await?;
    if let Some(target) = scope.target() {
        let mut tab = ControlledTab::acquire(env, &target).await?;
        let mut result = goto(env, &mut tab, &target, target.target_id, &url).await?;
        if isolated {
            result["isolated"] = json!(tab_isolated(env, &target, target.target_id));
        }
        return Ok(result);
    }
    let client = TabCalls::watched(env, scope)?;
    let (workspace_id, lease_id) = (scope.workspace_id, scope.lease_id);
    scope.gate.pass().await?;
    // An isolated Workspace's managed tabs open in its own browser context, made at its first
    // managed navigation; a refused context fails the call, never falling back to the profile.
    let context = match isolated {
        true => Some(
            client
                .isolated_context(env, workspace_id, CALL_TIMEOUT)
                .await?,
        ),
        false => None,
    };
    // On a browser the project launched, the first managed navigation of a Workspace in the
    // profile takes the untouched start tab as its dedicated window (docs/architecture.md,
    // "The start tab"); an isolated Workspace's tabs are always its context's own.
    let adopted = match isolated {
        true => None,
        false => env.browser.adopt_start_tab(workspace_id, lease_id).await,
    };
    let opaque = match adopted {
        Some(opaque) => opaque,
        None => {
            // Every other managed tab opens as the front tab of a window of its own, shown
            // without being activated: the user's window keeps the focus, and the tab renders,
            // so it can be captured at once (docs/cdp.md "Background driving"). Create blank,
            // then navigate through the tab's own session: `Page.navigate` answers at commit,
            // so the load wait below reads the new document, never the initial about:blank.
            let target = client
                .create_background_window("about:blank", context.as_ref(), CALL_TIMEOUT)
                .await?;
            (env.browser).adopt_created(&target, &url, workspace_id, lease_id, context.as_ref())
        }
    };
    let mut attached = Emit::new(
        workspace_id,
        "target.attached",
        json!({"targetId": opaque, "managed": true, "popup": false}),
    );
    attached.target_id = Some(opaque.to_string());
    attached.lease_id = Some(lease_id.to_string());
    let _ = env.events.emit(attached).await;
    let (target, handle) = env.browser.control(workspace_id, lease_id, &opaque).await?;
    env.browser.apply_network_rules(&target).await;
    let mut tab = ControlledTab::new(client, handle.acquire().await);
    let mut result = goto(env, &mut tab, scope, &opaque, &url).await?;
    result["targetId"] = json!(opaque);
    result["managed"] = json!(true);
    if isolated {
        result["isolated"] = json!(true);
    }
    Ok(result)
}

/// Whether the tab behind an opaque id is in the Workspace's own browser context (false for a
/// user tab an isolated Workspace controls).
fn tab_isolated(env: &ToolEnv, scope: &WorkspaceScope<'_>, opaque: &TargetRef) -> bool {
    let own = env.browser.workspace_context(scope.workspace_id);
    own.is_some() && env.browser.tab_context(scope.workspace_id, opaque) == own
}

async fn navigate(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    NavigateParams { action, url }: NavigateParams,
) -> Result<Value, ToolError> {
    if action == NavigateAction::Goto {
        let url = url.as_deref().ok_or_else(|| {
            RpcError::invalid_params("\"url\" is required for goto")
                .with_context("path", json!("arguments.url"))
        })?;
        check_url(url)?;
        check_policy(env, scope.workspace_id, url)?;
    }
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let session = tab.session().await?;
    if action == NavigateAction::Reload && env.browser.net().policy(scope.workspace_id).is_some() {
        // A user tab may have been on a URL the policy refuses before this Workspace took it.
        let history = tab
            .calls()
            .navigation_history(&session, CALL_TIMEOUT)
            .await?;
        if let Some(current) = history.entry(0) {
            check_policy(env, scope.workspace_id, &current.url)?;
        }
    }
    tab.begin_navigation();
    let dispatched = tokio::time::Instant::now();
    let awaited = match action {
        NavigateAction::Goto => {
            let mut result = goto(
                env,
                &mut tab,
                scope,
                scope.target_id,
                url.as_deref().unwrap_or("about:blank"),
            )
            .await?;
            if workspace_isolated(env, scope).await? {
                result["isolated"] = json!(tab_isolated(env, scope, scope.target_id));
            }
            return Ok(result);
        }
        NavigateAction::Reload => {
            let mark = tab.load_mark();
            tab.calls().reload(&session, CALL_TIMEOUT).await?;
            Awaited::NewDocument(mark)
        }
        back_or_forward => {
            let direction = match back_or_forward {
                NavigateAction::Back => "back",
                _ => "forward",
            };
            let history = tab
                .calls()
                .navigation_history(&session, CALL_TIMEOUT)
                .await?;
            let offset = if direction == "back" { -1 } else { 1 };
            let Some(entry) = history.entry(offset) else {
                return Err(ToolError::from(
                    RpcError::new(
                        ErrorCode::NavigationFailed,
                        format!("there is no history entry to go {direction} to"),
                    )
                    .with_context("action", json!(direction)),
                ));
            };
            check_policy(env, scope.workspace_id, &entry.url)?;
            let mark = tab.load_mark();
            tab.calls()
                .navigate_to_history_entry(&session, entry.id, CALL_TIMEOUT)
                .await?;
            // A history step may stay in the document (fragment, History API entries).
            Awaited::AnyNavigation(mark)
        }
    };
    let page = tab
        .wait_for_load(env, scope, scope.target_id, &awaited, dispatched)
        .await?;
    let mut result = page_result(scope.target_id, page, false);
    if workspace_isolated(env, scope).await? {
        result["isolated"] = json!(tab_isolated(env, scope, scope.target_id));
    }
    Ok(result)
}

async fn goto(
    env: &ToolEnv,
    tab: &mut ControlledTab,
    scope: &WorkspaceScope<'_>,
    opaque: &str,
    url: &str,
) -> Result<Value, ToolError> {
    let session = tab.session().await?;
    tab.begin_navigation();
    let dispatched = tokio::time::Instant::now();
    let mark = tab.load_mark();
    let outcome = tab.calls().navigate(&session, url, CALL_TIMEOUT).await?;
    if let Some(error_text) = outcome.error_text {
        let mut error = RpcError::new(
            ErrorCode::NavigationFailed,
            format!("the browser could not load the URL: {error_text}"),
        )
        .with_context("errorText", json!(error_text));
        if outcome.is_download {
            // The URL became a download (docs/cdp.md, "downloads"): the page stayed, `download` events follow.
            error = error.with_context("download", json!(true));
        }
        return Err(ToolError::from(error));
    }
    // A cross-document navigation names its loader; one that stayed in the document does not.
    let awaited = match outcome.loader_id {
        Some(loader) => Awaited::Loader(loader),
        None => Awaited::AnyNavigation(mark),
    };
    let page = tab
        .wait_for_load(env, scope, opaque, &awaited, dispatched)
        .await?;
    Ok(page_result(opaque, page, false))
}

fn page_result(target_id: &str, page: PageState, managed: bool) -> Value {
    let mut result = json!({"targetId": target_id, "url": page.url, "title": page.title, "loadState": page.load_state});
    if managed {
        result["managed"] = json!(true);
    }
    result
}

async fn tabs_list(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    _params: NoParams,
) -> Result<Value, ToolError> {
    env.connected(scope.workspace_id)?;
    let (workspace_id, lease_id) = (scope.workspace_id, scope.lease_id);
    // An isolated Workspace's rows say which tabs are in its own context.
    let own_context = match workspace_isolated(env, scope).await? {
        true => Some(env.browser.workspace_context(workspace_id)),
        false => None,
    };
    let tabs: Vec<Value> = env
        .browser
        .list_tabs(workspace_id, lease_id)
        .into_iter()
        .map(|tab| {
            let mut row = json!({
                "targetId": tab.target_id,
                "url": tab.url,
                "title": tab.title,
                "managed": tab.managed,
                "controlled": tab.controlled,
                "controlledElsewhere": tab.controlled_elsewhere,
                "openerTargetId": tab.opener_target_id,
            });
            if let Some(own) = &own_context {
                row["isolated"] = json!(own.is_some() && tab.context == *own);
            }
            row
        })
        .collect();
    Ok(json!({"tabs": tabs}))
}

async fn tabs_release(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    _params: NoParams,
) -> Result<Value, ToolError> {
    env.connected(scope.workspace_id)?;
    let (workspace_id, lease_id) = (scope.workspace_id, scope.lease_id);
    let opaque = scope.target_id.to_owned();
    super::tab::release_file_choosers(env, workspace_id, lease_id, &opaque).await;
    let released = env
        .browser
        .release_control(workspace_id, lease_id, &opaque)?;
    if released {
        // The Lease's no-progress streaks on this tab end with its control.
        let ticket = scope.ticket.lock().expect("ticket lock").take();
        if let Some(ticket) = ticket.or_else(|| env.browser.ticket(workspace_id, &opaque)) {
            ticket.note_control_released();
        }
        env.browser
            .downloads_tab_released(workspace_id, &opaque)
            .await;
        let mut emit = Emit::new(
            workspace_id,
            "target_control.released",
            json!({"targetId": opaque}),
        );
        emit.target_id = Some(opaque.to_string());
        emit.lease_id = Some(lease_id.to_string());
        let _ = env.events.emit(emit).await;
    }
    Ok(json!({"targetId": opaque, "released": released}))
}

async fn tabs_close(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    _params: NoParams,
) -> Result<Value, ToolError> {
    let (workspace_id, opaque) = (scope.workspace_id, scope.target_id);
    if !env.browser.is_managed_opaque(workspace_id, opaque)? {
        return Err(ToolError::from(TargetError::NotManaged));
    }
    let tab = ControlledTab::acquire(env, scope).await?;
    // Its session retires with it: download capture is restored first.
    env.browser
        .downloads_tab_released(workspace_id, opaque)
        .await;
    env.browser.before_closing(tab.target()).await;
    let closed = tab.calls().close_target(tab.target(), CALL_TIMEOUT).await?;
    Ok(json!({"targetId": scope.target_id, "closed": closed}))
}
