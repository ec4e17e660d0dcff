//! The black-box stdio conformance runner: it launches an exact Browser Pilot
//! command, speaks only newline-delimited JSON-RPC 2.0 over the child's pipes,
//! and reports which parts of the stdio contract the executable honours.
//!
//! It must not import any other module of this crate: it judges the
//! executable exactly as an outside integrator would. Layers: `lines` (bytes
//! to bounded lines), `client` (envelopes, id correlation, deadlines),
//! `shape` (typed reads of results), `os` (the file-mode test), `checks` (one
//! function per contract check), `codes` (the runner's failure codes),
//! `suite` (order, dependencies, timing), `report` and `scrub` (the
//! versioned, redacted report), `cli` (arguments, process launch, exit
//! codes). User guide: `docs/conformance.md`.

mod checks;
mod cli;
mod client;
mod codes;
mod lines;
mod os;
mod report;
mod scrub;
mod shape;
mod suite;

pub use cli::run_cli;
