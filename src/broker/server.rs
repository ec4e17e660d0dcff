//! The Broker's entry point: bind the endpoint, write the locator, accept Connections, sweep,
//! and clean up on exit.

use std::sync::Arc;

use tokio::sync::watch;

use super::commands::RunningCommands;
use super::state::Broker;
use super::{connection, locator, sweep};
use crate::artifacts::{ArtifactLimits, Artifacts};
use crate::events::{EventSink, Generations, Hub};
use crate::home::Home;
use crate::ipc;
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::protocol::ids::{IdKind, new_id};
use crate::session::BrowserService;
use crate::store::{Store, StoreLimits};
use crate::tools::ToolEnv;
use crate::version::{installation_id, now_ms};

/// Live local peers the Broker serves at once, from accept until the peer closes (handshake
/// pending included). Far above what hosts of one user run (a bridge or `bp` is one each), and
/// far below the usual open-file limit of 1,024, so the Broker keeps descriptors for the janitor,
/// Chromium's pipes and Artifact files. The next peer is refused with `too_many_connections`.
pub const MAX_LIVE_CONNECTIONS: usize = 256;

/// After a failed accept (at the open-file limit `accept` fails at once, again and again), the
/// loop waits this long instead of spinning.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

/// Once it stops accepting, how long the Broker waits for its live Connections to end (to write
/// what they owe and see their peers close) before it exits anyway. `bp disconnect` reads the
/// answer to its `broker/shutdown` and closes at once; exiting without this wait could drop
/// that answer.
const SHUTDOWN_FLUSH_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// Runs the Broker until `bp disconnect`, SIGTERM/SIGINT, or loss of its endpoint file.
pub async fn run_broker(home: Home) -> i32 {
    if let Err(error) = home.ensure() {
        tracing::error!(%error, "cannot prepare the home directory");
        return 1;
    }
    let socket = home.socket_path();
    if socket.exists() {
        match ipc::connect(&socket).await {
            Ok(_) => {
                tracing::error!("another Broker already listens on this home; exiting");
                return 1;
            }
            // Out of descriptors, memory or disk: whether a Broker listens is unknown, so its
            // endpoint is left alone.
            Err(ipc::ConnectError::Exhausted(error)) => {
                tracing::error!(%error, "out of resources to check the endpoint; exiting");
                return 1;
            }
            Err(_) => {
                let _ = std::fs::remove_file(&socket);
            }
        }
    }
    let listener = match ipc::listen(&socket) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "cannot bind the Broker endpoint");
            return 1;
        }
    };
    let store = match Store::open(store_limits_from_env()) {
        Ok(store) => store,
        Err(error) => {
            tracing::error!(%error, "cannot open the in-memory store");
            return 1;
        }
    };
    let (shutdown_tx, mut shutdown_rx) = watch::channel(false);
    let generations = Arc::new(Generations::default());
    let events = EventSink::new(store.clone(), Arc::new(Hub::default()), generations.clone());
    let browser = BrowserService::new(home.clone(), store.clone(), events.clone(), generations);
    // Artifact metadata lives in the in-memory store, so bytes left by a killed predecessor
    // are unreachable: start from an empty artifacts directory.
    let artifacts = Artifacts::new(&home, store.clone(), ArtifactLimits::from_env());
    if let Err(error) = artifacts.purge_all() {
        tracing::error!(%error, "cannot prepare artifact storage");
        return 1;
    }
    browser.attach_artifacts(artifacts.clone());
    let tools = ToolEnv {
        home: home.clone(),
        store: store.clone(),
        events: events.clone(),
        browser,
        artifacts,
    };
    let broker = Arc::new(Broker {
        home: home.clone(),
        store,
        broker_id: new_id(IdKind::Broker),
        installation_id: installation_id(),
        started_at: now_ms(),
        events,
        tools,
        running: RunningCommands::default(),
        endpoint_identity: crate::os::file_identity(&socket),
        shutdown: shutdown_tx,
    });
    if let Err(error) = locator::write_locator(
        &home,
        &broker.broker_id,
        &broker.installation_id,
        broker.started_at,
    )
    .and_then(|()| locator::record_version(&home, &broker.installation_id, broker.started_at))
    {
        tracing::error!(%error, "cannot write the locator");
        let _ = std::fs::remove_file(&socket);
        return 1;
    }
    tracing::info!(broker = %broker.broker_id, "broker listening");
    std::thread::spawn(super::commands::warm_tools_list);
    let sweeper = tokio::spawn(sweep::run(broker.clone()));
    let mut terminate = crate::os::termination_signals();
    let live = Arc::new(tokio::sync::Semaphore::new(MAX_LIVE_CONNECTIONS));
    loop {
        tokio::select! {
            _ = shutdown_rx.changed() => break,
            _ = terminate.recv() => break,
            accepted = listener.accept() => match accepted {
                Ok((reader, writer)) => match live.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let broker = broker.clone();
                        tokio::spawn(async move {
                            connection::serve(broker, reader, writer).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        tracing::warn!(max = MAX_LIVE_CONNECTIONS, "too many live Connections; refusing a peer");
                        tokio::spawn(connection::refuse(reader, writer, too_many_connections()));
                    }
                },
                Err(error) => {
                    tracing::warn!(%error, "accept failed; backing off");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    broker.request_shutdown();
    let every_permit = MAX_LIVE_CONNECTIONS as u32;
    let _ = tokio::time::timeout(SHUTDOWN_FLUSH_GRACE, live.acquire_many(every_permit)).await;
    let _ = sweeper.await;
    if let Err(error) = broker.tools.artifacts.purge_all() {
        tracing::error!(%error, "cannot remove artifact bytes at exit");
    }
    locator::remove_locator(&home, &broker.broker_id);
    // Only our own endpoint: a Broker that lost its socket file to a successor must not delete
    // the successor's.
    if crate::os::file_identity(&socket).is_some_and(|id| Some(id) == broker.endpoint_identity) {
        let _ = std::fs::remove_file(&socket);
    }
    tracing::info!("broker stopped");
    0
}

fn too_many_connections() -> RpcError {
    RpcError::new(
        ErrorCode::TooManyConnections,
        format!("the Broker already serves {MAX_LIVE_CONNECTIONS} live Connections"),
    )
    .with_context("maxConnections", serde_json::json!(MAX_LIVE_CONNECTIONS))
}

/// Smallest and largest `BROWSER_PILOT_EVENT_JOURNAL_SIZE` an operator may set: below 16 a
/// single action's events could not be replayed; above a million a journal holds too much memory.
const JOURNAL_SIZE_RANGE: std::ops::RangeInclusive<u32> = 16..=1_000_000;

/// Service resource limits; `BROWSER_PILOT_EVENT_JOURNAL_SIZE` overrides the per-Workspace
/// journal size (reported to hosts as `eventJournalSize`).
fn store_limits_from_env() -> StoreLimits {
    let mut limits = StoreLimits::default();
    if let Some(size) = std::env::var("BROWSER_PILOT_EVENT_JOURNAL_SIZE")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        limits.event_journal_size =
            size.clamp(*JOURNAL_SIZE_RANGE.start(), *JOURNAL_SIZE_RANGE.end());
    }
    limits
}
