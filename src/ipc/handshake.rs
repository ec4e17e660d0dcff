//! The client side of the private handshake on the Broker link, shared by the bridge and `bp`:
//! this executable's `Hello`, connecting (retrying, if asked, a Broker whose accept queue is
//! full), sending the Hello and reading and decoding the one reply line. It maps nothing to a
//! user-facing error (each caller keeps its own: the bridge's `RpcError` with remediation, bp's
//! `CliError`), judges no link version (the caller decides what a `Welcome` of another version
//! means) and never starts a Broker.

use std::path::Path;
use std::time::Duration;

use super::socket::{ConnectError, IpcReader, IpcWriter, connect};
use crate::framing::{self, LineReader};
use crate::protocol::internal::{Hello, HelloReply, PeerRole, Refusal, Welcome};
use crate::version::{EXECUTABLE_VERSION, IPC_VERSION, installation_id};

/// How often a patient client retries a Broker whose accept queue is full.
const BUSY_RETRY: Duration = Duration::from_millis(10);

/// This process's `Hello` in `role`.
pub fn hello(role: PeerRole, browser_preference: Option<String>) -> Hello {
    Hello {
        ipc: IPC_VERSION,
        role,
        executable_version: EXECUTABLE_VERSION.to_owned(),
        installation_id: installation_id(),
        pid: std::process::id(),
        browser_preference,
    }
}

/// How long a client waits, and for what.
#[derive(Debug, Clone, Copy, Default)]
pub struct Patience {
    /// How long a full accept queue is retried (a stalled or briefly saturated Broker is busy,
    /// not missing); zero tries once.
    pub busy_for: Duration,
    /// How long the Broker may take to answer the Hello; `None` waits for it.
    pub answer_within: Option<Duration>,
}

/// A connection whose Hello the Broker welcomed.
pub struct Linked {
    pub reader: LineReader<IpcReader>,
    pub writer: IpcWriter,
    pub welcome: Welcome,
}

/// Why there is no welcomed connection.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error(transparent)]
    Connect(ConnectError),
    /// Sending the Hello or reading the reply failed.
    #[error("{0}")]
    Io(String),
    /// The Broker closed the connection without answering.
    #[error("the Broker closed the connection without answering")]
    Closed,
    /// No answer within `Patience::answer_within`.
    #[error("the Broker did not answer the handshake in time")]
    Silent,
    /// The Broker answered with a refusal.
    #[error("the Broker refused the connection")]
    Refused(Refusal),
    /// The answer is not a handshake reply this executable reads.
    #[error("{0}")]
    Garbled(String),
}

/// Connects to `socket`, retrying `ConnectError::Busy` for `busy_for`.
pub async fn connect_patiently(
    socket: &Path,
    busy_for: Duration,
) -> Result<(IpcReader, IpcWriter), ConnectError> {
    let busy_until = tokio::time::Instant::now() + busy_for;
    loop {
        match connect(socket).await {
            Err(ConnectError::Busy(_)) if tokio::time::Instant::now() < busy_until => {
                tokio::time::sleep(BUSY_RETRY).await;
            }
            other => return other,
        }
    }
}

/// Connects to the Broker endpoint at `socket`, sends `hello` and reads the reply; lines from
/// the Broker are at most `max_line_bytes` long.
pub async fn handshake(
    socket: &Path,
    hello: &Hello,
    max_line_bytes: usize,
    patience: Patience,
) -> Result<Linked, HandshakeError> {
    let (reader, mut writer) = connect_patiently(socket, patience.busy_for)
        .await
        .map_err(HandshakeError::Connect)?;
    let mut reader = LineReader::new(reader, max_line_bytes);
    let line = serde_json::to_string(hello).expect("hello serializes");
    let exchange = async {
        framing::write_line(&mut writer, &line)
            .await
            .map_err(|e| HandshakeError::Io(e.to_string()))?;
        reader
            .next_line()
            .await
            .map_err(|e| HandshakeError::Io(e.to_string()))?
            .ok_or(HandshakeError::Closed)
    };
    let reply = match patience.answer_within {
        Some(limit) => tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| HandshakeError::Silent)??,
        None => exchange.await?,
    };
    match serde_json::from_slice::<HelloReply>(&reply) {
        Ok(HelloReply::Welcome(welcome)) => Ok(Linked {
            reader,
            writer,
            welcome,
        }),
        Ok(HelloReply::Refused(refusal)) => Err(HandshakeError::Refused(refusal)),
        Err(error) => Err(HandshakeError::Garbled(error.to_string())),
    }
}
