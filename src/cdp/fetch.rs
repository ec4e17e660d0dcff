//! The `Fetch` domain: enabling interception with one pattern set per session, the four ways to
//! answer a paused request (`continueRequest`, `failRequest`, `fulfillRequest`,
//! `continueWithAuth`) and the two events (`requestPaused`, `authRequired`). Wire shapes only:
//! which request gets which answer, and that each gets exactly one, is `session::fetch`'s
//! business. A `continueWithAuth` carries a password: its type has no `Debug` output of the
//! password and nothing here logs params.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::command::{Command, Empty};
use super::event::EventParams;

/// One header as the Fetch domain spells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderEntry {
    pub name: String,
    pub value: String,
}

/// One interception pattern.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPattern {
    pub url_pattern: String,
    /// `Request`: pause before the request is sent.
    pub request_stage: &'static str,
}

/// `Fetch.enable`: replaces the session's previous pattern set (docs/cdp.md, "fetch patterns").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Enable {
    pub patterns: Vec<RequestPattern>,
    pub handle_auth_requests: bool,
}

impl Command for Enable {
    const METHOD: &'static str = "Fetch.enable";
    type Reply = Empty;
}

/// `Fetch.disable`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disable {}

impl Command for Disable {
    const METHOD: &'static str = "Fetch.disable";
    type Reply = Empty;
}

/// `Fetch.continueRequest`; `headers`, when present, replace the request's headers entirely
/// (so callers merge with the originals).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContinueRequest {
    pub request_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<HeaderEntry>>,
}

impl Command for ContinueRequest {
    const METHOD: &'static str = "Fetch.continueRequest";
    type Reply = Empty;
}

/// `Fetch.failRequest`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailRequest {
    pub request_id: String,
    /// `BlockedByClient` for a block rule.
    pub error_reason: &'static str,
}

impl Command for FailRequest {
    const METHOD: &'static str = "Fetch.failRequest";
    type Reply = Empty;
}

/// `Fetch.fulfillRequest`; the body is base64.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FulfillRequest {
    pub request_id: String,
    pub response_code: u16,
    pub response_headers: Vec<HeaderEntry>,
    pub body: String,
}

impl Command for FulfillRequest {
    const METHOD: &'static str = "Fetch.fulfillRequest";
    type Reply = Empty;
}

/// The answer to an auth challenge.
#[derive(Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthChallengeResponse {
    /// `Default`, `CancelAuth` or `ProvideCredentials`.
    pub response: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

impl std::fmt::Debug for AuthChallengeResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthChallengeResponse")
            .field("response", &self.response)
            .finish_non_exhaustive()
    }
}

/// `Fetch.continueWithAuth`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContinueWithAuth {
    pub request_id: String,
    pub auth_challenge_response: AuthChallengeResponse,
}

impl Command for ContinueWithAuth {
    const METHOD: &'static str = "Fetch.continueWithAuth";
    type Reply = Empty;
}

/// The request part of a Fetch event.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PausedRequest {
    pub url: String,
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub headers: serde_json::Map<String, Value>,
}

/// `Fetch.requestPaused` (request stage: no response fields).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPaused {
    pub request_id: String,
    pub request: PausedRequest,
    #[serde(default)]
    pub resource_type: String,
    /// Set when paused at the response stage, which the Broker never asks for.
    #[serde(default)]
    pub response_status_code: Option<u16>,
}

impl EventParams for RequestPaused {
    const METHOD: &'static str = "Fetch.requestPaused";
}

/// What the server asked for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthChallenge {
    /// `Server` or `Proxy`.
    #[serde(default)]
    pub source: Option<String>,
    pub origin: String,
    #[serde(default)]
    pub scheme: String,
    #[serde(default)]
    pub realm: String,
}

/// `Fetch.authRequired`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthRequired {
    pub request_id: String,
    pub request: PausedRequest,
    pub auth_challenge: AuthChallenge,
}

impl EventParams for AuthRequired {
    const METHOD: &'static str = "Fetch.authRequired";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cdp::Event;
    use crate::cdp::command::testing::params;

    #[test]
    fn fetch_wire_shapes() {
        assert_eq!(
            params(&Enable {
                patterns: vec![RequestPattern {
                    url_pattern: "*".into(),
                    request_stage: "Request"
                }],
                handle_auth_requests: true
            }),
            json!({"patterns": [{"urlPattern": "*", "requestStage": "Request"}], "handleAuthRequests": true})
        );
        assert_eq!(
            params(&ContinueRequest {
                request_id: "interception-1".into(),
                headers: None
            }),
            json!({"requestId": "interception-1"})
        );
        let answer = ContinueWithAuth {
            request_id: "i".into(),
            auth_challenge_response: AuthChallengeResponse {
                response: "ProvideCredentials",
                username: Some("u".into()),
                password: Some("hunter2".into()),
            },
        };
        assert_eq!(
            params(&answer)["authChallengeResponse"]["password"],
            "hunter2"
        );
        assert!(!format!("{answer:?}").contains("hunter2"));
        let Ok(Event::AuthRequired(required)) = Event::decode(
            "Fetch.authRequired",
            json!({"requestId":"interception-job-3.0","request":{"url":"http://127.0.0.1:1/a","method":"GET","headers":{}},"frameId":"F","resourceType":"Document","authChallenge":{"source":"Server","origin":"http://127.0.0.1:1","scheme":"basic","realm":"r1"}}),
        ) else {
            panic!("authRequired");
        };
        assert_eq!(required.auth_challenge.realm, "r1");
        assert!(matches!(
            Event::decode(
                "Fetch.requestPaused",
                json!({"requestId":"interception-job-1.0","request":{"url":"http://a/","method":"GET","headers":{"Accept":"*/*"}},"frameId":"F","resourceType":"Document","networkId":"1"})
            ),
            Ok(Event::RequestPaused(_))
        ));
    }
}
