//! Finding the Broker, or starting exactly one under the per-user startup lock.
//!
//! Order: check the home (this user's, not shared; see `home`), connect to the endpoint (the
//! endpoint file and the listening peer must be this user's, see `ipc`) and exchange the
//! private handshake; if nothing listens, take `startup.lock`, check again, recover a dead
//! locator, spawn the Broker detached and wait until it answers. A live Broker that does not
//! answer is never killed or replaced, and neither is an incompatible one: both become
//! structured errors with remediation, and the remediation names a pid only when that pid is
//! verifiably this user's Broker for this home. An endpoint of another user gets nothing sent
//! to it and is never removed.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::framing::LineReader;
use crate::home::{Home, HomeError};
use crate::ipc::{
    self, ConnectError, HandshakeError, IpcReader, IpcWriter, Patience, Resource, Untrusted,
    exhausted_resource,
};
use crate::os;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::internal::{Hello, Welcome};
use crate::version::IPC_VERSION;

/// How long a connected Broker may take to answer the handshake before it counts as
/// unresponsive. Generous: a healthy Broker answers in well under a millisecond.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a freshly spawned Broker may take to start listening.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Poll interval while waiting for a spawned Broker's endpoint.
/// A failed connect to a missing socket costs microseconds, so it is tried often.
const STARTUP_POLL: Duration = Duration::from_millis(1);

/// How long a Broker that dropped a handshake connection is given to show that it is exiting.
const DYING_GRACE: Duration = Duration::from_millis(500);

/// Line limit on the Broker link: the Broker only sends lines the service limits allow, with
/// headroom for the response envelope around a maximal result.
pub const LINK_MAX_LINE_BYTES: usize = 1024 * 1024 * 1024 + 64 * 1024;

/// An open, handshaken connection to the Broker.
pub struct BrokerLink {
    pub reader: LineReader<IpcReader>,
    pub writer: IpcWriter,
    pub welcome: Welcome,
}

enum Attempt {
    Connected(BrokerLink),
    NoEndpoint,
    Failed(RpcError),
}

/// Connects to the running Broker, starting one if none runs.
pub async fn connect_or_start(home: &Home, hello: &Hello) -> Result<BrokerLink, RpcError> {
    home.ensure().map_err(home_error)?;
    match attempt(home, hello).await {
        Attempt::Connected(link) => return Ok(link),
        Attempt::Failed(error) => return Err(error),
        Attempt::NoEndpoint => {}
    }
    let lock = take_startup_lock(home).await?;
    let result = start_locked(home, hello).await;
    drop(lock);
    result
}

async fn start_locked(home: &Home, hello: &Hello) -> Result<BrokerLink, RpcError> {
    // Another bridge may have started the Broker while we waited for the lock.
    match attempt(home, hello).await {
        Attempt::Connected(link) => return Ok(link),
        Attempt::Failed(error) => return Err(error),
        Attempt::NoEndpoint => {}
    }
    if let Some(pid) = locator_pid(home)
        && pid != std::process::id()
        && os::pid_is_broker(pid)
    {
        return Err(unresponsive(home, Some(pid), "its endpoint is missing"));
    }
    // The locator is dead: recover it.
    let _ = std::fs::remove_file(home.socket_path());
    let _ = std::fs::remove_file(home.locator_path());
    let mut child = spawn_broker(home)?;
    let deadline = tokio::time::Instant::now() + STARTUP_TIMEOUT;
    loop {
        match attempt(home, hello).await {
            Attempt::Connected(link) => {
                // Reap the detached child when it eventually exits, so it never lingers as a zombie.
                std::thread::spawn(move || child.wait());
                return Ok(link);
            }
            Attempt::Failed(error) => {
                // The Broker this bridge just started may have died while answering (a full
                // disk, say): that is not a live Broker to blame.
                return Err(match exit_status_soon(&mut child).await {
                    Some(status) => exited_during_startup(home, status),
                    None => error,
                });
            }
            Attempt::NoEndpoint => {}
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(exited_during_startup(home, status));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(unavailable(
                "the Broker did not start listening in time".to_owned(),
            ));
        }
        tokio::time::sleep(STARTUP_POLL).await;
    }
}

async fn attempt(home: &Home, hello: &Hello) -> Attempt {
    // A Broker whose accept queue is full is busy, not missing: retried within the handshake
    // timeout (`ipc::connect_patiently`).
    let patience = Patience {
        busy_for: HANDSHAKE_TIMEOUT,
        answer_within: Some(HANDSHAKE_TIMEOUT),
    };
    match ipc::handshake(&home.socket_path(), hello, LINK_MAX_LINE_BYTES, patience).await {
        Ok(linked) if linked.welcome.ipc == IPC_VERSION => Attempt::Connected(BrokerLink {
            reader: linked.reader,
            writer: linked.writer,
            welcome: linked.welcome,
        }),
        Ok(linked) => Attempt::Failed(incompatible(&linked.welcome.service_version)),
        Err(HandshakeError::Connect(ConnectError::NoEndpoint(error))) => {
            tracing::debug!(%error, "no Broker endpoint");
            Attempt::NoEndpoint
        }
        Err(HandshakeError::Connect(ConnectError::Busy(error))) => {
            tracing::warn!(%error, "the Broker's accept queue stayed full");
            Attempt::Failed(unresponsive(
                home,
                locator_pid(home),
                "its accept queue stayed full",
            ))
        }
        Err(HandshakeError::Connect(ConnectError::Exhausted(error))) => {
            tracing::error!(%error, "out of resources to reach the Broker");
            Attempt::Failed(unavailable_io("cannot reach the Broker", &error))
        }
        Err(HandshakeError::Connect(ConnectError::Untrusted(why))) => {
            tracing::warn!(%why, "refusing a Broker endpoint of another user");
            Attempt::Failed(untrusted(why))
        }
        Err(HandshakeError::Io(_) | HandshakeError::Closed) if broker_went_away(home).await => {
            // A Broker killed a moment ago can still take a connection it then drops: that is
            // a missing Broker, not an unresponsive one.
            Attempt::NoEndpoint
        }
        Err(HandshakeError::Io(_) | HandshakeError::Closed | HandshakeError::Silent) => {
            Attempt::Failed(unresponsive(
                home,
                locator_pid(home),
                "it did not answer the handshake",
            ))
        }
        Err(HandshakeError::Refused(refusal)) => {
            Attempt::Failed(RpcError::from_json(&refusal.error))
        }
        Err(HandshakeError::Garbled(_)) => Attempt::Failed(incompatible("unknown")),
    }
}

/// How long a spawned Broker whose handshake failed is given to show that it exited.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The exit status of a spawned Broker that exits within [`EXIT_GRACE`], else `None` (it lives).
async fn exit_status_soon(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    let deadline = tokio::time::Instant::now() + EXIT_GRACE;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(STARTUP_POLL).await;
    }
}

/// A Broker this bridge started exited before it answered. When the home's file system has no
/// room left (checked by writing one block there), the error names the full disk and its
/// remedy; the Broker cannot say so itself, since it writes nowhere once the disk is full.
fn exited_during_startup(home: &Home, status: std::process::ExitStatus) -> RpcError {
    let what = format!("the Broker exited during startup ({status})");
    match probe_free_space(home.root()) {
        Err(error) if exhausted_resource(&error).is_some() => unavailable_io(&what, &error),
        _ => unavailable(what),
    }
}

/// Writes and removes one 4 KiB block in `dir`, synced, so a full file system answers `ENOSPC`.
fn probe_free_space(dir: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let path = dir.join(format!(".space-probe-{}", std::process::id()));
    let written = std::fs::File::create(&path).and_then(|mut file| {
        file.write_all(&[0; 4096])?;
        file.sync_all()
    });
    let _ = std::fs::remove_file(&path);
    written
}

/// Holds the per-user startup lock until dropped.
struct StartupLock(
    #[expect(dead_code, reason = "held only for its Drop, which unlocks")] std::fs::File,
);

async fn take_startup_lock(home: &Home) -> Result<StartupLock, RpcError> {
    let path = home.startup_lock_path();
    tokio::task::spawn_blocking(move || -> std::io::Result<StartupLock> {
        // Never through a planted link: the lock file is opened without following one.
        let file = os::open_lock_file(&path)?;
        file.lock()?;
        Ok(StartupLock(file))
    })
    .await
    .map_err(|e| unavailable(format!("startup lock task failed: {e}")))?
    .map_err(|e| unavailable_io("cannot take the startup lock", &e))
}

fn spawn_broker(home: &Home) -> Result<std::process::Child, RpcError> {
    let exe = std::env::current_exe()
        .map_err(|e| unavailable(format!("cannot find own executable: {e}")))?;
    let mut command = std::process::Command::new(exe);
    command
        .arg("--browser-pilot-internal=broker")
        .env("BROWSER_PILOT_HOME", home.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    match std::env::var_os("BROWSER_PILOT_BROKER_LOG").map(std::path::PathBuf::from) {
        Some(log) if log.is_absolute() => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .map_err(|e| unavailable(format!("cannot open BROWSER_PILOT_BROKER_LOG: {e}")))?;
            command.stderr(file);
        }
        _ => {
            command.stderr(std::process::Stdio::null());
        }
    }
    os::detach(&mut command);
    command
        .spawn()
        .map_err(|e| unavailable_io("cannot spawn the Broker", &e))
}

/// Whether the Broker named by the locator is gone (exited, or a zombie no longer running the
/// Broker role), waiting up to [`DYING_GRACE`] for a killed one to finish exiting.
async fn broker_went_away(home: &Home) -> bool {
    let deadline = tokio::time::Instant::now() + DYING_GRACE;
    loop {
        if !locator_pid(home).is_some_and(os::pid_is_broker) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn locator_pid(home: &Home) -> Option<u32> {
    read_locator_pid(&home.locator_path())
}

fn read_locator_pid(path: &Path) -> Option<u32> {
    let bytes = std::fs::read(path).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value
        .get("pid")?
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
}

/// A live Broker that does not answer. The pid from the locator is named only when it is
/// verifiably this user's Broker for this home: a stale locator's pid may belong to anyone by
/// now, and telling a user to stop it could make them kill an unrelated process.
fn unresponsive(home: &Home, locator_pid: Option<u32>, why: &str) -> RpcError {
    let verified = locator_pid.filter(|&pid| os::pid_is_own_broker(pid, home.root()));
    match verified {
        Some(pid) => RpcError::new(
            ErrorCode::BrowserDisconnected,
            format!("the running Broker (pid {pid}) is alive but {why}"),
        )
        .with_remediation(
            RemediationAction::RestartUnresponsiveBroker,
            format!(
                "Browser Pilot never kills a live Broker. Stop process {pid} yourself (or set a different absolute BROWSER_PILOT_HOME), then launch again."
            ),
        )
        .with_context("pid", json!(pid)),
        None => RpcError::new(
            ErrorCode::BrowserDisconnected,
            format!("the running Broker is alive but {why}"),
        )
        .with_remediation(
            RemediationAction::RestartUnresponsiveBroker,
            "Browser Pilot never kills a live Broker. Stop the Broker process of this BROWSER_PILOT_HOME yourself (its command line has --browser-pilot-internal=broker), or set a different absolute BROWSER_PILOT_HOME, then launch again.",
        ),
    }
}

/// The endpoint file or its listener belongs to another user: nothing was sent to it.
fn untrusted(why: Untrusted) -> RpcError {
    RpcError::new(
        ErrorCode::BrokerUntrusted,
        format!("refusing the Broker endpoint: {why}"),
    )
    .with_context("reason", json!(why.reason()))
    .with_remediation(
        RemediationAction::RemoveForeignEndpoint,
        "The Broker endpoint (broker.sock in BROWSER_PILOT_HOME) is not this user's. Nothing was sent to it. Find out who created it, remove it, then launch again; or set BROWSER_PILOT_HOME to a new directory of your own.",
    )
}

/// The home directory is another user's or shared: it is never adopted or chmod'ed.
fn home_error(error: HomeError) -> RpcError {
    let reason = match &error {
        HomeError::ForeignOwner { .. } => "foreign_owner",
        HomeError::Shared { .. } => "shared_directory",
        HomeError::NotADirectory => "not_a_directory",
        HomeError::NotDedicated { .. } => "not_dedicated",
        HomeError::Io { source, .. } => {
            return unavailable_io("cannot prepare BROWSER_PILOT_HOME", source);
        }
        _ => return unavailable(format!("cannot prepare BROWSER_PILOT_HOME: {error}")),
    };
    RpcError::new(
        ErrorCode::HomeNotAllowed,
        format!("BROWSER_PILOT_HOME is not usable: {error}"),
    )
    .with_context("reason", json!(reason))
    .with_remediation(
        RemediationAction::ChoosePrivateHome,
        "Set BROWSER_PILOT_HOME to an absolute path of a directory of your own (it is created 0700 when missing), not a shared directory such as /tmp and not another user's directory.",
    )
}

fn incompatible(service_version: &str) -> RpcError {
    RpcError::new(
        ErrorCode::ProtocolIncompatible,
        format!("the running Broker (service {service_version}) speaks another private link version"),
    )
    .with_remediation(
        RemediationAction::UseCompatibleExecutable,
        "Launch an executable compatible with the running Broker, or give this product its own absolute BROWSER_PILOT_HOME. The running Broker is never replaced.",
    )
}

fn unavailable(message: String) -> RpcError {
    RpcError::new(ErrorCode::BrokerUnavailable, message)
}

/// `broker_unavailable` for an I/O failure while reaching or starting the Broker. When this
/// process or the system ran out of something (open files, memory, disk) the error says which
/// and what to do: the Broker is not to blame, and stopping it would not help.
fn unavailable_io(what: &str, error: &std::io::Error) -> RpcError {
    let Some(resource) = exhausted_resource(error) else {
        return unavailable(format!("{what}: {error}"));
    };
    let (reason, remedy) = match resource {
        Resource::OpenFiles => (
            "open_file_limit",
            "The bridge ran out of file descriptors (its open-file limit, or the system's). Raise the limit of the agent host that starts it (ulimit -n, systemd LimitNOFILE=, or the host's own setting) or stop what holds descriptors, then launch again. The Broker is not at fault; do not stop it.",
        ),
        Resource::Memory => (
            "out_of_memory",
            "The system is out of memory for the bridge. Free memory or raise the process's memory limit, then launch again. The Broker is not at fault; do not stop it.",
        ),
        Resource::Disk => (
            "disk_full",
            "The file system of BROWSER_PILOT_HOME is full. Free disk space there, then launch again.",
        ),
    };
    RpcError::new(
        ErrorCode::BrokerUnavailable,
        format!("{what}: this process is out of resources ({error})"),
    )
    .with_context("reason", json!(reason))
    .with_remediation(RemediationAction::FreeResources, remedy)
}
