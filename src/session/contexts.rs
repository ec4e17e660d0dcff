//! The browser contexts of isolated Workspaces on one browser connection: which Workspace's
//! context is which, made at the Workspace's first managed navigation and disposed at its
//! release. A connection owns its contexts (`Live`): they are made through its janitor with
//! `disposeOnDetach`, so Chromium disposes them when that janitor's connection ends, and the
//! janitor disposes them itself when the Broker dies (docs/cdp.md, "browser contexts"). A new
//! connection starts with none; an isolated Workspace gets a fresh context at its next managed
//! navigation. Its tabs share nothing with other Workspaces or the user's tabs: cookies,
//! storage and cache are the context's.
//!
//! Never falls back to the default context: a refused context is the caller's error to report.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::cdp::target::{CreateBrowserContext, DisposeBrowserContext};
use crate::cdp::{BrowserContextId, CdpClient, CdpError};

/// Contexts one connection keeps, over all Workspaces: one per isolated Workspace, and the
/// janitor tracks as many. A Workspace beyond it gets no context (its navigation is refused),
/// never the shared profile.
pub const MAX_CONTEXTS: usize = 4096;

/// Why an isolated Workspace has no context of its own.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The browser refused `Target.createBrowserContext` (a browser or endpoint without context
    /// management), with its message.
    #[error("the browser refused a new browser context: {0}")]
    Refused(String),
    /// This connection already holds `MAX_CONTEXTS` contexts.
    #[error("too many isolated Workspaces on this browser connection")]
    TooMany,
    /// The call did not get an answer (disconnected, timed out).
    #[error(transparent)]
    Cdp(CdpError),
}

/// The contexts of one connection, by Workspace id.
#[derive(Default)]
pub struct Contexts {
    by_workspace: Mutex<HashMap<String, BrowserContextId>>,
    /// Held while a context is made, so two first navigations of one Workspace make one.
    making: tokio::sync::Mutex<()>,
}

impl Contexts {
    /// The Workspace's context, if it has one on this connection.
    pub fn of(&self, workspace_id: &str) -> Option<BrowserContextId> {
        (self.by_workspace.lock().expect("contexts lock"))
            .get(workspace_id)
            .cloned()
    }

    /// The Workspace whose context this is, if it is one of this connection's.
    pub fn owner_of(&self, context: &BrowserContextId) -> Option<String> {
        (self.by_workspace.lock().expect("contexts lock"))
            .iter()
            .find(|(_, owned)| *owned == context)
            .map(|(workspace_id, _)| workspace_id.clone())
    }

    /// The Workspace's context, made on `client` (a Command's watched handle over this
    /// connection) when it has none yet.
    pub async fn get_or_make(
        &self,
        workspace_id: &str,
        client: &CdpClient,
        timeout: Duration,
    ) -> Result<BrowserContextId, ContextError> {
        let _making = self.making.lock().await;
        if let Some(context) = self.of(workspace_id) {
            return Ok(context);
        }
        if self.by_workspace.lock().expect("contexts lock").len() >= MAX_CONTEXTS {
            return Err(ContextError::TooMany);
        }
        let command = CreateBrowserContext {
            dispose_on_detach: true,
        };
        let made = match client.execute(None, &command, timeout).await {
            Ok(reply) => reply.browser_context_id,
            Err(CdpError::Remote { message, .. }) => return Err(ContextError::Refused(message)),
            Err(error) => return Err(ContextError::Cdp(error)),
        };
        (self.by_workspace.lock().expect("contexts lock"))
            .insert(workspace_id.to_owned(), made.clone());
        Ok(made)
    }

    /// Forgets the Workspace's context and returns it, for the caller to dispose.
    pub fn take(&self, workspace_id: &str) -> Option<BrowserContextId> {
        (self.by_workspace.lock().expect("contexts lock")).remove(workspace_id)
    }
}

/// `Target.disposeBrowserContext`: closes the context's pages and drops its cookies and storage.
pub async fn dispose(
    client: &CdpClient,
    context: &BrowserContextId,
    timeout: Duration,
) -> Result<(), CdpError> {
    let command = DisposeBrowserContext {
        browser_context_id: context.clone(),
    };
    client.execute(None, &command, timeout).await.map(|_| ())
}
