//! The Broker's process-wide state, shared by every Connection task as one `Arc<Broker>`.

use tokio::sync::watch;

use super::commands::RunningCommands;
use crate::events::EventSink;
use crate::home::Home;
use crate::store::Store;
use crate::tools::ToolEnv;

pub struct Broker {
    pub home: Home,
    pub store: Store,
    /// Process-stable identity, reported by `initialize` and checked by `bp disconnect`.
    pub broker_id: String,
    pub installation_id: String,
    pub started_at: i64,
    pub events: EventSink,
    /// What tools run against (store, events, browser session).
    pub tools: ToolEnv,
    /// Commands executing now, so `commands/cancel` can reach them.
    pub running: RunningCommands,
    /// The identity of the socket file this Broker bound; another file at the same path means
    /// this Broker was replaced (its home was deleted and recreated).
    pub endpoint_identity: Option<(u64, u64)>,
    /// Set to true to stop the accept loop and exit.
    pub shutdown: watch::Sender<bool>,
}

impl Broker {
    pub fn request_shutdown(&self) {
        let _ = self.shutdown.send(true);
    }
}
