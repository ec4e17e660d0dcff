//! `BROWSER_PILOT_HOME`: where the per-user Broker keeps its few files.
//!
//! Owns the directory layout (locator, versions, socket, startup lock, Artifact bytes, managed
//! browser profile), owner-only permissions (directories 0700, files 0600) and atomic writes of
//! small files. It does not decide what goes into those files.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::os;

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

    /// Creates the directory (and parents) owner-only.
    pub fn ensure(&self) -> Result<(), HomeError> {
        ensure_private_dir(&self.root)
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

/// Creates `dir` and its missing parents, then makes `dir` itself mode 0700.
pub fn ensure_private_dir(dir: &Path) -> Result<(), HomeError> {
    let io = |source| HomeError::Io {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    os::set_owner_only(dir, true).map_err(io)
}

/// Writes `bytes` to `path` atomically (temp file + rename), mode 0600.
pub fn write_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = os::create_owner_only(&tmp)?;
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

    #[test]
    fn private_files_and_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::at(tmp.path().join("a/b"));
        home.ensure().unwrap();
        write_private_file(&home.locator_path(), b"{}").unwrap();
        assert_eq!(std::fs::read(home.locator_path()).unwrap(), b"{}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(home.root()), 0o700);
            assert_eq!(mode(&home.locator_path()), 0o600);
        }
    }
}
