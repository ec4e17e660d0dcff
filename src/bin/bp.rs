//! The human `bp` CLI: a thin entry point over `browser_pilot::cli`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use browser_pilot::home::Home;

#[derive(Parser)]
#[command(name = "bp", version, about = "Browser Pilot for humans at a terminal")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show whether a Broker runs for this BROWSER_PILOT_HOME and who is connected.
    Status,
    /// Stop the Broker, unless an embedded host is still connected.
    Disconnect,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let home = match Home::from_env() {
        Ok(home) => home,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts");
    let code = match cli.command {
        Command::Status => runtime.block_on(browser_pilot::cli::status(&home)),
        Command::Disconnect => runtime.block_on(browser_pilot::cli::disconnect(&home)),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
