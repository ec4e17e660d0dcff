//! Reading tools: `browser.observe` (semantic elements with scoped refs, page metrics, hints),
//! `browser.read`, `browser.search` and `browser.elements.find`. Page scripts run in the
//! Broker's isolated world of the calling Workspace's selected frame (the main frame unless
//! `browser.frames.select` chose another; see `frames`), so the page can neither see nor tamper
//! with them.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::actions::{merged, ref_properties};
use super::context::{TargetScope, ToolEnv};
use super::dialogs::unless_dialog;
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::observation::ObservationRequest;
use super::tab::{ControlledTab, RefParams, base_result};
use crate::page::{self, Find, ObservationFormat, ObserveOptions, Read, RefTarget, Search};
use crate::protocol::errors::RpcError;

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
            "compact": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
            "diff": open_object(json!({
                "baseObservationId": {"type": "string"},
                "added": {"type": "array", "items": {"type": "integer"}},
                "changed": {"type": "array", "items": open_object(json!({
                    "ref": {"type": "integer"},
                    "fields": {"type": "array", "items": {"type": "string"}},
                }), &["ref", "fields"])},
                "removed": {"type": "array", "items": {"type": "integer"}},
                "unchanged": {"type": "integer"},
                "moved": {"type": "integer"},
            }), &["baseObservationId", "added", "changed", "removed", "unchanged"]),
            "diffUnavailable": {"enum": ["expired", "other_frame", "other_document"]},
            "estimatedTokens": {"type": "integer"},
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
            "truncationReasons": {"type": "array", "items": {"enum": ["limit", "bytes", "tokens"]}},
            "candidateCount": {"type": "integer"},
        }),
        &["observationId", "hints", "truncated", "truncationReasons"],
    )
}

pub fn observe_input_properties() -> Value {
    json!({
        "limit": {"type": "integer", "minimum": 1, "maximum": page::OBSERVE_HARD_MAX_LIMIT, "description": "Most elements to return in this Observation."},
        "maxBytes": {"type": "integer", "minimum": page::OBSERVE_MIN_MAX_BYTES, "maximum": page::OBSERVE_MAX_MAX_BYTES, "description": "Most bytes of serialized elements to return."},
        "viewportOnly": {"type": "boolean", "description": "Only elements inside the current viewport when true."},
        "sinceObservationId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Earlier Observation of this document to diff against."},
        "format": {"enum": ["json", "compact"], "description": "Element list as JSON objects or compact lines."},
        "maxTokens": max_tokens_property(),
    })
}

/// `maxTokens` of the reading tools.
fn max_tokens_property() -> Value {
    json!({"type": "integer", "minimum": page::MIN_MAX_TOKENS, "maximum": page::MAX_MAX_TOKENS, "description": "Bound on the result's estimated size in tokens."})
}

pub fn defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "browser.observe",
            description: "Observe the page: interactive and landmark elements (role, accessible name, value, states) with integer refs (used with the returned observationId; valid while the element and its document last), open Shadow DOM included; page metrics (viewport, document, scroll, pixels remaining, percentages); and advisory hints. Refs stay the same for an element for the life of its document; `sinceObservationId` returns only what was added, changed (with field names) or removed since that Observation of the same document, plus the unchanged count (or a full Observation with `diffUnavailable`); `format: \"compact\"` returns one short line per element in `compact`; `maxTokens` bounds the result by a documented estimate, keeping elements in the viewport, then interactive ones, first. Bounded by `limit`, `maxBytes` and `maxTokens` with truncation reasons. Password values are never returned.",
            capability: "observation.read",
            mutating: false,
            input_schema: object(observe_input_properties(), &[]),
            output_schema: observation_schema(),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: observe),
        },
        ToolDef {
            name: "browser.read",
            description: "Readable visible text of the page, or of one element (a CSS `selector`, or an Observation ref), bounded by `maxChars` and `maxTokens`. A form control (input, textarea, select) reads as its whole value from `offset`, with `valueLength`; a sensitive field only as `valueLength`.",
            capability: "observation.read",
            mutating: false,
            input_schema: object(
                merged(
                    ref_properties(),
                    json!({
                        "selector": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "CSS selector of the element to read; default whole page."},
                        "maxChars": {"type": "integer", "minimum": 1, "maximum": page::READ_MAX_MAX_CHARS, "description": "Most characters of text to return."},
                        "maxTokens": max_tokens_property(),
                        "offset": {"type": "integer", "minimum": 0, "maximum": page::READ_MAX_MAX_CHARS, "description": "First character of a form control's value to return."},
                    }),
                ),
                &[],
            ),
            output_schema: with_target_fields(
                json!({
                    "text": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                    "truncated": {"type": "boolean"},
                    "truncationReasons": {"type": "array", "items": {"enum": ["chars", "tokens"]}},
                    "charCount": {"type": "integer"},
                    "valueLength": {"type": "integer", "description": "A form control's whole value length."},
                    "offset": {"type": "integer"},
                    "sensitive": {"type": "boolean"},
                    "estimatedTokens": {"type": "integer"},
                }),
                &["text", "truncated", "charCount"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: read),
        },
        ToolDef {
            name: "browser.search",
            description: "Visible text matches of `query` (case-insensitive; `regex` for a JavaScript regular expression) with nearby context and viewport geometry, open Shadow DOM included; at most 200 results, bounded by `maxTokens` (matches in the viewport first).",
            capability: "observation.read",
            mutating: false,
            input_schema: object(
                json!({
                    "query": {"type": "string", "minLength": 1, "maxLength": 1024, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Text to find in the page's visible text."},
                    "regex": {"type": "boolean", "description": "Treat the query as a regular expression when true."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": page::SEARCH_MAX_LIMIT, "description": "Most matches to return."},
                    "maxTokens": max_tokens_property(),
                }),
                &["query"],
            ),
            output_schema: with_target_fields(
                json!({
                    "matches": {"type": "array", "maxItems": page::SEARCH_MAX_LIMIT, "items": {"type": "object", "x-browser-pilot-sensitivity": ["browser_data"]}},
                    "total": {"type": "integer"},
                    "truncated": {"type": "boolean"},
                    "truncationReasons": {"type": "array", "items": {"enum": ["limit", "tokens"]}},
                    "estimatedTokens": {"type": "integer"},
                }),
                &["matches", "total", "truncated"],
            ),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: search),
        },
        ToolDef {
            name: "browser.elements.find",
            description: "Bounded safe metadata (tag, id, classes, role, name, text, visibility, geometry, a few attributes) of elements matching a CSS selector, optionally across open Shadow DOM (`pierce`). No DOM or CDP handles; results are not action refs.",
            capability: "observation.read",
            mutating: false,
            input_schema: object(
                json!({
                    "selector": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "CSS selector of the elements to find."},
                    "pierce": {"type": "boolean", "description": "Also search inside open shadow roots when true."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": page::FIND_MAX_LIMIT, "description": "Most elements to return."},
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
            handler: handler!(Target: find),
        },
    ]
}

/// The options of an Observation (`browser.observe`'s arguments, an action's `observe`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserveParams {
    limit: Option<u32>,
    max_bytes: Option<u32>,
    viewport_only: Option<bool>,
    since_observation_id: Option<String>,
    format: Option<ObservationFormat>,
    max_tokens: Option<u32>,
}

impl ObserveParams {
    pub fn options(&self) -> ObserveOptions {
        let defaults = ObserveOptions::default();
        ObserveOptions {
            limit: self.limit.unwrap_or(defaults.limit),
            max_bytes: self.max_bytes.unwrap_or(defaults.max_bytes),
            viewport_only: self.viewport_only.unwrap_or(false),
        }
    }

    pub fn request(self) -> ObservationRequest {
        ObservationRequest {
            options: self.options(),
            since: self.since_observation_id,
            format: self.format.unwrap_or_default(),
            max_tokens: self.max_tokens,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadParams {
    #[serde(flatten)]
    target: RefParams,
    selector: Option<String>,
    max_chars: Option<u32>,
    max_tokens: Option<u32>,
    offset: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SearchParams {
    query: String,
    regex: Option<bool>,
    limit: Option<u32>,
    max_tokens: Option<u32>,
}

/// Checks a reading tool's `maxTokens` (the schema says the same).
fn checked_max_tokens(max_tokens: Option<u32>) -> Result<Option<u32>, ToolError> {
    ObservationRequest {
        max_tokens,
        ..ObservationRequest::default()
    }
    .validate()?;
    Ok(max_tokens)
}

/// Bytes the closing fields of a reading result add beside its measured head.
const READING_SLACK: usize = 96;

#[derive(Deserialize)]
struct FindParams {
    selector: String,
    pierce: Option<bool>,
    limit: Option<u32>,
}

/// The Observation options of `browser.observe`'s arguments or an action's `observe` object.
pub fn observe_request(params: ObserveParams) -> Result<ObservationRequest, ToolError> {
    let request = params.request();
    request.validate()?;
    Ok(request)
}

async fn observe(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: ObserveParams,
) -> Result<Value, ToolError> {
    let request = observe_request(params)?;
    unless_dialog(env, scope, async {
        let mut tab = ControlledTab::acquire(env, scope).await?;
        let result = tab.observe(scope, &request).await?;
        Ok(Value::Object(result))
    })
    .await
}

/// Runs the reading script `build` makes in the tab's selected frame and starts the result with
/// the target fields (workspace, lease, target, url, title). When the call names a ref, `build`
/// gets its element, resolved against this Workspace's Observations of the frame's document. A
/// dialog holding the tab answers at once.
async fn run_reading<S: page::PageScript>(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    refs: Option<&RefParams>,
    build: impl FnOnce(Option<RefTarget>) -> S,
) -> Result<(S::Output, Map<String, Value>), ToolError> {
    unless_dialog(env, scope, async {
        let mut tab = ControlledTab::acquire(env, scope).await?;
        let page_context = tab.page_context().await?;
        let target = match refs {
            Some(refs) => Some(tab.resolve_ref(scope, &page_context.frame_id, refs)?.0),
            None => None,
        };
        let script = build(target);
        let output = page_context.run(tab.calls(), &script).await?;
        let (url, title) = tab.url_and_title(&page_context).await?;
        Ok((output, base_result(scope, url, title)))
    })
    .await
}

async fn read(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: ReadParams,
) -> Result<Value, ToolError> {
    let max_tokens = checked_max_tokens(params.max_tokens)?;
    let defaults = Read::default();
    // A token budget alone reads as much text as the budget could hold.
    let max_chars = match (params.max_chars, max_tokens) {
        (Some(chars), _) => chars,
        (None, Some(tokens)) => u32::try_from(page::budget_bytes(tokens))
            .map_or(page::READ_MAX_MAX_CHARS, |bytes| {
                bytes.clamp(1, page::READ_MAX_MAX_CHARS)
            }),
        (None, None) => defaults.max_chars,
    };
    let refs = params.target.given().then_some(&params.target);
    if refs.is_some() && params.selector.is_some() {
        return Err(ToolError::from(
            RpcError::invalid_params("give a selector or a ref (observationId and ref), not both")
                .with_context("path", json!("arguments.selector")),
        ));
    }
    let selector = params.selector;
    let offset = params.offset.unwrap_or(0);
    let (text, mut result) = run_reading(env, scope, refs, |target| Read {
        selector,
        target,
        max_chars,
        offset,
    })
    .await?;
    let mut reasons = Vec::new();
    if text.truncated {
        // Without `maxChars` the page's bound came from the token budget.
        reasons.push(match params.max_chars {
            Some(_) => "chars",
            None => "tokens",
        });
    }
    let mut body = text.text;
    let mut char_count = text.char_count;
    if let Some(tokens) = max_tokens {
        let head = serde_json::to_vec(&result)?.len() + READING_SLACK;
        let budget = page::budget_bytes(tokens).saturating_sub(head);
        let cut = page::cut_to_json_bytes(&body, budget).len();
        if cut < body.len() {
            body.truncate(cut);
            char_count = body.encode_utf16().count() as u64;
            if !reasons.contains(&"tokens") {
                reasons.push("tokens");
            }
        }
        let bytes = head + page::json_escaped_len(&body);
        result.insert(
            "estimatedTokens".into(),
            json!(page::estimate_tokens(bytes)),
        );
    }
    result.insert("text".into(), json!(body));
    result.insert("truncated".into(), json!(!reasons.is_empty()));
    result.insert("truncationReasons".into(), json!(reasons));
    result.insert("charCount".into(), json!(char_count));
    if let Some(length) = text.value_length {
        result.insert("valueLength".into(), json!(length));
    }
    if let Some(offset) = text.offset {
        result.insert("offset".into(), json!(offset));
    }
    if text.sensitive {
        result.insert("sensitive".into(), json!(true));
    }
    Ok(Value::Object(result))
}

async fn search(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: SearchParams,
) -> Result<Value, ToolError> {
    let max_tokens = checked_max_tokens(params.max_tokens)?;
    let script = Search {
        query: params.query,
        regex: params.regex.unwrap_or(false),
        limit: params.limit.unwrap_or(page::SEARCH_DEFAULT_LIMIT),
    };
    let (found, mut result) = run_reading(env, scope, None, |_| script).await?;
    let mut reasons = Vec::new();
    if found.truncated {
        reasons.push("limit");
    }
    let mut matches = found.matches;
    if let Some(tokens) = max_tokens {
        // Matches in the viewport first, then the rest in document order.
        let head = serde_json::to_vec(&result)?.len() + READING_SLACK;
        let budget = page::budget_bytes(tokens).saturating_sub(head);
        let sizes: Vec<usize> = matches
            .iter()
            .map(|m| serde_json::to_vec(m).map_or(0, |v| v.len()) + 1)
            .collect();
        let all: Vec<usize> = (0..matches.len()).collect();
        let (kept, cut) = page::select_by_tier(
            &all,
            budget,
            |i| u8::from(!matches[i].in_viewport),
            |i| sizes[i],
        );
        if cut {
            let keep: std::collections::HashSet<usize> = kept.iter().copied().collect();
            let mut index = 0;
            matches.retain(|_| {
                index += 1;
                keep.contains(&(index - 1))
            });
            reasons.push("tokens");
        }
        let bytes = head + kept.iter().map(|i| sizes[*i]).sum::<usize>();
        result.insert(
            "estimatedTokens".into(),
            json!(page::estimate_tokens(bytes)),
        );
    }
    result.insert(
        "matches".into(),
        serde_json::to_value(&matches).unwrap_or(Value::Null),
    );
    result.insert("total".into(), json!(found.total));
    result.insert("truncated".into(), json!(!reasons.is_empty()));
    result.insert("truncationReasons".into(), json!(reasons));
    Ok(Value::Object(result))
}

async fn find(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: FindParams,
) -> Result<Value, ToolError> {
    let script = Find {
        selector: params.selector,
        pierce: params.pierce.unwrap_or(false),
        limit: params.limit.unwrap_or(page::FIND_DEFAULT_LIMIT),
    };
    let (found, mut result) = run_reading(env, scope, None, |_| script).await?;
    result.insert(
        "elements".into(),
        serde_json::to_value(&found.elements).unwrap_or(Value::Null),
    );
    result.insert("total".into(), json!(found.total));
    result.insert("truncated".into(), json!(found.truncated));
    Ok(Value::Object(result))
}
