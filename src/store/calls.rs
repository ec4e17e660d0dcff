//! The one async entry to the store: `Store::call` (units of work that write, or read and
//! write) and `Store::call_read` (reads). Every async caller in the crate reaches the store
//! through these two methods; they own where a synchronous store call runs (a write on the
//! caller's thread when the write connection is idle, else on the store's own threads,
//! `actor.rs`; never tokio's blocking pool) and how a
//! failure to run it (a panic in the unit of work, a stopped store thread) becomes a
//! `StoreError` instead of a hang or a silent default. No SQL lives here, and nothing here
//! knows a table.

use super::actor;
use super::db::Store;
use super::error::StoreError;

impl Store {
    /// Runs `unit` (a closure over the synchronous store API) as one unit of work on the write
    /// connection: on this thread as a batch of one when nothing is queued and the connection
    /// is free, else on the writer thread inside the next group transaction; returns its result
    /// once its transaction committed. A `write` in `unit` that fails rolls back to its savepoint and leaves the
    /// other units of the batch alone. A panic inside `unit` is logged and answered with
    /// `StoreError::Unavailable`; it never unwinds into the caller's task.
    pub async fn call<T, F>(&self, unit: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        let (message, answer) = actor::call(self.clone(), unit);
        match self.writer().run_here(message) {
            Ok(()) => actor::answered(answer),
            Err(message) => {
                self.writer().send(message)?;
                actor::answer(answer).await
            }
        }
    }

    /// Runs `unit`, which only reads, on a reader thread against a pooled connection. Same
    /// failure rules as `call`. A write inside `unit` still works (through the pool, serialized
    /// with the writer by SQLite's lock) but belongs in `call`.
    pub async fn call_read<T, F>(&self, unit: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        let (message, answer) = actor::call(self.clone(), unit);
        self.readers().send(message)?;
        actor::answer(answer).await
    }
}
