//! The `browser-pilot` executable: a thin entry point over the library.
//!
//! Public commands: `bridge --stdio`, `mcp`, `view`, `debug sql`, `browser launch|stop`, `conformance`,
//! `--version --json` (the version and protocol data the release manifest repeats).
//! Private roles (`--browser-pilot-internal=broker|janitor|keeper|view`) are respawns of this same
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
    /// The Broker-managed Chromium for servers, CI and the quick start.
    Browser {
        #[command(subcommand)]
        command: BrowserCommand,
    },
    /// Run the black-box stdio conformance suite (see `browser-pilot conformance --help`).
    #[command(disable_help_flag = true)]
    Conformance {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// A stdio MCP server for MCP hosts, on the same Broker (see docs/adapters.md).
    Mcp {
        /// Initial browser preference: a candidate id, product or channel.
        #[arg(long)]
        browser: Option<String>,
        /// Launch the Broker-managed headless Chromium when no browser is ready.
        #[arg(long)]
        headless: bool,
        /// Where PDFs, full-size screenshots and the downloads you export are written (default:
        /// a private temporary directory). Must be yours and not writable by others.
        #[arg(long)]
        output_dir: Option<std::path::PathBuf>,
        /// Lets the browser_file_import tool copy regular files under this absolute directory
        /// (repeatable; symlinks resolved) for browser_upload. Off when not given.
        #[arg(long = "upload-dir", value_name = "DIR")]
        upload_dir: Vec<std::path::PathBuf>,
        /// Comma-separated capabilities to request (default: the contract's six); `+name,...` adds
        /// extras such as `+page.eval` to the six.
        #[arg(long)]
        capabilities: Option<String>,
        /// Also return each result as `structuredContent` and list tools' output schemas (for
        /// hosts that consume structured results; the text content stays the lean form).
        #[arg(long)]
        structured: bool,
        /// Hold the session's Workspace to these origins only (comma-separated or repeated):
        /// `https://example.com`, `https://*.example.com`, `http://127.0.0.1:*`.
        #[arg(long, value_name = "PATTERN", value_delimiter = ',')]
        url_allow: Vec<String>,
        /// Never let the session's Workspace load these origins (comma-separated or repeated);
        /// wins over --url-allow.
        #[arg(long, value_name = "PATTERN", value_delimiter = ',')]
        url_block: Vec<String>,
    },
    /// Print the URL of this user's live view of every Workspace (starting the view when none
    /// runs); see docs/view.md.
    View {
        /// Also hand the URL to the desktop's browser, where there is a desktop.
        #[arg(long)]
        open: bool,
        /// Stop the running view instead.
        #[arg(long, conflicts_with = "open")]
        stop: bool,
    },
    /// Development introspection of the running Broker.
    Debug {
        #[command(subcommand)]
        command: DebugCommand,
    },
}

#[derive(Subcommand)]
enum BrowserCommand {
    /// Start Chromium on the Broker-owned profile, on a CDP pipe held by a private keeper
    /// process (no debugging port), and print the discovery candidate it became.
    Launch {
        #[arg(long)]
        headless: bool,
        /// The Chromium-family executable (else BROWSER_PILOT_CHROMIUM, else the usual paths).
        #[arg(long)]
        executable: Option<std::path::PathBuf>,
    },
    /// Close the Broker-managed Chromium (never any other browser).
    Stop,
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
    // The runner parses its own arguments, verbatim: the outer parser would swallow the `--`
    // that separates the runner's options from the bridge command (`conformance -- CMD ...`).
    if args.get(1).and_then(|a| a.to_str()) == Some("conformance") {
        let mut argv = vec![std::ffi::OsString::from("browser-pilot conformance")];
        argv.extend(args[2..].iter().cloned());
        return exit(browser_pilot::conformance::run_cli(argv));
    }
    if is_version_json(&args[1..]) {
        println!("{}", version_json());
        return ExitCode::SUCCESS;
    }
    // The bridge as hosts start it runs without the argument parser: a bridge is one of several
    // processes of this executable, and every page of code it touches counts in its RSS
    // (docs/performance.md, "Memory"). Anything else goes through the parser.
    if let Some(browser) = plain_bridge_arguments(&args[1..]) {
        return run_bridge_command(browser);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Bridge { stdio, browser } => {
            if !stdio {
                eprintln!("error: only `bridge --stdio` is supported");
                return ExitCode::from(2);
            }
            run_bridge_command(browser)
        }
        Command::Browser { command } => {
            if let Err(code) = init_cli_tracing("warn") {
                return code;
            }
            with_home(|home| run_browser_command(&home, command))
        }
        // Normally dispatched verbatim before parsing (above); this arm is reached only when
        // something precedes the subcommand.
        Command::Conformance { args } => {
            let mut argv = vec![std::ffi::OsString::from("browser-pilot conformance")];
            argv.extend(args);
            exit(browser_pilot::conformance::run_cli(argv))
        }
        Command::Mcp {
            browser,
            headless,
            output_dir,
            upload_dir,
            capabilities,
            structured,
            url_allow,
            url_block,
        } => {
            if let Err(code) = init_cli_tracing("warn") {
                return code;
            }
            let cwd = std::env::current_dir().unwrap_or_default();
            let options = match browser_pilot::mcp::McpOptions::new(
                browser,
                headless,
                output_dir,
                &upload_dir,
                capabilities.as_deref(),
                &cwd,
            ) {
                Ok(options) => browser_pilot::mcp::McpOptions {
                    structured,
                    url_policy: browser_pilot::mcp::url_policy(&url_allow, &url_block),
                    ..options
                },
                Err(error) => {
                    eprintln!("error: {error}");
                    return ExitCode::from(2);
                }
            };
            let runtime = runtime();
            let code = runtime.block_on(browser_pilot::mcp::run_mcp(options));
            runtime.shutdown_timeout(std::time::Duration::from_millis(50));
            exit(code)
        }
        Command::View { open, stop } => {
            if let Err(code) = init_cli_tracing("warn") {
                return code;
            }
            with_home(|home| browser_pilot::view::run_cli(home, open, stop))
        }
        Command::Debug {
            command: DebugCommand::Sql { query },
        } => {
            if let Err(code) = init_cli_tracing("warn") {
                return code;
            }
            with_home(|home| runtime().block_on(browser_pilot::cli::debug_sql(&home, &query)))
        }
    }
}

/// `bridge --stdio`, optionally with `--browser ID` or `--browser=ID` before or after `--stdio`,
/// and nothing else: the browser preference (`Some(None)` without one). `None` for anything the
/// argument parser must see (help, a missing value, an unknown flag, non-UTF-8).
fn plain_bridge_arguments(args: &[std::ffi::OsString]) -> Option<Option<String>> {
    let words: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    let (first, rest) = words.split_first()?;
    if *first != "bridge" {
        return None;
    }
    let (mut stdio, mut browser) = (false, None);
    let mut rest = rest.iter();
    while let Some(word) = rest.next() {
        match *word {
            "--stdio" if !stdio => stdio = true,
            "--browser" if browser.is_none() => {
                let value = rest
                    .next()
                    .filter(|value| !value.is_empty() && !value.starts_with('-'))?;
                browser = Some((*value).to_owned());
            }
            other => match other.strip_prefix("--browser=") {
                Some(value) if browser.is_none() && !value.is_empty() => {
                    browser = Some(value.to_owned());
                }
                _ => return None,
            },
        }
    }
    stdio.then_some(browser)
}

/// `browser-pilot bridge --stdio`: the Host API on this process's stdin and stdout.
fn run_bridge_command(browser: Option<String>) -> ExitCode {
    init_tracing("warn");
    let home = match Home::from_env() {
        Ok(home) => home,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    // One thread: the stdin loop, the Broker reader and the stdout writer hand lines to each
    // other with no cross-thread wake-up (the round trip's main cost).
    let runtime = current_thread_runtime();
    let code = runtime.block_on(browser_pilot::bridge::run_bridge(home, browser));
    // A blocking stdin read may still be parked; do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(50));
    exit(code)
}

/// `--version --json` in either order and nothing else.
fn is_version_json(args: &[std::ffi::OsString]) -> bool {
    let mut flags: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    flags.sort_unstable();
    args.len() == 2 && flags == ["--json", "--version"]
}

/// The machine-readable version: what `manifest.json` of a release repeats (scripts/release
/// reads it from the built executable, so the two cannot drift).
fn version_json() -> serde_json::Value {
    use browser_pilot::protocol::negotiate::SUPPORTED_PROTOCOLS;
    use browser_pilot::version::{EXECUTABLE_VERSION, IPC_VERSION, SERVICE_VERSION};
    let protocols: Vec<serde_json::Value> =
        SUPPORTED_PROTOCOLS.iter().map(|v| v.to_json()).collect();
    serde_json::json!({
        "name": "browser-pilot",
        "version": EXECUTABLE_VERSION,
        "service": {"version": SERVICE_VERSION},
        "protocols": protocols,
        "ipcVersion": IPC_VERSION,
    })
}

fn run_browser_command(home: &Home, command: BrowserCommand) -> i32 {
    // The managed profile lives in the home: never in another user's or a shared directory.
    let checked = match command {
        BrowserCommand::Launch { .. } => home.ensure(),
        BrowserCommand::Stop => home.verify(),
    };
    if let Err(error) = checked {
        eprintln!("error: BROWSER_PILOT_HOME is not usable: {error}");
        return 2;
    }
    match command {
        BrowserCommand::Launch {
            headless,
            executable,
        } => match browser_pilot::browser::launch_cli(home.root(), headless, executable) {
            Ok(candidate) => {
                println!("{}", candidate.to_json());
                0
            }
            Err(error) => {
                eprintln!("error: {error}");
                1
            }
        },
        BrowserCommand::Stop => match browser_pilot::browser::stop_cli(home.root()) {
            Ok(stopped) => {
                println!("{}", serde_json::json!({"stopped": stopped}));
                0
            }
            Err(error) => {
                eprintln!("error: {error}");
                1
            }
        },
    }
}

fn run_internal(role: &str, rest: &[std::ffi::OsString]) -> i32 {
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
        "janitor" => {
            init_tracing("warn");
            let Some(ws_url) = rest.first().and_then(|u| u.to_str()) else {
                eprintln!("error: the janitor role needs the browser WebSocket URL");
                return 2;
            };
            let runtime = current_thread_runtime();
            let code = runtime.block_on(browser_pilot::janitor::run_janitor(ws_url.to_owned()));
            runtime.shutdown_timeout(std::time::Duration::from_millis(50));
            code
        }
        "view" => {
            init_tracing("warn");
            match Home::from_env() {
                Ok(home) => {
                    let runtime = current_thread_runtime();
                    let code = runtime.block_on(browser_pilot::view::run_role(home));
                    runtime.shutdown_timeout(std::time::Duration::from_millis(50));
                    code
                }
                Err(error) => {
                    eprintln!("error: {error}");
                    2
                }
            }
        }
        "keeper" => {
            init_tracing("warn");
            let runtime = current_thread_runtime();
            let code = runtime.block_on(browser_pilot::keeper::run_keeper(rest.to_vec()));
            runtime.shutdown_timeout(std::time::Duration::from_millis(50));
            code
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

/// A runtime on the calling thread, for roles whose tasks only hand lines to each other.
fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts")
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Diagnostics go to stderr only; stdout is protocol. `BROWSER_PILOT_LOG` sets the level.
fn init_tracing(default_level: &str) {
    let default = default_level.parse().unwrap_or(tracing::Level::WARN);
    let (level, refused) = match browser_pilot::cli::log_level(default) {
        Ok(level) => (level, None),
        Err(message) => (default, Some(message)),
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_ansi(false)
        .try_init();
    if let Some(message) = refused {
        tracing::warn!("{message}; using {default}");
    }
}

/// For the subcommands a person runs: a `BROWSER_PILOT_LOG` that names no level is a usage
/// error (exit 2) before anything starts; then diagnostics as [`init_tracing`].
fn init_cli_tracing(default_level: &str) -> Result<(), ExitCode> {
    let default = default_level.parse().unwrap_or(tracing::Level::WARN);
    if let Err(message) = browser_pilot::cli::log_level(default) {
        eprintln!("error: {message}");
        return Err(ExitCode::from(2));
    }
    init_tracing(default_level);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::plain_bridge_arguments;

    fn plain(words: &[&str]) -> Option<Option<String>> {
        let args: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
        plain_bridge_arguments(&args)
    }

    #[test]
    fn only_the_plain_bridge_forms_skip_the_parser() {
        assert_eq!(plain(&["bridge", "--stdio"]), Some(None));
        let chrome = Some(Some("chrome".to_owned()));
        assert_eq!(plain(&["bridge", "--stdio", "--browser", "chrome"]), chrome);
        assert_eq!(plain(&["bridge", "--browser", "chrome", "--stdio"]), chrome);
        assert_eq!(plain(&["bridge", "--browser=chrome", "--stdio"]), chrome);
        // The parser answers everything else: its errors and help stay as they are.
        for words in [
            &["bridge"][..],
            &["bridge", "--browser", "chrome"],
            &["bridge", "--stdio", "--stdio"],
            &["bridge", "--stdio", "--browser"],
            &["bridge", "--stdio", "--browser", "--help"],
            &["bridge", "--stdio", "--browser="],
            &["bridge", "--stdio", "--browser", "a", "--browser", "b"],
            &["bridge", "--stdio", "--help"],
            &["bridge", "--stdio", "extra"],
            &["mcp", "--stdio"],
            &[],
        ] {
            assert_eq!(plain(words), None, "{words:?}");
        }
    }
}
