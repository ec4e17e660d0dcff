//! `browser-pilot browser launch` and `browser stop` for the Broker-managed
//! profile `<home>/browser/managed-profile`. Launch finds an executable and
//! spawns, detached, the keeper (`keeper`), which starts it with a fixed flag
//! set on a CDP pipe (never a TCP port) and holds that pipe for the browser's
//! whole life; launch waits until the keeper's socket answers. Stop asks the
//! keeper to close the browser (a managed browser an older version started
//! with a port is closed through one WebSocket, via the janitor module). Both
//! are blocking CLI functions. This file never touches a user's own profile.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::candidate::{Candidate, Endpoint, ProcessState};
use super::discovery::{
    inspect_managed, keeper_socket, managed_port, managed_profile_dir, probe, remove_active_port,
};
use super::os;

/// Environment variable naming the Chromium executable when `--executable`
/// is not given.
pub const CHROMIUM_ENV: &str = "BROWSER_PILOT_CHROMIUM";

/// How long launch waits for the keeper's socket (the keeper binds it once the
/// browser answered on its pipe). A fresh profile needs ~130 ms here (field
/// notes §1); a cold start on a slow disk can take seconds.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How long stop waits for the port to close and the process to exit after
/// `Browser.close` (58 ms median here; docs/cdp.md, "close timing").
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Budget for the one WebSocket that sends `Browser.close`.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// How the managed browser was last launched, in `<home>/browser`: what
/// `browser.connect` relaunches it with after it died. `browser stop`
/// removes it, so a stopped browser stays stopped.
const LAUNCH_RECORD: &str = "launch.json";

/// The keeper's diagnostics, in `<home>/browser`.
const KEEPER_LOG: &str = "keeper.log";

/// Poll interval while waiting for the keeper to answer or the browser to exit.
const POLL_INTERVAL: Duration = Duration::from_millis(25);

/// Flags every managed Chromium gets (DESIGN.md conventions); the keeper adds
/// `--remote-debugging-pipe`.
const BASE_FLAGS: [&str; 4] = [
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// Errors of `browser launch` and `browser stop`.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("no chromium executable found (looked at {tried}); {hint}")]
    ExecutableNotFound { tried: String, hint: &'static str },
    #[error("{path} is not an executable file ({origin}); {hint}")]
    NotExecutable {
        path: PathBuf,
        origin: &'static str,
        hint: &'static str,
    },
    #[error("cannot prepare the managed profile directory: {0}")]
    Profile(#[source] std::io::Error),
    #[error("cannot start {path}: {source}")]
    Spawn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot find this executable to start the keeper: {0}")]
    OwnExecutable(#[source] std::io::Error),
    #[error("chromium exited during start-up ({status}){detail}")]
    ExitedEarly { status: String, detail: String },
    #[error(
        "chromium did not come up within {seconds} s; \
         if a managed browser is already running without its keeper, run: browser-pilot browser stop"
    )]
    StartTimeout { seconds: u64 },
    #[error("cannot close the managed browser: {0}")]
    Close(#[from] crate::janitor::JanitorError),
    #[error("cannot close the managed browser: {0}")]
    Keeper(#[from] crate::keeper::KeeperError),
    #[error("the managed browser did not exit within {seconds} s")]
    StopTimeout { seconds: u64 },
}

/// Starts (or finds) the managed Chromium and returns its candidate.
/// Idempotent: a live managed endpoint is returned as is.
pub fn launch_cli(
    home: &Path,
    headless: bool,
    executable: Option<PathBuf>,
) -> Result<Candidate, LaunchError> {
    let profile_dir = managed_profile_dir(home);
    let existing = inspect_managed(home);
    if existing.endpoint().is_some() {
        return Ok(existing);
    }
    let executable = resolve_executable(executable)?;
    // Both Broker-owned levels are owner-only, even if they pre-existed.
    for dir in [home.join("browser"), profile_dir.clone()] {
        os::create_private_dir_all(&dir).map_err(LaunchError::Profile)?;
    }
    // Chromium never deletes the file (docs/cdp.md, "discovery file"); a stale one
    // would be mistaken for the new browser's port.
    remove_active_port(&profile_dir).map_err(LaunchError::Profile)?;
    let log = home.join("browser").join(KEEPER_LOG);
    let mut child = match existing.process_state {
        // Another launch is starting this profile; wait for its keeper.
        ProcessState::Running => None,
        ProcessState::NotRunning | ProcessState::Unknown => {
            let own = std::env::current_exe().map_err(LaunchError::OwnExecutable)?;
            // The keeper's diagnostics: stdout and stderr must not be the caller's, which
            // waits for their end (`mcp --headless` and `bp launch` run this command).
            let stderr = os::create_private_file(&log).map_err(LaunchError::Profile)?;
            let mut command = Command::new(own);
            command
                .arg(crate::keeper::ROLE_ARG)
                .arg(home.join("browser"))
                .arg(&executable)
                .args(chromium_args(&profile_dir, headless, os::is_root()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr);
            let child = os::spawn_detached(&mut command).map_err(|source| LaunchError::Spawn {
                path: executable.clone(),
                source,
            })?;
            Some(child)
        }
    };
    let started = Instant::now();
    loop {
        let candidate = inspect_managed(home);
        if candidate.endpoint().is_some() {
            write_record(home, headless, &executable);
            if let Some(child) = child {
                // Reap the browser when it exits, without blocking anyone.
                std::thread::spawn(move || {
                    let mut child = child;
                    let _ = child.wait();
                });
            }
            return Ok(candidate);
        }
        if let Some(running) = child.as_mut()
            && let Ok(Some(status)) = running.try_wait()
        {
            return Err(LaunchError::ExitedEarly {
                status: status.to_string(),
                detail: last_line(&log),
            });
        }
        if started.elapsed() >= START_TIMEOUT {
            return Err(LaunchError::StartTimeout {
                seconds: START_TIMEOUT.as_secs(),
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Stops the managed browser: its keeper closes it (`Browser.close` on the
/// pipe) and answers once it exited; then this waits until the profile's
/// process is gone. Returns `false` when it was not running.
pub fn stop_cli(home: &Path) -> Result<bool, LaunchError> {
    let profile_dir = managed_profile_dir(home);
    match std::fs::remove_file(home.join("browser").join(LAUNCH_RECORD)) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(%error, "cannot remove the managed browser's launch record");
        }
        _ => {}
    }
    let stopped = match crate::keeper::close(&keeper_socket(&profile_dir), STOP_TIMEOUT)? {
        true => true,
        false => stop_port_browser(home)?,
    };
    if !stopped {
        return Ok(false);
    }
    let started = Instant::now();
    while os::profile_process_state(&profile_dir) == ProcessState::Running {
        if started.elapsed() >= STOP_TIMEOUT {
            return Err(LaunchError::StopTimeout {
                seconds: STOP_TIMEOUT.as_secs(),
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    Ok(true)
}

/// A managed browser an older version started with a debugging port: one
/// WebSocket sends `Browser.close`, then the port must close.
fn stop_port_browser(home: &Path) -> Result<bool, LaunchError> {
    let Some(endpoint) = managed_port(home) else {
        return Ok(false);
    };
    crate::janitor::close_browser(&endpoint.janitor_arg(), CLOSE_TIMEOUT)?;
    let Endpoint::Port { port, .. } = endpoint else {
        return Ok(true);
    };
    let started = Instant::now();
    while probe(port) {
        if started.elapsed() >= STOP_TIMEOUT {
            return Err(LaunchError::StopTimeout {
                seconds: STOP_TIMEOUT.as_secs(),
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    Ok(true)
}

/// Launches the managed browser again as it was last launched, when it was
/// launched and not stopped since (it died). `Ok(None)`: nothing to relaunch.
/// Blocking.
pub fn relaunch(home: &Path) -> Result<Option<Candidate>, LaunchError> {
    let Ok(text) = std::fs::read_to_string(home.join("browser").join(LAUNCH_RECORD)) else {
        return Ok(None);
    };
    let Ok(record) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(None);
    };
    let (Some(headless), Some(executable)) = (
        record["headless"].as_bool(),
        record["executable"].as_str().map(PathBuf::from),
    ) else {
        return Ok(None);
    };
    launch_cli(home, headless, Some(executable)).map(Some)
}

fn write_record(home: &Path, headless: bool, executable: &Path) {
    let record = serde_json::json!({
        "headless": headless,
        "executable": executable.to_string_lossy(),
    });
    let written = os::create_private_file(&home.join("browser").join(LAUNCH_RECORD))
        .and_then(|mut file| std::io::Write::write_all(&mut file, record.to_string().as_bytes()));
    if let Err(error) = written {
        tracing::warn!(%error, "cannot record how the managed browser was launched");
    }
}

/// The last non-empty line of the keeper's log, as ": <line>" (bounded).
fn last_line(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    match text.lines().rev().find(|line| !line.trim().is_empty()) {
        Some(line) => format!(": {}", line.chars().take(300).collect::<String>()),
        None => String::new(),
    }
}

fn chromium_args(profile_dir: &Path, headless: bool, as_root: bool) -> Vec<OsString> {
    let mut args: Vec<OsString> = BASE_FLAGS.iter().map(OsString::from).collect();
    let mut user_data_dir = OsString::from("--user-data-dir=");
    user_data_dir.push(profile_dir);
    args.push(user_data_dir);
    if headless {
        args.push("--headless".into());
        args.push("--disable-gpu".into());
    }
    if as_root {
        // Chromium refuses to run as root with the sandbox on.
        args.push("--no-sandbox".into());
    }
    args.push("about:blank".into());
    args
}

/// `--executable`, then `BROWSER_PILOT_CHROMIUM`, then the usual paths. An
/// explicit choice that is not executable is an error, not a fallback.
fn resolve_executable(flag: Option<PathBuf>) -> Result<PathBuf, LaunchError> {
    let explicit = match flag {
        Some(path) => Some((path, "--executable")),
        None => std::env::var_os(CHROMIUM_ENV)
            .filter(|value| !value.is_empty())
            .map(|value| (PathBuf::from(value), CHROMIUM_ENV)),
    };
    if let Some((path, origin)) = explicit {
        return match os::is_executable(&path) {
            true => Ok(path),
            false => Err(LaunchError::NotExecutable {
                path,
                origin,
                hint: os::INSTALL_HINT,
            }),
        };
    }
    let candidates = os::executable_search_paths();
    match candidates.iter().find(|path| os::is_executable(path)) {
        Some(path) => Ok(path.clone()),
        None => Err(LaunchError::ExecutableNotFound {
            tried: candidates
                .iter()
                .map(|path| path.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            hint: os::INSTALL_HINT,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_the_design() {
        let args = chromium_args(Path::new("/h/browser/managed-profile"), true, true);
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for flag in BASE_FLAGS {
            assert!(args.iter().any(|a| a == flag), "{flag} missing");
        }
        assert!(
            !args
                .iter()
                .any(|a| a.starts_with("--remote-debugging-port")),
            "a managed browser never listens on a port: {args:?}"
        );
        assert!(args.contains(&"--user-data-dir=/h/browser/managed-profile".to_owned()));
        assert!(args.contains(&"--headless".to_owned()));
        assert!(args.contains(&"--disable-gpu".to_owned()));
        assert!(args.contains(&"--no-sandbox".to_owned()));
        assert_eq!(args.last().map(String::as_str), Some("about:blank"));

        let args = chromium_args(Path::new("/p"), false, false);
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!args.contains(&"--headless".to_owned()));
        assert!(!args.contains(&"--no-sandbox".to_owned()));
    }

    #[test]
    fn explicit_executable_must_exist() {
        let error = resolve_executable(Some(PathBuf::from("/nonexistent/chromium"))).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("/nonexistent/chromium"), "{message}");
        assert!(message.contains("--executable"), "{message}");
    }
}
