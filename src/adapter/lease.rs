//! A Lease and the task that renews it.
//!
//! Owns one Lease's renewal: a task heartbeats at a third of the TTL, so the Lease is renewed
//! well before `expiresAt` even while a tool call runs for longer than the TTL, and publishes
//! what it knows (active with the latest `expiresAt`, lost with the Broker's error, released).
//! Only the task writes that status. It never decides what the host does with a lost Lease.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::session::BridgeSession;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// The shortest renewal period: a 1 s Lease (the contract's minimum) is heartbeated about three
/// times a second, never in a tighter loop.
const MIN_RENEW_EVERY: Duration = Duration::from_millis(200);

/// What the renewal task knows about its Lease.
#[derive(Debug, Clone, PartialEq)]
pub enum LeaseStatus {
    Active {
        expires_at: i64,
        renewals: u64,
    },
    /// The Broker refused a heartbeat (expired, not owned, Workspace gone) or the bridge is gone.
    Lost(RpcError),
    Released,
}

/// Options for `leases/create`.
#[derive(Debug, Clone, Default)]
pub struct LeaseOptions {
    pub ttl_ms: Option<u64>,
    /// Repeating the key on the same live Connection returns the same Lease.
    pub client_key: Option<String>,
}

/// An active Lease with its renewal task (stopped on release or drop).
pub struct Lease {
    id: String,
    workspace_id: String,
    ttl_ms: u64,
    session: BridgeSession,
    status: watch::Receiver<LeaseStatus>,
    stop: std::sync::Mutex<Option<oneshot::Sender<()>>>,
    task: JoinHandle<()>,
}

impl Lease {
    /// `leases/create`, then starts renewing. `closing` ends renewal when the Workspace goes.
    pub(super) async fn create(
        session: &BridgeSession,
        workspace_id: &str,
        options: &LeaseOptions,
        closing: watch::Receiver<bool>,
    ) -> Result<Lease, RpcError> {
        let mut params = json!({"workspaceId": workspace_id});
        if let Some(ttl_ms) = options.ttl_ms {
            params["ttlMs"] = json!(ttl_ms);
        }
        if let Some(key) = &options.client_key {
            params["clientKey"] = json!(key);
        }
        let created = session.request("leases/create", params).await?;
        let lease = &created["lease"];
        let id = lease["id"].as_str().unwrap_or_default().to_owned();
        let ttl_ms = lease["ttlMs"].as_u64().unwrap_or(30_000);
        let expires_at = lease["expiresAt"].as_i64().unwrap_or_default();
        let (status_tx, status) = watch::channel(LeaseStatus::Active {
            expires_at,
            renewals: 0,
        });
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(renew(
            session.clone(),
            workspace_id.to_owned(),
            id.clone(),
            renew_every(ttl_ms),
            status_tx,
            stop_rx,
            closing,
        ));
        Ok(Lease {
            id,
            workspace_id: workspace_id.to_owned(),
            ttl_ms,
            session: session.clone(),
            status,
            stop: std::sync::Mutex::new(Some(stop_tx)),
            task,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    pub fn status(&self) -> LeaseStatus {
        self.status.borrow().clone()
    }

    /// How many heartbeats succeeded so far.
    pub fn renewals(&self) -> u64 {
        match &*self.status.borrow() {
            LeaseStatus::Active { renewals, .. } => *renewals,
            _ => 0,
        }
    }

    /// The error a call on this Lease would get, known locally without asking the Broker.
    pub fn unusable(&self) -> Option<RpcError> {
        match self.status() {
            LeaseStatus::Active { .. } => None,
            LeaseStatus::Lost(error) => Some(error),
            LeaseStatus::Released => Some(
                RpcError::new(ErrorCode::LeaseNotFound, "this Lease was released")
                    .with_remediation(RemediationAction::CreateLease, "Create a new Lease."),
            ),
        }
    }

    fn stop_renewing(&self) {
        if let Some(stop) = self.stop.lock().expect("lease stop lock").take() {
            let _ = stop.send(());
        }
    }

    /// Stops renewal and releases the Lease. Renewal stops even if the release fails.
    pub async fn release(&self) -> Result<Value, RpcError> {
        self.stop_renewing();
        self.session
            .request(
                "leases/release",
                json!({"workspaceId": self.workspace_id, "leaseId": self.id}),
            )
            .await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A third of the TTL: two heartbeats can be lost or slow before the Lease lapses.
pub fn renew_every(ttl_ms: u64) -> Duration {
    Duration::from_millis(ttl_ms / 3).max(MIN_RENEW_EVERY)
}

async fn renew(
    session: BridgeSession,
    workspace_id: String,
    lease_id: String,
    every: Duration,
    status: watch::Sender<LeaseStatus>,
    mut stop: oneshot::Receiver<()>,
    mut closing: watch::Receiver<bool>,
) {
    let mut renewals = 0u64;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = closing.wait_for(|closed| *closed) => break,
            _ = tokio::time::sleep(every) => {}
        }
        let heartbeat = session
            .request(
                "leases/heartbeat",
                json!({"workspaceId": workspace_id, "leaseId": lease_id}),
            )
            .await;
        match heartbeat {
            Ok(renewed) => {
                renewals += 1;
                let expires_at = renewed["lease"]["expiresAt"].as_i64().unwrap_or_default();
                status.send_replace(LeaseStatus::Active {
                    expires_at,
                    renewals,
                });
            }
            // A transient Broker failure: try again at the next period.
            Err(error) if error.code == ErrorCode::InternalError => {
                tracing::warn!(%error, "lease heartbeat failed; retrying");
            }
            // A heartbeat that raced with our own release is not a loss.
            Err(_) if stop_requested(&mut stop) || *closing.borrow() => break,
            Err(error) => {
                status.send_replace(LeaseStatus::Lost(error));
                return;
            }
        }
    }
    status.send_replace(LeaseStatus::Released);
}

fn stop_requested(stop: &mut oneshot::Receiver<()>) -> bool {
    !matches!(stop.try_recv(), Err(oneshot::error::TryRecvError::Empty))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_is_well_before_expiry() {
        assert_eq!(renew_every(30_000), Duration::from_secs(10));
        assert_eq!(renew_every(1_000), Duration::from_millis(333));
        assert_eq!(renew_every(300), MIN_RENEW_EVERY);
    }
}
