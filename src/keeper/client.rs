//! The client side of the keeper socket. `attach` (the janitor) connects through
//! `ipc::connect`, which refuses a socket file or a listening peer of another user before
//! anything is sent, says `attach` and waits for `attached`; `close` (`browser stop`) says
//! `close` and waits for `closed`; `probe` (discovery) only connects, checks the peer and
//! hangs up, so it never disturbs an attached client. `close` and `probe` are blocking.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use interprocess::local_socket::traits::{Stream as _, StreamCommon as _};
use interprocess::local_socket::{GenericFilePath, Stream, ToFsName};
use tokio::io::AsyncWriteExt;

use super::line::KeeperLine;
use crate::cdp::pipe::MAX_LINE_BYTES;
use crate::framing::LineReader;
use crate::ipc::{self, IpcReader, IpcWriter};

/// Why the keeper could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeeperError {
    /// No keeper listens there (the managed browser is not running).
    #[error("no keeper listens: {0}")]
    NotRunning(String),
    /// The keeper serves another client.
    #[error("the keeper serves another client")]
    Busy,
    /// The keeper closed the connection before answering.
    #[error("the keeper closed the connection")]
    Closed,
    #[error("the keeper did not answer within {0} s")]
    Timeout(u64),
    #[error("keeper i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// Connects as the keeper's CDP client. On success every later line either way is one CDP
/// message, as if the browser connection were the caller's alone.
pub async fn attach(
    socket: &Path,
    timeout: Duration,
) -> Result<(LineReader<IpcReader>, IpcWriter), KeeperError> {
    let (reader, mut writer) = ipc::connect(socket)
        .await
        .map_err(|error| KeeperError::NotRunning(error.to_string()))?;
    let hello = format!("{}\n", KeeperLine::Attach.to_line());
    writer.write_all(hello.as_bytes()).await?;
    writer.flush().await?;
    let mut lines = LineReader::new(reader, MAX_LINE_BYTES);
    let answer = tokio::time::timeout(timeout, lines.next_line())
        .await
        .map_err(|_| KeeperError::Timeout(timeout.as_secs()))?;
    match answer {
        Ok(Some(line)) => match KeeperLine::from_line(&line) {
            Some(KeeperLine::Attached) => Ok((lines, writer)),
            Some(KeeperLine::Busy) => Err(KeeperError::Busy),
            _ => Err(KeeperError::Closed),
        },
        Ok(None) => Err(KeeperError::Closed),
        Err(error) => Err(KeeperError::Io(std::io::Error::other(error.to_string()))),
    }
}

/// Asks the keeper to close its browser and waits (at most `timeout`) until the browser has
/// exited. `Ok(false)` when no keeper listens.
pub fn close(socket: &Path, timeout: Duration) -> Result<bool, KeeperError> {
    let Some(stream) = connect_own(socket) else {
        return Ok(false);
    };
    let started = Instant::now();
    stream.set_send_timeout(Some(timeout))?;
    let mut stream = stream;
    stream.write_all(format!("{}\n", KeeperLine::Close.to_line()).as_bytes())?;
    stream.flush()?;
    let mut reader = BufReader::new(stream);
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(KeeperError::Timeout(timeout.as_secs()));
        }
        reader.get_ref().set_recv_timeout(Some(left))?;
        let mut line = Vec::new();
        match reader.by_ref().take(4096).read_until(b'\n', &mut line) {
            // The keeper exits right after `closed`; an end without it is the same exit.
            Ok(0) => return Ok(true),
            Ok(_) if KeeperLine::from_line(line.trim_ascii()) == Some(KeeperLine::Closed) => {
                return Ok(true);
            }
            Ok(_) => continue,
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(KeeperError::Timeout(timeout.as_secs()));
            }
            Err(error) => return Err(KeeperError::Io(error)),
        }
    }
}

/// Whether a keeper of this user listens on `socket`. Connects and hangs up at once.
pub fn probe(socket: &Path) -> bool {
    connect_own(socket).is_some()
}

/// A blocking connection to `socket` when the socket file and the listening peer are this
/// user's (the same checks as `ipc::connect`).
fn connect_own(socket: &Path) -> Option<Stream> {
    let own = crate::os::effective_uid();
    if cfg!(unix) {
        match crate::os::file_facts(socket, false) {
            Ok(facts) if facts.uid == own => {}
            _ => return None,
        }
    }
    let name = socket.to_fs_name::<GenericFilePath>().ok()?;
    let stream = Stream::connect(name).ok()?;
    if cfg!(unix) {
        match stream.peer_creds().map(|creds| creds.euid()) {
            Ok(Some(uid)) if uid == own => {}
            _ => return None,
        }
    }
    Some(stream)
}
