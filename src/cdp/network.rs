//! The `Network` domain: `Network.enable`, `Network.getResponseBody`,
//! `Network.emulateNetworkConditions` (offline and throttling of one session, in effect only
//! while `Network` is enabled there), its per-URL form `Network.emulateNetworkConditionsByRule`
//! (the URL policy's WebSocket rules, docs/cdp.md "WebSocket handshakes") and the four events the Broker reads of a request's life (`requestWillBeSent`, `responseReceived`, `loadingFinished`,
//! `loadingFailed`). Wire shapes only: what is kept, bounded and shown to a Workspace is
//! `session::network`'s business. Header maps stay raw JSON here; they never reach an agent
//! without passing the session's bounds.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::command::Command;
use super::command::Empty;
use super::event::EventParams;

/// `Network.enable` with Chromium's default buffers (response bodies are kept for
/// `getResponseBody` while they fit).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Enable {}

impl Command for Enable {
    const METHOD: &'static str = "Network.enable";
    type Reply = Empty;
}

/// `Network.emulateNetworkConditions`: offline, added latency and throughput caps in bytes per
/// second (`-1`: no cap) for the session's requests. Chromium 156 still honours it on a session
/// with `Network` enabled; `NetworkConditions::none()` clears.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmulateNetworkConditions {
    pub offline: bool,
    pub latency: f64,
    pub download_throughput: f64,
    pub upload_throughput: f64,
}

impl EmulateNetworkConditions {
    /// The browser's own network: online, no latency, no caps.
    pub fn none() -> EmulateNetworkConditions {
        EmulateNetworkConditions {
            offline: false,
            latency: 0.0,
            download_throughput: -1.0,
            upload_throughput: -1.0,
        }
    }
}

impl Command for EmulateNetworkConditions {
    const METHOD: &'static str = "Network.emulateNetworkConditions";
    type Reply = Empty;
}

/// One entry of `Network.emulateNetworkConditionsByRule`: the conditions of requests whose URL
/// matches `url_pattern` (URLPattern constructor syntax; empty: every request).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConditions {
    pub url_pattern: String,
    pub offline: bool,
    pub latency: f64,
    pub download_throughput: f64,
    pub upload_throughput: f64,
}

/// `Network.emulateNetworkConditionsByRule`: the session's whole list of conditions, the first
/// entry matching a request wins. It replaces what `emulateNetworkConditions` set on the same
/// session (and the reverse); other sessions' lists are their own. Chromium 156 applies it to
/// WebSocket handshakes (an `offline` entry fails one with `net::ERR_INTERNET_DISCONNECTED`
/// before anything is sent), which neither the Fetch domain nor `setBlockedURLs` sees. Set
/// before `Network.enable` it waits for it; with `Network` disabled it does nothing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmulateNetworkConditionsByRule {
    pub matched_network_conditions: Vec<NetworkConditions>,
}

impl Command for EmulateNetworkConditionsByRule {
    const METHOD: &'static str = "Network.emulateNetworkConditionsByRule";
    type Reply = Empty;
}

/// `Network.getResponseBody` of one finished request on the session that saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetResponseBody {
    pub request_id: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseBody {
    pub body: String,
    #[serde(default)]
    pub base64_encoded: bool,
}

impl Command for GetResponseBody {
    const METHOD: &'static str = "Network.getResponseBody";
    type Reply = ResponseBody;
}

/// The request part of `requestWillBeSent`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub url: String,
    pub method: String,
    /// Header name -> value, as Chromium sends them.
    #[serde(default)]
    pub headers: serde_json::Map<String, Value>,
}

/// The response part of `responseReceived` (and a redirect's `redirectResponse`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    #[serde(default)]
    pub url: String,
    pub status: u16,
    #[serde(default)]
    pub mime_type: String,
    #[serde(default)]
    pub headers: serde_json::Map<String, Value>,
    #[serde(default)]
    pub from_disk_cache: bool,
    #[serde(default)]
    pub from_prefetch_cache: bool,
    #[serde(default)]
    pub from_service_worker: bool,
}

/// `Network.requestWillBeSent`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestWillBeSent {
    pub request_id: String,
    #[serde(default)]
    pub loader_id: String,
    pub request: Request,
    /// Seconds since the epoch.
    #[serde(default)]
    pub wall_time: f64,
    /// Monotonic seconds.
    #[serde(default)]
    pub timestamp: f64,
    /// `Document`, `Stylesheet`, `Image`, `XHR`, `Fetch`, ...
    #[serde(default, rename = "type")]
    pub resource_type: Option<String>,
    #[serde(default)]
    pub frame_id: Option<String>,
    /// Set when this request id continues after a redirect.
    #[serde(default)]
    pub redirect_response: Option<Response>,
}

impl EventParams for RequestWillBeSent {
    const METHOD: &'static str = "Network.requestWillBeSent";
}

/// `Network.responseReceived`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseReceived {
    pub request_id: String,
    #[serde(default)]
    pub timestamp: f64,
    #[serde(default, rename = "type")]
    pub resource_type: Option<String>,
    pub response: Response,
    #[serde(default)]
    pub frame_id: Option<String>,
}

impl EventParams for ResponseReceived {
    const METHOD: &'static str = "Network.responseReceived";
}

/// `Network.loadingFinished`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadingFinished {
    pub request_id: String,
    #[serde(default)]
    pub timestamp: f64,
    #[serde(default)]
    pub encoded_data_length: f64,
}

impl EventParams for LoadingFinished {
    const METHOD: &'static str = "Network.loadingFinished";
}

/// `Network.loadingFailed`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadingFailed {
    pub request_id: String,
    #[serde(default)]
    pub timestamp: f64,
    #[serde(default)]
    pub error_text: String,
    #[serde(default)]
    pub canceled: bool,
    #[serde(default)]
    pub blocked_reason: Option<String>,
}

impl EventParams for LoadingFailed {
    const METHOD: &'static str = "Network.loadingFailed";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cdp::Event;
    use crate::cdp::command::testing::{params, reply};

    #[test]
    fn network_wire_shapes() {
        assert_eq!(params(&Enable {}), json!({}));
        assert_eq!(
            params(&GetResponseBody {
                request_id: "1.2".into()
            }),
            json!({"requestId": "1.2"})
        );
        let by_rule = EmulateNetworkConditionsByRule {
            matched_network_conditions: vec![NetworkConditions {
                url_pattern: "ws://ads.test{.}?/*".into(),
                offline: true,
                latency: 0.0,
                download_throughput: -1.0,
                upload_throughput: -1.0,
            }],
        };
        assert_eq!(
            params(&by_rule),
            json!({"matchedNetworkConditions": [{"urlPattern": "ws://ads.test{.}?/*", "offline": true, "latency": 0.0, "downloadThroughput": -1.0, "uploadThroughput": -1.0}]})
        );
        reply::<EmulateNetworkConditionsByRule>(json!({"ruleIds": ["R1"]}));
        let body = reply::<GetResponseBody>(json!({"body": "AAE=", "base64Encoded": true}));
        assert!(body.base64_encoded);
        let Ok(Event::RequestWillBeSent(sent)) = Event::decode(
            "Network.requestWillBeSent",
            json!({"requestId":"R1","loaderId":"L1","documentURL":"http://a/","request":{"url":"http://a/x.png","method":"GET","headers":{"Accept":"*/*"}},"timestamp":1.5,"wallTime":1700000000.25,"initiator":{"type":"parser"},"type":"Image","frameId":"F"}),
        ) else {
            panic!("requestWillBeSent");
        };
        assert_eq!(sent.resource_type.as_deref(), Some("Image"));
        assert_eq!(sent.request.headers["Accept"], "*/*");
        let Ok(Event::ResponseReceived(received)) = Event::decode(
            "Network.responseReceived",
            json!({"requestId":"R1","loaderId":"L1","timestamp":1.6,"type":"Image","response":{"url":"http://a/x.png","status":403,"statusText":"Forbidden","headers":{},"mimeType":"image/png","fromDiskCache":false,"encodedDataLength":10},"frameId":"F"}),
        ) else {
            panic!("responseReceived");
        };
        assert_eq!(received.response.status, 403);
        assert!(matches!(
            Event::decode(
                "Network.loadingFailed",
                json!({"requestId":"R1","timestamp":2.0,"type":"Image","errorText":"net::ERR_BLOCKED_BY_CLIENT.Inspector","canceled":false,"blockedReason":"inspector"})
            ),
            Ok(Event::LoadingFailed(_))
        ));
        assert!(matches!(
            Event::decode(
                "Network.loadingFinished",
                json!({"requestId":"R1","timestamp":2.0,"encodedDataLength":12})
            ),
            Ok(Event::LoadingFinished(_))
        ));
    }
}
