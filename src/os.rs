//! Platform code behind one API: default directories, process identity, permissions, detaching.
//!
//! Nothing else in the crate says `#[cfg(unix)]` for these concerns. Owns no policy: callers
//! decide when to detach, which pid to check, which file to protect.

use std::fs::File;
use std::path::{Path, PathBuf};

/// The platform default for `BROWSER_PILOT_HOME`.
pub fn default_home() -> Option<PathBuf> {
    imp::default_home()
}

/// Sets owner-only permissions: 0700 for directories, 0600 for files.
pub fn set_owner_only(path: &Path, is_dir: bool) -> std::io::Result<()> {
    imp::set_owner_only(path, is_dir)
}

/// Creates (truncating) a file readable and writable by the owner only.
pub fn create_owner_only(path: &Path) -> std::io::Result<File> {
    imp::create_owner_only(path)
}

/// Whether a process with this id exists (it may belong to anyone).
pub fn pid_alive(pid: u32) -> bool {
    imp::pid_alive(pid)
}

/// Whether `pid` is alive and runs a Browser Pilot Broker role. Where the platform cannot tell,
/// an alive pid counts as a Broker, so a live Broker is never mistaken for a stale one.
pub fn pid_is_broker(pid: u32) -> bool {
    imp::pid_is_broker(pid)
}

/// The effective user id of this process (0 where the platform has none).
pub fn effective_uid() -> u32 {
    imp::effective_uid()
}

/// A stable identity of the file at `path` (device and inode where the platform has them), so
/// a process can tell its own file from a same-named replacement. `None` when it is missing.
pub fn file_identity(path: &Path) -> Option<(u64, u64)> {
    imp::file_identity(path)
}

/// A stream of "please exit" requests from the OS: SIGTERM and SIGINT on Unix, Ctrl-C
/// elsewhere. Must be called inside a tokio runtime.
pub fn termination_signals() -> tokio::sync::mpsc::Receiver<()> {
    imp::termination_signals()
}

/// Makes a child start in its own session, detached from the caller's terminal and process
/// group, so it outlives the bridge that spawned it and is not hit by the host's signals.
pub fn detach(command: &mut std::process::Command) {
    imp::detach(command)
}

#[cfg(unix)]
mod imp {
    use std::fs::{File, OpenOptions};
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};

    pub fn default_home() -> Option<PathBuf> {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        if cfg!(target_os = "macos") {
            return home.map(|h| h.join("Library/Application Support/browser-pilot"));
        }
        match std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
        {
            Some(state) => Some(state.join("browser-pilot")),
            None => home.map(|h| h.join(".local/state/browser-pilot")),
        }
    }

    pub fn set_owner_only(path: &Path, is_dir: bool) -> std::io::Result<()> {
        let mode = if is_dir { 0o700 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }

    pub fn create_owner_only(path: &Path) -> std::io::Result<File> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(file)
    }

    pub fn pid_alive(pid: u32) -> bool {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        // SAFETY: kill with signal 0 only checks for existence and permission.
        let rc = unsafe { libc::kill(pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }

    pub fn pid_is_broker(pid: u32) -> bool {
        if !pid_alive(pid) {
            return false;
        }
        match std::fs::read(format!("/proc/{pid}/cmdline")) {
            Ok(cmdline) => cmdline
                .split(|&b| b == 0)
                .any(|arg| arg == b"--browser-pilot-internal=broker"),
            // No procfs (macOS) or no permission: assume it is ours rather than kill a live Broker.
            Err(_) => !cfg!(target_os = "linux"),
        }
    }

    pub fn termination_signals() -> tokio::sync::mpsc::Receiver<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        for kind in [SignalKind::terminate(), SignalKind::interrupt()] {
            let tx = tx.clone();
            if let Ok(mut stream) = signal(kind) {
                tokio::spawn(async move {
                    stream.recv().await;
                    let _ = tx.send(()).await;
                });
            }
        }
        rx
    }

    pub fn file_identity(path: &Path) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino()))
    }

    pub fn effective_uid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    pub fn detach(command: &mut std::process::Command) {
        // SAFETY: setsid is async-signal-safe and only affects the child between fork and exec.
        unsafe {
            command.pre_exec(|| match libc::setsid() {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(()),
            });
        }
    }
}

#[cfg(windows)]
mod imp {
    use std::fs::File;
    use std::os::windows::process::CommandExt;
    use std::path::{Path, PathBuf};

    pub fn default_home() -> Option<PathBuf> {
        std::env::var_os("LOCALAPPDATA").map(|p| PathBuf::from(p).join("browser-pilot"))
    }

    pub fn set_owner_only(_path: &Path, _is_dir: bool) -> std::io::Result<()> {
        // %LOCALAPPDATA% is already private to the user; ACL tightening is not implemented.
        Ok(())
    }

    pub fn create_owner_only(path: &Path) -> std::io::Result<File> {
        File::create(path)
    }

    pub fn pid_alive(pid: u32) -> bool {
        std::process::Command::new("tasklist")
            .args(["/FI", &format!("PID eq {pid}"), "/NH"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains(&pid.to_string()))
            .unwrap_or(true)
    }

    pub fn pid_is_broker(pid: u32) -> bool {
        pid_alive(pid)
    }

    pub fn effective_uid() -> u32 {
        0
    }

    pub fn termination_signals() -> tokio::sync::mpsc::Receiver<()> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            let _ = tx.send(()).await;
        });
        rx
    }

    pub fn file_identity(path: &Path) -> Option<(u64, u64)> {
        // No inode: existence is the best available check on this platform.
        std::fs::metadata(path).ok().map(|_| (0, 0))
    }

    pub fn detach(command: &mut std::process::Command) {
        const DETACHED_PROCESS: u32 = 0x0000_0008;
        const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
        command.creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP);
    }
}
