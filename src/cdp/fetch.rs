//! The `Fetch` domain: enabling interception with one pattern set per session, the four ways to
//! answer a paused request (`continueRequest`, `failRequest`, `fulfillRequest`,
//! `continueWithAuth`), taking a response body paused at the response stage as a stream
//! (`takeResponseBodyAsStream`), and the two events (`requestPaused`, `authRequired`). Wire shapes only:
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
    /// `Request`: pause before the request is sent; `Response`: once the response headers came.
    pub request_stage: &'static str,
    /// Only requests of this resource type (`Document`); any when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<&'static str>,
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

/// `Fetch.takeResponseBodyAsStream` of a request paused at the response stage: the body as an
/// `IO` stream (read it to its end before answering the request).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeResponseBodyAsStream {
    pub request_id: String,
}

/// The stream handle for `IO.read`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StreamReply {
    pub stream: String,
}

impl Command for TakeResponseBodyAsStream {
    const METHOD: &'static str = "Fetch.takeResponseBodyAsStream";
    type Reply = StreamReply;
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

/// `Fetch.requestPaused` (at the request stage no response fields).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPaused {
    pub request_id: String,
    pub request: PausedRequest,
    #[serde(default)]
    pub resource_type: String,
    /// Set when paused at the response stage (only a managed popup's first document is).
    #[serde(default)]
    pub response_status_code: Option<u16>,
    #[serde(default)]
    pub response_headers: Vec<HeaderEntry>,
}

impl RequestPaused {
    /// The first response header called `name` (any case).
    pub fn response_header(&self, name: &str) -> Option<&str> {
        self.response_headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }
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
                    request_stage: "Request",
                    resource_type: None,
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
        // A response-stage pause (recorded from Chromium 156: a popup's attachment).
        let Ok(Event::RequestPaused(paused)) = Event::decode(
            "Fetch.requestPaused",
            json!({"requestId":"interception-job-2.0","request":{"url":"http://127.0.0.1:1/attach/popup.txt","method":"GET","headers":{}},"frameId":"F","resourceType":"Document","responseStatusCode":200,"responseStatusText":"OK","responseHeaders":[{"name":"Content-Type","value":"application/octet-stream"},{"name":"Content-Disposition","value":"attachment; filename=\"popup.txt\""}],"networkId":"2"}),
        ) else {
            panic!("requestPaused");
        };
        assert_eq!(paused.response_status_code, Some(200));
        assert_eq!(
            paused.response_header("content-disposition"),
            Some("attachment; filename=\"popup.txt\"")
        );
        let document = RequestPattern {
            url_pattern: "*".into(),
            request_stage: "Response",
            resource_type: Some("Document"),
        };
        assert_eq!(
            serde_json::to_value(&document).unwrap(),
            json!({"urlPattern": "*", "requestStage": "Response", "resourceType": "Document"})
        );
        assert_eq!(
            params(&TakeResponseBodyAsStream {
                request_id: "i".into()
            }),
            json!({"requestId": "i"})
        );
    }
}
