//! One physical tab's actor: a FIFO-fair async lock around the tab's CDP session state.
//!
//! Every command for a tab, from any Workspace, holds this lock while it runs, so commands for
//! one tab never interleave while commands for different tabs run concurrently. tokio's mutex
//! queues waiters in arrival order, which gives the actor's queue semantics without a task and
//! boxed jobs; a Command waiting here is `accepted`, the holder is `dispatched`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::cdp::{CdpClient, CdpError, SessionId, TargetId};

/// A cheap handle to one tab's actor.
#[derive(Clone)]
pub struct TabHandle {
    pub target: TargetId,
    state: Arc<Mutex<TabState>>,
}

/// State only the lock holder may touch.
#[derive(Default)]
pub struct TabState {
    pub session: Option<SessionId>,
}

/// Exclusive use of a tab for one Command.
pub struct TabGuard {
    pub target: TargetId,
    state: OwnedMutexGuard<TabState>,
}

impl TabHandle {
    pub fn new(target: TargetId) -> TabHandle {
        TabHandle { target, state: Arc::new(Mutex::new(TabState::default())) }
    }

    /// Waits for this tab's turn (in arrival order).
    pub async fn acquire(&self) -> TabGuard {
        TabGuard { target: self.target.clone(), state: self.state.clone().lock_owned().await }
    }
}

/// How long one setup call of a fresh session may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

impl TabGuard {
    /// The flattened CDP session of this tab, attaching and enabling the domains the tools need
    /// on first use. `Page` is enabled before anything else can run, so a dialog the page opens
    /// later stays answerable by this session (field notes §0 item 3).
    pub async fn session(&mut self, client: &CdpClient) -> Result<SessionId, CdpError> {
        if let Some(session) = &self.state.session {
            return Ok(session.clone());
        }
        let session = client.attach_to_target(&self.target, SETUP_TIMEOUT).await?;
        client.call(Some(&session), "Page.enable", json!({}), SETUP_TIMEOUT).await?;
        client.call(Some(&session), "Page.setLifecycleEventsEnabled", json!({"enabled": true}), SETUP_TIMEOUT).await?;
        self.state.session = Some(session.clone());
        Ok(session)
    }

    /// Forgets the session (it detached or the target crashed); the next use re-attaches.
    pub fn drop_session(&mut self) {
        self.state.session = None;
    }

    /// Evaluates an expression in the page's main world and returns its value.
    pub async fn evaluate(&mut self, client: &CdpClient, expression: &str, timeout: Duration) -> Result<Value, CdpError> {
        let session = self.session(client).await?;
        let result = client
            .call(Some(&session), "Runtime.evaluate", json!({"expression": expression, "returnByValue": true}), timeout)
            .await?;
        Ok(result.get("result").and_then(|r| r.get("value")).cloned().unwrap_or(Value::Null))
    }
}
