//! The runner's command line: parses arguments with clap, resolves the bridge
//! command (the exact one after `--`, or this installation's own
//! `browser-pilot bridge --stdio`), runs the suite, prints the report to
//! stdout (and `--report`, whose path is checked before anything runs), a
//! summary to stderr, and maps the verdict to the documented exit codes.
//!
//! It must not run checks itself or spawn the bridge through a shell.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use clap::error::ErrorKind;

use super::report::{RUNNER_NAME, Status};
use super::suite::{self, LAUNCH_BROWSER, Plan};

/// Exit status: every check passed.
pub const EXIT_PASSED: i32 = 0;

/// Exit status: at least one check failed.
pub const EXIT_FAILED: i32 = 1;

/// Exit status: the runner's own arguments (or `--report` path) are unusable.
pub const EXIT_INVALID_ARGUMENTS: i32 = 2;

/// The per-operation timeout when `--timeout-ms` is absent.
const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// The longest `--timeout-ms` accepted: one hour per operation is already
/// far beyond any useful conformance run.
const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// The executable tested when no command follows `--`.
const DEFAULT_EXECUTABLE: &str = "browser-pilot";

/// Runs the stdio conformance suite against a Browser Pilot executable.
#[derive(Debug, Parser)]
#[command(name = RUNNER_NAME, version)]
struct Args {
    /// Also write the JSON report to this file.
    #[arg(long, value_name = "PATH")]
    report: Option<PathBuf>,

    /// Per-operation timeout in milliseconds.
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_MS)
    )]
    timeout_ms: u64,

    /// Run `<executable> browser launch --headless` before starting the bridge.
    #[arg(long)]
    launch_browser: bool,

    /// Bind the suite's Workspace to this browser candidate (`browserId` of
    /// `workspaces/create`, e.g. `browser:remote:farm`) instead of the default binding.
    #[arg(long, value_name = "ID")]
    browser_id: Option<String>,

    /// The exact bridge command, run directly without a shell. Defaults to
    /// `browser-pilot bridge --stdio` from this installation.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// The default bridge executable: this executable, unless this is the
/// standalone runner, whose sibling `browser-pilot` is the product.
fn default_executable(current: &Path) -> PathBuf {
    let stem = current.file_stem().and_then(|stem| stem.to_str());
    match stem == Some(RUNNER_NAME) {
        true => current.with_file_name(format!(
            "{DEFAULT_EXECUTABLE}{}",
            std::env::consts::EXE_SUFFIX
        )),
        false => current.to_path_buf(),
    }
}

/// Splits the command after `--` into program and arguments, or builds the default.
fn bridge_command(command: Vec<OsString>) -> std::io::Result<(OsString, Vec<OsString>)> {
    let mut parts = command.into_iter();
    match parts.next() {
        Some(program) => Ok((program, parts.collect())),
        None => {
            let current = std::env::current_exe()?;
            let program = default_executable(&current).into_os_string();
            Ok((program, vec!["bridge".into(), "--stdio".into()]))
        }
    }
}

/// Parses `args` (program name first), runs the suite and returns the exit
/// status: 0 passed, 1 conformance failure, 2 invalid runner arguments.
pub fn run_cli(args: Vec<OsString>) -> i32 {
    let parsed = match Args::try_parse_from(args) {
        Ok(parsed) => parsed,
        Err(error) => {
            // Help and version go to stdout and succeed; usage errors go to stderr.
            let _ = error.print();
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => EXIT_PASSED,
                _ => EXIT_INVALID_ARGUMENTS,
            };
        }
    };
    // An unusable report path is a usage error, found before the bridge is started.
    if let Some(path) = &parsed.report
        && let Err(error) = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    {
        eprintln!(
            "{RUNNER_NAME}: cannot write --report file: {}",
            error.kind()
        );
        return EXIT_INVALID_ARGUMENTS;
    }
    let (program, args) = match bridge_command(parsed.command) {
        Ok(command) => command,
        Err(error) => {
            eprintln!("{RUNNER_NAME}: cannot locate the default executable: {error}");
            return EXIT_INVALID_ARGUMENTS;
        }
    };
    let plan = Plan {
        program,
        args,
        timeout: Duration::from_millis(parsed.timeout_ms),
        launch_browser: parsed.launch_browser,
        browser_id: parsed.browser_id,
    };
    let report = suite::run(&plan);
    let document = report.render();
    let mut stderr = std::io::stderr().lock();
    for line in report.summary_lines() {
        let _ = writeln!(stderr, "{line}");
    }
    let launch_failed = report
        .checks
        .first()
        .is_some_and(|check| check.name == LAUNCH_BROWSER && check.status == Status::Failed);
    if launch_failed {
        let _ = writeln!(
            stderr,
            "{RUNNER_NAME}: --launch-browser failed; the bridge was not started"
        );
    }
    drop(stderr);
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(document.as_bytes())
        .and_then(|()| stdout.flush())
    {
        eprintln!("{RUNNER_NAME}: cannot write the report to stdout: {error}");
    }
    drop(stdout);
    if let Some(path) = &parsed.report
        && let Err(error) = std::fs::write(path, &document)
    {
        eprintln!(
            "{RUNNER_NAME}: cannot write --report file: {}",
            error.kind()
        );
        // A conformance failure is still reported as one.
        return match report.passed() {
            true => EXIT_INVALID_ARGUMENTS,
            false => EXIT_FAILED,
        };
    }
    match report.passed() {
        true => EXIT_PASSED,
        false => EXIT_FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::{EXIT_INVALID_ARGUMENTS, default_executable};
    use std::path::Path;

    #[test]
    fn standalone_runner_tests_its_sibling() {
        let runner = Path::new("/opt/bp/bin").join(format!(
            "browser-pilot-conformance{}",
            std::env::consts::EXE_SUFFIX
        ));
        let product =
            Path::new("/opt/bp/bin").join(format!("browser-pilot{}", std::env::consts::EXE_SUFFIX));
        assert_eq!(default_executable(&runner), product);
        assert_eq!(default_executable(&product), product);
    }

    #[test]
    fn usage_errors_exit_two() {
        let run = |args: &[&str]| super::run_cli(args.iter().map(Into::into).collect());
        assert_eq!(run(&["x", "--timeout-ms", "0"]), EXIT_INVALID_ARGUMENTS);
        assert_eq!(run(&["x", "--timeout-ms", "soon"]), EXIT_INVALID_ARGUMENTS);
        assert_eq!(run(&["x", "--bogus"]), EXIT_INVALID_ARGUMENTS);
        assert_eq!(run(&["x", "stray"]), EXIT_INVALID_ARGUMENTS);
    }
}
