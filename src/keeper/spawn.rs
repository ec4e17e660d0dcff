//! Starting Chromium with its CDP pipe: `--remote-debugging-pipe` makes it read CDP from fd 3
//! and write to fd 4 and open no debugging port. The keeper's ends of the two pipes come back as
//! tokio pipe halves; every other descriptor of the keeper (its socket included) is close-on-exec
//! and never reaches the browser. Unix only: elsewhere the keeper cannot start a browser.

use std::ffi::OsString;
use std::io;
use std::path::Path;

/// The flag that gives the browser its pipe instead of a port.
pub(super) const PIPE_FLAG: &str = "--remote-debugging-pipe";

/// A started browser and the keeper's ends of its pipe.
pub(super) struct Started {
    pub(super) child: tokio::process::Child,
    /// Into the browser (its fd 3).
    pub(super) input: tokio::net::unix::pipe::Sender,
    /// Out of the browser (its fd 4).
    pub(super) output: tokio::net::unix::pipe::Receiver,
    /// The browser's diagnostics, which the keeper must read for the browser's whole life.
    pub(super) stderr: tokio::process::ChildStderr,
}

/// The arguments the browser gets: the pipe flag, then `args` without any
/// `--remote-debugging-port`/`--remote-debugging-address` (a managed browser never listens).
pub(super) fn browser_args(args: &[OsString]) -> Vec<OsString> {
    let mut out = vec![OsString::from(PIPE_FLAG)];
    out.extend(
        args.iter()
            .filter(|arg| {
                let text = arg.to_string_lossy();
                !text.starts_with("--remote-debugging-port")
                    && !text.starts_with("--remote-debugging-address")
                    && text != PIPE_FLAG
            })
            .cloned(),
    );
    out
}

#[cfg(unix)]
pub(super) fn start(executable: &Path, args: &[OsString]) -> io::Result<Started> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// A close-on-exec copy of `fd` numbered 10 or above, so that placing the browser's ends
    /// on 3 and 4 can never overwrite one with the other.
    fn high_cloexec(fd: libc::c_int) -> io::Result<OwnedFd> {
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new descriptor or -1.
        let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
        if copy < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `copy` is a fresh descriptor owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(copy) })
    }

    fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe writes.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe returned two fresh descriptors; owning them closes them on every path.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok((
            high_cloexec(read.as_raw_fd())?,
            high_cloexec(write.as_raw_fd())?,
        ))
    }

    let (browser_reads, keeper_writes) = pipe()?;
    let (keeper_reads, browser_writes) = pipe()?;
    let (into_browser, out_of_browser) = (browser_reads.as_raw_fd(), browser_writes.as_raw_fd());
    let mut command = tokio::process::Command::new(executable);
    command
        .args(browser_args(args))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(false);
    // SAFETY: between fork and exec only dup2 runs, which is async-signal-safe; the new
    // descriptors 3 and 4 are not close-on-exec, the sources (10 and up) are.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(into_browser, 3) < 0 || libc::dup2(out_of_browser, 4) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    // The browser's ends live on in the browser only.
    drop((browser_reads, browser_writes));
    let stderr = child.stderr.take().expect("stderr was piped");
    Ok(Started {
        child,
        stderr,
        input: tokio::net::unix::pipe::Sender::from_owned_fd(keeper_writes)?,
        output: tokio::net::unix::pipe::Receiver::from_owned_fd(keeper_reads)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_browser_gets_the_pipe_and_never_a_port() {
        let args: Vec<OsString> = [
            "--remote-debugging-port=9222",
            "--headless",
            "--remote-debugging-address=0.0.0.0",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let got: Vec<String> = browser_args(&args)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            got,
            ["--remote-debugging-pipe", "--headless", "about:blank"]
        );
    }
}
