//! The `browser-pilot` executable: thin entry point over the library.
//!
//! Interim dispatch (browser worktree): the hidden janitor role and the
//! `browser launch|stop` commands. The lead merges these into the real CLI.

use std::path::PathBuf;
use std::process::exit;

use browser_pilot::{browser, janitor};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(role) = args
        .first()
        .and_then(|arg| arg.strip_prefix("--browser-pilot-internal="))
    {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(tracing::Level::WARN)
            .init();
        match (role, args.get(1)) {
            ("janitor", Some(ws_url)) => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap_or_else(|error| fail(&format!("cannot start runtime: {error}")));
                let code = runtime.block_on(janitor::run_janitor(ws_url.clone()));
                // Dropping the runtime must not wait for stdin (tested by
                // tests/janitor.rs, which keeps stdin open).
                drop(runtime);
                exit(code);
            }
            _ => fail(&format!("unknown internal role {role}")),
        }
    }
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["browser", "launch", rest @ ..] => {
            let mut headless = false;
            let mut executable = None;
            let mut rest = rest.iter();
            while let Some(arg) = rest.next() {
                match *arg {
                    "--headless" => headless = true,
                    "--executable" => match rest.next() {
                        Some(path) => executable = Some(PathBuf::from(path)),
                        None => fail("--executable needs a path"),
                    },
                    other => fail(&format!("unknown argument {other}")),
                }
            }
            match browser::launch_cli(&home(), headless, executable) {
                Ok(candidate) => println!("{}", candidate.to_json()),
                Err(error) => fail(&error.to_string()),
            }
        }
        ["browser", "stop"] => match browser::stop_cli(&home()) {
            Ok(stopped) => println!("{}", serde_json::json!({ "stopped": stopped })),
            Err(error) => fail(&error.to_string()),
        },
        _ => fail(
            "usage: browser-pilot browser launch [--headless] [--executable PATH] | browser stop",
        ),
    }
}

fn home() -> PathBuf {
    match std::env::var_os("BROWSER_PILOT_HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home),
        _ => {
            let base = std::env::var_os("XDG_STATE_HOME")
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state"))
                })
                .unwrap_or_else(|| fail("cannot determine BROWSER_PILOT_HOME"));
            base.join("browser-pilot")
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("browser-pilot: {message}");
    exit(1)
}
