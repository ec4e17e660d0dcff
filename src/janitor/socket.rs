//! The WebSocket transport: tungstenite's protocol state machine driven over
//! a non-blocking tokio `TcpStream` by readiness (`try_read`/`try_write` +
//! `ready()`), for `wss://` through a rustls client (ring provider, web-PKI
//! roots plus an entry's CA file), plus the client handshake with the request
//! Chromium accepts (no `Origin` header, loopback `Host`) and raised
//! frame/message limits. It knows nothing about CDP messages, targets or the
//! Broker's pipes.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{
    self, HandshakeError, WebSocket,
    client::IntoClientRequest,
    error::{Error as WsError, ProtocolError},
    protocol::WebSocketConfig,
};

use super::endpoint::{Tls, WsEndpoint};
use crate::cdp::pipe::FailReason;

/// Largest CDP message (and frame) accepted: the pipe's line bound
/// (`cdp::pipe::MAX_LINE_BYTES`, which says why), so every message the
/// janitor accepts fits one pipe line; tungstenite's defaults (16/64 MiB) are
/// too small.
pub const MAX_MESSAGE_BYTES: usize = crate::cdp::pipe::MAX_LINE_BYTES;

/// Errors of connecting to (or talking with) the browser endpoint. `reason`
/// gives the stable word the janitor prints in `{"janitor":"failed"}`.
#[derive(Debug, thiserror::Error)]
pub enum JanitorError {
    #[error("not a loopback ws:// url: {0}")]
    InvalidUrl(String),
    #[error("connection refused")]
    Refused,
    #[error("handshake timed out")]
    Timeout,
    #[error("connection closed during the handshake")]
    Closed,
    #[error("browser answered http {0}")]
    Http(u16),
    #[error("i/o error: {0}")]
    Io(#[source] io::Error),
    #[error("websocket protocol error: {0}")]
    Protocol(String),
    #[error("{0}")]
    Tls(String),
}

impl JanitorError {
    /// The reason the janitor reports in its `failed` line.
    pub fn reason(&self) -> FailReason {
        match self {
            JanitorError::InvalidUrl(_) => FailReason::InvalidUrl,
            JanitorError::Refused => FailReason::Refused,
            JanitorError::Timeout => FailReason::Timeout,
            JanitorError::Closed => FailReason::Closed,
            JanitorError::Http(status) => FailReason::Http(*status),
            JanitorError::Io(_) => FailReason::Io,
            JanitorError::Protocol(_) => FailReason::Protocol,
            JanitorError::Tls(_) => FailReason::Tls,
        }
    }

    pub(super) fn from_ws(error: WsError) -> JanitorError {
        match error {
            WsError::Http(response) => JanitorError::Http(response.status().as_u16()),
            WsError::Io(error) => JanitorError::from_io(error),
            WsError::ConnectionClosed
            | WsError::AlreadyClosed
            | WsError::Protocol(ProtocolError::HandshakeIncomplete)
            | WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
                JanitorError::Closed
            }
            other => JanitorError::Protocol(other.to_string()),
        }
    }

    pub(super) fn from_io(error: io::Error) -> JanitorError {
        if let Some(tls) = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return JanitorError::Tls(tls.to_string());
        }
        match error.kind() {
            io::ErrorKind::ConnectionRefused => JanitorError::Refused,
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => JanitorError::Timeout,
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => JanitorError::Closed,
            _ => JanitorError::Io(error),
        }
    }
}

/// The tungstenite configuration for the browser socket.
pub(super) fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
}

/// `Read`/`Write` over a non-blocking tokio socket: `WouldBlock` is passed
/// through to tungstenite and remembered, so the driver knows which
/// readiness to wait for.
pub(super) struct TryIo {
    stream: Arc<TcpStream>,
    read_blocked: bool,
    write_blocked: bool,
    /// Bytes received so far: the remote link's liveness check watches it move.
    bytes_read: u64,
}

impl TryIo {
    fn new(stream: Arc<TcpStream>) -> TryIo {
        TryIo {
            stream,
            read_blocked: false,
            write_blocked: false,
            bytes_read: 0,
        }
    }

    /// The readiness that unblocks what last returned `WouldBlock`, and
    /// resets the record. Reading is always of interest.
    fn take_interest(&mut self) -> Interest {
        let interest = match self.write_blocked {
            true => Interest::READABLE | Interest::WRITABLE,
            false => Interest::READABLE,
        };
        self.read_blocked = false;
        self.write_blocked = false;
        interest
    }
}

impl Read for TryIo {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let result = self.stream.try_read(buffer);
        match &result {
            Ok(count) => self.bytes_read += *count as u64,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.read_blocked = true,
            Err(_) => {}
        }
        result
    }
}

impl Write for TryIo {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        let result = self.stream.try_write(buffer);
        if matches!(&result, Err(error) if error.kind() == io::ErrorKind::WouldBlock) {
            self.write_blocked = true;
        }
        result
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The byte stream under the WebSocket: the socket itself, or TLS over it.
pub(super) enum Transport {
    Plain(TryIo),
    Tls(Box<TlsIo>),
}

impl Transport {
    /// The socket, whose blocked flags say which readiness to wait for.
    fn io(&mut self) -> &mut TryIo {
        match self {
            Transport::Plain(io) => io,
            Transport::Tls(tls) => &mut tls.io,
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(io) => io.read(buffer),
            Transport::Tls(tls) => tls.read(buffer),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(io) => io.write(buffer),
            Transport::Tls(tls) => tls.write(buffer),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(io) => io.flush(),
            Transport::Tls(tls) => tls.flush(),
        }
    }
}

/// A rustls client session over the non-blocking socket. Reading returns `WouldBlock` only
/// when no decrypted byte is left and the socket has nothing more; writing encrypts at once and
/// sends what the socket takes, and `flush` reports `WouldBlock` while records wait, so the
/// driver's flush-then-wait loop works as over the plain socket. A rustls error (an untrusted
/// certificate) travels inside the `io::Error` and becomes [`JanitorError::Tls`].
pub(super) struct TlsIo {
    session: rustls::ClientConnection,
    io: TryIo,
}

impl TlsIo {
    /// Sends pending TLS records until none is left or the socket would block.
    fn send_records(&mut self) -> io::Result<()> {
        while self.session.wants_write() {
            if self.session.write_tls(&mut self.io)? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }
}

impl Read for TlsIo {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.session.reader().read(buffer) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            // Handshake answers go out before more is read; a full socket is no reason to stop
            // reading (the driver flushes them later).
            match self.send_records() {
                Err(error) if error.kind() != io::ErrorKind::WouldBlock => return Err(error),
                _ => {}
            }
            let received = self.session.read_tls(&mut self.io)?;
            if let Err(error) = self.session.process_new_packets() {
                // The alert rustls queued for the peer, if the socket takes it.
                let _ = self.send_records();
                return Err(io::Error::new(io::ErrorKind::InvalidData, error));
            }
            if received == 0 {
                // End of stream: the reader now says whether it was a clean close.
                return self.session.reader().read(buffer);
            }
        }
    }
}

impl Write for TlsIo {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        // Records still waiting: take nothing more until they are out.
        self.send_records()?;
        let written = self.session.writer().write(buffer)?;
        match self.send_records() {
            Err(error) if error.kind() != io::ErrorKind::WouldBlock => Err(error),
            _ => Ok(written),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.session.writer().flush()?;
        self.send_records()
    }
}

/// The client configuration of a `wss://` endpoint: TLS 1.2 and 1.3 with the ring provider,
/// trusting the web-PKI roots and the certificates of the entry's CA file.
fn tls_session(tls: &Tls) -> Result<rustls::ClientConnection, JanitorError> {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &tls.ca_file {
        let unusable = || JanitorError::Tls("the entry's ca_file holds no usable CA".to_owned());
        let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|_| unusable())?
            .collect::<Result<_, _>>()
            .map_err(|_| unusable())?;
        if roots.add_parsable_certificates(certificates).0 == 0 {
            return Err(unusable());
        }
    }
    // The ring provider (ring is already a dependency; aws-lc-rs would add a C build). rustls
    // deprecates it for lacking post-quantum key exchange, which only aws-lc-rs offers.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| JanitorError::Tls(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from(tls.server_name.clone())
        .map_err(|_| JanitorError::Tls("the endpoint's host is not a valid server name".into()))?;
    rustls::ClientConnection::new(Arc::new(config), name)
        .map_err(|error| JanitorError::Tls(error.to_string()))
}

/// An open browser WebSocket driven by readiness.
pub(super) struct Connection {
    pub(super) ws: WebSocket<Transport>,
    stream: Arc<TcpStream>,
}

impl Connection {
    /// A future that resolves when the socket can make progress on whatever
    /// last blocked (always reading; writing too when a flush is pending).
    /// It does not borrow the connection, so it can sit in a `select!`.
    pub(super) fn readiness(&mut self) -> impl Future<Output = io::Result<()>> + use<> {
        let interest = self.ws.get_mut().io().take_interest();
        let stream = Arc::clone(&self.stream);
        async move { stream.ready(interest).await.map(|_| ()) }
    }

    /// Bytes received from the browser so far (TLS records included).
    pub(super) fn bytes_read(&mut self) -> u64 {
        self.ws.get_mut().io().bytes_read
    }
}

/// Connects and performs the client handshake within `timeout` (minutes in
/// approval mode, where Chromium holds the upgrade until the user answers).
pub(super) async fn connect(
    endpoint: &WsEndpoint,
    timeout: Duration,
) -> Result<Connection, JanitorError> {
    match tokio::time::timeout(timeout, connect_inner(endpoint)).await {
        Ok(result) => result,
        Err(_) => Err(JanitorError::Timeout),
    }
}

/// A new connection to the endpoint: the socket, and the transport over it (TLS for
/// `wss://` and `https://`).
pub(super) async fn open_transport(
    endpoint: &WsEndpoint,
) -> Result<(Arc<TcpStream>, Transport), JanitorError> {
    let stream = match &endpoint.remote {
        Some(authority) => TcpStream::connect(authority.as_str()).await,
        None => TcpStream::connect(endpoint.address).await,
    }
    .map_err(JanitorError::from_io)?;
    let _ = stream.set_nodelay(true);
    let stream = Arc::new(stream);
    let io = TryIo::new(Arc::clone(&stream));
    let transport = match &endpoint.tls {
        Some(tls) => Transport::Tls(Box::new(TlsIo {
            session: tls_session(tls)?,
            io,
        })),
        None => Transport::Plain(io),
    };
    Ok((stream, transport))
}

/// Waits until the socket can make progress on what last blocked the transport.
pub(super) async fn wait_ready(
    stream: &TcpStream,
    transport: &mut Transport,
) -> Result<(), JanitorError> {
    let interest = transport.io().take_interest();
    stream
        .ready(interest)
        .await
        .map(|_| ())
        .map_err(JanitorError::from_io)
}

async fn connect_inner(endpoint: &WsEndpoint) -> Result<Connection, JanitorError> {
    let url = match endpoint.json_version {
        true => super::json_version::resolve(endpoint).await?,
        false => endpoint.url.clone(),
    };
    let (stream, transport) = open_transport(endpoint).await?;
    // tungstenite's request has Host, Upgrade, Connection, Sec-WebSocket-*
    // and no Origin: any Origin gets HTTP 403 from Chromium.
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(JanitorError::from_ws)?;
    for (name, value) in &endpoint.headers {
        let header = |_| JanitorError::Protocol("a configured header cannot be sent".to_owned());
        let name = tungstenite::http::HeaderName::from_bytes(name.as_bytes()).map_err(header)?;
        let value = tungstenite::http::HeaderValue::from_str(value)
            .map_err(|_| JanitorError::Protocol("a configured header cannot be sent".to_owned()))?;
        request.headers_mut().insert(name, value);
    }
    let mut attempt =
        tungstenite::client::client_with_config(request, transport, Some(ws_config()));
    loop {
        match attempt {
            Ok((ws, _response)) => return Ok(Connection { ws, stream }),
            Err(HandshakeError::Failure(error)) => return Err(JanitorError::from_ws(error)),
            Err(HandshakeError::Interrupted(mut mid)) => {
                let io = mid.get_mut().get_mut().io();
                let interest = match (io.read_blocked, io.write_blocked) {
                    (_, true) => Interest::WRITABLE,
                    _ => Interest::READABLE,
                };
                io.read_blocked = false;
                io.write_blocked = false;
                stream
                    .ready(interest)
                    .await
                    .map_err(JanitorError::from_io)?;
                attempt = mid.handshake();
            }
        }
    }
}
