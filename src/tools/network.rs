//! The network tools: observation (`browser.network.list`, `browser.network.get`, capability
//! `network.read`), rules (`browser.network.rules.add|list|remove`) and HTTP auth
//! (`browser.auth.set|clear`, capability `network.control`).
//!
//! This file checks parameters and shapes results; the request ring is `session::network`'s,
//! the rules, credentials and every answer to a paused request are `session::fetch`'s. Rules
//! and credentials are Workspace-scoped, live in Broker memory only and end with their
//! Workspace. A password is an input labelled `credential` and appears in no result; a rule's
//! header values are never echoed (only their names). Headers and bodies come back labelled.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::NoParams;
use super::context::{
    ControlLimit, Credential, MAX_AUTH_ORIGINS, MAX_MOCK_BODY_BYTES, MAX_PATTERN_CHARS,
    MAX_RULE_HEADERS, MAX_RULES_PER_WORKSPACE, NetFilter, NetRecord, Rule, RuleAction,
    fetch_rules as fetch,
};
use super::context::{TargetScope, ToolEnv, WorkspaceScope};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::TabCalls;
use crate::cdp::network::GetResponseBody;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::ids::{IdKind, new_id};

/// Largest page of `browser.network.list`.
const MAX_LIST_LIMIT: u64 = 200;
const DEFAULT_LIST_LIMIT: u64 = 50;

/// Body bytes `browser.network.get` returns by default and at most (the result must fit the
/// 4 MiB result line after base64 and JSON escapes).
const DEFAULT_BODY_BYTES: u64 = 256 * 1024;
const MAX_BODY_BYTES: u64 = 2 * 1024 * 1024;

/// How long reading a body from the browser may take.
const BODY_TIMEOUT: Duration = Duration::from_secs(15);

/// Prefix of `browser.network.list` cursors (a position in the tab's ring).
const CURSOR_PREFIX: &str = "network:";

/// Longest username and password, in characters.
const MAX_USERNAME_CHARS: u64 = 256;
const MAX_PASSWORD_CHARS: u64 = 1024;

fn browser_data() -> Value {
    json!(["browser_data"])
}

fn header_list_schema() -> Value {
    json!({"type": "array", "items": open_object(json!({
        "name": {"type": "string"},
        "value": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data", "credential"]},
    }), &["name", "value"])})
}

fn summary_schema() -> Value {
    open_object(
        json!({
            "requestId": {"type": "string"},
            "method": {"type": "string"},
            "url": {"type": "string", "x-browser-pilot-sensitivity": browser_data()},
            "resourceType": {"type": "string"},
            "mainDocument": {"type": "boolean"},
            "status": {"type": ["integer", "null"]},
            "mimeType": {"type": ["string", "null"]},
            "fromCache": {"type": "boolean"},
            "failed": {"type": "boolean"},
            "timing": {"type": "object"},
        }),
        &["requestId", "method", "url", "resourceType", "status"],
    )
}

fn rule_schema() -> Value {
    open_object(
        json!({
            "ruleId": {"type": "string"},
            "urlPattern": {"type": "string", "x-browser-pilot-sensitivity": browser_data()},
            "action": {"enum": ["block", "mock", "headers"]},
            "status": {"type": "integer"},
            "headerNames": {"type": "array", "items": {"type": "string"}},
            "bodyBytes": {"type": "integer"},
            "createdAt": {"type": "integer"},
        }),
        &["ruleId", "urlPattern", "action"],
    )
}

pub fn defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "browser.network.list",
            description: "Recent requests of a tab this Workspace manages or controls (kept in Broker memory, at most 1,000 per tab): opaque request id, method, URL, resource type, status, MIME type, from-cache, timing. Filters: `urlContains`, `resourceType` (Document, Script, Image, XHR, Fetch, ...), `status`. Oldest first; pass `cursor` from `nextCursor` for the next page.",
            capability: "network.read",
            mutating: false,
            input_schema: object(
                json!({
                    "urlContains": {"type": "string", "minLength": 1, "maxLength": 1024, "x-browser-pilot-sensitivity": browser_data(), "description": "Only requests whose URL contains this text."},
                    "resourceType": {"type": "string", "minLength": 1, "maxLength": 32, "description": "Only this resource type, such as Document or XHR."},
                    "status": {"type": "integer", "minimum": 100, "maximum": 599, "description": "Only responses with this HTTP status."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT, "description": "Most requests to return on this page."},
                    "cursor": {"type": "string", "minLength": 1, "maxLength": 64, "description": "nextCursor of the previous page, to continue."},
                }),
                &[],
            ),
            output_schema: open_object(
                json!({
                    "requests": {"type": "array", "items": summary_schema()},
                    "nextCursor": {"type": ["string", "null"]},
                    "hasMore": {"type": "boolean"},
                }),
                &["requests", "nextCursor", "hasMore"],
            ),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Target: network_list),
        },
        ToolDef {
            name: "browser.network.get",
            description: "One request of `browser.network.list`: its metadata, request and response headers (Authorization values redacted) and, with `includeBody`, the response body (at most `maxBodyBytes`, default 256 KiB; `encoding` `utf8`, or `base64` for binary).",
            capability: "network.read",
            mutating: false,
            input_schema: object(
                json!({
                    "requestId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Request id from browser.network.list."},
                    "includeBody": {"type": "boolean", "description": "Also return the response body when true."},
                    "maxBodyBytes": {"type": "integer", "minimum": 1, "maximum": MAX_BODY_BYTES, "description": "Most bytes of the body to return."},
                }),
                &["requestId"],
            ),
            output_schema: open_object(
                json!({
                    "request": open_object(json!({
                        "requestId": {"type": "string"},
                        "url": {"type": "string", "x-browser-pilot-sensitivity": browser_data()},
                        "requestHeaders": header_list_schema(),
                        "responseHeaders": header_list_schema(),
                        "headersTruncated": {"type": "boolean"},
                        "errorText": {"type": ["string", "null"]},
                        "encodedBytes": {"type": ["integer", "null"]},
                    }), &["requestId", "url", "requestHeaders", "responseHeaders"]),
                    "body": open_object(json!({
                        "available": {"type": "boolean"},
                        "encoding": {"enum": ["utf8", "base64"]},
                        "data": {"type": "string", "x-browser-pilot-sensitivity": browser_data()},
                        "bytes": {"type": "integer"},
                        "truncated": {"type": "boolean"},
                        "reason": {"type": "string"},
                    }), &["available"]),
                }),
                &["request"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data", "credential"],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Target: network_get),
        },
        ToolDef {
            name: "browser.network.rules.add",
            description: "Add a network rule for this Workspace's controlled tabs (managed tabs, their popups and frames, user tabs while controlled): `block` fails matching requests, `mock` answers them (`status`, `headers`, `body` or `bodyBase64`), `headers` sends them with `headers` added or overriding the originals. `urlPattern` is a glob over the whole URL (`*` any run, `?` one character). At most 64 rules; rules end with the Workspace and are never stored.",
            capability: "network.control",
            mutating: true,
            input_schema: object(
                json!({
                    "urlPattern": {"type": "string", "minLength": 1, "maxLength": MAX_PATTERN_CHARS, "x-browser-pilot-sensitivity": browser_data(), "description": "URL glob the rule applies to; * matches anything."},
                    "action": {"enum": ["block", "mock", "headers"], "description": "Block, answer with a mock, or set request headers."},
                    "status": {"type": "integer", "minimum": 100, "maximum": 599, "description": "HTTP status of the mock response."},
                    "headers": {"type": "array", "maxItems": MAX_RULE_HEADERS, "items": object(json!({
                        "name": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Header name."},
                        "value": {"type": "string", "maxLength": 8192, "x-browser-pilot-sensitivity": ["browser_data", "credential"], "description": "Header value."},
                    }), &["name", "value"]), "description": "Headers of the mock response or added request headers."},
                    "body": {"type": "string", "maxLength": MAX_MOCK_BODY_BYTES, "x-browser-pilot-sensitivity": browser_data(), "description": "Mock response body as text."},
                    "bodyBase64": {"type": "string", "maxLength": MAX_MOCK_BODY_BYTES * 4 / 3 + 4, "x-browser-pilot-sensitivity": browser_data(), "description": "Mock response body as base64 bytes."},
                }),
                &["urlPattern", "action"],
            ),
            output_schema: open_object(json!({"rule": rule_schema()}), &["rule"]),
            sensitivity_input: &["browser_data", "credential"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Workspace: rules_add),
        },
        ToolDef {
            name: "browser.network.rules.list",
            description: "This Workspace's network rules, oldest first (header values are not echoed).",
            capability: "network.control",
            mutating: false,
            input_schema: object(json!({}), &[]),
            output_schema: open_object(
                json!({"rules": {"type": "array", "items": rule_schema()}}),
                &["rules"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Workspace: rules_list),
        },
        ToolDef {
            name: "browser.network.rules.remove",
            description: "Remove one of this Workspace's network rules. Requests already answered stay answered; later ones go through unchanged.",
            capability: "network.control",
            mutating: true,
            input_schema: object(
                json!({"ruleId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Rule id from browser.network.rules.add."}}),
                &["ruleId"],
            ),
            output_schema: open_object(
                json!({"ruleId": {"type": "string"}, "removed": {"const": true}}),
                &["ruleId", "removed"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &[],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Workspace: rules_remove),
        },
        ToolDef {
            name: "browser.auth.set",
            description: "Answer HTTP Basic and Digest challenges of `origin` (scheme://host[:port]) on this Workspace's controlled tabs with these credentials. A rejected credential is cancelled on the second challenge for the same request. Chromium caches accepted credentials for the whole profile; see docs/network.md.",
            capability: "network.control",
            mutating: true,
            input_schema: object(
                json!({
                    "origin": {"type": "string", "minLength": 1, "maxLength": 2048, "x-browser-pilot-sensitivity": browser_data(), "description": "Origin that asks for HTTP authentication."},
                    "username": {"type": "string", "maxLength": MAX_USERNAME_CHARS, "x-browser-pilot-sensitivity": ["credential"], "description": "User name to answer the challenge with."},
                    "password": {"type": "string", "maxLength": MAX_PASSWORD_CHARS, "x-browser-pilot-sensitivity": ["credential"], "description": "Password to answer the challenge with."},
                }),
                &["origin", "username", "password"],
            ),
            output_schema: open_object(
                json!({"origin": {"type": "string"}, "replaced": {"type": "boolean"}}),
                &["origin", "replaced"],
            ),
            sensitivity_input: &["browser_data", "credential"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Workspace: auth_set),
        },
        ToolDef {
            name: "browser.auth.clear",
            description: "Stop answering HTTP auth challenges of `origin` (all origins when omitted) for this Workspace. Credentials Chromium already accepted stay in its profile-wide cache.",
            capability: "network.control",
            mutating: true,
            input_schema: object(
                json!({"origin": {"type": "string", "minLength": 1, "maxLength": 2048, "x-browser-pilot-sensitivity": browser_data(), "description": "Origin whose stored credentials to forget."}}),
                &[],
            ),
            output_schema: open_object(json!({"cleared": {"type": "integer"}}), &["cleared"]),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &[],
            lane: Lane::Ordinary,
            gate: Gate::Dispatch,
            handler: handler!(Workspace: auth_clear),
        },
    ]
}

fn bad(path: &str, message: impl Into<String>) -> ToolError {
    RpcError::invalid_params(message)
        .with_context("path", json!(path))
        .into()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListParams {
    url_contains: Option<String>,
    resource_type: Option<String>,
    status: Option<u16>,
    limit: Option<u64>,
    cursor: Option<String>,
}

async fn network_list(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: ListParams,
) -> Result<Value, ToolError> {
    let after = match params.cursor.as_deref() {
        None => None,
        Some(cursor) => Some(
            cursor
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| bad("arguments.cursor", "not a cursor of browser.network.list"))?,
        ),
    };
    let handle = env
        .browser
        .tab_handle(scope.workspace_id, scope.target_id)?;
    let filter = NetFilter {
        url_contains: params.url_contains,
        resource_type: params.resource_type,
        status: params.status,
        after,
    };
    let limit = params
        .limit
        .unwrap_or(DEFAULT_LIST_LIMIT)
        .min(MAX_LIST_LIMIT) as usize;
    let (requests, more, last) = {
        let book = handle.network();
        let (page, more) = book.list(scope.workspace_id, &filter, limit);
        let last = page.last().map(|r| r.seq);
        (
            page.iter().map(|r| r.summary()).collect::<Vec<Value>>(),
            more,
            last,
        )
    };
    let next = match (more, last) {
        (true, Some(seq)) => Some(format!("{CURSOR_PREFIX}{seq}")),
        _ => None,
    };
    Ok(json!({"requests": requests, "nextCursor": next, "hasMore": more}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetParams {
    request_id: String,
    #[serde(default)]
    include_body: bool,
    max_body_bytes: Option<u64>,
}

fn header_json(headers: &[(String, String)]) -> Value {
    json!(
        headers
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect::<Vec<Value>>()
    )
}

fn detail(record: &NetRecord) -> Value {
    let mut request = record.summary();
    request["url"] = json!(record.url);
    request["requestHeaders"] = header_json(&record.request_headers);
    request["responseHeaders"] = header_json(&record.response_headers);
    request["headersTruncated"] = json!(record.headers_truncated);
    request["errorText"] = json!(record.error);
    request["encodedBytes"] = json!(record.encoded_bytes);
    request
}

async fn network_get(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: GetParams,
) -> Result<Value, ToolError> {
    let handle = env
        .browser
        .tab_handle(scope.workspace_id, scope.target_id)?;
    let found = {
        let book = handle.network();
        book.get(scope.workspace_id, &params.request_id)
            .map(|record| {
                (
                    detail(record),
                    record.body_source(),
                    record.finished_ms.is_some() && record.error.is_none(),
                )
            })
    };
    let Some((request, (session, raw_id), finished)) = found else {
        return Err(RpcError::new(
            ErrorCode::RequestNotFound,
            "no request with this id on this target (never seen by this Workspace, or forgotten)",
        )
        .into());
    };
    if !params.include_body {
        return Ok(json!({"request": request}));
    }
    let max_bytes = params
        .max_body_bytes
        .unwrap_or(DEFAULT_BODY_BYTES)
        .min(MAX_BODY_BYTES) as usize;
    let body = match finished {
        false => json!({"available": false, "reason": "not_finished"}),
        true => {
            let read = TabCalls::watched(env, scope)?
                .execute(
                    &session,
                    &GetResponseBody { request_id: raw_id },
                    BODY_TIMEOUT,
                )
                .await;
            match read {
                Ok(body) => bounded_body(&body.body, body.base64_encoded, max_bytes),
                // Evicted from Chromium's buffer, the session is gone, or no body (a redirect).
                Err(_) => json!({"available": false, "reason": "unavailable"}),
            }
        }
    };
    Ok(json!({"request": request, "body": body}))
}

/// A body cut to `max_bytes`: text at a character boundary, base64 at a 3-byte group.
fn bounded_body(body: &str, base64_encoded: bool, max_bytes: usize) -> Value {
    match base64_encoded {
        true => {
            let bytes = crate::artifacts::decode_base64(body).map(|b| b.len());
            let keep_chars = (max_bytes / 3) * 4;
            let truncated = body.len() > keep_chars;
            json!({
                "available": true,
                "encoding": "base64",
                "data": &body[..body.len().min(keep_chars)],
                "bytes": bytes,
                "truncated": truncated,
            })
        }
        false => {
            let mut end = body.len().min(max_bytes);
            while !body.is_char_boundary(end) {
                end -= 1;
            }
            json!({
                "available": true,
                "encoding": "utf8",
                "data": &body[..end],
                "bytes": body.len(),
                "truncated": end < body.len(),
            })
        }
    }
}

#[derive(Deserialize)]
struct HeaderParam {
    name: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddParams {
    url_pattern: String,
    action: String,
    status: Option<u16>,
    headers: Option<Vec<HeaderParam>>,
    body: Option<String>,
    body_base64: Option<String>,
}

fn rule_json(rule: &Rule) -> Value {
    let mut value = json!({
        "ruleId": rule.id,
        "urlPattern": rule.pattern,
        "action": rule.action.kind(),
        "createdAt": rule.created_at,
    });
    match &rule.action {
        RuleAction::Block => {}
        RuleAction::Mock {
            status,
            headers,
            body_bytes,
            ..
        } => {
            value["status"] = json!(status);
            value["headerNames"] = json!(headers.iter().map(|(n, _)| n).collect::<Vec<_>>());
            value["bodyBytes"] = json!(body_bytes);
        }
        RuleAction::Headers { set } => {
            value["headerNames"] = json!(set.iter().map(|(n, _)| n).collect::<Vec<_>>());
        }
    }
    value
}

fn limit_error(limit: ControlLimit) -> ToolError {
    let (what, max) = match limit {
        ControlLimit::Rules => ("network rules per Workspace", MAX_RULES_PER_WORKSPACE),
        ControlLimit::AuthOrigins => ("auth origins per Workspace", MAX_AUTH_ORIGINS),
    };
    RpcError::new(
        ErrorCode::LimitExceeded,
        format!("limit reached: at most {max} {what}"),
    )
    .with_context("what", json!(what))
    .with_context("limit", json!(max))
    .with_remediation(
        RemediationAction::ReleaseUnused,
        "Remove rules or credentials you no longer need.",
    )
    .into()
}

async fn rules_add(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    params: AddParams,
) -> Result<Value, ToolError> {
    fetch::check_pattern(&params.url_pattern).map_err(|why| bad("arguments.urlPattern", why))?;
    let mut headers = Vec::new();
    for (n, header) in params.headers.iter().flatten().enumerate() {
        fetch::check_header(&header.name, &header.value)
            .map_err(|why| bad(&format!("arguments.headers[{n}]"), why))?;
        headers.push((header.name.clone(), header.value.clone()));
    }
    let mock_only = |field: &str, present: bool| match present && params.action != "mock" {
        true => Err(bad(
            &format!("arguments.{field}"),
            format!("\"{field}\" applies to mock rules only"),
        )),
        false => Ok(()),
    };
    mock_only("status", params.status.is_some())?;
    mock_only("body", params.body.is_some())?;
    mock_only("bodyBase64", params.body_base64.is_some())?;
    let action = match params.action.as_str() {
        "block" => {
            if !headers.is_empty() {
                return Err(bad("arguments.headers", "a block rule sets no headers"));
            }
            RuleAction::Block
        }
        "headers" => {
            if headers.is_empty() {
                return Err(bad(
                    "arguments.headers",
                    "a headers rule needs at least one header",
                ));
            }
            RuleAction::Headers { set: headers }
        }
        _ => {
            let (body_base64, body_bytes) = match (params.body, params.body_base64) {
                (Some(_), Some(_)) => {
                    return Err(bad(
                        "arguments.bodyBase64",
                        "give either body or bodyBase64",
                    ));
                }
                (Some(text), None) => {
                    let len = text.len();
                    (encode_base64(text.as_bytes()), len)
                }
                (None, Some(encoded)) => {
                    let decoded = crate::artifacts::decode_base64(&encoded)
                        .ok_or_else(|| bad("arguments.bodyBase64", "not valid base64"))?;
                    (encoded, decoded.len())
                }
                (None, None) => (String::new(), 0),
            };
            if body_bytes > MAX_MOCK_BODY_BYTES {
                return Err(bad("arguments.body", "the mock body is larger than 1 MiB"));
            }
            RuleAction::Mock {
                status: params.status.unwrap_or(200),
                headers,
                body_base64,
                body_bytes,
            }
        }
    };
    let rule = Rule {
        id: new_id(IdKind::Rule),
        pattern: params.url_pattern,
        action,
        created_at: crate::version::now_ms(),
    };
    let result = rule_json(&rule);
    env.browser
        .net()
        .add_rule(scope.workspace_id, rule)
        .map_err(limit_error)?;
    fetch::refresh_all(&env.browser).await;
    Ok(json!({"rule": result}))
}

async fn rules_list(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    _params: NoParams,
) -> Result<Value, ToolError> {
    let rules: Vec<Value> = env
        .browser
        .net()
        .rules(scope.workspace_id)
        .iter()
        .map(rule_json)
        .collect();
    Ok(json!({"rules": rules}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RemoveParams {
    rule_id: String,
}

async fn rules_remove(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    params: RemoveParams,
) -> Result<Value, ToolError> {
    if !env
        .browser
        .net()
        .remove_rule(scope.workspace_id, &params.rule_id)
    {
        return Err(RpcError::new(
            ErrorCode::RuleNotFound,
            "this Workspace has no rule with this id",
        )
        .into());
    }
    fetch::refresh_all(&env.browser).await;
    Ok(json!({"ruleId": params.rule_id, "removed": true}))
}

/// `scheme://host[:port]` in the form Chromium reports challenge origins: the URL standard's
/// parse (the `url` crate), so the host is lower-case and an internationalised name is in its
/// punycode form, with no default port and no path.
pub fn normalize_origin(origin: &str) -> Result<String, &'static str> {
    let (_, rest) = origin
        .split_once("://")
        .ok_or("the origin is not scheme://host[:port]")?;
    if rest.starts_with(['/', '\\']) || origin.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("the origin is not scheme://host[:port]");
    }
    let url = url::Url::parse(origin).map_err(|error| match error {
        url::ParseError::EmptyHost => "the origin has no host",
        url::ParseError::InvalidPort => "the origin's port is not a number",
        _ => "the origin is not scheme://host[:port]",
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("the origin's scheme is not http or https");
    }
    if url.path() != "/"
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err("the origin has no host, or a path, query, fragment or user info");
    }
    Ok(url.origin().ascii_serialization())
}

#[derive(Deserialize)]
struct AuthParams {
    origin: String,
    username: String,
    password: String,
}

async fn auth_set(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    params: AuthParams,
) -> Result<Value, ToolError> {
    let origin = normalize_origin(&params.origin).map_err(|why| bad("arguments.origin", why))?;
    let credential = Credential::new(origin.clone(), params.username, params.password);
    let replaced = env
        .browser
        .net()
        .set_credential(scope.workspace_id, credential)
        .map_err(limit_error)?;
    fetch::refresh_all(&env.browser).await;
    Ok(json!({"origin": origin, "replaced": replaced}))
}

#[derive(Deserialize)]
struct ClearParams {
    origin: Option<String>,
}

async fn auth_clear(
    env: &ToolEnv,
    scope: &WorkspaceScope<'_>,
    params: ClearParams,
) -> Result<Value, ToolError> {
    let origin = match params.origin.as_deref() {
        Some(origin) => Some(normalize_origin(origin).map_err(|why| bad("arguments.origin", why))?),
        None => None,
    };
    let cleared = env
        .browser
        .net()
        .clear_credentials(scope.workspace_id, origin.as_deref());
    fetch::refresh_all(&env.browser).await;
    Ok(json!({"cleared": cleared}))
}

/// Standard base64 with padding (a mock body in CDP's form).
fn encode_base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for input in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"foob",
            b"\x00\xff\x10binary",
        ] {
            let encoded = encode_base64(input);
            assert_eq!(crate::artifacts::decode_base64(&encoded).unwrap(), input);
        }
        assert_eq!(encode_base64(b"foob"), "Zm9vYg==");
    }

    #[test]
    fn origins_normalize_like_chromium_reports_them() {
        let check = |input: &str, expect: Result<&str, ()>| {
            assert_eq!(
                normalize_origin(input).map_err(|_| ()),
                expect.map(str::to_owned),
                "{input}"
            );
        };
        check("http://127.0.0.1:8080", Ok("http://127.0.0.1:8080"));
        check("HTTP://Example.COM/", Ok("http://example.com"));
        check("https://example.com:443", Ok("https://example.com"));
        check("http://example.com:80", Ok("http://example.com"));
        check("http://[::1]:9000", Ok("http://[::1]:9000"));
        check("ftp://example.com", Err(()));
        check("http://example.com/path", Err(()));
        check("example.com", Err(()));
        check("http://user@example.com", Err(()));
        check("http://example.com:x", Err(()));
        check("http://example.com:65536", Err(()));
        check("http://:80", Err(()));
        check("http:///example.com", Err(()));
        check("http://example.com?q", Err(()));
        check("http://example.com#f", Err(()));
        check(
            "http://Bücher.example:8080/",
            Ok("http://xn--bcher-kva.example:8080"),
        );
        check("https://ÉCOLE.example", Ok("https://xn--cole-9oa.example"));
    }

    #[test]
    fn bodies_are_cut_at_boundaries() {
        let text = bounded_body("héllo", false, 2);
        assert_eq!(text["data"], "h");
        assert_eq!(text["truncated"], true);
        let binary = bounded_body("AAECAwQF", true, 3);
        assert_eq!(binary["data"], "AAEC");
        assert_eq!(binary["bytes"], 6);
        assert_eq!(binary["truncated"], true);
    }
}
