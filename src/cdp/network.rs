//! The `Network` domain, reduced to what the Broker's in-flight request count needs: enabling
//! the domain on a session (`Enable`) and the three events that start and end a request
//! (`RequestWillBeSent`, `LoadingFinished`, `LoadingFailed`), each with only the request id.
//! Wire shapes only: what counts as idle is `session::activity`'s. Headers, bodies and URLs are
//! deliberately not decoded here.

use serde::{Deserialize, Serialize};

use super::command::{Command, Empty};
use super::event::EventParams;

/// `Network.enable`: request events for this session from now on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Enable {}

impl Command for Enable {
    const METHOD: &'static str = "Network.enable";
    type Reply = Empty;
}

/// `Network.requestWillBeSent` (also sent again, with the same id, for each redirect).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestWillBeSent {
    pub request_id: String,
}

impl EventParams for RequestWillBeSent {
    const METHOD: &'static str = "Network.requestWillBeSent";
}

/// `Network.loadingFinished`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadingFinished {
    pub request_id: String,
}

impl EventParams for LoadingFinished {
    const METHOD: &'static str = "Network.loadingFinished";
}

/// `Network.loadingFailed` (blocked, cancelled, aborted by a navigation, net errors).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadingFailed {
    pub request_id: String,
}

impl EventParams for LoadingFailed {
    const METHOD: &'static str = "Network.loadingFailed";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cdp::Event;
    use crate::cdp::command::testing::params;

    #[test]
    fn enable_and_request_events_have_the_wire_shape() {
        assert_eq!(params(&Enable {}), json!({}));
        // Samples recorded from Chromium 156 (other members cut).
        let sent = Event::decode(
            "Network.requestWillBeSent",
            json!({"requestId": "1234.5", "loaderId": "L", "type": "Fetch", "request": {"url": "http://127.0.0.1/x", "method": "GET"}}),
        )
        .unwrap();
        assert_eq!(
            sent,
            Event::RequestWillBeSent(RequestWillBeSent {
                request_id: "1234.5".into()
            })
        );
        let finished = Event::decode(
            "Network.loadingFinished",
            json!({"requestId": "1234.5", "timestamp": 1.5, "encodedDataLength": 120}),
        )
        .unwrap();
        assert!(matches!(finished, Event::LoadingFinished(f) if f.request_id == "1234.5"));
        let failed = Event::decode(
            "Network.loadingFailed",
            json!({"requestId": "9", "errorText": "net::ERR_ABORTED", "canceled": true, "type": "Fetch"}),
        )
        .unwrap();
        assert!(matches!(failed, Event::LoadingFailed(f) if f.request_id == "9"));
    }
}
