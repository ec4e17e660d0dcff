//! Typed params of the Broker's methods: each method's `#[derive(Deserialize)]` struct, its
//! JSON Schema, and the one decode step (the tools' schema validator, then serde).
//!
//! A schema says what a member must be (type, presence, a non-empty string); rules that need
//! the call's context (a range with `context.min/max`, a key only protocol 1.1 may send, which
//! ids a tool's scope needs) stay with the handler. Unknown members are ignored, as they always
//! were: schemas allow additional properties.

use std::sync::OnceLock;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::protocol::errors::RpcError;
use crate::tools::schema;

/// A method's params: a struct and the schema it is validated against first.
pub trait Params: DeserializeOwned {
    fn schema() -> &'static Value;
}

/// Validates `params` against `P`'s schema, then decodes them. A violation is `invalid_params`
/// naming the member (`context.path`, `params.workspaceId`), like a tool's argument check; a
/// value the schema admits but the struct cannot hold (an integer beyond its range) is
/// `invalid_params` too.
pub fn decode<P: Params>(params: Map<String, Value>) -> Result<P, RpcError> {
    let params = Value::Object(params);
    if let Err(violation) = schema::validate(P::schema(), &params, "params") {
        return Err(
            RpcError::invalid_params(format!("{} {}", violation.path, violation.message))
                .with_context("path", json!(violation.path)),
        );
    }
    serde_json::from_value(params)
        .map_err(|error| RpcError::invalid_params(format!("params out of range: {error}")))
}

/// A member a handler needs only in some cases (a Workspace tool's `leaseId`): the same
/// `invalid_params` the schema gives a missing required member.
pub fn needed<T>(value: Option<T>, name: &str) -> Result<T, RpcError> {
    value.ok_or_else(|| {
        let path = format!("params.{name}");
        RpcError::invalid_params(format!("{path} is required")).with_context("path", json!(path))
    })
}

/// A non-empty string, required.
fn id() -> Value {
    json!({"type": "string", "minLength": 1})
}

/// A non-empty string, or absent / null.
fn optional_id() -> Value {
    json!({"type": ["string", "null"], "minLength": 1})
}

/// An integer, or absent / null (its range is the handler's, which names it in `context`).
fn optional_integer() -> Value {
    json!({"type": ["integer", "null"]})
}

/// An object schema with these properties, of which `required` must be present.
fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

/// Declares `Params` for a struct with the schema `$schema` (built once).
macro_rules! params_schema {
    ($type:ty, $schema:expr) => {
        impl Params for $type {
            fn schema() -> &'static Value {
                static SCHEMA: OnceLock<Value> = OnceLock::new();
                SCHEMA.get_or_init(|| $schema)
            }
        }
    };
}

/// Params a method reads itself (`initialize`'s negotiation owns its checks), or none.
pub type Raw = Map<String, Value>;
params_schema!(Raw, json!({"type": "object"}));

/// `tools/call`. The ids a tool needs depend on its scope (checked once the tool is known).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub name: String,
    pub arguments: Option<Map<String, Value>>,
    pub workspace_id: Option<String>,
    pub lease_id: Option<String>,
    pub target_id: Option<String>,
    pub command_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub deadline_ms: Option<u64>,
}
params_schema!(
    ToolCall,
    object(
        &["name"],
        json!({
            "name": id(),
            "arguments": {"type": ["object", "null"]},
            "workspaceId": optional_id(),
            "leaseId": optional_id(),
            "targetId": optional_id(),
            "commandId": optional_id(),
            "idempotencyKey": optional_id(),
            "deadlineMs": optional_integer(),
        })
    )
);

/// `commands/get`, `commands/cancel`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandRef {
    pub command_id: String,
    pub workspace_id: Option<String>,
}
params_schema!(
    CommandRef,
    object(
        &["commandId"],
        json!({"commandId": id(), "workspaceId": optional_id()})
    )
);

/// `workspaces/create`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceCreate {
    pub browser_id: Option<String>,
    pub client_key: Option<String>,
    /// Checked member by member by `session::url_policy` (its errors name the entry).
    pub url_policy: Option<Value>,
    /// `"context"`: managed tabs in a browser context of their own; `"profile"` (the default):
    /// the contract's shared profile.
    pub isolation: Option<String>,
}
params_schema!(
    WorkspaceCreate,
    object(
        &[],
        json!({
            "browserId": optional_id(),
            "clientKey": optional_id(),
            "urlPolicy": {"type": ["object", "null"]},
            "isolation": {"enum": ["profile", "context", null]},
        })
    )
);

/// `workspaces/get`, `workspaces/release`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRef {
    pub workspace_id: String,
}
params_schema!(
    WorkspaceRef,
    object(&["workspaceId"], json!({"workspaceId": id()}))
);

/// `leases/create`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseCreate {
    pub workspace_id: String,
    pub ttl_ms: Option<i64>,
    pub client_key: Option<String>,
}
params_schema!(
    LeaseCreate,
    object(
        &["workspaceId"],
        json!({"workspaceId": id(), "ttlMs": optional_integer(), "clientKey": optional_id()})
    )
);

/// `leases/heartbeat`, `leases/release`, with the bridge's read stamp (`$receivedAtMs`, moved
/// into params by the Connection; only a bridge's is believed, see `leases::sent_at`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRef {
    pub workspace_id: String,
    pub lease_id: String,
    #[serde(rename = "$receivedAtMs")]
    pub received_at: Option<Value>,
}
params_schema!(
    LeaseRef,
    object(
        &["workspaceId", "leaseId"],
        json!({"workspaceId": id(), "leaseId": id()})
    )
);

/// `events/poll`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventPoll {
    pub workspace_id: String,
    pub cursor: String,
    pub limit: Option<u64>,
}
params_schema!(
    EventPoll,
    object(
        &["workspaceId", "cursor"],
        json!({"workspaceId": id(), "cursor": id(), "limit": optional_integer()})
    )
);

/// `artifacts/get`, `artifacts/retain`, `artifacts/release`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRef {
    pub workspace_id: String,
    pub lease_id: String,
    pub artifact_id: String,
}
params_schema!(
    ArtifactRef,
    object(
        &["workspaceId", "leaseId", "artifactId"],
        json!({"workspaceId": id(), "leaseId": id(), "artifactId": id()})
    )
);

/// `artifacts/export`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactExport {
    pub workspace_id: String,
    pub lease_id: String,
    pub artifact_id: String,
    pub path: String,
    pub overwrite: Option<bool>,
}
params_schema!(
    ArtifactExport,
    object(
        &["workspaceId", "leaseId", "artifactId", "path"],
        json!({
            "workspaceId": id(),
            "leaseId": id(),
            "artifactId": id(),
            "path": id(),
            "overwrite": {"type": ["boolean", "null"]},
        })
    )
);

/// `artifacts/import`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactImport {
    pub workspace_id: String,
    pub lease_id: String,
    pub path: String,
    pub mime_type: Option<String>,
}
params_schema!(
    ArtifactImport,
    object(
        &["workspaceId", "leaseId", "path"],
        json!({"workspaceId": id(), "leaseId": id(), "path": id(), "mimeType": optional_id()})
    )
);

/// `broker/shutdown` (CLI).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerShutdown {
    pub broker_id: String,
    pub installation_id: String,
}
params_schema!(
    BrokerShutdown,
    object(
        &["brokerId", "installationId"],
        json!({"brokerId": id(), "installationId": id()})
    )
);

/// `debug/sql` (CLI).
#[derive(Deserialize)]
pub struct DebugSql {
    pub sql: String,
}
params_schema!(DebugSql, object(&["sql"], json!({"sql": id()})));

/// `view/register` (CLI): the live view's origin.
#[derive(Deserialize)]
pub struct ViewRegister {
    pub origin: String,
}
params_schema!(ViewRegister, object(&["origin"], json!({"origin": id()})));

/// `view/events` (CLI): a Workspace's newest journal rows, of one tab when given.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewEvents {
    pub workspace_id: String,
    pub target_id: Option<String>,
}
params_schema!(
    ViewEvents,
    object(
        &["workspaceId"],
        json!({"workspaceId": id(), "targetId": optional_id()})
    )
);

/// `view/frame` (CLI): one frame of a Workspace's tab.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewFrame {
    pub workspace_id: String,
    pub target_id: String,
}
params_schema!(
    ViewFrame,
    object(
        &["workspaceId", "targetId"],
        json!({"workspaceId": id(), "targetId": id()})
    )
);

/// `view/screencast` (CLI): the newest screencast frame of a Workspace's tab after frame number
/// `after` (0 or absent: any).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewScreencast {
    pub workspace_id: String,
    pub target_id: String,
    pub after: Option<u64>,
}
params_schema!(
    ViewScreencast,
    object(
        &["workspaceId", "targetId"],
        json!({"workspaceId": id(), "targetId": id(), "after": optional_integer()})
    )
);

/// `view/takeover` and `view/handback` (CLI): the person takes a Workspace's tab, or hands
/// it back (the same shape as [`ViewFrame`]).
pub type ViewTab = ViewFrame;

/// `view/input` (CLI): one step of the person's input on a tab they hold; `x`/`y` are fractions
/// of the tab's viewport.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewInputParams {
    pub workspace_id: String,
    pub target_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub x: Option<f64>,
    pub y: Option<f64>,
    pub button: Option<String>,
    pub dx: Option<f64>,
    pub dy: Option<f64>,
    pub key: Option<String>,
}
params_schema!(
    ViewInputParams,
    object(
        &["workspaceId", "targetId", "type"],
        json!({
            "workspaceId": id(),
            "targetId": id(),
            "type": {"enum": ["click", "wheel", "key"]},
            "x": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "y": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "button": {"enum": ["left", "middle", "right", null]},
            "dx": {"type": ["number", "null"]},
            "dy": {"type": ["number", "null"]},
            "key": {"type": ["string", "null"], "minLength": 1, "maxLength": 24},
        })
    )
);

/// `handoff/done` (CLI): the person is done with a hand-off (the only one when no id).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffDoneParams {
    pub handoff_id: Option<String>,
    pub note: Option<String>,
}
params_schema!(
    HandoffDoneParams,
    object(
        &[],
        json!({"handoffId": optional_id(), "note": {"type": ["string", "null"], "maxLength": 2000}})
    )
);

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_member_is_checked_by_the_schema_and_named_in_the_error() {
        let error = decode::<LeaseRef>(params(json!({"workspaceId": "workspace:1"})))
            .err()
            .unwrap();
        assert_eq!(error.code.as_str(), "invalid_params");
        assert_eq!(error.context.unwrap()["path"], "params.leaseId");
        for bad in [json!(""), json!(7), json!(null)] {
            let error = decode::<WorkspaceRef>(params(json!({"workspaceId": bad})))
                .err()
                .unwrap();
            assert_eq!(error.context.unwrap()["path"], "params.workspaceId");
        }
        // Null is absent for an optional member; unknown members are ignored.
        let call = decode::<ToolCall>(params(
            json!({"name": "browser.observe", "commandId": null, "extra": [1]}),
        ))
        .unwrap();
        assert_eq!(
            (call.name.as_str(), call.command_id),
            ("browser.observe", None)
        );
        // An integer the schema admits but the field cannot hold is still the caller's fault.
        let error = decode::<ToolCall>(params(json!({"name": "x", "deadlineMs": -1})))
            .err()
            .unwrap();
        assert_eq!(error.code.as_str(), "invalid_params");
    }

    #[test]
    fn the_bridge_stamp_member_is_the_one_the_connection_moves_into_params() {
        let mut stamped = params(json!({"workspaceId": "workspace:1", "leaseId": "lease:1"}));
        stamped.insert(
            crate::protocol::internal::RECEIVED_AT_MEMBER.to_owned(),
            json!(42),
        );
        let lease = decode::<LeaseRef>(stamped).unwrap();
        assert_eq!(lease.received_at, Some(json!(42)));
    }

    #[test]
    fn every_schema_stays_inside_the_validator_subset() {
        for schema in [
            Raw::schema(),
            ToolCall::schema(),
            CommandRef::schema(),
            WorkspaceCreate::schema(),
            WorkspaceRef::schema(),
            LeaseCreate::schema(),
            LeaseRef::schema(),
            EventPoll::schema(),
            ArtifactRef::schema(),
            ArtifactExport::schema(),
            ArtifactImport::schema(),
            BrokerShutdown::schema(),
            DebugSql::schema(),
            ViewRegister::schema(),
            ViewEvents::schema(),
            ViewFrame::schema(),
            ViewScreencast::schema(),
            ViewInputParams::schema(),
            HandoffDoneParams::schema(),
        ] {
            assert_eq!(schema::unknown_keywords(schema), Vec::<String>::new());
        }
    }
}
