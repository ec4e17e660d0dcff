//! File choosers of controlled tabs. Every tab or out-of-process-frame session the Broker
//! attaches gets `Page.setInterceptFileChooserDialog {enabled: true}` (`intercept`), so a
//! click that opens a file chooser never shows a native dialog; the session reports
//! `Page.fileChooserOpened` instead, which the pump hands to `on_opened`: the tab's
//! `FileChooserBook` counts it (action evidence reads the count before and after an input
//! action: the `file_chooser_opened` effect) and every Workspace that manages or controls the
//! tab gets a `file_chooser` event telling it to call `browser.upload`. A released user tab has
//! interception switched off again (`release`, and for its Workspace's release
//! `stop_intercepting`), so the user's own file inputs keep working.
//! No raw CDP id (backend node, frame, session) leaves this file.

use std::time::Duration;

use serde_json::json;

use super::service::BrowserService;
use super::tab::TabHandle;
use crate::cdp::dom::BackendNodeId;
use crate::cdp::page::{FileChooserOpened, SetInterceptFileChooserDialog};
use crate::cdp::{CdpClient, SessionId, TargetId};
use crate::events::Emit;
use crate::store::{LeaseId, TargetRef, WorkspaceId};

/// How long switching interception may take.
const INTERCEPT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a tab's sessions reported of file choosers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FileChooserBook {
    /// Choosers opened since the tab's first session (monotonic).
    opened: u64,
    /// The tab session that intercepts choosers now, if any.
    intercepting: Option<SessionId>,
    /// The input of the latest chooser and the session it lives in (raw ids: they never leave
    /// the Broker; `browser.upload` uses them as its default input).
    last: Option<(SessionId, BackendNodeId)>,
}

impl FileChooserBook {
    /// How many file choosers the tab opened so far; compare before and after an action.
    pub fn opened(&self) -> u64 {
        self.opened
    }

    /// Whether interception is on for the tab's session.
    pub fn intercepting(&self) -> bool {
        self.intercepting.is_some()
    }

    /// Records whether `session` intercepts now (`None` or `false`: nothing does).
    pub fn set_intercepting(&mut self, on: bool, session: Option<&SessionId>) {
        self.intercepting = session.filter(|_| on).cloned();
    }

    /// The session and node of the latest chooser's input, if it named one.
    pub fn last(&self) -> Option<(SessionId, BackendNodeId)> {
        self.last.clone()
    }

    fn on_opened(&mut self, session: &SessionId, input: Option<BackendNodeId>) {
        self.opened += 1;
        self.last = input.map(|node| (session.clone(), node));
    }
}

/// Switches file-chooser interception on (or off) for `session`. A refusal is logged: the
/// tab still works, a chooser would then be the browser's own.
pub async fn intercept(
    client: &CdpClient,
    session: &SessionId,
    enabled: bool,
    timeout: Duration,
) -> bool {
    let command = SetInterceptFileChooserDialog { enabled };
    match client.execute(session, &command, timeout).await {
        Ok(_) => true,
        Err(error) => {
            tracing::warn!(%error, enabled, "switching file-chooser interception failed");
            false
        }
    }
}

/// A session of `tab` reported an intercepted file chooser: count it and tell the Workspaces
/// that manage or control the tab.
pub(super) fn on_opened(
    registry: &mut super::registry::Registry,
    tab: &TargetId,
    session: &SessionId,
    opened: &FileChooserOpened,
) -> Vec<Emit> {
    let Some(handle) = registry.handle(tab) else {
        return Vec::new();
    };
    let input = opened.backend_node_id.map(BackendNodeId);
    handle.file_choosers().on_opened(session, input);
    let mode = match opened.multiple() {
        true => "multiple",
        false => "single",
    };
    registry
        .interested_workspaces(tab)
        .into_iter()
        .map(|(workspace_id, opaque)| {
            let mut emit = Emit::new(
                &workspace_id,
                "file_chooser",
                json!({"targetId": opaque, "mode": mode, "intercepted": true}),
            );
            emit.target_id = Some(opaque.into());
            emit
        })
        .collect()
}

/// A Lease hands a tab back: a user tab (one no Workspace manages) stops intercepting, so the
/// user's own file inputs open the browser's chooser again; the next controlled Command
/// switches it back on (`TabGuard::ensure_file_chooser_interception`). Runs before control is
/// released, so no other Lease's Command can slip in between. Managed tabs keep intercepting.
pub async fn release(
    service: &BrowserService,
    workspace_id: &WorkspaceId,
    lease_id: &LeaseId,
    opaque: &TargetRef,
) {
    let Some(live) = service.live_of(workspace_id) else {
        return;
    };
    let found = service.with_registry_of(workspace_id, |registry| {
        let (target, handle) = registry.resolve(workspace_id, opaque).ok()?;
        let managed = registry.managed_by(&target).is_some();
        let controlled = registry
            .list(workspace_id, lease_id)
            .iter()
            .any(|tab| tab.target_id == *opaque && tab.controlled);
        (controlled && !managed).then_some(handle)
    });
    let Some(handle) = found else {
        return;
    };
    stop_intercepting(&live.client, &[handle]).await;
}

/// Switches interception off on these tabs' sessions (their control ends: a Lease released
/// the tab, or its Workspace was released).
pub(super) async fn stop_intercepting(client: &CdpClient, tabs: &[TabHandle]) {
    for handle in tabs {
        let session = handle.file_choosers().intercepting.take();
        if let Some(session) = session {
            intercept(client, &session, false, INTERCEPT_TIMEOUT).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_book_counts_and_remembers_interception() {
        let mut book = FileChooserBook::default();
        assert_eq!((book.opened(), book.intercepting()), (0, false));
        let session = SessionId::new("s");
        book.on_opened(&session, Some(BackendNodeId(4)));
        assert_eq!(book.last(), Some((session.clone(), BackendNodeId(4))));
        book.on_opened(&session, None);
        assert_eq!(book.last(), None);
        book.set_intercepting(true, Some(&SessionId::new("s")));
        assert_eq!((book.opened(), book.intercepting()), (2, true));
        book.set_intercepting(false, Some(&SessionId::new("s")));
        assert!(!book.intercepting());
    }
}
