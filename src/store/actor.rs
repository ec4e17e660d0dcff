//! The store's threads and its write connection: one writer thread that commits whatever units
//! of work are queued in one transaction (group commit, each unit inside its own savepoint), a
//! few reader threads that run read-only units on pooled connections, and the hand-off of the
//! one write connection between the writer thread and a caller that finds the writer idle.
//! Async callers run a write unit on their own thread when nothing is queued and the write
//! connection is free; otherwise they hand it over a channel and await a oneshot reply. Nothing
//! here uses tokio's blocking pool. Owns thread start-up, the batch loop, the write connection's
//! hand-off and how a unit's failure reaches its caller; it holds no domain SQL (units are
//! closures over the typed store API) and never sees protocol types.
//!
//! Why this shape: one SQLite write transaction per call costs a `BEGIN`/`COMMIT` pair and,
//! before this, a blocking-pool hop per call. A single writer needs no lock hand-off between
//! writers, and a burst of calls queued while one batch commits becomes the next batch: one
//! transaction however many units it holds. A unit's result is sent only after its batch
//! committed, so a caller never sees a write that a later failure could undo. A unit is a few
//! statements on an in-memory database (microseconds), while handing it to the writer thread
//! and its answer back costs two thread wake-ups, most of an idle Broker's time per call: so a
//! caller that finds nothing queued and the connection free takes the connection, runs its unit
//! as a batch of one (the same savepoint, commit and failure rules) and gives it back. Units
//! queued meanwhile wait for the writer thread, which takes the connection back first; a caller
//! never runs ahead of units already queued.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::db::{Savepoint, Store};
use super::error::StoreError;

/// Units committed in one group transaction at most. Large enough that a burst of events (a
/// page load's network events, a Lease sweep) shares one commit; small enough that the write
/// lock is released often for the pooled writers (tests, the Artifact service's file thread).
pub const GROUP_COMMIT_MAX_UNITS: usize = 256;

/// Threads that run read-only units. Reads on the in-memory database take microseconds; three
/// keep ordinary reads flowing while one runs a debug query for up to its time budget.
pub const READER_THREADS: usize = 3;

thread_local! {
    /// Set while this thread holds a Store's write connection (the writer thread during a
    /// batch, a caller during its own unit): which Store, and the connection.
    static WRITER: RefCell<Option<WriterSlot>> = const { RefCell::new(None) };
}

struct WriterSlot {
    store_id: u64,
    connection: Connection,
}

/// Where the write connection rests while nobody runs a unit on it.
struct Baton {
    state: Mutex<BatonState>,
    /// Signalled when the connection comes back while the writer thread waits for it.
    returned: Condvar,
}

struct BatonState {
    /// `None` while a thread holds it.
    connection: Option<Connection>,
    /// The writer thread waits for the connection to come back.
    writer_waiting: bool,
    /// The writer thread stopped: no unit runs any more, inline or queued.
    stopped: bool,
}

impl Baton {
    fn lock(&self) -> MutexGuard<'_, BatonState> {
        // A panic never happens while this lock is held (nothing in its sections can panic),
        // but a poisoned lock still holds a consistent state.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The connection, if it rests here and the writer thread runs.
    fn try_take(&self) -> Option<Connection> {
        let mut state = match self.state.try_lock() {
            Ok(state) => state,
            Err(std::sync::TryLockError::WouldBlock) => return None,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        };
        match state.stopped {
            true => None,
            false => state.connection.take(),
        }
    }

    /// The connection, waiting for a caller to give it back (the writer thread only).
    fn take(&self) -> Connection {
        let mut state = self.lock();
        loop {
            if let Some(connection) = state.connection.take() {
                state.writer_waiting = false;
                return connection;
            }
            state.writer_waiting = true;
            state = self
                .returned
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn give_back(&self, connection: Connection) {
        let mut state = self.lock();
        state.connection = Some(connection);
        if state.writer_waiting {
            self.returned.notify_one();
        }
    }

    fn stop(&self) {
        self.lock().stopped = true;
    }
}

/// Marks the baton stopped when the writer thread ends, however it ends (a panic included).
struct StopOnExit(Arc<Baton>);

impl Drop for StopOnExit {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Puts `connection` into this thread's `WRITER` slot for `store_id`, runs `body`, and takes it
/// back out.
fn holding<T>(store_id: u64, connection: Connection, body: impl FnOnce() -> T) -> (T, Connection) {
    WRITER.with(|slot| {
        *slot.borrow_mut() = Some(WriterSlot {
            store_id,
            connection,
        })
    });
    let value = body();
    let slot = WRITER
        .with(|slot| slot.borrow_mut().take())
        .expect("the write connection is still in its slot");
    (value, slot.connection)
}

/// A unit of work queued for a store thread.
pub(super) trait Unit: Send {
    /// Runs the unit; what it returns is delivered after the batch's commit.
    fn run(self: Box<Self>) -> Box<dyn Delivery>;
    /// Answers the unit without running it.
    fn refuse(self: Box<Self>, error: StoreError);
}

/// A unit's result waiting for its batch to commit.
pub(super) trait Delivery: Send {
    /// Sends the result, or `GroupCommit` when the batch did not commit.
    fn deliver(self: Box<Self>, commit: Result<(), &str>);
}

/// What the store threads are sent.
pub(super) enum Message {
    Unit(Box<dyn Unit>),
    /// Test hook: the writer thread panics outside any unit, as a bug in the loop would.
    #[cfg(test)]
    Crash,
}

/// The sending end of a store thread's queue, with the number of messages not yet taken.
pub(super) struct Queue {
    sender: Sender<Message>,
    queued: Arc<AtomicUsize>,
}

impl Queue {
    /// Queues `message`; `Err` when the thread(s) behind the queue have stopped.
    pub(super) fn send(&self, message: Message) -> Result<(), StoreError> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        match self.sender.send(message) {
            Ok(()) => Ok(()),
            Err(_) => {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                Err(StoreError::Unavailable)
            }
        }
    }

    /// Messages sent and not yet taken by a thread.
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }
}

/// A typed call: the closure, the Store handle it runs against and the reply channel.
struct Call<T, F> {
    store: Store,
    unit: F,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

struct Ready<T> {
    result: Result<T, StoreError>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Unit for Call<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
{
    fn run(self: Box<Self>) -> Box<dyn Delivery> {
        let Call { store, unit, reply } = *self;
        let result = unit(&store);
        Box::new(Ready { result, reply })
    }

    fn refuse(self: Box<Self>, error: StoreError) {
        let _ = self.reply.send(Err(error));
    }
}

impl<T: Send + 'static> Delivery for Ready<T> {
    fn deliver(self: Box<Self>, commit: Result<(), &str>) {
        let result = match commit {
            Ok(()) => self.result,
            Err(why) => Err(StoreError::GroupCommit(why.to_owned())),
        };
        // The caller may have stopped waiting (its task was cancelled); nothing to tell.
        let _ = self.reply.send(result);
    }
}

/// Packages `unit` for a store thread and the receiver its caller awaits.
pub(super) fn call<T, F>(
    store: Store,
    unit: F,
) -> (Message, oneshot::Receiver<Result<T, StoreError>>)
where
    T: Send + 'static,
    F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
{
    let (reply, answer) = oneshot::channel();
    (Message::Unit(Box::new(Call { store, unit, reply })), answer)
}

/// The answer of a unit that already ran on this thread (`Writer::run_here`). A dropped reply
/// (the unit panicked) is `Unavailable`.
pub(super) fn answered<T>(
    mut answer: oneshot::Receiver<Result<T, StoreError>>,
) -> Result<T, StoreError> {
    answer.try_recv().unwrap_or(Err(StoreError::Unavailable))
}

/// Awaits a unit's answer. A dropped reply (the unit panicked, or the thread stopped before
/// answering) is `Unavailable`, never a hang.
pub(super) async fn answer<T>(
    answer: oneshot::Receiver<Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match answer.await {
        Ok(result) => result,
        Err(_) => Err(StoreError::Unavailable),
    }
}

/// Runs `body` on `store_id`'s write connection if this thread holds it (the writer thread
/// during a batch, a caller during its own unit); otherwise hands `body` back.
pub(super) fn on_writer<T, F: FnOnce(&Connection) -> T>(store_id: u64, body: F) -> Result<T, F> {
    WRITER.with(|slot| match &*slot.borrow() {
        Some(writer) if writer.store_id == store_id => Ok(body(&writer.connection)),
        _ => Err(body),
    })
}

/// A Store's write side: the writer thread's queue and the write connection's resting place.
pub(super) struct Writer {
    store_id: u64,
    queue: Queue,
    baton: Arc<Baton>,
}

impl Writer {
    /// Queues `message` for the writer thread; `Err` when it has stopped.
    pub(super) fn send(&self, message: Message) -> Result<(), StoreError> {
        self.queue.send(message)
    }

    /// Messages sent and not yet taken by the writer thread (one it waits to run counts).
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.queue.queued()
    }

    /// Runs `message`'s unit on this thread as a batch of one (its own savepoint and
    /// transaction; its result delivered after the commit, as on the writer thread) when no
    /// message is queued and the write connection is free. Otherwise hands `message` back.
    pub(super) fn run_here(&self, message: Message) -> Result<(), Message> {
        if self.queue.queued.load(Ordering::SeqCst) > 0 {
            return Err(message);
        }
        // Only tests have another kind of message.
        #[allow(clippy::infallible_destructuring_match)]
        let unit = match message {
            Message::Unit(unit) => unit,
            #[cfg(test)]
            other @ Message::Crash => return Err(other),
        };
        let holds_one = WRITER.with(|slot| slot.borrow().is_some());
        let Some(connection) = (!holds_one).then(|| self.baton.try_take()).flatten() else {
            return Err(Message::Unit(unit));
        };
        let mut batch = vec![unit];
        let ((), connection) = holding(self.store_id, connection, || commit_batch(&mut batch));
        self.baton.give_back(connection);
        Ok(())
    }
}

/// Starts the writer thread for `store_id` with its own connection.
pub(super) fn spawn_writer(store_id: u64, connection: Connection) -> Result<Writer, StoreError> {
    let (sender, receiver) = channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let taken = queued.clone();
    let baton = Arc::new(Baton {
        state: Mutex::new(BatonState {
            connection: Some(connection),
            writer_waiting: false,
            stopped: false,
        }),
        returned: Condvar::new(),
    });
    let writer_baton = baton.clone();
    std::thread::Builder::new()
        .name("store-writer".to_owned())
        .spawn(move || writer_loop(store_id, &receiver, &taken, writer_baton))
        .map_err(|_| StoreError::Unavailable)?;
    Ok(Writer {
        store_id,
        queue: Queue { sender, queued },
        baton,
    })
}

/// Starts the reader threads; they share one queue.
pub(super) fn spawn_readers() -> Result<Queue, StoreError> {
    let (sender, receiver) = channel::<Message>();
    let receiver = Arc::new(Mutex::new(receiver));
    let queued = Arc::new(AtomicUsize::new(0));
    for _ in 0..READER_THREADS {
        let (receiver, taken) = (receiver.clone(), queued.clone());
        std::thread::Builder::new()
            .name("store-reader".to_owned())
            .spawn(move || reader_loop(&receiver, &taken))
            .map_err(|_| StoreError::Unavailable)?;
    }
    Ok(Queue { sender, queued })
}

fn writer_loop(
    store_id: u64,
    receiver: &Receiver<Message>,
    queued: &AtomicUsize,
    baton: Arc<Baton>,
) {
    let _stopped = StopOnExit(baton.clone());
    let mut batch: Vec<Box<dyn Unit>> = Vec::with_capacity(GROUP_COMMIT_MAX_UNITS);
    // Ends when every Store handle (the senders) is gone.
    while let Ok(first) = receiver.recv() {
        // A caller may be running its own unit: the first message counts as queued until the
        // connection is back, so no other caller starts one meanwhile.
        let connection = baton.take();
        queued.fetch_sub(1, Ordering::SeqCst);
        take(&mut batch, first);
        while batch.len() < GROUP_COMMIT_MAX_UNITS {
            match receiver.try_recv() {
                Ok(next) => {
                    queued.fetch_sub(1, Ordering::SeqCst);
                    take(&mut batch, next);
                }
                Err(_) => break,
            }
        }
        let ((), connection) = holding(store_id, connection, || commit_batch(&mut batch));
        baton.give_back(connection);
    }
}

fn take(batch: &mut Vec<Box<dyn Unit>>, message: Message) {
    match message {
        Message::Unit(unit) => batch.push(unit),
        #[cfg(test)]
        Message::Crash => panic!("store writer crash requested by a test"),
    }
}

/// One group transaction: every unit in its own savepoint (its `write`s open them), results
/// delivered after `COMMIT`.
fn commit_batch(batch: &mut Vec<Box<dyn Unit>>) {
    let began = WRITER.with(|slot| match &*slot.borrow() {
        Some(writer) => begin(&writer.connection),
        None => Err("not a writer thread".to_owned()),
    });
    if let Err(why) = began {
        tracing::error!(error = %why, "store: cannot begin a group transaction");
        for unit in batch.drain(..) {
            unit.refuse(StoreError::GroupCommit(why.clone()));
        }
        return;
    }
    let deliveries: Vec<Box<dyn Delivery>> = batch.drain(..).filter_map(run_unit).collect();
    let committed = WRITER.with(|slot| match &*slot.borrow() {
        Some(writer) => commit(&writer.connection),
        None => Err("not a writer thread".to_owned()),
    });
    if let Err(why) = &committed {
        tracing::error!(error = %why, "store: a group transaction did not commit");
    }
    for delivery in deliveries {
        delivery.deliver(committed.as_ref().map(|_| ()).map_err(String::as_str));
    }
}

/// Runs one unit inside its own savepoint. Each `write` in it is atomic on its own (a store
/// method may keep its changes and still answer an error, e.g. `LeaseEnded`), but a panic
/// undoes everything the unit wrote; its reply is dropped, so its caller gets `Unavailable`.
fn run_unit(unit: Box<dyn Unit>) -> Option<Box<dyn Delivery>> {
    WRITER.with(|slot| {
        let slot = slot.borrow();
        let writer = slot.as_ref()?;
        let savepoint = match Savepoint::begin(&writer.connection) {
            Ok(savepoint) => savepoint,
            Err(error) => {
                unit.refuse(StoreError::GroupCommit(error.to_string()));
                return None;
            }
        };
        match catch_unwind(AssertUnwindSafe(|| unit.run())) {
            Ok(delivery) => match savepoint.release() {
                Ok(()) => Some(delivery),
                Err(error) => {
                    tracing::error!(%error, "store: cannot release a unit's savepoint");
                    delivery.deliver(Err("the unit's savepoint could not be released"));
                    None
                }
            },
            Err(panic) => {
                drop(savepoint);
                tracing::error!(panic = panic_text(&panic), "store: a unit of work panicked");
                None
            }
        }
    })
}

fn begin(connection: &Connection) -> Result<(), String> {
    match connection.is_autocommit() {
        true => connection
            .prepare_cached("BEGIN IMMEDIATE")
            .and_then(|mut statement| statement.execute([]))
            .map(|_| ())
            .map_err(|error| error.to_string()),
        false => Err("the write connection is inside a transaction".to_owned()),
    }
}

fn commit(connection: &Connection) -> Result<(), String> {
    let result = connection
        .prepare_cached("COMMIT")
        .and_then(|mut statement| statement.execute([]))
        .map(|_| ())
        .map_err(|error| error.to_string());
    if result.is_err()
        && !connection.is_autocommit()
        && let Err(error) = connection.execute_batch("ROLLBACK")
    {
        tracing::error!(%error, "store: rollback of a failed group transaction failed");
    }
    result
}

fn reader_loop(receiver: &Mutex<Receiver<Message>>, queued: &AtomicUsize) {
    loop {
        let message = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        let Ok(message) = message else {
            return;
        };
        queued.fetch_sub(1, Ordering::SeqCst);
        match message {
            Message::Unit(unit) => match catch_unwind(AssertUnwindSafe(|| unit.run())) {
                Ok(delivery) => delivery.deliver(Ok(())),
                Err(panic) => {
                    tracing::error!(panic = panic_text(&panic), "store: a read unit panicked");
                }
            },
            #[cfg(test)]
            Message::Crash => return,
        }
    }
}

fn panic_text(panic: &Box<dyn Any + Send>) -> &str {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => text,
        (None, Some(text)) => text,
        (None, None) => "non-text panic",
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Message;
    use crate::store::testing::{event, principal, store, workspace};
    use crate::store::{EventPoll, StoreError, WorkspaceLookup};

    /// A generous bound that only catches a hang; no assertion is about speed.
    const HANG: Duration = Duration::from_secs(30);

    async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
        match tokio::time::timeout(HANG, future).await {
            Ok(value) => value,
            Err(_) => panic!("a store call hung"),
        }
    }

    fn journal_len(store: &crate::store::Store, workspace_id: &str) -> usize {
        match store.poll_events(workspace_id, 0, 1_000, true) {
            Ok(EventPoll::Page { events, .. }) => events.len(),
            other => panic!("poll {workspace_id}: {other:?}"),
        }
    }

    /// Waits (bounded by `HANG`) until `count` messages wait in the writer's queue.
    async fn queued_at_least(store: &crate::store::Store, count: usize) {
        within(async {
            while store.writer().queued() < count {
                tokio::task::yield_now().await;
            }
        })
        .await;
    }

    /// Holds the writer inside one unit until released, so the calls sent meanwhile queue up
    /// and are committed together as the next batch.
    async fn hold_writer(store: &crate::store::Store) -> std::sync::mpsc::Sender<()> {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (entered, is_held) = tokio::sync::oneshot::channel();
        let holder = store.clone();
        tokio::spawn(async move {
            let unit = holder.call(move |_| {
                let _ = entered.send(());
                let _ = held.recv();
                Ok(())
            });
            let _ = unit.await;
        });
        within(is_held).await.expect("the holding unit started");
        release
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_writer_lets_the_caller_run_its_unit_under_the_same_rules() {
        let store = store();
        workspace(&store, "workspace:a", &principal("a"));
        let caller = std::thread::current().id();
        let ran_on = store
            .call(|store| {
                store.append_event(&event("workspace:a", 1))?;
                Ok(std::thread::current().id())
            })
            .await
            .expect("unit");
        assert_eq!(ran_on, caller, "nothing queued: the unit ran on the caller");
        // A panic there is `Unavailable` and undoes the unit's writes.
        let panicked = store
            .call(|store| -> Result<(), StoreError> {
                store.append_event(&event("workspace:a", 2))?;
                panic!("a bug inside a unit of work");
            })
            .await;
        assert!(
            matches!(panicked, Err(StoreError::Unavailable)),
            "{panicked:?}"
        );
        assert_eq!(journal_len(&store, "workspace:a"), 1);
        // The connection was handed back: the writer thread runs what is queued.
        let release = hold_writer(&store).await;
        let queued = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .call(|store| {
                        store.append_event(&event("workspace:a", 3))?;
                        Ok(std::thread::current().name().map(str::to_owned))
                    })
                    .await
            })
        };
        queued_at_least(&store, 1).await;
        let _ = release.send(());
        let ran_on = within(queued).await.expect("task").expect("queued unit");
        assert_eq!(
            ran_on.as_deref(),
            Some("store-writer"),
            "queued behind a held unit: the writer thread ran it"
        );
        assert_eq!(journal_len(&store, "workspace:a"), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_unit_leaves_the_rest_of_its_batch_committed() {
        let store = store();
        workspace(&store, "workspace:a", &principal("a"));
        let release = hold_writer(&store).await;
        let mut calls = Vec::new();
        for n in 0..6u64 {
            let store = store.clone();
            calls.push(tokio::spawn(async move {
                store
                    .call(move |store| match n {
                        // One write that inserts, then fails: undone to its savepoint.
                        3 => store
                            .append_events(&[event("workspace:a", n), event("workspace:gone", n)])
                            .map(|mut rows| rows.remove(0)),
                        _ => store.append_event(&event("workspace:a", n)),
                    })
                    .await
            }));
        }
        // Every call is queued behind the held unit before the writer is let go.
        queued_at_least(&store, 6).await;
        let _ = release.send(());
        let mut outcomes = Vec::new();
        for call in calls {
            let outcome = within(call).await.expect("call task");
            outcomes.push(match outcome {
                Ok(row) => format!("ok {}", row.sequence),
                Err(error) => format!("{error:?}"),
            });
        }
        let failed: Vec<_> = outcomes.iter().filter(|o| !o.starts_with("ok")).collect();
        assert_eq!(failed, ["WorkspaceNotFound"], "{outcomes:?}");
        assert_eq!(journal_len(&store, "workspace:a"), 5);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_unit_fails_alone_and_its_writes_roll_back() {
        let store = store();
        workspace(&store, "workspace:a", &principal("a"));
        let release = hold_writer(&store).await;
        let panicking = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .call(|store| -> Result<(), StoreError> {
                        store.append_event(&event("workspace:a", 1))?;
                        panic!("a bug inside a unit of work");
                    })
                    .await
            })
        };
        let healthy = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .call(|store| store.append_event(&event("workspace:a", 2)))
                    .await
            })
        };
        queued_at_least(&store, 2).await;
        let _ = release.send(());
        let panicked = within(panicking).await.expect("task");
        assert!(
            matches!(panicked, Err(StoreError::Unavailable)),
            "{panicked:?}"
        );
        let healthy = within(healthy).await.expect("task").expect("healthy unit");
        assert_eq!(
            healthy.sequence, 1,
            "the panicking unit's event was rolled back"
        );
        assert_eq!(journal_len(&store, "workspace:a"), 1);
        // The writer lives on.
        let after = store
            .call(|store| store.append_event(&event("workspace:a", 3)))
            .await;
        assert_eq!(after.expect("after").sequence, 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crashed_writer_thread_fails_calls_with_a_structured_error() {
        let store = store();
        workspace(&store, "workspace:a", &principal("a"));
        let release = hold_writer(&store).await;
        // Queued behind the held unit: a call, the crash, and a call after it.
        let before = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .call(|store| store.append_event(&event("workspace:a", 1)))
                    .await
            })
        };
        queued_at_least(&store, 1).await;
        store
            .writer()
            .send(Message::Crash)
            .expect("queue the crash");
        let queued = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .call(|store| store.append_event(&event("workspace:a", 2)))
                    .await
            })
        };
        queued_at_least(&store, 3).await;
        let _ = release.send(());
        let before = within(before).await.expect("task");
        let queued = within(queued).await.expect("task");
        assert!(matches!(before, Err(StoreError::Unavailable)), "{before:?}");
        assert!(matches!(queued, Err(StoreError::Unavailable)), "{queued:?}");
        // Later calls fail at once, never hang; reads keep working.
        let later = within(store.call(|store| store.append_event(&event("workspace:a", 3)))).await;
        assert!(matches!(later, Err(StoreError::Unavailable)), "{later:?}");
        let read =
            within(store.call_read(|store| store.get_workspace(&principal("a"), "workspace:a")))
                .await;
        assert!(matches!(read, Ok(WorkspaceLookup::Active(_))), "{read:?}");
        assert_eq!(journal_len(&store, "workspace:a"), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_is_one_call_and_a_gone_workspace_fails_alone() {
        let store = store();
        workspace(&store, "workspace:a", &principal("a"));
        let burst = vec![
            event("workspace:a", 1),
            event("workspace:gone", 2),
            event("workspace:a", 3),
        ];
        let rows = within(store.call(move |store| store.append_each(&burst)))
            .await
            .expect("burst");
        let rendered: Vec<String> = rows
            .into_iter()
            .map(|row| match row {
                Ok(row) => format!("{}", row.sequence),
                Err(error) => format!("{error:?}"),
            })
            .collect();
        assert_eq!(rendered, ["1", "WorkspaceNotFound", "2"]);
        // What a call committed is visible to the readers once it returned.
        let seen = within(store.call_read(|store| store.poll_events("workspace:a", 0, 10, true)))
            .await
            .expect("poll");
        assert!(
            matches!(&seen, EventPoll::Page { events, .. } if events.len() == 2),
            "{seen:?}"
        );
    }
}
