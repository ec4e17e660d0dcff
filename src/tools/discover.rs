//! `browser.discover`: the passive candidate list (files and a TCP probe; never a WebSocket).

use serde_json::{Value, json};

use super::context::NoParams;
use super::context::{CallScope, ToolEnv};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};

pub fn defs() -> Vec<ToolDef> {
    vec![ToolDef {
        name: "browser.discover",
        description: "List browser candidates (user profiles with a debugging endpoint, the Broker-managed profile, and the remote browsers of remote-browsers.toml, `kind` local or remote) and which one this bridge would use. Passive: opens no browser connection. `diagnostics` lists problems of remote-browsers.toml as a whole; an entry's own are on its candidate.",
        capability: "browser.control",
        mutating: false,
        input_schema: object(json!({}), &[]),
        output_schema: open_object(
            json!({
                "browsers": {"type": "array", "items": candidate_schema()},
                "selectedBrowserId": {"type": ["string", "null"]},
                "diagnostics": {"type": "array", "items": diagnostic_schema()},
            }),
            &["browsers", "selectedBrowserId"],
        ),
        sensitivity_input: &[],
        sensitivity_output: &[],
        lane: Lane::Ordinary,
        gate: Gate::Dispatch,
        handler: handler!(Connection: discover),
    }]
}

/// The schema of one candidate as `initialize` and `browser.discover` report it.
pub fn candidate_schema() -> Value {
    open_object(
        json!({
            "id": {"type": "string"},
            "product": {"type": "string"},
            "channel": {"type": "string"},
            "profile": {"type": "string"},
            "managed": {"type": "boolean"},
            "kind": {"type": "string", "enum": ["local", "remote"]},
            "state": {"type": "string"},
            "processState": {"type": "string"},
            "remoteDebuggingState": {"type": "string"},
            "authorizationState": {"type": "string", "enum": crate::browser::AuthorizationState::ALL.map(|state| state.as_str())},
            "remediation": {"type": "object"},
            "diagnostics": {"type": "array", "items": diagnostic_schema()},
        }),
        &[
            "id",
            "product",
            "channel",
            "state",
            "processState",
            "remoteDebuggingState",
            "authorizationState",
        ],
    )
}

/// One problem of `remote-browsers.toml`: a stable `code` and human text.
fn diagnostic_schema() -> Value {
    open_object(
        json!({"code": {"type": "string"}, "message": {"type": "string"}}),
        &["code", "message"],
    )
}

async fn discover(env: &ToolEnv, scope: &CallScope, _params: NoParams) -> Result<Value, ToolError> {
    let (found, diagnostics) = env.browser.discovery().await;
    let selected = (env.browser)
        .default_browser_id(scope.browser_preference.as_deref())
        .await;
    Ok(json!({
        "browsers": found.iter().map(|c| env.browser.candidate_json(c)).collect::<Vec<_>>(),
        "selectedBrowserId": selected,
        "diagnostics": diagnostics.iter().map(|d| d.to_json()).collect::<Vec<_>>(),
    }))
}
