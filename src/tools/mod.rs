//! Tools: one canonical definition per tool (name, capability, mutating flag, input and output
//! schema, sensitivity), from which `tools/list`, argument validation and (in debug builds)
//! result validation are generated; and one file per tool family with its CDP composition and
//! evidence. Tools never see framing, sockets or SQL text; Command bookkeeping (idempotency,
//! status, deadlines) is the Broker's.

#[macro_use]
mod manifest;
mod act;
mod actions;
mod capture;
mod click;
mod console;
mod context;
mod cookies;
mod dialogs;
mod discover;
mod dispatch;
mod docs;
mod dropdowns;
mod emulate;
mod error;
mod eval;
mod evidence;
mod frames;
mod gesture;
mod handoff;
mod keys;
mod network;
mod observation;
mod observe;
mod pointer;
mod progress;
mod recording;
pub mod schema;
mod scroll;
mod storage;
mod tab;
mod tabs;
mod typing;
mod upload;
mod wait;

pub use capture::{PREVIEW_MAX_SIDE, descriptor_schema};
pub use context::{
    CallScope, DispatchGate, MutationsSent, ScopeIds, TargetScope, ToolEnv, WorkspaceScope,
    mutates_browser,
};
pub use dispatch::execute;
pub use docs::render_tools_markdown;
pub use error::{ToolError, artifact_error};
pub use manifest::{Gate, Handler, Lane, Scope, ToolDef, ToolFuture, find, manifest};
pub use recording::{recording_error, store_recording};
