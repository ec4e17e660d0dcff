//! Notification fan-out: which live Connections hear which Workspace's events.
//!
//! A Workspace's events are offered to every live Connection of its Principal that was granted
//! `event.read`; `network.*` events only to those also granted `network.read` (they are
//! journaled either way, and `events/poll` is the Broker's business). Offering never blocks: each Connection has a bounded notification queue and a
//! full queue drops the notification (the journal keeps the event for `events/poll`).

use std::collections::HashMap;
use std::sync::RwLock;

use tokio::sync::mpsc;

use crate::store::PrincipalKey;

struct Subscriber {
    connection_id: String,
    notifications: mpsc::Sender<String>,
    /// Granted `network.read`: hears `network.*` events.
    hears_network: bool,
}

/// Whether an event type is network data, delivered only with `network.read`.
pub fn is_network_event(event_type: &str) -> bool {
    event_type.starts_with("network.")
}

#[derive(Default)]
struct Routes {
    by_principal: HashMap<PrincipalKey, Vec<Subscriber>>,
    workspace_owner: HashMap<String, PrincipalKey>,
}

#[derive(Default)]
pub struct Hub {
    routes: RwLock<Routes>,
}

impl Hub {
    /// Subscribes a Connection without `network.read`.
    pub fn subscribe(
        &self,
        principal: &PrincipalKey,
        connection_id: &str,
        notifications: mpsc::Sender<String>,
    ) {
        self.subscribe_with(principal, connection_id, notifications, false);
    }

    /// Subscribes a Connection; `hears_network` when it was granted `network.read`.
    pub fn subscribe_with(
        &self,
        principal: &PrincipalKey,
        connection_id: &str,
        notifications: mpsc::Sender<String>,
        hears_network: bool,
    ) {
        let mut routes = self.routes.write().expect("hub lock");
        routes
            .by_principal
            .entry(principal.clone())
            .or_default()
            .push(Subscriber {
                connection_id: connection_id.to_owned(),
                notifications,
                hears_network,
            });
    }

    pub fn unsubscribe(&self, principal: &PrincipalKey, connection_id: &str) {
        let mut routes = self.routes.write().expect("hub lock");
        if let Some(subscribers) = routes.by_principal.get_mut(principal) {
            subscribers.retain(|s| s.connection_id != connection_id);
            if subscribers.is_empty() {
                routes.by_principal.remove(principal);
            }
        }
    }

    pub fn add_workspace(&self, workspace_id: &str, owner: &PrincipalKey) {
        let mut routes = self.routes.write().expect("hub lock");
        routes
            .workspace_owner
            .insert(workspace_id.to_owned(), owner.clone());
    }

    pub fn remove_workspace(&self, workspace_id: &str) {
        self.routes
            .write()
            .expect("hub lock")
            .workspace_owner
            .remove(workspace_id);
    }

    /// Offers one serialized `events/event` notification; returns how many queues took it.
    pub fn offer(&self, workspace_id: &str, line: &str) -> usize {
        self.offer_with(workspace_id, "", || line.to_owned())
    }

    /// Like `offer` for an event of `event_type`, but serializes the line only when some
    /// Connection listens.
    pub fn offer_with(
        &self,
        workspace_id: &str,
        event_type: &str,
        line: impl FnOnce() -> String,
    ) -> usize {
        let network = is_network_event(event_type);
        let routes = self.routes.read().expect("hub lock");
        let Some(owner) = routes.workspace_owner.get(workspace_id) else {
            return 0;
        };
        let Some(subscribers) = routes.by_principal.get(owner) else {
            return 0;
        };
        if network && !subscribers.iter().any(|s| s.hears_network) {
            return 0;
        }
        let line = line();
        subscribers
            .iter()
            .filter(|s| !network || s.hears_network)
            .filter(|s| s.notifications.try_send(line.clone()).is_ok())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(id: &str) -> PrincipalKey {
        PrincipalKey {
            client_id: id.into(),
            instance_id: "i".into(),
        }
    }

    #[test]
    fn routes_by_owner_and_drops_when_full() {
        let hub = Hub::default();
        let (a_tx, mut a_rx) = mpsc::channel(1);
        let (b_tx, mut b_rx) = mpsc::channel(8);
        hub.subscribe(&principal("a"), "connection:a", a_tx);
        hub.subscribe(&principal("b"), "connection:b", b_tx);
        hub.add_workspace("workspace:1", &principal("a"));
        assert_eq!(hub.offer("workspace:1", "one"), 1);
        assert_eq!(hub.offer("workspace:1", "two"), 0, "full queue drops");
        assert_eq!(a_rx.try_recv().unwrap(), "one");
        assert!(b_rx.try_recv().is_err(), "another principal hears nothing");
        hub.unsubscribe(&principal("a"), "connection:a");
        assert_eq!(hub.offer("workspace:1", "three"), 0);
    }

    #[test]
    fn network_events_reach_only_connections_granted_network_read() {
        let hub = Hub::default();
        let (plain_tx, mut plain_rx) = mpsc::channel(8);
        let (net_tx, mut net_rx) = mpsc::channel(8);
        hub.subscribe(&principal("a"), "connection:plain", plain_tx);
        hub.subscribe_with(&principal("a"), "connection:net", net_tx, true);
        hub.add_workspace("workspace:1", &principal("a"));
        assert_eq!(
            hub.offer_with("workspace:1", "network.request", || "n".into()),
            1
        );
        assert_eq!(hub.offer_with("workspace:1", "dialog", || "d".into()), 2);
        assert_eq!(net_rx.try_recv().unwrap(), "n");
        assert_eq!(net_rx.try_recv().unwrap(), "d");
        assert_eq!(plain_rx.try_recv().unwrap(), "d");
        assert!(plain_rx.try_recv().is_err());
    }
}
