//! `initialize` negotiation: protocol version, capabilities and per-Connection limits.
//!
//! Pure functions from the client's `initialize` params to what this Connection gets. Owns the
//! supported protocol versions, the capability names and the limit bounds. No I/O.

use serde_json::{Map, Value, json};

use super::errors::{ErrorCode, RpcError};
use super::remediation::RemediationAction;

/// A protocol version `{major, minor}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl Version {
    pub fn to_json(self) -> Value {
        json!({"major": self.major, "minor": self.minor})
    }
}

/// Protocol versions this service speaks, oldest first.
pub const SUPPORTED_PROTOCOLS: &[Version] = &[
    Version { major: 1, minor: 0 },
    Version { major: 1, minor: 1 },
];

/// Capabilities this service supports (`initialize` lists them all under `supported`). A host
/// may request a subset; every tool names the capability it needs.
pub const CAPABILITIES: &[&str] = &[
    "browser.control",
    "workspace.manage",
    "observation.read",
    "action.input",
    "artifact.read",
    "event.read",
    // The extras (docs/protocol.md): data that can hold secrets, control of the network, code
    // in the page, writes into the profile the user's own tabs share (a cookie set in a
    // shared-profile Workspace), and emulation that tells sites another device, place or
    // network (`browser.emulate`). A host names them to get them.
    "network.read",
    "network.control",
    "page.eval",
    "profile.write",
    "page.emulate",
];

/// What an omitted `requestedCapabilities` grants: the contract's six. The extras above read
/// secrets or run code, so a host gets them only by naming them (least privilege,
/// docs/security.md "Least privilege").
pub const DEFAULT_CAPABILITIES: &[&str] = &[
    "browser.control",
    "workspace.manage",
    "observation.read",
    "action.input",
    "artifact.read",
    "event.read",
];

/// Message and result size limits of one Connection or of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_message_bytes: u64,
    pub max_result_bytes: u64,
}

/// The service maximum, also the fixed bootstrap limits of `initialize` itself: 1 MiB input
/// lines and 4 MiB results, as the contract sets them.
pub const SERVICE_LIMITS: Limits = Limits {
    max_message_bytes: 1024 * 1024,
    max_result_bytes: 4 * 1024 * 1024,
};

/// The smallest limit a protocol 1.1 client may ask for: below 64 KiB ordinary results (an
/// Observation, an error with context) would not fit.
pub const MIN_NEGOTIATED_BYTES: u64 = 64 * 1024;

/// The largest limit a client may name (1 GiB); the selected value is still capped by the service.
pub const MAX_NEGOTIATED_BYTES: u64 = 1024 * 1024 * 1024;

/// Who is calling: the Principal is `client.id + client.instanceId`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    pub id: String,
    pub instance_id: String,
    pub name: Option<String>,
    pub version: Option<String>,
}

/// The outcome of a successful negotiation.
#[derive(Debug, Clone, PartialEq)]
pub struct Negotiated {
    pub client: ClientInfo,
    pub protocol: Version,
    pub granted: Vec<String>,
    pub limits: Limits,
}

/// Longest accepted `client.id` / `instanceId` / name / version string.
const MAX_CLIENT_FIELD_CHARS: usize = 256;

/// Negotiates one `initialize` request's params.
pub fn negotiate(params: &Map<String, Value>) -> Result<Negotiated, RpcError> {
    let client = parse_client(params.get("client"))?;
    let protocol = select_protocol(params.get("protocol"))?;
    let granted = grant_capabilities(params.get("requestedCapabilities"))?;
    let limits = match protocol.minor {
        0 => SERVICE_LIMITS,
        _ => negotiate_limits(params.get("limits"))?,
    };
    Ok(Negotiated {
        client,
        protocol,
        granted,
        limits,
    })
}

fn parse_client(value: Option<&Value>) -> Result<ClientInfo, RpcError> {
    let Some(Value::Object(client)) = value else {
        return Err(RpcError::invalid_params(
            "\"client\" must be an object with a non-empty \"id\"",
        ));
    };
    let field = |name: &str, required: bool| -> Result<Option<String>, RpcError> {
        match client.get(name) {
            None | Some(Value::Null) if !required => Ok(None),
            Some(Value::String(s))
                if !s.is_empty() && s.chars().count() <= MAX_CLIENT_FIELD_CHARS =>
            {
                Ok(Some(s.clone()))
            }
            _ => Err(RpcError::invalid_params(format!(
                "\"client.{name}\" must be a non-empty string of at most {MAX_CLIENT_FIELD_CHARS} characters"
            ))),
        }
    };
    Ok(ClientInfo {
        id: field("id", true)?.unwrap_or_default(),
        instance_id: field("instanceId", false)?.unwrap_or_default(),
        name: field("name", false)?,
        version: field("version", false)?,
    })
}

fn parse_version(value: Option<&Value>, name: &str) -> Result<Version, RpcError> {
    let bad = || {
        RpcError::invalid_params(format!(
            "\"protocol.{name}\" must be {{\"major\": int, \"minor\": int}}"
        ))
    };
    let Some(Value::Object(v)) = value else {
        return Err(bad());
    };
    let number = |key: &str| {
        v.get(key)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    match (number("major"), number("minor")) {
        (Some(major), Some(minor)) => Ok(Version { major, minor }),
        _ => Err(bad()),
    }
}

/// The highest supported version inside the client's `[min, max]`.
fn select_protocol(value: Option<&Value>) -> Result<Version, RpcError> {
    let Some(Value::Object(range)) = value else {
        return Err(RpcError::invalid_params(
            "\"protocol\" must be {\"min\": version, \"max\": version}",
        ));
    };
    let min = parse_version(range.get("min"), "min")?;
    let max = parse_version(range.get("max"), "max")?;
    if min > max {
        return Err(RpcError::invalid_params(
            "\"protocol.min\" is greater than \"protocol.max\"",
        ));
    }
    SUPPORTED_PROTOCOLS.iter().rev().find(|v| **v >= min && **v <= max).copied().ok_or_else(|| {
        let supported: Vec<Value> = SUPPORTED_PROTOCOLS.iter().map(|v| v.to_json()).collect();
        RpcError::new(
            ErrorCode::ProtocolIncompatible,
            format!("no protocol version in {}.{}..{}.{} is supported", min.major, min.minor, max.major, max.minor),
        )
        .with_remediation(
            RemediationAction::UseCompatibleExecutable,
            "launch a Browser Pilot executable that speaks your protocol range, or isolate it with an absolute BROWSER_PILOT_HOME",
        )
        .with_context("supported", Value::Array(supported))
    })
}

/// Granted = requested ∩ supported; an omitted list grants only [`DEFAULT_CAPABILITIES`] (the
/// contract's six, never an extra). Unknown names are ignored (a newer host may ask for more
/// than this service has).
fn grant_capabilities(value: Option<&Value>) -> Result<Vec<String>, RpcError> {
    match value {
        None | Some(Value::Null) => Ok(DEFAULT_CAPABILITIES
            .iter()
            .map(|c| (*c).to_owned())
            .collect()),
        Some(Value::Array(items)) => {
            let mut requested = Vec::with_capacity(items.len());
            for item in items {
                match item.as_str() {
                    Some(name) => requested.push(name),
                    None => {
                        return Err(RpcError::invalid_params(
                            "\"requestedCapabilities\" must be an array of strings",
                        ));
                    }
                }
            }
            Ok(CAPABILITIES
                .iter()
                .filter(|c| requested.contains(c))
                .map(|c| (*c).to_owned())
                .collect())
        }
        Some(_) => Err(RpcError::invalid_params(
            "\"requestedCapabilities\" must be an array of strings",
        )),
    }
}

fn negotiate_limits(value: Option<&Value>) -> Result<Limits, RpcError> {
    let requested = match value {
        None | Some(Value::Null) => return Ok(SERVICE_LIMITS),
        Some(Value::Object(requested)) => requested,
        Some(_) => return Err(RpcError::invalid_params("\"limits\" must be an object")),
    };
    let pick = |key: &str, service: u64| -> Result<u64, RpcError> {
        match requested.get(key) {
            None | Some(Value::Null) => Ok(service),
            Some(v) => match v.as_u64() {
                Some(n) if (MIN_NEGOTIATED_BYTES..=MAX_NEGOTIATED_BYTES).contains(&n) => Ok(n.min(service)),
                _ => Err(RpcError::invalid_params(format!(
                    "\"limits.{key}\" must be an integer from {MIN_NEGOTIATED_BYTES} through {MAX_NEGOTIATED_BYTES}"
                ))
                .with_context("min", json!(MIN_NEGOTIATED_BYTES))
                .with_context("max", json!(MAX_NEGOTIATED_BYTES))),
            },
        }
    };
    Ok(Limits {
        max_message_bytes: pick("maxMessageBytes", SERVICE_LIMITS.max_message_bytes)?,
        max_result_bytes: pick("maxResultBytes", SERVICE_LIMITS.max_result_bytes)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn base(protocol: Value, limits: Value) -> Map<String, Value> {
        params(
            json!({"client": {"id": "a", "instanceId": "i"}, "protocol": protocol, "limits": limits}),
        )
    }

    fn range(min: (u32, u32), max: (u32, u32)) -> Value {
        json!({"min": {"major": min.0, "minor": min.1}, "max": {"major": max.0, "minor": max.1}})
    }

    #[test]
    fn selects_highest_overlap() {
        let n = negotiate(&base(range((1, 0), (1, 1)), Value::Null)).unwrap();
        assert_eq!(n.protocol, Version { major: 1, minor: 1 });
        let n = negotiate(&base(range((1, 0), (1, 0)), Value::Null)).unwrap();
        assert_eq!(n.protocol, Version { major: 1, minor: 0 });
        let n = negotiate(&base(range((1, 0), (3, 0)), Value::Null)).unwrap();
        assert_eq!(n.protocol, Version { major: 1, minor: 1 });
        let e = negotiate(&base(range((2, 0), (2, 5)), Value::Null)).unwrap_err();
        assert_eq!(e.code, ErrorCode::ProtocolIncompatible);
        assert!(e.remediation.is_some());
    }

    #[test]
    fn limit_edges() {
        let check = |limits: Value, want: Result<(u64, u64), ()>| {
            let got = negotiate(&base(range((1, 1), (1, 1)), limits.clone()));
            match (got, want) {
                (Ok(n), Ok((m, r))) => assert_eq!(
                    (n.limits.max_message_bytes, n.limits.max_result_bytes),
                    (m, r),
                    "{limits}"
                ),
                (Err(e), Err(())) => assert_eq!(e.code, ErrorCode::InvalidParams, "{limits}"),
                (got, want) => panic!("{limits}: got {got:?}, want {want:?}"),
            }
        };
        check(
            json!({"maxMessageBytes": 65536, "maxResultBytes": 65536}),
            Ok((65536, 65536)),
        );
        check(json!({"maxMessageBytes": 65535}), Err(()));
        check(
            json!({"maxResultBytes": 1073741824}),
            Ok((1048576, 4194304)),
        );
        check(json!({"maxResultBytes": 1073741825}), Err(()));
        check(json!({"maxMessageBytes": 100000.5}), Err(()));
        check(json!({"maxMessageBytes": -1}), Err(()));
        check(json!({"maxMessageBytes": 200000}), Ok((200000, 4194304)));
        check(json!({}), Ok((1048576, 4194304)));
        // Protocol 1.0 ignores client limits.
        let n = negotiate(&base(range((1, 0), (1, 0)), json!({"maxMessageBytes": 1}))).unwrap();
        assert_eq!(n.limits, SERVICE_LIMITS);
    }

    #[test]
    fn capabilities_are_intersected() {
        let mut p = base(range((1, 1), (1, 1)), Value::Null);
        p.insert(
            "requestedCapabilities".into(),
            json!(["observation.read", "made.up"]),
        );
        assert_eq!(
            negotiate(&p).unwrap().granted,
            vec!["observation.read".to_owned()]
        );
        p.insert("requestedCapabilities".into(), json!("all"));
        assert_eq!(negotiate(&p).unwrap_err().code, ErrorCode::InvalidParams);
    }

    #[test]
    fn an_omitted_list_grants_only_the_contract_six() {
        let p = base(range((1, 1), (1, 1)), Value::Null);
        let granted = negotiate(&p).unwrap().granted;
        assert_eq!(granted, DEFAULT_CAPABILITIES);
        for extra in [
            "network.read",
            "network.control",
            "page.eval",
            "profile.write",
            "page.emulate",
        ] {
            assert!(!granted.iter().any(|g| g == extra), "{extra}");
            assert!(CAPABILITIES.contains(&extra), "{extra} is supported");
        }
        assert!(
            DEFAULT_CAPABILITIES
                .iter()
                .all(|c| CAPABILITIES.contains(c))
        );
        // Naming an extra (beside the six) grants it; order follows the supported list.
        let mut p = base(range((1, 1), (1, 1)), Value::Null);
        p.insert(
            "requestedCapabilities".into(),
            json!(["page.eval", "observation.read", "network.read"]),
        );
        assert_eq!(
            negotiate(&p).unwrap().granted,
            vec!["observation.read", "network.read", "page.eval"]
        );
        // An empty list grants nothing.
        p.insert("requestedCapabilities".into(), json!([]));
        assert!(negotiate(&p).unwrap().granted.is_empty());
    }

    #[test]
    fn client_is_required() {
        let p = params(json!({"protocol": range((1, 1), (1, 1))}));
        assert_eq!(negotiate(&p).unwrap_err().code, ErrorCode::InvalidParams);
        let p = params(json!({"client": {"id": ""}, "protocol": range((1, 1), (1, 1))}));
        assert_eq!(negotiate(&p).unwrap_err().code, ErrorCode::InvalidParams);
    }
}
