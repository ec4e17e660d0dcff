//! Events: commit to the per-Workspace journal first, then offer `events/event` notifications to
//! the Workspace's Connections. Owns the notification routes and the wire shape of an event. It
//! never writes to a socket (Connections drain their own bounded queues) and holds no SQL text.

mod hub;
mod sink;

pub use hub::{Hub, is_network_event};
pub use sink::{Emit, EventSink, Generations, poll_page_json};
