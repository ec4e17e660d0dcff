//! The launched browser's start tab as a Workspace's dedicated window (docs/architecture.md,
//! "The start tab"): which tab it is at connect, the one-time adoption by the first managed
//! navigation of a non-isolated Workspace, and the blank tab put in its place when it closes.
//!
//! Only a browser the project launched (the keeper's pipe: `browser launch`, `mcp --headless`,
//! `bp launch`) has a start tab here: on its pipe no other client can attach, so "untouched"
//! is what discovery and the tab's own history say. A browser the Broker attaches to never has
//! one, and its tabs stay the user's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::registry::Registry;
use super::service::{BrowserService, Live};
use crate::cdp::page::GetNavigationHistory;
use crate::cdp::pipe::JanitorLine;
use crate::cdp::target::CreateTarget;
use crate::cdp::{SessionId, TargetId, TargetInfo};
use crate::store::{LeaseId, TargetRef, WorkspaceId};

/// Timeout of each CDP call of the adoption and of the replacement.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The one-time claim on a connection's start tab: taken by the first managed navigation that
/// may adopt it, so two Workspaces never both do.
#[derive(Default)]
pub(super) struct StartTab(Mutex<Option<TargetId>>);

impl StartTab {
    /// The start tab of a launched browser's inventory: its only ordinary page, blank, with no
    /// opener. `None` when there is none or more than one page (someone opened tabs).
    pub(super) fn from_inventory(targets: &[TargetInfo]) -> Arc<StartTab> {
        let mut pages = targets.iter().filter(|t| t.target_type == "page");
        let start = match (pages.next(), pages.next()) {
            (Some(only), None) if is_blank(&only.url) && only.opener_id.is_none() => {
                Some(only.target_id.clone())
            }
            _ => None,
        };
        Arc::new(StartTab(Mutex::new(start)))
    }

    /// Takes the claim; only the first caller gets the tab.
    fn take(&self) -> Option<TargetId> {
        self.0.lock().expect("start tab lock").take()
    }
}

/// The start tab's URL before and after the command line's `about:blank` commits (docs/cdp.md,
/// "The start tab").
fn is_blank(url: &str) -> bool {
    url.is_empty() || url == "about:blank"
}

impl Registry {
    /// Adopts `target` for the Workspace when it is still an untouched start tab as discovery
    /// tells it (blank, no opener, in nobody's hands, not taken over at the live view);
    /// returns the Workspace's opaque id for it.
    fn adopt_start(
        &mut self,
        target: &TargetId,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
    ) -> Option<TargetRef> {
        if !self.is_free_blank_page(target, is_blank) {
            return None;
        }
        self.adopt(target, workspace_id, lease_id);
        Some(self.opaque_id(workspace_id, target))
    }
}

impl BrowserService {
    /// Adopts the launched browser's untouched start tab as the Workspace's dedicated window,
    /// for its first managed navigation (the caller never asks for an isolated Workspace).
    /// `None` (create a window as usual) when the connection has no start tab, another
    /// navigation took the claim, or the tab was used: it has a history of its own or is no
    /// longer blank. The tab is then the Workspace's managed tab in every respect: recorded for
    /// recovery, handed to the janitor's clean-up, closed on release.
    pub async fn adopt_start_tab(
        &self,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
    ) -> Option<TargetRef> {
        let live = self.live_of(workspace_id)?;
        let target = live.start_tab.take()?;
        let handle = live.with_tabs(|tabs| {
            (tabs.registry.is_free_blank_page(&target, is_blank))
                .then(|| tabs.registry.handle(&target))
                .flatten()
        })?;
        // The session auto-attach opened for it, else one of our own, offered to the tab's
        // setup either way so it is not attached twice.
        let session = match handle.offered_session() {
            Some(session) => session,
            None => {
                let session = (live.client)
                    .attach_to_target(&target, CALL_TIMEOUT)
                    .await
                    .ok()?;
                handle.offer_session(session.clone());
                session
            }
        };
        if !untouched(&live, &session).await {
            return None;
        }
        let opaque =
            live.with_tabs(|tabs| (tabs.registry).adopt_start(&target, workspace_id, lease_id))?;
        self.note_owned_start(&target, workspace_id);
        let line = JanitorLine::Adopt {
            target_id: target.clone(),
            start: true,
        };
        if live.janitor_send(line.to_line()).await.is_err() {
            tracing::warn!("the janitor went away while a Workspace adopted the start tab");
        }
        tracing::debug!(%workspace_id, "the start tab is the Workspace's dedicated window");
        Some(opaque)
    }

    /// Puts a blank tab in the place of an adopted start tab about to close, so a headed
    /// browser keeps a window (it exits with its last one). The blank tab is nobody's: the
    /// janitor is told to leave it, and it is the start tab of the next connection.
    pub(super) async fn replace_start_tab(&self, live: &Live) {
        let command = CreateTarget {
            url: "about:blank".to_owned(),
            new_window: false,
            focus: Some(false),
            browser_context_id: None,
        };
        match live.client.execute(None, &command, CALL_TIMEOUT).await {
            Ok(created) => {
                let line = JanitorLine::Disown {
                    target_id: created.target_id,
                };
                if live.janitor_send(line.to_line()).await.is_err() {
                    tracing::debug!("the janitor went away while the start tab was replaced");
                }
            }
            Err(error) => tracing::warn!(%error, "opening a blank tab for the start tab failed"),
        }
    }
}

/// Whether the tab's history is that of a tab nobody used: one entry, blank.
async fn untouched(live: &Live, session: &SessionId) -> bool {
    match (live.client)
        .execute(session, &GetNavigationHistory {}, CALL_TIMEOUT)
        .await
    {
        Ok(history) => {
            history.current_index == 0
                && history.entries.len() == 1
                && history.entries.iter().all(|entry| is_blank(&entry.url))
        }
        Err(error) => {
            tracing::debug!(%error, "reading the start tab's history failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(id: &str, url: &str, opener: Option<&str>) -> TargetInfo {
        TargetInfo {
            opener_id: opener.map(TargetId::new),
            ..TargetInfo::page(TargetId::new(id), url)
        }
    }

    #[test]
    fn only_a_lone_blank_page_is_a_start_tab() {
        let mut ui = page("U", "chrome://omnibox-popup.top-chrome/", None);
        ui.target_type = "browser_ui".into();
        for (targets, start) in [
            (vec![page("S", "about:blank", None), ui.clone()], Some("S")),
            (vec![page("S", "", None)], Some("S")),
            (vec![page("S", "https://example.test/", None)], None),
            (vec![page("S", "about:blank", Some("O"))], None),
            (
                vec![
                    page("S", "about:blank", None),
                    page("T", "about:blank", None),
                ],
                None,
            ),
            (vec![ui], None),
        ] {
            let got = StartTab::from_inventory(&targets).take();
            assert_eq!(got, start.map(TargetId::new), "{targets:?}");
        }
        let claim = StartTab::from_inventory(&[page("S", "about:blank", None)]);
        assert!(claim.take().is_some());
        assert!(claim.take().is_none(), "the claim is taken once");
    }

    #[test]
    fn a_start_tab_in_someones_hands_is_not_adopted() {
        let (workspace, lease) = (WorkspaceId::from("workspace:a"), LeaseId::from("lease:a"));
        let mut registry = Registry::default();
        registry.upsert(&page("S", "about:blank", None));
        registry.upsert(&page("N", "https://example.test/", None));
        assert!(
            registry
                .adopt_start(&TargetId::new("N"), &workspace, &lease)
                .is_none()
        );
        let other = (WorkspaceId::from("workspace:b"), LeaseId::from("lease:b"));
        registry.adopt(&TargetId::new("S"), &other.0, &other.1);
        assert!(
            registry
                .adopt_start(&TargetId::new("S"), &workspace, &lease)
                .is_none()
        );

        let mut registry = Registry::default();
        registry.upsert(&page("S", "about:blank", None));
        let opaque = registry.adopt_start(&TargetId::new("S"), &workspace, &lease);
        assert!(opaque.is_some());
        assert_eq!(
            registry.managed_by(&TargetId::new("S")),
            Some("workspace:a")
        );
        assert!(registry.has_window("workspace:a"));
    }
}
