//! Everything platform-specific about browsers, with the same API on every
//! platform: default user-data directories, whether a profile's process is
//! running, detached spawning, root detection, executable search paths and
//! owner-only directories and files. Nothing else in the crate's browser code says
//! `#[cfg(...)]`. No discovery policy lives here.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::candidate::ProcessState;

/// One platform default user-data directory, in stable platform order.
pub(super) struct DefaultDir {
    pub(super) product: &'static str,
    pub(super) channel: &'static str,
    pub(super) path: PathBuf,
}

/// Chrome, Chrome Beta, Chrome Canary, Chromium, Edge, Brave (docs/cdp.md,
/// "profile dirs"), for the current platform. Missing base directories yield nothing.
pub(super) fn default_user_data_dirs() -> Vec<DefaultDir> {
    imp::default_user_data_dirs()
}

/// Whether the process holding the profile's singleton lock is alive.
pub(super) fn profile_process_state(user_data_dir: &Path) -> ProcessState {
    imp::profile_process_state(user_data_dir)
}

/// Spawns `command` detached from our session and terminal.
pub(super) fn spawn_detached(command: &mut Command) -> io::Result<Child> {
    imp::spawn_detached(command)
}

/// Whether we run with root privileges (Chromium then needs `--no-sandbox`).
pub(super) fn is_root() -> bool {
    imp::is_root()
}

/// Usual executable locations, in preference order.
pub(super) fn executable_search_paths() -> Vec<PathBuf> {
    imp::executable_search_paths()
}

/// How to install Chromium on this platform, for error messages.
pub(super) const INSTALL_HINT: &str = imp::INSTALL_HINT;

/// Whether `path` is a file we may execute.
pub(super) fn is_executable(path: &Path) -> bool {
    imp::is_executable(path)
}

/// Creates `path` and missing parents owner-only (0700 on Unix) and makes
/// `path` itself owner-only if it already existed.
pub(super) fn create_private_dir_all(path: &Path) -> io::Result<()> {
    imp::create_private_dir_all(path)
}

/// Creates (or truncates) the file at `path`, owner-only (0600 on Unix).
pub(super) fn create_private_file(path: &Path) -> io::Result<std::fs::File> {
    imp::create_private_file(path)
}

#[cfg(unix)]
mod imp {
    use std::io;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command};

    use super::{DefaultDir, ProcessState};

    #[cfg(target_os = "macos")]
    pub(super) const INSTALL_HINT: &str =
        "install Chromium or Google Chrome, or pass --executable PATH";
    #[cfg(not(target_os = "macos"))]
    pub(super) const INSTALL_HINT: &str = "install it with: sudo apt-get install chromium \
         (Debian/Ubuntu), or pass --executable PATH or set BROWSER_PILOT_CHROMIUM";

    fn home() -> Option<PathBuf> {
        std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(PathBuf::from)
    }

    #[cfg(target_os = "macos")]
    pub(super) fn default_user_data_dirs() -> Vec<DefaultDir> {
        let Some(home) = home() else {
            return Vec::new();
        };
        let base = home.join("Library/Application Support");
        [
            ("chrome", "stable", "Google/Chrome"),
            ("chrome", "beta", "Google/Chrome Beta"),
            ("chrome", "canary", "Google/Chrome Canary"),
            ("chromium", "stable", "Chromium"),
            ("edge", "stable", "Microsoft Edge"),
            ("brave", "stable", "BraveSoftware/Brave-Browser"),
        ]
        .into_iter()
        .map(|(product, channel, relative)| DefaultDir {
            product,
            channel,
            path: base.join(relative),
        })
        .collect()
    }

    /// Linux and other Unixes: `$CHROME_CONFIG_HOME`, else `$XDG_CONFIG_HOME`,
    /// else `~/.config` (chromium `docs/user_data_dir.md`). There is no
    /// Linux Canary.
    #[cfg(not(target_os = "macos"))]
    pub(super) fn default_user_data_dirs() -> Vec<DefaultDir> {
        let from_env = |name: &str| {
            std::env::var_os(name)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        let Some(base) = from_env("CHROME_CONFIG_HOME")
            .or_else(|| from_env("XDG_CONFIG_HOME"))
            .or_else(|| home().map(|home| home.join(".config")))
        else {
            return Vec::new();
        };
        [
            ("chrome", "stable", "google-chrome"),
            ("chrome", "beta", "google-chrome-beta"),
            ("chromium", "stable", "chromium"),
            ("edge", "stable", "microsoft-edge"),
            ("brave", "stable", "BraveSoftware/Brave-Browser"),
        ]
        .into_iter()
        .map(|(product, channel, relative)| DefaultDir {
            product,
            channel,
            path: base.join(relative),
        })
        .collect()
    }

    /// Chromium's `SingletonLock` is a symlink to `<hostname>-<pid>` while
    /// the browser runs; it survives a crash, so the pid is checked too.
    pub(super) fn profile_process_state(user_data_dir: &Path) -> ProcessState {
        let target = match std::fs::read_link(user_data_dir.join("SingletonLock")) {
            Ok(target) => target,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return ProcessState::NotRunning;
            }
            Err(_) => return ProcessState::Unknown,
        };
        let target = target.to_string_lossy().into_owned();
        let Some((host, pid)) = target.rsplit_once('-') else {
            return ProcessState::Unknown;
        };
        let Ok(pid) = pid.parse::<libc::pid_t>() else {
            return ProcessState::Unknown;
        };
        if pid <= 0 || hostname().as_deref() != Some(host) {
            return ProcessState::Unknown;
        }
        // SAFETY: kill with signal 0 only checks that the pid exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        match alive {
            true => ProcessState::Running,
            false => ProcessState::NotRunning,
        }
    }

    fn hostname() -> Option<String> {
        let mut buffer = [0u8; 256];
        // SAFETY: the buffer is valid for its full length; gethostname
        // writes at most that many bytes.
        let rc = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
        if rc != 0 {
            return None;
        }
        let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
        String::from_utf8(buffer[..end].to_vec()).ok()
    }

    pub(super) fn spawn_detached(command: &mut Command) -> io::Result<Child> {
        // SAFETY: the closure runs between fork and exec and only calls
        // setsid, which is async-signal-safe.
        unsafe {
            command.pre_exec(|| match libc::setsid() {
                -1 => Err(io::Error::last_os_error()),
                _ => Ok(()),
            });
        }
        command.spawn()
    }

    pub(super) fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[cfg(target_os = "macos")]
    pub(super) fn executable_search_paths() -> Vec<PathBuf> {
        [
            "/Applications/Chromium.app/Contents/MacOS/Chromium",
            "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
        ]
        .into_iter()
        .map(PathBuf::from)
        .collect()
    }

    #[cfg(not(target_os = "macos"))]
    pub(super) fn executable_search_paths() -> Vec<PathBuf> {
        [
            "/usr/bin/chromium",
            "/usr/bin/chromium-browser",
            "/usr/bin/google-chrome",
            "/usr/bin/google-chrome-stable",
        ]
        .into_iter()
        .map(PathBuf::from)
        .collect()
    }

    pub(super) fn is_executable(path: &Path) -> bool {
        match std::fs::metadata(path) {
            Ok(metadata) => metadata.is_file() && metadata.permissions().mode() & 0o111 != 0,
            Err(_) => false,
        }
    }

    pub(super) fn create_private_file(path: &Path) -> io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(file)
    }

    pub(super) fn create_private_dir_all(path: &Path) -> io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
    }
}

#[cfg(windows)]
mod imp {
    use std::io;
    use std::os::windows::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command};

    use super::{DefaultDir, ProcessState};

    pub(super) const INSTALL_HINT: &str =
        "install Chromium or Google Chrome, or pass --executable PATH";

    /// `DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP`: no console, not in our
    /// Ctrl-C group.
    const DETACHED_FLAGS: u32 = 0x0000_0008 | 0x0000_0200;

    fn env_dir(name: &str) -> Option<PathBuf> {
        std::env::var_os(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    }

    pub(super) fn default_user_data_dirs() -> Vec<DefaultDir> {
        let Some(base) = env_dir("LOCALAPPDATA") else {
            return Vec::new();
        };
        [
            ("chrome", "stable", r"Google\Chrome\User Data"),
            ("chrome", "beta", r"Google\Chrome Beta\User Data"),
            ("chrome", "canary", r"Google\Chrome SxS\User Data"),
            ("chromium", "stable", r"Chromium\User Data"),
            ("edge", "stable", r"Microsoft\Edge\User Data"),
            ("brave", "stable", r"BraveSoftware\Brave-Browser\User Data"),
        ]
        .into_iter()
        .map(|(product, channel, relative)| DefaultDir {
            product,
            channel,
            path: base.join(relative),
        })
        .collect()
    }

    /// Windows has no singleton symlink to read passively.
    pub(super) fn profile_process_state(_user_data_dir: &Path) -> ProcessState {
        ProcessState::Unknown
    }

    pub(super) fn spawn_detached(command: &mut Command) -> io::Result<Child> {
        command.creation_flags(DETACHED_FLAGS).spawn()
    }

    pub(super) fn is_root() -> bool {
        false
    }

    pub(super) fn executable_search_paths() -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for base in ["PROGRAMFILES", "PROGRAMFILES(X86)", "LOCALAPPDATA"] {
            if let Some(base) = env_dir(base) {
                paths.push(base.join(r"Chromium\Application\chrome.exe"));
                paths.push(base.join(r"Google\Chrome\Application\chrome.exe"));
            }
        }
        paths
    }

    pub(super) fn is_executable(path: &Path) -> bool {
        path.is_file()
    }

    pub(super) fn create_private_file(path: &Path) -> io::Result<std::fs::File> {
        // %LOCALAPPDATA% is already per-user.
        std::fs::File::create(path)
    }

    pub(super) fn create_private_dir_all(path: &Path) -> io::Result<()> {
        // %LOCALAPPDATA% is already per-user.
        std::fs::create_dir_all(path)
    }
}
