//! The `browser-pilot bridge --stdio` role: the only public Host API process.
//!
//! Thin by design: it enforces framing (line and result limits, UTF-8, envelope shape,
//! pending-call caps), finds or starts the per-user Broker, forwards requests over the local
//! socket and writes responses and notifications to stdout with backpressure. It never touches
//! the store, CDP or tool logic.

mod pump;
mod startup;
mod stdio;

pub use pump::run_bridge;
pub use startup::{BrokerLink, connect_or_start};
