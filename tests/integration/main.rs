//! The process tests, as one test binary: each module drives the built executables
//! (`browser-pilot`, `bp`) over their pipes against a real headless Chromium the module starts
//! itself and fixture pages served from 127.0.0.1; `support` is the one shared harness. All
//! modules run concurrently in this one process, so none changes the process environment, the
//! working directory or the umask (each passes what its children need on their command line or
//! environment), and a test kills only processes it started or found by pid under its own
//! Broker. Run one module with `cargo test --test integration -- network::`.

mod support;

mod actions18;
mod artifacts;
mod background;
mod bp_cli;
mod bp_quickstart;
mod bp_tools;
mod broker_bounds;
mod browser_launch;
mod browser_session;
mod click_truth;
mod commands;
mod conformance_fake;
mod core_loop;
mod data_tools;
mod downloads;
mod fast_paths;
mod files;
mod frames;
mod host_adapters;
mod hostile_pages;
mod isolation;
mod janitor;
mod janitor_death;
mod keys_truth;
mod local_security;
mod network;
mod never_replay;
mod observe_diff;
mod page_scripts;
mod protocol_core;
mod remote;
mod scale;
mod tool_examples;
mod version_json;
mod view;
mod watchdogs;
mod widgets;
