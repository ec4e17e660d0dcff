//! The typed CDP events: the `EventParams` trait (an event's wire name and params type), the
//! closed `Event` enum of every event the Broker reads, and `Event::decode`, the one place an
//! event's method name is matched and its params decoded. Events the Broker does not read are
//! `Event::Other`. The params types live in their domain files; this file holds no state.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::browser::{DownloadProgress, DownloadWillBegin};
use super::client::CdpEvent;
use super::fetch::{AuthRequired, RequestPaused};
use super::ids::SessionId;
use super::inspector::{Detached, TargetCrashed as InspectorTargetCrashed};
use super::network::{LoadingFailed, LoadingFinished, RequestWillBeSent, ResponseReceived};
use super::page::{
    FileChooserOpened, FrameDetached, FrameNavigated, FrameStartedNavigating, FrameStoppedLoading,
    JavascriptDialogClosed, JavascriptDialogOpening, LifecycleEvent, NavigatedWithinDocument,
    ScreencastFrame,
};
use super::runtime::{ConsoleApiCalled, ExceptionThrown};
use super::target::{
    AttachedToTarget, DetachedFromTarget, TargetCrashed, TargetCreated, TargetDestroyed,
    TargetInfoChanged,
};

/// The params of one CDP event.
pub trait EventParams: DeserializeOwned {
    /// `Domain.event`, as Chromium spells it.
    const METHOD: &'static str;
}

/// Every event the Broker reads, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    TargetCreated(TargetCreated),
    TargetInfoChanged(TargetInfoChanged),
    TargetDestroyed(TargetDestroyed),
    TargetCrashed(TargetCrashed),
    AttachedToTarget(AttachedToTarget),
    DetachedFromTarget(DetachedFromTarget),
    InspectorDetached(Detached),
    InspectorTargetCrashed(InspectorTargetCrashed),
    LifecycleEvent(LifecycleEvent),
    FrameStartedNavigating(FrameStartedNavigating),
    FrameNavigated(FrameNavigated),
    NavigatedWithinDocument(NavigatedWithinDocument),
    FrameStoppedLoading(FrameStoppedLoading),
    FrameDetached(FrameDetached),
    JavascriptDialogOpening(JavascriptDialogOpening),
    JavascriptDialogClosed(JavascriptDialogClosed),
    DownloadWillBegin(DownloadWillBegin),
    DownloadProgress(DownloadProgress),
    /// Page activity (`session::activity`): console calls, uncaught exceptions, requests.
    ConsoleApiCalled(ConsoleApiCalled),
    ExceptionThrown(ExceptionThrown),
    RequestWillBeSent(RequestWillBeSent),
    LoadingFinished(LoadingFinished),
    LoadingFailed(LoadingFailed),
    FileChooserOpened(FileChooserOpened),
    ResponseReceived(ResponseReceived),
    RequestPaused(RequestPaused),
    AuthRequired(AuthRequired),
    /// A frame of the live view's screencast (`session::view`).
    ScreencastFrame(ScreencastFrame),
    /// An event the Broker does not read.
    Other {
        method: String,
    },
}

/// A known event whose params do not have the shape its type expects.
#[derive(Debug, thiserror::Error)]
#[error("malformed {method} event: {source}")]
pub struct EventError {
    pub method: &'static str,
    #[source]
    pub source: serde_json::Error,
}

fn params<E: EventParams>(params: Value) -> Result<E, EventError> {
    serde_json::from_value(params).map_err(|source| EventError {
        method: E::METHOD,
        source,
    })
}

impl Event {
    /// Decodes one event by its method name.
    pub fn decode(method: &str, raw: Value) -> Result<Event, EventError> {
        Ok(match method {
            TargetCreated::METHOD => Event::TargetCreated(params(raw)?),
            TargetInfoChanged::METHOD => Event::TargetInfoChanged(params(raw)?),
            TargetDestroyed::METHOD => Event::TargetDestroyed(params(raw)?),
            TargetCrashed::METHOD => Event::TargetCrashed(params(raw)?),
            AttachedToTarget::METHOD => Event::AttachedToTarget(params(raw)?),
            DetachedFromTarget::METHOD => Event::DetachedFromTarget(params(raw)?),
            Detached::METHOD => Event::InspectorDetached(params(raw)?),
            InspectorTargetCrashed::METHOD => Event::InspectorTargetCrashed(params(raw)?),
            LifecycleEvent::METHOD => Event::LifecycleEvent(params(raw)?),
            FrameStartedNavigating::METHOD => Event::FrameStartedNavigating(params(raw)?),
            FrameNavigated::METHOD => Event::FrameNavigated(params(raw)?),
            NavigatedWithinDocument::METHOD => Event::NavigatedWithinDocument(params(raw)?),
            FrameStoppedLoading::METHOD => Event::FrameStoppedLoading(params(raw)?),
            FrameDetached::METHOD => Event::FrameDetached(params(raw)?),
            JavascriptDialogOpening::METHOD => Event::JavascriptDialogOpening(params(raw)?),
            JavascriptDialogClosed::METHOD => Event::JavascriptDialogClosed(params(raw)?),
            DownloadWillBegin::METHOD => Event::DownloadWillBegin(params(raw)?),
            DownloadProgress::METHOD => Event::DownloadProgress(params(raw)?),
            ConsoleApiCalled::METHOD => Event::ConsoleApiCalled(params(raw)?),
            ExceptionThrown::METHOD => Event::ExceptionThrown(params(raw)?),
            RequestWillBeSent::METHOD => Event::RequestWillBeSent(params(raw)?),
            LoadingFinished::METHOD => Event::LoadingFinished(params(raw)?),
            LoadingFailed::METHOD => Event::LoadingFailed(params(raw)?),
            FileChooserOpened::METHOD => Event::FileChooserOpened(params(raw)?),
            ResponseReceived::METHOD => Event::ResponseReceived(params(raw)?),
            RequestPaused::METHOD => Event::RequestPaused(params(raw)?),
            AuthRequired::METHOD => Event::AuthRequired(params(raw)?),
            ScreencastFrame::METHOD => Event::ScreencastFrame(params(raw)?),
            other => Event::Other {
                method: other.to_owned(),
            },
        })
    }

    /// Whether the event is part of a target's or a page load's lifecycle: the client keeps
    /// these when its consumer is slow (dropping one would leave a session open forever or
    /// make a waiting navigation look stalled; an intercepted file chooser has no other trace),
    /// and drops others.
    /// A paused request (`Fetch.*`) is kept too: dropping it would stall its page.
    pub fn is_lifecycle(method: &str) -> bool {
        method.starts_with("Target.")
            || method.starts_with("Fetch.")
            || method.starts_with("Inspector.")
            || [
                LifecycleEvent::METHOD,
                FrameStartedNavigating::METHOD,
                FrameStoppedLoading::METHOD,
                FrameNavigated::METHOD,
                NavigatedWithinDocument::METHOD,
                // A lost download event would leave a file in the user's download folder.
                DownloadWillBegin::METHOD,
                DownloadProgress::METHOD,
                // Rare, and the only report of an intercepted chooser (nothing is shown).
                FileChooserOpened::METHOD,
                // One in flight at a time (each waits for its ack): a lost one would stall
                // the live view's screencast.
                ScreencastFrame::METHOD,
            ]
            .contains(&method)
    }
}

impl CdpEvent {
    /// The event's session and its typed form.
    pub fn decode(self) -> Result<(Option<SessionId>, Event), EventError> {
        let event = Event::decode(&self.method, self.params)?;
        Ok((self.session, event))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cdp::TargetId;

    fn decode(method: &str, params: Value) -> Event {
        Event::decode(method, params).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Samples recorded from Chromium 156 over the life of one tab (the crash with the shape
    /// `Target.targetCrashed` has; a crash was not provoked).
    #[test]
    fn target_events_decode() {
        let info = json!({"attached":false,"browserContextId":"BD5129C3E5009BCB12CFF0B137C509F5","canAccessOpener":false,"targetId":"FC5A3C1B58A88245272668F3F49949EB","title":"","type":"page","url":"about:blank"});
        let Event::TargetCreated(created) =
            decode("Target.targetCreated", json!({"targetInfo": info}))
        else {
            panic!("targetCreated");
        };
        assert_eq!(created.target_info.target_type, "page");
        assert_eq!(created.target_info.opener_id, None);
        let Event::TargetInfoChanged(changed) = decode(
            "Target.targetInfoChanged",
            json!({"targetInfo":{"attached":true,"browserContextId":"BD5129C3E5009BCB12CFF0B137C509F5","canAccessOpener":false,"targetId":"FC5A3C1B58A88245272668F3F49949EB","title":"127.0.0.1:45519/page/rec","type":"page","url":"http://127.0.0.1:45519/page/rec"}}),
        ) else {
            panic!("targetInfoChanged");
        };
        assert_eq!(changed.target_info.url, "http://127.0.0.1:45519/page/rec");
        assert_eq!(
            decode(
                "Target.targetDestroyed",
                json!({"targetId":"FC5A3C1B58A88245272668F3F49949EB"})
            ),
            Event::TargetDestroyed(TargetDestroyed {
                target_id: TargetId::new("FC5A3C1B58A88245272668F3F49949EB")
            })
        );
        assert!(matches!(
            decode(
                "Target.targetCrashed",
                json!({"targetId": "P2", "status": "crashed", "errorCode": 5})
            ),
            Event::TargetCrashed(_)
        ));
        let Event::AttachedToTarget(attached) = decode(
            "Target.attachedToTarget",
            json!({"sessionId":"64CF082844C5C9D95E3DF4CA3E5893A6","targetInfo":{"attached":true,"browserContextId":"BD5129C3E5009BCB12CFF0B137C509F5","canAccessOpener":false,"targetId":"FC5A3C1B58A88245272668F3F49949EB","title":"","type":"page","url":"about:blank"},"waitingForDebugger":false}),
        ) else {
            panic!("attachedToTarget");
        };
        assert_eq!(
            attached.session_id,
            SessionId::new("64CF082844C5C9D95E3DF4CA3E5893A6")
        );
        assert!(attached.target_info.attached);
        let Event::DetachedFromTarget(detached) = decode(
            "Target.detachedFromTarget",
            json!({"sessionId":"64CF082844C5C9D95E3DF4CA3E5893A6","targetId":"FC5A3C1B58A88245272668F3F49949EB"}),
        ) else {
            panic!("detachedFromTarget");
        };
        assert_eq!(
            detached.target_id,
            Some(TargetId::new("FC5A3C1B58A88245272668F3F49949EB"))
        );
        let Event::InspectorDetached(gone) = decode(
            "Inspector.detached",
            json!({"reason":"Render process gone."}),
        ) else {
            panic!("Inspector.detached");
        };
        assert_eq!(gone.reason, "Render process gone.");
        assert!(matches!(
            decode("Inspector.targetCrashed", json!({})),
            Event::InspectorTargetCrashed(_)
        ));
    }

    /// Samples recorded from Chromium 156 (a fixture page, then a `srcdoc` iframe added to it
    /// and a `prompt()`); the same-document, restore and detach shapes are Chromium's too but
    /// written by hand.
    #[test]
    fn page_events_decode() {
        let Event::LifecycleEvent(lifecycle) = decode(
            "Page.lifecycleEvent",
            json!({"frameId":"FC5A3C1B58A88245272668F3F49949EB","loaderId":"2E1937A88FEE0FE481E74A5ECFE19904","name":"DOMContentLoaded","timestamp":4528.577587}),
        ) else {
            panic!("lifecycleEvent");
        };
        assert_eq!(
            (lifecycle.loader_id.as_str(), lifecycle.name.as_str()),
            ("2E1937A88FEE0FE481E74A5ECFE19904", "DOMContentLoaded")
        );
        let Event::FrameStartedNavigating(started) = decode(
            "Page.frameStartedNavigating",
            json!({"frameId":"FC5A3C1B58A88245272668F3F49949EB","loaderId":"2E1937A88FEE0FE481E74A5ECFE19904","navigationType":"differentDocument","url":"http://127.0.0.1:45519/page/rec"}),
        ) else {
            panic!("frameStartedNavigating");
        };
        assert!(!started.same_document());
        let Event::FrameStartedNavigating(fragment) = decode(
            "Page.frameStartedNavigating",
            json!({"frameId": "M", "url": "http://127.0.0.1:8000/#b", "loaderId": "L1",
                "navigationType": "sameDocument"}),
        ) else {
            panic!("frameStartedNavigating");
        };
        assert!(fragment.same_document());
        let Event::FrameNavigated(navigated) = decode(
            "Page.frameNavigated",
            json!({"frame":{"adFrameStatus":{"adFrameType":"none"},"crossOriginIsolatedContextType":"NotIsolated","domainAndRegistry":"","gatedAPIFeatures":[],"id":"FC5A3C1B58A88245272668F3F49949EB","loaderId":"2E1937A88FEE0FE481E74A5ECFE19904","mimeType":"text/html","secureContextType":"SecureLocalhost","securityOrigin":"http://127.0.0.1:45519","securityOriginDetails":{"isLocalhost":true},"url":"http://127.0.0.1:45519/page/rec"},"type":"Navigation"}),
        ) else {
            panic!("frameNavigated");
        };
        assert!(!navigated.restored());
        assert_eq!(navigated.frame.parent_id, None);
        assert_eq!(
            navigated.frame.loader_id.as_deref(),
            Some("2E1937A88FEE0FE481E74A5ECFE19904")
        );
        let Event::FrameNavigated(child) = decode(
            "Page.frameNavigated",
            json!({"frame":{"adFrameStatus":{"adFrameType":"none","explanations":[]},"crossOriginIsolatedContextType":"NotIsolated","domainAndRegistry":"","gatedAPIFeatures":[],"id":"8CA8D39EBB5F4B5ECF3884526CE93705","loaderId":"4BF5785E5FA38BD6C21EADCA2346BD72","mimeType":"text/html","name":"inner","parentId":"FC5A3C1B58A88245272668F3F49949EB","secureContextType":"SecureLocalhost","securityOrigin":"://","securityOriginDetails":{"isLocalhost":false},"url":"about:srcdoc"},"type":"Navigation"}),
        ) else {
            panic!("frameNavigated");
        };
        assert_eq!(
            child.frame.parent_id.as_deref(),
            Some("FC5A3C1B58A88245272668F3F49949EB")
        );
        let Event::FrameNavigated(restored) = decode(
            "Page.frameNavigated",
            json!({"frame": {"id": "M", "loaderId": "L2", "url": "http://127.0.0.1:8000/",
                "securityOrigin": "http://127.0.0.1:8000", "mimeType": "text/html"},
                "type": "BackForwardCacheRestore"}),
        ) else {
            panic!("frameNavigated");
        };
        assert!(restored.restored());
        assert!(matches!(
            decode(
                "Page.navigatedWithinDocument",
                json!({"frameId": "M", "url": "http://a/#x", "navigationType": "fragment"})
            ),
            Event::NavigatedWithinDocument(_)
        ));
        assert!(matches!(
            decode(
                "Page.frameStoppedLoading",
                json!({"frameId":"FC5A3C1B58A88245272668F3F49949EB"})
            ),
            Event::FrameStoppedLoading(_)
        ));
        let Event::FrameDetached(detached) = decode(
            "Page.frameDetached",
            json!({"frameId": "A", "reason": "swap"}),
        ) else {
            panic!("frameDetached");
        };
        assert!(detached.swapped());
        let Event::JavascriptDialogOpening(dialog) = decode(
            "Page.javascriptDialogOpening",
            json!({"defaultPrompt":"yes","frameId":"FC5A3C1B58A88245272668F3F49949EB","hasBrowserHandler":true,"message":"Sure?","type":"prompt","url":"http://127.0.0.1:45519/page/rec"}),
        ) else {
            panic!("javascriptDialogOpening");
        };
        assert_eq!(
            (
                dialog.dialog_type.as_str(),
                dialog.message.as_str(),
                dialog.default_prompt.as_deref()
            ),
            ("prompt", "Sure?", Some("yes"))
        );
        assert_eq!(
            decode(
                "Page.javascriptDialogClosed",
                json!({"frameId":"FC5A3C1B58A88245272668F3F49949EB","result":true,"userInput":"ok"})
            ),
            Event::JavascriptDialogClosed(JavascriptDialogClosed { result: true })
        );
        // The shape recorded on Chromium 156 for a click on a file input.
        let Event::FileChooserOpened(chooser) = decode(
            "Page.fileChooserOpened",
            json!({"backendNodeId":12,"frameId":"FC5A3C1B58A88245272668F3F49949EB","mode":"selectMultiple"}),
        ) else {
            panic!("fileChooserOpened");
        };
        assert!(chooser.multiple());
        assert_eq!(chooser.backend_node_id, Some(12));
    }

    #[test]
    fn unread_events_are_other_and_malformed_ones_are_errors() {
        assert_eq!(
            decode("Network.dataReceived", json!({"requestId": "1"})),
            Event::Other {
                method: "Network.dataReceived".to_owned()
            }
        );
        let error = Event::decode("Target.targetDestroyed", json!({"n": 5})).unwrap_err();
        assert_eq!(error.method, "Target.targetDestroyed");
        assert!(Event::is_lifecycle("Target.targetCreated"));
        assert!(Event::is_lifecycle("Inspector.detached"));
        assert!(Event::is_lifecycle("Page.lifecycleEvent"));
        assert!(!Event::is_lifecycle("Page.loadEventFired"));
        assert!(Event::is_lifecycle("Page.fileChooserOpened"));
        assert!(!Event::is_lifecycle("Network.dataReceived"));
    }
}
