//! `BROWSER_PILOT_HOME`: where the per-user Broker keeps its few files.
//!
//! Owns the directory layout (locator, versions, socket, startup lock, Artifact bytes, managed
//! browser profile), which directories may serve as a home (this user's own, never a shared
//! sticky directory such as `/tmp`, never another user's), owner-only permissions (directories
//! 0700, files 0600) and atomic writes of small files that never follow a planted link. It
//! does not decide what goes into those files.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::os::{self, EntryKind};

/// The Broker home directory and the names inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error("BROWSER_PILOT_HOME must be an absolute path, got {0:?}")]
    NotAbsolute(PathBuf),
    #[error("no home directory could be determined; set BROWSER_PILOT_HOME to an absolute path")]
    NoDefault,
    /// The directory (or the symlink naming it) exists and belongs to another user. It is never
    /// adopted or chmod'ed.
    #[error("the directory belongs to another user (uid {owner}), not to uid {own}")]
    ForeignOwner { owner: u32, own: u32 },
    /// A directory shared by design (sticky bit, such as `/tmp` itself). Never tightened.
    #[error("the directory is a shared sticky directory (mode {mode:o}), not a private one")]
    Shared { mode: u32 },
    #[error("the path exists and is not a directory")]
    NotADirectory,
    /// Others may access the directory and it holds files that are not Browser Pilot's (say
    /// `$HOME` or `/`): tightening it would change far more than a Broker home.
    #[error(
        "others may access the directory (mode {mode:o}) and it holds files that are not Browser Pilot's; use a dedicated directory"
    )]
    NotDedicated { mode: u32 },
    #[error("cannot prepare {path:?}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Home {
    /// `BROWSER_PILOT_HOME` when set (it must be absolute), else the platform default.
    pub fn from_env() -> Result<Home, HomeError> {
        match std::env::var_os("BROWSER_PILOT_HOME") {
            Some(value) if !value.is_empty() => {
                let root = PathBuf::from(value);
                match root.is_absolute() {
                    true => Ok(Home { root }),
                    false => Err(HomeError::NotAbsolute(root)),
                }
            }
            _ => os::default_home()
                .map(|root| Home { root })
                .ok_or(HomeError::NoDefault),
        }
    }

    pub fn at(root: PathBuf) -> Home {
        Home { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates the directory (and parents) owner-only, or checks an existing one: it must be
    /// this user's and not a shared sticky directory; a directory of this user's that others
    /// may access (say 0775 from a umask of 002) is tightened to 0700, but only while it holds
    /// nothing except Browser Pilot's own entries, so a home pointed at `$HOME` or `/` is
    /// refused instead of chmod'ed.
    pub fn ensure(&self) -> Result<(), HomeError> {
        ensure_private_dir_with(&self.root, |dir, mode| {
            let io = |source| HomeError::Io {
                path: dir.to_owned(),
                source,
            };
            for entry in std::fs::read_dir(dir).map_err(io)? {
                if !is_home_entry(&entry.map_err(io)?.file_name()) {
                    return Err(HomeError::NotDedicated { mode });
                }
            }
            Ok(())
        })
    }

    /// The checks of [`Home::ensure`] without creating or changing anything: a missing home
    /// is fine (nothing runs there), a foreign or shared one is refused.
    pub fn verify(&self) -> Result<(), HomeError> {
        match check_dir(&self.root) {
            Ok(_) => Ok(()),
            Err(HomeError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    pub fn locator_path(&self) -> PathBuf {
        self.root.join("broker-locator.json")
    }

    pub fn versions_path(&self) -> PathBuf {
        self.root.join("broker-versions.json")
    }

    pub fn socket_path(&self) -> PathBuf {
        self.root.join("broker.sock")
    }

    /// The live view's owner-only control socket (`browser-pilot view`, docs/view.md).
    pub fn view_socket_path(&self) -> PathBuf {
        self.root.join("view.sock")
    }

    pub fn startup_lock_path(&self) -> PathBuf {
        self.root.join("startup.lock")
    }

    pub fn artifacts_dir(&self) -> PathBuf {
        self.root.join("artifacts")
    }

    pub fn browser_dir(&self) -> PathBuf {
        self.root.join("browser")
    }
}

/// What an existing directory needs: nothing, or tightening to 0700.
enum Checked {
    Private,
    OpenToOthers { mode: u32 },
}

/// The names Browser Pilot itself puts into a home (see the `Home` paths), including the
/// temporary files of [`write_private_file`].
fn is_home_entry(name: &std::ffi::OsStr) -> bool {
    const NAMES: &[&str] = &[
        "broker-locator.json",
        "broker-versions.json",
        "broker.sock",
        "view.sock",
        "startup.lock",
        "artifacts",
        "browser",
        // Written by the user, read by the Broker (`browser::REMOTE_FILE`, docs/remote.md).
        "remote-browsers.toml",
    ];
    let name = name.to_string_lossy();
    NAMES.contains(&name.as_ref())
        || ["broker-locator.tmp-", "broker-versions.tmp-"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// Checks an existing `dir` (following a symlink there only when the link is this user's own).
fn check_dir(dir: &Path) -> Result<Checked, HomeError> {
    let io = |source| HomeError::Io {
        path: dir.to_owned(),
        source,
    };
    let own = os::effective_uid();
    let entry = os::file_facts(dir, false).map_err(io)?;
    if entry.kind == EntryKind::Symlink && entry.uid != own {
        return Err(HomeError::ForeignOwner {
            owner: entry.uid,
            own,
        });
    }
    let facts = os::file_facts(dir, true).map_err(io)?;
    if facts.kind != EntryKind::Directory {
        return Err(HomeError::NotADirectory);
    }
    if facts.uid != own {
        return Err(HomeError::ForeignOwner {
            owner: facts.uid,
            own,
        });
    }
    if facts.is_sticky() {
        return Err(HomeError::Shared { mode: facts.mode });
    }
    match facts.is_open_to_others() {
        true => Ok(Checked::OpenToOthers { mode: facts.mode }),
        false => Ok(Checked::Private),
    }
}

/// Creates `dir` (0700 from the start) and its missing parents, or checks an existing `dir`
/// as [`Home::ensure`] describes and tightens it to 0700 when it is this user's own. For
/// directories inside a home (which is private already).
pub fn ensure_private_dir(dir: &Path) -> Result<(), HomeError> {
    ensure_private_dir_with(dir, |_, _| Ok(()))
}

/// [`ensure_private_dir`], asking `may_tighten` (directory, current mode) before a chmod.
fn ensure_private_dir_with(
    dir: &Path,
    may_tighten: impl FnOnce(&Path, u32) -> Result<(), HomeError>,
) -> Result<(), HomeError> {
    let io = |source| HomeError::Io {
        path: dir.to_owned(),
        source,
    };
    match os::file_facts(dir, false) {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            match os::create_private_dir(dir) {
                Ok(()) => {}
                // Someone created it meanwhile: it gets the same checks as any existing one.
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(io(error)),
            }
        }
        Err(error) => return Err(io(error)),
    }
    match check_dir(dir)? {
        Checked::Private => Ok(()),
        Checked::OpenToOthers { mode } => {
            may_tighten(dir, mode)?;
            os::set_owner_only(dir, true).map_err(io)
        }
    }
}

/// Writes `bytes` to `path` atomically (temp file + rename), mode 0600. The temporary file is
/// created new and never through a symlink; a leftover of a crashed writer is removed first.
pub fn write_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = match os::create_new_owner_only(&tmp) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                // Removes the entry itself, even when it is a link.
                std::fs::remove_file(&tmp)?;
                os::create_new_owner_only(&tmp)?
            }
            Err(error) => return Err(error),
        };
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[cfg(unix)]
    fn set_mode(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn private_files_and_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::at(tmp.path().join("a/b"));
        home.ensure().unwrap();
        write_private_file(&home.locator_path(), b"{}").unwrap();
        assert_eq!(std::fs::read(home.locator_path()).unwrap(), b"{}");
        #[cfg(unix)]
        {
            assert_eq!(mode(home.root()), 0o700);
            assert_eq!(mode(&home.locator_path()), 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn own_loose_dirs_are_tightened_shared_ones_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let loose = tmp.path().join("loose");
        std::fs::create_dir(&loose).unwrap();
        set_mode(&loose, 0o775);
        Home::at(loose.clone()).ensure().unwrap();
        assert_eq!(mode(&loose), 0o700);

        let used = tmp.path().join("used");
        std::fs::create_dir(&used).unwrap();
        std::fs::write(used.join("broker-locator.json"), b"{}").unwrap();
        std::fs::create_dir(used.join("artifacts")).unwrap();
        set_mode(&used, 0o775);
        Home::at(used.clone()).ensure().unwrap();
        assert_eq!(mode(&used), 0o700);

        let personal = tmp.path().join("personal");
        std::fs::create_dir(&personal).unwrap();
        std::fs::write(personal.join("notes.txt"), b"mine").unwrap();
        set_mode(&personal, 0o755);
        let refused = Home::at(personal.clone()).ensure().unwrap_err();
        assert!(
            matches!(refused, HomeError::NotDedicated { mode: 0o755 }),
            "{refused:?}"
        );
        assert_eq!(mode(&personal), 0o755, "never chmod'ed");
        set_mode(&personal, 0o700);
        Home::at(personal.clone()).ensure().unwrap();

        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        set_mode(&shared, 0o1777);
        let refused = Home::at(shared.clone()).ensure().unwrap_err();
        assert!(matches!(refused, HomeError::Shared { .. }), "{refused:?}");
        assert_eq!(mode(&shared), 0o1777, "never chmod'ed");
        assert!(Home::at(shared.clone()).verify().is_err());

        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(
            Home::at(file).ensure(),
            Err(HomeError::NotADirectory)
        ));
        assert!(Home::at(tmp.path().join("missing")).verify().is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn private_file_writes_never_follow_a_planted_link() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let target = tmp.path().join("broker-locator.json");
        let planted = target.with_extension(format!("tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write_private_file(&target, b"{}").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(&target).unwrap(), b"{}");
        assert!(
            std::fs::symlink_metadata(&planted).is_err(),
            "the link was removed"
        );
    }
}
