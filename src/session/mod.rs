//! The Broker's live browser session: the janitor child and the CDP client over its pipes, the
//! connection generation, the tab registry (opaque per-Workspace target ids, managed tabs,
//! control by Leases), one serializing actor per physical tab, and the CDP event pump that turns
//! browser events into journaled Workspace events.
//!
//! It never opens a WebSocket (the janitor does), never writes SQL text, and never closes a tab
//! it did not create for a Workspace, save the start tab of a browser the project launched
//! once a Workspace adopted it (`start_tab`).

pub mod activity;
pub mod background;
pub mod bounds;
mod choosers;
pub mod contexts;
mod downloads;
pub mod fetch;
mod frames;
mod load;
pub mod network;
mod pump;
mod refs;
mod registry;
mod service;
mod start_tab;
mod tab;
pub mod url_policy;
pub mod view;

pub use choosers::release as release_file_chooser_interception;
pub use downloads::{Capture, DownloadLimits, on_control as download_capture_on_control};
pub use frames::{FrameBook, FrameSelection};
pub use load::{Awaited, LoadMark, LoadPhase};
pub use refs::{ISSUED_OBSERVATIONS, RefBook, RefLookup};
pub use registry::{DialogInfo, TabView, TargetError};
pub use service::{BrowserService, ConnectError, Connected};
pub use tab::{
    ElementSummary, KEPT_OBSERVATIONS, ObservationRecord, TabGuard, TabHandle, TabState, TabTicket,
};
