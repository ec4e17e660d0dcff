//! The human `bp` CLI and `browser-pilot debug sql`. Every tool command is one short session on
//! the shared Broker through the host adapter library (`crate::adapter`, the public stdio
//! protocol only); `bp status`, `bp disconnect` and `debug sql` also use the owner-only private
//! CLI channel for what no public method does. It never touches the store, CDP or Broker
//! internals, and never writes a tab, Observation, ref or cursor to disk.
//!
//! Files: `args` (clap definitions, completions, man page, the tool -> command table), `run`
//! (commands -> tools), `data` (the console, eval, cookie, network, auth and download commands),
//! `compat` (the compatibility Workspace session and the current tab), `output` (TTY text,
//! JSON, colours, spinner), `exit` (exit codes), `commands` + `client` (private channel),
//! `table` (debug sql rows).

mod args;
mod client;
mod commands;
mod compat;
mod data;
mod exit;
mod output;
mod run;
mod table;

pub use args::{
    Cli, Command, EXIT_CODES, IMPLICIT_TOOLS, Shell, TOOL_COMMANDS, completions, man_page,
    man_pages, tool_coverage_markdown,
};
pub use commands::{debug_sql, disconnect, handoff_done, status};
pub use compat::{CLIENT_ID, instance_id};
pub use exit::log_level;
pub use run::run;
