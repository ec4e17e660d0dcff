//! Connecting to browsers through janitors, the connection generations, and access to tabs.
//! The service holds several live connections at once (`Live`), keyed by what they reach
//! (`ConnKey`: a candidate, and for a `per_workspace` remote entry the one Workspace its session
//! serves); each has its own generation and owns what it knows of its tabs (`pump::Tabs`),
//! replaced with it. Every Workspace is on at most one connection (`Seat`): its events,
//! Commands and fencing use that connection's generation, and one connection's loss is
//! announced only to the Workspaces on it. A `[[pool]]` candidate places a Workspace on the
//! entry with the most free capacity (`max_sessions`); a full entry or pool is `browser_busy`.
//!
//! The service also keeps its own record of which targets it created (or adopted as popups) for
//! which Workspace, outside the registry, so that it survives a lost connection. A janitor that
//! dies leaves those tabs open in the browser; on the next connection they are re-adopted as
//! their Workspace's managed tabs (and handed to the new janitor's cleanup) or, when their
//! Workspace is gone, closed by the Broker itself. They are never listed as user tabs to anyone
//! (docs/security.md, "Janitor death").

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::pump;
use super::registry::{Controller, Registry, TabView, TargetError};
use super::tab::TabHandle;
use crate::browser::{self, AuthorizationState, Candidate, DiscoveryConfig};
use crate::cdp::pipe::{self, FailReason, JanitorLine};
use crate::cdp::{BrowserContextId, CdpClient, TargetId};
use crate::events::{Emit, EventSink, Generations};
use crate::framing::{FramingError, LineReader};
use crate::home::Home;
use crate::store::{LeaseId, Store, TargetRef, WorkspaceId};
use crate::version::now_ms;

/// Lines buffered between the CDP client and the janitor's pipes, each way.
const JANITOR_PIPE_QUEUE: usize = 1024;

/// Upper bound for the janitor's WebSocket handshake. Chrome's approval prompt may keep it open
/// while the user decides; the Command deadline usually ends the wait sooner.
const JANITOR_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(180);

/// Distinct browser preferences whose choice the Broker keeps; a preference beyond it is chosen
/// afresh on every call.
const MAX_RETAINED_CHOICES: usize = 64;

/// Timeout of the inventory call right after connecting.
const INVENTORY_TIMEOUT: Duration = Duration::from_secs(10);

/// Targets the service remembers creating, over all Workspaces: the janitor's own bound. A
/// target beyond it is still managed while the connection lives, but is not recovered after a
/// janitor death.
const MAX_OWNED_TARGETS: usize = 4096;

/// Timeout of closing one orphaned managed tab after a reconnect.
const ORPHAN_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A target the Broker created (or adopted as a popup) for a Workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    /// The connection it was created on (a new connection with the same key may find it).
    key: ConnKey,
    workspace_id: String,
    /// The Workspace was released while no connection could close the tab: close it on the
    /// next connection.
    released: bool,
    /// It is the launched browser's start tab (`start_tab`): a blank tab takes its place when
    /// it closes.
    start: bool,
}

/// Sessions an entry without `max_sessions` takes before it counts as full (the config's own
/// upper bound of `max_sessions`).
const UNBOUNDED_SESSIONS: usize = 1024;

/// What a browser connection is keyed by: the candidate it reaches (for a `[[pool]]`, the
/// entry the Workspace was placed on), and for a `per_workspace` remote entry the one Workspace
/// its session serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConnKey {
    pub browser_id: String,
    pub workspace_id: Option<String>,
}

/// The connection a Workspace is on, and the candidate it asked for (a pool's id, or the
/// entry's own).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seat {
    key: ConnKey,
    asked: String,
}

/// What `browser.connect` achieved.
#[derive(Debug, Clone)]
pub struct Connected {
    pub browser_id: String,
    pub generation: u64,
    /// True when an existing connection to that browser was reused.
    pub reused: bool,
    /// True when this connection replaced a lost one (`connection.restored` was emitted).
    pub restored: bool,
}

/// Why `browser.connect` failed; the tools map each to an error code with remediation.
#[derive(Debug, Clone)]
pub enum ConnectError {
    UnknownBrowser(String),
    /// The candidate has no live debugging endpoint; carries its remediation JSON.
    NotReady {
        remediation: Option<Value>,
    },
    /// The entry (or every entry of the pool) is at its `max_sessions`.
    Busy {
        browser_id: String,
        capacity: usize,
        in_use: usize,
    },
    AuthorizationDenied(String),
    AuthorizationTimeout,
    Failed(String),
    /// A remote candidate whose entry in `remote-browsers.toml` has diagnostics.
    RemoteConfig {
        browser_id: String,
        message: String,
    },
    /// A remote browser answered the WebSocket upgrade with an HTTP error (a wrong token).
    RemoteRefused {
        browser_id: String,
        status: u16,
    },
    /// The TLS handshake with a `wss://` remote browser failed (its certificate is not trusted).
    RemoteTls {
        browser_id: String,
        message: String,
    },
}

/// A failed connection attempt, numbered by `Inner::attempts_ended`.
struct Failure {
    ended: u64,
    error: ConnectError,
}

/// A live connection: the CDP client over its janitor and its generation.
#[derive(Clone)]
pub struct Live {
    pub key: ConnKey,
    pub browser_id: String,
    pub client: CdpClient,
    pub generation: u64,
    /// The janitor's stdin, for its private control lines (`{"janitor":"adopt",..}`).
    janitor: mpsc::Sender<String>,
    /// What this connection knows of its tabs (`pump::Tabs`): each connection owns its own, so
    /// ids and books end with it.
    tabs: Arc<Mutex<pump::Tabs>>,
    /// The browser contexts of isolated Workspaces made on this connection; they end with it.
    contexts: Arc<super::contexts::Contexts>,
    /// Whether tabs the Broker did not create are eligible (listed, controllable): always on a
    /// local browser; on a remote one only when its entry sets `list_foreign_tabs`.
    foreign_tabs: bool,
    /// The launched browser's start tab, until a Workspace's first managed navigation claims
    /// it (`start_tab`); never set on a browser the Broker attached to.
    pub(super) start_tab: Arc<super::start_tab::StartTab>,
}

impl Live {
    /// Sends a private control line to the janitor.
    pub(super) async fn janitor_send(
        &self,
        line: String,
    ) -> Result<(), mpsc::error::SendError<String>> {
        self.janitor.send(line).await
    }

    /// Runs `f` on this connection's tabs.
    pub(super) fn with_tabs<T>(&self, f: impl FnOnce(&mut pump::Tabs) -> T) -> T {
        f(&mut self.tabs.lock().expect("tabs lock"))
    }
}

struct Inner {
    /// Tells waiting actions that a dialog opened on a tab.
    dialog_opened: tokio::sync::broadcast::Sender<TargetId>,
    home: Home,
    store: Store,
    events: EventSink,
    generations: Arc<Generations>,
    /// Serializes connects per key so concurrent `browser.connect` calls share one attempt.
    connect_locks: Mutex<HashMap<ConnKey, Arc<tokio::sync::Mutex<()>>>>,
    /// Connection attempts that ran to an outcome, and per key the last one that failed:
    /// shared with the callers that waited for it.
    attempts_ended: AtomicU64,
    failures: Mutex<HashMap<ConnKey, Failure>>,
    lives: RwLock<HashMap<ConnKey, Live>>,
    /// The connection each Workspace is on (kept after a shared connection's loss, so the next
    /// one takes it back; dropped at release and at a `per_workspace` session's loss).
    seats: RwLock<HashMap<String, Seat>>,
    /// Workspaces placed on an entry whose connection attempt runs: they count against its
    /// capacity, and a concurrent `browser.connect` of the same Workspace joins the attempt.
    placing: Mutex<HashMap<String, Seat>>,
    /// The browser chosen per `bridge --browser` preference (`""`: none), kept for the Broker's
    /// life so later Workspaces bind where the first did (`default_browser_id`).
    choices: Mutex<HashMap<String, String>>,
    /// Authorization outcome per browser id, overlaid on passive discovery.
    authorization: Mutex<HashMap<String, AuthorizationState>>,
    /// Targets created for Workspaces; survives connection loss (unlike `registry`).
    owned: Mutex<HashMap<TargetId, Owned>>,
    /// Downloads of controlled sessions (`session::downloads`).
    downloads: super::downloads::Downloads,
    /// Network rules and HTTP auth credentials per Workspace (`session::fetch`).
    net: super::fetch::NetControl,
}

/// Cheap to clone; owned by the Broker and handed to tools.
#[derive(Clone)]
pub struct BrowserService {
    inner: Arc<Inner>,
}

impl BrowserService {
    pub fn new(
        home: Home,
        store: Store,
        events: EventSink,
        generations: Arc<Generations>,
    ) -> BrowserService {
        BrowserService {
            inner: Arc::new(Inner {
                dialog_opened: tokio::sync::broadcast::channel(64).0,
                home,
                store,
                events: events.clone(),
                generations,
                connect_locks: Mutex::new(HashMap::new()),
                attempts_ended: AtomicU64::new(0),
                failures: Mutex::new(HashMap::new()),
                lives: RwLock::new(HashMap::new()),
                seats: RwLock::new(HashMap::new()),
                placing: Mutex::new(HashMap::new()),
                choices: Mutex::new(HashMap::new()),
                authorization: Mutex::new(HashMap::new()),
                owned: Mutex::new(HashMap::new()),
                downloads: super::downloads::Downloads::new(
                    super::downloads::DownloadLimits::from_env(),
                    events.clone(),
                ),
                net: super::fetch::NetControl::default(),
            }),
        }
    }

    pub fn events(&self) -> &EventSink {
        &self.inner.events
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Where completed downloads of controlled sessions become Artifacts (once, at start).
    pub fn attach_artifacts(&self, artifacts: crate::artifacts::Artifacts) {
        self.inner.downloads.attach_artifacts(artifacts);
    }

    pub(super) fn downloads(&self) -> &super::downloads::Downloads {
        &self.inner.downloads
    }

    /// Network rules and credentials of every Workspace.
    pub fn net(&self) -> &super::fetch::NetControl {
        &self.inner.net
    }

    /// The tab behind a Workspace's opaque id, without taking control.
    pub fn tab_handle(
        &self,
        workspace_id: &WorkspaceId,
        opaque: &TargetRef,
    ) -> Result<TabHandle, TargetError> {
        self.with_registry_of(workspace_id, |registry| {
            registry.resolve(workspace_id, opaque)
        })
        .map(|(_, handle)| handle)
    }

    /// The live connection the Workspace is on, if any.
    pub fn live_of(&self, workspace_id: &str) -> Option<Live> {
        let key = (self.inner.seats.read().expect("seats lock"))
            .get(workspace_id)
            .map(|seat| seat.key.clone())?;
        self.inner
            .lives
            .read()
            .expect("lives lock")
            .get(&key)
            .cloned()
    }

    /// Every live connection, oldest first.
    pub fn lives(&self) -> Vec<Live> {
        let mut lives: Vec<Live> = (self.inner.lives.read().expect("lives lock"))
            .values()
            .cloned()
            .collect();
        lives.sort_by_key(|live| live.generation);
        lives
    }

    /// The live connection whose tabs include `target` (CDP target ids are unique across
    /// browsers).
    pub fn live_with_target(&self, target: &TargetId) -> Option<Live> {
        self.lives()
            .into_iter()
            .find(|live| live.with_tabs(|tabs| tabs.registry.handle(target).is_some()))
    }

    /// Whether `live` is still the current connection of its key (its events are journaled).
    pub(super) fn is_current(&self, live: &Live) -> bool {
        (self.inner.lives.read().expect("lives lock"))
            .get(&live.key)
            .is_some_and(|now| now.generation == live.generation)
    }

    /// Passive discovery (files and TCP probes, off the tokio workers) with this Broker's
    /// authorization outcomes and live connection overlaid.
    pub async fn candidates(&self) -> Vec<Candidate> {
        self.discovery().await.0
    }

    /// `candidates` and the diagnostics of `remote-browsers.toml` as a whole.
    pub async fn discovery(&self) -> (Vec<Candidate>, Vec<browser::Diagnostic>) {
        let config = DiscoveryConfig::from_env(self.inner.home.root().to_owned());
        tokio::task::spawn_blocking(move || browser::discover_all(&config))
            .await
            .unwrap_or_default()
    }

    /// Candidate JSON as `initialize` and `browser.discover` report it.
    pub fn candidate_json(&self, candidate: &Candidate) -> Value {
        let mut value = candidate.to_json();
        if let Some(state) = self
            .inner
            .authorization
            .lock()
            .expect("auth lock")
            .get(&candidate.id)
        {
            value["authorizationState"] = json!(state.as_str());
        }
        if self
            .lives()
            .iter()
            .any(|live| live.browser_id == candidate.id)
        {
            value["state"] = json!("connected");
        }
        value
    }

    /// The browser a new Workspace binds to (and `browser.discover` names as selected): the
    /// live connection when there is one and the preference (if any) names it; else the choice
    /// this Broker made earlier for the same preference (`bridge --browser X`, or none), while
    /// that candidate is still listed; else a fresh choice by the preference or the stable
    /// selection, which is then kept in memory (never on disk) for later calls. A Workspace is
    /// never bound to an unconnected candidate while the Broker is connected to a browser the
    /// host did not rule out.
    pub async fn default_browser_id(&self, preference: Option<&str>) -> Option<String> {
        // The oldest connection a Workspace can share (not another Workspace's own session).
        let live = (self.lives().into_iter())
            .find(|live| live.key.workspace_id.is_none())
            .map(|live| live.browser_id);
        if let (Some(live), None) = (&live, preference) {
            return Some(live.clone());
        }
        let candidates = self.candidates().await;
        let live_matches = |candidate: &Candidate| {
            live.as_deref() == Some(candidate.id.as_str())
                && preference.is_some_and(|preference| {
                    [&candidate.id, &candidate.product, &candidate.channel]
                        .iter()
                        .any(|field| field.as_str() == preference)
                })
        };
        if let Some(candidate) = candidates.iter().find(|candidate| live_matches(candidate)) {
            return Some(candidate.id.clone());
        }
        let key = preference.unwrap_or_default();
        let mut choices = self.inner.choices.lock().expect("choices lock");
        if let Some(chosen) = choices.get(key)
            && candidates.iter().any(|candidate| candidate.id == *chosen)
        {
            return Some(chosen.clone());
        }
        let chosen = browser::select(&candidates, preference).map(|c| c.id.clone())?;
        if choices.len() < MAX_RETAINED_CHOICES || choices.contains_key(key) {
            choices.insert(key.to_owned(), chosen.clone());
        }
        Some(chosen)
    }

    /// Connects a Workspace to a browser, or seats it on the live connection that serves it.
    /// Concurrent callers for one connection share one attempt: they wait on its lock, then
    /// find the connection made, or, when the attempt that was in flight while they waited
    /// failed, get its failure (one WebSocket attempt, so at most one approval prompt, however
    /// many callers). A `per_workspace` remote entry gives each Workspace its own connection; a
    /// `[[pool]]` places the Workspace on the entry with the most free capacity first.
    pub async fn connect(
        &self,
        workspace_id: &str,
        browser_id: &str,
    ) -> Result<Connected, ConnectError> {
        if let Some(connected) = self.reuse(workspace_id, browser_id).await {
            return Ok(connected);
        }
        let queued_after = self.inner.attempts_ended.load(Ordering::SeqCst);
        let started = std::time::Instant::now();
        let candidates = self.candidates().await;
        tracing::debug!(
            us = started.elapsed().as_micros() as u64,
            "connect: candidates"
        );
        let seat = self.place(workspace_id, browser_id, &candidates)?;
        let outcome = self
            .connect_seat(workspace_id, &seat, &candidates, queued_after)
            .await;
        let mut placing = self.inner.placing.lock().expect("placing lock");
        if placing.get(workspace_id) == Some(&seat) {
            placing.remove(workspace_id);
        }
        outcome
    }

    /// The Workspace's seat when a live connection serves what it asks for: its own, or a
    /// shared connection to that very candidate (which it then joins).
    async fn reuse(&self, workspace_id: &str, browser_id: &str) -> Option<Connected> {
        let seat = (self.inner.seats.read().expect("seats lock"))
            .get(workspace_id)
            .cloned();
        if let Some(seat) = seat.filter(|seat| seat.asked == browser_id)
            && let Some(live) = self.live_of(workspace_id)
        {
            return Some(Connected {
                browser_id: seat.asked,
                generation: live.generation,
                reused: true,
                restored: false,
            });
        }
        let key = ConnKey {
            browser_id: browser_id.to_owned(),
            workspace_id: None,
        };
        let live = (self.inner.lives.read().expect("lives lock"))
            .get(&key)
            .cloned()?;
        let seat = Seat {
            key,
            asked: browser_id.to_owned(),
        };
        let restored = self.seat(workspace_id, &seat, &live).await;
        Some(Connected {
            browser_id: browser_id.to_owned(),
            generation: live.generation,
            reused: true,
            restored,
        })
    }

    /// Where the Workspace's connection goes: the seat of an attempt it already has running,
    /// else the entry named (or the pool's entry with the most free capacity, the first in the
    /// pool's order on a tie), reserved against its capacity until the attempt ends.
    fn place(
        &self,
        workspace_id: &str,
        browser_id: &str,
        candidates: &[Candidate],
    ) -> Result<Seat, ConnectError> {
        let mut placing = self.inner.placing.lock().expect("placing lock");
        if let Some(seat) = placing
            .get(workspace_id)
            .filter(|seat| seat.asked == browser_id)
        {
            return Ok(seat.clone());
        }
        let candidate = candidates
            .iter()
            .find(|c| c.id == browser_id)
            .ok_or_else(|| ConnectError::UnknownBrowser(browser_id.to_owned()))?;
        let entries: Vec<&Candidate> = match candidate.pool_members() {
            [] => vec![candidate],
            members => members
                .iter()
                .filter_map(|member| candidates.iter().find(|c| c.id == *member))
                .collect(),
        };
        let seats = self.inner.seats.read().expect("seats lock");
        // Sessions in use on an entry: other Workspaces seated on it or being placed there.
        let in_use = |entry: &str| {
            let seated = (seats.iter())
                .filter(|(ws, seat)| *ws != workspace_id && seat.key.browser_id == entry)
                .map(|(ws, _)| ws.as_str());
            let pending = (placing.iter())
                .filter(|(ws, seat)| *ws != workspace_id && seat.key.browser_id == entry)
                .map(|(ws, _)| ws.as_str());
            let mut all: Vec<&str> = seated.chain(pending).collect();
            all.sort_unstable();
            all.dedup();
            all.len()
        };
        let capacity = |entry: &Candidate| {
            (entry.remote_endpoint())
                .and_then(|remote| remote.max_sessions)
                .unwrap_or(UNBOUNDED_SESSIONS)
        };
        let usable: Vec<&Candidate> = match entries.len() == 1 {
            // A single candidate is tried as it is (its own diagnostics or readiness speak).
            true => entries,
            false => entries
                .into_iter()
                .filter(|entry| entry.endpoint().is_some())
                .collect(),
        };
        let Some(entry) = usable
            .iter()
            .map(|entry| (entry, capacity(entry).saturating_sub(in_use(&entry.id))))
            .filter(|(_, free)| *free > 0)
            .fold(
                None,
                |best: Option<(&&Candidate, usize)>, (entry, free)| match best {
                    Some((_, most)) if most >= free => best,
                    _ => Some((entry, free)),
                },
            )
            .map(|(entry, _)| *entry)
        else {
            if usable.is_empty() {
                return Err(ConnectError::RemoteConfig {
                    browser_id: browser_id.to_owned(),
                    message:
                        "no entry of this pool is usable (browser.discover lists their diagnostics)"
                            .to_owned(),
                });
            }
            return Err(ConnectError::Busy {
                browser_id: browser_id.to_owned(),
                capacity: usable.iter().map(|entry| capacity(entry)).sum(),
                in_use: usable.iter().map(|entry| in_use(&entry.id)).sum(),
            });
        };
        let per_workspace = entry
            .remote_endpoint()
            .is_some_and(|remote| remote.per_workspace);
        let seat = Seat {
            key: ConnKey {
                browser_id: entry.id.clone(),
                workspace_id: per_workspace.then(|| workspace_id.to_owned()),
            },
            asked: browser_id.to_owned(),
        };
        drop(seats);
        placing.insert(workspace_id.to_owned(), seat.clone());
        Ok(seat)
    }

    /// Makes (or joins) the connection of `seat` under its key's lock and seats the Workspace.
    async fn connect_seat(
        &self,
        workspace_id: &str,
        seat: &Seat,
        candidates: &[Candidate],
        queued_after: u64,
    ) -> Result<Connected, ConnectError> {
        let lock = (self.inner.connect_locks.lock().expect("connect locks"))
            .entry(seat.key.clone())
            .or_default()
            .clone();
        let _attempt = lock.lock().await;
        let live = (self.inner.lives.read().expect("lives lock"))
            .get(&seat.key)
            .cloned();
        if let Some(live) = live {
            let restored = self.seat(workspace_id, seat, &live).await;
            return Ok(Connected {
                browser_id: seat.asked.clone(),
                generation: live.generation,
                reused: true,
                restored,
            });
        }
        let shared = (self.inner.failures.lock().expect("failure lock"))
            .get(&seat.key)
            .filter(|failure| failure.ended > queued_after)
            .map(|failure| failure.error.clone());
        if let Some(error) = shared {
            return Err(error);
        }
        let outcome = self.attempt(&seat.key, candidates).await;
        let ended = self.inner.attempts_ended.fetch_add(1, Ordering::SeqCst) + 1;
        let live = match outcome {
            Ok(live) => live,
            Err(error) => {
                (self.inner.failures.lock().expect("failure lock")).insert(
                    seat.key.clone(),
                    Failure {
                        ended,
                        error: error.clone(),
                    },
                );
                return Err(error);
            }
        };
        let restored = self.seat(workspace_id, seat, &live).await;
        // A shared connection serves every Workspace bound to its browser that is on no other
        // live connection (as a local browser always did).
        if live.key.workspace_id.is_none() {
            let id = live.browser_id.clone();
            let bound = match (self.inner.store)
                .call_read(move |store| store.workspaces_for_browser(&id))
                .await
            {
                Ok(bound) => bound,
                Err(error) => {
                    tracing::error!(%error, "cannot list the Workspaces of a new connection");
                    Vec::new()
                }
            };
            let mut members: Vec<String> = (self.inner.seats.read().expect("seats lock"))
                .iter()
                .filter(|(_, other)| other.key == live.key)
                .map(|(ws, _)| ws.clone())
                .collect();
            members.extend(bound);
            members.sort();
            members.dedup();
            for member in members {
                if member == workspace_id || self.live_of(&member).is_some() {
                    continue;
                }
                let other = Seat {
                    key: live.key.clone(),
                    asked: live.browser_id.clone(),
                };
                self.seat(&member, &other, &live).await;
            }
        }
        Ok(Connected {
            browser_id: seat.asked.clone(),
            generation: live.generation,
            reused: false,
            restored,
        })
    }

    /// Puts a Workspace on a live connection: its events and Commands carry that generation
    /// from now on. A Workspace that was on an earlier connection is told, in order, that its
    /// Observations of the old generation stopped resolving and that the connection was
    /// restored (true then).
    async fn seat(&self, workspace_id: &str, seat: &Seat, live: &Live) -> bool {
        (self.inner.seats.write().expect("seats lock"))
            .insert(workspace_id.to_owned(), seat.clone());
        let before = self.inner.generations.of(workspace_id);
        self.inner.generations.set(workspace_id, live.generation);
        if before == 0 || before == live.generation {
            return false;
        }
        let mut invalidated = Emit::new(
            workspace_id,
            "observation.invalidated",
            json!({"reason": "reconnected", "generation": before}),
        );
        invalidated.generation = Some(before);
        let mut restored = Emit::new(
            workspace_id,
            "connection.restored",
            json!({"browserId": seat.asked, "generation": live.generation}),
        );
        restored.generation = Some(live.generation);
        let _ = self.inner.events.emit(invalidated).await;
        let _ = self.inner.events.emit(restored).await;
        true
    }

    /// A new Workspace bound to `browser_id` sits on the live shared connection to it, if any
    /// (as it would have been seated had it existed when the connection was made).
    pub fn note_workspace(&self, workspace_id: &str, browser_id: &str) {
        if (self.inner.seats.read().expect("seats lock")).contains_key(workspace_id) {
            return;
        }
        let key = ConnKey {
            browser_id: browser_id.to_owned(),
            workspace_id: None,
        };
        let Some(generation) = (self.inner.lives.read().expect("lives lock"))
            .get(&key)
            .map(|live| live.generation)
        else {
            return;
        };
        (self.inner.seats.write().expect("seats lock")).insert(
            workspace_id.to_owned(),
            Seat {
                key,
                asked: browser_id.to_owned(),
            },
        );
        self.inner.generations.set(workspace_id, generation);
    }

    /// One connection attempt (under its key's lock, with no live connection for the key).
    async fn attempt(&self, key: &ConnKey, candidates: &[Candidate]) -> Result<Live, ConnectError> {
        let started = std::time::Instant::now();
        let browser_id = key.browser_id.as_str();
        let mut candidate = candidates
            .iter()
            .find(|c| c.id == browser_id)
            .ok_or_else(|| ConnectError::UnknownBrowser(browser_id.to_owned()))?;
        // The managed browser died (it was launched and not stopped since): launch it again.
        let relaunched = match candidate.managed && candidate.endpoint().is_none() {
            true => self.relaunch_managed().await,
            false => None,
        };
        if let Some(relaunched) = relaunched.as_ref().filter(|c| c.id == browser_id) {
            candidate = relaunched;
        }
        let Some(endpoint) = candidate.endpoint() else {
            if let Some(diagnostic) = candidate.diagnostics.first() {
                return Err(ConnectError::RemoteConfig {
                    browser_id: browser_id.to_owned(),
                    message: diagnostic.message.clone(),
                });
            }
            return Err(ConnectError::NotReady {
                remediation: candidate.to_json().get("remediation").cloned(),
            });
        };
        let (client, events, child, janitor) = match self.spawn_janitor(endpoint).await {
            Ok(parts) => parts,
            Err(error) => {
                // A timeout says nothing of the prompt's answer: still unknown.
                let state = match &error {
                    ConnectError::AuthorizationDenied(_) | ConnectError::RemoteRefused { .. } => {
                        AuthorizationState::Denied
                    }
                    _ => AuthorizationState::Unknown,
                };
                self.inner
                    .authorization
                    .lock()
                    .expect("auth lock")
                    .insert(browser_id.to_owned(), state);
                return Err(error);
            }
        };
        tracing::debug!(
            us = started.elapsed().as_micros() as u64,
            "connect: janitor up"
        );
        self.inner
            .authorization
            .lock()
            .expect("auth lock")
            .insert(browser_id.to_owned(), AuthorizationState::Authorized);
        let generation = self.inner.generations.mint();
        let mut live = Live {
            key: key.clone(),
            browser_id: browser_id.to_owned(),
            client: client.clone(),
            generation,
            janitor,
            tabs: Arc::default(),
            contexts: Arc::default(),
            foreign_tabs: (candidate.remote_endpoint())
                .is_none_or(|remote| remote.list_foreign_tabs),
            start_tab: Arc::default(),
        };
        // Only the browser the project launched (its keeper's pipe) offers its start tab.
        let launched = candidate.managed && matches!(endpoint, browser::Endpoint::Keeper { .. });
        let mut orphans = Vec::new();
        // Pages attach as sessions the pump offers to their tabs; new ones wait paused until
        // the pump set up (a managed popup) or released them (docs/network.md, "Popups"). Asked
        // for together with the inventory: the attach events wait in the event channel until
        // the pump runs, after the registry below holds every page.
        let auto_attach = crate::cdp::target::SetAutoAttach::pages();
        let (inventory, auto_attached) = tokio::join!(
            client.get_targets(INVENTORY_TIMEOUT),
            client.execute(None, &auto_attach, INVENTORY_TIMEOUT)
        );
        match inventory {
            Ok(targets) => {
                live.with_tabs(|tabs| {
                    for info in &targets {
                        tabs.registry.upsert(info);
                    }
                });
                if launched {
                    live.start_tab = super::start_tab::StartTab::from_inventory(&targets);
                }
                orphans = self.recover_owned(&live, &targets).await;
            }
            Err(error) => tracing::warn!(%error, "initial target inventory failed"),
        }
        (self.inner.lives.write().expect("lives lock")).insert(key.clone(), live.clone());
        for target in orphans {
            if let Err(error) = client.close_target(&target, ORPHAN_CLOSE_TIMEOUT).await {
                tracing::debug!(%error, "closing a managed tab of a released Workspace");
            }
        }
        tokio::spawn(pump::run(self.clone(), live.clone(), events, child));
        if let Err(error) = auto_attached {
            tracing::warn!(%error, "auto-attaching pages failed; popups are attached late");
        }
        Ok(live)
    }

    /// Relaunches the managed browser as it was last launched (`browser::relaunch`, off the
    /// tokio workers); `None` when it was never launched, was stopped, or did not come up.
    async fn relaunch_managed(&self) -> Option<Candidate> {
        let home = self.inner.home.root().to_owned();
        match tokio::task::spawn_blocking(move || browser::relaunch(&home)).await {
            Ok(Ok(relaunched)) => relaunched,
            Ok(Err(error)) => {
                tracing::warn!(%error, "relaunching the managed browser failed");
                None
            }
            Err(_) => None,
        }
    }

    async fn spawn_janitor(
        &self,
        endpoint: &browser::Endpoint,
    ) -> Result<
        (
            CdpClient,
            mpsc::Receiver<crate::cdp::CdpEvent>,
            tokio::process::Child,
            mpsc::Sender<String>,
        ),
        ConnectError,
    > {
        let exe = std::env::current_exe()
            .map_err(|e| ConnectError::Failed(format!("cannot find own executable: {e}")))?;
        let mut command = tokio::process::Command::new(exe);
        // A remote browser's URL and headers may carry its token: they go in the janitor's
        // environment (readable only by this user), never on its command line.
        let remote = match endpoint {
            browser::Endpoint::Remote(remote) => {
                let spec = json!({"url": remote.url, "headers": remote.headers, "allowInsecure": remote.allow_insecure, "caFile": remote.ca_file});
                command.env(browser::JANITOR_REMOTE_ENV, spec.to_string());
                Some(remote)
            }
            _ => None,
        };
        let mut child = command
            .arg("--browser-pilot-internal=janitor")
            .arg(endpoint.janitor_arg())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .map_err(|e| ConnectError::Failed(format!("cannot start the janitor: {e}")))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut lines = LineReader::new(stdout, pipe::MAX_LINE_BYTES);
        let first = match tokio::time::timeout(JANITOR_HANDSHAKE_TIMEOUT, lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(_) => {
                return Err(ConnectError::Failed(
                    "the janitor exited before connecting".into(),
                ));
            }
            Err(_) => return Err(ConnectError::AuthorizationTimeout),
        };
        let status = std::str::from_utf8(&first)
            .ok()
            .and_then(JanitorLine::from_line);
        match status {
            Some(Ok(JanitorLine::Connected)) => {}
            Some(Ok(JanitorLine::Failed { reason, message })) => {
                if let Some(remote) = remote {
                    return Err(remote_failure(remote, reason, &message));
                }
                return Err(match reason {
                    FailReason::Timeout => ConnectError::AuthorizationTimeout,
                    FailReason::Http(403) => ConnectError::AuthorizationDenied(message),
                    FailReason::Refused | FailReason::Closed => {
                        ConnectError::NotReady { remediation: None }
                    }
                    _ => ConnectError::Failed(format!("{reason}: {message}")),
                });
            }
            _ => {
                return Err(ConnectError::Failed("unknown: ".into()));
            }
        }
        let (out_tx, mut out_rx) = mpsc::channel::<String>(JANITOR_PIPE_QUEUE);
        let (in_tx, in_rx) = mpsc::channel::<String>(JANITOR_PIPE_QUEUE);
        tokio::spawn(async move {
            while let Some(line) = out_rx.recv().await {
                let mut bytes = line.into_bytes();
                bytes.push(b'\n');
                if stdin.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        });
        // Every later line is one CDP message, until the janitor's `disconnected` (which the
        // client reads as the end of the connection) and end of input.
        tokio::spawn(async move {
            loop {
                let line = match lines.next_line().await {
                    Ok(Some(line)) => line,
                    Ok(None) => return,
                    Err(FramingError::TooLong { limit }) => {
                        tracing::warn!(limit, "skipping an oversized line from the janitor");
                        match lines.skip_line().await {
                            Ok(true) => continue,
                            _ => return,
                        }
                    }
                    Err(FramingError::Io(error)) => {
                        tracing::debug!(%error, "reading the janitor's output failed");
                        return;
                    }
                };
                let Ok(line) = String::from_utf8(line) else {
                    tracing::warn!("skipping a line from the janitor that is not UTF-8");
                    continue;
                };
                if in_tx.send(line).await.is_err() {
                    return;
                }
            }
        });
        let janitor = out_tx.clone();
        let (client, events) = CdpClient::spawn(out_tx, in_rx);
        Ok((client, events, child, janitor))
    }

    /// After a new connection's inventory: the targets this service created for Workspaces
    /// under an earlier connection (a janitor that died left them open). Those of a live
    /// Workspace become its managed tabs again, uncontrolled, with fresh opaque ids, and the
    /// new janitor is told to close them if the Broker dies; the others (their Workspace was
    /// released meanwhile) are returned for the caller to close. Records of targets that are
    /// gone are dropped. Runs before the connection is published, so no Principal ever sees
    /// them as user tabs.
    async fn recover_owned(
        &self,
        live: &Live,
        targets: &[crate::cdp::TargetInfo],
    ) -> Vec<TargetId> {
        let owned: Vec<(TargetId, Owned)> = {
            let mut owned = self.inner.owned.lock().expect("owned lock");
            owned.retain(|target, record| {
                record.key != live.key || targets.iter().any(|t| t.target_id == *target)
            });
            owned
                .iter()
                .filter(|(_, record)| record.key == live.key)
                .map(|(target, record)| (target.clone(), record.clone()))
                .collect()
        };
        if owned.is_empty() {
            return Vec::new();
        }
        let id = live.browser_id.clone();
        let active = match (self.inner.store)
            .call_read(move |store| store.workspaces_for_browser(&id))
            .await
        {
            // A Workspace placed through a pool is bound to the pool: its seat says it lives.
            Ok(mut active) => {
                active.extend(
                    (self.inner.seats.read().expect("seats lock"))
                        .keys()
                        .cloned(),
                );
                active
            }
            // Without knowing which Workspaces live, nothing is re-adopted; closing is the safe side.
            Err(error) => {
                tracing::warn!(%error, "cannot list Workspaces while recovering managed tabs");
                Vec::new()
            }
        };
        let mut orphans = Vec::new();
        for (target, record) in owned {
            // Either way the tab stays its Workspace's in the inventory (a released Workspace's
            // tab is then listed to nobody while it closes), and the new janitor closes it if
            // the Broker dies first.
            live.with_tabs(|tabs| tabs.registry.adopt_recovered(&target, &record.workspace_id));
            let line = JanitorLine::Adopt {
                target_id: target.clone(),
                start: record.start,
            }
            .to_line();
            if live.janitor.send(line).await.is_err() {
                tracing::warn!("the new janitor went away while recovering managed tabs");
            }
            if record.released || !active.contains(&record.workspace_id) {
                self.inner.owned.lock().expect("owned lock").remove(&target);
                orphans.push(target);
            }
        }
        orphans
    }

    /// Remembers a target created (or adopted as a popup) for a Workspace on its connection.
    pub(super) fn note_owned(&self, target: &TargetId, workspace_id: &str) {
        self.record_owned(target, workspace_id, false);
    }

    /// Remembers the launched browser's start tab as adopted by a Workspace.
    pub(super) fn note_owned_start(&self, target: &TargetId, workspace_id: &str) {
        self.record_owned(target, workspace_id, true);
    }

    fn record_owned(&self, target: &TargetId, workspace_id: &str, start: bool) {
        let Some(live) = self.live_of(workspace_id) else {
            return;
        };
        let mut owned = self.inner.owned.lock().expect("owned lock");
        if owned.len() >= MAX_OWNED_TARGETS && !owned.contains_key(target) {
            tracing::warn!("too many managed targets recorded; one is not recoverable");
            return;
        }
        owned.insert(
            target.clone(),
            Owned {
                key: live.key,
                workspace_id: workspace_id.to_owned(),
                released: false,
                start,
            },
        );
    }

    /// Before a Workspace closes its managed tab: when it is the adopted start tab, a blank
    /// tab takes its place (`start_tab`).
    pub async fn before_closing(&self, target: &TargetId) {
        let start = (self.inner.owned.lock().expect("owned lock"))
            .get(target)
            .is_some_and(|record| record.start);
        if let Some(live) = self.live_with_target(target).filter(|_| start) {
            self.replace_start_tab(&live).await;
        }
    }

    /// Forgets a target that was destroyed.
    pub(super) fn forget_owned(&self, target: &TargetId) {
        self.inner.owned.lock().expect("owned lock").remove(target);
    }

    /// Called by the pump when the janitor's stream ended: the browser went away. Only the
    /// Workspaces on this connection hear of it; a `per_workspace` session's Workspace leaves
    /// its seat (its entry's capacity is free again, and its next `browser.connect` places it
    /// afresh).
    pub(super) async fn on_lost(&self, live: &Live) {
        {
            let mut lives = self.inner.lives.write().expect("lives lock");
            match lives.get(&live.key) {
                Some(now) if now.generation == live.generation => lives.remove(&live.key),
                _ => return,
            };
        }
        let members: Vec<String> = {
            let mut seats = self.inner.seats.write().expect("seats lock");
            let members = (seats.iter())
                .filter(|(_, seat)| seat.key == live.key)
                .map(|(ws, _)| ws.clone())
                .collect();
            if live.key.workspace_id.is_some() {
                seats.retain(|_, seat| seat.key != live.key);
            }
            members
        };
        self.downloads_connection_lost(live).await;
        let payload = json!({"browserId": live.browser_id, "generation": live.generation, "reason": "browser_disconnected"});
        for workspace_id in members {
            let mut emit = Emit::new(&workspace_id, "connection.lost", payload.clone());
            emit.generation = Some(live.generation);
            let _ = self.inner.events.emit(emit).await;
        }
    }

    /// Runs `f` on the registry of the Workspace's connection (an empty one without).
    pub(super) fn with_registry_of<T>(
        &self,
        workspace_id: &str,
        f: impl FnOnce(&mut Registry) -> T,
    ) -> T {
        match self.live_of(workspace_id) {
            Some(live) => live.with_tabs(|tabs| f(&mut tabs.registry)),
            None => f(&mut pump::Tabs::default().registry),
        }
    }

    /// Runs `f` on the registry of the connection that knows `target` (an empty one without).
    pub(super) fn with_target_registry<T>(
        &self,
        target: &TargetId,
        f: impl FnOnce(&mut Registry) -> T,
    ) -> T {
        match self.live_with_target(target) {
            Some(live) => live.with_tabs(|tabs| f(&mut tabs.registry)),
            None => f(&mut pump::Tabs::default().registry),
        }
    }

    /// Records a tab created for a Workspace (in `context`, an isolated Workspace's own) and
    /// returns its opaque id.
    pub fn adopt_created(
        &self,
        target: &TargetId,
        url: &str,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
        context: Option<&BrowserContextId>,
    ) -> TargetRef {
        let opaque = self.with_registry_of(workspace_id, |registry| {
            if registry.handle(target).is_none() {
                registry.upsert(&crate::cdp::TargetInfo {
                    browser_context_id: context.map(|context| context.as_str().to_owned()),
                    ..crate::cdp::TargetInfo::page(target.clone(), url)
                });
            }
            if let Some(context) = context {
                registry.note_context(target, context);
            }
            registry.adopt(target, workspace_id, lease_id);
            registry.opaque_id(workspace_id, target)
        });
        self.note_owned(target, workspace_id);
        opaque
    }

    /// Records what a tool just read of a tab (discovery events can lag behind a load).
    pub fn note_page(&self, target: &TargetId, url: &str, title: &str) {
        self.with_target_registry(target, |registry| registry.note_page(target, url, title));
    }

    pub fn has_window(&self, workspace_id: &str) -> bool {
        self.with_registry_of(workspace_id, |registry| registry.has_window(workspace_id))
    }

    /// The tabs `browser.tabs.list` shows this Lease. A tab in another Workspace's context is
    /// never among them, even before its Workspace adopted it.
    pub fn list_tabs(&self, workspace_id: &WorkspaceId, lease_id: &LeaseId) -> Vec<TabView> {
        let Some(live) = self.live_of(workspace_id) else {
            return Vec::new();
        };
        let mut views = live.with_tabs(|tabs| tabs.registry.list(workspace_id, lease_id));
        views.retain(|view| {
            (view.context.as_ref())
                .and_then(|context| live.contexts.owner_of(context))
                .is_none_or(|owner| owner == workspace_id.as_str())
                && (live.foreign_tabs || view.managed)
        });
        views
    }

    /// The Workspace's own browser context on the live connection, if it has one yet.
    pub fn workspace_context(&self, workspace_id: &WorkspaceId) -> Option<BrowserContextId> {
        self.live_of(workspace_id)
            .and_then(|live| live.contexts.of(workspace_id))
    }

    /// The isolated Workspace's own browser context, made on `client` (the Command's watched
    /// handle) at its first managed navigation on this connection. Never the default context.
    pub async fn isolated_context(
        &self,
        workspace_id: &WorkspaceId,
        client: &CdpClient,
        timeout: Duration,
    ) -> Result<BrowserContextId, super::contexts::ContextError> {
        let live = self
            .live_of(workspace_id)
            .ok_or(super::contexts::ContextError::Cdp(
                crate::cdp::CdpError::Disconnected,
            ))?;
        live.contexts
            .get_or_make(workspace_id, client, timeout)
            .await
    }

    /// The browser context of the tab behind a Workspace's opaque id, when discovery named one.
    pub fn tab_context(
        &self,
        workspace_id: &WorkspaceId,
        opaque: &TargetRef,
    ) -> Option<BrowserContextId> {
        self.with_registry_of(workspace_id, |registry| {
            let (target, _) = registry.resolve(workspace_id, opaque).ok()?;
            registry.context_of(&target)
        })
    }

    /// Resolves a Workspace's opaque id and takes control of the tab for this Lease. A
    /// controller whose Lease no longer exists (expired, released, its Workspace gone) is
    /// cleared first; a live controller is never displaced. Only the registry changes: a caller
    /// about to drive the tab asks for its Workspace's network rules (`apply_network_rules`).
    pub async fn control(
        &self,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
        opaque: &TargetRef,
    ) -> Result<(TargetId, TabHandle), TargetError> {
        let foreign_tabs = (self.live_of(workspace_id)).is_some_and(|live| live.foreign_tabs);
        let (target, handle) = self.with_registry_of(workspace_id, |registry| {
            let (target, handle) = registry.resolve(workspace_id, opaque)?;
            // On a remote browser someone else's tab is not eligible (`list_foreign_tabs`).
            match foreign_tabs || registry.managed_by(&target).is_some() {
                true => Ok((target, handle)),
                false => Err(TargetError::NotFound),
            }
        })?;
        loop {
            let attempt = self.with_registry_of(workspace_id, |registry| {
                registry.acquire_control(&target, workspace_id, lease_id)
            });
            match attempt {
                Ok(handed_over) => {
                    if handed_over {
                        handle.activity().hand_over(now_ms());
                    }
                    return Ok((target, handle));
                }
                Err(TargetError::ControlledElsewhere {
                    workspace_id: holder_ws,
                    lease_id: holder_lease,
                }) => {
                    let (ws, lease) = (
                        WorkspaceId::from(holder_ws.as_str()),
                        LeaseId::from(holder_lease.as_str()),
                    );
                    let alive = match (self.inner.store)
                        .call_read(move |store| store.lease_alive(&ws, &lease, now_ms()))
                        .await
                    {
                        Ok(alive) => alive,
                        // Unknown means the holder keeps the tab: never take control on a guess.
                        Err(error) => {
                            tracing::error!(%error, "cannot check the controlling Lease");
                            true
                        }
                    };
                    if alive {
                        return Err(TargetError::ControlledElsewhere {
                            workspace_id: holder_ws,
                            lease_id: holder_lease,
                        });
                    }
                    let stale = Controller {
                        workspace_id: holder_ws,
                        lease_id: holder_lease,
                    };
                    self.with_registry_of(workspace_id, |registry| {
                        registry.clear_stale_control(&target, &stale)
                    });
                }
                Err(other) => return Err(other),
            }
        }
    }

    /// Brings the tab's request interception in line with the rules and credentials of the
    /// Workspaces that manage or control it now, returning once its sessions answered. A tool
    /// calls it after taking control, before it drives the tab.
    pub async fn apply_network_rules(&self, target: &TargetId) {
        if let Some(live) = self.live_with_target(target) {
            super::fetch::refresh_tab(&live, self.net(), target).await;
        }
    }

    /// A place in the queue of the tab behind a Workspace's opaque id, taken when the Command is
    /// accepted so that Commands for one tab run in acceptance order. `None` when the id does not
    /// resolve (the Command then fails with the precise error when it runs).
    pub fn ticket(
        &self,
        workspace_id: &WorkspaceId,
        opaque: &TargetRef,
    ) -> Option<super::TabTicket> {
        self.with_registry_of(workspace_id, |registry| {
            registry.resolve(workspace_id, opaque).ok()
        })
        .map(|(_, handle)| handle.ticket())
    }

    /// A Lease ended (released, expired, or its Connection closed): its downloads stop, then
    /// every tab it controlled is free at once (not "controlled elsewhere" until someone asks
    /// for it) and the Workspace's network rules stop applying to the user tabs among them.
    pub async fn lease_ended(&self, workspace_id: &WorkspaceId, lease_id: &LeaseId) {
        self.downloads_lease_ended(workspace_id, lease_id).await;
        let Some(live) = self.live_of(workspace_id) else {
            return;
        };
        let freed =
            live.with_tabs(|tabs| (tabs.registry).end_lease_control(workspace_id, lease_id));
        for target in freed {
            super::fetch::refresh_tab(&live, self.net(), &target).await;
        }
    }

    /// Hands control of a tab back; true when this Lease held it.
    pub fn release_control(
        &self,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
        opaque: &TargetRef,
    ) -> Result<bool, TargetError> {
        let released = self.with_registry_of(workspace_id, |registry| {
            let (target, _) = registry.resolve(workspace_id, opaque)?;
            Ok((
                registry.release_control(&target, workspace_id, lease_id),
                target,
            ))
        });
        released.map(|(released, target)| {
            if let Some(live) = self.live_of(workspace_id) {
                let service = self.clone();
                tokio::spawn(async move {
                    super::fetch::refresh_tab(&live, service.net(), &target).await;
                });
            }
            released
        })
    }

    /// Whether the Workspace's target is one it manages (created or adopted popup).
    pub fn is_managed_opaque(
        &self,
        workspace_id: &WorkspaceId,
        opaque: &TargetRef,
    ) -> Result<bool, TargetError> {
        self.with_registry_of(workspace_id, |registry| {
            let (target, _) = registry.resolve(workspace_id, opaque)?;
            Ok(registry.managed_by(&target) == Some(workspace_id))
        })
    }

    /// Subscribes to "a dialog opened on this target" signals (subscribe before acting).
    pub fn dialog_signals(&self) -> tokio::sync::broadcast::Receiver<TargetId> {
        self.inner.dialog_opened.subscribe()
    }

    pub(super) fn signal_dialog(&self, target: &TargetId) {
        let _ = self.inner.dialog_opened.send(target.clone());
    }

    /// Open dialogs on tabs this Workspace knows, with its opaque target ids.
    pub fn dialogs_for(&self, workspace_id: &str) -> Vec<(TargetRef, super::DialogInfo)> {
        self.with_registry_of(workspace_id, |registry| {
            let dialogs: Vec<super::DialogInfo> = registry.dialogs.values().cloned().collect();
            dialogs
                .into_iter()
                .filter_map(|d| {
                    registry
                        .known_opaque(workspace_id, &d.target)
                        .map(|opaque| (opaque, d))
                })
                .collect()
        })
    }

    /// The open dialog with this id, if this Workspace knows its tab.
    pub fn dialog(
        &self,
        workspace_id: &WorkspaceId,
        dialog_id: &str,
    ) -> Option<(TargetRef, super::DialogInfo)> {
        self.dialogs_for(workspace_id)
            .into_iter()
            .find(|(_, d)| d.id == dialog_id)
    }

    /// Whether a dialog is open on this tab now.
    pub fn with_dialog_on(&self, target: &TargetId) -> bool {
        self.with_target_registry(target, |registry| registry.dialogs.contains_key(target))
    }

    pub fn popups_of(&self, target: &TargetId) -> usize {
        self.with_target_registry(target, |registry| registry.popups_of(target))
    }

    /// Closes a Workspace's managed tabs and forgets its ids. User tabs are never touched.
    /// Without a live connection, the tabs it created are marked and closed on the next one.
    pub async fn release_workspace(&self, workspace_id: &str) {
        self.downloads_workspace_released(workspace_id).await;
        let live = self.live_of(workspace_id);
        let (mut managed, controlled) = self.with_registry_of(workspace_id, |registry| {
            let managed = registry.managed_tabs(workspace_id);
            let controlled = registry.controlled_user_tabs(workspace_id);
            registry.forget_workspace(workspace_id);
            (managed, controlled)
        });
        self.inner.net.forget_workspace(workspace_id);
        super::fetch::refresh_all(self).await;
        if let Some(live) = &live {
            super::choosers::stop_intercepting(&live.client, &controlled).await;
        }
        let mut starts = Vec::new();
        {
            let mut owned = self.inner.owned.lock().expect("owned lock");
            for (target, record) in owned.iter_mut() {
                if record.workspace_id == workspace_id {
                    record.released = true;
                    if record.start {
                        starts.push(target.clone());
                    }
                    if !managed.contains(target) {
                        managed.push(target.clone());
                    }
                }
            }
            if live.is_some() {
                owned.retain(|_, record| record.workspace_id != workspace_id);
            }
        }
        let seat = (self.inner.seats.write().expect("seats lock")).remove(workspace_id);
        self.inner.generations.forget(workspace_id);
        let Some(live) = live else { return };
        for target in managed {
            if starts.contains(&target) {
                self.replace_start_tab(&live).await;
            }
            if let Err(error) = live
                .client
                .close_target(&target, Duration::from_secs(5))
                .await
            {
                tracing::debug!(%error, "closing a managed tab on release");
            }
        }
        // Disposing the context closes whatever is left in it (a popup not yet adopted) and
        // drops its cookies and storage.
        if let Some(context) = live.contexts.take(workspace_id)
            && let Err(error) =
                super::contexts::dispose(&live.client, &context, Duration::from_secs(5)).await
        {
            tracing::debug!(%error, "disposing an isolated Workspace's context on release");
        }
        // A `per_workspace` session ends with its Workspace: its janitor cleans up as if the
        // Broker went away and closes the socket; the pump then finds it no longer current.
        if let Some(seat) = seat.filter(|seat| seat.key.workspace_id.is_some()) {
            (self.inner.lives.write().expect("lives lock")).remove(&seat.key);
            (self.inner.connect_locks.lock().expect("connect locks")).remove(&seat.key);
            (self.inner.failures.lock().expect("failure lock")).remove(&seat.key);
            if live
                .janitor
                .send(JanitorLine::Close.to_line())
                .await
                .is_err()
            {
                tracing::debug!("the janitor of a released Workspace's session was gone");
            }
        }
    }
}

/// A remote browser's failed connection, naming the candidate and never its token.
fn remote_failure(
    remote: &browser::RemoteEndpoint,
    reason: FailReason,
    message: &str,
) -> ConnectError {
    let browser_id = remote.browser_id.clone();
    match reason {
        FailReason::Http(status) => ConnectError::RemoteRefused { browser_id, status },
        FailReason::Tls => ConnectError::RemoteTls {
            browser_id,
            message: remote.scrub(message),
        },
        FailReason::Refused | FailReason::Closed => ConnectError::NotReady {
            remediation: Some(json!({
                "action": "start_browser",
                "message": format!("the remote browser {browser_id} does not accept connections: start its engine or check its endpoint in remote-browsers.toml"),
            })),
        },
        _ => ConnectError::Failed(format!(
            "remote browser {browser_id}: {reason}: {}",
            remote.scrub(message)
        )),
    }
}
