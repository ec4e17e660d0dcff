//! Platform code behind one API: default directories, process identity, permissions, file
//! ownership, directory-relative file operations that never follow a link at the final name,
//! non-blocking opens, polled standard input and output, detaching.
//!
//! Nothing else in the crate says `#[cfg(unix)]` for these concerns. Owns no policy: callers
//! decide when to detach, which pid to check, which file to protect, which owner to accept.

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};

/// What a directory entry is, read without following a link at the name itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Directory,
    Symlink,
    Fifo,
    Socket,
    /// Character or block device, or anything else the platform has.
    Other,
}

/// Owner, permission bits and kind of one file (`mode` keeps the setuid/setgid/sticky bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFacts {
    pub kind: EntryKind,
    pub uid: u32,
    pub mode: u32,
}

impl FileFacts {
    /// The sticky bit: a directory many users share (such as `/tmp`).
    pub fn is_sticky(&self) -> bool {
        self.mode & 0o1000 != 0
    }

    /// Group or other users have any access.
    pub fn is_open_to_others(&self) -> bool {
        self.mode & 0o077 != 0
    }
}

/// Owner, mode and kind of `path`; with `follow` false a symlink at `path` is described itself.
pub fn file_facts(path: &Path, follow: bool) -> std::io::Result<FileFacts> {
    imp::file_facts(path, follow)
}

/// A directory opened once. Names inside it are inspected, created, renamed and removed
/// relative to this handle, so swapping the directory's path afterwards changes nothing, and
/// no operation follows a symlink at the final name.
pub struct DirHandle(imp::DirHandle);

impl DirHandle {
    /// Opens the directory at `path` (links on the way there are followed: the caller chose
    /// the path).
    pub fn open(path: &Path) -> std::io::Result<DirHandle> {
        imp::DirHandle::open(path).map(DirHandle)
    }

    /// What `name` is, without following a link there; `None` when nothing has that name.
    pub fn entry_kind(&self, name: &OsStr) -> std::io::Result<Option<EntryKind>> {
        self.0.entry_kind(name)
    }

    /// Creates `name` as a new owner-only (0600) file for writing. Fails with `AlreadyExists`
    /// when anything, including a dangling symlink, already has the name.
    pub fn create_new_private(&self, name: &OsStr) -> std::io::Result<File> {
        self.0.create_new_private(name)
    }

    /// Gives `from` the name `to` only if `to` does not exist (`AlreadyExists` otherwise),
    /// atomically. `Unsupported` when the file system can do neither an exclusive rename nor a
    /// hard link; nothing is replaced then either.
    pub fn rename_no_replace(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        self.0.rename_no_replace(from, to)
    }

    /// Renames `from` to `to`, replacing the directory entry `to` (never writing through it).
    pub fn rename_replace(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        self.0.rename_replace(from, to)
    }

    /// Removes the entry `name` (a link itself, never its target).
    pub fn remove_file(&self, name: &OsStr) -> std::io::Result<()> {
        self.0.remove_file(name)
    }
}

/// Opens `path` for reading without blocking on the open itself (a FIFO without a writer, a
/// device waiting for carrier) and without making a terminal the controlling one. The caller
/// checks what it opened.
pub fn open_read_nonblocking(path: &Path) -> std::io::Result<File> {
    imp::open_read_nonblocking(path)
}

/// Creates `path` as a new owner-only (0600) file; `AlreadyExists` when anything has the name,
/// including a symlink (which is never followed).
pub fn create_new_owner_only(path: &Path) -> std::io::Result<File> {
    imp::create_new_owner_only(path)
}

/// Opens (creating if missing) `path` for writing without truncating it and without following
/// a symlink at the final name, and makes it owner-only through the open handle.
pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
    imp::open_lock_file(path)
}

/// Creates one directory, owner-only from the start. Its parent must exist.
pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
    imp::create_private_dir(path)
}

/// Whether an I/O error says "too many levels of symbolic links" (`ELOOP`).
pub fn is_symlink_loop(error: &std::io::Error) -> bool {
    imp::is_symlink_loop(error)
}

/// Whether an open file lives on a kernel pseudo file system (procfs, sysfs, debugfs, ...):
/// its "regular files" report a size that is not their content and change as they are read.
pub fn is_pseudo_file(file: &File) -> bool {
    imp::is_pseudo_file(file)
}

/// Whether an I/O error says this process ran out of descriptors or memory (`EMFILE`,
/// `ENFILE`, `ENOMEM`, `ENOBUFS`): a condition of the caller, not of the file.
pub fn is_resource_exhaustion(error: &std::io::Error) -> bool {
    imp::is_resource_exhaustion(error)
}

/// Whether `pid` is verifiably a Broker of this user for the home `home_root`: alive, owned by
/// this effective user, running the Broker role, started for exactly this home. Where the
/// platform cannot tell, `false`: callers use this to decide whether naming the pid is safe.
pub fn pid_is_own_broker(pid: u32, home_root: &Path) -> bool {
    imp::pid_is_own_broker(pid, home_root)
}

/// The platform default for `BROWSER_PILOT_HOME`.
pub fn default_home() -> Option<PathBuf> {
    imp::default_home()
}

/// Runs `create` with the process's file-creation mask tightened to owner-only, so what it
/// creates (a socket file, which cannot be opened with a mode) is never visible with a looser
/// mode, not even for the moment before a chmod. The mask is process-wide: a file another thread
/// creates meanwhile is made stricter, never looser, and every file the crate creates is
/// owner-only anyway.
pub fn create_owner_only<T>(create: impl FnOnce() -> T) -> T {
    imp::create_owner_only(create)
}

/// Sets owner-only permissions: 0700 for directories, 0600 for files.
pub fn set_owner_only(path: &Path, is_dir: bool) -> std::io::Result<()> {
    imp::set_owner_only(path, is_dir)
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

/// Standard input or output as a non-blocking duplicate registered with the tokio reactor, so
/// reads and writes run on the runtime thread with no hop through tokio's blocking pool. Made
/// only for a pipe or a socket (a terminal is shared with the shell, a regular file cannot be
/// polled); the descriptor's original file status flags (`O_NONBLOCK` belongs to the open file
/// description, which another process may share) are restored when it is dropped.
pub struct PolledStdio(imp::PolledStdio);

/// Stdin as [`PolledStdio`], or `None` (not a pipe or socket, or not on this platform). Must
/// be called inside a tokio runtime.
pub fn polled_stdin() -> Option<PolledStdio> {
    imp::polled(&std::io::stdin()).map(PolledStdio)
}

/// Stdout as [`PolledStdio`], or `None` as for [`polled_stdin`].
pub fn polled_stdout() -> Option<PolledStdio> {
    imp::polled(&std::io::stdout()).map(PolledStdio)
}

impl tokio::io::AsyncRead for PolledStdio {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.get_mut().0.poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for PolledStdio {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.get_mut().0.poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Results at least this large are followed by [`return_freed_memory`].
pub const TRIM_AFTER_BYTES: usize = 1 << 20;

/// Hands freed heap pages back to the OS (glibc keeps them per arena otherwise: after a
/// 20,000-element Observation the Broker stayed about 50 MiB above its working set). A no-op
/// where the allocator has no such call.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory of the allocator's own arenas; it takes
    // no pointers and may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(unix)]
mod imp {
    use std::ffi::{CString, OsStr};
    use std::fs::{File, OpenOptions};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{
        DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt,
    };
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};

    use super::{EntryKind, FileFacts};

    /// See `super::PolledStdio`.
    pub struct PolledStdio {
        fd: tokio::io::unix::AsyncFd<File>,
        original_flags: libc::c_int,
    }

    pub fn polled(stdio: &impl std::os::fd::AsFd) -> Option<PolledStdio> {
        let file = File::from(stdio.as_fd().try_clone_to_owned().ok()?);
        let kind = file.metadata().ok()?.file_type();
        if !(kind.is_fifo() || kind.is_socket()) {
            return None;
        }
        let raw = file.as_raw_fd();
        // SAFETY: F_GETFL and F_SETFL on a descriptor `file` owns; neither touches memory.
        let original_flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
        if original_flags < 0
            || unsafe { libc::fcntl(raw, libc::F_SETFL, original_flags | libc::O_NONBLOCK) } < 0
        {
            return None;
        }
        // SAFETY: `file` owns its descriptor (a duplicate made above), so it stays open and
        // refers to the same description for as long as the `AsyncFd` owns `file`.
        match unsafe { tokio::io::unix::AsyncFd::register(file) } {
            Ok(fd) => Some(PolledStdio { fd, original_flags }),
            Err(error) => {
                let (file, error) = error.into_parts();
                tracing::debug!(%error, "stdio cannot be polled");
                // SAFETY: F_SETFL on the descriptor `file` still owns.
                unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, original_flags) };
                None
            }
        }
    }

    impl PolledStdio {
        pub fn poll_read(
            &mut self,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            use std::io::Read as _;
            loop {
                let mut guard = std::task::ready!(self.fd.poll_read_ready(cx))?;
                let unfilled = buf.initialize_unfilled();
                let room = unfilled.len();
                match guard.try_io(|file| file.get_ref().read(unfilled)) {
                    Ok(Ok(read)) => {
                        // A short read emptied the pipe: forget the readiness now rather than
                        // learn it from one more read answering EAGAIN (tokio's sockets do the
                        // same; an event that arrives later is not cleared).
                        if read > 0 && read < room {
                            guard.clear_ready();
                        }
                        buf.advance(read);
                        return std::task::Poll::Ready(Ok(()));
                    }
                    Ok(Err(error)) => return std::task::Poll::Ready(Err(error)),
                    Err(_would_block) => continue,
                }
            }
        }

        pub fn poll_write(
            &mut self,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            use std::io::Write as _;
            loop {
                let mut guard = std::task::ready!(self.fd.poll_write_ready(cx))?;
                if let Ok(result) = guard.try_io(|file| file.get_ref().write(buf)) {
                    return std::task::Poll::Ready(result);
                }
            }
        }
    }

    impl Drop for PolledStdio {
        fn drop(&mut self) {
            // SAFETY: F_SETFL on the descriptor this value still owns.
            unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_SETFL, self.original_flags) };
        }
    }

    fn kind_of(file_type: std::fs::FileType) -> EntryKind {
        match () {
            _ if file_type.is_symlink() => EntryKind::Symlink,
            _ if file_type.is_file() => EntryKind::File,
            _ if file_type.is_dir() => EntryKind::Directory,
            _ if file_type.is_fifo() => EntryKind::Fifo,
            _ if file_type.is_socket() => EntryKind::Socket,
            _ => EntryKind::Other,
        }
    }

    fn kind_of_mode(mode: libc::mode_t) -> EntryKind {
        match mode & libc::S_IFMT {
            libc::S_IFLNK => EntryKind::Symlink,
            libc::S_IFREG => EntryKind::File,
            libc::S_IFDIR => EntryKind::Directory,
            libc::S_IFIFO => EntryKind::Fifo,
            libc::S_IFSOCK => EntryKind::Socket,
            _ => EntryKind::Other,
        }
    }

    pub fn file_facts(path: &Path, follow: bool) -> std::io::Result<FileFacts> {
        let metadata = match follow {
            true => std::fs::metadata(path)?,
            false => std::fs::symlink_metadata(path)?,
        };
        Ok(FileFacts {
            kind: kind_of(metadata.file_type()),
            uid: metadata.uid(),
            mode: metadata.mode() & 0o7777,
        })
    }

    fn c_name(name: &OsStr) -> std::io::Result<CString> {
        CString::new(name.as_bytes()).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a name contains a NUL byte",
            )
        })
    }

    /// `Ok(())` for a zero return code, the OS error otherwise.
    fn check(rc: libc::c_int) -> std::io::Result<()> {
        match rc {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    pub struct DirHandle {
        fd: OwnedFd,
    }

    impl DirHandle {
        pub fn open(path: &Path) -> std::io::Result<DirHandle> {
            let file = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
                .open(path)?;
            Ok(DirHandle { fd: file.into() })
        }

        pub fn entry_kind(&self, name: &OsStr) -> std::io::Result<Option<EntryKind>> {
            let name = c_name(name)?;
            let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
            // SAFETY: a valid directory fd, a NUL-terminated name and a buffer of the right type.
            let rc = unsafe {
                libc::fstatat(
                    self.fd.as_raw_fd(),
                    name.as_ptr(),
                    stat.as_mut_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            match check(rc) {
                // SAFETY: fstatat filled the buffer on success.
                Ok(()) => Ok(Some(kind_of_mode(unsafe { stat.assume_init() }.st_mode))),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(error),
            }
        }

        pub fn create_new_private(&self, name: &OsStr) -> std::io::Result<File> {
            let name = c_name(name)?;
            let flags =
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: a valid directory fd and a NUL-terminated name; the mode is a plain integer.
            let fd = unsafe {
                libc::openat(
                    self.fd.as_raw_fd(),
                    name.as_ptr(),
                    flags,
                    0o600 as libc::c_uint,
                )
            };
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: openat returned a fresh descriptor that nothing else owns.
            let file = unsafe { File::from_raw_fd(fd) };
            // The umask may have cleared bits but never adds any; make the mode exact.
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            Ok(file)
        }

        pub fn rename_no_replace(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
            let (from, to) = (c_name(from)?, c_name(to)?);
            let dir = self.fd.as_raw_fd();
            #[cfg(any(target_os = "linux", target_os = "android"))]
            {
                // SAFETY: valid fds and NUL-terminated names; RENAME_NOREPLACE is a plain flag.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        dir,
                        from.as_ptr(),
                        dir,
                        to.as_ptr(),
                        libc::RENAME_NOREPLACE,
                    )
                };
                match rc {
                    0 => return Ok(()),
                    _ => {
                        let error = std::io::Error::last_os_error();
                        match error.raw_os_error() {
                            // The kernel or file system has no exclusive rename: use a link.
                            Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {}
                            _ => return Err(error),
                        }
                    }
                }
            }
            // SAFETY: valid fds and NUL-terminated names; flags 0 never follows a final link.
            let linked = check(unsafe { libc::linkat(dir, from.as_ptr(), dir, to.as_ptr(), 0) });
            match linked {
                Ok(()) => {
                    // SAFETY: as above.
                    let _ = check(unsafe { libc::unlinkat(dir, from.as_ptr(), 0) });
                    Ok(())
                }
                Err(error) => match error.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::EOPNOTSUPP) | Some(libc::EMLINK) => {
                        Err(std::io::Error::new(
                            std::io::ErrorKind::Unsupported,
                            "the file system can neither rename exclusively nor hard-link",
                        ))
                    }
                    _ => Err(error),
                },
            }
        }

        pub fn rename_replace(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
            let (from, to) = (c_name(from)?, c_name(to)?);
            let dir = self.fd.as_raw_fd();
            // SAFETY: valid fds and NUL-terminated names.
            check(unsafe { libc::renameat(dir, from.as_ptr(), dir, to.as_ptr()) })
        }

        pub fn remove_file(&self, name: &OsStr) -> std::io::Result<()> {
            let name = c_name(name)?;
            // SAFETY: a valid fd and a NUL-terminated name; flags 0 removes a non-directory.
            check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) })
        }
    }

    pub fn open_read_nonblocking(path: &Path) -> std::io::Result<File> {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(path)
    }

    pub fn create_new_owner_only(path: &Path) -> std::io::Result<File> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(file)
    }

    pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(file)
    }

    pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
        std::fs::DirBuilder::new().mode(0o700).create(path)
    }

    pub fn is_symlink_loop(error: &std::io::Error) -> bool {
        error.raw_os_error() == Some(libc::ELOOP)
    }

    /// `statfs` magic numbers of the kernel's pseudo file systems (linux/magic.h): proc,
    /// sysfs, debugfs, tracefs, securityfs, cgroup v1 and v2, configfs, efivarfs, bpf, pstore.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const PSEUDO_FS_MAGICS: &[u64] = &[
        0x9fa0,
        0x6265_6572,
        0x6462_6720,
        0x7472_6163,
        0x7363_6673,
        0x0027_e0eb,
        0x6367_7270,
        0x6265_6570,
        0xde5e_81e4,
        0xcafe_4a11,
        0x6165_676c,
    ];

    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn is_pseudo_file(file: &File) -> bool {
        let mut facts = std::mem::MaybeUninit::<libc::statfs>::zeroed();
        // SAFETY: a valid open fd and a buffer of the size fstatfs writes.
        let status = unsafe { libc::fstatfs(file.as_raw_fd(), facts.as_mut_ptr()) };
        if status != 0 {
            return false;
        }
        // SAFETY: fstatfs succeeded, so it filled the buffer.
        let facts = unsafe { facts.assume_init() };
        // `f_type` is signed and of the platform's word size: compare its low 32 bits.
        let magic = facts.f_type as u64 & 0xffff_ffff;
        PSEUDO_FS_MAGICS.contains(&magic)
    }

    /// Elsewhere the /proc of another Unix is not the Linux one; nothing is known as pseudo.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub fn is_pseudo_file(_file: &File) -> bool {
        false
    }

    pub fn is_resource_exhaustion(error: &std::io::Error) -> bool {
        matches!(
            error.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS)
        )
    }

    pub fn pid_is_own_broker(pid: u32, home_root: &Path) -> bool {
        if !cfg!(target_os = "linux") || !pid_alive(pid) {
            return false;
        }
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        let owned = std::fs::metadata(&proc_dir).is_ok_and(|m| m.uid() == effective_uid());
        let nul_separated = |file: &str| std::fs::read(proc_dir.join(file)).unwrap_or_default();
        let is_broker = nul_separated("cmdline")
            .split(|&b| b == 0)
            .any(|arg| arg == b"--browser-pilot-internal=broker");
        let mut wanted = b"BROWSER_PILOT_HOME=".to_vec();
        wanted.extend_from_slice(home_root.as_os_str().as_bytes());
        let for_this_home = nul_separated("environ")
            .split(|&b| b == 0)
            .any(|entry| entry == wanted.as_slice());
        owned && is_broker && for_this_home
    }

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

    pub fn create_owner_only<T>(create: impl FnOnce() -> T) -> T {
        // SAFETY: umask only swaps the process's creation mask and cannot fail.
        let previous = unsafe { libc::umask(0o077) };
        let created = create();
        // SAFETY: as above; puts back the mask read before.
        unsafe { libc::umask(previous) };
        created
    }

    pub fn set_owner_only(path: &Path, is_dir: bool) -> std::io::Result<()> {
        let mode = if is_dir { 0o700 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
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
    use std::ffi::OsStr;
    use std::fs::{File, OpenOptions};
    use std::os::windows::process::CommandExt;
    use std::path::{Path, PathBuf};

    use super::{EntryKind, FileFacts};

    /// Not built on this platform: stdio stays on tokio's blocking pool.
    pub enum PolledStdio {}

    pub fn polled<T>(_stdio: &T) -> Option<PolledStdio> {
        None
    }

    impl PolledStdio {
        pub fn poll_read(
            &mut self,
            _cx: &mut std::task::Context<'_>,
            _buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            match *self {}
        }

        pub fn poll_write(
            &mut self,
            _cx: &mut std::task::Context<'_>,
            _buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            match *self {}
        }
    }

    fn kind_of(file_type: std::fs::FileType) -> EntryKind {
        match () {
            _ if file_type.is_symlink() => EntryKind::Symlink,
            _ if file_type.is_file() => EntryKind::File,
            _ if file_type.is_dir() => EntryKind::Directory,
            _ => EntryKind::Other,
        }
    }

    pub fn file_facts(path: &Path, follow: bool) -> std::io::Result<FileFacts> {
        let metadata = match follow {
            true => std::fs::metadata(path)?,
            false => std::fs::symlink_metadata(path)?,
        };
        // No uid or mode bits: %LOCALAPPDATA% is private to the user already.
        Ok(FileFacts {
            kind: kind_of(metadata.file_type()),
            uid: 0,
            mode: 0o700,
        })
    }

    /// Path-based: Windows has no directory-relative calls in std; names are joined to the
    /// path that was opened.
    pub struct DirHandle {
        path: PathBuf,
    }

    impl DirHandle {
        pub fn open(path: &Path) -> std::io::Result<DirHandle> {
            match std::fs::metadata(path)?.is_dir() {
                true => Ok(DirHandle {
                    path: path.to_owned(),
                }),
                false => Err(std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    "not a directory",
                )),
            }
        }

        pub fn entry_kind(&self, name: &OsStr) -> std::io::Result<Option<EntryKind>> {
            match std::fs::symlink_metadata(self.path.join(name)) {
                Ok(metadata) => Ok(Some(kind_of(metadata.file_type()))),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(error),
            }
        }

        pub fn create_new_private(&self, name: &OsStr) -> std::io::Result<File> {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.path.join(name))
        }

        pub fn rename_no_replace(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
            std::fs::hard_link(self.path.join(from), self.path.join(to))?;
            let _ = std::fs::remove_file(self.path.join(from));
            Ok(())
        }

        pub fn rename_replace(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
            std::fs::rename(self.path.join(from), self.path.join(to))
        }

        pub fn remove_file(&self, name: &OsStr) -> std::io::Result<()> {
            std::fs::remove_file(self.path.join(name))
        }
    }

    pub fn open_read_nonblocking(path: &Path) -> std::io::Result<File> {
        File::open(path)
    }

    pub fn create_new_owner_only(path: &Path) -> std::io::Result<File> {
        OpenOptions::new().write(true).create_new(true).open(path)
    }

    pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    }

    pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
        std::fs::create_dir(path)
    }

    pub fn is_symlink_loop(_error: &std::io::Error) -> bool {
        false
    }

    pub fn is_pseudo_file(_file: &File) -> bool {
        false
    }

    pub fn is_resource_exhaustion(error: &std::io::Error) -> bool {
        error.kind() == std::io::ErrorKind::OutOfMemory
    }

    pub fn pid_is_own_broker(_pid: u32, _home_root: &Path) -> bool {
        // No portable way to read another process's command line and environment here.
        false
    }

    pub fn default_home() -> Option<PathBuf> {
        std::env::var_os("LOCALAPPDATA").map(|p| PathBuf::from(p).join("browser-pilot"))
    }

    pub fn create_owner_only<T>(create: impl FnOnce() -> T) -> T {
        // Named pipes have no mode bits; their security descriptor is the creator's default.
        create()
    }

    pub fn set_owner_only(_path: &Path, _is_dir: bool) -> std::io::Result<()> {
        // %LOCALAPPDATA% is already private to the user; ACL tightening is not implemented.
        Ok(())
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

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_socket_created_owner_only_is_never_looser() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.sock");
        let listener = super::create_owner_only(|| std::os::unix::net::UnixListener::bind(&path))
            .expect("bind");
        let mode = std::fs::metadata(&path)
            .expect("socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "socket mode {mode:o}");
        drop(listener);
    }
}
