//! The human `bp` CLI: a thin entry point over `browser_pilot::cli` (parse, run, exit code).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = browser_pilot::cli::Cli::parse();
    let code = browser_pilot::cli::run(cli);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
