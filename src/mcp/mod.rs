//! `browser-pilot mcp`: a stdio Model Context Protocol server for every MCP host, built on the
//! adapter library (`crate::adapter`), so it reaches the Broker only through a child
//! `browser-pilot bridge --stdio`.
//!
//! One MCP session is one Workspace with one renewable Lease. Tools are the Broker's manifest as
//! `tools/list` reports it, plus the server's own file tools (`files`). This module never imports the Broker's internals (`broker`,
//! `store`, `session`, `tools`) and never writes state to disk. Files: `options` (flags),
//! `server` (MCP wire and loop), `host` (the session on the adapter), `tools` (tool mapping),
//! `content` (result shapes; the text a model reads is `crate::adapter::lean`), `files` (the server's own import and download-export tools). Mapping table: `docs/adapters.md`.

mod content;
mod files;
mod host;
mod options;
mod server;
mod tools;

pub use content::{base64, file_uri};
pub use options::{McpOptions, url_policy};
pub use server::{MCP_PROTOCOL_VERSIONS, run_mcp};
pub use tools::{mcp_name, mcp_tool};
