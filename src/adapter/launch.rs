//! Launching `browser-pilot bridge --stdio` as a child process, the contract's way.
//!
//! Owns process creation only: an absolute executable path run directly (never through a
//! shell), pipes for stdin, stdout and stderr, and a task that turns each stderr line into a
//! diagnostic (stderr is never parsed as protocol). It does not speak JSON-RPC and never reads
//! the Broker's locator, socket or PID files: the executable owns Broker discovery.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// What to launch.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The absolute path of the `browser-pilot` executable.
    pub executable: PathBuf,
    /// `--browser <id|product|channel>`: the host's explicit initial browser preference.
    pub browser: Option<String>,
    /// Extra environment for the bridge (for example a deliberate `BROWSER_PILOT_HOME`).
    pub env: Vec<(OsString, OsString)>,
}

impl LaunchSpec {
    pub fn new(executable: impl Into<PathBuf>) -> LaunchSpec {
        LaunchSpec {
            executable: executable.into(),
            browser: None,
            env: Vec::new(),
        }
    }

    /// The executable this process is: how `browser-pilot mcp` and `bp` launch their bridge.
    pub fn current_executable() -> Result<LaunchSpec, RpcError> {
        let path = std::env::current_exe().map_err(|error| {
            RpcError::new(
                ErrorCode::BrokerUnavailable,
                format!("cannot resolve this executable's path: {error}"),
            )
        })?;
        Ok(LaunchSpec::new(path))
    }
}

/// A launched bridge: its pipes and the process.
pub struct Launched {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

/// Starts the bridge. A relative path is refused: resolving it would depend on the host's
/// working directory or `PATH`, which the contract leaves to the host to decide explicitly.
pub fn launch(spec: &LaunchSpec) -> Result<Launched, RpcError> {
    if !spec.executable.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "the bridge executable must be an absolute path, not {:?}",
            spec.executable
        ))
        .with_remediation(
            RemediationAction::UseAbsolutePath,
            "Resolve the exact browser-pilot executable and pass its absolute path.",
        ));
    }
    let mut command = Command::new(&spec.executable);
    command.arg("bridge").arg("--stdio");
    if let Some(browser) = &spec.browser {
        command.arg("--browser").arg(browser);
    }
    for (key, value) in &spec.env {
        command.env(key, value);
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|error| {
        RpcError::new(
            ErrorCode::BrokerUnavailable,
            format!("cannot start {}: {error}", spec.executable.display()),
        )
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(RpcError::new(
            ErrorCode::InternalError,
            "the bridge's pipes were not created",
        ));
    };
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(target: "browser_pilot::adapter::bridge_stderr", "{line}");
        }
    });
    Ok(Launched {
        child,
        stdin,
        stdout,
    })
}
