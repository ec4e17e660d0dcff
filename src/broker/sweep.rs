//! Bounded periodic sweeps: Lease expiry, idle Workspace reclaim, Artifact expiry, the heap the
//! allocator holds free handed back to the OS, and the Broker's own exit when its home directory
//! disappears.

use std::sync::Arc;
use std::time::Duration;

use super::leases::announce_expired;
use super::state::Broker;
use super::workspaces::purge_artifacts;
use crate::store::ReleaseReason;
use crate::version::now_ms;

/// How often expired Leases are reclaimed; with a 1 s minimum TTL this keeps expiry within 10%.
const LEASE_SWEEP_INTERVAL: Duration = Duration::from_millis(100);

/// How often idle Workspaces and the home directory are checked.
const SLOW_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How often the Broker hands the heap its allocator holds free back to the OS
/// (`os::return_freed_memory`): the journal, Command results and the store's pages come and go,
/// and glibc keeps what a thread's arena freed until told otherwise (docs/performance.md,
/// "Memory"; one call measured 0.03-2 ms).
const TRIM_INTERVAL: Duration = Duration::from_secs(10);

/// A Workspace with no Lease and no live Connection of its Principal, and no Command, Lease
/// call or poll for this long, is released (`BROWSER_PILOT_WORKSPACE_IDLE_MS` overrides it).
const WORKSPACE_IDLE_RECLAIM_MS: i64 = 10 * 60 * 1000;

/// Smallest and largest `BROWSER_PILOT_WORKSPACE_IDLE_MS`: below 5 s a host polling at a normal
/// pace could lose its Workspace between two calls; above a day an abandoned one lingers.
const WORKSPACE_IDLE_RANGE: std::ops::RangeInclusive<i64> = 5_000..=24 * 60 * 60 * 1000;

/// How long a Workspace may go unused before the sweep reclaims it, read once.
pub fn workspace_idle_limit_ms() -> i64 {
    static LIMIT: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("BROWSER_PILOT_WORKSPACE_IDLE_MS")
            .ok()
            .and_then(|ms| ms.parse::<i64>().ok())
            .map_or(WORKSPACE_IDLE_RECLAIM_MS, |ms| {
                ms.clamp(*WORKSPACE_IDLE_RANGE.start(), *WORKSPACE_IDLE_RANGE.end())
            })
    })
}

/// A gap this long between two Lease sweeps means the Broker itself was stalled (stopped,
/// swapped out, starved): heartbeats may be waiting unread in its sockets.
const STALL_GAP: Duration = Duration::from_secs(1);

/// After a stall, Lease expiry waits this long so the Connections read what queued up first; a
/// heartbeat that reached its bridge in time then renews its Lease (its bridge's stamp decides).
const STALL_GRACE: Duration = Duration::from_millis(1_500);

pub async fn run(broker: Arc<Broker>) {
    let mut lease_tick = tokio::time::interval(LEASE_SWEEP_INTERVAL);
    let mut stall = StallGuard::new(std::time::Instant::now());
    lease_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut slow_tick = tokio::time::interval(SLOW_SWEEP_INTERVAL);
    slow_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut trim_tick = tokio::time::interval(TRIM_INTERVAL);
    trim_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = broker.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = lease_tick.tick() => {
                if stall.may_expire(std::time::Instant::now()) {
                    expire_leases(&broker).await;
                }
            }
            _ = slow_tick.tick() => {
                if let Err(error) = broker.store.call(|store| store.reclaim_lost_connections()).await {
                    tracing::error!(%error, "lost connection sweep failed");
                }
                reclaim_idle_workspaces(&broker).await;
                expire_artifacts(&broker).await;
                exit_if_home_gone(&broker);
            }
            _ = trim_tick.tick() => crate::os::return_freed_memory(),
        }
    }
}

/// Decides, tick by tick, whether Lease expiry may run: not within `STALL_GRACE` after a gap
/// of `STALL_GAP` between ticks.
struct StallGuard {
    last_tick: std::time::Instant,
    hold_until: Option<std::time::Instant>,
}

impl StallGuard {
    fn new(now: std::time::Instant) -> StallGuard {
        StallGuard {
            last_tick: now,
            hold_until: None,
        }
    }

    fn may_expire(&mut self, now: std::time::Instant) -> bool {
        if now.saturating_duration_since(self.last_tick) >= STALL_GAP {
            tracing::warn!("the Broker was stalled; Lease expiry waits for queued heartbeats");
            self.hold_until = Some(now + STALL_GRACE);
        }
        self.last_tick = now;
        match self.hold_until {
            Some(until) if now < until => false,
            _ => {
                self.hold_until = None;
                true
            }
        }
    }
}

async fn expire_leases(broker: &Arc<Broker>) {
    match broker
        .store
        .call(|store| store.expire_leases(now_ms()))
        .await
    {
        Ok(expired) if expired.is_empty() => {}
        Ok(expired) => announce_expired(broker, expired).await,
        Err(error) => tracing::error!(%error, "lease sweep failed"),
    }
}

async fn reclaim_idle_workspaces(broker: &Arc<Broker>) {
    let idle_before = now_ms() - workspace_idle_limit_ms();
    let idle = match broker
        .store
        .call_read(move |store| store.inactive_workspaces(idle_before))
        .await
    {
        Ok(idle) => idle,
        Err(error) => {
            tracing::error!(%error, "idle workspace sweep failed");
            return;
        }
    };
    for workspace in idle {
        let id = workspace.id.clone();
        let principal = workspace.principal.clone();
        match broker
            .store
            .call(move |store| {
                store.release_workspace(&principal, &id, now_ms(), ReleaseReason::Idle)
            })
            .await
        {
            Ok(_) => {
                broker.events.hub().remove_workspace(&workspace.id);
                broker.tools.browser.release_workspace(&workspace.id).await;
                purge_artifacts(broker, &workspace.id).await;
                tracing::info!(workspace = %workspace.id, "reclaimed an idle workspace");
            }
            Err(error) => tracing::error!(%error, "cannot reclaim idle workspace"),
        }
    }
}

/// Deletes Artifacts whose lifetime ended (within one slow tick of `expiresAt`).
async fn expire_artifacts(broker: &Arc<Broker>) {
    match broker.tools.artifacts.sweep_expired(now_ms()).await {
        Ok(0) => {}
        Ok(removed) => tracing::debug!(removed, "expired artifacts removed"),
        Err(error) => tracing::error!(%error, "artifact expiry sweep failed"),
    }
}

/// A Broker whose socket file is gone or replaced (its home was deleted, or deleted and
/// recreated by another Broker) can no longer be found by any bridge; it exits instead of
/// lingering.
fn exit_if_home_gone(broker: &Broker) {
    let now = crate::os::file_identity(&broker.home.socket_path());
    if now.is_none() || now != broker.endpoint_identity {
        tracing::info!("the Broker endpoint file disappeared; shutting down");
        broker.request_shutdown();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{STALL_GRACE, StallGuard};

    #[test]
    fn expiry_waits_after_a_stall_and_only_then() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut guard = StallGuard::new(start);
        // Regular ticks: expiry runs.
        assert!(guard.may_expire(at(100)));
        assert!(guard.may_expire(at(200)));
        // Five seconds without a tick: held for the grace period, tick after tick.
        assert!(!guard.may_expire(at(5_200)));
        let grace = STALL_GRACE.as_millis() as u64;
        let mut tick = 5_300;
        while tick < 5_200 + grace {
            assert!(!guard.may_expire(at(tick)), "held at {tick}");
            tick += 100;
        }
        assert!(guard.may_expire(at(tick)));
        assert!(guard.may_expire(at(tick + 100)));
    }
}
