//! Binding, accepting and connecting the Broker endpoint, and authenticating it: a client
//! connects only to an endpoint file of its own user whose listening peer is its own user.
//! Moves bytes; knows no message semantics.

use std::path::Path;

use std::pin::Pin;
#[cfg(not(unix))]
use std::sync::Arc;
use std::task::{Context, Poll};

use interprocess::local_socket::tokio::{Listener, Stream};
use interprocess::local_socket::traits::StreamCommon as _;
use interprocess::local_socket::traits::tokio::{Listener as _, Stream as _};
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use tokio::io::{AsyncRead, AsyncWrite, BufReader, ReadBuf};

use crate::os;

/// The reading side of a connection. On Unix it is the socket's own read half, whose reads
/// take a short read as the end of what is buffered, so reading a line costs one `recv` and
/// not a second one that finds nothing (the crate's generic stream type reads until `EAGAIN`).
/// The socket closes when both sides are dropped: a local socket has no reliable half-close
/// across platforms, so end-of-input is signalled in-band by the peer instead.
pub struct IpcRead(ReadSide);

/// The writing side of a connection. Dropping it leaves the socket open for the reading side
/// (see [`IpcRead`]); `shutdown` ends the writing direction.
pub struct IpcWriter(Option<WriteSide>);

pub type IpcReader = BufReader<IpcRead>;

#[cfg(unix)]
type ReadSide = tokio::net::unix::OwnedReadHalf;
#[cfg(unix)]
type WriteSide = tokio::net::unix::OwnedWriteHalf;

#[cfg(not(unix))]
type ReadSide = Arc<Stream>;
#[cfg(not(unix))]
type WriteSide = Arc<Stream>;

impl AsyncRead for IpcRead {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        #[cfg(unix)]
        let side = Pin::new(&mut self.0);
        #[cfg(not(unix))]
        let side = Pin::new(&mut &*self.0);
        side.poll_read(cx, buf)
    }
}

impl IpcWriter {
    fn side(&mut self) -> std::io::Result<&mut WriteSide> {
        self.0
            .as_mut()
            .ok_or_else(|| std::io::ErrorKind::NotConnected.into())
    }
}

#[cfg(unix)]
impl Drop for IpcWriter {
    fn drop(&mut self) {
        // Without this the write half would shut down its direction on drop.
        if let Some(side) = self.0.take() {
            side.forget();
        }
    }
}

#[cfg(unix)]
impl AsyncWrite for IpcWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(self.side()?).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(self.side()?).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(self.side()?).poll_shutdown(cx)
    }
}

#[cfg(not(unix))]
impl AsyncWrite for IpcWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut &**self.side()?).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut &**self.side()?).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut &**self.side()?).poll_shutdown(cx)
    }
}

#[cfg(unix)]
fn halves(stream: Stream) -> (IpcReader, IpcWriter) {
    let Stream::UdSocket(stream) = stream;
    let (read, write) = tokio::net::UnixStream::from(stream).into_split();
    (BufReader::new(IpcRead(read)), IpcWriter(Some(write)))
}

#[cfg(not(unix))]
fn halves(stream: Stream) -> (IpcReader, IpcWriter) {
    let shared = Arc::new(stream);
    (
        BufReader::new(IpcRead(shared.clone())),
        IpcWriter(Some(shared)),
    )
}

/// Why a client did not get a connection to the Broker endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing usable listens there (no file, a stale file, connection refused).
    #[error("no endpoint: {0}")]
    NoEndpoint(std::io::Error),
    /// Something listens, but its queue of connections waiting to be accepted is full (a
    /// stalled or briefly saturated Broker): try again shortly.
    #[error("the endpoint's accept queue is full: {0}")]
    Busy(std::io::Error),
    /// Something listens, but it is not this user's: nothing was sent to it.
    #[error("the endpoint is not this user's: {0}")]
    Untrusted(Untrusted),
    /// This process (or the system) ran out of what a connection needs: open files
    /// (`EMFILE`, `ENFILE`), memory (`ENOMEM`, `ENOBUFS`) or disk space (`ENOSPC`). The
    /// endpoint was never reached, so nothing is known about a Broker there.
    #[error("out of resources: {0}")]
    Exhausted(std::io::Error),
}

/// Which resource ran out, when `error` says this process or the system is out of one.
pub fn exhausted_resource(error: &std::io::Error) -> Option<Resource> {
    if error.kind() == std::io::ErrorKind::StorageFull {
        return Some(Resource::Disk);
    }
    if !os::is_resource_exhaustion(error) {
        return None;
    }
    match error.kind() {
        std::io::ErrorKind::OutOfMemory => Some(Resource::Memory),
        _ => Some(Resource::OpenFiles),
    }
}

/// A resource a connection needs (see [`ConnectError::Exhausted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    OpenFiles,
    Memory,
    Disk,
}

/// How an endpoint failed authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Untrusted {
    /// The endpoint file belongs to another uid.
    #[error("the endpoint file belongs to uid {owner}")]
    FileOwner { owner: u32 },
    /// The process listening on the endpoint runs as another uid.
    #[error("the listening process runs as uid {peer}")]
    PeerUid { peer: u32 },
}

impl Untrusted {
    /// A stable snake_case word for `context.reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Untrusted::FileOwner { .. } => "endpoint_owner",
            Untrusted::PeerUid { .. } => "peer_uid",
        }
    }
}

/// Connects to the Broker endpoint at `path` after checking that the endpoint file is this
/// user's, then checks the listening peer's credentials (`SO_PEERCRED` / `getpeereid`) before
/// returning, so the caller never sends a byte to a listener of another user.
pub async fn connect(path: &Path) -> Result<(IpcReader, IpcWriter), ConnectError> {
    let own = os::effective_uid();
    if cfg!(unix) {
        match os::file_facts(path, false) {
            Ok(facts) if facts.uid != own => {
                return Err(ConnectError::Untrusted(Untrusted::FileOwner {
                    owner: facts.uid,
                }));
            }
            Ok(_) => {}
            Err(error) if exhausted_resource(&error).is_some() => {
                return Err(ConnectError::Exhausted(error));
            }
            Err(error) => return Err(ConnectError::NoEndpoint(error)),
        }
    }
    let name = path
        .to_fs_name::<GenericFilePath>()
        .map_err(ConnectError::NoEndpoint)?;
    let stream = Stream::connect(name).await.map_err(|error| {
        match error.kind() {
            // A Unix socket whose backlog is full refuses a non-blocking connect with EAGAIN.
            std::io::ErrorKind::WouldBlock => ConnectError::Busy(error),
            // No socket could be made: says nothing about the endpoint.
            _ if exhausted_resource(&error).is_some() => ConnectError::Exhausted(error),
            _ => ConnectError::NoEndpoint(error),
        }
    })?;
    if cfg!(unix) {
        match stream.peer_creds().map(|c| c.euid()) {
            Ok(Some(uid)) if uid == own => {}
            Ok(Some(peer)) => return Err(ConnectError::Untrusted(Untrusted::PeerUid { peer })),
            // A connected Unix socket always has its listener's credentials. interprocess takes
            // a full accept queue's EAGAIN for a connect in progress and hands back a socket that
            // never connected, whose credentials read as nobody's: a busy endpoint, not a
            // foreign one. Nothing is sent to it either way.
            Ok(None) => {
                return Err(ConnectError::Busy(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the connection was not accepted",
                )));
            }
            Err(error) => return Err(ConnectError::Busy(error)),
        }
    }
    Ok(halves(stream))
}

/// A bound Broker endpoint that admits only peers of the same effective user.
pub struct IpcListener {
    listener: Listener,
}

/// Binds the endpoint with an owner-only socket file (created so, never loosened first: a peer
/// may connect, and a test may look, the moment it exists). The caller (the Broker, under the
/// startup lock) has already removed any stale file.
pub fn listen(path: &Path) -> std::io::Result<IpcListener> {
    let name = path.to_fs_name::<GenericFilePath>()?;
    let listener = os::create_owner_only(|| {
        ListenerOptions::new()
            .name(name)
            .reclaim_name(false)
            .create_tokio()
    })?;
    if cfg!(unix) {
        os::set_owner_only(path, false)?;
    }
    Ok(IpcListener { listener })
}

impl IpcListener {
    /// The next peer of the same user. Peers of other users (possible only when the directory
    /// permissions were loosened by hand) are dropped and logged.
    pub async fn accept(&self) -> std::io::Result<(IpcReader, IpcWriter)> {
        loop {
            let stream = self.listener.accept().await?;
            if cfg!(unix) {
                let own = os::effective_uid();
                match stream.peer_creds().map(|c| c.euid()) {
                    Ok(Some(uid)) if uid == own => {}
                    Ok(peer) => {
                        tracing::warn!(?peer, own, "refusing a local peer of another user");
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot read local peer credentials; refusing");
                        continue;
                    }
                }
            }
            return Ok(halves(stream));
        }
    }
}
