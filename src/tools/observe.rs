//! Reading tools: `browser.observe` (semantic elements with scoped refs, page metrics, hints),
//! `browser.read`, `browser.search` and `browser.elements.find`. Page scripts run in the
//! Broker's isolated world of the calling Workspace's selected frame (the main frame unless
//! `browser.frames.select` chose another; see `frames`), so the page can neither see nor tamper
//! with them.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::context::{CallScope, ToolEnv, bool_arg, str_arg, u32_arg};
use super::error::ToolError;
use super::manifest::{Gate, Lane, Scope, ToolDef, object, open_object};
use super::tabs::controlled_tab;
use crate::cdp::{CdpClient, SessionId};
use crate::page::{
    self, DocumentInfo, ExecutionContextId, Find, HintContext, Observe, ObserveOptions, Read,
    Search,
};
use crate::protocol::ids::{IdKind, new_id};
use crate::session::bounds::{MAX_TITLE_CHARS, MAX_URL_CHARS, bound_title, bound_url};
use crate::session::{ElementSummary, KEPT_OBSERVATIONS, ObservationRecord, TabGuard};

/// Timeout of one page-script call.
pub const SCRIPT_TIMEOUT: Duration = Duration::from_secs(20);

fn target_fields() -> Value {
    json!({
        "workspaceId": {"type": "string"},
        "leaseId": {"type": "string"},
        "targetId": {"type": "string"},
        "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
        "title": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
    })
}

fn with_target_fields(extra: Value, required: &[&str]) -> Value {
    let mut properties = target_fields();
    if let (Some(base), Some(extra)) = (properties.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    let mut all_required = vec!["targetId", "url", "title"];
    all_required.extend_from_slice(required);
    open_object(properties, &all_required)
}

/// The output schema of an Observation; shared by every tool that returns a fresh one.
pub fn observation_schema() -> Value {
    with_target_fields(
        json!({
            "observationId": {"type": "string"},
            "elements": {"type": "array", "items": {"type": "object", "x-browser-pilot-sensitivity": ["browser_data"]}},
            "page": {"type": "object"},
            "hints": {"type": "array", "maxItems": 16, "items": open_object(json!({
                "code": {"type": "string"},
                "source": {"type": "string"},
                "confidence": {"type": "string"},
                "recommendedAction": {"type": "string"},
                "blocking": {"type": "boolean"},
                "refs": {"type": "array", "items": {"type": "integer"}},
            }), &["code", "source", "confidence", "recommendedAction"])},
            "truncated": {"type": "boolean"},
            "truncationReasons": {"type": "array", "items": {"enum": ["limit", "bytes"]}},
            "candidateCount": {"type": "integer"},
        }),
        &[
            "observationId",
            "elements",
            "hints",
            "truncated",
            "truncationReasons",
        ],
    )
}

pub fn observe_input_properties() -> Value {
    json!({
        "limit": {"type": "integer", "minimum": 1, "maximum": page::OBSERVE_HARD_MAX_LIMIT},
        "maxBytes": {"type": "integer", "minimum": page::OBSERVE_MIN_MAX_BYTES, "maximum": page::OBSERVE_MAX_MAX_BYTES},
        "viewportOnly": {"type": "boolean"},
    })
}

pub fn defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "browser.observe",
            description: "Observe the page: interactive and landmark elements (role, accessible name, value, states) with integer refs scoped to the returned observationId, open Shadow DOM included; page metrics (viewport, document, scroll, pixels remaining, percentages); and advisory hints. Bounded by `limit` and `maxBytes` with truncation reasons. Password values are never returned.",
            capability: "observation.read",
            scope: Scope::Target,
            mutating: false,
            input_schema: object(observe_input_properties(), &[]),
            output_schema: observation_schema(),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(observe),
        },
        ToolDef {
            name: "browser.read",
            description: "Readable visible text of the page, or of the first element matching a CSS `selector`, bounded by `maxChars`.",
            capability: "observation.read",
            scope: Scope::Target,
            mutating: false,
            input_schema: object(
                json!({
                    "selector": {"type": "string", "minLength": 1, "maxLength": 1024},
                    "maxChars": {"type": "integer", "minimum": 1, "maximum": page::READ_MAX_MAX_CHARS},
                }),
                &[],
            ),
            output_schema: with_target_fields(
                json!({
                    "text": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                    "truncated": {"type": "boolean"},
                    "charCount": {"type": "integer"},
                }),
                &["text", "truncated", "charCount"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(read),
        },
        ToolDef {
            name: "browser.search",
            description: "Visible text matches of `query` (case-insensitive; `regex` for a JavaScript regular expression) with nearby context and viewport geometry, open Shadow DOM included; at most 200 results.",
            capability: "observation.read",
            scope: Scope::Target,
            mutating: false,
            input_schema: object(
                json!({
                    "query": {"type": "string", "minLength": 1, "maxLength": 1024, "x-browser-pilot-sensitivity": ["browser_data"]},
                    "regex": {"type": "boolean"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": page::SEARCH_MAX_LIMIT},
                }),
                &["query"],
            ),
            output_schema: with_target_fields(
                json!({
                    "matches": {"type": "array", "maxItems": page::SEARCH_MAX_LIMIT, "items": {"type": "object", "x-browser-pilot-sensitivity": ["browser_data"]}},
                    "total": {"type": "integer"},
                    "truncated": {"type": "boolean"},
                }),
                &["matches", "total", "truncated"],
            ),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(search),
        },
        ToolDef {
            name: "browser.elements.find",
            description: "Bounded safe metadata (tag, id, classes, role, name, text, visibility, geometry, a few attributes) of elements matching a CSS selector, optionally across open Shadow DOM (`pierce`). No DOM or CDP handles; results are not action refs.",
            capability: "observation.read",
            scope: Scope::Target,
            mutating: false,
            input_schema: object(
                json!({
                    "selector": {"type": "string", "minLength": 1, "maxLength": 1024},
                    "pierce": {"type": "boolean"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": page::FIND_MAX_LIMIT},
                }),
                &["selector"],
            ),
            output_schema: with_target_fields(
                json!({
                    "elements": {"type": "array", "items": {"type": "object", "x-browser-pilot-sensitivity": ["browser_data"]}},
                    "total": {"type": "integer"},
                    "truncated": {"type": "boolean"},
                }),
                &["elements", "total", "truncated"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(find),
        },
    ]
}

/// The session hosting the frame scripts run in (the tab's, or an out-of-process iframe's),
/// that frame, and the Broker's isolated world there.
pub struct PageContext {
    pub session: SessionId,
    pub frame_id: String,
    pub context: ExecutionContextId,
    /// Whether `frame_id` is its session's root frame (the main frame or an OOPIF's): then the
    /// page scripts' viewport coordinates are the session's input coordinates.
    pub session_root: bool,
}

/// Where frame-scoped tools run: the selected frame of the Workspace holding the turn.
pub async fn page_context(
    client: &CdpClient,
    guard: &mut TabGuard,
) -> Result<PageContext, ToolError> {
    let session = guard.session(client).await?;
    if let Some(selection) = guard.frame_selection() {
        return super::frames::frame_context(client, guard, session, selection).await;
    }
    let frame_id = match guard.state().main_frame.clone() {
        Some(frame_id) => frame_id,
        None => {
            let frame_id = page::main_frame_id(client, &session, SCRIPT_TIMEOUT).await?;
            guard.state().main_frame = Some(frame_id.clone());
            frame_id
        }
    };
    let context = page::create_isolated_world(client, &session, &frame_id, SCRIPT_TIMEOUT).await?;
    Ok(PageContext {
        session,
        frame_id,
        context,
        session_root: true,
    })
}

/// URL and title of the document the scripts ran in, bounded (`session::bounds`). The main
/// frame's come from the browser's navigation history; a selected subframe's are read in the
/// Broker's isolated world of that frame, where the page's own overrides of `document.title`
/// or `JSON.stringify` do not exist. Never evaluated in the page's main world.
pub async fn url_and_title(
    client: &CdpClient,
    guard: &mut TabGuard,
    page_context: &PageContext,
) -> Result<(String, String), ToolError> {
    if guard.state().main_frame.as_deref() == Some(page_context.frame_id.as_str()) {
        return Ok(guard.page_info(client).await?);
    }
    // One character past each bound, so a cut value gets its marker.
    let script = DocumentInfo {
        max_url_chars: MAX_URL_CHARS,
        max_title_chars: MAX_TITLE_CHARS,
    };
    let info = page::run(
        client,
        &page_context.session,
        page_context.context,
        &script,
        SCRIPT_TIMEOUT,
    )
    .await?;
    Ok((bound_url(&info.url), bound_title(&info.title)))
}

fn base_result(scope: &CallScope, url: String, title: String) -> Map<String, Value> {
    let mut result = Map::new();
    result.insert("workspaceId".into(), json!(scope.workspace_id));
    result.insert("leaseId".into(), json!(scope.lease_id));
    result.insert("targetId".into(), json!(scope.target_id));
    result.insert("url".into(), json!(url));
    result.insert("title".into(), json!(title));
    result
}

pub fn observe_options(arguments: &Map<String, Value>) -> ObserveOptions {
    let defaults = ObserveOptions::default();
    ObserveOptions {
        limit: u32_arg(arguments, "limit", defaults.limit),
        max_bytes: u32_arg(arguments, "maxBytes", defaults.max_bytes),
        viewport_only: bool_arg(arguments, "viewportOnly", false),
    }
}

/// Takes a fresh Observation of the tab (the caller holds its turn) and records it so its refs
/// resolve later. Used by `browser.observe` and by every action that returns a fresh Observation.
pub async fn take_observation(
    client: &CdpClient,
    guard: &mut TabGuard,
    scope: &CallScope,
    options: ObserveOptions,
) -> Result<Map<String, Value>, ToolError> {
    let page_context = page_context(client, guard).await?;
    let observation_id = new_id(IdKind::Observation);
    let script = Observe {
        key: observation_id.clone(),
        options,
    };
    let observation = page::run(
        client,
        &page_context.session,
        page_context.context,
        &script,
        SCRIPT_TIMEOUT,
    )
    .await?;
    let (url, title) = url_and_title(client, guard, &page_context).await?;
    let state = guard.state();
    let hint_context = HintContext {
        main_document_status: None,
        previous_auth_surface: state.auth_surface,
    };
    let hints = page::observation_hints(&observation, &hint_context);
    state.auth_surface = Some(page::has_auth_surface(&observation));
    let elements = observation
        .elements
        .iter()
        .map(|e| ElementSummary {
            role: serde_json::to_value(e.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            tag: e.tag.clone(),
            input_type: e.input_type.clone(),
        })
        .collect();
    state.observations.push_back(ObservationRecord {
        id: observation_id.clone(),
        workspace_id: scope.workspace_id.clone().unwrap_or_default(),
        frame_id: page_context.frame_id.clone(),
        elements,
    });
    while state.observations.len() > KEPT_OBSERVATIONS {
        state.observations.pop_front();
    }
    let mut result = base_result(scope, url, title);
    result.insert("observationId".into(), json!(observation_id));
    let wire = serde_json::to_value(observation.wire(&hints))?;
    if let Value::Object(fields) = wire {
        result.extend(fields);
    }
    Ok(result)
}

pub async fn observe(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let (client, mut guard) = controlled_tab(env, scope).await?;
    let result = take_observation(&client, &mut guard, scope, observe_options(&arguments)).await?;
    Ok(Value::Object(result))
}

/// Runs one reading script in the tab's selected frame and starts the result with the target
/// fields (workspace, lease, target, url, title).
async fn run_reading<S: page::PageScript>(
    env: &ToolEnv,
    scope: &CallScope,
    script: &S,
) -> Result<(S::Output, Map<String, Value>), ToolError> {
    let (client, mut guard) = controlled_tab(env, scope).await?;
    let page_context = page_context(&client, &mut guard).await?;
    let output = page::run(
        &client,
        &page_context.session,
        page_context.context,
        script,
        SCRIPT_TIMEOUT,
    )
    .await?;
    let (url, title) = url_and_title(&client, &mut guard, &page_context).await?;
    Ok((output, base_result(scope, url, title)))
}

pub async fn read(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let defaults = Read::default();
    let script = Read {
        selector: str_arg(&arguments, "selector").map(str::to_owned),
        max_chars: u32_arg(&arguments, "maxChars", defaults.max_chars),
    };
    let (text, mut result) = run_reading(env, scope, &script).await?;
    result.insert("text".into(), json!(text.text));
    result.insert("truncated".into(), json!(text.truncated));
    result.insert("charCount".into(), json!(text.char_count));
    Ok(Value::Object(result))
}

pub async fn search(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let script = Search {
        query: str_arg(&arguments, "query").unwrap_or_default().to_owned(),
        regex: bool_arg(&arguments, "regex", false),
        limit: u32_arg(&arguments, "limit", page::SEARCH_DEFAULT_LIMIT),
    };
    let (found, mut result) = run_reading(env, scope, &script).await?;
    result.insert(
        "matches".into(),
        serde_json::to_value(&found.matches).unwrap_or(Value::Null),
    );
    result.insert("total".into(), json!(found.total));
    result.insert("truncated".into(), json!(found.truncated));
    Ok(Value::Object(result))
}

pub async fn find(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let script = Find {
        selector: str_arg(&arguments, "selector")
            .unwrap_or_default()
            .to_owned(),
        pierce: bool_arg(&arguments, "pierce", false),
        limit: u32_arg(&arguments, "limit", page::FIND_DEFAULT_LIMIT),
    };
    let (found, mut result) = run_reading(env, scope, &script).await?;
    result.insert(
        "elements".into(),
        serde_json::to_value(&found.elements).unwrap_or(Value::Null),
    );
    result.insert("total".into(), json!(found.total));
    result.insert("truncated".into(), json!(found.truncated));
    Ok(Value::Object(result))
}
