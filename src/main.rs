//! The `browser-pilot` executable: a thin entry point over the library.
//!
//! Public commands: `bridge --stdio`, `debug sql`, `browser launch|stop`, `conformance`.
//! Private roles (`--browser-pilot-internal=broker|janitor`) are respawns of this same
//! executable and are not a Host API.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use browser_pilot::home::Home;

#[derive(Parser)]
#[command(
    name = "browser-pilot",
    version,
    about = "A local Broker through which AI agent hosts drive a real Chromium-family browser"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Speak JSON-RPC 2.0 (NDJSON) on stdin/stdout: the Host API.
    Bridge {
        /// Use stdin/stdout (the only supported transport).
        #[arg(long)]
        stdio: bool,
        /// Initial browser preference: a candidate id, product or channel.
        #[arg(long)]
        browser: Option<String>,
    },
    /// Development introspection of the running Broker.
    Debug {
        #[command(subcommand)]
        command: DebugCommand,
    },
}

#[derive(Subcommand)]
enum DebugCommand {
    /// Run one read-only SQL query against the Broker's in-memory database.
    Sql { query: String },
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(role) = args
        .get(1)
        .and_then(|a| a.to_str())
        .and_then(|a| a.strip_prefix("--browser-pilot-internal="))
    {
        return exit(run_internal(role, &args[2..]));
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Bridge { stdio, browser } => {
            if !stdio {
                eprintln!("error: only `bridge --stdio` is supported");
                return ExitCode::from(2);
            }
            init_tracing("warn");
            let home = match Home::from_env() {
                Ok(home) => home,
                Err(error) => {
                    eprintln!("error: {error}");
                    return ExitCode::from(2);
                }
            };
            let runtime = runtime();
            let code = runtime.block_on(browser_pilot::bridge::run_bridge(home, browser));
            // A blocking stdin read may still be parked; do not wait for it.
            runtime.shutdown_timeout(std::time::Duration::from_millis(50));
            exit(code)
        }
        Command::Debug {
            command: DebugCommand::Sql { query },
        } => {
            init_tracing("warn");
            with_home(|home| runtime().block_on(browser_pilot::cli::debug_sql(&home, &query)))
        }
    }
}

fn run_internal(role: &str, _rest: &[std::ffi::OsString]) -> i32 {
    match role {
        "broker" => {
            init_tracing("info");
            match Home::from_env() {
                Ok(home) => runtime().block_on(browser_pilot::broker::run_broker(home)),
                Err(error) => {
                    eprintln!("error: {error}");
                    2
                }
            }
        }
        other => {
            eprintln!("error: unknown internal role {other:?}");
            2
        }
    }
}

fn with_home(f: impl FnOnce(Home) -> i32) -> ExitCode {
    match Home::from_env() {
        Ok(home) => exit(f(home)),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts")
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Diagnostics go to stderr only; stdout is protocol. `BROWSER_PILOT_LOG` sets the level.
fn init_tracing(default_level: &str) {
    let level = std::env::var("BROWSER_PILOT_LOG").unwrap_or_else(|_| default_level.to_owned());
    let level = level
        .parse::<tracing::Level>()
        .unwrap_or(tracing::Level::WARN);
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_ansi(false)
        .try_init();
}
